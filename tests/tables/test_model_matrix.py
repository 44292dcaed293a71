"""model_matrix: the dummy matrix X (inner × published, z = Xᵀy) from the SQL roll-up."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import protab as pt

# Langsrud & Lupp (2022): party × age × sex inner table (also in SmallCountRounding's docs)
SCR_INNER = pl.DataFrame(
    [
        ("A", "young", "male", 0), ("A", "young", "female", 0), ("A", "middle", "male", 8),
        ("A", "middle", "female", 4), ("A", "old", "male", 4), ("A", "old", "female", 1),
        ("B", "young", "male", 0), ("B", "young", "female", 1), ("B", "middle", "male", 3),
        ("B", "middle", "female", 5), ("B", "old", "male", 1), ("B", "old", "female", 0),
        ("C", "young", "male", 2), ("C", "young", "female", 3), ("C", "middle", "male", 9),
        ("C", "middle", "female", 6), ("C", "old", "male", 2), ("C", "old", "female", 7),
    ],
    schema=["party", "age", "sex", "n"],
    orient="row",
)


def test_xty_equals_published_counts(session, persons, h_muni):
    session.register("p", persons)
    for spec in [
        pt.TableSpec({"municipality": h_muni, "sex": None, "age": None}),
        pt.TableSpec({"municipality": h_muni, "sex": None, "age": None}, formula="municipality*sex + age"),
        pt.TableSpec({"sex": None, "age": None}, drop_empty=True),
    ]:
        for extend0 in (True, False):
            X, inner, published = session.model_matrix("p", spec, extend0=extend0)
            assert X.shape == (inner.height, published.height)
            np.testing.assert_array_equal(X.T @ inner["n"].to_numpy(), published["n"].to_numpy())
            assert set(np.unique(X.data)) == {1.0}
            assert published.equals(session.tabulate("p", spec))


def test_full_table_of_the_3x3_example():
    inner = pl.DataFrame({"r": ["1", "1", "1", "2", "2", "2", "3", "3", "3"],
                          "c": ["1", "2", "3"] * 3, "n": [3, 6, 2, 1, 4, 7, 5, 8, 27]})
    X, rows, cols = pt.model_matrix(inner, pt.TableSpec({"r": None, "c": None}))
    assert X.shape == (9, 16)  # 9 inner cells; 9 + 3 + 3 + 1 published
    assert X.sum(axis=0).tolist()[0][0] == 9  # the grand total covers every inner cell
    total = cols.filter((pl.col("r") == "Total") & (pl.col("c") == "Total"))
    assert total["n"].to_list() == [63]


def test_formula_and_extend0_on_the_party_age_sex_table():
    spec = pt.TableSpec({"party": None, "age": None, "sex": None}, formula="party*age + party*sex")
    sparse_inner = SCR_INNER.filter(pl.col("n") > 0)
    X, inner, published = pt.model_matrix(sparse_inner, spec)
    # Extend0: the zero cells come back, every combination of occurring codes
    assert inner.height == 18 and inner["n"].sum() == 56
    # (3+1)×(3+1) + (3+1)×(2+1) − (3+1) published cells
    assert published.height == 16 + 12 - 4
    np.testing.assert_array_equal(X.T @ inner["n"].to_numpy(), published["n"].to_numpy())
    # each inner cell is under: its party×age, party×sex, party, age, sex cells and the total
    assert set(np.asarray(X.sum(axis=1)).ravel()) == {6}
    X0, inner0, _ = pt.model_matrix(sparse_inner, spec, extend0=False)
    assert inner0.height == 14 and X0.shape[0] == 14


def test_structural_zeros_are_not_added():
    spec = pt.TableSpec({"party": None, "age": None})
    data = pl.DataFrame({"party": ["A", "B"], "age": ["young", "old"], "n": [3, 4]})
    structural = pl.DataFrame({"party": ["A"], "age": ["old"]})
    _, inner, _ = pt.model_matrix(data, spec, structural_zeros=structural)
    assert sorted(inner.select("party", "age").rows()) == [("A", "young"), ("B", "old"), ("B", "young")]
    with pytest.raises(pt.InputError, match="missing column.*age"):
        pt.model_matrix(data, spec, structural_zeros=pl.DataFrame({"party": ["A"]}))


def test_frame_and_microdata_give_the_same_matrix(session, persons, h_muni):
    session.register("p", persons)
    spec = pt.TableSpec({"municipality": h_muni, "sex": None})
    X1, inner1, pub1 = session.model_matrix("p", spec)
    X2, inner2, pub2 = pt.model_matrix(session.inner_cells("p", spec), spec)
    assert (X1 != X2).nnz == 0
    assert inner1.equals(inner2) and pub1.equals(pub2)


def test_missing_frequency_column():
    with pytest.raises(pt.InputError, match="no frequency column 'n'"):
        pt.model_matrix(pl.DataFrame({"a": ["x"], "count": [1]}), pt.TableSpec({"a": None}))


def test_run_matrix_equals_the_session_matrix_for_trees(session, persons, h_muni):
    # TableRun.matrix() carries the coefficients of non-tree hierarchies
    # (tests/hierarchy/test_hierarchy_nontree.py); for trees it is the 0/1 matrix of model_matrix
    session.register("p", persons)
    spec = pt.TableSpec({"municipality": h_muni, "sex": None}, formula="municipality + sex")
    X, _, _ = session.model_matrix("p", spec)
    with session._run("p", spec, extend0=True) as run:
        X2 = run.matrix()
        assert set(run.pair_coef.tolist()) == {1}
    assert (X != X2).nnz == 0


def test_the_frame_function_and_the_session_method_are_one_idea_with_the_same_keywords(session):
    """pt.model_matrix(frame) is Session.model_matrix of that frame as a table, nested=True and
    extend0="all" included (municipalities nest in counties: 6 × 2 inner cells, not 6 × 3 × 2)."""
    rng = np.random.default_rng(5)
    muni = rng.integers(0, 6, 200)
    records = pl.DataFrame({"muni": [f"m{m}" for m in muni], "county": [f"c{m // 2}" for m in muni],
                            "sex": rng.choice(["f", "m"], 200)}).with_columns(n=pl.lit(1))
    session.register("records", records)
    spec = pt.TableSpec({"muni": None, "county": None, "sex": None}, formula="muni*sex + county*sex")
    for kw in ({"nested": True, "extend0": "all"}, {"extend0": False}):
        X, inner, published = pt.model_matrix(records, spec, **kw)
        Xs, inner_s, published_s = session.model_matrix("records", spec, **kw)
        assert (X != Xs).nnz == 0 and inner.equals(inner_s) and published.equals(published_s)
    assert pt.model_matrix(records, spec, nested=True)[0].shape[0] < pt.model_matrix(records, spec)[0].shape[0]
