"""Iterative proportional fitting (ipf) on a sparse X: column blocks, exact reductions, the support LP."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from protab._progress import bar
from protab.errors import ConvergenceError, ConvergenceWarning, InputError
from protab.fit._common import (
    BoolArray,
    FloatArray,
    IntArray,
    _as_csc,
    _nonneg,
    _pattern,
    _reduce_zeros,
    _vector,
)

__all__ = ["IPFResult", "column_blocks", "ipf"]

# ipf's support LP (HiGHS) runs by default up to this many free inner cells (~10 s there).
_LP_MAX_INNER = 10_000


@dataclass(frozen=True, eq=False)
class IPFResult:
    """Result of :func:`ipf`.

    ``y``: fitted inner frequencies (≥ 0). ``converged``: every published cell met
    ``|Xᵀy − z| ≤ tol·max(1, |z|)``. ``iterations``: sweeps run. ``max_deviation``:
    ``max |Xᵀy − z|`` over all published cells. ``history``: that maximum after each sweep (on
    the reduced problem). ``status``: ``"converged"``; ``"max_iter"`` (sweep limit reached);
    ``"stalled"`` (the deviation stopped changing above the tolerance: the targets are very
    likely inconsistent); ``"inconsistent"`` (proved: the support LP is infeasible, or the exact
    reductions contradict each other). ``fixed``: inner cells fixed exactly rather than fitted
    (zeros under zero targets or a zero start, cells alone under a published cell, and cells the
    support LP shows are 0 in every solution).
    """

    y: FloatArray
    converged: bool
    iterations: int
    max_deviation: float
    history: list[float] = field(default_factory=list)
    status: str = "converged"
    fixed: BoolArray | None = None


def column_blocks(X: sp.sparray | sp.spmatrix | np.ndarray, *, max_passes: int = 64) -> IntArray:
    """Greedy partition of X's columns into blocks of disjoint columns (no shared inner cell).

    Within a block every inner cell is under at most one published cell, so IPF can update the
    whole block at once. Each block is grown in vectorised passes: an available column joins
    when it has the lowest index among the available columns in each of its rows; columns that
    touch a row already covered stop being available. For a model matrix whose columns come
    term by term (as ModelMatrix/FormulaSums order them) each block is one term. The partition
    depends only on the columns' row sets and order, not on the order of the rows.
    """
    Xc = _as_csc(X)
    n_inner, n_pub = Xc.shape
    P = sp.csr_array(_pattern(Xc))
    P.sort_indices()
    rows = np.repeat(np.arange(n_inner), np.diff(P.indptr))
    cols = P.indices.astype(np.int64)
    colcount = np.bincount(cols, minlength=n_pub)
    block = np.full(n_pub, -1, dtype=np.int64)
    block[colcount == 0] = 0
    unassigned = block < 0
    b = 0
    while unassigned.any():
        avail = unassigned.copy()
        for _ in range(max_passes):
            m = avail[cols]
            r_m, c_m = rows[m], cols[m]
            if r_m.size == 0:
                break
            first = np.ones(r_m.size, dtype=bool)
            first[1:] = r_m[1:] != r_m[:-1]  # entries are sorted by (row, column)
            wins = np.bincount(c_m[first], minlength=n_pub)
            sel = avail & (wins == colcount)
            block[sel] = b
            unassigned &= ~sel
            covered = np.zeros(n_inner, dtype=bool)
            covered[r_m[sel[c_m]]] = True
            touching = np.bincount(c_m[covered[r_m]], minlength=n_pub) > 0
            avail &= ~sel & ~touching
            if not avail.any():
                break
        b += 1
    return block


def _check_blocks(P: sp.csr_array, blocks: ArrayLike, n_pub: int) -> IntArray:
    bl = np.asarray(blocks)
    if bl.shape != (n_pub,) or not np.issubdtype(bl.dtype, np.integer):
        raise InputError(
            f"blocks must be an integer array with one block number per published cell "
            f"({n_pub}), got dtype {bl.dtype} and shape {bl.shape}"
        )
    if n_pub and bl.min() < 0:
        raise InputError("blocks must be ≥ 0")
    bl = bl.astype(np.int64)
    n_inner = P.shape[0]
    rows = np.repeat(np.arange(n_inner, dtype=np.int64), np.diff(P.indptr))
    nb = int(bl.max(initial=-1)) + 1
    key = np.sort(rows * nb + bl[P.indices])
    dup = np.flatnonzero(key[1:] == key[:-1])
    if dup.size:
        k = key[dup[0]]
        r, blk = divmod(int(k), nb)
        raise InputError(
            f"blocks are not disjoint: inner cell {r} is under two published cells of block {blk} "
            f"({dup.size} such clashes); use column_blocks(X) or omit blocks"
        )
    return bl


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


def _lp_support(Xr: sp.csc_array, zr: FloatArray) -> BoolArray | None:
    """Inner cells that are positive in some y ≥ 0 with Xᵀy = z (facial reduction by one LP).

    Cells outside this support are 0 in every solution; IPF only approaches them slowly (the
    log-linear fit lies on the boundary of the model), so fixing them to 0 restores its fast
    convergence. The LP (HiGHS) is homogenised so that one solve finds the whole support:
    maximise Σ t_i subject to Xᵀy = s·z, 0 ≤ t_i ≤ min(1, y_i), s ≥ 1. Any y ≥ 0 meeting z can
    be scaled up by s until its positive cells are ≥ 1, so at the optimum t_i = 1 exactly on
    the support and 0 elsewhere (cf. Fienberg & Rinaldo 2012 on extended log-linear MLEs).
    Returns None when the LP is infeasible, which proves that no y ≥ 0 has Xᵀy = z.
    """
    from scipy.optimize import linprog

    n, m = Xr.shape
    A_eq = sp.hstack(
        [sp.csr_array(Xr.T), sp.csr_array((m, n)), sp.csr_array(-zr.reshape(-1, 1))],
        format="csr",
    )
    A_ub = sp.hstack(
        [-sp.identity(n, format="csr"), sp.identity(n, format="csr"), sp.csr_array((n, 1))],
        format="csr",
    )
    c = np.concatenate([np.zeros(n), -np.ones(n), [0.0]])
    lo = np.zeros(2 * n + 1)
    lo[-1] = 1.0
    hi = np.concatenate([np.full(n, np.inf), np.ones(n), [np.inf]])
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(n), A_eq=A_eq, b_eq=np.zeros(m),
                  bounds=np.column_stack([lo, hi]), method="highs")
    if res.status == 2:
        return None
    if res.status != 0 or res.x is None:
        return np.ones(n, dtype=bool)  # undecided: keep every cell
    return np.asarray(res.x[n : 2 * n] > 0.5)


def ipf(
    X: sp.sparray | sp.spmatrix | np.ndarray,
    z: ArrayLike,
    *,
    start: ArrayLike | None = None,
    tol: float = 1e-10,
    max_iter: int = 1000,
    blocks: ArrayLike | None = None,
    reduce_singletons: bool = True,
    stall_tol: float = 1e-13,
    exact_support: bool | None = None,
    lp_after: int = 50,
    strict: bool = False,
) -> IPFResult:
    """Iterative proportional fitting on a sparse X (Deming & Stephan 1940; SSBtools ``Mipf``).

    Starts from ones (or ``start`` ≥ 0) and scales the inner cells under each published cell so
    that they sum to its target, sweeping until every published cell meets
    ``|Xᵀy − z| ≤ tol·max(1, |z|)``. The result is the fit of the log-linear model for which z
    is sufficient (expected inner frequencies; with ``start`` a seed table, its I-projection).
    Targets may be non-integer; a 0/0 update is skipped. First the exact reductions of
    Reduce0exact: zero targets (and zero ``start`` values) fix their inner cells to 0, and, with
    ``reduce_singletons``, a published cell with a single free inner cell fixes it. The updates
    are vectorised per block of disjoint columns (``blocks``, one integer per published cell;
    default :func:`column_blocks`): for each block ``y_r *= z_c / (Xᵀy)_c`` for the one column c
    of the block over row r. X must be ≥ 0 (0/1 in the usual case); inner cells under no
    published cell keep their start value.

    When consistent targets can only be met with inner cells that no zero target forces to 0
    (the log-linear fit lies on the boundary, common in sparse tables), IPF converges only
    slowly. With ``exact_support`` (default: when at most 10,000 inner cells remain free) ipf
    then solves one LP after ``lp_after`` unconverged sweeps, or when the deviation stalls, to
    find the cells that are 0 in every solution (:func:`_lp_support`), fixes them and goes on.

    If the targets are inconsistent (no y ≥ 0 with Xᵀy = z exists, e.g. a margin that is not the
    sum of its children) IPF cannot converge. ipf says so with a ``ConvergenceWarning`` naming
    the max deviation and returns ``converged=False`` with the history: status "inconsistent"
    when the LP proves it, "stalled" when the relative deviation changes by less than
    ``stall_tol`` between sweeps, "max_iter" after ``max_iter`` sweeps. ``strict=True`` raises
    :class:`ConvergenceError` (a ``ProtabError``) instead of warning.
    """
    Xc = _as_csc(X, nonneg=True)
    n_inner, n_pub = Xc.shape
    zz = _vector(z, n_pub, "z", "published", X_shape=Xc.shape)
    _nonneg(zz, "z (ipf targets)", "published")
    if start is None:
        y0 = np.ones(n_inner)
    else:
        y0 = _vector(start, n_inner, "start", "inner")
        _nonneg(y0, "start", "inner")
    if not (tol > 0 and np.isfinite(tol)):
        raise InputError(f"tol must be a positive number, got {tol!r}")
    if max_iter < 0:
        raise InputError(f"max_iter must be ≥ 0, got {max_iter!r}")
    Xt = sp.csr_array(Xc.T)
    P = _pattern(Xc)
    user_blocks = None
    if blocks is not None:
        Pr = sp.csr_array(P)
        Pr.sort_indices()
        user_blocks = _check_blocks(Pr, blocks, n_pub)

    # exact reductions
    rows_zero, cols_removed = _reduce_zeros(P, zz == 0, y0 == 0)
    rows_free = ~rows_zero
    cols_active = ~cols_removed
    y_fixed = np.zeros(n_inner)
    if reduce_singletons:
        _reduce_singletons(Xc, Xt, zz, rows_free, cols_active, y_fixed, rtol=tol)
    resid_z = zz - np.asarray(Xt @ y_fixed)

    rows = np.flatnonzero(rows_free)
    cols = np.flatnonzero(cols_active)
    Xr = sp.csc_array(Xc[rows][:, cols])
    Xrt = sp.csr_array(Xr.T)
    zr = resid_z[cols]
    scale_r = np.maximum(1.0, np.abs(zz[cols]))
    yr = y0[rows].copy()

    if user_blocks is not None:
        bl = user_blocks[cols]
    else:
        bl = column_blocks(Xr) if cols.size else np.zeros(0, dtype=np.int64)
    # per block: the entries (row, local column, value) of its columns
    Xr_coo = sp.coo_array(Xr)
    e_row = Xr_coo.row.astype(np.int64)
    e_col = Xr_coo.col.astype(np.int64)
    e_val = Xr_coo.data
    unit = bool(np.all(e_val == 1.0))
    order = np.argsort(bl[e_col], kind="stable")
    e_blk = bl[e_col][order]
    splits = np.flatnonzero(np.diff(e_blk)) + 1
    local = np.zeros(cols.size, dtype=np.int64)
    plan: list[tuple[IntArray, IntArray, FloatArray | None, FloatArray]] = []
    for part in np.split(order, splits) if order.size else []:
        bcols = np.unique(e_col[part])
        local[bcols] = np.arange(bcols.size)
        plan.append(
            (
                e_row[part],
                local[e_col[part]],
                None if unit else e_val[part],
                zr[bcols],
            )
        )

    history: list[float] = []
    status = "converged"
    it = 0
    lp_zero = np.zeros(rows.size, dtype=bool)
    lp_done = False
    if exact_support is None:
        exact_support = rows.size <= _LP_MAX_INNER
    prev_rel = np.inf
    if cols.size:
        dev = np.asarray(Xrt @ yr) - zr
        rel = float(np.max(np.abs(dev) / scale_r))
        if rel > tol:
            status = "max_iter"
            with bar("IPF", total=max_iter, unit="sweep") as pb:
                for it in range(1, max_iter + 1):
                    for r_b, c_b, v_b, z_b in plan:
                        yb = yr[r_b]
                        s = np.bincount(c_b, weights=yb if v_b is None else yb * v_b,
                                        minlength=z_b.size)
                        with np.errstate(divide="ignore", invalid="ignore"):
                            f = z_b / s
                        f[~np.isfinite(f)] = 1.0  # 0/0 (or z/0, which cannot be met): skip
                        yr[r_b] = yb * f[c_b]
                    dev = np.asarray(Xrt @ yr) - zr
                    history.append(float(np.max(np.abs(dev))))
                    rel = float(np.max(np.abs(dev) / scale_r))
                    pb.update(1)
                    if rel <= tol:
                        status = "converged"
                        break
                    stalled = abs(prev_rel - rel) <= stall_tol
                    if exact_support and not lp_done and (it >= lp_after or stalled):
                        lp_done = True
                        support = _lp_support(Xr, zr)
                        if support is None:
                            status = "inconsistent"
                            break
                        lp_zero = ~support
                        yr[lp_zero] = 0.0
                        prev_rel = np.inf
                        continue
                    if stalled:
                        status = "stalled"
                        break
                    prev_rel = rel

    y = y0.copy()
    y[rows_zero] = 0.0
    fixed = ~rows_free
    y[fixed & ~rows_zero] = y_fixed[fixed & ~rows_zero]
    y[rows] = yr
    fixed[rows[lp_zero]] = True
    full_dev = np.asarray(Xt @ y) - zz
    abs_dev = np.abs(full_dev)
    max_dev = float(abs_dev.max(initial=0.0))
    rel_full = abs_dev / np.maximum(1.0, np.abs(zz))
    converged = bool(rel_full.max(initial=0.0) <= tol)
    if not converged and status == "converged":
        status = "inconsistent"  # the IPF part met its targets: the exact reductions clash
    if not converged:
        worst = int(np.argmax(rel_full))
        msg = (
            f"ipf did not converge ({status}, {it} sweeps): max |Xᵀy − z| = {max_dev:.6g} "
            f"(published cell {worst}: fitted {zz[worst] + full_dev[worst]:.6g}, "
            f"target {zz[worst]:.6g}); "
            f"{int((rel_full > tol).sum())} published cells miss tol={tol:g}. "
            + {
                "inconsistent": "The targets are inconsistent: no y ≥ 0 has Xᵀy = z (is "
                "every margin the sum of its children? restore additivity with lsfit_nonneg, "
                "or fit with nnls, first).",
                "stalled": "The targets look inconsistent: the deviation stopped changing (is "
                "every margin the sum of its children? restore additivity first).",
            }.get(status, "Raise max_iter, or check that the targets are consistent.")
        )
        if strict:
            raise ConvergenceError(msg)
        warnings.warn(ConvergenceWarning(msg), stacklevel=2)
    return IPFResult(
        y=y,
        converged=converged,
        iterations=it,
        max_deviation=max_dev,
        history=history,
        status=status,
        fixed=fixed,
    )
