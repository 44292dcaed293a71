"""The faster parts of small count rounding's sweeps (protab.rounding._scr_swaps) against their
plain definitions: the rank by score and random order, the best partner in each published
cell, and swap sweeps that reuse the measures of the last batch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse

from protab.rounding._scr_choice import _criterion, _weights
from protab.rounding._scr_swaps import (
    TOL_WINDOW,
    _best_per,
    _combined,
    _first_best,
    _Incidence,
    _Levels,
    _matching,
    _rank,
    _swaps,
    _SwapSweeps,
)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(0, 10_000), st.booleans())
def test_rank_is_the_lexicographic_rank_by_score_then_tie(n, seed, unique_tie):
    rng = np.random.default_rng(seed)
    score = rng.integers(0, 4, size=n).astype(np.float64)  # many ties
    tie = rng.permutation(n) if unique_tie else rng.integers(0, 3, size=n)
    order = np.lexsort((tie, score))
    expected = np.empty(n, dtype=np.int64)
    expected[order] = np.arange(n)
    assert np.array_equal(_rank(score, tie), expected)


def _random_incidence(rng: np.random.Generator, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Items × keys pairs, every item on one to three keys of ``k``."""
    items = np.repeat(np.arange(n), rng.integers(1, 4, size=n))
    pairs = np.unique(np.c_[items, rng.integers(0, k, size=items.size)], axis=0)  # each pair once
    return pairs[:, 0], pairs[:, 1]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30), st.integers(1, 12), st.integers(0, 10_000))
def test_winners_by_score_and_tie_are_the_winners_by_rank(n, k, seed):
    rng = np.random.default_rng(seed)
    items, keys = _random_incidence(rng, n, k)
    score = rng.integers(0, 3, size=n).astype(np.float64)  # many equal scores
    tie, active = rng.permutation(n), rng.random(n) < 0.7
    inc = _Incidence(items, keys, n)
    assert np.array_equal(inc.winners_by(score, tie, active), inc.winners(_rank(score, tie), active))
    # dropping items that no longer compete (raised ones) changes no winner among the rest
    dead = ~active & (rng.random(n) < 0.5)
    assert np.array_equal(inc.without(dead).winners_by(score, tie, active), inc.winners_by(score, tie, active))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30), st.integers(1, 12), st.integers(0, 10_000))
def test_independent_winners_share_no_key_and_leave_no_free_item(n, k, seed):
    """Repeated Luby rounds: no two chosen items share a key, and every active item left out
    shares a key with a chosen one (a maximal set); the first round's winners are among them."""
    rng = np.random.default_rng(seed)
    items, keys = _random_incidence(rng, n, k)
    rank = rng.permutation(n)
    active = rng.random(n) < 0.8
    inc = _Incidence(items, keys, n)
    chosen = inc.independent(rank, active, rounds=n + 1)
    assert not np.any(chosen & ~active)
    assert np.all(chosen[inc.winners(rank, active)])
    taken = keys[chosen[items]]
    assert np.unique(taken).size == taken.size
    for i in np.flatnonzero(active & ~chosen):
        assert np.isin(keys[items == i], taken).any()


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(0, 10_000))
def test_first_best_is_the_best_ranked_pair_per_key(n, seed):
    """Per raised cell (ascending keys) the pair with the smallest change, of equal ones the
    first: what ranking every pair by (change, position) and keeping the best per key gives."""
    rng = np.random.default_rng(seed)
    key = np.sort(rng.integers(0, 6, size=n))
    score = rng.integers(0, 3, size=n).astype(np.float64)
    want = [int(np.flatnonzero(key == v)[np.argmin(score[key == v])]) for v in np.unique(key)]
    assert _first_best(key, score).tolist() == want


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 40), st.integers(1, 8), st.integers(0, 10_000))
def test_best_per_key_is_the_smallest_rank_of_each_key(n, k, seed):
    """One position per key, the one of its smallest rank, in ascending order."""
    rng = np.random.default_rng(seed)
    key = rng.integers(0, k, size=n)
    rank = rng.permutation(n)
    want = sorted(min(np.flatnonzero(key == v), key=lambda i: rank[i]) for v in np.unique(key))
    assert _best_per(key, rank).tolist() == want


def _random_matrix(rng: np.random.Generator, n: int, m: int) -> sparse.csr_matrix:
    X = (rng.random((n, m)) < 0.4).astype(np.float64)
    X[np.arange(n), rng.integers(0, m, size=n)] = 1  # every row in some cell
    return sparse.csr_matrix(X)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 12), st.integers(1, 8), st.integers(0, 10_000))
def test_partner_is_the_last_of_the_best_raisable_cells(n, m, seed):
    """Per published cell: among its candidates not raised, the one with the smallest score;
    of equal scores the last; −1 where every candidate is raised."""
    rng = np.random.default_rng(seed)
    XR = _random_matrix(rng, n, m)
    up = rng.random(n) < 0.5
    sup = rng.integers(0, 3, size=n).astype(np.float64)
    rows = np.repeat(np.arange(n), np.diff(XR.indptr))
    cols = XR.indices.astype(np.int64)
    sweeps = _SwapSweeps(XR, 3, [], np.ones(m, dtype=bool), np.arange(n), rows, cols, _Incidence(rows, cols, n), None)
    got = sweeps._partners(up, sup)
    dense = XR.toarray() > 0
    for c in range(m):
        free = np.flatnonzero(dense[:, c] & ~up)
        if not dense[:, c].any():
            continue  # a cell without candidates is not looked at
        want = -1 if free.size == 0 else int(free[sup[free] == sup[free].min()].max())
        assert got[c] == want


@settings(max_examples=25, deadline=None)
@given(st.integers(4, 14), st.integers(3, 9), st.integers(0, 10_000))
def test_swap_sweeps_reusing_the_last_measures_give_the_same_result(n, m, seed):
    """Reusing the measures the last batch computed changes nothing: the same swaps as
    computing them afresh every sweep."""
    rng = np.random.default_rng(seed)
    XR = _random_matrix(rng, n, m)
    f = np.asarray(XR.T @ rng.integers(0, 3, size=n), dtype=np.float64)
    w = _weights(f)
    crit = lambda gg, at=None: _criterion(f, gg, 3, 3, 1.0, w, at)  # noqa: E731
    rows = np.repeat(np.arange(n), np.diff(XR.indptr))
    cols = XR.indices.astype(np.int64)
    up = np.zeros(n, dtype=bool)
    up[rng.choice(n, size=n // 2, replace=False)] = True
    g = 3 * np.rint(XR.T @ up.astype(np.float64)).astype(np.int64)
    tie = rng.permutation(n)
    conflict = np.bincount(cols, minlength=m) <= 3

    def run() -> tuple[np.ndarray, np.ndarray]:
        return _swaps(XR, up, g, 3, [crit], conflict, tie, 30, rows, cols, _Incidence(rows, cols, n))

    up1, g1 = run()
    fresh = _SwapSweeps.__dict__["_improving_pairs"]

    def without_reuse(self, up_, g_, dirty):
        self._known = None
        return fresh(self, up_, g_, dirty)

    _SwapSweeps._improving_pairs = without_reuse
    try:
        up2, g2 = run()
    finally:
        _SwapSweeps._improving_pairs = fresh
    assert np.array_equal(up1, up2)
    assert np.array_equal(g1, g2)
    assert crit(g1).sum() <= crit(g).sum() + 1e-12


@pytest.mark.parametrize("tol, sweeps", [(0.0, 200), (0.02, 200), (0.03, TOL_WINDOW)])
def test_swap_sweeps_stop_once_a_window_of_sweeps_gains_less_than_tol(monkeypatch, tol, sweeps):
    """Sweeps that each lower the criterion by 1 from 1000 gain 2.5 % in 25 sweeps: a tolerance
    of 3 % stops them after the first such window, 2 % or none lets all ``polish`` run."""
    calls = []

    def sweep(self, up, g, dirty, totals):
        calls.append(totals[0])
        return g + 1, [totals[0] - 1.0]

    monkeypatch.setattr(_SwapSweeps, "sweep", sweep)
    XR = sparse.csr_matrix(np.eye(3))
    rows, cols = np.arange(3), np.arange(3)
    crit = lambda gg, at=None: np.full(gg.shape, 1000.0 / gg.size)  # noqa: E731
    _swaps(XR, np.zeros(3, dtype=bool), np.zeros(3, dtype=np.int64), 3, [crit], np.ones(3, dtype=bool),
           np.arange(3), 200, rows, cols, _Incidence(rows, cols, 3), tol=tol)
    assert len(calls) == sweeps
    assert calls[0] == pytest.approx(1000.0)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 30), st.integers(0, 10_000))
def test_matching_pairs_share_no_candidate_and_leave_no_free_pair(n, seed):
    """The rounds of best pairs per raised cell and per partner: every pair chosen is one of
    the given pairs, no candidate is in two of them, and (with rounds enough) no given pair has
    both its candidates free; the ranks order the chosen pairs."""
    rng = np.random.default_rng(seed)
    raised = rng.random(n) < 0.5
    ups, downs = np.flatnonzero(raised), np.flatnonzero(~raised)
    if ups.size == 0 or downs.size == 0:
        return
    k = int(rng.integers(1, 3 * n))
    pi, pj = rng.choice(ups, size=k), rng.choice(downs, size=k)
    order = np.argsort(pi, kind="stable")
    pi, pj = pi[order], pj[order]
    delta = -rng.integers(1, 4, size=k).astype(np.float64)
    sel, rank = _matching(pi, pj, delta, rng.permutation(n), rounds=n + 1)
    assert np.unique(pi[sel]).size == sel.size and np.unique(pj[sel]).size == sel.size
    assert np.array_equal(np.sort(rank), np.arange(sel.size))
    used = np.zeros(n, dtype=bool)
    used[pi[sel]] = used[pj[sel]] = True
    assert np.all(used[pi] | used[pj])


@settings(max_examples=60, deadline=None)
@given(st.integers(4, 16), st.integers(2, 8), st.integers(0, 10_000))
def test_combined_swaps_lower_the_criterion_by_their_counted_change(n, m, seed):
    """Swaps taken together whatever cells they share: a batch is taken only when the
    criterion of the published values after all of them falls, and those values are the
    sums of the raises after the swaps."""
    rng = np.random.default_rng(seed)
    XR = _random_matrix(rng, n, m)
    f = np.asarray(XR.T @ rng.integers(0, 3, size=n), dtype=np.float64)
    w = _weights(f)
    crit = lambda gg, at=None: _criterion(f, gg, 3, 3, 1.0, w, at)  # noqa: E731
    up = np.zeros(n, dtype=bool)
    up[rng.choice(n, size=n // 2, replace=False)] = True
    g = 3 * np.rint(XR.T @ up.astype(np.float64)).astype(np.int64)
    ups, downs = rng.permutation(np.flatnonzero(up)), rng.permutation(np.flatnonzero(~up))
    k = min(ups.size, downs.size)
    pi, pj = ups[:k], downs[:k]
    Xi, Xj = XR[pi], XR[pj]
    D = (Xi - Xj).tocoo()
    levels = _Levels.of([crit], g, 3)
    win, done = _combined(XR, g, 3, D, pi, pj, rng.permutation(k), [crit], [float(crit(g).sum())], levels)
    if win is None:
        return
    up2 = up.copy()
    up2[pi[win]], up2[pj[win]] = False, True
    g_new = done[0]
    assert np.array_equal(g_new, 3 * np.rint(XR.T @ up2.astype(np.float64)).astype(np.int64))
    assert crit(g_new).sum() < crit(g).sum() - 1e-12


def test_several_swaps_through_one_guarded_cell_are_taken_together():
    """One published cell three bases above its original value and three raised cells in it,
    each with its own partner outside: all three swaps go in one batch (an independent set
    would take one), and the cell ends at its original value."""
    # rows 0-2 raised in cell 0; rows 3-5 partners, each alone in cells 1-3
    XR = sparse.csr_matrix(np.array([[1, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0],
                                     [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], dtype=np.float64))
    f = np.array([0.0, 3.0, 3.0, 3.0])
    w = _weights(f)
    crit = lambda gg, at=None: _criterion(f, gg, 3, 3, 1.0, w, at)  # noqa: E731
    g = np.array([9, 0, 0, 0])
    pi, pj = np.array([0, 1, 2]), np.array([3, 4, 5])
    D = (XR[pi] - XR[pj]).tocoo()
    win, done = _combined(XR, g, 3, D, pi, pj, np.arange(3), [crit], [float(crit(g).sum())],
                          _Levels.of([crit], g, 3))
    assert win is not None and win.size == 3
    assert np.array_equal(done[0], [0, 3, 3, 3])
