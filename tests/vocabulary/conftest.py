"""A small demo database for the vocabulary tests (made once), copied into each test's folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

PERSONS = 1500


@pytest.fixture(scope="session")
def demo_database(tmp_path_factory) -> Path:
    from protab import cli

    folder = tmp_path_factory.mktemp("vocabulary_demo")
    db = folder / "demo.duckdb"
    assert cli.main(["demo", "--persons", str(PERSONS), "--db", str(db), "--out", str(folder / "out"),
                     "--seed", "vocabulary-test-seed"]) == 0
    return db


@pytest.fixture
def workdir(tmp_path, demo_database, monkeypatch) -> Path:
    """A folder with ``demo.duckdb`` (a fresh copy), progress lines off."""
    shutil.copy(demo_database, tmp_path / "demo.duckdb")
    monkeypatch.setenv("PROTAB_PROGRESS", "0")
    return tmp_path


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
