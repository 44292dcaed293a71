"""No output of a command (publish --to, protect --out, report --out, demo --db/--out) replaces
the microdata database, its write-ahead log or an input of the request, however the path is
spelled: symbolic links, `..`, `~`. Paths are compared as real paths."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

import protab as pt
from protab import cli
from protab.errors import ProtabError

REQUEST = """\
database = "m.duckdb"
[ptable]
maximum_entropy = { D = 3, V = 1 }
[hierarchies.municipality]
parent_child = "mun.csv"
[[tables]]
name = "m_sex"
source = "persons"
dims = ["municipality", "sex"]
"""


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def folder(tmp_path, persons, monkeypatch):
    """A database with keyed persons, a request with a hierarchy file, a view over a Parquet file;
    the working folder is the request's."""
    with pt.Session(str(tmp_path / "m.duckdb")) as s:
        s.register("persons", persons)
        s.add_record_keys("persons", id_column="pid", seed="outputs-never-replace")
    persons.write_parquet(tmp_path / "more.parquet")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["register", "more", "more.parquet", "--db", "m.duckdb"]) == 0  # a view over the file
    (tmp_path / "mun.csv").write_text(
        "parent,child\n" + "".join(f"{m[:2]},{m}\n" for m in sorted(set(persons["municipality"]))),
        encoding="utf-8")
    (tmp_path / "req.toml").write_text(REQUEST, encoding="utf-8")
    (tmp_path / "dirlink").symlink_to(tmp_path)  # a symlink to the working folder
    return tmp_path


def _unchanged(folder: Path, before: dict[str, str]) -> None:
    assert {p: _digest(folder / p) for p in before} == before


def _inputs(folder: Path) -> dict[str, str]:
    return {p: _digest(folder / p) for p in ("m.duckdb", "req.toml", "mun.csv", "more.parquet")}


@pytest.mark.parametrize("to", ["dirlink/m.duckdb", "./sub/../m.duckdb", "dirlink/req.toml",
                                "dirlink/mun.csv", "more.parquet", "dirlink/m.duckdb.wal"])
def test_publish_never_replaces_an_input(folder, capsys, to):
    (folder / "sub").mkdir()
    before = _inputs(folder)
    assert cli.main(["publish", "req.toml", "--to", to, "--replace"]) == 2
    assert "would replace" in capsys.readouterr().err
    _unchanged(folder, before)


def test_publish_through_a_symlink_to_the_database_is_refused(folder, capsys):
    (folder / "alias.duckdb").symlink_to(folder / "m.duckdb")
    before = _inputs(folder)
    assert cli.main(["publish", "req.toml", "--to", "alias.duckdb", "--replace"]) == 2
    assert "the microdata database" in capsys.readouterr().err
    _unchanged(folder, before)


def test_publish_with_home_in_the_path(folder, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(folder))
    before = _inputs(folder)
    assert cli.main(["publish", "req.toml", "--to", "~/m.duckdb", "--replace"]) == 2
    _unchanged(folder, before)
    assert cli.main(["publish", "req.toml", "--to", "~/published.duckdb"]) == 0, capsys.readouterr().err
    assert (folder / "published.duckdb").is_file()


@pytest.mark.parametrize("out", ["dirlink", "alias_of_db_folder", "dirlink/../" + "x/.."])
def test_protect_refuses_an_output_folder_holding_the_database(folder, capsys, out):
    (folder / "alias_of_db_folder").symlink_to(folder)
    before = _inputs(folder)
    assert cli.main(["protect", "req.toml", "--out", out]) == 2
    err = capsys.readouterr().err
    assert "would replace" in err or "working folder" in err
    _unchanged(folder, before)


def test_protect_refuses_an_output_folder_holding_an_input(folder, tmp_path_factory, capsys):
    """The database elsewhere, the hierarchy file inside the output folder (through a symlink)."""
    out = folder / "out"
    out.mkdir()
    (out / "mun.csv").write_bytes((folder / "mun.csv").read_bytes())
    (folder / "req.toml").write_text(REQUEST.replace('"mun.csv"', '"out/mun.csv"'), encoding="utf-8")
    (folder / "outlink").symlink_to(out)
    assert cli.main(["protect", "req.toml", "--out", "outlink"]) == 2
    assert "hierarchies.municipality.parent_child" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["mun.csv"]


def test_report_never_writes_over_its_inputs(folder, capsys):
    """A report folder holding the file it reads is refused."""
    assert cli.main(["protect", "req.toml", "--out", "prot"]) == 0, capsys.readouterr().err
    (folder / "rep.toml").write_text(
        'dims = ["municipality", "sex"]\noutput = "rep"\n[original]\ntable = "persons"\ndatabase = "m.duckdb"\n'
        '[[protected]]\nlabel = "ckm"\nfile = "prot/m_sex.csv"\nvalue = "n_pert"\n', encoding="utf-8")
    capsys.readouterr()
    before = _inputs(folder)
    assert cli.main(["report", "rep.toml", "--out", "dirlink/prot"]) == 2
    assert "would replace" in capsys.readouterr().err
    assert cli.main(["report", "rep.toml", "--out", "dirlink"]) == 2
    _unchanged(folder, before)


def test_the_guard_compares_real_paths():
    from protab._io import database_files, refuse_replacing

    with pytest.raises(ProtabError, match="would replace the db"):
        refuse_replacing(os.path.join(os.getcwd(), "x", "..", "db.duckdb"),
                         [(p, "the db") for p in database_files("db.duckdb")], "out")


def test_protect_refuses_a_symlink_to_the_database_folder_as_the_folder_itself(folder, tmp_path_factory,
                                                                               monkeypatch, capsys):
    """Working elsewhere: --out the database's folder and --out an alias of it are refused alike."""
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "alias").symlink_to(folder)
    monkeypatch.chdir(elsewhere)
    before = _inputs(folder)
    for out in (str(folder), "alias", "alias/sub/.."):
        assert cli.main(["protect", str(folder / "req.toml"), "--out", out]) == 2
        assert "would replace the microdata database" in capsys.readouterr().err
    _unchanged(folder, before)
    assert not (folder / "m_sex.csv").exists()


@pytest.mark.parametrize("db, out", [("dirlink/x.duckdb", "."), ("d/x.duckdb", "dirlink/d"),
                                     ("d/x.duckdb", "alias_of_d"), ("d/sub/../x.duckdb", "d")])
def test_demo_never_puts_its_output_folder_over_its_database(folder, capsys, db, out):
    (folder / "d").mkdir()
    (folder / "d" / "keep.txt").write_text("kept", encoding="utf-8")
    (folder / "alias_of_d").symlink_to(folder / "d")
    assert cli.main(["demo", "--persons", "50", "--db", db, "--out", out]) == 2
    err = capsys.readouterr().err
    assert "would replace the demo's database" in err or "working folder" in err
    assert sorted(p.name for p in (folder / "d").iterdir()) == ["keep.txt"]
