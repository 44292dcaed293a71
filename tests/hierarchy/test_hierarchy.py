"""Tests of protab.hierarchy: constructors, formats, validation, the (leaf, ancestor, level) relation."""

from __future__ import annotations

import pickle
import re

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from protab.errors import HierarchyError, ProtabError
from protab.hierarchy import Hierarchy

NUTS_LEAVES = ["DE11", "DE12", "DE21", "FR10"]
NUTS_PAIRS = [
    ("Total", "DE"),
    ("Total", "FR"),
    ("DE", "DE1"),
    ("DE", "DE2"),
    ("FR", "FR1"),
    ("DE1", "DE11"),
    ("DE1", "DE12"),
    ("DE2", "DE21"),
    ("FR1", "FR10"),
]


@pytest.fixture
def nuts() -> Hierarchy:
    return Hierarchy.from_code_lengths(NUTS_LEAVES, (2, 1, 1))


def relation_rows(h: Hierarchy) -> set[tuple[str, str, int]]:
    r = h.relation()
    return set(zip(r["leaf"].to_pylist(), r["ancestor"].to_pylist(), r["level"].to_pylist()))


# ---- constructors -----------------------------------------------------------------------


def test_nuts_from_code_lengths_equals_parent_child(nuts: Hierarchy) -> None:
    pc = Hierarchy.from_parent_child(NUTS_PAIRS)
    assert nuts == pc
    assert nuts.root == "Total"
    assert nuts.depth == 3
    assert len(nuts) == 10
    assert nuts.codes == ["Total", "DE", "FR", "DE1", "DE2", "FR1", "DE11", "DE12", "DE21", "FR10"]
    assert nuts.leaves == NUTS_LEAVES
    assert nuts.level_of("DE1") == 2
    assert nuts.parent_of("DE11") == "DE1"
    assert nuts.parent_of("Total") is None
    assert nuts.children_of("DE") == ["DE1", "DE2"]
    assert nuts.children_of("DE11") == []
    assert "DE2" in nuts and "IT" not in nuts and 3 not in nuts
    assert repr(nuts) == "Hierarchy(root='Total', codes=10, leaves=4, depth=3)"


def test_nuts_relation(nuts: Hierarchy) -> None:
    r = nuts.relation()
    assert r.schema == pa.schema([("leaf", pa.string()), ("ancestor", pa.string()), ("level", pa.int32())])
    assert r.num_rows == 16
    assert r.slice(0, 4).to_pylist() == [
        {"leaf": "DE11", "ancestor": "DE11", "level": 3},
        {"leaf": "DE11", "ancestor": "DE1", "level": 2},
        {"leaf": "DE11", "ancestor": "DE", "level": 1},
        {"leaf": "DE11", "ancestor": "Total", "level": 0},
    ]
    assert ("FR10", "FR", 1) in relation_rows(nuts)
    assert ("DE21", "DE1", 2) not in relation_rows(nuts)


def test_code_lengths_places_short_codes_at_their_level() -> None:
    h = Hierarchy.from_code_lengths(["DE11", "FR", "DE1", "DE11"], (2, 1, 1), root="EU")
    assert h.root == "EU"
    assert h.codes == ["EU", "DE", "FR", "DE1", "DE11"]
    assert h.leaves == ["FR", "DE11"]
    assert h.level_of("FR") == 1


def test_code_lengths_rejects_codes_of_wrong_length() -> None:
    with pytest.raises(HierarchyError) as e:
        Hierarchy.from_code_lengths(["DE11", "DE1X9", "FRA", "X", "DE12"], (2, 1, 1))
    msg = str(e.value)
    assert "'DE1X9', 'X' (2 in all)" in msg
    assert "'FRA'" not in msg  # length 3 is a level
    with pytest.raises(HierarchyError, match="positive integers"):
        Hierarchy.from_code_lengths(["DE"], (2, 0))


def test_ragged_tree() -> None:
    pairs = [("Total", "A"), ("Total", "B"), ("A", "A1"), ("A", "A2"), ("A2", "A21"), ("A2", "A22")]
    h = Hierarchy.from_parent_child(pairs)
    assert h.leaves == ["B", "A1", "A21", "A22"]
    assert h.depth == 3
    assert [h.level_of(c) for c in h.leaves] == [1, 2, 3, 3]
    rows = relation_rows(h)
    assert len(rows) == h.relation().num_rows == 2 + 3 + 4 + 4
    assert {("B", "B", 1), ("B", "Total", 0), ("A1", "A", 1), ("A22", "A2", 2)} <= rows
    cl = h.code_levels()
    assert cl.column_names == ["code", "level", "parent", "is_leaf"]
    assert cl["level"].type == pa.int32()
    assert cl.to_pylist()[:2] == [
        {"code": "Total", "level": 0, "parent": None, "is_leaf": False},
        {"code": "A", "level": 1, "parent": "Total", "is_leaf": False},
    ]


def test_roots_added_or_named() -> None:
    # several top codes: a total is added above them
    h = Hierarchy.from_parent_child([("A", "a1"), ("B", "b1")])
    assert h.root == "Total" and h.children_of("Total") == ["A", "B"]
    h = Hierarchy.from_parent_child([("A", "a1"), ("B", "b1")], root="All")
    assert h.root == "All" and h.level_of("b1") == 2
    # a single top code is the root; a root given that is in the pairs is used as it is
    assert Hierarchy.from_parent_child([("A", "a1")]).root == "A"
    assert Hierarchy.from_parent_child([("A", "a1")], root="A").depth == 1
    # a root given above a single top code is added
    h = Hierarchy.from_parent_child([("A", "a1")], root="World")
    assert h.codes == ["World", "A", "a1"]


def test_frames_and_integer_codes() -> None:
    df = pl.DataFrame({"up": [0, 0, 1], "down": [1, 2, 11]})
    h = Hierarchy.from_parent_child(df, parent="up", child="down")
    assert h.codes == ["0", "1", "2", "11"]
    assert h.level_of(11) == 2 and h.level_of("11") == 2 and 2 in h
    assert Hierarchy.from_parent_child(df.to_pandas(), parent="up", child="down") == h
    assert Hierarchy.from_parent_child(df.to_arrow(), parent="up", child="down") == h
    assert Hierarchy.from_parent_child([(0, 1), ("0", 2), (1, np.int64(11))]) == h
    with pytest.raises(HierarchyError, match="strings"):
        Hierarchy.from_parent_child([(1.5, "a")])
    with pytest.raises(HierarchyError, match="missing column"):
        Hierarchy.from_parent_child(df)
    # to_frame round trip (a null parent marks the root)
    assert Hierarchy.from_parent_child(h.to_frame(), child="code") == h


def test_flat() -> None:
    h = Hierarchy.flat(["m", "f", "m"])
    assert h.codes == ["Total", "m", "f"] and h.leaves == ["m", "f"] and h.depth == 1
    assert Hierarchy.flat(range(3), root="All").codes == ["All", "0", "1", "2"]
    with pytest.raises(HierarchyError, match="no codes"):
        Hierarchy.flat([])


def test_equality_ignores_input_order(nuts: Hierarchy) -> None:
    shuffled = Hierarchy.from_parent_child(list(reversed(NUTS_PAIRS)))
    assert shuffled == nuts and hash(shuffled) == hash(nuts)
    assert shuffled.codes != nuts.codes  # order follows the input
    other = Hierarchy.from_parent_child([p if p != ("DE2", "DE21") else ("DE1", "DE21") for p in NUTS_PAIRS])
    assert other != nuts
    assert nuts != "Total"


def test_flat_hierarchies_of_one_size_hash_by_their_codes() -> None:
    """A session keeps tables per hierarchy in a dict: hierarchies of equal size but other codes
    must land apart (the hash reads the codes), equal ones together."""
    ages = [f"{a:02d}" for a in range(18)]
    hs = [Hierarchy.flat([a for a in ages if a != drop]) for drop in ages]
    assert len({hash(h) for h in hs}) == len(hs)
    assert len(set(hs)) == len(hs)
    again = Hierarchy.flat(list(reversed([a for a in ages if a != "03"])))
    assert again == hs[3] and hash(again) == hash(hs[3]) and again in {h: 0 for h in hs}


def test_immutable_and_picklable(nuts: Hierarchy) -> None:
    with pytest.raises(AttributeError):
        nuts._parent = None  # type: ignore[misc]
    with pytest.raises(ValueError):
        nuts._parent[1] = 5
    with pytest.raises(TypeError):
        Hierarchy()
    codes = nuts.codes
    codes.append("X")
    assert "X" not in nuts
    assert pickle.loads(pickle.dumps(nuts)) == nuts


# ---- formats ------------------------------------------------------------------------------

HRC_TEXT = """\
DE
@DE1
@@DE11
@@DE12
@DE2
@@DE21

FR
@FR1
@@FR10
"""


def test_hrc_parse_and_write(nuts: Hierarchy, tmp_path) -> None:
    h = Hierarchy.read_hrc(HRC_TEXT)
    assert h == nuts
    assert nuts.to_hrc() == HRC_TEXT.replace("\n\n", "\n")
    path = tmp_path / "nuts.hrc"
    nuts.write_hrc(path)
    assert path.read_text() == nuts.to_hrc()
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind
    assert Hierarchy.read_hrc(path) == nuts
    assert Hierarchy.read_hrc(str(path), root="EU").root == "EU"


def test_hrc_tau_argus_example() -> None:
    # A regional hierarchy as tau-ARGUS writes it, with CRLF line ends and a custom leadstring.
    text = "Nord\r\n*N1\r\n*N2\r\n**N21\r\n**N22\r\nSued\r\n*S1\r\n  \r\nWest\r\n"
    h = Hierarchy.read_hrc(text, leadstring="*", root="Land")
    assert h.root == "Land"
    assert h.codes == ["Land", "Nord", "Sued", "West", "N1", "N2", "S1", "N21", "N22"]
    assert h.leaves == ["West", "N1", "S1", "N21", "N22"]
    assert h.parent_of("N22") == "N2" and h.parent_of("S1") == "Sued"
    assert Hierarchy.read_hrc(h.to_hrc(leadstring="#"), leadstring="#", root="Land") == h
    # ragged order: a deep line followed by a level-1 line
    assert h.to_hrc(leadstring="*") == "Nord\n*N1\n*N2\n**N21\n**N22\nSued\n*S1\nWest\n"


def test_ssb_frame_round_trip(nuts: Hierarchy) -> None:
    f = nuts.to_ssb_frame()
    assert f.columns == ["mapsFrom", "mapsTo", "sign", "level"]
    assert f.height == len(nuts) - 1
    assert set(f["sign"].to_list()) == {1}
    # SSBtools AutoLevel: a row's level is the height of mapsTo
    assert dict(zip(f["mapsTo"], f["level"])) == {"Total": 3, "DE": 2, "FR": 2, "DE1": 1, "DE2": 1, "FR1": 1}
    assert Hierarchy.from_frame(f) == nuts
    assert Hierarchy.from_frame(f.drop("sign", "level").to_pandas()) == nuts
    g = f.with_columns(pl.lit("+").alias("sign"))
    assert Hierarchy.from_frame(g) == nuts


# ---- validation errors --------------------------------------------------------------------


def test_cycle() -> None:
    with pytest.raises(HierarchyError) as e:
        Hierarchy.from_parent_child([("Total", "A"), ("B", "C"), ("C", "D"), ("D", "B"), ("D", "E")], root="Total")
    msg = str(e.value)
    assert "cycle" in msg and "'C', 'D', 'B' (3 in all)" in msg
    assert "'C' → 'B' → 'D' → 'C'" in msg
    assert "1 more code(s) below them" in msg  # E hangs below the cycle
    # no code without a parent at all
    with pytest.raises(HierarchyError, match=r"cycle.*'y', 'x' \(2 in all\)"):
        Hierarchy.from_parent_child([("x", "y"), ("y", "x")])


def test_two_parents() -> None:
    with pytest.raises(HierarchyError) as e:
        Hierarchy.from_parent_child(
            [("T", "A"), ("T", "B"), ("A", "x"), ("B", "x"), ("A", "y"), ("B", "y"), ("A", "z"), ("A", "z")]
        )
    msg = str(e.value)
    assert "more than one parent: 'x', 'y' (2 in all)" in msg and "'x' (parents 'A', 'B')" in msg
    assert "'z'" not in msg  # an exact duplicate pair is fine
    assert "several_parents=True" in msg
    # SSBtools frames may give a code several parents (tests/hierarchy/test_hierarchy_nontree.py)
    h = Hierarchy.from_frame(pl.DataFrame({"mapsFrom": ["DE11", "DE11"], "mapsTo": ["DE1", "DEx"], "sign": [1, 1]}))
    assert not h.is_tree and h.parents_of("DE11") == ["DE1", "DEx"]


def test_self_parent() -> None:
    with pytest.raises(HierarchyError, match=r"own parent: 'A' \(1 in all\)"):
        Hierarchy.from_parent_child([("T", "A"), ("A", "A")])


def test_null_or_empty_codes() -> None:
    with pytest.raises(HierarchyError, match=r"null or empty code \(counted from 0\): 1 \(1 in all\)"):
        Hierarchy.from_parent_child([("T", "A"), ("T", "")])
    with pytest.raises(HierarchyError, match=r"null or empty code \(counted from 0\): 1, 2 \(2 in all\)"):
        Hierarchy.from_parent_child(pl.DataFrame({"parent": ["T", "T", ""], "child": ["A", None, "B"]}))
    with pytest.raises(HierarchyError, match="null or empty"):
        Hierarchy.from_code_lengths(["DE11", None], (2, 1, 1))


def test_root_problems() -> None:
    with pytest.raises(HierarchyError, match=r"root 'A' also appears as a child \(of 'T'\)"):
        Hierarchy.from_parent_child([("T", "A"), ("A", "a")], root="A")
    with pytest.raises(
        HierarchyError, match=r"root was given as 'A', but other codes have no parent either: 'B', 'C' \(2 in all\)"
    ):
        Hierarchy.from_parent_child([("A", "a"), ("B", "b"), ("C", "c")], root="A")
    with pytest.raises(HierarchyError, match=r"'Total' is already a code"):
        Hierarchy.from_parent_child([("A", "a"), ("B", "Total")])
    with pytest.raises(HierarchyError, match="root"):
        Hierarchy.flat(["a"], root="")


def test_sign_values() -> None:
    # -1 subtracts (tests/hierarchy/test_hierarchy_nontree.py); anything but ±1 is refused
    f = pl.DataFrame(
        {
            "mapsFrom": ["a", "b", "c", "d"],
            "mapsTo": ["T", "T", "T", "T"],
            "sign": [1, 2, 1, 0],
            "level": [1, 1, 1, 1],
        }
    )
    with pytest.raises(HierarchyError) as e:
        Hierarchy.from_frame(f)
    msg = str(e.value)
    assert "sign other than +1 or -1 (counted from 0): 1, 3 (2 in all)" in msg and "'b' → 'T' (sign 2)" in msg
    with pytest.raises(HierarchyError, match="sign other than"):
        Hierarchy.from_frame(f.with_columns(pl.Series("sign", ["+", "-", "+", "x"])))
    assert not Hierarchy.from_frame(f.with_columns(pl.Series("sign", ["+", "-", "+", "+"]))).is_tree


def test_bad_hrc_indentation() -> None:
    with pytest.raises(HierarchyError) as e:
        Hierarchy.read_hrc("A\n@A1\n@@@A111\nB\n@@B11\n")
    msg = str(e.value)
    assert "deeper than the line before: 3, 5 (2 in all)" in msg and "line 3 '@@@A111'" in msg
    with pytest.raises(HierarchyError, match=r"line before: 1 \(1 in all\)"):
        Hierarchy.read_hrc("@A\n@B\n")
    with pytest.raises(HierarchyError, match=r"no code: 2 \(1 in all\)"):
        Hierarchy.read_hrc("A\n@@\n")


def test_check_codes(nuts: Hierarchy) -> None:
    assert nuts.check_codes(["DE11", "FR10", "DE11"]) is None
    assert nuts.check_codes(pa.array(NUTS_LEAVES)) is None
    with pytest.raises(HierarchyError) as e:
        nuts.check_codes(["DE11", "IT1", "XX", "ES9", "DE1", "Total"], table="persons", column="region")
    msg = str(e.value)
    assert "column 'region' of table 'persons'" in msg
    assert "unknown to the hierarchy: 'ES9', 'IT1', 'XX' (3 in all)" in msg
    assert "add them to the hierarchy" in msg
    assert "internal nodes (margins), not leaves: 'DE1', 'Total' (2 in all)" in msg
    assert "recode these records to leaf codes" in msg
    with pytest.raises(HierarchyError, match=r"not leaves: 'DE1' \(1 in all\)"):
        nuts.check_codes(pl.Series(["DE1", "DE11"]))
    many = [f"Z{i:02d}" for i in range(12)]
    with pytest.raises(
        HierarchyError, match=r"unknown to the hierarchy: 'Z00', 'Z01', 'Z02', 'Z03', 'Z04', … \(12 in all\)"
    ):
        nuts.check_codes(many)
    with pytest.raises(HierarchyError, match=r"NULL values \(1 in all\)"):
        nuts.check_codes(["DE11", None])
    assert Hierarchy.flat([1, 2]).check_codes(np.array([1, 2, 2])) is None


def test_errors_are_protab_errors(nuts: Hierarchy) -> None:
    with pytest.raises(ProtabError):
        nuts.level_of("nope")
    assert issubclass(HierarchyError, ValueError)


# ---- properties on random trees -------------------------------------------------------------


@st.composite
def random_trees(draw: st.DrawFn) -> tuple[list[tuple[str, str]], list[int]]:
    """Parent arrays: node 0 is the root, node i > 0 has a parent < i; codes are shuffled names."""
    n = draw(st.integers(min_value=2, max_value=60))
    parents = [-1] + [draw(st.integers(min_value=0, max_value=i - 1)) for i in range(1, n)]
    names = [f"c{k}" for k in draw(st.permutations(list(range(n))))]
    pairs = [(names[parents[i]], names[i]) for i in range(1, n)]
    order = draw(st.permutations(list(range(n - 1))))
    return [pairs[k] for k in order], parents


def reference_levels(parents: list[int]) -> list[int]:
    levels = [0] * len(parents)
    for i in range(1, len(parents)):
        levels[i] = levels[parents[i]] + 1
    return levels


@settings(max_examples=150, deadline=None)
@given(random_trees())
def test_relation_invariants(tree: tuple[list[tuple[str, str]], list[int]]) -> None:
    pairs, parents = tree
    h = Hierarchy.from_parent_child(pairs)
    levels = reference_levels(parents)
    n = len(parents)
    child_of = {c: p for p, c in pairs}
    root = next(p for p, _ in pairs if p not in child_of)
    assert h.root == root and len(h) == n and h.depth == max(levels)

    # levels agree with a direct computation (pairs come shuffled: repeat passes)
    name_level: dict[str, int] = {root: 0}
    while len(name_level) < n:
        for p, c in pairs:
            if p in name_level:
                name_level[c] = name_level[p] + 1
    assert {c: h.level_of(c) for c in h.codes} == name_level
    assert sorted(name_level.values()) == sorted(levels)

    leaves = h.leaves
    assert set(leaves) == set(name_level) - {p for p, _ in pairs}
    rel = h.relation()
    assert rel.num_rows == sum(name_level[leaf] + 1 for leaf in leaves)
    rows = list(zip(rel["leaf"].to_pylist(), rel["ancestor"].to_pylist(), rel["level"].to_pylist()))
    self_rows = [(leaf, lev) for leaf, anc, lev in rows if leaf == anc]
    assert sorted(self_rows) == sorted((leaf, name_level[leaf]) for leaf in leaves)
    assert {leaf for leaf, anc, lev in rows if anc == root and lev == 0} == set(leaves)
    # every ancestor row is on the leaf's parent chain, at the ancestor's level
    for leaf, anc, lev in rows:
        c = leaf
        while c != anc:
            c = child_of[c]
        assert lev == name_level[anc]
    # codes by level, then input order
    assert [h.level_of(c) for c in h.codes] == sorted(h.level_of(c) for c in h.codes)

    # formats round-trip
    assert Hierarchy.read_hrc(h.to_hrc(), root=root) == h
    assert Hierarchy.from_frame(h.to_ssb_frame()) == h
    assert Hierarchy.from_parent_child(h.to_frame(), child="code") == h


@settings(max_examples=50, deadline=None)
@given(random_trees(), st.data())
def test_cycles_are_found(tree: tuple[list[tuple[str, str]], list[int]], data: st.DataObject) -> None:
    """Re-linking a code to one of its descendants (or itself) always raises."""
    pairs, _ = tree
    h = Hierarchy.from_parent_child(pairs)
    inner = [c for c in h.codes[1:] if c not in h.leaves]
    assume(inner)
    code = data.draw(st.sampled_from(inner))
    below = [
        leaf for leaf, anc in zip(h.relation()["leaf"].to_pylist(), h.relation()["ancestor"].to_pylist()) if anc == code
    ]
    target = data.draw(st.sampled_from(below))
    relinked = [(target, c) if c == code else (p, c) for p, c in pairs]
    with pytest.raises(HierarchyError, match="cycle"):
        Hierarchy.from_parent_child(relinked, root=h.root)


def test_deep_chain() -> None:
    # depth far beyond log2(n) rounds of a naive loop: pointer jumping still finds levels
    n = 3000
    h = Hierarchy.from_parent_child([(f"c{i}", f"c{i + 1}") for i in range(n)])
    assert h.depth == n and h.leaves == [f"c{n}"] and h.level_of("c1500") == 1500
    assert h.relation().num_rows == n + 1
    with pytest.raises(HierarchyError, match=r"cycle.*\(3001 in all\)"):
        Hierarchy.from_parent_child([(f"c{i}", f"c{i + 1}") for i in range(n)] + [(f"c{n}", "c0")])


def test_grid_200k() -> None:
    """A national 1 km grid: 2,000 10 km squares of 100 1 km squares each."""
    n10, per = 2000, 100
    i = np.arange(n10 * per)
    sq1 = pl.Series([f"1kmN{k:06d}" for k in range(n10 * per)])
    sq10 = pl.Series([f"10kmN{k:04d}" for k in range(n10)]).gather(i // per)
    h = Hierarchy.from_parent_child(pl.DataFrame({"parent": sq10, "child": sq1}), root="Total")
    assert len(h) == 1 + n10 + n10 * per and h.depth == 2
    rel = h.relation()
    assert rel.num_rows == 3 * n10 * per
    assert rel.slice(0, 3)["ancestor"].to_pylist() == ["1kmN000000", "10kmN0000", "Total"]
    h.check_codes(sq1.head(1000))
    with pytest.raises(HierarchyError, match=re.escape("unknown to the hierarchy: '1kmN999999' (1 in all)")):
        h.check_codes(pl.concat([sq1, pl.Series(["1kmN999999"])]))
    assert Hierarchy.read_hrc(h.to_hrc()) == h


def test_pandas_input() -> None:
    df = pd.DataFrame({"parent": ["T", "T"], "child": ["a", "b"]})
    assert Hierarchy.from_parent_child(df).codes == ["T", "a", "b"]
    assert Hierarchy.flat(pd.Series(["a", "b"])).leaves == ["a", "b"]
