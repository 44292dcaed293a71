"""The audit's intervals against brute force: every integer table of true counts that the
published noisy counts allow is enumerated, and its min and max per inner cell compared with
the audit. A 2-way table with margins is totally unimodular (two laminar families of cells),
so the LP's rounded bounds must equal the brute-force range; a 2×2×2 table with its three
2-way margins is not, and there they must contain it."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse

import protab as pt


def _table(sizes: tuple[int, ...], terms: list[tuple[int, ...]]):
    """X (inner × published), the published frame (codes, levels) and the inner frame."""
    names = [f"d{k}" for k in range(len(sizes))]
    inner = np.array(list(itertools.product(*[range(s) for s in sizes])))
    subsets = sorted({sub for t in terms for r in range(len(t) + 1) for sub in itertools.combinations(t, r)})
    cols, rows = [], []
    for sub in subsets:
        for codes in itertools.product(*[range(sizes[d]) for d in sub]):
            hit = np.all(inner[:, list(sub)] == np.array(codes, dtype=int), axis=1) if sub else np.ones(len(inner), bool)
            rows.append({n: (str(codes[sub.index(k)]) if k in sub else "Total") for k, n in enumerate(names)}
                        | {f"{n}_level": int(k in sub) for k, n in enumerate(names)})
            cols.append(hit.astype(float))
    X = sparse.csc_array(np.column_stack(cols))
    inner_frame = pl.DataFrame({n: [str(v) for v in inner[:, k]] for k, n in enumerate(names)})
    return X, pl.DataFrame(rows), inner_frame


def _consistent(pub: float, t: np.ndarray, D: int, zeros_perturbed: bool) -> np.ndarray:
    """Could a true count t be published as pub? From the p-table's rules, not the audit's."""
    if np.isnan(pub):
        return np.ones(t.shape, bool)
    near = np.abs(pub - t) <= D
    return near if zeros_perturbed else np.where(t == 0, pub == 0, near)


def _brute(X, z, D, zeros_perturbed):
    """Min and max per inner cell over every integer table consistent with z."""
    A = X.toarray()
    n = A.shape[0]
    caps = [min(z[c] + D for c in range(A.shape[1]) if A[i, c] and not np.isnan(z[c])) for i in range(n)]
    own = [A[:, c].sum() == 1 and not np.isnan(z[c]) for c in range(A.shape[1])]  # an inner cell published
    floor = np.zeros(n, dtype=int)
    for c in np.flatnonzero(own):
        i = int(np.flatnonzero(A[:, c])[0])
        floor[i] = max(floor[i], int(z[c]) - D)  # a smaller true count could not be published as z
    grid = np.array(list(itertools.product(*[range(f, int(c) + 1) for f, c in zip(floor, caps)])))
    ok = np.ones(len(grid), bool)
    for c in range(A.shape[1]):
        ok &= _consistent(z[c], grid @ A[:, c], D, zeros_perturbed)
    feasible = grid[ok]
    return feasible.min(axis=0), feasible.max(axis=0)


def _publish(X, y, noise, blank, zeros_perturbed):
    t = X.T @ y
    z = np.maximum(t + noise, 0).astype(float)
    if not zeros_perturbed:
        z[t == 0] = 0
    z[blank] = np.nan
    return z


@settings(max_examples=20, deadline=None)
@given(y=st.lists(st.integers(0, 4), min_size=6, max_size=6), D=st.integers(1, 2),
       noise=st.lists(st.integers(-2, 2), min_size=12, max_size=12), zeros_perturbed=st.booleans(),
       blank=st.lists(st.integers(1, 11), max_size=2, unique=True))
def test_two_way_table_with_margins_gives_the_exact_range(y, D, noise, zeros_perturbed, blank):
    X, published, inner = _table((2, 3), [(0, 1)])
    z = _publish(X, np.array(y), np.clip(noise, -D, D), blank, zeros_perturbed)  # the total (column 0) is kept
    frame = published.with_columns(pl.Series("n_pert", z, nan_to_null=True))
    out = pt.audit.feasibility({"t": frame}, X, published, inner, D=D, zeros_perturbed=zeros_perturbed)
    got = out.filter(pl.col("table").is_null())
    lo, hi = _brute(X, z, D, zeros_perturbed)
    assert got["lo"].to_list() == lo.tolist()
    assert got["up"].to_list() == hi.tolist()


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(y=st.lists(st.integers(0, 3), min_size=8, max_size=8), data=st.data())
def test_three_way_table_with_two_way_margins_contains_the_range(y, data):
    X, published, inner = _table((2, 2, 2), [(0, 1), (0, 2), (1, 2)])
    noise = np.array(data.draw(st.lists(st.integers(-1, 1), min_size=X.shape[1], max_size=X.shape[1])))
    z = _publish(X, np.array(y), noise, [], False)
    lower, upper = pt.audit.noise_bounds(z, 1)
    lo, up = pt.audit.intervals(X, lower, upper)
    blo, bhi = _brute(X, z, 1, False)
    assert (np.ceil(lo - 1e-6) <= blo).all() and (np.floor(up + 1e-6) >= bhi).all()
    assert blo.tolist() != [] and (blo <= np.array(y)).all() and (np.array(y) <= bhi).all()
