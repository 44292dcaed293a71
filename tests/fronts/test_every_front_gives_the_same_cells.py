"""The same table asked of every front of protab gives byte-identical cells (issue 38, item 1).

Fronts: ``protab protect`` (CSV, Parquet, SDMX-CSV, JSON-stat files), ``protab programme`` (the
same four formats), ``protab publish`` (the DuckDB file), ``Session.cell_key`` (the Python API)
and the service (``protab serve``: ``/v1/table`` as JSON, CSV, SDMX-CSV and JSON-stat,
``/v1/query`` and the PostgreSQL front, which answer SQL with the hierarchy's level columns).
The table and the canonical form the cells are compared in: tests/fronts/fronts_data.py. Every
pair of fronts is one named test.

Counts only: no other kind of table is asked of every front. A programme's hypercube tables take
``weight`` but not ``sums`` (programme/definition.py), and the service takes ``measures`` (sums,
means) but has no weights (serve/config.py); the magnitude tables of protect, publish and the
service are compared in tests/serve/test_serve_magnitudes_are_protected_as_protect_does.py.
"""

from __future__ import annotations

import itertools

import duckdb
import httpx
import polars as pl
import pytest

import protab as pt
from protab import cli
from tests import serve_fixtures as F
from tests.fronts import fronts_data as D

FILES = {"csv": ("csv", D.from_csv), "parquet": ("parquet", None), "sdmx-csv": ("sdmx.csv", D.from_sdmx_csv),
         "json-stat": ("stat.json", D.from_json_stat)}
FRONTS = [*(f"protect {f}" for f in FILES), *(f"programme {f}" for f in FILES), "publish", "Session",
          *(f"/v1/table {f}" for f in ("json", "csv", "sdmx-csv", "json-stat")), "/v1/query", "postgresql"]


def _files(folder, stem: str, sdmx_stem: str) -> dict[str, bytes]:
    """The canonical cells of one output folder's four files of the table."""
    out = {}
    for fmt, (ext, read) in FILES.items():
        path = folder / f"{sdmx_stem if fmt in ('sdmx-csv', 'json-stat') else stem}.{ext}"
        out[fmt] = D.from_frame(pl.read_parquet(path)) if read is None else read(path.read_bytes())
    return out


def _session(db: str) -> bytes:
    with pt.Session(db, read_only=True) as s:
        spec = pt.TableSpec({d: s.hierarchy_from_columns("persons", list(c)) for d, c in D.LEVELS.items()})
        frame = s.cell_key("persons", spec, pt.PTable.maximum_entropy(**D.PTABLE), threshold=D.THRESHOLD)
    return D.from_frame(frame)


def _service(folder, db: str) -> dict[str, bytes]:
    psycopg = pytest.importorskip("psycopg")
    server = F.Server(D.write_serve_config(folder, db), pg=True)
    out = {}
    try:
        h = {"Authorization": f"Bearer {D.TOKEN}"}
        body = {"dataset": "persons", "dims": list(D.DIMS)}
        for fmt, read in (("json", None), ("csv", D.from_csv), ("sdmx-csv", D.from_sdmx_csv),
                          ("json-stat", D.from_json_stat)):
            r = httpx.post(f"{server.url}/v1/table?format={fmt}", headers=h, json=body, timeout=60)
            assert r.status_code == 200, r.text
            t = r.json() if read is None else None
            out[f"/v1/table {fmt}"] = (D.from_frame(pl.DataFrame(t["rows"], schema=t["columns"], orient="row"))
                                       if read is None else read(r.content))
        r = httpx.post(server.url + "/v1/query", headers=h, json={"sql": D.SQL}, timeout=60)
        assert r.status_code == 200, r.text
        out["/v1/query"] = D.from_sql(r.json()["columns"], r.json()["rows"])
        with psycopg.connect(host="127.0.0.1", port=server.pg_port, dbname="protab", user="ana", password=D.TOKEN,
                             connect_timeout=10, autocommit=True) as conn:
            cur = conn.execute(D.SQL)
            out["postgresql"] = D.from_sql([c.name for c in cur.description], [list(r) for r in cur.fetchall()])
    finally:
        server.stop()
    return out


@pytest.fixture(scope="module")
def cells(tmp_path_factory, monkeypatch_module):
    folder = tmp_path_factory.mktemp("fronts")
    db = F.build_database(folder / "micro.duckdb", persons=D.PERSONS)
    request = D.write_request(folder, db)
    assert cli.main(["protect", str(request)]) == 0
    assert cli.main(["publish", str(request), "--to", str(folder / "published.duckdb")]) == 0
    assert cli.main(["programme", str(D.write_programme(folder, db))]) == 0
    out = {f"protect {k}": v for k, v in _files(folder / "protect_out", "T", "T").items()}
    out |= {f"programme {k}": v for k, v in _files(folder / "programme_out", "HC.T", "HC").items()}
    with duckdb.connect(str(folder / "published.duckdb"), read_only=True) as con:
        out["publish"] = D.from_frame(pl.from_arrow(con.sql('SELECT * FROM "T"').to_arrow_table()))
    out["Session"] = _session(db)
    out |= _service(folder, db)
    return out


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROTAB_PROGRESS", "0")
        yield mp


def test_the_table_has_margins_at_every_level_and_blank_cells(cells):
    frame = pl.read_csv(cells["protect csv"], infer_schema=False)
    assert frame.height == (1 + 3 + 12) * (1 + 4 + 20)
    assert frame.filter((pl.col("municipality") == D.TOTAL) & (pl.col("age") == D.TOTAL)).height == 1
    assert {"Q/C", "A/F"} == set(frame["flags"]), "the table has published and withheld cells"


@pytest.mark.parametrize("first, second", list(itertools.combinations(FRONTS, 2)),
                         ids=[f"{a} = {b}" for a, b in itertools.combinations(FRONTS, 2)])
def test_two_fronts_give_byte_identical_cells(cells, first, second):
    if cells[first] != cells[second]:
        a = pl.read_csv(cells[first], infer_schema=False)
        b = pl.read_csv(cells[second], infer_schema=False)
        diff = a.join(b, on=list(D.DIMS), how="full", suffix="_2", nulls_equal=True)
        pytest.fail(f"{first} and {second} differ:\n{diff.filter(pl.any_horizontal(pl.col('n_pert') != pl.col('n_pert_2'), pl.col('flags') != pl.col('flags_2'), pl.col('n_pert').is_null() != pl.col('n_pert_2').is_null())).head(10)}\n"
                    f"{cells[first][:300]!r}\n{cells[second][:300]!r}")
