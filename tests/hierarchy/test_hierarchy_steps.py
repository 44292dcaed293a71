"""The named steps a Hierarchy is built and written with (protab.hierarchy._tree, _graph,
_readers, _writers), each on a small input whose result is worked out by hand."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from protab.errors import HierarchyError
from protab.hierarchy import Hierarchy
from protab.hierarchy._build import build
from protab.hierarchy._graph import graph_parts
from protab.hierarchy._readers import code_length_links, hrc_links, pair_links
from protab.hierarchy._tree import _depths, level_sorted, tree_parts
from protab.hierarchy._writers import hrc_text


def test_depths_give_levels_and_find_the_codes_on_a_cycle():
    level, on_cycle, n_bad = _depths(np.array([-1, 0, 1, 1], dtype=np.int64))
    assert level.tolist() == [0, 1, 2, 2] and on_cycle.size == 0 and n_bad == 0
    # 1 -> 2 -> 1 is a cycle and 3 hangs below it; 0 is a root
    _, on_cycle, n_bad = _depths(np.array([-1, 2, 1, 1], dtype=np.int64))
    assert sorted(on_cycle.tolist()) == [1, 2] and n_bad == 3


def test_level_sorted_renumbers_parents_and_keeps_input_order_within_a_level():
    codes = pl.Series("code", ["T", "x", "A"])  # x (level 2) before A (level 1) in the input
    parts = level_sorted(codes, np.array([-1, 2, 0]), np.array([0, 2, 1]))
    assert parts.code.to_list() == ["T", "A", "x"]
    assert parts.parent.tolist() == [-1, 0, 1] and parts.level.tolist() == [0, 1, 2]
    assert parts.links is None


def test_tree_parts_add_a_total_above_several_top_codes():
    df = pl.DataFrame({"parent": ["A", "A", "B"], "child": ["a1", "a2", "b1"]})
    parts = tree_parts(df, root=None, source="links", default_root="Total")
    assert parts.code.to_list() == ["Total", "A", "B", "a1", "a2", "b1"]
    assert parts.parent.tolist() == [-1, 0, 0, 1, 1, 2]
    assert parts.level.tolist() == [0, 1, 1, 2, 2, 2]


def test_tree_parts_refuse_a_root_that_has_a_parent():
    df = pl.DataFrame({"parent": ["A", "Q"], "child": ["x", "A"]})
    with pytest.raises(HierarchyError, match="the root 'A' also appears as a child"):
        tree_parts(df, root="A", source="links", default_root="Total")


def test_graph_parts_add_the_total_of_all_leaves_when_no_top_code_is_one():
    # EU = Europe - nonEU: no code without parent counts every leaf once, so Total is added
    df = pl.DataFrame(
        {"parent": ["Europe", "Europe", "EU", "EU"], "child": ["DE", "NO", "Europe", "NO"], "sign": [1, 1, 1, -1]},
        schema_overrides={"sign": pl.Int8},
    )
    parts = graph_parts(df, root=None, source="links", default_root="Total")
    assert parts.code[0] == "Total" and set(parts.code.to_list()) == {"Total", "EU", "Europe", "DE", "NO"}
    level = dict(zip(parts.code.to_list(), parts.level.tolist()))
    assert level == {"Total": 0, "EU": 1, "Europe": 2, "DE": 3, "NO": 3}
    child, parent, sign = parts.links
    names = parts.code.to_list()
    assert sorted((names[c], names[p], int(s)) for c, p, s in zip(child, parent, sign)) == [
        ("DE", "Europe", 1), ("Europe", "EU", 1), ("NO", "EU", -1), ("NO", "Europe", 1)
    ]


def test_build_gives_the_parts_the_classmethods_wrap():
    p, c, g = pair_links([("A", "a"), ("A", "b")], "parent", "child", None)
    assert g is None
    parts = build(p, c, root=None, source="pairs", default_root="Total")
    assert Hierarchy._new(*parts) == Hierarchy.from_parent_child([("A", "a"), ("A", "b")])


def test_readers_give_the_links_of_positional_codes_and_hrc_text():
    p, c = code_length_links(["DE11"], (2, 1, 1), "T")
    assert p.to_list() == ["T", "DE", "DE1"] and c.to_list() == ["DE", "DE1", "DE11"]
    parent, code, what = hrc_links("A\n@a\n@@x\nB\n", root="T", leadstring="@", encoding="utf-8")
    assert what == "hrc text"
    assert list(zip(parent.to_list(), code.to_list())) == [("T", "A"), ("A", "a"), ("a", "x"), ("T", "B")]


def test_hrc_text_prefixes_each_code_by_its_level():
    code = pl.Series("code", ["T", "A", "B", "a"])
    level = np.array([0, 1, 1, 2])
    assert hrc_text(code, level, 2, np.array([1, 3, 2]), "@") == "A\n@a\nB\n"
    assert hrc_text(code, level, 2, np.array([], dtype=np.int64), "@") == ""
