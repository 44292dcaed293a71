"""Property: on any small hypercube with all margins, random counts, noise within ±D and some
cells blanked, the audit's intervals (fixed cells substituted, blocks, ends met by solutions
seen, interior point LPs) equal the textbook's two LPs per inner cell over the whole system."""

from __future__ import annotations

import numpy as np
from audit_fixtures import hypercube
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

import protab as pt


def _textbook(X, lower, upper):
    A = X.T.toarray()
    hi, lo = np.isfinite(upper), np.isfinite(lower)
    A_ub, b_ub = np.vstack([A[hi], -A[lo]]), np.concatenate([upper[hi], -lower[lo]])
    out = []
    for sign in (1.0, -1.0):
        vals = []
        for i in range(X.shape[0]):
            c = np.zeros(X.shape[0])
            c[i] = sign
            res = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=(0, None), method="highs-ds")
            vals.append(sign * res.fun if res.status == 0 else np.inf)
        out.append(np.array(vals))
    return out


@settings(max_examples=20, deadline=None)
@given(sizes=st.lists(st.integers(2, 4), min_size=2, max_size=3), mean=st.floats(0.3, 4.0),
       D=st.integers(1, 3), blank=st.floats(0.0, 0.4), seed=st.integers(0, 2**31))
def test_intervals_equal_two_lps_per_cell(sizes, mean, D, blank, seed):
    rng = np.random.default_rng(seed)
    X = hypercube(tuple(sizes))
    t = X.T @ rng.poisson(mean, X.shape[0])
    z = np.where(t == 0, 0.0, np.maximum(t + rng.integers(-D, D + 1, t.size), 0)).astype(float)
    z[rng.random(t.size) < blank] = np.nan
    lower, upper = pt.audit.noise_bounds(z, D)
    lo, up = pt.audit.intervals(X, lower, upper, budget=None)
    want_lo, want_up = _textbook(X, lower, upper)
    np.testing.assert_allclose(lo, want_lo, atol=1e-6)
    np.testing.assert_allclose(up, want_up, atol=1e-6)
