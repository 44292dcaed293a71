"""``protab audit`` reads the tables as an attacker finds them, and refuses in one line what
cannot be the tables of one run: a folder without the run's manifest, a table changed since
its run, tables of two runs, tables whose shared cells differ, garbage tables, and a noise
bound D under which no true table fits (D itself never shown)."""

from __future__ import annotations

import polars as pl
import pytest
from audit_runs import audit, copy_out, resign

from protab import cli


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1
    return err


def test_a_folder_without_a_manifest_is_refused_with_how_to_rerun(run_outputs, tmp_path, capsys):
    folder = copy_out(run_outputs, tmp_path / "out")
    (folder / "protab_run.json").unlink()
    assert audit(run_outputs, folder, tmp_path / "r.csv") == 2
    err = _error(capsys)
    assert "protab_run.json" in err and "run protab protect" in err
    assert not (tmp_path / "r.csv").exists()


def test_a_table_modified_since_its_run_is_refused(run_outputs, tmp_path, capsys):
    folder = copy_out(run_outputs, tmp_path / "out")
    (folder / "region.parquet").unlink()
    text = (folder / "region.csv").read_text(encoding="utf-8").splitlines()
    text[2] = ",".join(text[2].split(",")[:-1] + ["99"])
    (folder / "region.csv").write_text("\n".join(text) + "\n", encoding="utf-8")
    assert audit(run_outputs, folder, tmp_path / "r.csv") == 2
    err = _error(capsys)
    assert "region.csv" in err and "modified since the run" in err


def test_tables_of_two_runs_are_refused(run_outputs, tmp_path, capsys):
    folder = copy_out(run_outputs, tmp_path / "out")
    one = tmp_path / "one.toml"  # a later run of the region table alone into the same folder
    text = run_outputs["req"].read_text(encoding="utf-8")
    one.write_text(text[: text.index("[[tables]]")] + text[text.index('[[tables]]\nname = "region"\n'):],
                   encoding="utf-8")
    assert cli.main(["protect", str(one), "--db", str(run_outputs["db"]), "--out", str(folder)]) == 0
    capsys.readouterr()
    assert audit(run_outputs, folder, tmp_path / "r.csv") == 2
    err = _error(capsys)
    assert "'region_sex'" in err and "'region'" in err and "different runs" in err


def test_tables_whose_shared_cells_differ_are_refused_naming_the_pair_and_a_cell(run_outputs, tmp_path, capsys):
    folder = copy_out(run_outputs, tmp_path / "out")
    (folder / "region.parquet").unlink()
    frame = pl.read_csv(folder / "region.csv", infer_schema=False)
    frame = frame.with_columns(pl.when(pl.col("region") == "R1").then(pl.lit("1000")).otherwise(pl.col("n_pert"))
                               .alias("n_pert"))
    frame.write_csv(folder / "region.csv")
    resign(folder, "region.csv")
    assert audit(run_outputs, folder, tmp_path / "r.csv") == 2
    err = _error(capsys)
    assert "'region_sex' and 'region'" in err and "region = 'R1'" in err and "1000" in err


@pytest.mark.parametrize("text, words", [
    ('region,region_level,n_pert\n"R1,1,5\n', "cannot be read"),
    ("region,n_pert\nTotal,300\n", "lacks the column(s) 'region_level'"),
    ("region,region_level,n_pert\nTotal,0,lots\n", "column 'n_pert' of table 'region' holds 'lots'"),
    ("region,region_level,n_pert\nTotal,top,300\n", "column 'region_level' of table 'region' holds 'top'"),
    ("region,region_level,n_pert\n", "table 'region' has no rows"),
    ("region,region_level,n_pert\nTotal,0,292.5\n", "column 'n_pert' of table 'region' holds 292.5"),
    ("region,region_level,n_pert\nTotal,0,-4\n", "whole numbers of 0 or more"),
])
def test_a_garbage_table_is_a_one_line_error(run_outputs, tmp_path, capsys, text, words):
    folder = copy_out(run_outputs, tmp_path / "out")
    (folder / "region.parquet").unlink()
    (folder / "region.csv").write_text(text, encoding="utf-8")
    resign(folder, "region.csv")
    assert audit(run_outputs, folder, tmp_path / "r.csv") == 2
    err = _error(capsys)
    assert words in err


def test_a_noise_bound_that_cannot_have_made_the_tables_is_named_without_showing_it(run_outputs, tmp_path, capsys,
                                                                                  monkeypatch):
    monkeypatch.setenv("AUDIT_D", "0")  # the tables were made with D = 3: with D = 0 the margins do not add up
    assert audit(run_outputs, run_outputs["out"], tmp_path / "r.csv", "--D-env", "AUDIT_D") == 2
    err = _error(capsys)
    assert "not consistent with noise bound D: wrong D or altered tables" in err
    assert "0" not in err.replace("'", " ").split("noise bound D")[1]


def test_a_csv_edited_beside_its_untouched_parquet_is_refused(run_outputs, tmp_path, capsys):
    # the audit reads the Parquet copy; the CSV an analyst opens must be the run's too
    folder = copy_out(run_outputs, tmp_path / "out")
    text = (folder / "region.csv").read_text(encoding="utf-8").splitlines()
    text[2] = ",".join(text[2].split(",")[:-1] + ["999"])
    (folder / "region.csv").write_text("\n".join(text) + "\n", encoding="utf-8")
    assert audit(run_outputs, folder, tmp_path / "r.csv") == 2
    err = _error(capsys)
    assert "region.csv" in err and "modified since the run" in err



def test_the_records_database_given_as_tables_is_refused_without_advising_to_overwrite_it(run_outputs, tmp_path,
                                                                                          capsys):
    assert audit(run_outputs, run_outputs["db"], tmp_path / "r.csv") == 2
    err = _error(capsys)
    assert "database of the records" in err and "--replace" not in err


@pytest.mark.parametrize("name", ["../region.csv", "/etc/passwd"])
def test_a_manifest_naming_files_outside_its_folder_is_refused(run_outputs, tmp_path, capsys, name):
    import json

    folder = copy_out(run_outputs, tmp_path / "out")
    manifest = json.loads((folder / "protab_run.json").read_text(encoding="utf-8"))
    manifest["files"][name] = dict(manifest["files"]["region.csv"])
    (folder / "protab_run.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert audit(run_outputs, folder, tmp_path / "r.csv") == 2
    assert "not names inside its folder" in _error(capsys)
