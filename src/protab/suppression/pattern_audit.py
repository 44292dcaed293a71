"""Audit of cell suppression: the intervals an attacker can compute for suppressed cells
(Hundepool et al. 2012, *Statistical Disclosure Control*, ch. 4 "Magnitude tables"; tau-ARGUS'
audit; GaussSuppression's ``ComputeIntervals``).

The attacker knows the model matrix X (inner cells × published cells, z = Xᵀy), the values of
every published (not suppressed) cell and bounds on the inner values (by default y ≥ 0). For a
suppressed cell c the *feasibility interval* is

    lo_c = min x_cᵀy,   up_c = max x_cᵀy   subject to   X_pubᵀ y = z_pub,  lower ≤ y ≤ upper,

two linear programs per cell, solved with HiGHS (``scipy.optimize.linprog(method="highs")``).
A cell with lo_c = up_c is exactly disclosed; a primary cell is protected when its interval
reaches at least its required lower and upper protection (and range) around its value.

How the LPs are kept small (scipy cannot warm-start HiGHS, so every LP is solved from scratch):

1. *Presolve by propagation.* An inner cell is fixed when a published cell determines it: a
   published cell with one unknown inner cell fixes it (so every inner cell that is itself a
   published cell is known), and a published cell whose unknown inner cells all have
   coefficients of one sign and whose remaining value equals the sum at their lower (upper)
   bounds fixes them all there (a published zero over non-negative cells). This is repeated
   until nothing changes. Typically only the inner cells under suppressed cells stay unknown.
   Published cells left with no unknown inner cell must then add up (else the data are
   inconsistent and an InputError says so).
2. *Independent blocks.* The unknown inner cells are split into the connected components of
   the bipartite graph (unknown inner cell — published cell that still contains it). The
   feasible set is the product of the blocks' feasible sets, so the LP of a suppressed cell
   separates into one small LP per block it touches: lo_c = known part + Σ_blocks min, up_c
   likewise. Published cells must join blocks: in a one-way table with total T = a+b+c+d and
   a, b suppressed, a and b share no suppressed cell but a + b = T − c − d couples them
   (a ∈ [0, a+b]). Suppressed cells need not join blocks (their objective splits). A margin
   over the whole table (a grand total) still joins everything it covers.
3. *Settling cells without their own LP* (exact). A cell with no unknown inner cell is
   disclosed without an LP. Within a block, every LP solved gives a feasible y (its value
   x_cᵀy bounds every cell's min from above and max from below) and row duals w (for any w,
   r·w + Σ_i min/max over [lower_i, upper_i] of (x_c − Mᵀw)_i·y_i bounds min x_cᵀy from below
   and max from above: Lagrangian duality; w = 0 gives the bounds alone). A cell end whose
   seen value meets its bound (to 1e-9 relative) is settled. One first LP minimising the sum
   of all the block's suppressed cells settles every cell that can be 0 at once (most lower
   ends), a cell's own LP settles cells with the same unknown part or the same optimal
   certificate, and every other end gets its own LP.

Cost: two LPs per unsettled cell end over its block. With a grand total the block is the
whole unknown part of the table: a 3-way table of 6 000 inner and 7 854 published cells with
30 % of the cells suppressed at random (a stress test: 1 672 unknown inner cells in one block)
takes about 4 minutes (1 150 published × 1 672 unknown LPs at ~0.1 s); the reference tables
take milliseconds.

The feasibility of every block is checked once with a zero objective: an infeasible block
means the published values are inconsistent with X and the bounds (InputError). After that an
LP that HiGHS reports infeasible-or-unbounded is unbounded: the interval end is ±inf.

Numeric only: arrays and scipy.sparse in, nothing holds a DuckDB connection (the model matrix
comes from :meth:`protab.Session.model_matrix`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from numpy.typing import ArrayLike
from scipy import sparse

from protab.errors import InputError, ProtabError
from protab.suppression._attacker_system import _EXACT_TOL, _linprog, _System
from protab.suppression._audit_inputs import _as_csc, _bounds, _cells, _finite, _vector
from protab.suppression._protection import _Req, _requirements, _status, _targets, p_percent_protection

__all__ = ["audit_pattern", "intervals", "p_percent_protection", "protect"]


def _prepare(X: Any, z: Any, suppressed: Any, lower: Any, upper: Any) -> tuple[sparse.csc_array, np.ndarray,
                                                                                np.ndarray, np.ndarray, np.ndarray]:
    A = _as_csc(X)
    n, m = A.shape
    zz = _vector(z, m, "z", A.shape)
    _finite(zz, "z")
    supp = _cells(suppressed, m, "suppressed")
    lo, up = _bounds(lower, upper, n, A.shape)
    return A, zz, supp, lo, up


def _intervals(A: sparse.csc_array, z: np.ndarray, supp: np.ndarray, lo: np.ndarray, up: np.ndarray,
               which: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, _System]:
    system = _System(A, z, supp, lo, up)
    low = z.copy()
    high = z.copy()
    cells = np.flatnonzero(supp) if which is None else np.asarray(which, dtype=np.int64)
    if cells.size:
        low[cells], high[cells] = system.cell_intervals(A, cells)
    return low, high, system


def intervals(X: Any, z: ArrayLike, suppressed: Any, *, lower: Any = 0.0,
              upper: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """The attacker's feasibility interval [lo, up] of every published cell.

    ``X``: inner cells × published cells (scipy.sparse or 2-D array; z = Xᵀy), ``z``: the
    published cells' true values, ``suppressed``: boolean mask or indices of the suppressed
    cells, ``lower``/``upper``: bounds the attacker knows on the inner values (scalars or one
    per inner cell; None = unbounded; default y ≥ 0). Published cells get lo = up = z;
    suppressed cells min and max of x_cᵀy over all y ≥ lower, ≤ upper that reproduce the
    published cells (±inf when unbounded). A suppressed cell with lo == up is exactly
    disclosed (its interval is set to one value when its ends agree to 1e-9 of the largest |z|).

    Raises InputError for wrong shapes, NaN, or published values that no inner values within
    the bounds reproduce (inconsistent data).
    """
    A, zz, supp, lo, up = _prepare(X, z, suppressed, lower, upper)
    low, high, _ = _intervals(A, zz, supp, lo, up)
    return low, high


def audit_pattern(X: Any, z: ArrayLike, suppressed: Any, *, primary: Any = None, protection_lower: Any = None,
          protection_upper: Any = None, protection_range: Any = None, p_percent: float | None = None,
          x1: Any = None, x2: Any = None, lower: Any = 0.0, upper: Any = None) -> pl.DataFrame:
    """Audit a suppression pattern: one row per suppressed cell.

    Columns: ``cell`` (column index in X), ``value`` (z), ``primary``, ``lo``, ``up`` (the
    attacker's interval, :func:`intervals`), ``required_lower``, ``required_upper``,
    ``required_range``, ``protected``, ``exact`` (lo == up: the cell is disclosed).

    Requirements hold for primary cells only (``primary``: mask or indices, default every
    suppressed cell); give them as ``protection_lower``/``protection_upper`` (absolute
    distances below/above the value, scalars or one per published cell; values at
    non-primary cells are ignored), or as the p% rule with ``p_percent``, ``x1`` and ``x2``
    (largest and second largest contribution per published cell; see
    :func:`p_percent_protection`: PL = max(0, p/100·x1 − (z − x1 − x2)), both ways), and
    optionally ``protection_range`` (a minimum width up − lo, GaussSuppression's
    ``rangePercent``/``rangeMin``). A primary cell is protected when lo ≤ z − L, up ≥ z + U
    (each capped at what the bounds allow the cell at all: with y ≥ 0 the lower end need not
    go below 0) and up − lo ≥ range, and it is not exactly disclosed. A non-primary
    suppressed cell is protected unless it is exactly disclosed.
    """
    A, zz, supp, lo, up = _prepare(X, z, suppressed, lower, upper)
    req = _requirements(A, zz, supp, primary, protection_lower, protection_upper, protection_range, p_percent,
                        x1, x2, lo, up)
    low, high, system = _intervals(A, zz, supp, lo, up)
    return _frame(low, high, zz, supp, req, system.scale)


def _frame(low: np.ndarray, high: np.ndarray, z: np.ndarray, supp: np.ndarray, req: _Req,
           scale: float) -> pl.DataFrame:
    protected, exact = _status(low, high, z, req, scale)
    c = np.flatnonzero(supp)
    return pl.DataFrame({
        "cell": c.astype(np.int64),
        "value": z[c],
        "primary": req.primary[c],
        "lo": low[c],
        "up": high[c],
        "required_lower": req.L[c],
        "required_upper": req.U[c],
        "required_range": req.R[c],
        "protected": protected[c],
        "exact": exact[c],
    })


def protect(X: Any, z: ArrayLike, suppressed: Any, primary: Any, *, protection_lower: Any = None,
            protection_upper: Any = None, protection_range: Any = None, p_percent: float | None = None,
            x1: Any = None, x2: Any = None, cost: Any = None, lower: Any = 0.0, upper: Any = None,
            max_rounds: int = 1000) -> np.ndarray:
    """Add suppressions until every primary cell is protected; returns the new suppressed mask.

    A one-cell greedy ("suppress the cheapest published cell that widens the interval") stalls
    on the simplest table: in a 2×2 table with margins and one primary cell, no single extra
    suppression widens its interval (each extra cell is still derivable from its other margin);
    three are needed at once. So each step solves, for one under-protected primary cell and one
    direction, the attacker's problem from the other side (in the spirit of Fischetti and
    Salazar-González's model behind tau-ARGUS' optimal method, with the cost of suppressing a
    cell relaxed to the weighted size of its change, so it is one LP): find a change d of
    the inner values, within the bounds, that moves the primary cell by the missing amount and
    minimises Σ cost_p·|x_pᵀd| over the published cells p. The published cells that d changes
    are suppressed; y + d then reproduces every cell still published, so the interval reaches
    the target. Suppressing more only widens every interval, so cells protected before stay
    protected; each round re-audits. ``cost`` (one per published cell, default |z| + 1: the
    cell value as in tau-ARGUS, plus one so that zero cells are not free). The result is
    protected but not minimal.

    The arguments are those of :func:`audit_pattern`; primary cells not yet suppressed are suppressed
    first. Raises InputError when a requirement cannot be met even with everything suppressed.
    """
    A, zz, supp, lo, up = _prepare(X, z, suppressed, lower, upper)
    m = A.shape[1]
    prim = _cells(primary, m, "primary")
    supp = supp | prim
    req = _requirements(A, zz, supp, prim, protection_lower, protection_upper, protection_range, p_percent,
                        x1, x2, lo, up)
    w = _costs(cost, zz, A.shape)
    y0 = _inner_solution(A, zz, supp, lo, up)
    scale = max(1.0, float(np.abs(zz).max(initial=0.0)))
    tol = _EXACT_TOL * scale
    for _ in range(max_rounds):
        low, high, _sys = _intervals(A, zz, supp, lo, up, which=np.flatnonzero(req.primary))
        protected, exact = _status(low, high, zz, req, scale)
        bad = np.flatnonzero(req.primary & ~protected)
        if bad.size == 0:
            return supp
        c = int(bad[0])
        goal, sense = _goal(c, low, high, zz, req, tol)
        add = _push(A, zz, supp, lo, up, y0, c, goal, sense, w, tol)
        if not add.any():
            raise ProtabError(f"protect: no progress for primary cell {c} (numerical trouble in the LP)")
        supp = supp | add
    raise ProtabError(f"protect: not every primary cell is protected after {max_rounds} rounds")


def _costs(cost: Any, z: np.ndarray, X_shape: tuple[int, int]) -> np.ndarray:
    """The cost of suppressing each published cell: ``cost``, default |z| + 1."""
    if cost is None:
        return np.abs(z) + 1.0
    w = _vector(cost, z.size, "cost", X_shape)
    _finite(w, "cost")
    if (w < 0).any():
        raise InputError("cost must be >= 0 for every published cell")
    return w


def _goal(c: int, low: np.ndarray, high: np.ndarray, z: np.ndarray, req: _Req, tol: float) -> tuple[float, float]:
    """Where the interval of under-protected primary cell c must reach next, and the direction
    (1: up, −1: down): the missing end, else (the range, or an exactly disclosed cell without
    a requirement) a widening where there is room."""
    t_lo, t_hi = _targets(req, z)
    need = req.R[c] - (high[c] - low[c])
    if high[c] < t_hi[c] - tol:
        return t_hi[c], 1.0
    if low[c] > t_lo[c] + tol:
        return t_lo[c], -1.0
    need = max(need, 0.01 * abs(z[c]), 1e3 * tol)
    if high[c] + need <= req.cmax[c]:
        return high[c] + need, 1.0
    if low[c] - need >= req.cmin[c]:
        return low[c] - need, -1.0
    raise InputError(f"protect: primary cell {c} cannot get an interval of width {req.R[c]:g} "
                     "within the bounds on its inner cells")

def _inner_solution(A: sparse.csc_array, z: np.ndarray, supp: np.ndarray, lo: np.ndarray,
                    up: np.ndarray) -> np.ndarray:
    """Some inner values reproducing every cell (the attacker's system with nothing suppressed)."""
    n = A.shape[0]
    res = _linprog(np.zeros(n), A_eq=sparse.csr_array(A.T), b_eq=z, bounds=np.column_stack([lo, up]))
    if res.status != 0:
        raise InputError(
            "protect: no inner values within the bounds reproduce the published values (inconsistent data); "
            f"HiGHS: {res.message}"
        )
    return np.clip(res.x, lo, up)


def _push(A: sparse.csc_array, z: np.ndarray, supp: np.ndarray, lo: np.ndarray, up: np.ndarray, y0: np.ndarray,
          c: int, goal: float, sense: float, w: np.ndarray, tol: float) -> np.ndarray:
    """Published cells to suppress so that cell c can reach ``goal`` (LP: min Σ w_p t_p,
    t_p ≥ |x_pᵀd|, y0 + d within bounds, sense·x_cᵀd ≥ sense·(goal − z_c))."""
    n, m = A.shape
    pub = np.flatnonzero(~supp)
    k = pub.size
    P = sparse.csr_array(A[:, pub].T)  # k × n
    eye = sparse.identity(k, format="csr")
    # variables [d (n), t (k)]; rows: P d − t ≤ 0, −P d − t ≤ 0, −sense·x_cᵀd ≤ −sense·(goal − z_c)
    xc = A[:, [c]].toarray().ravel()
    A_ub = sparse.vstack([
        sparse.hstack([P, -eye]),
        sparse.hstack([-P, -eye]),
        sparse.hstack([sparse.csr_array(-sense * xc[None, :]), sparse.csr_array((1, k))]),
    ]).tocsr()
    b_ub = np.r_[np.zeros(2 * k), -sense * (goal - z[c])]
    bounds = np.r_[np.column_stack([lo - y0, up - y0]), np.column_stack([np.zeros(k), np.full(k, np.inf)])]
    obj = np.r_[np.zeros(n), w[pub]]
    res = _linprog(obj, A_ub=A_ub, b_ub=b_ub, bounds=bounds)
    if res.status != 0:
        raise InputError(
            f"protect: the requirement of primary cell {c} cannot be met even by suppressing every other cell "
            f"(HiGHS: {res.message})"
        )
    d = res.x[:n]
    change = np.abs(P @ d)
    add = np.zeros(m, dtype=bool)
    add[pub[change > tol * 1e-2]] = True
    return add
