"""A small demo database for the programme tests (made once), copied for each test, and the
example programme of examples/census_programme/ pointed at the copy."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "census_programme" / "programme.toml"
PERSONS = 1500


@pytest.fixture(scope="session")
def demo_database(tmp_path_factory) -> Path:
    from protab import cli

    folder = tmp_path_factory.mktemp("programme_demo")
    db = folder / "demo.duckdb"
    assert cli.main(["demo", "--persons", str(PERSONS), "--db", str(db), "--out", str(folder / "out"),
                     "--seed", "programme-test-seed"]) == 0
    return db


@pytest.fixture
def workdir(tmp_path, demo_database, monkeypatch) -> Path:
    """A folder with ``demo.duckdb`` (a fresh copy) and the example as ``programme.toml`` reading it."""
    shutil.copy(demo_database, tmp_path / "demo.duckdb")
    text = EXAMPLE.read_text(encoding="utf-8").replace('database = "../../protab.duckdb"', 'database = "demo.duckdb"')
    assert 'database = "demo.duckdb"' in text
    (tmp_path / "programme.toml").write_text(text, encoding="utf-8")
    monkeypatch.setenv("SWAP_SEED", "programme-swap-seed")
    monkeypatch.setenv("PROTAB_PROGRESS", "0")
    return tmp_path


def read_outputs(out: Path) -> dict[tuple[str, str], pl.DataFrame]:
    """The CSV tables of a programme's output folder by (hypercube, table); codes as text."""
    frames = {}
    for f in sorted(out.glob("*.csv")):
        if f.name == "summary.csv":
            continue
        cube, table, _ = f.name.split(".")
        frames[cube, table] = pl.read_csv(f, infer_schema=False)
    return frames


def without_grid(path: Path) -> None:
    """Leave out the example's last hypercube (1 km squares), for tests that run a programme often."""
    text = path.read_text(encoding="utf-8")
    cut = text.index('[[hypercubes]]\nname = "HC04"')
    path.write_text(text[:cut], encoding="utf-8")
