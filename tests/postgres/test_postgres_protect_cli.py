"""``protab protect --engine postgres --pg-dsn DSN`` (issue 39, item 4): the request's sources
are tables of the PostgreSQL database, or Parquet files copied into temporary tables, and the
output files are byte for byte the DuckDB engine's (a swap's too); what the engine does not
support yet is its SpecError before any file is written; bad flags, a missing DSN and a DSN that does not connect
are one protab error on stderr that never shows the DSN's password."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

import protab as pt
from protab.cli import main, protect, publish
from protab.errors import InputError

SEED = "postgres-protect-cli"
PASSWORD = "s3cret-pg-pw"
N = 400
_rng = np.random.default_rng(3904)
RECORDS = pl.DataFrame({
    "pid": np.arange(1, N + 1),
    "muni": _rng.choice(["0101", "0102", "0201", "0202", "0203"], N),
    "sex": _rng.choice(["f", "m"], N),
    "age": _rng.choice(["0-17", "18-64", "65+"], N),
    "w": _rng.integers(1, 6, N),
})

COUNTS = """
database = "micro.duckdb"
formats = ["csv", "parquet", "sdmx-csv", "json-stat"]
[ptable]
maximum_entropy = { D = 3, V = 2, js = 1 }
[hierarchies.muni]
code_lengths = [2, 2]
[[tables]]
name = "muni_sex"
source = "census"
dims = ["muni", "sex", "age"]
formula = "muni*sex + age"
threshold = 2
[[tables]]
name = "weighted"
source = "census"
dims = ["muni", "sex"]
weight = "w"
"""

SUPPRESSION = """
database = "micro.duckdb"
formats = ["csv", "parquet"]
[hierarchies.muni]
code_lengths = [2, 2]
[[tables]]
name = "suppressed"
source = "census"
dims = ["muni", "sex", "age"]
method = "suppression"
min_frequency = 12
"""

SUMS = """
database = "micro.duckdb"
formats = ["csv"]
[ptable]
maximum_entropy = { D = 3, V = 2, js = 1 }
[[tables]]
name = "counts_first"
source = "census"
dims = ["sex"]
[[tables]]
name = "w_sums"
source = "census"
dims = ["muni", "sex"]
sums = ["w"]
[magnitude]
ptable = { maximum_entropy = { D = 10, V = 3, step = 2, icat = [1, 5, 10], optim = 4 } }
fp = 20
"""


def _census(folder: Path, request: str) -> Path:
    """micro.duckdb with the keyed records as table census, census.parquet, request.toml."""
    with pt.Session(str(folder / "micro.duckdb")) as s:
        s.register("census", RECORDS)
        s.add_record_keys("census", id_column="pid", seed=SEED)
        s.con.execute(f"COPY census TO '{folder / 'census.parquet'}' (FORMAT parquet)")
    (folder / "request.toml").write_text(request)
    return folder / "request.toml"


@pytest.fixture(scope="module")
def pg_census(pg_dsn, tmp_path_factory) -> str:
    """The module's database with table census: the keyed records, key column rkey included."""
    folder = tmp_path_factory.mktemp("pg_census")
    _census(folder, "")
    with pt.Session.postgres(pg_dsn) as s:
        s.register("census", str(folder / "census.parquet"))
    return pg_dsn


def _same_files(a: Path, b: Path) -> list[str]:
    """The files of two output folders (without each run's manifest), byte for byte the same."""
    names = sorted(p.name for p in a.iterdir() if p.name != "protab_run.json")
    assert names == sorted(p.name for p in b.iterdir() if p.name != "protab_run.json")
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    return names


def _tables(dsn: str) -> list[str]:
    with pt.Session.postgres(dsn) as s:
        return s.tables()


def test_count_tables_from_a_database_table_are_duckdbs_files(tmp_path, pg_census):
    request = _census(tmp_path, COUNTS)
    protect(str(request), out=str(tmp_path / "duck"))
    rows = protect(str(request), out=str(tmp_path / "pg"), engine="postgres", pg_dsn=pg_census)
    names = _same_files(tmp_path / "duck", tmp_path / "pg")
    assert names == ["muni_sex.csv", "muni_sex.parquet", "muni_sex.sdmx.csv", "muni_sex.stat.json",
                     "weighted.csv", "weighted.parquet", "weighted.sdmx.csv", "weighted.stat.json"]
    assert [r["table"] for r in rows] == ["muni_sex", "weighted"] and rows[0]["cells"] > 20
    assert "w_pert" in (tmp_path / "pg" / "weighted.csv").read_text().splitlines()[0]
    assert (tmp_path / "pg" / "protab_run.json").is_file()


def test_parquet_sources_are_copied_in_for_the_run_only(tmp_path, pg_server):
    """A database without the source: its Parquet file (--pg-data) in a temporary table, record
    keys from --pg-keys (no DuckDB database), nothing left in the database after."""
    request = _census(tmp_path, COUNTS)
    protect(str(request), out=str(tmp_path / "duck"))
    (tmp_path / "lake").mkdir()
    (tmp_path / "census.parquet").rename(tmp_path / "lake" / "census.parquet")
    (tmp_path / "micro.duckdb").unlink()
    empty = pg_server.new_database()
    protect(str(request), out=str(tmp_path / "pg"), engine="postgres", pg_dsn=empty, pg_keys="rkey:4294967296",
            pg_data=str(tmp_path / "lake"))
    _same_files(tmp_path / "duck", tmp_path / "pg")
    assert _tables(empty) == []
    with pytest.raises(InputError, match=r"source 'census' is neither a table of postgres \(host 127\.0\.0\.1, "
                                         r"port \d+, database t_\w+\) nor the Parquet file .*--pg-data FOLDER"):
        protect(str(request), out=str(tmp_path / "pg2"), engine="postgres", pg_dsn=empty, pg_keys="rkey:4294967296")
    assert not (tmp_path / "pg2").exists()


def test_count_suppression_from_the_environments_dsn_is_duckdbs(tmp_path, pg_census, monkeypatch, capsys):
    request = _census(tmp_path, SUPPRESSION)
    protect(str(request), out=str(tmp_path / "duck"))
    monkeypatch.setenv("PROTAB_PG_DSN", pg_census)
    assert main(["protect", str(request), "--engine", "postgres", "--out", str(tmp_path / "pg")]) == 0
    assert pl.read_csv(tmp_path / "pg" / "suppressed.csv")["n"].null_count() > 3  # primary and secondary cells
    assert _same_files(tmp_path / "duck", tmp_path / "pg") == ["suppressed.csv", "suppressed.parquet"]
    assert pg_census not in capsys.readouterr().out


def _fails(argv: list[str], capsys) -> str:
    """The error of a run that must fail as a protab error: exit code 2, its last line on stderr
    (after any warning of the p-table), no traceback."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("protab: error: ")
    return last


def test_sums_with_the_cell_key_method_for_magnitudes_are_duckdbs_files(tmp_path, pg_census):
    request = _census(tmp_path, SUMS)
    protect(str(request), out=str(tmp_path / "duck"))
    protect(str(request), out=str(tmp_path / "pg"), engine="postgres", pg_dsn=pg_census)
    assert _same_files(tmp_path / "duck", tmp_path / "pg") == ["counts_first.csv", "w_sums.csv"]
    lines = (tmp_path / "pg" / "w_sums.csv").read_text().splitlines()
    assert lines[0] == "muni,sex,muni_level,sex_level,n_pert,w_pert,w_mean_pert" and len(lines) > 10


def test_the_swap_then_its_tables_are_duckdbs_files(tmp_path, pg_census, monkeypatch):
    """[swap] writes the swapped records as a table of the PostgreSQL database (with their
    record keys), and the tables read from it are DuckDB's files byte for byte."""
    request = _census(tmp_path, COUNTS.replace('source = "census"', 'source = "census_swapped"').replace(
        "[[tables]]", """[swap]
source = "census"
out = "census_swapped"
household = "pid"
geography = ["muni"]
risk_variables = ["age"]
similar = [[]]
swap_rate = 0.1
seed_env = "PROTAB_SWAP_SEED"
[[tables]]""", 1))
    monkeypatch.setenv("PROTAB_SWAP_SEED", "swap-seed")
    protect(str(request), out=str(tmp_path / "duck"))
    assert main(["protect", str(request), "--engine", "postgres", "--pg-dsn", pg_census,
                 "--out", str(tmp_path / "pg")]) == 0
    assert len(_same_files(tmp_path / "duck", tmp_path / "pg")) == 8
    assert "census_swapped" in _tables(pg_census)
    with pt.Session(str(tmp_path / "micro.duckdb")) as duck, pt.Session.postgres(pg_census) as pg:
        d, p = (s.sql("SELECT pid, muni FROM census_swapped").sort("pid") for s in (duck, pg))
    assert d.equals(p) and (d["muni"] != RECORDS.sort("pid")["muni"]).sum() > 0  # swapped, as on DuckDB


def test_pg_flags_need_engine_postgres_and_spark_flags_engine_spark(tmp_path, capsys):
    request = _census(tmp_path, COUNTS)
    dsn = f"host=127.0.0.1 user=protab password={PASSWORD}"
    err = _fails(["protect", str(request), "--pg-dsn", dsn], capsys)
    assert "protect: --pg-dsn needs --engine postgres (the engine is duckdb)" in err and PASSWORD not in err
    err = _fails(["protect", str(request), "--engine", "spark", "--pg-keys", "rkey:4294967296"], capsys)
    assert "--pg-keys needs --engine postgres (the engine is spark)" in err
    err = _fails(["protect", str(request), "--engine", "postgres", "--pg-dsn", dsn, "--spark-keys", "rkey:16"], capsys)
    assert "need --engine spark (given: --spark-keys; the engine is postgres)" in err and PASSWORD not in err
    assert not (tmp_path / "protab_output").exists()


def test_a_missing_dsn_names_the_flag_and_the_variable(tmp_path, capsys, monkeypatch):
    request = _census(tmp_path, COUNTS)
    monkeypatch.delenv("PROTAB_PG_DSN", raising=False)
    err = _fails(["protect", str(request), "--engine", "postgres"], capsys)
    assert "protect --engine postgres needs the database: pass --pg-dsn DSN or set PROTAB_PG_DSN" in err
    monkeypatch.setenv("PROTAB_PG_DSN", "  ")  # set but blank: as missing
    assert "--pg-dsn DSN or set PROTAB_PG_DSN" in _fails(["protect", str(request), "--engine", "postgres"], capsys)


def test_a_dsn_that_does_not_connect_names_host_and_port_never_the_password(tmp_path, capsys, monkeypatch):
    from postgres_fixtures import _free_port

    pytest.importorskip("psycopg")
    request = _census(tmp_path, COUNTS)
    port = _free_port()  # nothing listens there
    uri = f"postgresql://protab:{PASSWORD}@127.0.0.1:{port}/census"
    err = _fails(["protect", str(request), "--engine", "postgres", "--pg-dsn", uri, "--out", str(tmp_path / "pg")],
                 capsys)
    assert f"cannot connect to PostgreSQL at host 127.0.0.1, port {port}, database census" in err
    assert PASSWORD not in err and uri not in err
    monkeypatch.setenv("PROTAB_PG_DSN", f"host=127.0.0.1 port={port} user=protab password={PASSWORD} dbname=census")
    err = _fails(["protect", str(request), "--engine", "postgres", "--out", str(tmp_path / "pg")], capsys)
    assert f"port {port}" in err and PASSWORD not in err
    assert not (tmp_path / "pg").exists()


def test_help_names_the_flag_and_the_environment_variable(capsys):
    with pytest.raises(SystemExit):
        main(["protect", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--engine {duckdb,spark,postgres}" in out and "--pg-dsn DSN" in out and "$PROTAB_PG_DSN" in out


def test_publish_on_postgres_writes_duckdbs_protected_tables(tmp_path, pg_census, capsys):
    """``protab publish --engine postgres``: the tables computed in PostgreSQL, the published
    DuckDB file holding the same tables and catalogue as a DuckDB run's (the run ids aside)."""
    request = _census(tmp_path, COUNTS)
    publish(str(request), str(tmp_path / "duck.duckdb"))
    assert main(["publish", str(request), "--to", str(tmp_path / "pg.duckdb"), "--engine", "postgres",
                 "--pg-dsn", pg_census]) == 0
    assert pg_census not in capsys.readouterr().out
    with pt.Session(str(tmp_path / "duck.duckdb"), read_only=True) as duck, \
            pt.Session(str(tmp_path / "pg.duckdb"), read_only=True) as pg:
        for name in ("muni_sex", "weighted", "protab_catalog"):
            d, p = (s.sql(f"SELECT * FROM {name}") for s in (duck, pg))
            assert d.height > 0 and p.sort(p.columns).equals(d.sort(d.columns)), name


def test_publish_takes_the_engine_flags_of_its_engine_only(tmp_path, capsys):
    request = _census(tmp_path, COUNTS)
    err = _fails(["publish", str(request), "--to", str(tmp_path / "p.duckdb"), "--pg-dsn", "host=x"], capsys)
    assert "publish: --pg-dsn needs --engine postgres (the engine is duckdb)" in err
    assert not (tmp_path / "p.duckdb").exists()
