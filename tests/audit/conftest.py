"""One small protect run and its publish, shared by the audit's tests (copied where a test alters them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from audit_fixtures import TWO_TABLES

from protab import cli


@pytest.fixture(scope="session")
def run_outputs(tmp_path_factory) -> dict[str, Path]:
    """A demo database of 300 persons, a request of two linked tables, its protect output folder
    ``out`` and its published database ``published.duckdb``."""
    root = tmp_path_factory.mktemp("audit_run")
    db = root / "d.duckdb"
    assert cli.main(["demo", "--persons", "300", "--db", str(db), "--out", str(root / "demo")]) == 0
    req = root / "req.toml"
    req.write_text(TWO_TABLES, encoding="utf-8")
    assert cli.main(["protect", str(req), "--db", str(db), "--out", str(root / "out")]) == 0
    assert cli.main(["publish", str(req), "--db", str(db), "--to", str(root / "published.duckdb")]) == 0
    return {"root": root, "db": db, "req": req, "out": root / "out", "published": root / "published.duckdb"}
