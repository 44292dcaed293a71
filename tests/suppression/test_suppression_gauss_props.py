"""Properties of protab.suppression.gauss on random small hierarchical tables.

The fast elimination (in-place updates, dense long columns, its own pivot choice) must give
exactly the pattern of a slow textbook version of the same greedy method written here with
fractions.Fraction: candidates in order, first non-zero row (non-singleton rows first) as the
pivot, a candidate suppressed when its reduced column is a multiple of a primary cell's (or, with
anySum, when it lives on singleton rows only, except a first difference there). And every primary
cell must be underivable afterwards, by an exact rank test.
"""

from __future__ import annotations

from fractions import Fraction
from unittest import mock

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import sparse

from protab.suppression import candidates_default, gauss
from protab.suppression._reduced_columns import _Columns

# --------------------------------------------------------------------- the slow reference


def _reduce(v: list[Fraction], basis: list[tuple[int, list[Fraction]]]) -> list[Fraction]:
    v = list(v)
    for p, b in basis:
        if v[p]:
            f = v[p] / b[p]
            v = [x - f * y for x, y in zip(v, b)]
    return v


def _multiple(u: list[Fraction], v: list[Fraction]) -> bool:
    """u = λ·v for some λ ≠ 0 (v non-zero)."""
    p = next(i for i, x in enumerate(v) if x)
    if not u[p]:
        return False
    lam = u[p] / v[p]
    return all(a == lam * b for a, b in zip(u, v))


def reference_gauss(X: np.ndarray, primary: np.ndarray, order: np.ndarray, singleton: np.ndarray | None) -> np.ndarray:
    """The greedy method of GaussSuppression (singleton methods none / anySum), in exact fractions."""
    m, n = X.shape
    sing = np.zeros(m, dtype=bool) if singleton is None else singleton
    rows = [r for r in range(m) if not sing[r]] + [r for r in range(m) if sing[r]]
    n_plain = int((~sing).sum())
    any_sum = bool(sing.any())
    col = {c: [Fraction(int(X[r, c])) for r in rows] for c in range(n)}
    B = [b for b in np.flatnonzero(primary) if not any_sum or X[~sing, b].sum() != 0]
    reduced_B = {b: col[b] for b in B}  # kept reduced by every published column
    basis: list[tuple[int, list[Fraction]]] = []
    used: set[int] = set()
    suppressed = primary.copy()
    for c in order:
        if primary[c]:
            continue
        v = _reduce(col[c], basis)
        nz = [i for i, x in enumerate(v) if x]
        if not nz:
            continue  # determined by the published cells already
        secondary = False
        if any_sum and nz[0] >= n_plain:  # lives on singleton rows only
            secondary = True
            if any(v[i] > 0 for i in nz) and any(v[i] < 0 for i in nz) and not used & set(nz):
                secondary = False
                used |= set(nz)
        if not secondary:
            secondary = any(_multiple(reduced_B[b], v) for b in B)
        if secondary:
            suppressed[c] = True
        else:
            basis.append((nz[0], v))
            reduced_B = {b: _reduce(u, basis[-1:]) for b, u in reduced_B.items()}
    return suppressed


def span_basis(X: np.ndarray, cells: np.ndarray) -> list[tuple[int, list[Fraction]]]:
    """An echelon basis (pivot, vector) of the span of the columns ``cells`` of X, in fractions."""
    basis: list[tuple[int, list[Fraction]]] = []
    for c in cells:
        v = _reduce([Fraction(int(x)) for x in X[:, c]], basis)
        nz = [i for i, x in enumerate(v) if x]
        if nz:
            basis.append((nz[0], v))
    return basis


def derivable_by_rank(X: np.ndarray, suppressed: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """Per cell: its column lies in the span of the published columns, i.e. adding it does not
    raise the rank (it reduces to zero against an echelon basis of the published columns)."""
    basis = span_basis(X, np.flatnonzero(~suppressed))
    return np.array([not any(_reduce([Fraction(int(x)) for x in X[:, c]], basis)) for c in cells], dtype=bool)


# --------------------------------------------------------------------- random tables


def _dimension(draw, most: int) -> np.ndarray:
    """Leaves × published codes of one variable: total, optional groups, leaves."""
    n_groups = draw(st.integers(1, 2))
    sizes = [draw(st.integers(1, most)) for _ in range(n_groups)]
    leaves = sum(sizes)
    codes = [np.ones(leaves, dtype=np.int64)]
    if n_groups > 1:
        start = 0
        for g in sizes:
            v = np.zeros(leaves, dtype=np.int64)
            v[start:start + g] = 1
            codes.append(v)
            start += g
    codes += list(np.eye(leaves, dtype=np.int64))
    return np.array(codes).T


@st.composite
def tables(draw):
    """X (inner × published, every crossing of 2 or 3 hierarchical variables), inner counts,
    and the inner cells in a random order."""
    n_dims = draw(st.integers(2, 3))
    dims = [_dimension(draw, 3 if n_dims == 2 else 2) for _ in range(n_dims)]
    X = dims[0]
    for d in dims[1:]:
        X = np.kron(X, d)
    counts = np.array(draw(st.lists(st.integers(0, 7), min_size=X.shape[0], max_size=X.shape[0])))
    perm = np.array(draw(st.permutations(range(X.shape[0]))))
    return X[perm], counts[perm]


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _storage(mode: str):
    """Exercise both storages of the reduced columns on small tables: 'sparse' (no dense
    columns; row lookups by binary search) and 'dense' (every column of 2 or more entries
    dense), with a tiny buffer so that the row index forms and merges runs."""
    if mode == "sparse":
        return mock.patch.multiple(_Columns, _DENSE=1, _FIND_SCAN=0, _PENDING=3)
    return mock.patch.multiple(_Columns, _DENSE=10**6, _PENDING=3)


def _check(X, counts, order_kind, draw_order, method, protect_zeros):
    n_pub = X.T @ counts
    primary = (n_pub > 0) & (n_pub < 4)
    if protect_zeros:
        primary |= n_pub == 0
    singleton = None if method == "none" else counts == (0 if protect_zeros else 1)
    if not primary.any():
        return
    order = candidates_default(X, n_pub) if order_kind == "default" else draw_order
    want = reference_gauss(X, primary, order, singleton)
    for mode in ("sparse", "dense"):
        with _storage(mode):
            got = gauss(sparse.csc_matrix(X), n_pub.astype(float), primary, candidates=order, singleton=singleton,
                        singleton_method=method)
        assert np.array_equal(got, want), (mode, np.flatnonzero(got != want))
    assert not derivable_by_rank(X, want, np.flatnonzero(primary)).any()


@SETTINGS
@given(tables(), st.sampled_from(["default", "random"]), st.data())
def test_same_pattern_as_reference_none(table, order_kind, data):
    X, counts = table
    draw_order = np.array(data.draw(st.permutations(range(X.shape[1]))))
    _check(X, counts, order_kind, draw_order, "none", protect_zeros=False)


@SETTINGS
@given(tables(), st.sampled_from(["default", "random"]), st.booleans(), st.data())
def test_same_pattern_as_reference_any_sum(table, order_kind, protect_zeros, data):
    X, counts = table
    draw_order = np.array(data.draw(st.permutations(range(X.shape[1]))))
    _check(X, counts, order_kind, draw_order, "anySum", protect_zeros)


def test_reference_catches_a_wrong_pattern():
    """The reference and the rank test are not vacuous: on a 2 × 2 table with one small cell,
    publishing everything else reveals it, and the greedy suppresses a full rectangle."""
    row = np.array([[1, 1], [1, 0], [0, 1]]).T  # leaves × (total, a, b)
    X = np.kron(row, row)  # 4 inner cells × 9 published cells
    counts = np.array([2, 5, 6, 7])
    n_pub = X.T @ counts
    primary = (n_pub > 0) & (n_pub < 4)
    assert primary.sum() == 1
    want = reference_gauss(X, primary, candidates_default(X, n_pub), None)
    assert want.sum() == 4  # the small inner cell and three others around a rectangle
    cell = np.flatnonzero(primary)
    assert not derivable_by_rank(X, want, cell).any()
    assert derivable_by_rank(X, primary, cell).all()
    got = gauss(sparse.csc_matrix(X), n_pub.astype(float), primary, candidates=candidates_default(X, n_pub),
                singleton_method="none")
    assert np.array_equal(got, want)
