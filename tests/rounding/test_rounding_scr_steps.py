"""The steps of small count rounding (protab.rounding.small_count) one by one: the local
problem of a pass, the forward sweeps, the swap sweeps and the candidates of a pass."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from protab.rounding._rounding_inputs import xty
from protab.rounding._scr_choice import _criterion, _forward, _weights
from protab.rounding._scr_options import _options
from protab.rounding._scr_passes import _local_matrix, _Passes
from protab.rounding._scr_swaps import _Incidence, _swaps


def _one_way(k: int) -> sparse.csr_matrix:
    """k inner cells: published each of them, two halves and the total."""
    X = np.zeros((k, k + 3))
    X[np.arange(k), np.arange(k)] = 1
    X[: k // 2, k] = 1
    X[k // 2 :, k + 1] = 1
    X[:, k + 2] = 1
    return sparse.csr_matrix(X)


def test_local_problem_keeps_the_cells_that_depend_on_the_choice():
    """A published cell holding every candidate (or none) has the same value whichever are
    raised: only the others enter the local problem, 0/1."""
    X = _one_way(6)
    XR = X[[0, 1, 4]]
    XRl, cols = _local_matrix(XR, X.shape[1])
    assert cols.tolist() == [0, 1, 4, 6, 7]  # the three cells, both halves; not the total
    assert np.array_equal(XRl.toarray(), XR[:, cols].toarray())


def test_forward_sweeps_raise_exactly_the_number_asked():
    rng = np.random.default_rng(5)
    X = _one_way(10)
    f = np.asarray(X.T @ rng.integers(1, 3, size=10), dtype=np.float64)
    w = _weights(f)
    crit = lambda gg, at=None: _criterion(f, gg, 3, 3, 1.0, w, at)  # noqa: E731
    rows = np.repeat(np.arange(10), np.diff(X.indptr))
    for n_up, s1, s2 in [(1, 1, 0), (4, 1, 0), (7, 3, 1), (9, 2, 1)]:
        up = np.zeros(10, dtype=bool)
        g0 = np.zeros(X.shape[1], dtype=np.int64)
        g = g0.copy()
        _forward(X, crit, 3, up, g, n_up, rng.permutation(10), _Incidence(rows, X.indices, 10), s1, s2)
        assert up.sum() == n_up
        assert np.array_equal(g, g0 + 3 * xty(X, up.astype(np.int64)))


def test_swap_sweeps_keep_the_raises_and_never_raise_the_criterion():
    rng = np.random.default_rng(8)
    X = _one_way(12)
    f = np.asarray(X.T @ rng.integers(0, 3, size=12), dtype=np.float64)
    w = _weights(f)
    crit = lambda gg, at=None: _criterion(f, gg, 3, 3, 1.0, w, at)  # noqa: E731
    rows = np.repeat(np.arange(12), np.diff(X.indptr))
    cols = X.indices.astype(np.int64)
    for _ in range(5):
        up = np.zeros(12, dtype=bool)
        up[rng.choice(12, size=5, replace=False)] = True
        g = 3 * xty(X, up.astype(np.int64))
        up2, g2 = _swaps(X, up, g, 3, [crit], np.ones(X.shape[1], dtype=bool), rng.permutation(12), 50, rows, cols,
                         _Incidence(rows, cols, 12))
        assert up2.sum() == up.sum()
        assert np.array_equal(g2, 3 * xty(X, up2.astype(np.int64)))
        assert crit(g2).sum() <= crit(g).sum() + 1e-12


def test_candidates_of_a_pass_are_small_cells_under_small_published_cells():
    X = sparse.csc_matrix(_one_way(4))
    y = np.array([1, 3, 5, 0])
    opts = _options(y, 3, None, 1.0, True, False, False, False, 0, None)
    passes = _Passes(X, y, 3, opts, np.arange(4), identify_new=True, easy_check=True)
    # published 1 (cell 0) is small; its inner cell is not a multiple of 3
    assert np.flatnonzero(passes.forced).tolist() == [0]
    passes.yr = np.array([0, 3, 5, 2])  # say the rounding left cell 3 at 2: small again
    passes.zr = xty(X, passes.yr)
    passes.forced[:] = False
    small, cand = passes._candidates()
    assert np.flatnonzero(cand).tolist() == [3]
    assert small[3] and not small[[0, 1, 2]].any()
