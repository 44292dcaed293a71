"""Audit of cell suppression (protab.suppression.audit_pattern): attacker intervals by LP.

(a) small tables checked by hand, (b) GaussSuppression's interval columns (tests/data/gauss_rules,
lpSolve runs; see its README), (c) random tables: the true value lies in every interval, and an
interval collapses exactly when the cell is a linear combination of published cells.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import sparse
from scipy.optimize import linprog

import protab as pt
from protab.errors import InputError, SpecError
from protab.suppression.pattern_audit import audit_pattern, intervals, p_percent_protection, protect

DATA = Path(__file__).resolve().parents[1] / "data" / "gauss_rules"
CASES = {c["id"]: c for c in json.loads((DATA / "cases.json").read_text())["cases"]}


def table2d(y: np.ndarray) -> sparse.csc_array:
    """X of an r×c table with row, column and grand totals. Columns: the inner cells row by
    row, then the r row totals, the c column totals, the grand total."""
    r, c = y.shape
    n = r * c
    cols = [np.eye(n)]
    rows = np.repeat(np.arange(r), c)
    colidx = np.tile(np.arange(c), r)
    cols.append((rows[:, None] == np.arange(r)[None, :]).astype(float))
    cols.append((colidx[:, None] == np.arange(c)[None, :]).astype(float))
    cols.append(np.ones((n, 1)))
    return sparse.csc_array(np.hstack(cols))


# ---------------------------------------------------------------------------------------------
# (a) by hand


Y22 = np.array([[5.0, 3.0], [2.0, 7.0]])  # cells 0..3 = a11 a12 a21 a22; 4,5 rows; 6,7 cols; 8 total
X22 = table2d(Y22)
Z22 = X22.T @ Y22.ravel()


def test_two_by_two_by_hand():
    # a11 = t, a12 = 8 − t, a21 = 7 − t, a22 = 2 + t, all ≥ 0  →  t ∈ [0, 7]
    lo, up = intervals(X22, Z22, [0, 1, 2, 3])
    np.testing.assert_allclose(lo[:4], [0, 1, 0, 2], atol=1e-9)
    np.testing.assert_allclose(up[:4], [7, 8, 7, 9], atol=1e-9)
    np.testing.assert_array_equal(lo[4:], Z22[4:])
    np.testing.assert_array_equal(up[4:], Z22[4:])


def test_two_by_two_audit_requirements():
    res = audit_pattern(X22, Z22, [0, 1, 2, 3], primary=[0], protection_lower=3, protection_upper=2)
    assert res["cell"].to_list() == [0, 1, 2, 3]
    assert res["primary"].to_list() == [True, False, False, False]
    assert res["protected"].to_list() == [True, True, True, True]  # 0 ≤ 5 − 3, 7 ≥ 5 + 2
    assert not res["exact"].any()
    res = audit_pattern(X22, Z22, [0, 1, 2, 3], primary=[0], protection_lower=3, protection_upper=2.5)
    assert res["protected"].to_list() == [False, True, True, True]  # 7 < 7.5
    # the lower requirement is capped at what y ≥ 0 allows: 5 − 10 < 0 = lo is still met
    res = audit_pattern(X22, Z22, [0, 1, 2, 3], primary=[0], protection_lower=10, protection_upper=1)
    assert res["protected"][0]
    res = audit_pattern(X22, Z22, [0, 1, 2, 3], primary=[0], protection_range=8)
    assert not res["protected"][0]  # width 7


def test_single_suppression_is_exact():
    lo, up = intervals(X22, Z22, [0])
    assert lo[0] == up[0] == pytest.approx(5.0)
    res = audit_pattern(X22, Z22, [0, 1])  # a row pair: both derivable from their columns
    assert res["exact"].all() and not res["protected"].any()


def test_blocks_are_joined_by_published_cells():
    """T = a+b+c+d, a and b suppressed: no suppressed cell covers both, but a+b = T − c − d."""
    y = np.array([4.0, 6.0, 1.0, 2.0])
    X = sparse.csc_array(np.hstack([np.eye(4), np.ones((4, 1))]))
    lo, up = intervals(X, X.T @ y, [0, 1])
    np.testing.assert_allclose([lo[0], up[0], lo[1], up[1]], [0, 10, 0, 10])
    lo, up = intervals(X, X.T @ y, [0, 1], upper=[5, 8, 9, 9])
    np.testing.assert_allclose([lo[0], up[0], lo[1], up[1]], [2, 5, 5, 8])


def test_independent_tables_are_separate_blocks():
    """Two tables side by side (no common margin): two blocks, same intervals as each alone."""
    y2 = np.array([[1.0, 4.0], [6.0, 2.0]])
    X = sparse.block_diag([X22, table2d(y2)], format="csc")
    z = X.T @ np.r_[Y22.ravel(), y2.ravel()]
    lo, up = intervals(X, z, [0, 1, 2, 3, 9, 10, 11, 12])
    np.testing.assert_allclose(lo[:4], [0, 1, 0, 2], atol=1e-9)
    np.testing.assert_allclose(up[:4], [7, 8, 7, 9], atol=1e-9)
    # rows 5, 8, columns 7, 6: a11 = t, a12 = 5 − t, a21 = 7 − t, a22 = 1 + t, t ∈ [0, 5]
    np.testing.assert_allclose(lo[9:13], [0, 0, 2, 1], atol=1e-9)
    np.testing.assert_allclose(up[9:13], [5, 5, 7, 6], atol=1e-9)


def test_unbounded_and_zero_cells():
    lo, up = intervals(X22, Z22, [0, 1, 2, 3], lower=None)
    assert np.isneginf(lo[:4]).all() and np.isposinf(up[:4]).all()
    # a published zero margin fixes the cells under it (y ≥ 0)
    y = np.array([[0.0, 0.0], [2.0, 7.0]])
    X = table2d(y)
    lo, up = intervals(X, X.T @ y.ravel(), [0, 1, 2, 3])
    np.testing.assert_allclose(lo[:4], [0, 0, 2, 7])
    np.testing.assert_allclose(up[:4], [0, 0, 2, 7])


def test_protect_two_by_two():
    supp = protect(X22, Z22, [0], [0], protection_lower=2, protection_upper=2)
    assert supp[0] and supp.sum() >= 4
    res = audit_pattern(X22, Z22, supp, primary=[0], protection_lower=2, protection_upper=2)
    assert res["protected"].all()
    # a requirement beyond what any suppression gives (a11 ≤ 7 with y ≥ 0 … the cell is capped
    # at its bounds, so ask for a range wider than the cell's attainable one with upper bounds)
    with pytest.raises(InputError, match="cannot"):
        protect(X22, Z22, [0], [0], protection_range=30, upper=10)


def test_errors():
    with pytest.raises(InputError, match="transposed"):
        intervals(X22, Y22.ravel(), [0])
    with pytest.raises(InputError, match="NaN"):
        intervals(X22, np.r_[np.nan, Z22[1:]], [0])
    with pytest.raises(InputError, match="outside"):
        intervals(X22, Z22, [12])
    with pytest.raises(InputError, match="inconsistent"):
        intervals(X22, Z22 + np.r_[np.zeros(8), 1.0], [0, 1, 2, 3])
    with pytest.raises(InputError, match="inconsistent"):  # the published cells need a negative cell
        y = np.array([[5.0, 3.0], [2.0, 7.0]])
        z = table2d(y).T @ y.ravel()
        z[4] = 20.0  # row 1 = 20, a11 = 25 published: a12 = −5 (propagation finds it)
        z[0] = 25.0
        intervals(X22, z, [1, 2, 3, 6, 8])
    with pytest.raises(InputError, match="lower > upper"):
        intervals(X22, Z22, [0], lower=5, upper=1)
    with pytest.raises(InputError, match="not suppressed"):
        audit_pattern(X22, Z22, [0, 1, 2, 3], primary=[5])
    with pytest.raises(SpecError, match="x1"):
        audit_pattern(X22, Z22, [0, 1, 2, 3], p_percent=10)
    with pytest.raises(SpecError, match="not both"):
        audit_pattern(X22, Z22, [0, 1, 2, 3], p_percent=10, x1=Z22, x2=Z22, protection_upper=1)
    with pytest.raises(InputError, match="NaN"):
        audit_pattern(X22, Z22, [0, 1, 2, 3], primary=[0], protection_upper=np.full(9, np.nan))
    with pytest.raises(InputError, match="matrix"):
        intervals([[1, 0]], [1, 0], [0])


# ---------------------------------------------------------------------------------------------
# (b) GaussSuppression's intervals


def _magnitude1(dims: dict[str, list[str] | None]):
    data = pl.read_csv(DATA / "inputs" / "magnitude1.csv")
    with pt.Session(":memory:") as s:
        s.register("micro", data.with_columns(pl.col(c).cast(pl.String) for c in ["sector4", "sector2", "geo", "eu"]))
        spec = pt.TableSpec({d: (s.hierarchy_from_columns("micro", h) if h else None) for d, h in dims.items()},
                            sums=["value"])
        X, _inner, published = s.model_matrix("micro", spec, extend0=True)
    return X, published


def _matched(case: str, dims):
    X, published = _magnitude1(dims)
    ref = pl.read_csv(DATA / "secondary" / f"{case}.csv")
    j = published.with_row_index("cell").join(ref, on=list(dims), how="inner", suffix="_ref")
    assert j.height == ref.height == CASES[case]["n_cells"], "a cell of GaussSuppression's table is missing"
    z = published["value"].to_numpy()
    np.testing.assert_allclose(j["value"], j["value_ref"], atol=1e-9)
    cell = j["cell"].to_numpy()

    def mask(col: str | pl.Expr) -> np.ndarray:
        m = np.zeros(X.shape[1], dtype=bool)
        m[cell] = j.select(col).to_series().to_numpy()
        return m

    return X, z, j, cell, mask


PP30 = {"geo": None, "sector4": ["sector2", "sector4"]}


def test_gauss_intervals_pp30():
    X, z, j, cell, mask = _matched("sec_intervals_pp30_lpSolve", PP30)
    lo, up = intervals(X, z, mask("suppressed"))
    has = j["lo"].is_not_null().to_numpy()
    assert has.sum() == 14
    np.testing.assert_allclose(lo[cell][has], j["lo"].to_numpy()[has], atol=1e-6)
    np.testing.assert_allclose(up[cell][has], j["up"].to_numpy()[has], atol=1e-6)


def test_gauss_intervals_range_before_and_after():
    X, z, j, cell, mask = _matched("sec_intervals_pp30_range_lpSolve", PP30)
    first = mask(pl.col("suppressed_integer").is_in([1, 2]))
    final = mask("suppressed")
    primary = mask("primary")
    rlim = np.zeros(X.shape[1])
    rlim[cell] = j["rlim_value"].fill_null(0).to_numpy()
    has = j["lo_1"].is_not_null().to_numpy()
    for supp, c_lo, c_up in ((first, "lo_1", "up_1"), (final, "lo", "up")):
        lo, up = intervals(X, z, supp)
        np.testing.assert_allclose(lo[cell][has], j[c_lo].to_numpy()[has], atol=1e-6)
        np.testing.assert_allclose(up[cell][has], j[c_up].to_numpy()[has], atol=1e-6)
    # the range requirement: GaussSuppression suppressed more because of the 4 narrow primaries
    before = audit_pattern(X, z, first, primary=primary, protection_range=rlim)
    narrow = before.filter(~pl.col("protected"))["cell"].to_numpy()
    expect = j.filter(pl.col("primary") & (pl.col("up_1") - pl.col("lo_1") < pl.col("rlim_value")))
    assert sorted(narrow.tolist()) == sorted(expect["cell"].to_list()) and narrow.size == 4
    after = audit_pattern(X, z, final, primary=primary, protection_range=rlim)
    assert after["protected"].all()
    # protect() from the first pattern ends protected, here with GaussSuppression's one extra cell
    mine = protect(X, z, first, primary, protection_range=rlim)
    assert (mine >= first).all()
    np.testing.assert_array_equal(np.flatnonzero(mine & ~first), np.flatnonzero(final & ~first))
    assert audit_pattern(X, z, mine, primary=primary, protection_range=rlim)["protected"].all()


def test_gauss_compute_intervals_hierarchical():
    X, z, j, cell, mask = _matched("computeintervals_vignette_dom_hier",
                                   {"sector4": ["sector2", "sector4"], "geo": ["eu", "geo"]})
    res = audit_pattern(X, z, mask("suppressed"), primary=mask("primary"))
    got = pl.DataFrame({"cell": cell}).join(res, on="cell", how="left")
    has = j["lo"].is_not_null().to_numpy()
    assert has.sum() == 11 and got["primary"].to_numpy()[has].all()
    np.testing.assert_allclose(got["lo"].to_numpy()[has], j["lo"].to_numpy()[has], atol=1e-6)
    np.testing.assert_allclose(got["up"].to_numpy()[has], j["up"].to_numpy()[has], atol=1e-6)
    assert not res["exact"].any()


def test_p_percent_protection_matches_gauss_protection_intervals():
    ref = pl.read_csv(DATA / "primary" / "mag_pp_hier_p10_company_intervals.csv").filter(
        pl.col("lomax_value").is_not_null())
    assert ref.height > 5
    z = ref["value"].to_numpy()
    d1, d2 = ref["dominant1"].to_numpy(), ref["dominant2"].to_numpy()
    pl_ = p_percent_protection(10, z, d1 * z, (d2 - d1) * z)
    np.testing.assert_allclose(np.maximum(0, z - pl_), ref["lomax_value"], atol=1e-9)
    np.testing.assert_allclose(z + pl_, ref["upmin_value"], atol=1e-9)


def test_audit_with_p_percent():
    # a11 = 5 with contributions 4, 1: PL = 0.5·4 − (5 − 4 − 1) = 2 → needs [3, 7] ⊂ [0, 7]
    x1 = np.r_[4.0, np.zeros(8)]
    x2 = np.r_[1.0, np.zeros(8)]
    res = audit_pattern(X22, Z22, [0, 1, 2, 3], primary=[0], p_percent=50, x1=x1, x2=x2)
    assert res["required_upper"][0] == res["required_lower"][0] == pytest.approx(2.0)
    assert res["protected"].all()
    res = audit_pattern(X22, Z22, [0, 1, 2, 3], primary=[0], p_percent=80, x1=x1, x2=x2)  # PL 3.2 → 8.2 > 7
    assert not res["protected"][0]


# ---------------------------------------------------------------------------------------------
# (c) random tables


def _naive(X: np.ndarray, z: np.ndarray, supp: np.ndarray, c: int, bounds) -> tuple[float, float]:
    pub = ~supp
    out = []
    for sense in (1.0, -1.0):
        r = linprog(sense * X[:, c], A_eq=X[:, pub].T, b_eq=z[pub], bounds=bounds, method="highs")
        assert r.status in (0, 3)
        out.append(sense * r.fun if r.status == 0 else -sense * np.inf)
    return out[0], out[1]


@st.composite
def tables(draw):
    three_way = draw(st.booleans())
    if three_way:  # a 2×2×k table: all margins of a three-way table
        k = draw(st.integers(2, 3))
        shape = (2, 2, k)
        idx = np.array(np.unravel_index(np.arange(2 * 2 * k), shape)).T
        cols = []
        for keep in [(0, 1, 2), (0, 1), (0, 2), (1, 2), (0,), (1,), (2,), ()]:
            sub = idx[:, list(keep)] if keep else np.zeros((len(idx), 0), dtype=int)
            _, inv = np.unique(sub, axis=0, return_inverse=True)
            inv = inv.ravel()
            cols.append((inv[:, None] == np.arange(inv.max() + 1)[None, :]).astype(float))
        X = np.hstack(cols)
        n = idx.shape[0]
    else:
        r, c = draw(st.integers(2, 4)), draw(st.integers(2, 4))
        n = r * c
        X = table2d(np.zeros((r, c))).toarray()
    y = np.array(draw(st.lists(st.integers(1, 30), min_size=n, max_size=n)), dtype=float)
    m = X.shape[1]
    supp = np.array(draw(st.lists(st.booleans(), min_size=m, max_size=m)))
    lower = draw(st.sampled_from([0.0, None]))
    slack = draw(st.none() | st.lists(st.integers(1, 10), min_size=n, max_size=n))
    upper = None if slack is None else y + np.array(slack, dtype=float)
    return X, y, supp, lower, upper


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables())
def test_random_tables_contain_truth_and_flag_derivable_cells(t):
    X, y, supp, lower, upper = t
    z = X.T @ y
    lo, up = intervals(sparse.csc_array(X), z, supp, lower=lower, upper=upper)
    assert (lo <= z + 1e-7).all() and (up >= z - 1e-7).all()
    P = X[:, ~supp]
    rank = np.linalg.matrix_rank(P) if P.shape[1] else 0
    bounds = np.column_stack([np.full(y.size, -np.inf if lower is None else lower),
                              np.full(y.size, np.inf) if upper is None else upper])
    for c in np.flatnonzero(supp):  # y is inside its bounds: only linear combinations disclose
        derivable = (np.linalg.matrix_rank(np.column_stack([P, X[:, c]])) == rank)
        assert (lo[c] == up[c]) == derivable, (c, lo[c], up[c])
        # the same numbers as the plain two LPs over the whole table
        a, b = _naive(X, z, supp, c, bounds)
        assert lo[c] == pytest.approx(a, abs=1e-6) and up[c] == pytest.approx(b, abs=1e-6)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(), st.integers(0, 10_000), st.sampled_from([0.1, 0.3, 0.6]))
def test_protect_random_tables(t, seed, share):
    X, y, _supp, _lower, _upper = t
    z = X.T @ y
    rng = np.random.default_rng(seed)
    n = y.size
    primary = np.zeros(X.shape[1], dtype=bool)
    primary[rng.choice(n, size=rng.integers(1, 3), replace=False)] = True  # inner cells
    req = share * z
    supp = protect(sparse.csc_array(X), z, primary, primary, protection_lower=req, protection_upper=req)
    assert (supp >= primary).all()
    res = audit_pattern(sparse.csc_array(X), z, supp, primary=primary, protection_lower=req, protection_upper=req)
    assert res.filter(pl.col("primary"))["protected"].all()


def test_the_old_name_audit_warns_naming_audit_pattern_and_is_it():
    import protab.suppression as sup

    with pytest.warns(DeprecationWarning, match="protab.suppression.audit_pattern"):
        assert sup.audit is sup.audit_pattern
