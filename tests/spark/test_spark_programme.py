"""``protab programme --engine spark`` (issue 39, item 1): the example census programme (its swap,
three hypercubes, eight tables) computed on Spark gives DuckDB's files byte for byte, the
persons read from their Parquet file and their record keys from the DuckDB database."""

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
def spark(tmp_path_factory):
    from spark_fixtures import spark_fixture

    yield from spark_fixture(tmp_path_factory, "protab-spark-programme", cores=2)


def _files(out: Path) -> dict[str, bytes]:
    """The output files but the run's manifest, summary.csv without its timings."""
    files = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.name not in ("protab_run.json", "summary.csv")}
    files["summary"] = pl.read_csv(out / "summary.csv").drop("seconds").write_csv().encode()
    return files


def test_a_programme_on_spark_writes_duckdbs_files(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("SWAP_SEED", "programme-swap-seed")
    monkeypatch.setenv("PROTAB_PROGRESS", "0")
    assert main(["demo", "--persons", "1500", "--db", str(tmp_path / "demo.duckdb"), "--out",
                 str(tmp_path / "demo_out"), "--seed", "spark-programme-seed"]) == 0
    with pt.Session(str(tmp_path / "demo.duckdb"), read_only=True) as s:
        s.con.execute(f"COPY persons TO '{tmp_path / 'persons.parquet'}' (FORMAT parquet)")
    text = EXAMPLE.read_text(encoding="utf-8").replace('database = "../../protab.duckdb"', 'database = "demo.duckdb"')
    (tmp_path / "programme.toml").write_text(text[:text.index('[[hypercubes]]\nname = "HC04"')], encoding="utf-8")
    shutil.copy(tmp_path / "demo.duckdb", tmp_path / "copy.duckdb")
    programme = str(tmp_path / "programme.toml")
    assert main(["programme", programme, "--db", str(tmp_path / "copy.duckdb"), "--out", str(tmp_path / "duck")]) == 0
    assert main(["programme", programme, "--out", str(tmp_path / "spark"), "--engine", "spark"]) == 0
    duck, on_spark = _files(tmp_path / "duck"), _files(tmp_path / "spark")
    assert len(duck) == 9 and on_spark == duck  # eight tables and the summary
    assert "persons_swapped" in {t.name for t in spark.catalog.listTables()}  # the swap: a view of the session
