"""``protab programme --engine postgres`` (issue 39): the example census programme (its swap,
three hypercubes, nine tables) computed in a PostgreSQL database gives DuckDB's files byte for
byte, the records read from the Parquet file of the persons and their record keys from the
DuckDB database; a resumed run on PostgreSQL keeps what the first one finished."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

import protab as pt
from protab.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "census_programme" / "programme.toml"


@pytest.fixture(scope="module")
def census(tmp_path_factory) -> Path:
    """The demo database (1,500 persons), persons.parquet beside it, the example programme without
    its grid hypercube reading them."""
    folder = tmp_path_factory.mktemp("pg_programme")
    assert main(["demo", "--persons", "1500", "--db", str(folder / "demo.duckdb"), "--out", str(folder / "demo_out"),
                 "--seed", "pg-programme-seed"]) == 0
    with pt.Session(str(folder / "demo.duckdb"), read_only=True) as s:
        s.con.execute(f"COPY persons TO '{folder / 'persons.parquet'}' (FORMAT parquet)")
    text = EXAMPLE.read_text(encoding="utf-8").replace('database = "../../protab.duckdb"', 'database = "demo.duckdb"')
    text = text[:text.index('[[hypercubes]]\nname = "HC04"')]
    (folder / "programme.toml").write_text(text, encoding="utf-8")
    return folder


def _files(out: Path) -> dict[str, bytes]:
    """The output files but the run's manifest, summary.csv without its timings."""
    files = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.name not in ("protab_run.json", "summary.csv")}
    files["summary"] = pl.read_csv(out / "summary.csv").drop("seconds").write_csv().encode()
    return files


def test_a_programme_on_postgres_writes_duckdbs_files(census, pg_dsn, monkeypatch, tmp_path):
    monkeypatch.setenv("SWAP_SEED", "programme-swap-seed")
    monkeypatch.setenv("PROTAB_PROGRESS", "0")
    duck_db = tmp_path / "copy.duckdb"
    shutil.copy(census / "demo.duckdb", duck_db)  # the DuckDB run keeps its swap in its own copy
    programme = str(census / "programme.toml")
    assert main(["programme", programme, "--db", str(duck_db), "--out", str(tmp_path / "duck")]) == 0
    assert main(["programme", programme, "--out", str(tmp_path / "pg"), "--engine", "postgres",
                 "--pg-dsn", pg_dsn]) == 0
    duck, pg = _files(tmp_path / "duck"), _files(tmp_path / "pg")
    assert len(duck) == 9 and pg == duck  # eight tables and the summary
    with pt.Session.postgres(pg_dsn) as s:
        assert "persons_swapped" in s.tables()  # the swapped copy kept in PostgreSQL, as DuckDB keeps it


def test_programme_engine_flags_belong_to_their_engine(census, capsys, monkeypatch):
    assert main(["programme", str(census / "programme.toml"), "--pg-dsn", "host=x"]) == 2
    assert "programme: --pg-dsn needs --engine postgres (the engine is duckdb)" in capsys.readouterr().err
    monkeypatch.delenv("PROTAB_PG_DSN", raising=False)
    assert main(["programme", str(census / "programme.toml"), "--engine", "postgres"]) == 2
    assert "programme --engine postgres needs the database: pass --pg-dsn DSN" in capsys.readouterr().err
