"""The audit spares LPs (fixed cells substituted, independent blocks, ends met by a solution
already seen); its intervals must still be those of the textbook method: two LPs per inner
cell over the whole system, every published cell a row."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import sparse
from scipy.optimize import linprog

import protab as pt


def _hypercube(sizes):
    n = int(np.prod(sizes))
    codes = np.indices(sizes).reshape(len(sizes), n)
    blocks = []
    for keep in itertools.product([True, False], repeat=len(sizes)):
        col = np.zeros(n, dtype=np.int64)
        width = 1
        for k in range(len(sizes)):
            if keep[k]:
                col, width = col * sizes[k] + codes[k], width * sizes[k]
        blocks.append(sparse.csc_array((np.ones(n), (np.arange(n), col)), shape=(n, width)))
    return sparse.hstack(blocks, format="csc")


def _textbook(X, lower, upper):
    A = X.T.toarray()
    ok_hi, ok_lo = np.isfinite(upper), np.isfinite(lower)
    A_ub = np.vstack([A[ok_hi], -A[ok_lo]])
    b_ub = np.concatenate([upper[ok_hi], -lower[ok_lo]])
    lo, up = [], []
    for i in range(X.shape[0]):
        c = np.zeros(X.shape[0])
        c[i] = 1
        lo.append(linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=(0, None), method="highs").fun)
        res = linprog(-c, A_ub=A_ub, b_ub=b_ub, bounds=(0, None), method="highs")
        up.append(-res.fun if res.status == 0 else np.inf)
    return np.array(lo), np.array(up)


@pytest.mark.parametrize(("sizes", "mean", "blank"), [((6, 7), 3.0, 0.0), ((4, 4, 3), 1.0, 0.0),
                                                      ((5, 6), 2.0, 0.3)])
def test_intervals_equal_two_lps_per_cell(sizes, mean, blank):
    rng = np.random.default_rng(7)
    X = _hypercube(sizes)
    t = X.T @ rng.poisson(mean, X.shape[0])
    z = np.where(t == 0, 0.0, np.maximum(t + rng.integers(-2, 3, t.size), 0)).astype(float)
    z[1:][rng.random(t.size - 1) < blank] = np.nan  # blanked cells; the grand total (column 0) stays
    lower, upper = pt.audit.noise_bounds(z, 2)
    lo, up = pt.audit.intervals(X, lower, upper)
    want_lo, want_up = _textbook(X, lower, upper)
    np.testing.assert_allclose(lo, want_lo, atol=1e-6)
    np.testing.assert_allclose(up, want_up, atol=1e-6)
