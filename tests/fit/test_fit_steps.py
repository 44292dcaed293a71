"""The steps of protab.fit one by one: an IPF sweep over blocks of disjoint columns, the
exact reductions before IPF, and the step size of FISTA (largest eigenvalue)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from protab.fit.lsq import _largest_eigenvalue
from protab.fit.proportional import _Reduced, _sweep, _sweep_plan, column_blocks


def _two_way(r: int, c: int) -> sp.csc_array:
    """Inner r × c; published the rows' and the columns' margins."""
    X = np.zeros((r * c, r + c))
    for i in range(r):
        for j in range(c):
            X[i * c + j, i] = 1
            X[i * c + j, r + j] = 1
    return sp.csc_array(X)


def test_one_sweep_meets_the_targets_of_the_last_block():
    """After a sweep, the published cells of the last block updated meet their targets exactly
    (each block's columns are disjoint, so its scaling meets all of them at once)."""
    X = _two_way(3, 4)
    rng = np.random.default_rng(2)
    z = np.asarray(X.T @ rng.integers(1, 9, size=12), dtype=np.float64)
    bl = column_blocks(X)
    assert sorted(set(bl.tolist())) == [0, 1]  # the row margins, then the column margins
    plan = _sweep_plan(X, z, bl)
    y = np.ones(12)
    _sweep(plan, y)
    last = bl == bl.max()
    assert np.allclose((X.T @ y)[last], z[last], rtol=1e-12)


def test_exact_reductions_fix_zeros_and_cells_alone_under_a_published_cell():
    """A zero target forces its inner cells to 0; a published cell over one free inner cell
    fixes it, repeatedly: here nothing is left for IPF."""
    X = sp.csc_array(np.c_[_two_way(2, 2).toarray(), [0, 0, 0, 1.0]])  # cell 4: inner cell 3 alone
    z = np.array([0.0, 5, 2, 3, 3])  # row margin 0 is 0: inner cells 0, 1 are 0
    red = _Reduced(X, sp.csr_array(X.T), z, np.ones(4), True, 1e-10)
    assert red.rows_zero.tolist() == [True, True, False, False]
    assert red.y_fixed[[2, 3]].tolist() == [2.0, 3.0]  # column margins, once inner cells 0, 1 are 0
    assert red.rows.tolist() == [] and red.cols.tolist() == []


def test_power_iteration_estimates_the_largest_eigenvalue():
    rng = np.random.default_rng(4)
    A = sp.csr_array(rng.random((30, 12)))
    true = float(np.linalg.eigvalsh((A.T @ A).toarray()).max())
    est = _largest_eigenvalue(A, sp.csr_array(A.T))
    assert abs(est - true) <= 1e-9 * true
