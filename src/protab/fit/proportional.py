"""Iterative proportional fitting (ipf) on a sparse X: column blocks, exact reductions, the support LP."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from protab._matrices import as_csc as _as_csc
from protab._progress import bar
from protab.errors import ConvergenceError, ConvergenceWarning, InputError
from protab.fit._exact_reductions import _pattern, _reduce_singletons, _reduce_zeros
from protab.fit._fit_inputs import BoolArray, FloatArray, IntArray, _nonneg, _vector

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
    P.sort_indices()
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
    Xc, zz, y0 = _ipf_inputs(X, z, start, tol, max_iter)
    Xt = sp.csr_array(Xc.T)
    user_blocks = None if blocks is None else _check_blocks(sp.csr_array(_pattern(Xc)), blocks, zz.size)
    red = _Reduced(Xc, Xt, zz, y0, reduce_singletons, tol)
    if exact_support is None:
        exact_support = red.rows.size <= _LP_MAX_INNER
    run = _sweeps(red, user_blocks, tol, max_iter, stall_tol, bool(exact_support), lp_after)
    return _result(Xt, zz, red.full(y0, run), run, tol, strict)


def _ipf_inputs(X: sp.sparray | sp.spmatrix | np.ndarray, z: ArrayLike, start: ArrayLike | None, tol: float,
                max_iter: int) -> tuple[sp.csc_array, FloatArray, FloatArray]:
    """X (≥ 0), the targets z (≥ 0) and the start (default ones) of :func:`ipf`, checked."""
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
    return Xc, zz, y0


class _Reduced:
    """The problem left after the exact reductions: inner cells ``rows`` (the free ones) and
    published cells ``cols`` (the active ones) of X, ``Xr``, with the residual targets ``zr``."""

    def __init__(self, Xc: sp.csc_array, Xt: sp.csr_array, zz: FloatArray, y0: FloatArray,
                 reduce_singletons: bool, tol: float) -> None:
        rows_zero, cols_removed = _reduce_zeros(_pattern(Xc), zz == 0, y0 == 0)
        self.rows_zero = rows_zero
        self.rows_free = ~rows_zero
        cols_active = ~cols_removed
        self.y_fixed = np.zeros(Xc.shape[0])
        if reduce_singletons:
            _reduce_singletons(Xc, Xt, zz, self.rows_free, cols_active, self.y_fixed, rtol=tol)
        resid_z = zz - np.asarray(Xt @ self.y_fixed)
        self.rows = np.flatnonzero(self.rows_free)
        self.cols = np.flatnonzero(cols_active)
        self.Xr = sp.csc_array(Xc[self.rows][:, self.cols])
        self.zr = resid_z[self.cols]
        self.scale_r = np.maximum(1.0, np.abs(zz[self.cols]))
        self.yr = y0[self.rows].copy()

    def full(self, y0: FloatArray, run: _Run) -> tuple[FloatArray, BoolArray]:
        """The fitted inner cells of the whole problem, and which were fixed rather than fitted."""
        y = y0.copy()
        y[self.rows_zero] = 0.0
        fixed = ~self.rows_free
        y[fixed & ~self.rows_zero] = self.y_fixed[fixed & ~self.rows_zero]
        y[self.rows] = self.yr
        fixed[self.rows[run.lp_zero]] = True
        return y, fixed


def _sweep_plan(Xr: sp.csc_array, zr: FloatArray,
                bl: IntArray) -> list[tuple[IntArray, IntArray, FloatArray | None, FloatArray]]:
    """Per block of disjoint columns: the entries (row, local column, value; None when all are
    1) of its columns and their targets."""
    Xr_coo = sp.coo_array(Xr)
    e_row = Xr_coo.row.astype(np.int64)
    e_col = Xr_coo.col.astype(np.int64)
    e_val = Xr_coo.data
    unit = bool(np.all(e_val == 1.0))
    order = np.argsort(bl[e_col], kind="stable")
    e_blk = bl[e_col][order]
    splits = np.flatnonzero(np.diff(e_blk)) + 1
    local = np.zeros(zr.size, dtype=np.int64)
    plan: list[tuple[IntArray, IntArray, FloatArray | None, FloatArray]] = []
    for part in np.split(order, splits) if order.size else []:
        bcols = np.unique(e_col[part])
        local[bcols] = np.arange(bcols.size)
        plan.append((e_row[part], local[e_col[part]], None if unit else e_val[part], zr[bcols]))
    return plan


def _sweep(plan: list[tuple[IntArray, IntArray, FloatArray | None, FloatArray]], yr: FloatArray) -> None:
    """One IPF sweep, in place: per block, ``y_r *= z_c / (Xᵀy)_c``."""
    for r_b, c_b, v_b, z_b in plan:
        yb = yr[r_b]
        s = np.bincount(c_b, weights=yb if v_b is None else yb * v_b, minlength=z_b.size)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = z_b / s
        f[~np.isfinite(f)] = 1.0  # 0/0 (or z/0, which cannot be met): skip
        yr[r_b] = yb * f[c_b]


@dataclass
class _Run:
    """The record of the sweeps: status, sweeps run, deviation after each, cells the LP fixed."""

    lp_zero: BoolArray
    status: str = "converged"
    it: int = 0
    history: list[float] = field(default_factory=list)


def _sweeps(red: _Reduced, user_blocks: IntArray | None, tol: float, max_iter: int, stall_tol: float,
            exact_support: bool, lp_after: int) -> _Run:
    """Sweep the reduced problem (its ``yr`` in place) until every target is met; the support LP
    once, after ``lp_after`` sweeps or a stall, when ``exact_support``."""
    run = _Run(lp_zero=np.zeros(red.rows.size, dtype=bool))
    if not red.cols.size:
        return run
    Xrt, zr, yr = sp.csr_array(red.Xr.T), red.zr, red.yr
    bl = user_blocks[red.cols] if user_blocks is not None else column_blocks(red.Xr)
    plan = _sweep_plan(red.Xr, zr, bl)
    if float(np.max(np.abs(np.asarray(Xrt @ yr) - zr) / red.scale_r)) <= tol:
        return run
    run.status = "max_iter"
    lp_done = not exact_support
    prev_rel = np.inf
    with bar("IPF", total=max_iter, unit="sweep") as pb:
        for it in range(1, max_iter + 1):
            run.it = it
            _sweep(plan, yr)
            dev = np.asarray(Xrt @ yr) - zr
            run.history.append(float(np.max(np.abs(dev))))
            rel = float(np.max(np.abs(dev) / red.scale_r))
            pb.update(1)
            if rel <= tol:
                run.status = "converged"
                break
            stalled = abs(prev_rel - rel) <= stall_tol
            if not lp_done and (it >= lp_after or stalled):
                lp_done = True
                support = _lp_support(red.Xr, zr)
                if support is None:
                    run.status = "inconsistent"
                    break
                run.lp_zero = ~support
                yr[run.lp_zero] = 0.0
                prev_rel = np.inf
                continue
            if stalled:
                run.status = "stalled"
                break
            prev_rel = rel
    return run


def _result(Xt: sp.csr_array, zz: FloatArray, fitted: tuple[FloatArray, BoolArray], run: _Run, tol: float,
            strict: bool) -> IPFResult:
    """The result of :func:`ipf`: the deviation on the full problem; a warning (or with
    ``strict`` a ConvergenceError) naming the worst cell when a target is missed."""
    y, fixed = fitted
    full_dev = np.asarray(Xt @ y) - zz
    abs_dev = np.abs(full_dev)
    max_dev = float(abs_dev.max(initial=0.0))
    rel_full = abs_dev / np.maximum(1.0, np.abs(zz))
    converged = bool(rel_full.max(initial=0.0) <= tol)
    status = run.status
    if not converged and status == "converged":
        status = "inconsistent"  # the IPF part met its targets: the exact reductions clash
    if not converged:
        worst = int(np.argmax(rel_full))
        msg = (
            f"ipf did not converge ({status}, {run.it} sweeps): max |Xᵀy − z| = {max_dev:.6g} "
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
        warnings.warn(ConvergenceWarning(msg), stacklevel=3)
    return IPFResult(y=y, converged=converged, iterations=run.it, max_deviation=max_dev, history=run.history,
                     status=status, fixed=fixed)
