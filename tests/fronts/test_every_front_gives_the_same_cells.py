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
FORMATS = {"json": None, "csv": D.from_csv, "sdmx-csv": D.from_sdmx_csv, "json-stat": D.from_json_stat}
FRONTS = [*(f"protect {f}" for f in FILES), *(f"programme {f}" for f in FILES), "publish", "Session",
          *(f"/v1/table {f}" for f in FORMATS), "/v1/query", "postgresql"]
PAIRS = [(case, a, b) for case in D.CASES for a, b in itertools.combinations(FRONTS, 2)]


def _files(case: D.Case, folder, stem: str, sdmx_stem: str) -> dict[str, bytes]:
    """The canonical cells of one table's four files in an output folder."""
    out = {}
    for fmt, (ext, read) in FILES.items():
        path = folder / f"{sdmx_stem if fmt in ('sdmx-csv', 'json-stat') else stem}.{ext}"
        out[fmt] = D.from_frame(case, pl.read_parquet(path)) if read is None else read(case, path.read_bytes())
    return out


def _session(case: D.Case, db: str) -> bytes:
    with pt.Session(db, read_only=True) as s:
        declared = {"sex": pt.Hierarchy.flat(D.SEX_CODES)}
        spec = pt.TableSpec({d: s.hierarchy_from_columns("persons", list(c)) if len(c) > 1 else declared.get(d)
                             for d, c in zip(case.flat_dims, case.levels.values())},
                            formula=case.flat_formula, null_code=case.null_code)
        frame = s.cell_key("persons", spec, pt.PTable.maximum_entropy(**D.PTABLE), threshold=D.THRESHOLD)
    return D.from_frame(case, frame)


def _body(case: D.Case) -> dict:
    """The /v1/table request of the case's table."""
    body = {"dataset": "persons", "dims": list(case.dims), "formula": case.formula, "levels": case.cut}
    return {k: v for k, v in body.items() if v}


def _table(case: D.Case, url: str, h: dict[str, str]) -> dict[str, bytes]:
    """/v1/table of the case's table in every format."""
    out = {}
    for fmt, read in FORMATS.items():
        r = httpx.post(f"{url}/v1/table?format={fmt}", headers=h, json=_body(case),
                       timeout=60)
        assert r.status_code == 200, r.text
        if read is None:
            t = r.json()
            out[f"/v1/table {fmt}"] = D.from_frame(case, pl.DataFrame(t["rows"], schema=t["columns"], orient="row"))
        else:
            out[f"/v1/table {fmt}"] = read(case, r.content)
    return out


def _service(folder, db: str) -> dict[str, dict[str, bytes]]:
    psycopg = pytest.importorskip("psycopg")
    server = F.Server(D.write_serve_config(folder, db), pg=True)
    out: dict[str, dict[str, bytes]] = {}
    try:
        h = {"Authorization": f"Bearer {D.TOKEN}"}
        with psycopg.connect(host="127.0.0.1", port=server.pg_port, dbname="protab", user="ana", password=D.TOKEN,
                             connect_timeout=10, autocommit=True) as conn:
            for case in D.CASES.values():
                out[case.name] = _table(case, server.url, h)
                r = httpx.post(server.url + "/v1/query", headers=h, json={"sql": case.sql}, timeout=60)
                assert r.status_code == 200, r.text
                out[case.name]["/v1/query"] = D.from_sql(case, r.json()["columns"], r.json()["rows"])
                cur = conn.execute(case.sql)
                out[case.name]["postgresql"] = D.from_sql(case, [c.name for c in cur.description],
                                                          [list(r) for r in cur.fetchall()])
    finally:
        server.stop()
    return out


@pytest.fixture(scope="module")
def cells(tmp_path_factory, monkeypatch_module):
    """case name -> front -> the canonical cells of the case's table."""
    folder = tmp_path_factory.mktemp("fronts")
    db = D.build_database(folder / "micro.duckdb")
    request = D.write_request(folder, db)
    assert cli.main(["protect", str(request)]) == 0
    assert cli.main(["publish", str(request), "--to", str(folder / "published.duckdb")]) == 0
    assert cli.main(["programme", str(D.write_programme(folder, db))]) == 0
    served = _service(folder, db)
    out = {}
    with duckdb.connect(str(folder / "published.duckdb"), read_only=True) as con:
        for name, case in D.CASES.items():
            out[name] = {f"protect {k}": v for k, v in _files(case, folder / "protect_out", name, name).items()}
            out[name] |= {f"programme {k}": v for k, v in
                          _files(case, folder / "programme_out", f"HC{name}.{name}", f"HC{name}").items()}
            published = pl.from_arrow(con.sql(f'SELECT * FROM "{name}"').to_arrow_table())
            out[name] |= {"publish": D.from_frame(case, published), "Session": _session(case, db), **served[name]}
    return out


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROTAB_PROGRESS", "0")
        yield mp


def test_the_tables_have_margins_at_every_level_blank_cells_and_the_null_code(cells):
    ages = pl.read_csv(cells["T"]["protect csv"], infer_schema=False)
    assert ages.height == (1 + 3 + 12) * (1 + 4 + 20)
    assert ages.filter((pl.col("municipality") == D.TOTAL) & (pl.col("age") == D.TOTAL)).height == 1
    assert {"Q/C", "A/F"} == set(ages["flags"]), "the table has published and withheld cells"
    sexes = pl.read_csv(cells["N"]["protect csv"], infer_schema=False)
    assert set(sexes["sex"]) == {*D.SEX_CODES, D.TOTAL}
    assert set(sexes.filter(pl.col("sex") == "X")["n_pert"].fill_null("")) <= {"0", ""}, "no record is of sex X"
    crossed = pl.read_csv(cells["F"]["protect csv"], infer_schema=False)
    assert crossed.filter((pl.col("sex") != D.TOTAL) & (pl.col("age") != D.TOTAL)).is_empty(), "no sex x age cell"
    assert pl.read_csv(cells["L"]["protect csv"], infer_schema=False).height == (1 + 3) * (1 + 4)


def _differences(first: bytes, second: bytes, dims: tuple[str, ...]) -> pl.DataFrame:
    a, b = (pl.read_csv(x, infer_schema=False) for x in (first, second))
    joined = a.join(b, on=list(dims), how="full", suffix="_2", nulls_equal=True, coalesce=True)
    return joined.filter(pl.any_horizontal(*(pl.col(c).eq_missing(pl.col(f"{c}_2")).not_()
                                             for c in ("n_pert", "flags"))))


@pytest.mark.parametrize("case, first, second", PAIRS, ids=[f"{c}: {a} = {b}" for c, a, b in PAIRS])
def test_two_fronts_give_byte_identical_cells(cells, case, first, second):
    got = cells[case]
    if got[first] != got[second]:
        diff = _differences(got[first], got[second], D.CASES[case].dims)
        pytest.fail(f"{first} and {second} differ in {diff.height} cells:\n{diff.head(12)}")


@pytest.mark.parametrize("change", ["a value", "a blank", "a total written _T", "a float count"])
def test_the_canonical_form_keeps_what_a_front_could_get_wrong(cells, change):
    """The comparison would see a front that differs in one cell: the form normalises only what
    the formats define (SDMX's and JSON-stat's ``_T``), not a tabular front's total code, nor
    the type of a count."""
    case = D.CASES["T"]
    frame = pl.read_csv(cells["T"]["protect csv"], schema_overrides={"n_pert": pl.Int64}).drop("flags")
    first = pl.col("n_pert").is_not_null() & (pl.int_range(pl.len()) == pl.col("n_pert").is_not_null().arg_max())
    changed = {
        "a value": frame.with_columns(pl.when(first).then(pl.col("n_pert") + 1).otherwise(pl.col("n_pert"))),
        "a blank": frame.with_columns(pl.when(first).then(None).otherwise(pl.col("n_pert")).alias("n_pert")),
        "a total written _T": frame.with_columns(pl.col("age").replace(D.TOTAL, "_T")),
        "a float count": frame.with_columns(pl.col("n_pert").cast(pl.Float64)),
    }[change]
    assert D.from_frame(case, frame) == cells["T"]["protect csv"]
    assert D.from_frame(case, changed) != cells["T"]["protect csv"]
