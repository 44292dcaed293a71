"""Hierarchies that are not trees: signs −1 (EU = Europe − nonEU) and codes with several
parents (overlapping groups), through tabulate, the model matrix and the cell key method.

Every expected number below is worked out by hand in the comments.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import protab as pt
from protab.errors import HierarchyError
from protab.hierarchy import Hierarchy

# The country hierarchy of SSBtools' sport-employment example, in its to-from layout:
# Europe = Iceland + Portugal + Spain, nonEU = Iceland, EU = Europe − nonEU.
GEO_SSB = pl.DataFrame(
    {
        "mapsFrom": ["Spain", "Iceland", "Portugal", "Iceland", "Europe", "nonEU"],
        "mapsTo": ["Europe", "Europe", "Europe", "nonEU", "EU", "EU"],
        "sign": [1, 1, 1, 1, 1, -1],
        "level": [1, 1, 1, 1, 2, 2],
    }
)

# Overlapping age groups: 2014–2016 and 2015–2018 share 2015 and 2016.
AGE_GROUPS = [
    ("2014-2016", "2014"), ("2014-2016", "2015"), ("2014-2016", "2016"),
    ("2015-2018", "2015"), ("2015-2018", "2016"), ("2015-2018", "2017"), ("2015-2018", "2018"),
]


def rel(h: Hierarchy) -> dict[tuple[str, str], int]:
    r = h.relation()
    assert r.column_names == ["leaf", "ancestor", "level", "coef"]
    return dict(zip(zip(r["leaf"].to_pylist(), r["ancestor"].to_pylist()), r["coef"].to_pylist()))


def cells(frame: pl.DataFrame, value: str = "n", **where: str) -> dict[str, object]:
    """{code of the one dimension not in ``where``: value} for the cells matching ``where``."""
    f = frame.filter(pl.all_horizontal([pl.col(k) == v for k, v in where.items()])) if where else frame
    free = [c for c in ("geo", "age", "sex", "year") if c in f.columns and c not in where]
    assert len(free) == 1
    codes = f[free[0]].to_list()
    assert len(codes) == len(set(codes)), "a code published twice"
    return dict(zip(codes, f[value].to_list()))


# ---- the Hierarchy ------------------------------------------------------------------------


def test_eu_is_europe_minus_non_eu() -> None:
    h = Hierarchy.from_frame(GEO_SSB)
    assert not h.is_tree and repr(h) == "Hierarchy(root='Total', codes=7, leaves=3, depth=3, tree=False)"
    # no top code counts every leaf once (EU leaves Iceland out), so a total is added
    assert h.root == "Total"
    assert h.codes == ["Total", "EU", "Europe", "nonEU", "Spain", "Iceland", "Portugal"]
    assert h.leaves == ["Spain", "Iceland", "Portugal"]
    assert [h.level_of(c) for c in h.codes] == [0, 1, 2, 2, 3, 3, 3]
    assert h.parents_of("Iceland") == ["Europe", "nonEU"] and h.parents_of("EU") == ["Total"]
    assert h.children_of("EU") == ["Europe", "nonEU"] and h.children_of("Total") == ["EU"]
    with pytest.raises(HierarchyError, match="several parents"):
        h.parent_of("Iceland")
    # Iceland: +1 through Europe, −1 through nonEU: 0, so no (Iceland, EU) pair
    assert rel(h) == {
        ("Spain", "Spain"): 1, ("Spain", "Europe"): 1, ("Spain", "EU"): 1, ("Spain", "Total"): 1,
        ("Iceland", "Iceland"): 1, ("Iceland", "Europe"): 1, ("Iceland", "nonEU"): 1, ("Iceland", "Total"): 1,
        ("Portugal", "Portugal"): 1, ("Portugal", "Europe"): 1, ("Portugal", "EU"): 1, ("Portugal", "Total"): 1,
    }
    # round trips: SSBtools frame (level = height of mapsTo), to_frame, pickle
    f = h.to_ssb_frame()
    assert dict(zip(f["mapsTo"], f["level"])) == {"EU": 2, "Europe": 1, "nonEU": 1}
    assert Hierarchy.from_frame(f) == h
    assert Hierarchy.from_parent_child(h.to_frame(), child="code", sign="sign", several_parents=True) == h
    tuples = [(p, c, s) for c, p, s in zip(GEO_SSB["mapsFrom"], GEO_SSB["mapsTo"], GEO_SSB["sign"])]
    assert Hierarchy.from_parent_child(tuples, several_parents=True) == h
    import pickle

    assert pickle.loads(pickle.dumps(h)) == h
    assert h != Hierarchy.from_parent_child([("Europe", "Spain"), ("Europe", "Iceland"), ("Europe", "Portugal")])
    with pytest.raises(HierarchyError, match=r"\.hrc file holds a tree"):
        h.to_hrc()


def test_ssb_example_with_two_signed_codes() -> None:
    """SSBtools' FIFA2018ABCD frame, worked out by hand: EU = Europe − nonEU and
    Schengen = Europe − nonSchengen, so Europe has two parents."""
    europe = ["Croatia", "Denmark", "France", "Iceland", "Portugal", "Russia", "Spain"]
    rows = [("Australia", "Oceania"), ("Iran", "Asia"), ("Saudi Arabia", "Asia")]
    rows += [(c, "Europe") for c in europe]
    rows += [("Iceland", "nonEU"), ("Russia", "nonEU"), ("Russia", "nonSchengen"), ("Croatia", "nonSchengen")]
    f = pl.DataFrame(
        {
            "mapsFrom": [a for a, _ in rows] + ["Europe", "nonEU", "Europe", "nonSchengen"],
            "mapsTo": [b for _, b in rows] + ["EU", "EU", "Schengen", "Schengen"],
            "sign": ["+"] * len(rows) + ["+", "-", "+", "-"],
        }
    )
    h = Hierarchy.from_frame(f)
    r = rel(h)

    def members(code: str) -> dict[str, int]:
        return {leaf: c for (leaf, a), c in r.items() if a == code}

    assert members("EU") == dict.fromkeys(["Croatia", "Denmark", "France", "Portugal", "Spain"], 1)
    assert members("Schengen") == dict.fromkeys(["Denmark", "France", "Iceland", "Portugal", "Spain"], 1)
    assert members("Total") == dict.fromkeys(h.leaves, 1) and len(h.leaves) == 10
    assert h.parents_of("Europe") == ["EU", "Schengen"]
    assert {c for c in h.codes if h.level_of(c) == 1} == {"Oceania", "Asia", "EU", "Schengen"}
    assert h.level_of("Europe") == 2 and h.level_of("Croatia") == 3 and h.level_of("Iran") == 2


def test_a_leaf_reached_twice_counts_twice() -> None:
    # SSBtools' own illustration: EUandSpain = EU + Spain counts Spain twice
    f = pl.concat([GEO_SSB.drop("level"), pl.DataFrame({"mapsFrom": ["EU", "Spain"], "mapsTo": "EUandSpain", "sign": 1})], how="vertical_relaxed")
    r = rel(Hierarchy.from_frame(f))
    assert r[("Spain", "EUandSpain")] == 2 and r[("Portugal", "EUandSpain")] == 1
    assert ("Iceland", "EUandSpain") not in r


def test_overlapping_groups_need_several_parents() -> None:
    with pytest.raises(HierarchyError, match="more than one parent: '2015', '2016'.*several_parents=True"):
        Hierarchy.from_parent_child(AGE_GROUPS)
    h = Hierarchy.from_parent_child(AGE_GROUPS, several_parents=True)
    assert h.root == "Total" and h.children_of("Total") == ["2014-2016", "2015-2018"]
    assert h.leaves == ["2014", "2015", "2016", "2017", "2018"] and h.depth == 2
    r = rel(h)
    assert {leaf for (leaf, a) in r if a == "2014-2016"} == {"2014", "2015", "2016"}
    assert all(r[(leaf, "Total")] == 1 for leaf in h.leaves)  # the total is not 2014–2016 + 2015–2018
    assert h.parents_of("2015") == ["2014-2016", "2015-2018"]


def test_roots_of_non_trees() -> None:
    # the one top code that counts every leaf once is the root; 2015–2018, another code
    # without parent, hangs right below it
    h = Hierarchy.from_parent_child(AGE_GROUPS + [("All", "2014-2016"), ("All", "2017"), ("All", "2018")],
                                    several_parents=True)
    assert h.root == "All" and h.level_of("2015-2018") == 1 and h.level_of("2014-2016") == 1
    assert h.children_of("All") == ["2015-2018", "2014-2016", "2017", "2018"]  # code order
    assert h.level_of("2017") == 2 and h.parents_of("2017") == ["All", "2015-2018"]
    # a named root that is not the total of all leaves is refused, with the offending leaves
    with pytest.raises(HierarchyError, match=r"root 'EU' is not the total of all leaves.*'Iceland': 0"):
        Hierarchy.from_frame(GEO_SSB, root="EU")
    # a root name that is free is added; one that is taken by another code is refused
    assert Hierarchy.from_frame(GEO_SSB, root="World").root == "World"
    clash = GEO_SSB.drop("level").with_columns(pl.col("mapsTo").replace({"EU": "Total"}))
    with pytest.raises(HierarchyError, match=r"'Total' is already a code.*Pass root="):
        Hierarchy.from_frame(clash)


def test_real_mistakes_are_still_refused() -> None:
    with pytest.raises(HierarchyError, match=r"cycle.*'a' → 'b' → 'a'|cycle.*'b' → 'a' → 'b'"):
        Hierarchy.from_frame(pl.DataFrame({"mapsFrom": ["x", "a", "b", "x"], "mapsTo": ["a", "b", "a", "T"],
                                           "sign": [1, 1, -1, 1]}))
    with pytest.raises(HierarchyError, match="both signs"):
        Hierarchy.from_parent_child([("T", "a", 1), ("T", "a", -1), ("T", "b", 1)])
    with pytest.raises(HierarchyError, match="sign other than"):
        Hierarchy.from_parent_child([("T", "a", 1), ("T", "b", 3)])
    with pytest.raises(HierarchyError, match="own parent"):
        Hierarchy.from_frame(pl.DataFrame({"mapsFrom": ["a", "a"], "mapsTo": ["a", "T"], "sign": [-1, 1]}))
    with pytest.raises(HierarchyError, match=r"both as top codes \(no parent\) and with a parent: 'a'"):
        Hierarchy.from_parent_child(pl.DataFrame({"parent": [None, "T", "U"], "child": ["a", "a", "a"]}),
                                    several_parents=True)
    with pytest.raises(HierarchyError, match="sign= names a column of a frame"):
        Hierarchy.from_parent_child([("T", "a")], sign="sign")
    with pytest.raises(HierarchyError, match="missing column"):
        Hierarchy.from_parent_child(pl.DataFrame({"parent": ["T"], "child": ["a"]}), sign="sign")
    # data must still be coded at the leaves
    h = Hierarchy.from_frame(GEO_SSB)
    with pytest.raises(HierarchyError, match="internal nodes.*'Europe'"):
        h.check_codes(["Spain", "Europe"])
    with pytest.raises(HierarchyError, match="unknown.*'Norway'"):
        h.check_codes(["Norway"])


def test_trees_from_frames_stay_trees() -> None:
    f = pl.DataFrame({"mapsFrom": ["a", "b"], "mapsTo": ["T", "T"], "sign": ["+", "+"]})
    h = Hierarchy.from_frame(f)
    assert h.is_tree and h.relation().column_names == ["leaf", "ancestor", "level"]
    assert h == Hierarchy.from_parent_child([("T", "a"), ("T", "b")], several_parents=True)


# ---- tabulate -------------------------------------------------------------------------------

# persons: Spain 4 (3 f, 1 m), Iceland 2 (0 f, 2 m), Portugal 3 (1 f, 2 m)
PERSONS = pl.DataFrame(
    {
        "geo": ["Spain"] * 4 + ["Iceland"] * 2 + ["Portugal"] * 3,
        "sex": ["f", "f", "f", "m", "m", "m", "f", "m", "m"],
        "w": [1.0, 2.0, 1.5, 1.0, 3.0, 0.5, 2.0, 2.0, 1.0],
        "income": [10, 20, 30, 40, 50, 60, 70, 80, 90],
    }
)


def test_tabulate_eu_as_a_difference() -> None:
    h = Hierarchy.from_frame(GEO_SSB)
    with pt.Session(":memory:") as s:
        s.register("p", PERSONS)
        out = s.tabulate("p", pt.TableSpec({"geo": h, "sex": None}, weight="w", sums=["income"]))
    # one row per (code, sex code): 7 × 3
    assert out.height == 21
    assert cells(out, sex="Total") == {"Total": 9, "EU": 7, "Europe": 9, "nonEU": 2, "Spain": 4,
                                       "Iceland": 2, "Portugal": 3}
    assert cells(out, sex="m") == {"Total": 5, "EU": 3, "Europe": 5, "nonEU": 2, "Spain": 1,
                                   "Iceland": 2, "Portugal": 2}
    # EU income: Spain 10+20+30+40 + Portugal 70+80+90 = 340; weights 5.5 + 5.0 = 10.5
    assert cells(out, "income", sex="Total")["EU"] == 340.0
    assert cells(out, "w", sex="Total")["EU"] == 10.5
    assert dict(zip(out["geo"], out["geo_level"])) == {"Total": 0, "EU": 1, "Europe": 2, "nonEU": 2,
                                                       "Spain": 3, "Iceland": 3, "Portugal": 3}


def test_tabulate_a_difference_that_goes_negative() -> None:
    # gap = Europe − nonEU computed the other way round: nonEU − Europe = −(Spain + Portugal)
    h = Hierarchy.from_parent_child(
        [("Europe", "Spain", 1), ("Europe", "Iceland", 1), ("Europe", "Portugal", 1),
         ("gap", "Iceland", 1), ("gap", "Europe", -1)],
        several_parents=True,
    )
    with pt.Session(":memory:") as s:
        s.register("p", PERSONS)
        out = s.tabulate("p", pt.TableSpec({"geo": h, "sex": None}, sums=["income"]))
    # gap: Iceland +1 − 1 = 0, Spain −1, Portugal −1: n = −(4 + 3), by sex f −4, m −3
    assert cells(out, geo="gap") == {"Total": -7, "f": -4, "m": -3}
    assert cells(out, "income", geo="gap") == {"Total": -340.0, "f": -130.0, "m": -210.0}
    # Europe counts every leaf once but sits below gap: a total is added above gap
    assert h.root == "Total" and h.level_of("gap") == 1 and h.level_of("Europe") == 2


def test_tabulate_overlapping_age_groups() -> None:
    h = Hierarchy.from_parent_child(AGE_GROUPS, several_parents=True)
    # records per year: 2014: 1, 2015: 2, 2016: 3, 2017: 4, 2018: 5 (15 in all)
    years = [str(y) for y in range(2014, 2019) for _ in range(y - 2013)]
    data = pl.DataFrame({"age": years, "sex": ["f", "m"] * 7 + ["f"]})
    with pt.Session(":memory:") as s:
        s.register("d", data)
        out = s.tabulate("d", pt.TableSpec({"age": h, "sex": None}))
        drop = s.tabulate("d", pt.TableSpec({"age": h, "sex": None}, drop_empty=True))
    # 2014–2016: 1 + 2 + 3 = 6; 2015–2018: 2 + 3 + 4 + 5 = 14; Total 15 (not 6 + 14)
    assert cells(out, sex="Total") == {"Total": 15, "2014-2016": 6, "2015-2018": 14, "2014": 1,
                                       "2015": 2, "2016": 3, "2017": 4, "2018": 5}
    assert out.height == 8 * 3  # every code once per sex code
    assert drop.height == out.filter(pl.col("n") > 0).height


def test_ssb_sport_employment_by_hand() -> None:
    """SSBtools' HierarchyCompute example (employment in sport, thousands, Eurostat) for
    2014, summed by hand: EU = Spain + Portugal."""
    age = Hierarchy.from_frame(pl.DataFrame({"mapsFrom": ["Y15-29", "Y30-64"], "mapsTo": "Y15-64",
                                             "sign": 1, "level": 1}))
    data = pl.DataFrame(
        {
            "age": ["Y15-29"] * 3 + ["Y30-64"] * 3,
            "geo": ["Spain", "Iceland", "Portugal"] * 2,
            "ths_per": [66.9, 1.8, 11.6, 120.3, 1.5, 20.2],
        }
    )
    with pt.Session(":memory:") as s:
        s.register("x", data)
        out = s.tabulate("x", pt.TableSpec({"age": age, "geo": Hierarchy.from_frame(GEO_SSB)}, sums=["ths_per"]))
    total = cells(out, "ths_per", age="Y15-64")
    # EU = 66.9 + 11.6 + 120.3 + 20.2; Europe adds Iceland 1.8 + 1.5; nonEU = Iceland
    assert total["EU"] == pytest.approx(219.0) and total["Europe"] == pytest.approx(222.3)
    assert total["nonEU"] == pytest.approx(3.3)
    assert cells(out, "ths_per", age="Y15-29")["EU"] == pytest.approx(78.5)


# ---- model matrix ----------------------------------------------------------------------------


def _matrix(frame: pl.DataFrame, spec: pt.TableSpec):
    with pt.Session(":memory:") as s:
        s.register("t", frame)
        with s._run("t", spec, extend0=True) as run:
            return run.matrix(), run.inner_frame(), run.published()


def test_model_matrix_with_minus_one() -> None:
    h = Hierarchy.from_parent_child(
        [("Europe", "Spain", 1), ("Europe", "Iceland", 1), ("Europe", "Portugal", 1),
         ("gap", "Iceland", 1), ("gap", "Europe", -1)],
        several_parents=True,
    )
    spec = pt.TableSpec({"geo": h, "sex": None})
    X, inner, published = _matrix(PERSONS, spec)
    assert set(np.unique(X.data)) == {-1.0, 1.0}
    np.testing.assert_array_equal(X.T @ inner["n"].to_numpy(), published["n"].to_numpy())
    # the gap × Total column: −1 on the Spain and Portugal rows, nothing on Iceland
    j = published.with_row_index().filter((pl.col("geo") == "gap") & (pl.col("sex") == "Total"))["index"][0]
    col = dict(zip(inner["geo"] + "/" + inner["sex"], X[:, j].toarray().ravel()))
    assert col == {"Spain/f": -1, "Spain/m": -1, "Iceland/f": 0, "Iceland/m": 0, "Portugal/f": -1, "Portugal/m": -1}
    # Session.model_matrix gives this X, −1 entries included
    with pt.Session(":memory:") as s:
        s.register("t", PERSONS)
        X2, _, _ = s.model_matrix("t", spec)
    assert (X2 != X).nnz == 0 and X2.min() == -1


def test_model_matrix_counts_a_leaf_twice() -> None:
    f = pl.concat([GEO_SSB.drop("level"), pl.DataFrame({"mapsFrom": ["EU", "Spain"], "mapsTo": "EUandSpain", "sign": 1})], how="vertical_relaxed")
    X, inner, published = _matrix(PERSONS, pt.TableSpec({"geo": Hierarchy.from_frame(f)}))
    assert set(np.unique(X.data)) == {1.0, 2.0}
    np.testing.assert_array_equal(X.T @ inner["n"].to_numpy(), published["n"].to_numpy())
    assert cells(published)["EUandSpain"] == 7 + 4


def test_model_matrix_of_overlapping_groups_through_the_session() -> None:
    # coefficients 0/1 only: Session.model_matrix builds X as for trees
    h = Hierarchy.from_parent_child(AGE_GROUPS, several_parents=True)
    data = pl.DataFrame({"age": ["2014", "2015", "2016", "2018"], "sex": ["f", "m", "f", "m"], "n": [1, 2, 3, 5]})
    X, inner, published = pt.model_matrix(data, pt.TableSpec({"age": h, "sex": None}))
    assert set(np.unique(X.data)) == {1.0}
    np.testing.assert_array_equal(X.T @ inner["n"].to_numpy(), published["n"].to_numpy())
    assert cells(published, sex="Total") == {"Total": 11, "2014-2016": 6, "2015-2018": 10, "2014": 1,
                                             "2015": 2, "2016": 3, "2017": 0, "2018": 5}


# ---- cell key method --------------------------------------------------------------------------


def test_cell_keys_of_signed_cells() -> None:
    keys = [7, 11, 13, 17, 19, 23, 29, 31, 37]  # in PERSONS' row order: Spain ×4, Iceland ×2, Portugal ×3
    data = PERSONS.with_columns(pl.Series("rk", keys))
    signed = Hierarchy.from_frame(GEO_SSB)
    # the same EU as a plain tree: Total → EU → {Spain, Portugal}, Total → Iceland
    tree = Hierarchy.from_parent_child([("Total", "EU"), ("EU", "Spain"), ("EU", "Portugal"), ("Total", "Iceland")])
    gap = Hierarchy.from_parent_child(
        [("Europe", "Spain", 1), ("Europe", "Iceland", 1), ("Europe", "Portugal", 1),
         ("gap", "Iceland", 1), ("gap", "Europe", -1)],
        several_parents=True,
    )
    p = pt.PTable.maximum_entropy(D=5, V=3, js=2)
    with pt.Session(":memory:") as s:
        s.register("p", data)
        s.add_record_keys("p", record_key_column="rk", bits=6)  # keys below 64: modulus 64
        modulus = s.record_key("p")[1]
        assert modulus == 64
        k_signed = s.tabulate("p", pt.TableSpec({"geo": signed, "sex": None}), cell_keys=True)
        k_tree = s.tabulate("p", pt.TableSpec({"geo": tree, "sex": None}), cell_keys=True)
        k_gap = s.tabulate("p", pt.TableSpec({"geo": gap, "sex": None}), cell_keys=True)
        c_signed = s.cell_key("p", pt.TableSpec({"geo": signed, "sex": None}), p, original=True)
        c_tree = s.cell_key("p", pt.TableSpec({"geo": tree, "sex": None}), p, original=True)
        c_gap = s.cell_key("p", pt.TableSpec({"geo": gap, "sex": None}), p, original=True)
    # EU = Spain (7+11+13+17 = 48) + Portugal (29+31+37 = 97) = 145 ≡ 17 (mod 64), in both
    # hierarchies: the key of a cell depends only on its records and their coefficients
    assert cells(k_signed, "cell_key", sex="Total")["EU"] == 145 % 64 == 17
    assert cells(k_tree, "cell_key", sex="Total")["EU"] == 17
    eu = {t: cells(c, "n_pert", geo="EU") for t, c in (("signed", c_signed), ("tree", c_tree))}
    assert eu["signed"] == eu["tree"]
    # gap = −(Spain + Portugal): key −145 ≡ 47 (mod 64), a residue in [0, 64)
    assert cells(k_gap, "cell_key", sex="Total")["gap"] == (-145) % 64 == 47
    # m: −(17 + 31 + 37) = −85 ≡ 43; f: −(7 + 11 + 13 + 29) = −60 ≡ 4
    assert cells(k_gap, "cell_key", geo="gap") == {"Total": 47, "f": 4, "m": 43}
    assert cells(c_gap, "n", geo="gap") == {"Total": -7, "f": -4, "m": -3}
    assert k_gap["cell_key"].min() >= 0 and k_gap["cell_key"].max() < 64
    # the key of −S is −(key of S) mod m: gap's key and EU's add up to the modulus
    assert (cells(k_gap, "cell_key", geo="gap")["m"] + cells(k_signed, "cell_key", geo="EU")["m"]) % 64 == 0
    # −S is perturbed as S with the negated key: gap publishes exactly −(EU's perturbed count)
    assert cells(c_gap, "n_pert", geo="gap") == {
        k: -v for k, v in cells(c_signed, "n_pert", geo="EU").items()}
    assert c_gap.filter(pl.col("n") < 0)["n_pert"].null_count() == 0
    # cells with a positive count are perturbed as in any table
    pos = c_gap.filter(pl.col("n") > 0)
    assert pos.height and pos["n_pert"].null_count() == 0


# ---- random signed hierarchies against dense matrix algebra ---------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_random_signed_hierarchies_against_dense_algebra(seed: int) -> None:
    """Random acyclic signed links; each code's published count, weight sum and cell key
    must equal Σ coef × leaf value with coef = the path sums of (I − A)⁻¹."""
    rng = np.random.default_rng(seed)
    n_leaf, n_group = 6, 5
    leaves = [f"l{i}" for i in range(n_leaf)]
    groups = [f"g{i}" for i in range(n_group)]
    links = []
    for i, g in enumerate(groups):  # a group draws children among the leaves and earlier groups
        pool = leaves + groups[:i]
        for child in rng.choice(pool, size=int(rng.integers(1, 4)), replace=False):
            links.append((g, str(child), int(rng.choice([1, 1, -1]))))
    used = {c for _, c, _ in links} | {p for p, _, _ in links}
    links += [("g0", leaf, 1) for leaf in leaves if leaf not in used]  # every leaf in the hierarchy
    h = Hierarchy.from_parent_child(links, several_parents=True, root="All")
    codes = [c for c in h.codes if c != "All"]
    # dense A (child → parent, signed); path sums = (I − A)⁻¹
    idx = {c: k for k, c in enumerate(codes)}
    a = np.zeros((len(codes), len(codes)))
    for p, c, s in links:
        a[idx[c], idx[p]] = s
    paths = np.rint(np.linalg.inv(np.eye(len(codes)) - a)).astype(np.int64)
    real_leaves = [c for c in codes if c in set(h.leaves)]
    counts = rng.integers(0, 5, size=len(real_leaves))
    rows = [(leaf, int(k) + 1) for leaf, c in zip(real_leaves, counts) for k in range(c)]
    data = pl.DataFrame({"g": [r[0] for r in rows], "w": [float(r[1]) for r in rows],
                         "rk": list(range(1, len(rows) + 1))}, schema={"g": pl.String, "w": pl.Float64, "rk": pl.Int64})
    key_sum = {leaf: int(data.filter(pl.col("g") == leaf)["rk"].sum()) for leaf in real_leaves}
    w_sum = {leaf: float(data.filter(pl.col("g") == leaf)["w"].sum()) for leaf in real_leaves}
    with pt.Session(":memory:") as s:
        s.register("d", data)
        s.add_record_keys("d", record_key_column="rk", bits=5)
        out = s.tabulate("d", pt.TableSpec({"g": h}, weight="w"), cell_keys=True)
        with s._run("d", pt.TableSpec({"g": h}), extend0=True) as run:
            X, inner, published = run.matrix(), run.inner_frame(), run.published()
    got = {c: (n, w, k) for c, n, w, k in zip(out["g"], out["n"], out["w"], out["cell_key"])}
    assert set(got) == set(h.codes)  # every code once
    for code in codes:
        coef = {leaf: paths[idx[leaf], idx[code]] for leaf in real_leaves}
        n = sum(coef[leaf] * c for leaf, c in zip(real_leaves, counts))
        w = sum(coef[leaf] * w_sum[leaf] for leaf in real_leaves)
        k = sum(coef[leaf] * key_sum[leaf] for leaf in real_leaves) % 32
        assert got[code] == (n, pytest.approx(w), k), code
    assert got["All"][0] == len(rows)
    np.testing.assert_array_equal(X.T @ inner["n"].to_numpy(), published["n"].to_numpy())


def test_perturb_inner_is_additive_with_coefficients() -> None:
    # inner cells perturbed by their own keys; a margin is Σ coef × perturbed inner cells
    h = Hierarchy.from_parent_child(
        [("Europe", "Spain", 1), ("Europe", "Iceland", 1), ("Europe", "Portugal", 1),
         ("gap", "Iceland", 1), ("gap", "Europe", -1)],
        several_parents=True,
    )
    data = PERSONS.with_columns(pl.Series("rk", [7, 11, 13, 17, 19, 23, 29, 31, 37]))
    with pt.Session(":memory:") as s:
        s.register("p", data)
        s.add_record_keys("p", record_key_column="rk", bits=6)
        out = s.perturb_inner("p", pt.TableSpec({"geo": h, "sex": None}, weight="w"),
                              pt.PTable.maximum_entropy(D=5, V=3, js=2), original=True)
    for sex in ("f", "m", "Total"):
        by = cells(out, "n_pert", sex=sex)
        assert by["gap"] == -(by["Spain"] + by["Portugal"])
        assert by["Europe"] == by["Spain"] + by["Portugal"] + by["Iceland"]
        w = cells(out, "w_pert", sex=sex)
        assert w["gap"] == pytest.approx(-(w["Spain"] + w["Portugal"]))
    assert cells(out, "n", sex="Total")["gap"] == -7


def test_two_signed_dimensions_multiply_their_coefficients() -> None:
    # rows: gap = Iceland − Europe (Spain −1, Portugal −1, Iceland 0); columns: D = y − o
    geo = Hierarchy.from_parent_child(
        [("Europe", "Spain", 1), ("Europe", "Iceland", 1), ("Europe", "Portugal", 1),
         ("gap", "Iceland", 1), ("gap", "Europe", -1)],
        several_parents=True,
    )
    age = Hierarchy.from_parent_child([("All", "y"), ("All", "o"), ("D", "y", 1), ("D", "o", -1)], several_parents=True)
    assert age.root == "All"
    # Spain: y y y o; Iceland: o y; Portugal: o y o
    data = PERSONS.with_columns(pl.Series("age", list("yyyooyoyo")), pl.Series("rk", [1, 2, 3, 4, 5, 6, 7, 8, 9]))
    with pt.Session(":memory:") as s:
        s.register("p", data)
        s.add_record_keys("p", record_key_column="rk", bits=4)
        spec = pt.TableSpec({"geo": geo, "age": age})
        out = s.tabulate("p", spec, cell_keys=True)
        with s._run("p", spec, extend0=True) as run:
            X, inner, published = run.matrix(), run.inner_frame(), run.published()
    cell = out.filter((pl.col("geo") == "gap") & (pl.col("age") == "D"))
    # gap × D = −(Spain_y − Spain_o) − (Portugal_y − Portugal_o) = −(3 − 1) − (1 − 2) = −1
    assert cell["n"].to_list() == [-1]
    # key: −((1+2+3) − 4) − ((8) − (7+9)) = −2 + 8 = 6
    assert cell["cell_key"].to_list() == [6]
    assert set(np.unique(X.data)) == {-1.0, 1.0}
    np.testing.assert_array_equal(X.T @ inner["n"].to_numpy(), published["n"].to_numpy())


def test_threshold_judges_signed_cells_by_size() -> None:
    gap = Hierarchy.from_parent_child(
        [("Europe", "Spain", 1), ("Europe", "Iceland", 1), ("Europe", "Portugal", 1),
         ("gap", "Iceland", 1), ("gap", "Europe", -1)],
        several_parents=True,
    )
    p = pt.PTable.maximum_entropy(D=3, V=1)
    with pt.Session(":memory:") as s:
        s.register("p", PERSONS.with_columns(pl.Series("rk", [7, 11, 13, 17, 19, 23, 29, 31, 37])))
        s.add_record_keys("p", record_key_column="rk", bits=6)
        plain = s.cell_key("p", pt.TableSpec({"geo": gap, "sex": None}), p, original=True)
        blanked = s.cell_key("p", pt.TableSpec({"geo": gap, "sex": None}), p, original=True, threshold=3)
    both = plain.join(blanked, on=["geo", "sex"], suffix="_t")
    # a cell is blanked exactly when |n_pert| < 3, negative cells included
    assert (both["n_pert_t"].is_null() == (both["n_pert"].abs() < 3)).all()
    assert both.filter(pl.col("n") < 0)["n_pert_t"].null_count() < both.filter(pl.col("n") < 0).height


def test_record_keys_are_never_a_dimension_weight_or_sum() -> None:
    with pt.Session(":memory:") as s:
        s.register("p", PERSONS.with_columns(pl.Series("rk", [7, 11, 13, 17, 19, 23, 29, 31, 37])))
        s.add_record_keys("p", record_key_column="rk", bits=6)
        for spec in (pt.TableSpec({"rkey": None}), pt.TableSpec({"sex": None}, weight="rkey"),
                     pt.TableSpec({"sex": None}, sums=["rkey"])):
            with pytest.raises(pt.SpecError, match="record keys, which are secret"):
                s.tabulate("p", spec)
