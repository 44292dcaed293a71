"""The attacker's interval of true counts behind noisy published cells, by linear programming
(the LP audit of Hundepool et al. 2012, *Statistical Disclosure Control*, as protab runs it for
cell suppression in protab.suppression.pattern_audit; here for the cell key method, whose known
noise bound D the ESS guidelines warn makes such intervals).

The attacker knows X (inner cells × published cells, z = Xᵀy) and, per published cell c, an
interval [lower_c, upper_c] that holds its true value x_cᵀy (from the published value and the
noise bound, :func:`noise_bounds`). The true inner counts y are ≥ 0. For a target t (an inner
cell, or any combination of them) the interval is

    min / max tᵀy   subject to   lower_c ≤ x_cᵀy ≤ upper_c (every constrained c),  y ≥ 0,

one HiGHS linear program per target end (highspy: one model per block, kept across its LPs),
over real y: the integer problem relaxed. How the work is kept small:

1. a published cell with one coefficient 1 (an inner cell published itself) becomes a bound
   on that inner cell, not a row; inner cells whose bounds meet are fixed and substituted;
2. the free inner cells split into independent blocks, the connected components of the
   bipartite graph (inner cell — constrained published cell) (``connected_components``): a
   target's min is the sum of its blocks' mins; a free cell in no row takes its own bounds;
3. every LP solved gives a feasible vertex y, so a target end whose seen value already meets
   its a priori bound (Σ of its cells' own bounds, or a published cell's own interval) is
   settled without an LP of its own (exact). Per block, a few LPs that push every open end at
   once (each target up or down at random, seeded) settle most ends of tables whose cells can
   move independently; only the rest get an LP each;
4. between a block's LPs only the objective changes: pushes of many ends are solved cold by the
   interior point method (with crossover to a vertex, and a basis), which is fastest far from
   the last vertex; LPs of one end (or a few) by the primal simplex from the last optimal
   basis, still primal feasible, a small fraction of a cold solve.

What does not scale: a block with a grand total over everything is the whole table, and each
spreading round is a cold LP over it. Systems whose intervals lie far inside the cells' own
bounds need one LP per end. Matrices are built with scipy.sparse, never row by row.
"""

from __future__ import annotations

import time
from typing import Any

import highspy
import numpy as np
from highspy._core import _Highs  # highspy.Highs prints a banner on stdout, whatever the options
from numpy.typing import ArrayLike
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from protab._matrices import as_csc
from protab.audit.work_estimate import FIRST_LPS, WARM, Budget, lp_seconds, show_estimate
from protab.errors import ConvergenceError, InputError

__all__ = ["intervals"]

_TOL = 1e-7
_ROUNDS = 50  # at most this many spreading LPs per block
_HOW: dict[str, tuple[tuple[str, str | int], ...]] = {
    "ipm": (("solver", "ipm"), ("run_crossover", "on")),
    "primal": (("solver", "simplex"), ("simplex_strategy", 4)),
    "dual": (("solver", "simplex"), ("simplex_strategy", 1)),
}
_FEW = 20  # spreading LPs pushing at most this many ends start from the last basis (primal simplex)


def intervals(X: Any, lower: ArrayLike, upper: ArrayLike, *, targets: Any = None,
              known: tuple[ArrayLike, ArrayLike] | None = None,
              budget: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Real-valued bounds [lo, up] of ``targetsᵀ y`` over all y ≥ 0 with lower ≤ Xᵀy ≤ upper.

    ``X``: inner × published (sparse or 2-D array); ``lower``/``upper``: one per published cell
    (−inf/+inf: no constraint); ``targets``: inner × k matrix (default the identity: every
    inner cell); ``known``: optional (lower, upper) per target that the constraints already
    imply (e.g. a published cell's own bounds): they only spare LPs; ``budget``: seconds the LPs
    may take (estimated before solving, and again once a block's open ends are known,
    protab.audit.work_estimate; None = no limit): past it, an InputError stating the estimate
    and the budget instead of an unbounded run. Returns two float arrays
    of length k (+inf where unbounded). Raises InputError when no y ≥ 0 meets the bounds
    (values inconsistent with X and the noise bound).
    """
    limit = Budget(budget)
    A = as_csc(X)
    n, m = A.shape
    lo_c = _vector(lower, m, "lower")
    hi_c = _vector(upper, m, "upper")
    T = sparse.identity(n, format="csr") if targets is None else sparse.csr_array(as_csc(targets, what="targets"))
    if T.shape[0] != n:
        raise InputError(f"targets must have one row per inner cell ({n}), not {T.shape[0]}")
    k = T.shape[1]
    klo, khi = (np.full(k, -np.inf), np.full(k, np.inf)) if known is None else (
        _vector(known[0], k, "known lower"), _vector(known[1], k, "known upper"))
    lb, ub, R, rlo, rhi = _system(A, lo_c, hi_c)
    return _solve_all(sparse.csr_array(T), lb, ub, R, rlo, rhi, klo, khi, limit)


def _vector(v: ArrayLike, m: int, what: str) -> np.ndarray:
    out = np.asarray(v, dtype=np.float64).reshape(-1)
    if out.shape != (m,) or np.isnan(out).any():
        raise InputError(f"{what} must hold one number per cell ({m}), no NaN")
    return out


def _system(A: sparse.csc_array, lo_c: np.ndarray, hi_c: np.ndarray) -> tuple[np.ndarray, ...]:
    """Bounds of the inner cells (y ≥ 0 and the unit columns) and the remaining rows."""
    n = A.shape[0]
    lb = np.zeros(n)
    ub = np.full(n, np.inf)
    nnz = np.diff(A.indptr)
    active = np.isfinite(lo_c) | np.isfinite(hi_c)
    unit = active & (nnz == 1)
    unit[unit] = A.data[A.indptr[:-1][unit]] == 1.0
    rows = A.indices[A.indptr[:-1][unit]]
    np.maximum.at(lb, rows, lo_c[unit])
    np.minimum.at(ub, rows, hi_c[unit])
    keep = active & ~unit & (nnz > 0)
    empty = active & (nnz == 0)
    if (lb > ub + _TOL).any() or ((lo_c[empty] > _TOL) | (hi_c[empty] < -_TOL)).any():
        raise _inconsistent()
    ub = np.maximum(ub, lb)
    R = sparse.csr_array(A[:, np.flatnonzero(keep)].T)
    return lb, ub, R, lo_c[keep], hi_c[keep]


def _inconsistent() -> InputError:
    return InputError(
        "the published values are inconsistent with the model matrix and the noise bound: no "
        "non-negative true counts reproduce them (were the tables and X made by one run, with this D?)"
    )


def _solve_all(T: sparse.csr_array, lb: np.ndarray, ub: np.ndarray, R: sparse.csr_array, rlo: np.ndarray,
               rhi: np.ndarray, klo: np.ndarray, khi: np.ndarray, limit: Budget) -> tuple[np.ndarray, np.ndarray]:
    fixed = ub - lb <= _TOL
    free = np.flatnonzero(~fixed)
    shift = R[:, np.flatnonzero(fixed)] @ lb[fixed] if fixed.any() else np.zeros(R.shape[0])
    rlo, rhi = rlo - shift, rhi - shift
    R = sparse.csr_array(R[:, free])
    live = np.diff(R.indptr) > 0
    if ((rlo[~live] > _TOL) | (rhi[~live] < -_TOL)).any():
        raise _inconsistent()
    R, rlo, rhi = R[np.flatnonzero(live)], rlo[live], rhi[live]
    lo = T[np.flatnonzero(fixed)].T @ lb[fixed] if fixed.any() else np.zeros(T.shape[1])
    up = lo.copy()
    Tf = sparse.csr_array(T[free])
    lbf, ubf = lb[free], ub[free]
    label, nblocks = _blocks(R)
    in_rows = np.zeros(nblocks, dtype=bool)
    if R.shape[0]:
        in_rows[label[len(free) + np.arange(R.shape[0])]] = True
    alone = ~in_rows[label[: len(free)]]
    single = _one_block(Tf, label[: len(free)]) & ~(abs(Tf[np.flatnonzero(alone)]).sum(axis=0) > 0)
    known = (np.where(single, klo - lo, -np.inf), np.where(single, khi - lo, np.inf))
    a_lo, a_hi = _box(Tf[np.flatnonzero(alone)], lbf[alone], ubf[alone])
    lo += a_lo
    up += a_hi
    blocks = np.flatnonzero(in_rows)
    _first_estimate(Tf, R, label, blocks, limit)
    for b_lo, b_hi, cols in _blocks_solved(Tf, (lbf, ubf), (R, rlo, rhi), label, blocks, known, limit):
        lo[cols] += b_lo
        up[cols] += b_hi
    return lo, up


def _first_estimate(Tf: sparse.csr_array, R: sparse.csr_array, label: np.ndarray, blocks: np.ndarray,
                    limit: Budget) -> None:
    """The least LP work of the blocks with targets, checked against the budget before any LP."""
    nv = Tf.shape[0]
    nnz = np.bincount(label[nv:], weights=np.diff(R.indptr), minlength=label.max(initial=0) + 1)
    hit = np.zeros(nnz.size, dtype=bool)
    hit[label[:nv][np.diff(Tf.indptr) > 0]] = True
    used = blocks[hit[blocks]]
    if not used.size:
        return
    estimate = float(np.sum(FIRST_LPS * lp_seconds(nnz[used])))
    cells = int(np.bincount(label[:nv], minlength=nnz.size)[used].max())
    limit.check(estimate, FIRST_LPS * used.size, cells)
    show_estimate(estimate, FIRST_LPS * used.size)


def _one_block(T: sparse.csr_array, vlabel: np.ndarray) -> np.ndarray:
    """Targets whose free inner cells all lie in one block."""
    C = sparse.coo_array(T)
    pairs = np.unique(np.column_stack([C.col, vlabel[C.row]]), axis=0) if C.nnz else np.zeros((0, 2), np.int64)
    return np.bincount(pairs[:, 0], minlength=T.shape[1]) == 1


def _blocks(R: sparse.csr_array) -> tuple[np.ndarray, int]:
    """Connected components of the bipartite graph: nodes are the free inner cells, then the rows."""
    r, v = R.shape
    B = sparse.csr_array(R != 0, dtype=np.int8)
    graph = sparse.block_array([[None, B.T], [B, None]], format="csr") if r else sparse.csr_array((v, v))
    nblocks, label = connected_components(graph, directed=False)
    return label, nblocks


def _box(T: sparse.csr_array, lb: np.ndarray, ub: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of Tᵀy from the cells' own bounds alone (a priori)."""
    P = T.maximum(0)
    N = T.minimum(0)
    big = np.where(np.isinf(ub), 1e300, ub)  # 0·inf never arises: sparse products touch non-zeros only
    lo = P.T @ lb + N.T @ big
    hi = P.T @ big + N.T @ lb
    return np.where(lo <= -1e299, -np.inf, lo), np.where(hi >= 1e299, np.inf, hi)


def _blocks_solved(Tf: sparse.csr_array, bounds: tuple[np.ndarray, np.ndarray],
                   rows: tuple[sparse.csr_array, np.ndarray, np.ndarray], label: np.ndarray, blocks: np.ndarray,
                   known: tuple[np.ndarray, np.ndarray], limit: Budget) -> Any:
    """Per block with rows: (lo, up, target columns) of the targets it touches."""
    R, rlo, rhi = rows
    nv = Tf.shape[0]
    vlab, rlab = label[:nv], label[nv:]
    vorder = np.argsort(vlab, kind="stable")
    rorder = np.argsort(rlab, kind="stable")
    vs = np.searchsorted(vlab[vorder], blocks)
    ve = np.searchsorted(vlab[vorder], blocks, side="right")
    rs = np.searchsorted(rlab[rorder], blocks)
    re = np.searchsorted(rlab[rorder], blocks, side="right")
    Rp = sparse.csr_array(R[rorder][:, vorder])
    Tp = sparse.csr_array(Tf[vorder])
    lbp, ubp, rlop, rhip = bounds[0][vorder], bounds[1][vorder], rlo[rorder], rhi[rorder]
    for k in range(len(blocks)):
        v0, v1, r0, r1 = vs[k], ve[k], rs[k], re[k]
        tb = sparse.csc_array(Tp[v0:v1])
        cols = np.flatnonzero(np.diff(tb.indptr))
        if not cols.size:
            continue
        block = _Block(Rp[r0:r1, v0:v1], rlop[r0:r1], rhip[r0:r1], lbp[v0:v1], ubp[v0:v1], limit)
        b_lo, b_hi = block.target_bounds(sparse.csc_array(tb[:, cols]), known[0][cols], known[1][cols])
        yield b_lo, b_hi, cols


class _Block:
    """One independent block: its LP rows and the bounds of its inner cells, one HiGHS model
    kept for all the block's LPs (only the objective changes between them)."""

    def __init__(self, R: sparse.csr_array, rlo: np.ndarray, rhi: np.ndarray, lb: np.ndarray, ub: np.ndarray,
                 limit: Budget):
        self.limit, self.nnz = limit, R.nnz
        self.lb, self.ub = lb, ub
        self.n = R.shape[1]
        self.cols = np.arange(self.n, dtype=np.int32)
        self.h = _Highs()
        self.h.setOptionValue("output_flag", False)
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = self.n, R.shape[0]
        lp.col_cost_, lp.col_lower_, lp.col_upper_ = np.zeros(self.n), lb, ub  # highspy.kHighsInf is inf
        lp.row_lower_, lp.row_upper_ = rlo, rhi  # ranged rows: lo ≤ Σ ≤ hi in one row
        A = sparse.csc_array(R)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = A.indptr, A.indices, A.data
        self.h.passModel(lp)
        self.solved = 0

    def solve(self, c: np.ndarray, how: str = "primal") -> tuple[float, np.ndarray | None]:
        """min cᵀy: (value, y), or (−inf, None) when unbounded. ``how``: "ipm" (interior point,
        crossover to a vertex: the first LP and LPs far from the last), "primal" (primal simplex
        from the last optimal basis, still feasible: an objective that changes little)."""
        start = time.perf_counter()
        for key, value in _HOW[how]:
            self.h.setOptionValue(key, value)
        self.h.changeColsCost(self.n, self.cols, np.asarray(c, dtype=np.float64))
        self.h.run()
        status = self.h.getModelStatus()
        self.limit.spent += time.perf_counter() - start
        self.limit.lps += 1
        self.solved += 1
        if status == highspy.HighsModelStatus.kOptimal:
            return float(self.h.getInfo().objective_function_value), np.asarray(self.h.getSolution().col_value)
        if status == highspy.HighsModelStatus.kInfeasible or (
                status == highspy.HighsModelStatus.kUnboundedOrInfeasible and self.solved == 1):
            raise _inconsistent()
        if status in (highspy.HighsModelStatus.kUnbounded, highspy.HighsModelStatus.kUnboundedOrInfeasible):
            return -np.inf, None  # feasible (an earlier LP of this block was solved): unbounded
        raise ConvergenceError(f"feasibility audit: HiGHS stopped without an answer ({status.name})")

    def target_bounds(self, T: sparse.csc_array, klo: np.ndarray, khi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """min and max of every target column of T (``klo``/``khi``: bounds known beforehand);
        an end that a feasible y seen so far already meets is settled without an LP."""
        a_lo, a_hi = _box(sparse.csr_array(T), self.lb, self.ub)
        a_lo, a_hi = np.maximum(a_lo, klo), np.minimum(a_hi, khi)
        seen = _Seen(T)
        self._spread(T, a_lo, a_hi, seen)
        if not np.isfinite(seen.lo).any():  # no end to push (all a priori unbounded): one feasible y
            seen.add(self.solve(np.ones(T.shape[0]), "ipm")[1])
        lo, hi = a_lo.copy(), a_hi.copy()
        need_lo, need_hi = seen.lo > a_lo + _TOL, seen.hi < a_hi - _TOL
        open_ends = np.flatnonzero(need_lo | need_hi)
        lps = int(need_lo.sum() + need_hi.sum())
        self.limit.check(lps * WARM * float(lp_seconds(self.nnz)), lps, T.shape[0])
        for j in open_ends:  # one LP per end that no solution seen has met
            col = T[:, [j]].toarray().ravel()
            if seen.lo[j] > a_lo[j] + _TOL:
                lo[j], y = self.solve(col)
                seen.add(y)
            if seen.hi[j] < a_hi[j] - _TOL:
                val, y = self.solve(-col)
                hi[j] = -val
                seen.add(y)
        return lo, hi

    def _spread(self, T: sparse.csc_array, a_lo: np.ndarray, a_hi: np.ndarray, seen: _Seen) -> None:
        """LPs pushing every open end at once, each target up or down at random (seeded): most
        ends of a table whose cells can move independently are met in a few rounds. Only ends
        with a finite a priori bound are pushed (a point seen meets no infinite one), so these
        LPs are bounded. Far from the last vertex (many ends pushed) the interior point method
        solves them fastest; once few ends are left, the primal simplex from the last basis."""
        rng = np.random.default_rng(0)
        can_lo, can_hi = np.isfinite(a_lo), np.isfinite(a_hi)
        for _ in range(_ROUNDS):
            open_lo, open_hi = can_lo & (seen.lo > a_lo + _TOL), can_hi & (seen.hi < a_hi - _TOL)
            before = int(open_lo.sum() + open_hi.sum())
            if before == 0:
                return
            self.limit.check(float(lp_seconds(self.nnz)), 1, T.shape[0])
            down = np.where(open_lo & open_hi, rng.random(open_lo.size) < 0.5, open_lo)
            sign = np.where(open_lo | open_hi, np.where(down, 1.0, -1.0), 0.0)
            seen.add(self.solve(T @ sign, "ipm" if before > _FEW else "primal")[1])
            after = int((can_lo & (seen.lo > a_lo + _TOL)).sum() + (can_hi & (seen.hi < a_hi - _TOL)).sum())
            if before - after < max(1, before // 50):
                return


class _Seen:
    """The smallest and largest value of every target over the feasible points seen."""

    def __init__(self, T: sparse.csc_array):
        self.T = T
        self.lo = np.full(T.shape[1], np.inf)
        self.hi = np.full(T.shape[1], -np.inf)

    def add(self, y: np.ndarray | None) -> None:
        if y is not None:
            v = self.T.T @ y
            np.minimum(self.lo, v, out=self.lo)
            np.maximum(self.hi, v, out=self.hi)
