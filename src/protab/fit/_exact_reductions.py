"""Exact reductions of the fit package (SSBtools ``Reduce0exact``): inner cells that zero
targets force to 0, and inner cells alone under a published cell."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from protab.fit._fit_inputs import BoolArray, FloatArray


def _pattern(X: sp.csc_array) -> sp.csc_array:
    P = X.copy()
    P.data = np.ones_like(P.data)
    return P


def _reduce_zeros(
    X: sp.sparray, zero_cols: BoolArray, zero_rows: BoolArray | None = None
) -> tuple[BoolArray, BoolArray]:
    """The zero step of Reduce0exact: published cells known to be 0 force their inner cells to 0.

    ``X`` is non-negative (inner × published); ``zero_cols`` marks published cells whose value is
    exactly 0, ``zero_rows`` inner cells already known to be 0. Returns ``(rows_zero,
    cols_removed)``: the inner cells forced to 0, and the published cells to drop from the
    reduced problem (the zero ones, plus those left with no free inner cell).
    """
    zc = np.asarray(zero_cols, dtype=bool)
    rows_zero = np.asarray(X @ zc.astype(np.float64)) > 0
    if zero_rows is not None:
        rows_zero |= np.asarray(zero_rows, dtype=bool)
    free_count = np.asarray(X.T @ (~rows_zero).astype(np.float64))
    cols_removed = zc | (free_count <= 0)
    return rows_zero, cols_removed


def _reduce_singletons(
    X: sp.csc_array,
    Xt: sp.csr_array,
    z: FloatArray,
    rows_free: BoolArray,
    cols_active: BoolArray,
    y_fixed: FloatArray,
    rtol: float,
) -> None:
    """Reduce0exact with reduceByColSums, in place: fix inner cells alone under a published cell.

    Repeats: a published cell with one free inner cell fixes that cell to its residual target;
    its contribution is subtracted from every published cell; residual targets that become 0
    force their free inner cells to 0 (zero step). Negative residuals (inconsistent targets) are
    treated as 0; the final deviation on the full problem reveals them.
    """
    n_inner = X.shape[0]
    idx = np.arange(n_inner, dtype=np.float64)
    scale = np.maximum(1.0, np.abs(z))
    P = _pattern(X)
    Pt = sp.csr_array(P.T)
    while True:
        free_f = rows_free.astype(np.float64)
        cnt = np.asarray(Pt @ free_f)
        single = cols_active & (cnt == 1)
        if not single.any():
            break
        r_of = np.rint(np.asarray(Pt @ (free_f * idx))[single]).astype(np.int64)
        c_of = np.flatnonzero(single)
        resid = z - np.asarray(Xt @ y_fixed)
        xval = np.asarray(Xt @ free_f)[c_of]  # the entry x_rc of each singleton column
        val = np.maximum(resid[c_of] / xval, 0.0)
        y_fixed[r_of] = val
        rows_free[r_of] = False
        cols_active[c_of] = False
        resid = z - np.asarray(Xt @ y_fixed)
        free_f = rows_free.astype(np.float64)
        cnt = np.asarray(Pt @ free_f)
        gone = cols_active & (cnt == 0)
        cols_active[gone] = False
        zero_now = cols_active & (resid <= rtol * scale)
        if zero_now.any():
            rz, cr = _reduce_zeros(P, zero_now, ~rows_free)
            rows_free &= ~rz  # newly forced zeros keep y_fixed = 0
            cols_active &= ~cr
