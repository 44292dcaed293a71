"""margins=False: the flat crosstab of all dimensions alone, as the ONS cell key package
publishes it; refused where it cannot mean that."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import protab as pt
from protab import cli

DATA = pl.DataFrame({
    "pid": list(range(31)),
    "a": (["x", "y", "z"] * 11)[:31],
    "b": (["p", "q"] * 16)[:31],
})


@pytest.fixture
def s():
    with pt.Session(":memory:") as s:
        s.register("t", DATA.with_columns(pl.when(pl.col("pid") < 6).then(pl.lit("x")).otherwise(pl.lit("a")).alias("a")))
        s.add_record_keys("t", "pid", "margins-test-seed")
        yield s


def test_only_the_crossing_is_published(s):
    full = s.tabulate("t", pt.TableSpec({"a": None, "b": None}))
    flat = s.tabulate("t", pt.TableSpec({"a": None, "b": None}, margins=False))
    expect = full.filter((pl.col("a_level") == 1) & (pl.col("b_level") == 1))
    assert flat.equals(expect)
    assert "Total" not in flat["a"].to_list() + flat["b"].to_list()
    assert flat["n"].sum() == DATA.height


def test_empty_cells_follow_drop_empty(s):
    # a = "x" only with pid < 6, so every (x, ·) and (a, ·) combination has records; add an unused code
    spec = pt.TableSpec({"a": ["a", "x", "w"], "b": None}, margins=False)
    out = s.tabulate("t", spec)
    assert out.height == 3 * 2 and out.filter(pl.col("a") == "w")["n"].to_list() == [0, 0]
    dropped = s.tabulate("t", pt.TableSpec({"a": ["a", "x", "w"], "b": None}, margins=False, drop_empty=True))
    assert dropped.height == 4


def test_cell_key_and_model_matrix(s):
    spec = pt.TableSpec({"a": None, "b": None}, margins=False)
    p = pt.PTable.maximum_entropy(D=3, V=1)
    ck = s.cell_key("t", spec, p, original=True)
    full = s.cell_key("t", pt.TableSpec({"a": None, "b": None}), p, original=True)
    inner = full.filter((pl.col("a_level") == 1) & (pl.col("b_level") == 1))
    assert ck.equals(inner)  # the same cell keys give the same noise with or without margins
    X, inner_cells, published = s.model_matrix("t", spec)
    assert X.shape == (inner_cells.height, published.height)
    np.testing.assert_array_equal(X.toarray(), np.eye(published.height))


@pytest.mark.parametrize("kwargs, message", [
    ({"formula": "a*b"}, "leave out formula"),
    ({"crossings": [["a", "b"]]}, "leave out formula"),
    ({"margins": "no"}, "margins must be True or False"),
])
def test_refused(kwargs, message):
    with pytest.raises(pt.SpecError, match=message):
        pt.TableSpec({"a": None, "b": None}, **{"margins": False, **kwargs})


def test_hierarchies_are_refused():
    h = pt.Hierarchy.from_parent_child([("Total", "G"), ("G", "x"), ("G", "y"), ("Total", "a")])
    with pytest.raises(pt.SpecError, match="flat dimensions only"):
        pt.TableSpec({"a": h, "b": None}, margins=False)


def test_protect_request_with_margins_false(tmp_path):
    db = tmp_path / "d.duckdb"
    cli.demo(1000, str(db), str(tmp_path / "demo"), "m-seed", formats=("csv",))
    (tmp_path / "r.toml").write_text(
        f'database = "{db.as_posix()}"\nformats = ["csv"]\n[ptable]\nmaximum_entropy = {{ D = 3, V = 1 }}\n'
        '[[tables]]\nname = "flat"\nsource = "persons"\ndims = ["region", "sex"]\nmargins = false\n')
    assert cli.main(["protect", str(tmp_path / "r.toml"), "--out", str(tmp_path / "out")]) == 0
    out = pl.read_csv(tmp_path / "out" / "flat.csv")
    assert set(out["sex"]) == {"F", "M"} and "Total" not in out["region"].to_list()
    assert set(out["region_level"]) == {1} and set(out["sex_level"]) == {1}
