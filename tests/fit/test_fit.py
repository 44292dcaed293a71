"""protab.fit: Methods A/B/C (Langsrud 2019), lsfit_nonneg, IPF, integerising.

Reference numbers: tests/data/fits_3x3.json (Langsrud 2019, Tables 1–4). Model matrices are
built here with numpy, independently of protab's table code.
"""

from __future__ import annotations

import itertools
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protab import fit
from protab.errors import ConvergenceWarning, InputError, ProtabError
from protab.fit._exact_reductions import _reduce_zeros

REF = json.loads((Path(__file__).resolve().parents[1] / "data" / "fits_3x3.json").read_text())
TOL = REF["tolerance"]
Y3 = np.array(REF["inner"], dtype=float)


# ------------------------------------------------------------------------------------------
# Model matrices built in the test


def model_matrix(dims: tuple[int, ...], terms: list[tuple[int, ...]]) -> sp.csc_array:
    """X (inner × published): one column per cell of each term (a tuple of dimensions)."""
    n = int(np.prod(dims))
    codes = np.indices(dims).reshape(len(dims), n)
    rows, cols, offset = [], [], 0
    for term in terms:
        sizes = [dims[d] for d in term]
        col = np.ravel_multi_index(codes[list(term)], sizes) if term else np.zeros(n, int)
        rows.append(np.arange(n))
        cols.append(offset + col)
        offset += int(np.prod(sizes)) if term else 1
    r, c = np.concatenate(rows), np.concatenate(cols)
    return sp.csc_array((np.ones(r.size), (r, c)), shape=(n, offset))


def all_margins(k: int) -> list[tuple[int, ...]]:
    """Every proper margin of a k-way table: total first, then by order (like ModelMatrix)."""
    return [t for order in range(k) for t in itertools.combinations(range(k), order)]


def x3_totals() -> sp.csc_array:
    """3×3 table: row totals, column totals, grand total (9 × 7)."""
    return model_matrix((3, 3), [(0,), (1,), ()])


def x3_safe12() -> tuple[sp.csc_array, np.ndarray]:
    """The 7 totals plus the 5 unsuppressed inner cells (12 safe published cells)."""
    supp = [(r - 1) * 3 + (c - 1) for r, c in REF["suppressed_cells"]]
    safe = [i for i in range(9) if i not in supp]
    X = sp.hstack([x3_totals(), sp.identity(9, format="csc")[:, safe]], format="csc")
    return sp.csc_array(X), np.array(supp)


def random_table(draw_dims: tuple[int, ...], seed: int, p_zero: float) -> tuple[
    sp.csc_array, np.ndarray
]:
    rng = np.random.default_rng(seed)
    X = model_matrix(draw_dims, all_margins(len(draw_dims)))
    y0 = rng.poisson(4.0, X.shape[0]).astype(float)
    y0[rng.random(X.shape[0]) < p_zero] = 0.0
    return X, y0


dims_st = st.one_of(
    st.tuples(st.integers(2, 5), st.integers(2, 5)),
    st.tuples(st.integers(2, 4), st.integers(2, 4), st.integers(2, 4)),
)
SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


# ------------------------------------------------------------------------------------------
# Reference results (Langsrud 2019)


def test_method_a_suppressed_cells_reference() -> None:
    X, supp = x3_safe12()
    z = X.T @ Y3.ravel()
    y = fit.min_norm(X, z)
    want = REF["expected"]["method_A_suppressed_replaced"]
    got = {f"({i // 3 + 1},{i % 3 + 1})": y[i] for i in supp}
    for key, value in want.items():
        assert got[key] == pytest.approx(value, abs=TOL)
    # the published (safe) cells are reproduced exactly
    np.testing.assert_allclose(X.T @ y, z, atol=1e-10)


@pytest.mark.parametrize("solver", ["auto", "lsqr", "lsmr"])
def test_method_a_from_totals_reference(solver: str) -> None:
    X = x3_totals()
    y = fit.min_norm(X, X.T @ Y3.ravel(), solver=solver)  # type: ignore[arg-type]
    want = np.array(REF["expected"]["method_A_from_totals"])
    np.testing.assert_allclose(y.reshape(3, 3), want, atol=TOL)


@pytest.mark.parametrize("solver", ["auto", "fista", "newton", "trf"])
def test_method_b_from_totals_reference(solver: str) -> None:
    X = x3_totals()
    tol = 1e-13 if solver == "fista" else None  # the ridge-only directions converge slowly
    y = fit.nnls(X, X.T @ Y3.ravel(), solver=solver, tol=tol)  # type: ignore[arg-type]
    want = np.array(REF["expected"]["method_B_from_totals_nonneg"])
    np.testing.assert_allclose(y.reshape(3, 3), want, atol=TOL)
    assert y.min() >= 0


def test_ipf_loglinear_from_totals_reference() -> None:
    X = x3_totals()
    z = X.T @ Y3.ravel()
    res = fit.ipf(X, z)
    want = np.array(REF["expected"]["loglinear_ipf_from_totals"])
    np.testing.assert_allclose(res.y.reshape(3, 3), want, atol=TOL)
    # exactly r_i c_j / N
    r, c = Y3.sum(1), Y3.sum(0)
    np.testing.assert_allclose(res.y.reshape(3, 3), np.outer(r, c) / Y3.sum(), rtol=1e-10)
    assert res.converged and res.max_deviation <= 1e-9
    assert res.history and res.history[-1] == pytest.approx(res.max_deviation, abs=1e-9)


# ------------------------------------------------------------------------------------------
# Method A / B / C details


def test_min_norm_dense_and_lsqr_agree_on_rank_deficient_problem() -> None:
    X, y0 = random_table((4, 3, 3), seed=1, p_zero=0.3)
    z = X.T @ y0 + np.random.default_rng(2).integers(-2, 3, X.shape[1])
    a = fit.min_norm(X, z, solver="dense")
    b = fit.min_norm(X, z, solver="lsqr")
    np.testing.assert_allclose(a, b, atol=1e-8)
    np.testing.assert_allclose(a, np.linalg.pinv(X.T.toarray()) @ z, atol=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_nnls_sparse_solvers_match_dense_active_set(seed: int) -> None:
    rng = np.random.default_rng(seed)
    dims = tuple(int(d) for d in rng.integers(2, 5, 3))
    X, y0 = random_table(dims, seed=seed, p_zero=0.4)
    z = X.T @ y0 + rng.integers(-2, 3, X.shape[1])
    w = rng.choice([1.0, 1000.0], X.shape[1]) if seed % 2 else None
    ref = fit.nnls(X, z, weights=w, solver="active-set")
    # the same problem, independently: scipy.optimize.nnls on the dense stacked system
    from scipy.optimize import nnls as scipy_nnls

    ww = np.ones(X.shape[1]) if w is None else w
    A = np.sqrt(ww)[:, None] * X.T.toarray()
    lam = 1e-4 * np.sqrt((A**2).sum() / X.shape[0])
    direct, _ = scipy_nnls(np.vstack([A, lam * np.eye(X.shape[0])]),
                           np.concatenate([np.sqrt(ww) * z, np.zeros(X.shape[0])]))
    np.testing.assert_allclose(ref, direct, atol=1e-8)
    for solver in ("fista", "newton", "trf"):
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            got = fit.nnls(X, z, weights=w, solver=solver)  # type: ignore[arg-type]
        assert got.min() >= 0
        np.testing.assert_allclose(X.T @ got, X.T @ ref, atol=1e-5 * max(1, abs(z).max()))
        if solver == "newton":  # exact; fista and trf are loose along the ridge-only directions
            np.testing.assert_allclose(got, ref, atol=1e-6)


def test_method_c_weights_reproduce_exact_margins() -> None:
    """Perturbed inner cells, exact totals with weight 1000: totals almost exactly kept."""
    X3 = x3_totals()
    X = sp.csc_array(sp.hstack([sp.identity(9, format="csc"), X3], format="csc"))
    noise = np.array([1, -2, 0, 2, -1, 1, 0, -1, 2], float)
    z = np.concatenate([Y3.ravel() + noise, X3.T @ Y3.ravel()])
    w = np.concatenate([np.ones(9), np.full(7, 1000.0)])
    yc = fit.nnls(X, z, weights=w)
    yb = fit.nnls(X, z)
    margins = X3.T @ Y3.ravel()
    assert np.abs(X3.T @ yc - margins).max() < 0.01
    assert np.abs(X3.T @ yb - margins).max() > 0.1  # unweighted B does not keep them
    assert yc.min() >= 0


def test_nnls_ridge_is_scale_free() -> None:
    X = x3_totals()
    z = X.T @ Y3.ravel()
    np.testing.assert_allclose(fit.nnls(X, 1000 * z), 1000 * fit.nnls(X, z), rtol=1e-7)
    np.testing.assert_allclose(
        fit.nnls(X, z, weights=np.full(7, 50.0)), fit.nnls(X, z), atol=1e-7
    )


# ------------------------------------------------------------------------------------------
# lsfit_nonneg


def _check_lsfit(X: sp.csc_array, z: np.ndarray, res: fit.LSFit) -> None:
    scale = max(1.0, float(np.abs(z).max()))
    # additive: exactly Xᵀy for the returned y, and non-negative
    np.testing.assert_allclose(X.T @ res.y, res.z, atol=1e-12 * scale)
    assert res.z.min() >= 0
    assert np.all(res.z[res.zeroed] == 0)
    # in the column space of Xᵀ (a second, independent projection leaves it unchanged)
    back = X.T @ fit.min_norm(X, res.z, solver="dense")
    np.testing.assert_allclose(back, res.z, atol=1e-8 * scale)
    # least squares on the reduced problem: residual orthogonal to the kept columns of Xᵀ
    rows_zero = (X @ res.zeroed.astype(float)) > 0
    keep_c = ~res.zeroed
    A = X.T.toarray()[np.ix_(keep_c, ~rows_zero)]
    grad = A.T @ (z[keep_c] - res.z[keep_c])
    assert np.abs(grad).max(initial=0.0) <= 1e-8 * scale * max(1, X.shape[1])
    # inner cells under zeroed published cells are 0
    assert np.all(res.y[rows_zero] == 0)


@SETTINGS
@given(dims=dims_st, seed=st.integers(0, 2**31), p_zero=st.sampled_from([0.0, 0.3, 0.7]))
def test_lsfit_nonneg_is_additive_nonnegative_projection(
    dims: tuple[int, ...], seed: int, p_zero: float
) -> None:
    X, y0 = random_table(dims, seed, p_zero)
    rng = np.random.default_rng(seed + 1)
    z = X.T @ y0 + rng.integers(-2, 3, X.shape[1])
    res = fit.lsfit_nonneg(X, z)
    _check_lsfit(X, z, res)
    assert res.iterations >= 1


@SETTINGS
@given(dims=dims_st, seed=st.integers(0, 2**31), p_zero=st.sampled_from([0.0, 0.3, 0.7]))
def test_lsfit_nonneg_returns_additive_z_unchanged(
    dims: tuple[int, ...], seed: int, p_zero: float
) -> None:
    X, y0 = random_table(dims, seed, p_zero)
    z = X.T @ y0
    res = fit.lsfit_nonneg(X, z)
    np.testing.assert_allclose(res.z, z, atol=1e-9)
    assert res.iterations <= 2


def test_lsfit_nonneg_lsqr_matches_dense() -> None:
    X, y0 = random_table((4, 4, 3), seed=5, p_zero=0.5)
    z = X.T @ y0 + np.random.default_rng(6).integers(-2, 3, X.shape[1])
    a = fit.lsfit_nonneg(X, z, solver="dense")
    b = fit.lsfit_nonneg(X, z, solver="lsqr")
    np.testing.assert_array_equal(a.zeroed, b.zeroed)
    np.testing.assert_allclose(a.z, b.z, atol=1e-8)
    np.testing.assert_allclose(a.y, b.y, atol=1e-7)


def test_lsfit_nonneg_zeroes_negative_fits_and_their_cells() -> None:
    X = x3_totals()
    z = X.T @ Y3.ravel()
    z[3] = -6.0  # first column total pushed negative: its fit is negative, set to 0
    res = fit.lsfit_nonneg(X, z)
    assert res.zeroed[3] and res.z[3] == 0
    assert np.all(res.y.reshape(3, 3)[:, 0] == 0)
    _check_lsfit(X, z, res)


def test_lsfit_nonneg_weighted_and_exact_zeros() -> None:
    X, y0 = random_table((3, 4), seed=3, p_zero=0.3)
    z_true = X.T @ y0
    z = z_true + np.random.default_rng(4).integers(-2, 3, X.shape[1])
    z[0] = z_true[0]  # the grand total is exact: weight it heavily
    w = np.ones(X.shape[1])
    w[0] = 1e6
    res = fit.lsfit_nonneg(X, z, weights=w)
    assert res.z[0] == pytest.approx(z_true[0], abs=1e-3)
    np.testing.assert_allclose(X.T @ res.y, res.z, atol=1e-10)
    z2 = z.copy()
    z2[1] = 0.0
    res2 = fit.lsfit_nonneg(X, z2, exact_zeros=True)
    assert res2.zeroed[1] and res2.z[1] == 0


def test_lsfit_limit_none_is_plain_projection() -> None:
    X = x3_totals()
    z = X.T @ Y3.ravel() + np.array([1, -2, 0, 2, -1, 1, 0])
    res = fit.lsfit_nonneg(X, z, limit=None)
    np.testing.assert_allclose(res.z, X.T @ fit.min_norm(X, z), atol=1e-10)
    assert res.iterations == 1 and not res.zeroed.any()


# ------------------------------------------------------------------------------------------
# IPF


@SETTINGS
@given(dims=dims_st, seed=st.integers(0, 2**31), p_zero=st.sampled_from([0.0, 0.3, 0.6]),
       frac=st.booleans())
def test_ipf_reproduces_consistent_targets(
    dims: tuple[int, ...], seed: int, p_zero: float, frac: bool
) -> None:
    X, y0 = random_table(dims, seed, p_zero)
    if frac:  # non-integer targets
        y0 = y0 * np.random.default_rng(seed).uniform(0.1, 2.0, y0.size)
    z = X.T @ y0
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        res = fit.ipf(X, z, max_iter=5000)
    assert res.converged
    assert res.max_deviation <= 1e-10 * max(1.0, z.max())
    assert res.y.min() >= 0
    np.testing.assert_allclose(X.T @ res.y, z, atol=1e-9 * max(1.0, z.max()))
    # zero targets zero their cells
    under_zero = (X @ (z == 0).astype(float)) > 0
    assert np.all(res.y[under_zero] == 0)


@SETTINGS
@given(dims=st.tuples(st.integers(2, 5), st.integers(2, 5)), seed=st.integers(0, 2**31))
def test_ipf_is_loglinear_fit_of_independence(dims: tuple[int, int], seed: int) -> None:
    """From row and column totals IPF gives r_i c_j / N (where N > 0)."""
    X, y0 = random_table(dims, seed, 0.2)
    z = X.T @ y0
    res = fit.ipf(X, z)
    t = y0.reshape(dims)
    N = t.sum()
    want = np.outer(t.sum(1), t.sum(0)) / N if N > 0 else np.zeros(dims)
    np.testing.assert_allclose(res.y.reshape(dims), want, atol=1e-9 * max(1.0, N))


def test_ipf_boundary_solution_converges() -> None:
    """A 3-way table with all 2-way margins whose fit lies on the boundary (forced zeros that no
    zero margin implies): the LP support step lets IPF converge."""
    t = np.zeros((2, 2, 2))
    t[0, 0, 0] = t[1, 1, 0] = t[0, 1, 1] = t[1, 0, 1] = 1.0  # parity table: every margin is 1
    t[0, 0, 1] = 0.0
    t2 = t.copy()
    t2[0, 0, 0] += 1
    t2[0, 0, 1] += 1
    t2[1, 1, 0] += 1
    t2[1, 1, 1] += 1  # add a second parity-like table: some cells forced to zero
    X = model_matrix((2, 2, 2), [(0, 1), (0, 2), (1, 2)])
    for table in (t, t2):
        z = X.T @ table.ravel()
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            res = fit.ipf(X, z, lp_after=5)
        assert res.converged
        np.testing.assert_allclose(X.T @ res.y, z, atol=1e-9)


def test_ipf_start_and_blocks() -> None:
    X, y0 = random_table((3, 4, 2), seed=9, p_zero=0.2)
    z = X.T @ y0
    blocks = fit.column_blocks(X)
    a = fit.ipf(X, z, blocks=blocks)
    b = fit.ipf(X, z)
    np.testing.assert_allclose(a.y, b.y, atol=1e-9)
    # every column its own block (R Mipf's column-by-column order): same limit
    c = fit.ipf(X, z, blocks=np.arange(X.shape[1]))
    np.testing.assert_allclose(c.y, b.y, atol=1e-8)
    # a seed table: the fit keeps its interactions; a zero start fixes a cell to 0
    start = np.ones(X.shape[0])
    start[0] = 0.0
    d = fit.ipf(X, X.T @ np.where(np.arange(X.shape[0]) == 0, 0.0, y0 + 1), start=start)
    assert d.converged and d.y[0] == 0


def test_ipf_start_seed_table_is_kept_when_consistent() -> None:
    X = x3_totals()
    z = X.T @ Y3.ravel()
    res = fit.ipf(X, z, start=Y3.ravel())  # start already meets the targets
    np.testing.assert_allclose(res.y, Y3.ravel(), atol=1e-12)
    assert res.iterations == 0


def test_ipf_inconsistent_targets_warn_and_strict_raises() -> None:
    X = x3_totals()
    z = X.T @ Y3.ravel()
    z[0] += 1.0  # a row total that is not the sum of its cells
    with pytest.warns(ConvergenceWarning, match=r"max \|Xᵀy − z\|"):
        res = fit.ipf(X, z)
    assert not res.converged
    assert res.status in {"inconsistent", "stalled", "max_iter"}
    assert res.max_deviation > 0.1
    assert len(res.history) == res.iterations > 0
    with pytest.raises(ProtabError, match="did not converge"):
        fit.ipf(X, z, strict=True)
    with pytest.warns(ConvergenceWarning):
        res2 = fit.ipf(X, z, exact_support=False, max_iter=200)
    assert not res2.converged and res2.status in {"stalled", "max_iter"}


def test_ipf_iteration_limit_warns() -> None:
    X, y0 = random_table((4, 4, 3), seed=2, p_zero=0.0)
    z = X.T @ y0
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        res = fit.ipf(X, z, max_iter=1, reduce_singletons=False)
    assert not res.converged and res.status == "max_iter" and res.iterations == 1


def test_ipf_reductions_zero_and_singleton() -> None:
    # an inner cell published alone: fixed exactly; a zero margin fixes its cells
    X3 = x3_totals()
    X = sp.csc_array(sp.hstack([X3, sp.identity(9, format="csc")[:, [4]]], format="csc"))
    t = Y3.copy()
    t[2, :] = 0
    z = X.T @ t.ravel()
    res = fit.ipf(X, z)
    assert res.converged
    assert res.y[4] == pytest.approx(4.0, abs=1e-12)
    assert res.fixed is not None and res.fixed[4] and np.all(res.fixed[6:9])
    assert np.all(res.y[6:9] == 0)


def test_reduce_zeros_masks() -> None:
    X = x3_totals()
    z = np.array([0.0, 5, 6, 1, 2, 8, 11])
    rows_zero, cols_removed = _reduce_zeros(X, z == 0)
    np.testing.assert_array_equal(rows_zero, [True] * 3 + [False] * 6)
    np.testing.assert_array_equal(cols_removed, [True] + [False] * 6)
    # zeroing both other rows leaves the column totals with one free cell, none empty
    rz, cr = _reduce_zeros(X, np.array([True, True, True, False, False, False, False]))
    assert rz.all() and cr.all()  # everything is forced to zero


def test_column_blocks_are_disjoint_terms() -> None:
    dims = (3, 4, 2)
    terms = all_margins(3)
    X = model_matrix(dims, terms)
    blocks = fit.column_blocks(X)
    sizes = [int(np.prod([dims[d] for d in t])) for t in terms]
    expected = np.repeat(np.arange(len(terms)), sizes)
    np.testing.assert_array_equal(blocks, expected)
    # disjoint for a shuffled column order, too, and independent of row order
    rng = np.random.default_rng(0)
    perm_c = rng.permutation(X.shape[1])
    Xs = X[:, perm_c]
    bs = fit.column_blocks(Xs)
    dense = Xs.toarray()
    for b in np.unique(bs):
        assert dense[:, bs == b].sum(1).max() <= 1
    perm_r = rng.permutation(X.shape[0])
    np.testing.assert_array_equal(fit.column_blocks(Xs[perm_r]), bs)


@SETTINGS
@given(dims=dims_st, seed=st.integers(0, 2**31))
def test_results_follow_a_permutation_of_the_inner_cells(
    dims: tuple[int, ...], seed: int
) -> None:
    X, y0 = random_table(dims, seed, 0.3)
    rng = np.random.default_rng(seed + 7)
    z_noisy = X.T @ y0 + rng.integers(-2, 3, X.shape[1])
    z = X.T @ y0
    perm = rng.permutation(X.shape[0])
    Xp = sp.csc_array(X[perm])
    a, b = fit.lsfit_nonneg(X, z_noisy), fit.lsfit_nonneg(Xp, z_noisy)
    np.testing.assert_allclose(b.z, a.z, atol=1e-9)
    np.testing.assert_allclose(b.y, a.y[perm], atol=1e-9)
    np.testing.assert_array_equal(b.zeroed, a.zeroed)
    c, d = fit.ipf(X, z), fit.ipf(Xp, z)
    np.testing.assert_allclose(d.y, c.y[perm], atol=1e-9 * max(1.0, z.max()))
    np.testing.assert_allclose(fit.min_norm(Xp, z_noisy), fit.min_norm(X, z_noisy)[perm],
                               atol=1e-9)


# ------------------------------------------------------------------------------------------
# integerise


def test_integerise_uniform_is_unbiased() -> None:
    y = np.array([0.0, 0.1, 0.5, 0.9, 1.25, 3.7, 10.0, 2.999])
    n = 4000
    draws = np.stack([fit.integerise(y, "uniform", seed=s) for s in range(n)])
    assert draws.dtype == np.int64
    frac = y - np.floor(y)
    assert np.all((draws == np.floor(y)) | (draws == np.floor(y) + 1))
    se = np.sqrt(frac * (1 - frac) / n)
    assert np.all(np.abs(draws.mean(0) - y) <= 5 * se + 1e-12)


@SETTINGS
@given(y=st.lists(st.floats(0, 50, allow_nan=False), min_size=1, max_size=40),
       seed=st.integers(0, 2**31))
def test_integerise_multinomial_preserves_total(y: list[float], seed: int) -> None:
    a = np.array(y)
    out = fit.integerise(a, "multinomial", seed=seed)
    assert out.sum() == int(np.floor(np.floor(a).sum() + (a - np.floor(a)).sum() + 0.5))
    gain = out - np.floor(a)
    assert set(np.unique(gain)) <= {0, 1}
    np.testing.assert_array_equal(out, fit.integerise(a, "multinomial", seed=seed))


def test_integerise_multinomial_is_unbiased_when_remainders_sum_to_an_integer() -> None:
    y = np.array([0.2, 0.7, 1.4, 2.5, 0.9, 0.3])  # remainders sum to 3
    n = 4000
    draws = np.stack([fit.integerise(y, "multinomial", seed=s) for s in range(n)])
    assert np.all(draws.sum(1) == 6)
    frac = y - np.floor(y)
    se = np.sqrt(frac * (1 - frac) / n)
    assert np.all(np.abs(draws.mean(0) - y) <= 5 * se + 1e-12)


def test_integerise_needs_a_seed_and_a_known_method() -> None:
    with pytest.raises(InputError, match="seed"):
        fit.integerise([0.5], seed=None)
    with pytest.raises(InputError, match="method"):
        fit.integerise([0.5], "banker", seed=1)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="NaN"):
        fit.integerise([0.5, np.nan], seed=1)
    with pytest.raises(InputError, match="1 negative values at inner cells 0"):
        fit.integerise([-1.5, 2.0], seed=1)


# ------------------------------------------------------------------------------------------
# Bad input


def test_bad_input_raises_input_error() -> None:
    X = x3_totals()
    z = X.T @ Y3.ravel()
    with pytest.raises(InputError, match="z has 6 values but X has 7 published"):
        fit.min_norm(X, z[:6])
    with pytest.raises(InputError, match="transposed"):
        fit.lsfit_nonneg(sp.csc_array(X.T), z)
    bad = z.copy()
    bad[[4, 5, 6]] = np.nan
    with pytest.raises(InputError, match=r"z has 3 NaN values at published cells 4, 5, 6"):
        fit.ipf(X, bad)
    bad = z.copy()
    bad[2] = np.inf
    with pytest.raises(InputError, match="infinite"):
        fit.nnls(X, bad)
    neg = z.copy()
    neg[1] = -1
    with pytest.raises(InputError, match="negative values at published cells 1"):
        fit.ipf(X, neg)
    with pytest.raises(InputError, match="scipy.sparse"):
        fit.min_norm([[1, 0]], [1.0])  # type: ignore[arg-type]
    with pytest.raises(InputError, match="weights"):
        fit.nnls(X, z, weights=-np.ones(7))
    with pytest.raises(InputError, match="start has 8 values"):
        fit.ipf(X, z, start=np.ones(8))
    with pytest.raises(InputError, match="not disjoint"):
        fit.ipf(X, z, blocks=np.zeros(7, dtype=int))
    with pytest.raises(InputError, match="negative entries"):
        fit.ipf(sp.csc_array(-X.toarray()), z)
    with pytest.raises(InputError, match="solver"):
        fit.min_norm(X, z, solver="qr")  # type: ignore[arg-type]
    assert issubclass(fit.ConvergenceError, ProtabError)
