"""``protab audit`` on what ``protab protect`` wrote: linked tables of one source audited
together, a CSV of risky cells and a summary per table, and D nowhere in the output."""

from __future__ import annotations

import polars as pl
import pytest

from protab import cli


@pytest.fixture
def protected(run_outputs):
    """The shared run of tests/audit/conftest.py: (its folder, database, request)."""
    return run_outputs["root"], run_outputs["db"], run_outputs["req"]


def test_audit_writes_risky_cells_and_a_summary_per_table(protected, capsys):
    root, db, req = protected
    capsys.readouterr()
    report = root / "risky.csv"
    # every inner cell (region × sex) is published itself, so its interval is at most 2D = 6 wide:
    # with --max-width 6 all 8 × 2 inner cells are reported, and nothing wider is
    assert cli.main(["audit", str(req), "--db", str(db), "--tables", str(root / "out"),
                     "--report", str(report), "--max-width", "6"]) == 0
    out = capsys.readouterr().out
    for name in ("region_sex", "region", "(inner cells of persons)"):
        assert name in out
    risky = pl.read_csv(report, infer_schema=False)
    assert {"table", "region", "sex", "lo", "up", "width", "disclosed", "small", "risky"} <= set(risky.columns)
    assert risky.filter(pl.col("table").is_null()).height == 16
    narrow = risky["width"].cast(pl.Int64) <= 6
    small = (risky["small"] == "true") & (risky["lo"].cast(pl.Int64) >= 1) & (risky["up"].cast(pl.Int64) <= 2)
    assert (narrow | small).all() and (risky["risky"] == "true").all()


def test_the_audit_reads_csv_tables_as_parquet_ones(protected, capsys, tmp_path):
    root, db, req = protected
    reports = {}
    for fmt in ("csv", "parquet"):
        folder = tmp_path / fmt
        folder.mkdir()
        for name in ("region_sex", "region"):
            (folder / f"{name}.{fmt}").write_bytes((root / "out" / f"{name}.{fmt}").read_bytes())
        (folder / "protab_run.json").write_bytes((root / "out" / "protab_run.json").read_bytes())
        reports[fmt] = tmp_path / f"{fmt}.csv"
        assert cli.main(["audit", str(req), "--db", str(db), "--tables", str(folder),
                         "--report", str(reports[fmt]), "--max-width", "4"]) == 0
    assert reports["csv"].read_bytes() == reports["parquet"].read_bytes()


def test_a_missing_table_is_named(protected, capsys, tmp_path):
    root, db, req = protected
    for name in ("region.csv", "protab_run.json"):
        (tmp_path / name).write_bytes((root / "out" / name).read_bytes())
    assert cli.main(["audit", str(req), "--db", str(db), "--tables", str(tmp_path)]) == 2
    assert "region_sex" in capsys.readouterr().err


def test_d_from_the_environment_is_never_printed(protected, capsys, monkeypatch, tmp_path):
    root, db, req = protected
    monkeypatch.setenv("AUDIT_D", "3")
    report = tmp_path / "r.csv"
    capsys.readouterr()
    assert cli.main(["audit", str(req), "--db", str(db), "--tables", str(root / "out"), "--D-env", "AUDIT_D",
                     "--report", str(report)]) == 0
    out = capsys.readouterr()
    assert "D" not in out.out.replace("DuckDB", "") and "3" not in out.err
    monkeypatch.setenv("AUDIT_D", "three")
    assert cli.main(["audit", str(req), "--db", str(db), "--tables", str(root / "out"), "--D-env", "AUDIT_D",
                     "--report", str(report)]) == 2
    assert "AUDIT_D" in capsys.readouterr().err
