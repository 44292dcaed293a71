"""The command line as a newcomer meets it: fast help with a sentence per option, tables,
macros, demo that does not overwrite, ptable show."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from protab import cli
from protab.session import DEFAULT_DATABASE


def test_help_imports_no_heavy_library():
    code = ("import sys, protab.cli\n"
            "try:\n    protab.cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print([m for m in ('duckdb', 'polars', 'numpy', 'scipy', 'matplotlib', 'pyarrow') "
            "if m in sys.modules])")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip().splitlines()[-1] == "[]"


def _parsers(p: argparse.ArgumentParser, name: str = "protab"):
    yield name, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_command_and_option_has_a_sentence():
    for name, p in _parsers(cli.build_parser()):
        assert p.description or name == "protab", f"{name} has no description"
        for action in p._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            assert action.help and len(action.help) > 8, f"{name} {action.dest} has no help"


def test_defaults_agree_with_the_library():
    assert cli.DEFAULT_DATABASE == DEFAULT_DATABASE


def test_protect_help_documents_the_request_format(capsys):
    with pytest.raises(SystemExit):
        cli.main(["protect", "--help"])
    out = capsys.readouterr().out
    for key in ("[ptable]", "[[tables]]", "dims", "formula", "threshold", "[hierarchies."):
        assert key in out


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory):
    root = tmp_path_factory.mktemp("cmds")
    db = root / "d.duckdb"
    assert cli.main(["demo", "--persons", "1500", "--db", str(db), "--out", str(root / "out")]) == 0
    return root, db


def test_tables_lists_what_the_database_holds(demo_db, capsys):
    root, db = demo_db
    capsys.readouterr()
    assert cli.main(["tables", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "persons" in out and "1,500" in out and "rkey" in out and "installed" in out
    assert "protab_ptable" not in out


def test_demo_does_not_replace_without_replace(demo_db, capsys):
    root, db = demo_db
    before = db.read_bytes()
    assert cli.main(["demo", "--persons", "10", "--db", str(db), "--out", str(root / "o2")]) == 2
    err = capsys.readouterr().err
    assert "--replace" in err and "persons" in err
    assert db.read_bytes() == before and not (root / "o2").exists()
    assert cli.main(["demo", "--persons", "1500", "--db", str(db), "--out", str(root / "o2"), "--replace"]) == 0
    assert sorted(p.name for p in (root / "o2").iterdir()) == sorted(
        [f"{t}.{f}" for t in cli.DEMO_TABLES for f in cli.FORMATS] + ["protab_run.json"])


def test_macros_prints_a_readable_path(capsys):
    assert cli.main(["macros"]) == 0
    path = capsys.readouterr().out.strip()
    assert path.endswith("protab.sql") and "CREATE" in open(path, encoding="utf-8").read()
    assert cli.main(["macros", "--read"]) == 0
    assert capsys.readouterr().out.startswith(".read '")


def test_outputs_beside_the_working_folder_and_dotdot_paths(demo_db, tmp_path, monkeypatch, capsys):
    root, db = demo_db
    monkeypatch.chdir(tmp_path)
    # a single file in the working folder is fine (only whole output folders are swapped)
    assert cli.main(["ptable", "generate", "--D", "3", "--V", "1", "--out", "p.csv"]) == 0
    assert (tmp_path / "p.csv").exists()
    (tmp_path / "req.toml").write_text(
        f'database = "{db.as_posix()}"\n[ptable]\nfile = "p.csv"\n'
        '[[tables]]\nname = "t"\nsource = "persons"\ndims = ["sex"]\n')
    # "x/.." is the working folder: refused, not copied into itself
    assert cli.main(["protect", "req.toml", "--out", "x/.."]) == 2
    assert "working folder" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.csv", "req.toml"]
    # a folder holding the database is refused too
    assert cli.main(["protect", "req.toml", "--out", str(root)]) == 2
    assert "would replace the microdata database" in capsys.readouterr().err
    assert cli.main(["protect", "req.toml", "--out", "sub/x/.."]) == 0
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["protab_run.json", "t.csv", "t.parquet"]


def test_ptable_show_prints_the_summary_and_draws_the_noise(tmp_path, capsys):
    p = tmp_path / "p.csv"
    assert cli.main(["ptable", "generate", "--D", "5", "--V", "3", "--js", "2", "--out", str(p)]) == 0
    capsys.readouterr()
    assert cli.main(["ptable", "show", str(p), "--reveal-parameters", "--png", str(tmp_path / "noise.png")]) == 0
    out = capsys.readouterr().out
    assert "D = 5, V = 3" in out and "variance" in out and "p_stay" in out and "for the office" in out
    assert (tmp_path / "noise.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_symlinked_output_folder_is_updated_through_the_link(demo_db, tmp_path, capsys):
    root, db = demo_db
    real = tmp_path / "real"
    real.mkdir()
    (real / "keep.txt").write_text("kept")
    (tmp_path / "link").symlink_to(real)
    (tmp_path / "r.toml").write_text(
        f'database = "{db.as_posix()}"\noutput = "link"\n[ptable]\nmaximum_entropy = {{ D = 3, V = 1 }}\n'
        '[[tables]]\nname = "t"\nsource = "persons"\ndims = ["sex"]\n')
    for _ in range(2):
        assert cli.main(["protect", str(tmp_path / "r.toml")]) == 0
    assert (tmp_path / "link").is_symlink()
    assert sorted(p.name for p in real.iterdir()) == ["keep.txt", "protab_run.json", "t.csv", "t.parquet"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "r.toml", "real"]


def test_a_failing_protect_leaves_the_database_byte_identical(demo_db, tmp_path, capsys):
    root, db = demo_db
    before = db.read_bytes()
    (tmp_path / "r.toml").write_text(
        f'database = "{db.as_posix()}"\n[ptable]\nmaximum_entropy = {{ D = 3, V = 1 }}\n'
        '[[tables]]\nname = "t"\nsource = "persons"\ndims = ["sex", "nope"]\n')
    assert cli.main(["protect", str(tmp_path / "r.toml"), "--out", str(tmp_path / "o")]) == 2
    assert db.read_bytes() == before


def test_warnings_are_one_line(tmp_path, capsys):
    assert cli.main(["ptable", "generate", "--D", "3", "--V", "2", "--out", str(tmp_path / "p.csv")]) == 0
    err = capsys.readouterr().err
    assert err.startswith("protab: warning: p-table") and "cli.py" not in err and len(err.splitlines()) == 1


def test_a_disk_error_is_one_line_with_exit_1(monkeypatch, tmp_path, capsys):
    def full(*a, **k):
        raise OSError(28, "No space left on device", str(tmp_path / "p.csv"))

    monkeypatch.setattr("protab.ptable.PTable.write", full)
    assert cli.main(["ptable", "generate", "--D", "3", "--V", "1", "--out", str(tmp_path / "p.csv")]) == 1
    err = capsys.readouterr().err
    assert err == f"protab: error: No space left on device ({tmp_path / 'p.csv'})\n"
