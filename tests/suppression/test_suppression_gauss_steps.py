"""The steps of protab.suppression.gauss one by one: the reduced-column storage's elimination
step against plain integer arithmetic, the singleton rules of GaussSuppression (which method
applies, virtual primary cells, repeated singleton rows) and the candidate order."""

from __future__ import annotations

from math import gcd

import numpy as np
import pytest
from scipy import sparse

from protab.errors import SpecError
from protab.suppression._candidates import _candidate_order
from protab.suppression._elimination import _eliminate
from protab.suppression._numtthtt import _drop_repeated_singletons
from protab.suppression._reduced_columns import _Columns
from protab.suppression._singletons import _resolve_method, _virtual_primaries


def _dense(W: _Columns, c: int) -> np.ndarray:
    rows, vals = W.column(c)
    out = np.zeros(W.shape[0], dtype=np.int64)
    out[rows] = vals
    return out


@pytest.mark.parametrize("dense_at", [10**6, 1])  # columns kept sparse / kept as dense vectors
def test_elimination_step_is_c_minus_multiple_of_pivot_column(dense_at, monkeypatch):
    """A pivot of 1 divides every entry: each column becomes c − c_p·a exactly, whether the
    columns are stored sparse or dense; a column gaining entries (fill-in) is rewritten."""
    monkeypatch.setattr(_Columns, "_DENSE", dense_at)
    rng = np.random.default_rng(3)
    M = rng.integers(-2, 3, size=(12, 6))
    M[[0, 4, 7], 0] = [1, 2, -1]  # the pivot column: pivot row 0, entry 1
    M[0, 1:] = [3, -1, 0, 2, 1]
    M[:, 5] = 0
    M[0, 5] = 1  # a column on the pivot row only: gains the pivot column's rows (fill-in)
    W = _Columns(sparse.csc_matrix(M), dense=True)
    rows, vals = W.column(0)
    rows, vals = rows.copy(), vals.copy()
    cols, cp = W.row(0)
    keep = cols > 0
    assert _eliminate(W, rows, vals, cols[keep], cp[keep], True, 1e-9)
    for c in range(1, 6):
        assert np.array_equal(_dense(W, c), M[:, c] - M[0, c] * M[:, 0])


def test_fraction_free_step_when_the_pivot_does_not_divide():
    """Pivot α = 2 and entries c_p = 3: the column becomes (α/g)·c − (c_p/g)·a, g = gcd(α, c_p),
    in integers (no rounding)."""
    a = np.array([2, 1, 0, 3])
    c = np.array([3, 0, 5, -1])
    W = _Columns(sparse.csc_matrix(np.c_[a, c]), dense=False)
    rows, vals = W.column(0)
    rows, vals = rows.copy(), vals.copy()
    cols, cp = W.row(0)
    assert _eliminate(W, rows, vals, cols[cols > 0], cp[cols > 0], True, 1e-9)
    g = gcd(2, 3)
    assert np.array_equal(_dense(W, 1), (2 // g) * c - (3 // g) * a)
    assert _dense(W, 1)[0] == 0


def _table_2x2_with_total() -> sparse.csc_matrix:
    # inner a, b, c, d; published a, b, c, d, a+b, c+d, total
    X = np.zeros((4, 7), dtype=np.int64)
    X[np.arange(4), np.arange(4)] = 1
    X[[0, 1], 4] = 1
    X[[2, 3], 5] = 1
    X[:, 6] = 1
    return sparse.csc_matrix(X)


def test_published_singleton_cell_turns_any_sum_into_any_sum_not_primary():
    W0 = _table_2x2_with_total()
    sing = np.array([True, False, False, False])
    protect = np.zeros(7, dtype=bool)
    protect[1] = True  # inner cell a (a singleton) is published unprotected
    method, _ = _resolve_method(W0, "anySum", sing.copy(), protect, np.zeros(7, dtype=bool))
    assert method == "anySumNOTprimary"
    with pytest.raises(SpecError, match="anySumNOTprimary"):
        _resolve_method(W0, "subSum", sing.copy(), protect, np.zeros(7, dtype=bool))
    protect[0] = True  # now it is protected: anySum stays
    assert _resolve_method(W0, "anySum", sing.copy(), protect, np.zeros(7, dtype=bool))[0] == "anySum"


def test_never_cells_turn_any_sum_into_sub_sum_any_and_publish_their_single_cells():
    W0 = _table_2x2_with_total()
    sing = np.array([True, False, True, False])
    protect = np.zeros(7, dtype=bool)
    protect[[0, 2]] = True
    never = np.zeros(7, dtype=bool)
    never[6] = True  # the total: not a single inner cell
    method, s = _resolve_method(W0, "anySum", sing.copy(), protect, never)
    assert method == "subSumAny" and np.array_equal(s, sing)
    never[:] = False
    never[3] = True  # inner cell d published for sure: a single inner cell, so d is no singleton
    sing_d = np.array([True, False, False, True])
    _, s = _resolve_method(W0, "anySum", sing_d.copy(), protect, never)
    assert np.array_equal(s, [True, False, False, False])
    assert not _resolve_method(W0, "none", sing.copy(), protect, np.zeros(7, dtype=bool))[1].any()


def test_sub_sum_virtual_primary_cells_are_sums_of_singleton_cells():
    """subSum: one virtual primary cell per distinct sum of two or more singleton inner cells
    under a published cell; the singleton rule is then off (subSumAny keeps it)."""
    W0 = _table_2x2_with_total()
    sing = np.array([True, True, True, False])
    protect = np.zeros(7, dtype=bool)
    extra, s = _virtual_primaries(W0, sing, protect, "subSum")
    got = {tuple(np.flatnonzero(col)) for col in extra.toarray().T}
    assert got == {(0, 1), (0, 1, 2)}  # a+b (cell 4) and a+b+c (the total); c+d has one singleton
    assert not s.any()
    assert np.array_equal(_virtual_primaries(W0, sing, protect, "subSumAny")[1], sing)


def test_numtthtt_repeated_singleton_rows():
    """Rows of the same contributor repeated: one kept; a singleton row repeated more than
    twice is no singleton problem: one kept, unmarked; a pair stays as it is."""
    X = np.array([[1, 1, 0], [1, 1, 0], [1, 1, 0], [0, 1, 1], [0, 1, 1], [1, 0, 1], [1, 0, 1]])
    codes = np.array([1, 2, 3, 4, 5, 6, 6])
    W, c = _drop_repeated_singletons(sparse.csc_matrix(X), codes, integer=True)
    assert W.shape[0] == 4  # rows 1, 2 (three-fold) and 6 (same contributor as 5) dropped
    assert c.tolist() == [0, 4, 5, 6]
    W, c = _drop_repeated_singletons(sparse.csc_matrix(X), np.array([1, 2, 3, 4, 5, 6, 7]), integer=False)
    assert W.shape[0] == 5 and c.tolist() == [0, 4, 5, 6, 7]


def test_candidate_order_never_first_without_repeats_or_cells_to_protect():
    W0 = _table_2x2_with_total()
    protect = np.zeros(7, dtype=bool)
    protect[2] = True
    never = np.zeros(7, dtype=bool)
    never[5] = True
    order = _candidate_order(W0, np.ones(7), [6, 2, 0, 6, 5, 1], None, None, protect, never)
    assert order.tolist() == [5, 6, 0, 1]
