"""Whole numbers in a declared code list mean their text, in a programme's classifications as in
serve.toml's inline lists: the two fronts give the same codes for the same declaration, and
refuse floats and booleans with the same words."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import protab as pt
from protab.programme import classifications as cls
from protab.programme.definition import hypercubes, read_programme
from protab.serve.classifications import CODES, declared

WORDS = "must be a list of codes (strings or whole numbers)"


def _programme(folder: Path, codes: str, dims: str = 'hsize = "size"') -> Path:
    path = folder / "programme.toml"
    path.write_text(f"""
database = "demo.duckdb"
source = "persons"
formats = ["csv"]
[ptable]
maximum_entropy = {{ D = 3, V = 1 }}
[classifications.size]
codes = {codes}
[[hypercubes]]
name = "HC"
dims = {{ {dims} }}
""", encoding="utf-8")
    return path


def programme_codes(folder: Path, codes: str) -> list[str]:
    """The codes of the programme's classification as the run builds it."""
    path = _programme(folder, codes)
    cfg = read_programme(path)
    with pt.Session(":memory:") as s:
        built = cls.build(s, cfg, hypercubes(cfg), "persons", folder)
    return built["size"].leaves


def serve_codes(codes: list) -> list[str]:
    ds = {"dims": ["hsize"], "codes": {"hsize": codes}}
    CODES.check(ds["codes"], "datasets.persons.codes")
    return declared("persons", ds, {}, Path("."), "serve.toml")["hsize"].codes


@pytest.mark.parametrize("codes", [[1, 2, 3], [3, 10, 2], ["1", 2, "x"], [-1, 0, 7], [2**40, "07"]])
def test_both_fronts_give_the_same_codes(tmp_path, codes):
    toml = "[" + ", ".join(repr(c) if isinstance(c, int) else f'"{c}"' for c in codes) + "]"
    want = [str(c) for c in codes]
    assert programme_codes(tmp_path, toml) == want
    assert serve_codes(codes) == want


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.integers(-10**12, 10**12), st.text("abcXYZ019", min_size=1, max_size=4)),
                min_size=1, max_size=8, unique_by=str))
def test_any_mix_of_texts_and_whole_numbers_reads_alike(tmp_path_factory, codes):
    toml = "[" + ", ".join(str(c) if isinstance(c, int) else f'"{c}"' for c in codes) + "]"
    folder = tmp_path_factory.mktemp("mix")
    assert programme_codes(folder, toml) == serve_codes(codes) == [str(c) for c in codes]


@pytest.mark.parametrize("codes, toml", [([1.5], "[1.5]"), ([1, 2.0], "[1, 2.0]"), ([True, 1], "[true, 1]"),
                                          ([], "[]")])
def test_floats_and_booleans_are_refused_alike(tmp_path, codes, toml):
    with pytest.raises(pt.SpecError) as prog:
        read_programme(_programme(tmp_path, toml))
    with pytest.raises(pt.SpecError) as serve:
        CODES.check({"hsize": codes}, "datasets.persons.codes")
    assert f"programme: classifications.size.codes {WORDS}" in str(prog.value)
    assert f"datasets.persons.codes.hsize {WORDS}" in str(serve.value)


def test_a_whole_number_and_its_text_are_one_code(tmp_path):
    with pytest.raises(pt.SpecError, match=r"classifications.size.codes names '1' more than once"):
        read_programme(_programme(tmp_path, '[1, "1"]'))


def test_a_programme_with_whole_number_codes_publishes_them(tmp_path, demo_database, monkeypatch):
    """The demo's household size is an INTEGER column: codes = [1, ..., 6] classify it."""
    import shutil

    monkeypatch.setenv("PROTAB_PROGRESS", "0")
    shutil.copy(demo_database, tmp_path / "demo.duckdb")
    path = _programme(tmp_path, "[1, 2, 3, 4, 5, 6]")
    pt.Programme(path).run(out=tmp_path / "out", quiet=True)
    table = pl.read_csv(tmp_path / "out" / "HC.HC.csv", infer_schema=False)
    assert table["hsize"].to_list() == ["Total", "1", "2", "3", "4", "5", "6"]
