"""``protab audit`` reads what ``protab publish`` and ``protab programme`` wrote: a published
database gives the report its protect folder gives, every hypercube of a programme is
audited, and cells that two hypercubes share must be published alike."""

from __future__ import annotations

import shutil

import duckdb
import polars as pl
import pytest
from audit_runs import audit, resign

from protab import cli

PROGRAMME = '''
database = "{db}"
output = "prog_out"
formats = ["csv"]
source = "persons"
[ptable]
maximum_entropy = {{ D = 3, V = 1 }}
[classifications.geo]
columns = ["region", "municipality"]
levels = ["nuts2", "lau"]
[classifications.sex]
codes = ["F", "M"]
[[hypercubes]]
name = "HC01"
dims = {{ municipality = "geo:nuts2", sex = "sex" }}
[[hypercubes.tables]]
name = "region_sex"
[[hypercubes.tables]]
name = "region"
dims = ["municipality"]
[[hypercubes]]
name = "HC02"
dims = {{ municipality = "geo:lau" }}
'''


def test_a_published_database_is_audited_as_its_protect_folder(run_outputs, tmp_path, capsys):
    reports = {}
    for kind in ("out", "published"):
        reports[kind] = tmp_path / f"{kind}.csv"
        assert audit(run_outputs, run_outputs[kind], reports[kind], "--max-width", "6") == 0
    assert reports["out"].read_bytes() == reports["published"].read_bytes()
    assert pl.read_csv(reports["published"]).height > 0


def test_a_table_changed_in_a_published_database_is_refused(run_outputs, tmp_path, capsys):
    pub = tmp_path / "p.duckdb"
    shutil.copy(run_outputs["published"], pub)
    with duckdb.connect(str(pub)) as con:
        con.execute("UPDATE region SET n_pert = n_pert + 1 WHERE region = 'R1'")
    assert audit(run_outputs, pub, tmp_path / "r.csv") == 2
    err = capsys.readouterr().err
    assert "table 'region'" in err and "modified since the run" in err and len(err.strip().splitlines()) == 1


def test_a_published_database_without_its_run_table_is_refused(run_outputs, tmp_path, capsys):
    pub = tmp_path / "p.duckdb"
    shutil.copy(run_outputs["published"], pub)
    with duckdb.connect(str(pub)) as con:
        con.execute("DROP TABLE protab_run")
    assert audit(run_outputs, pub, tmp_path / "r.csv") == 2
    err = capsys.readouterr().err
    assert "protab_run" in err and "publish again" in err
    (tmp_path / "garbage.duckdb").write_bytes(b"not a database")
    assert audit(run_outputs, tmp_path / "garbage.duckdb", tmp_path / "r.csv") == 2
    assert "cannot be opened as a DuckDB database" in capsys.readouterr().err


@pytest.fixture(scope="module")
def programme(run_outputs, tmp_path_factory):
    folder = tmp_path_factory.mktemp("audit_programme")
    path = folder / "programme.toml"
    path.write_text(PROGRAMME.format(db=run_outputs["db"]), encoding="utf-8")
    assert cli.main(["programme", str(path)]) == 0
    return path


def test_every_hypercube_of_a_programme_is_audited(programme, capsys):
    capsys.readouterr()
    report = programme.parent / "report.csv"
    assert cli.main(["audit", str(programme), "--report", str(report), "--max-width", "6"]) == 0
    out = capsys.readouterr().out
    for name in ("(inner cells of HC01)", "HC01.region_sex", "HC01.region", "(inner cells of HC02)", "HC02.HC02"):
        assert name in out
    risky = pl.read_csv(report, infer_schema=False)
    # every inner cell is published itself, so every interval is at most 2D = 6 wide
    assert set(risky["table"].drop_nulls()) == {"HC01.region_sex", "HC01.region", "HC02.HC02"}


def test_hypercubes_whose_shared_cells_differ_are_refused(programme, tmp_path, capsys):
    folder = tmp_path / "prog_out"
    shutil.copytree(programme.parent / "prog_out", folder)
    frame = pl.read_csv(folder / "HC02.HC02.csv", infer_schema=False)
    frame = frame.with_columns(pl.when(pl.col("municipality_level") == "0").then(pl.lit("7")).otherwise(
        pl.col("n_pert")).alias("n_pert"))
    frame.write_csv(folder / "HC02.HC02.csv")
    resign(folder, "HC02.HC02.csv")
    capsys.readouterr()
    assert cli.main(["audit", str(programme), "--tables", str(folder), "--report", str(tmp_path / "r.csv")]) == 2
    err = capsys.readouterr().err
    assert "'HC02.HC02'" in err and "different values" in err and "municipality = 'Total'" in err
