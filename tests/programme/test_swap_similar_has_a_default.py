"""`[swap] similar` may be left out, in a programme and in a protect request alike: the default
is one profile of no column (any household of another area may be the donor), and a section
without it swaps exactly as one with the default written out, ``similar = [[]]``."""

from __future__ import annotations

import shutil

import polars as pl
from conftest import without_grid

import protab as pt
from protab.cli.protect_request import protect
from protab.request.swap_section import DEFAULT_SIMILAR
from protab.swapping import SwapSpec

SIMILAR = 'similar = [["hsize"]]\n'


def _swapped(db) -> pl.DataFrame:
    with pt.Session(str(db), read_only=True) as s:
        return s.sql("SELECT * FROM persons_swapped ORDER BY pid")


def _programme_run(workdir, name: str, similar: str | None):
    """The example programme (without its grid hypercube) with ``similar`` replaced (None: left
    out), on a copy of the database of its own; its swapped records and its outputs."""
    folder = workdir / name
    folder.mkdir()
    shutil.copy(workdir / "demo.duckdb", folder / "demo.duckdb")
    text = (workdir / "programme.toml").read_text(encoding="utf-8")
    assert SIMILAR in text
    (folder / "programme.toml").write_text(text.replace(SIMILAR, "" if similar is None else similar + "\n"),
                                           encoding="utf-8")
    without_grid(folder / "programme.toml")
    pt.Programme(folder / "programme.toml").run(out=folder / "out", quiet=True)
    files = {f.name: f.read_bytes() for f in sorted((folder / "out").iterdir()) if f.name not in ("summary.csv", "protab_run.json")}
    return _swapped(folder / "demo.duckdb"), files


def test_the_default_is_one_profile_of_no_column():
    assert DEFAULT_SIMILAR == [[]]
    assert SwapSpec("hid", ["region"], ["sex"], DEFAULT_SIMILAR).similar == ((),)


def test_a_programme_without_similar_swaps_as_with_the_default_written_out(workdir):
    left_out, files = _programme_run(workdir, "left_out", None)
    written, files_written = _programme_run(workdir, "written", "similar = [[]]")
    assert left_out.equals(written)
    assert files == files_written and len(files) > 5
    # the profile matters: matching on household size swaps other households
    by_size, _ = _programme_run(workdir, "by_size", SIMILAR.strip())
    assert not left_out.equals(by_size)
    moved = left_out.join(by_size, on="pid", suffix="_size").filter(pl.col("municipality") != pl.col("municipality_size"))
    assert moved.height > 0


def _swap_section(workdir) -> str:
    """The example programme's [swap] section, without ``similar``."""
    text = (workdir / "programme.toml").read_text(encoding="utf-8")
    section = text[text.index("[swap]"):text.index("[classifications")]
    return section.replace(SIMILAR, "")


def test_a_protect_request_without_similar_takes_the_same_default(workdir):
    request = """
database = "demo.duckdb"
output = "out"
formats = ["csv"]
[ptable]
maximum_entropy = { D = 3, V = 1 }
%s
[[tables]]
name = "municipality_sex"
source = "persons_swapped"
dims = ["municipality", "sex"]
"""
    runs = {}
    for name, similar in (("left_out", ""), ("written", "similar = [[]]\n")):
        folder = workdir / f"protect_{name}"
        folder.mkdir()
        shutil.copy(workdir / "demo.duckdb", folder / "demo.duckdb")
        (folder / "r.toml").write_text(request % (_swap_section(workdir) + similar), encoding="utf-8")
        protect(str(folder / "r.toml"))
        runs[name] = (_swapped(folder / "demo.duckdb"), (folder / "out" / "municipality_sex.csv").read_bytes())
    assert runs["left_out"][0].equals(runs["written"][0])
    assert runs["left_out"][1] == runs["written"][1]
    # the two fronts swap alike: the programme's run of the same [swap] section
    programme, _ = _programme_run(workdir, "programme", None)
    assert programme.equals(runs["left_out"][0])
