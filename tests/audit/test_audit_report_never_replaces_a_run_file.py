"""``protab audit --report`` refuses, before any work, a path that is an input (the records'
database, the request), a published table or database, a file inside a run's output folder, a
folder, or a file in a folder that does not exist; and a report is written whole or not at all."""

from __future__ import annotations

import pytest
from audit_runs import audit

from protab import cli


@pytest.mark.parametrize("where, words", [
    (lambda r: r["db"], "the microdata database"),
    (lambda r: r["req"], "the request file"),
    (lambda r: r["out"] / "region.csv", "the folder of the published tables"),
    (lambda r: r["out"] / "new_report.csv", "the folder of the published tables"),
    (lambda r: r["out"], "is a folder"),
    (lambda r: r["root"] / "missing" / "r.csv", "does not exist"),
])
def test_a_report_path_of_the_run_is_refused_in_one_line(run_outputs, capsys, where, words):
    target = where(run_outputs)
    before = target.read_bytes() if target.is_file() else None
    assert audit(run_outputs, run_outputs["out"], target) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert (target.read_bytes() if target.is_file() else None) == before
    assert not (run_outputs["out"] / "new_report.csv").exists()


def test_a_report_inside_another_runs_output_folder_is_refused(run_outputs, tmp_path, capsys):
    other = tmp_path / "other_run"
    assert cli.main(["protect", str(run_outputs["req"]), "--db", str(run_outputs["db"]), "--out", str(other)]) == 0
    capsys.readouterr()
    assert audit(run_outputs, run_outputs["out"], other / "region.csv") == 2
    assert "an output folder of a protab run" in capsys.readouterr().err


def test_the_published_database_is_never_replaced_by_a_report(run_outputs, capsys):
    pub = run_outputs["published"]
    before = pub.read_bytes()
    assert audit(run_outputs, pub, pub) == 2
    assert "the published database" in capsys.readouterr().err
    assert pub.read_bytes() == before


def test_a_failed_audit_leaves_an_earlier_report_as_it_was(run_outputs, tmp_path, capsys, monkeypatch):
    report = tmp_path / "r.csv"
    assert audit(run_outputs, run_outputs["out"], report, "--max-width", "6") == 0
    before = report.read_bytes()
    monkeypatch.setenv("AUDIT_D", "0")
    assert audit(run_outputs, run_outputs["out"], report, "--D-env", "AUDIT_D") == 2
    assert report.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["r.csv"]  # no temporary file left beside it
