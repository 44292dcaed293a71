"""One magnitude table through every front — ``protab protect`` (CSV and Parquet), ``protab
publish``, ``/v1/table``, ``/v1/query`` and the PostgreSQL front — gives the same perturbed counts,
sums and means, number for number: the service takes the same sensitivity rules as a protect
request (``[datasets.<name>.sensitivity]`` = protect's ``[rules]``), sensitive cells get the same
extra noise, means divide by the perturbed count of the records holding a value
(``null_sums = "omit"``), and sums and means are rounded to the declared decimals on every front.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import duckdb
import httpx
import numpy as np
import polars as pl
import pytest

import protab as pt
from protab import cli
from tests import serve_fixtures as F

SEED = "fronts-agree-seed-51c"
TOKEN = "tok-fronts-agree-9a1"
NACE = ["A", "B", "C", "D"]
SIZE = ["L", "M", "S"]
PTABLE = 'maximum_entropy = { D = 4, V = 2, js = 2 }'
MAGNITUDE = """ptable = { maximum_entropy = { D = 10, V = 3, step = 2, icat = [1, 5, 10], optim = 4 } }
fp = 500
mu_c = 3
decimals = 1
"""
RULES = """p_percent = 10
dominance = [[1, 70]]
"""
SQL = ("SELECT nace, size, count(*) AS n, sum(turnover) AS s, avg(turnover) AS m FROM firms "
       "GROUP BY CUBE(nace, size)")


def _database(path: Path) -> str:
    """firms: a skewed turnover (two cells one firm dominates), 4 % of it missing; keyed."""
    rng = np.random.default_rng(11)
    n = 1500
    turnover = np.round(rng.pareto(1.1, n) * 2000, 2)
    turnover[rng.random(n) < 0.04] = np.nan
    nace, size = rng.choice(NACE, n), rng.choice(SIZE, n, p=[.1, .3, .6])
    giants = np.flatnonzero((size == "L") & np.isin(nace, ["A", "D"]))[:2]
    turnover[giants] = 5e7  # one firm dominates its cell (and its row's and column's margins)
    firms = pl.DataFrame({"fid": np.arange(n), "nace": nace, "size": size, "turnover": pl.Series(turnover).fill_nan(None)})
    with pt.Session(str(path)) as s:
        s.register("firms_in", firms)
        s.con.execute("CREATE TABLE firms AS SELECT * FROM firms_in")
        s.add_record_keys("firms", id_column="fid", seed=SEED)
    return str(path)


def _request(folder: Path, db: str) -> Path:
    path = folder / "request.toml"
    path.write_text(f"""database = "{db}"
output = "out"
formats = ["csv", "parquet"]
[ptable]
{PTABLE}
[[tables]]
name = "firms_by_nace_and_size"
source = "firms"
dims = ["nace", "size"]
sums = ["turnover"]
null_sums = "omit"
threshold = 3
[magnitude]
{MAGNITUDE}
[rules]
{RULES}""", encoding="utf-8")
    return path


def _serve_config(folder: Path, db: str, *, rules: bool = True) -> Path:
    path = folder / ("serve.toml" if rules else "serve-norules.toml")
    sensitivity = f"[datasets.firms.sensitivity]\n{RULES}" if rules else ""
    path.write_text(f"""database = "{db}"
audit_log = "audit{'' if rules else '-norules'}.jsonl"
threshold = 3
min_population = 1
sessions = 2
threads = 1
[ptable]
{PTABLE}
[datasets.firms]
dims = ["nace", "size"]
measures = ["turnover"]
null_sums = "omit"
codes = {{ nace = {NACE!r}, size = {SIZE!r} }}
[datasets.firms.magnitude]
{MAGNITUDE}
{sensitivity}
[users.ana]
datasets = ["firms"]
token_sha256 = "{hashlib.sha256(TOKEN.encode()).hexdigest()}"
""".replace("'", '"'), encoding="utf-8")
    return path


def _cells(frame: pl.DataFrame) -> dict[tuple[str, str], tuple]:
    """(nace, size) → (n_pert, sum, mean), margins as "Total"."""
    return {(r[0], r[1]): tuple(r[2:]) for r in frame.select(
        "nace", "size", "n_pert", "turnover_pert", "turnover_mean_pert").iter_rows()}


def _from_sql(rows: list) -> dict[tuple[str, str], tuple]:
    return {(r[0] or "Total", r[1] or "Total"): (r[2], r[3], r[4]) for r in rows}


@pytest.fixture(scope="module")
def fronts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fronts")
    db = _database(folder / "firms.duckdb")
    request = _request(folder, db)
    assert cli.main(["protect", str(request)]) == 0
    assert cli.main(["publish", str(request), "--to", str(folder / "published.duckdb")]) == 0
    out = {"protect csv": _cells(pl.read_csv(folder / "out" / "firms_by_nace_and_size.csv", infer_schema=False)
                                 .with_columns(pl.col("n_pert").cast(pl.Int64),
                                               pl.col("turnover_pert", "turnover_mean_pert").cast(pl.Float64))),
           "protect parquet": _cells(pl.read_parquet(folder / "out" / "firms_by_nace_and_size.parquet"))}
    with duckdb.connect(str(folder / "published.duckdb"), read_only=True) as con:
        out["publish"] = _cells(pl.from_arrow(con.sql("SELECT * FROM firms_by_nace_and_size").to_arrow_table()))
    psycopg = pytest.importorskip("psycopg")
    plain = F.Server(_serve_config(folder, db, rules=False))
    server = F.Server(_serve_config(folder, db), pg=True)
    try:
        h = {"Authorization": f"Bearer {TOKEN}"}
        body = {"dataset": "firms", "dims": ["nace", "size"], "measure": "turnover"}
        table = httpx.post(server.url + "/v1/table", headers=h, json=body, timeout=60)
        assert table.status_code == 200, table.text
        t = table.json()
        out["/v1/table"] = _cells(pl.DataFrame(t["rows"], schema=t["columns"], orient="row"))
        query = httpx.post(server.url + "/v1/query", headers=h, json={"sql": SQL}, timeout=60)
        assert query.status_code == 200, query.text
        out["/v1/query"] = _from_sql(query.json()["rows"])
        with psycopg.connect(host="127.0.0.1", port=server.pg_port, dbname="protab", user="ana", password=TOKEN,
                             connect_timeout=10, autocommit=True) as conn:
            out["postgresql"] = _from_sql([list(r) for r in conn.execute(SQL).fetchall()])
        unruled = httpx.post(plain.url + "/v1/table", headers=h, json=body, timeout=60).json()
        out["no rules"] = _cells(pl.DataFrame(unruled["rows"], schema=unruled["columns"], orient="row"))
    finally:
        server.stop()
        plain.stop()
    with pt.Session(db, read_only=True) as s:
        spec = pt.TableSpec({"nace": None, "size": None}, sums=["turnover"], null_sums="omit")
        verdicts = s.sensitivity("firms", spec, pt.SensitivityRules(p_percent=10, dominance=[(1, 70)]))
    out["sensitive"] = {(r[0], r[1]) for r in verdicts.filter(pl.col("turnover_sensitive")).select("nace", "size").rows()}
    return out


@pytest.mark.parametrize("front", ["protect parquet", "publish", "/v1/table", "/v1/query", "postgresql"])
def test_every_front_publishes_the_same_counts_sums_and_means(fronts, front):
    assert set(fronts[front]) == set(fronts["protect csv"])
    for cell, values in fronts["protect csv"].items():
        got = fronts[front][cell]
        assert [None if v is None else float(v) for v in got] == [None if v is None else float(v) for v in values], cell


def test_the_service_gives_sensitive_cells_the_extra_noise_protect_gives(fronts):
    sensitive = fronts["sensitive"]
    assert sensitive and len(sensitive) < len(fronts["protect csv"]), "the table has sensitive and safe cells"
    ruled, plain = fronts["/v1/table"], fronts["no rules"]
    published = [c for c in sensitive if ruled[c][1] is not None]
    assert any(ruled[c][1] != plain[c][1] for c in published), "mu_c moved no sensitive cell"
    safe = [c for c in ruled if c not in sensitive]
    assert all(ruled[c] == plain[c] for c in safe), "a cell no rule marks got other noise"


def test_sums_and_means_are_rounded_to_the_declared_decimals_everywhere(fronts):
    for front in ("protect csv", "publish", "/v1/table", "/v1/query", "postgresql"):
        values = [float(v) for cell in fronts[front].values() for v in cell[1:] if v is not None]
        assert values and all(math.isclose(v * 10, round(v * 10), abs_tol=1e-6) for v in values), front


def test_omit_means_are_not_the_sum_over_every_record(fronts):
    rows = [v for v in fronts["/v1/table"].values() if v[2] is not None and v[2] != 0]
    ratios = [s / m for _, s, m in rows]
    assert any(abs(r - n) > 0.5 for (n, _, _), r in zip(rows, ratios)), "every mean divided by n_pert"


# -- the sections checked at start-up, as a protect request checks them --------------------------
def _config_with(tmp_path: Path, db: str, old: str, new: str) -> Path:
    path = _serve_config(tmp_path, db)
    path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    return path


def test_sensitivity_without_a_magnitude_section_stops_the_service(tmp_path):
    from protab.errors import SpecError
    from protab.serve.config import load_config

    path = _config_with(tmp_path, ":memory:", "[datasets.firms.magnitude]\n" + MAGNITUDE, "")
    with pytest.raises(SpecError, match=r"datasets\.firms\.sensitivity .*needs \[datasets\.firms\.magnitude\]"):
        load_config(path)


def test_decimals_of_an_unknown_measure_are_refused_by_the_service_and_by_protect(tmp_path, capsys):
    from protab.errors import SpecError
    from protab.serve.config import load_config

    path = _config_with(tmp_path, ":memory:", "decimals = 1", "decimals = { turnovr = 0 }")
    with pytest.raises(SpecError, match="decimals names 'turnovr', not among the sums"):
        load_config(path)
    db = _database(tmp_path / "firms.duckdb")
    request = _request(tmp_path, db)
    request.write_text(request.read_text(encoding="utf-8").replace("decimals = 1", "decimals = { turnovr = 0 }"),
                       encoding="utf-8")
    assert cli.main(["protect", str(request)]) == 2
    assert "[magnitude] decimals names 'turnovr', not among the sums" in capsys.readouterr().err


def test_a_holding_that_is_not_a_column_stops_the_service(tmp_path):
    from protab.errors import SpecError
    from protab.serve.broker import Broker
    from protab.serve.config import load_config

    db = _database(tmp_path / "firms.duckdb")
    path = _config_with(tmp_path, db, "p_percent = 10", 'p_percent = 10\nholding = "group"')
    with pytest.raises(SpecError, match="holding 'group' is not a column of table 'firms'"):
        Broker(load_config(path))


def test_rules_by_holding_are_applied_from_the_records(tmp_path):
    """With ``holding`` the contributors are groups of records: the service reads the records (key
    sums cannot hold groups) and answers as Session.cell_key with the same rules."""
    from protab.serve.broker import Broker
    from protab.serve.config import load_config

    db = _database(tmp_path / "firms.duckdb")
    with pt.Session(db) as s:
        s.con.execute("ALTER TABLE firms ADD COLUMN grp VARCHAR")
        s.con.execute("UPDATE firms SET grp = 'g' || CAST(fid % 40 AS VARCHAR)")
    path = _config_with(tmp_path, db, "p_percent = 10", 'p_percent = 10\nholding = "grp"')
    cfg = load_config(path)
    broker = Broker(cfg)
    try:
        answer = broker.table({"dataset": "firms", "dims": ["nace", "size"], "measure": "turnover"}, cfg.users["ana"])
    finally:
        broker.close()
    rules = pt.SensitivityRules(p_percent=10, dominance=[(1, 70)], holding="grp")
    with pt.Session(db, read_only=True) as s:
        spec = pt.TableSpec({"nace": pt.Hierarchy.flat(NACE), "size": pt.Hierarchy.flat(SIZE)}, sums=["turnover"],
                            null_sums="omit")
        m = broker.datasets["firms"].magnitude
        want = s.cell_key("firms", spec, pt.PTable.maximum_entropy(D=4, V=2, js=2), threshold=3, magnitude=m,
                          rules=rules)
        grouped = s.sensitivity("firms", spec, rules)["turnover_sensitive"].sum()
        plain = s.sensitivity("firms", spec, pt.SensitivityRules(p_percent=10, dominance=[(1, 70)]))
    assert grouped != plain["turnover_sensitive"].sum(), "the holding changes which cells are sensitive"
    assert _cells(answer.frame) == _cells(want)
