"""Direct disclosure (GaussSuppression's SuppressDirectDisclosure / SSBtools' FindDisclosiveCells):
the cells that hold all but at most ``coalition`` of their row along a characteristic dimension
are primary. The data is the package's example ``tex``; the expected cells were worked out by
hand from the published definition (the rows and their totals are written out below)."""

from __future__ import annotations

import polars as pl
import pytest

import protab as pt
from protab.errors import SpecError
from protab.suppression import derivable
from protab.suppression.disclosure import disclosure_candidates

# the example data of SuppressDirectDisclosure / FindDisclosiveCells
TEX = pl.DataFrame({
    "v1": ["a", "b", "c"] * 4,
    "v2": ["i", "i", "i", "h", "h", "h", "i", "i", "i", "h", "h", "h"],
    "v3": ["y"] * 6 + ["z"] * 6,
    "freq": [0, 0, 5, 0, 2, 3, 1, 0, 3, 1, 1, 2],
})

# coalition = 1, every dimension characteristic. By v1: row (i, Total) = a1 b0 c8 of 9, (i, y) =
# a0 b0 c5 of 5, (i, z) = a1 b0 c3 of 4 -> c. By v2: (a, Total) and (a, z) = h1 i1 of 2 (both are
# the largest, one outside) -> h and i; (b, Total) h3 of 3, (b, y) h2 of 2, (b, z) h1 of 1 -> h.
# By v3: (a, Total) = y0 z2 -> z; (a, h), (a, i) = z1 of 1 -> z; (b, Total) = y2 z1 -> y; (b, h) -> y.
PRIMARY_C1 = {
    ("c", "i", "Total"), ("c", "i", "y"), ("c", "i", "z"),
    ("a", "h", "Total"), ("a", "i", "Total"), ("a", "h", "z"), ("a", "i", "z"),
    ("b", "h", "Total"), ("b", "h", "y"), ("b", "h", "z"),
    ("a", "Total", "z"), ("b", "Total", "y"),
}
# coalition = 2 adds, by v1: (Total, y) = a0 b2 c8 of 10, (h, y) = a0 b2 c3 of 5, (h, z) =
# a1 b1 c2 of 4 -> c; by v3: (c, h) = y3 z2 of 5 -> y.
PRIMARY_C2 = PRIMARY_C1 | {("c", "Total", "y"), ("c", "h", "y"), ("c", "h", "z")}


def _run(spec: pt.TableSpec, **kw) -> pl.DataFrame:
    with pt.Session(":memory:") as s:
        s.register("t", TEX)
        return s.suppress("t", spec, **kw)


def _cells(out: pl.DataFrame, label: str, dims: list[str]) -> set[tuple[str, ...]]:
    return {tuple(r) for r in out.filter(pl.col("suppressed") == label).select(dims).rows()}


@pytest.mark.parametrize("coalition, expected", [(1, PRIMARY_C1), (2, PRIMARY_C2)])
def test_cells_holding_all_but_a_coalition_of_their_row_are_primary(coalition, expected):
    dims = ["v1", "v2", "v3"]
    out = _run(pt.TableSpec(dims, freq="freq"), direct_disclosure=True, coalition=coalition)
    assert out.height == 36  # 4 x 3 x 3 cells, margins included
    assert _cells(out, "primary", dims) == expected


def test_primary_cells_of_a_direct_disclosure_are_not_derivable():
    dims = ["v1", "v2", "v3"]
    with pt.Session(":memory:") as s:
        s.register("t", TEX)
        spec = pt.TableSpec(dims, freq="freq")
        out = s.suppress("t", spec, direct_disclosure=True)
        X, _, published = s.model_matrix("t", spec)
    keys = published.select(dims).join(out.select([*dims, "suppressed"]), on=dims, how="left", maintain_order="left")
    suppressed = (keys["suppressed"] != "no").to_numpy()
    assert suppressed.sum() > len(PRIMARY_C1)  # secondary cells were needed
    assert not (derivable(X, suppressed) & (keys["suppressed"] == "primary").to_numpy()).any()


def test_two_way_example_has_the_secondary_cells_worked_out_by_hand():
    """v1 x v2 of tex: inner a.h 1, a.i 1, b.h 3, b.i 0, c.h 5, c.i 8. Primary (rows as above):
    a.h, a.i (2 in row a), b.h (all of row b), c.i (8 of 9 in column i). Candidates in the
    package's order (18, 13, 9, 9, 5 [c.h], 3 [b.T], 2 [a.T], then the zero b.i): Total, c.T,
    T.h are published, T.i follows from them; c.h would give c.i = c.T - c.h: secondary; b.T
    would give a.T = Total - c.T - b.T, a sum of the two singletons a.h and a.i (anySumNOTprimary:
    a sum over singleton rows that covers primary cells): secondary, and so is a.T itself; b.i
    is then published (b.h stays within b.h + a.h + a.i)."""
    out = _run(pt.TableSpec(["v1", "v2"], freq="freq"), direct_disclosure=True)
    dims = ["v1", "v2"]
    assert _cells(out, "primary", dims) == {("a", "h"), ("a", "i"), ("b", "h"), ("c", "i")}
    assert _cells(out, "secondary", dims) == {("a", "Total"), ("b", "Total"), ("c", "h")}
    published = out.filter(pl.col("suppressed") == "no")
    assert dict(zip(published["v1"] + "." + published["v2"], published["n"])) == {
        "Total.Total": 18, "Total.h": 9, "Total.i": 9, "b.i": 0, "c.Total": 13}


def test_only_the_named_characteristic_dimension_is_judged():
    dims = ["v1", "v2", "v3"]
    out = _run(pt.TableSpec(dims, freq="freq"), direct_disclosure="v1")
    # by v1 alone (coalition 1): the three cells of c in rows (i, Total), (i, y), (i, z)
    assert _cells(out, "primary", dims) == {("c", "i", "Total"), ("c", "i", "y"), ("c", "i", "z")}


def test_disclosure_candidates_publish_zeros_before_small_cells():
    # n:        5  1  0  2  1  0
    # key (1):  5  0  1  2  0  1 -> order 0, 3, 2, 5, 1, 4 (stable among ties)
    assert disclosure_candidates([5, 1, 0, 2, 1, 0], 1).tolist() == [0, 3, 2, 5, 1, 4]
    # secondary_zeros = 0: zeros first of all
    assert disclosure_candidates([5, 1, 0, 2, 1, 0], 0).tolist() == [2, 5, 0, 3, 1, 4]


def test_min_frequency_adds_its_small_cells_to_the_disclosive_ones():
    dims = ["v1", "v2", "v3"]
    out = _run(pt.TableSpec(dims, freq="freq"), direct_disclosure=True, min_frequency=2)
    ones = {("a", "h", "z"), ("a", "i", "z"), ("b", "Total", "z"), ("b", "h", "z"), ("a", "h", "Total"),
            ("a", "i", "Total")}
    assert _cells(out, "primary", dims) == PRIMARY_C1 | ones


@pytest.mark.parametrize("kw, message", [
    (dict(direct_disclosure="age"), "does not have: 'age'"),
    (dict(direct_disclosure=True, coalition=-1), "coalition must be a whole number of 0 or more"),
    (dict(direct_disclosure=True, protect_zeros=True), "do not protect zeros"),
    (dict(direct_disclosure=False), "not False"),
    (dict(coalition=2, min_frequency=3), "coalition is the coalition of direct_disclosure"),
])
def test_bad_direct_disclosure_arguments_are_refused(kw, message):
    with pytest.raises(SpecError, match=message):
        _run(pt.TableSpec(["v1", "v2", "v3"], freq="freq"), **kw)


def test_a_hierarchical_characteristic_dimension_is_refused():
    data = TEX.with_columns(g=pl.when(pl.col("v1") == "c").then(pl.lit("G2")).otherwise(pl.lit("G1")))
    with pt.Session(":memory:") as s:
        s.register("t", data)
        spec = pt.TableSpec({"v1": s.hierarchy_from_columns("t", ["g", "v1"]), "v2": None}, freq="freq")
        with pytest.raises(SpecError, match="'v1' of direct_disclosure has a hierarchy"):
            s.suppress("t", spec, direct_disclosure="v1")
        # a hierarchy on another dimension is fine: the rows are its codes
        out = s.suppress("t", spec, direct_disclosure="v2")
    assert (out["suppressed"] == "primary").any()


def test_a_table_with_sums_cannot_use_direct_disclosure():
    from protab.magnitude import SensitivityRules

    data = TEX.with_columns(value=pl.col("freq") * 10.0)
    with pt.Session(":memory:") as s:
        s.register("t", data)
        with pytest.raises(SpecError, match="rules of frequency tables"):
            s.suppress("t", pt.TableSpec(["v1", "v2"], sums=["value"]), rules=SensitivityRules(min_frequency=2),
                       direct_disclosure=True)


def test_direct_disclosure_reaches_linked_tables_in_the_global_mode():
    with pt.Session(":memory:") as s:
        s.register("t", TEX)
        a, b = s.suppress("t", [pt.TableSpec(["v1", "v2"], freq="freq"), pt.TableSpec(["v1", "v3"], freq="freq")],
                          direct_disclosure=True)
        assert _cells(a, "primary", ["v1", "v2"]) == {("a", "h"), ("a", "i"), ("b", "h"), ("c", "i")}
        assert _cells(b, "primary", ["v1", "v3"]) == {("a", "z"), ("b", "y")}  # by v3: rows a and b
        with pytest.raises(NotImplementedError, match="linked='global'"):
            s.suppress("t", [pt.TableSpec(["v1", "v2"], freq="freq"), pt.TableSpec(["v1", "v3"], freq="freq")],
                       direct_disclosure=True, linked="local")
