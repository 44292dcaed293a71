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

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import ArrayLike
from scipy import sparse
from scipy.optimize import linprog
from scipy.sparse.csgraph import connected_components

from protab.errors import InputError, ProtabError, SpecError, show_values
from protab.fit._common import _as_csc as _fit_csc

__all__ = ["audit", "intervals", "p_percent_protection", "protect"]

# Relative tolerance (times max(1, max |z|)) for data consistency and the presolve's equalities.
_REL_TOL = 1e-9
# Relative tolerance (times max(1, max |z|)) for "the interval collapsed" and "protected".
_EXACT_TOL = 1e-9


# --------------------------------------------------------------------------------------------
# Input checks


def _as_csc(X: Any) -> sparse.csc_array:
    """X as a float64 CSC array, checked (the validation of the fit package)."""
    return _fit_csc(X)


def _vector(v: Any, m: int, name: str, X_shape: tuple[int, int], kind: str = "published") -> np.ndarray:
    a = np.asarray(v, dtype=np.float64)
    if a.ndim == 2 and 1 in a.shape:
        a = a.reshape(-1)
    if a.ndim != 1 or a.size != m:
        hint = ""
        if kind == "published" and a.ndim == 1 and a.size == X_shape[0]:
            hint = " (is X transposed? it must be inner cells × published cells, z = X.T @ y)"
        raise InputError(
            f"{name} must have one value per {kind} cell ({m}, X has shape {X_shape}), got an array "
            f"of shape {a.shape}{hint}"
        )
    return a


def _finite(a: np.ndarray, name: str, kind: str = "published", where: np.ndarray | None = None) -> None:
    bad = ~np.isfinite(a) if where is None else (~np.isfinite(a) & where)
    if bad.any():
        idx = np.flatnonzero(bad)
        raise InputError(f"{name} has {idx.size} NaN or infinite values at {kind} cells {show_values(idx.tolist())}")


def _cells(sel: Any, m: int, name: str) -> np.ndarray:
    """A boolean mask over the m published cells from a mask or an array of cell indices."""
    if sel is None:
        return np.zeros(m, dtype=bool)
    if isinstance(sel, pl.Series):
        if sel.null_count():
            raise InputError(f"{name} has {sel.null_count()} missing (null) values")
        sel = sel.to_numpy()
    a = np.asarray(sel)
    if a.ndim != 1:
        raise InputError(f"{name} must be a 1-D boolean mask or an array of cell indices, got shape {a.shape}")
    if a.dtype == bool:
        if a.size != m:
            raise InputError(f"{name} is a boolean mask of {a.size} values but there are {m} published cells")
        return a.copy()
    if a.size == 0:
        return np.zeros(m, dtype=bool)
    if a.dtype.kind not in "iu":
        if a.dtype.kind == "f" and np.isnan(a).any():
            raise InputError(f"{name} has NaN values; give a boolean mask or integer cell indices")
        raise InputError(f"{name} must be a boolean mask or integer cell indices, not {a.dtype}")
    bad = (a < 0) | (a >= m)
    if bad.any():
        raise InputError(
            f"{name} has cell indices outside 0..{m - 1}: {show_values(a[bad].tolist())}"
        )
    mask = np.zeros(m, dtype=bool)
    mask[a] = True
    return mask


def _bounds(lower: Any, upper: Any, n: int, X_shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    def one(v: Any, default: float, name: str) -> np.ndarray:
        if v is None:
            return np.full(n, default)
        a = np.asarray(v, dtype=np.float64)
        if a.ndim == 0:
            a = np.full(n, float(a))
        else:
            a = _vector(a, n, name, X_shape, kind="inner")
        if np.isnan(a).any():
            raise InputError(f"{name} has {int(np.isnan(a).sum())} NaN values (use None or ±inf for no bound)")
        return a

    lo = one(lower, -np.inf, "lower")
    up = one(upper, np.inf, "upper")
    if (lo == np.inf).any() or (up == -np.inf).any():
        raise InputError("lower must be < +inf and upper > -inf for every inner cell")
    bad = lo > up
    if bad.any():
        raise InputError(
            f"lower > upper at {int(bad.sum())} inner cells {show_values(np.flatnonzero(bad).tolist())}"
        )
    return lo, up


def _linprog(c: np.ndarray, **kw: Any) -> Any:
    """HiGHS (its choice of simplex or IPM); on numerical trouble (status 4) once more with the
    dual simplex, then the interior point method with crossover."""
    res = linprog(c, method="highs", **kw)
    for method in ("highs-ds", "highs-ipm"):
        if res.status != 4:
            break
        res = linprog(c, method=method, **kw)
    return res


# --------------------------------------------------------------------------------------------
# The attacker's system


@dataclass
class _Block:
    cols: np.ndarray  # positions in the free-variable numbering
    A: sparse.csr_array | None  # equality rows of the block (None: no constraint)
    b: np.ndarray | None
    bounds: np.ndarray  # (k, 2)


class _System:
    """X_pubᵀy = z_pub with bounds, presolved and split into blocks (module docstring)."""

    def __init__(self, X: sparse.csc_array, z: np.ndarray, suppressed: np.ndarray, lo: np.ndarray,
                 up: np.ndarray) -> None:
        self.X, self.z, self.lower, self.upper = X, z, lo, up
        n, m = X.shape
        self.scale = max(1.0, float(np.abs(z).max(initial=0.0)))
        self.tol = _REL_TOL * self.scale
        pub = np.flatnonzero(~suppressed)
        At = sparse.csr_array(X[:, pub].T)  # published constraints × inner
        b = z[pub]
        fixed, val = self._propagate(At, b, n)
        self.fixed, self.val = fixed, val
        free = np.flatnonzero(~fixed)
        self.free = free
        res = b - At @ np.where(fixed, val, 0.0)
        Af = sparse.csr_array(At[:, free]) if free.size else sparse.csr_array((At.shape[0], 0))
        nfree = np.diff(Af.indptr)
        bad = (nfree == 0) & (np.abs(res) > self.tol * 10)
        if bad.any():
            cells = pub[bad]
            raise InputError(
                "the published values are inconsistent with X (and the bounds on inner cells): "
                f"published cells {show_values(cells.tolist())} differ from the sum of their inner cells as "
                f"the other published cells determine them (by up to {np.abs(res[bad]).max():.6g}); "
                "audit the original (unrounded) table"
            )
        keep = nfree > 0
        self.M = sparse.csr_array(Af[keep])
        self.r = res[keep]
        self.rows = pub[keep]
        self._blocks()

    def _propagate(self, At: sparse.csr_array, b: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        lo, up, tol = self.lower, self.upper, self.tol
        fixed = np.zeros(n, dtype=bool)
        val = np.zeros(n)
        pat = At.copy()
        pat.data = np.ones_like(pat.data)
        pos = At.copy()
        pos.data = (pos.data > 0).astype(np.float64)
        neg = At.copy()
        neg.data = (neg.data < 0).astype(np.float64)
        lo_f = np.where(np.isfinite(lo), lo, 0.0)
        up_f = np.where(np.isfinite(up), up, 0.0)
        idx1 = np.arange(1, n + 1, dtype=np.float64)
        while True:
            free = (~fixed).astype(np.float64)
            nfree = pat @ free
            if not (nfree > 0).any():
                break
            res = b - At @ np.where(fixed, val, 0.0)
            new = np.zeros(n, dtype=bool)
            newval = np.zeros(n)
            # a published cell with one unknown inner cell determines it
            one = np.flatnonzero(nfree == 1)
            if one.size:
                var = np.rint(pat[one] @ (free * idx1)).astype(np.int64) - 1
                coef = At[one, var]
                var, first = np.unique(var, return_index=True)
                new[var] = True
                newval[var] = res[one[first]] / np.asarray(coef)[first]
            # a published cell at the extreme of its unknown inner cells fixes them there
            many = nfree >= 2
            same = many & ((pos @ free == nfree) | (neg @ free == nfree))
            if same.any():
                lo_inf = pat @ (free * ~np.isfinite(lo))
                up_inf = pat @ (free * ~np.isfinite(up))
                at_lo = same & (lo_inf == 0) & (np.abs(res - At @ (free * lo_f)) <= tol)
                at_up = same & ~at_lo & (up_inf == 0) & (np.abs(res - At @ (free * up_f)) <= tol)
                for rows, bound in ((at_lo, lo), (at_up, up)):
                    if rows.any():
                        cols = pat[np.flatnonzero(rows)].indices
                        cols = cols[~fixed[cols] & ~new[cols]]
                        new[cols] = True
                        newval[cols] = bound[cols]
            if not new.any():
                break
            fixed |= new
            val[new] = newval[new]
        out = fixed & ((val < lo - tol) | (val > up + tol))
        if out.any():
            i = np.flatnonzero(out)
            raise InputError(
                "the published values are inconsistent with the bounds on inner cells: they determine "
                f"inner cells {show_values(i.tolist())} as {show_values(val[i].tolist())}, outside "
                "[lower, upper]; audit the original table, or widen lower/upper"
            )
        val = np.clip(val, lo, up)
        return fixed, val

    def _blocks(self) -> None:
        nF, nK = self.free.size, self.M.shape[0]
        G = sparse.bmat([[None, self.M.T], [self.M, None]], format="csr") if nK else sparse.csr_array((nF, nF))
        if G.shape[0] != nF + nK:  # bmat drops nothing, but keep the shape honest
            G = sparse.csr_array((nF + nK, nF + nK))
        ncomp, labels = connected_components(G, directed=False)
        self.comp = labels[:nF]
        row_comp = labels[nF:]
        order = np.argsort(self.comp, kind="stable")
        starts = np.searchsorted(self.comp[order], np.arange(ncomp + 1))
        rorder = np.argsort(row_comp, kind="stable")
        rstarts = np.searchsorted(row_comp[rorder], np.arange(ncomp + 1))
        self.blocks: dict[int, _Block] = {}
        bnd = np.column_stack([self.lower[self.free], self.upper[self.free]])
        for k in range(ncomp):
            cols = order[starts[k]:starts[k + 1]]
            if cols.size == 0:
                continue
            rows = rorder[rstarts[k]:rstarts[k + 1]]
            if rows.size:
                A = sparse.csr_array(self.M[rows][:, cols])
                blk = _Block(cols, A, self.r[rows], bnd[cols])
            else:
                blk = _Block(cols, None, None, bnd[cols])
            self.blocks[k] = blk
            self._check_feasible(k, blk)

    def _check_feasible(self, k: int, blk: _Block) -> None:
        if blk.A is None:
            return
        res = _linprog(np.zeros(blk.cols.size), A_eq=blk.A, b_eq=blk.b, bounds=blk.bounds)
        if res.status == 2:
            cells = self.rows[np.unique(self.M[:, blk.cols].tocsr().nonzero()[0])]
            raise InputError(
                "the published values are inconsistent with X and the bounds on inner cells (the "
                f"attacker's system has no solution): published cells {show_values(cells.tolist())} cannot "
                "all hold; audit the original (unrounded) table, or check lower/upper"
            )
        if res.status not in (0, 3):
            raise InputError(f"the linear program of the audit failed in HiGHS (status {res.status}): {res.message}")

    def _lp(self, k: int, c: np.ndarray) -> tuple[int, float, np.ndarray | None, np.ndarray | None]:
        """min cᵀy over block k: (status 0 optimal / 3 unbounded, value, y, duals of the rows)."""
        blk = self.blocks[k]
        res = _linprog(c, A_eq=blk.A, b_eq=blk.b, bounds=blk.bounds)
        if res.status == 0:
            return 0, float(res.fun), res.x, np.asarray(res.eqlin.marginals, dtype=np.float64)
        if res.status in (2, 3):  # the block is feasible (checked), so this is unbounded
            return 3, -np.inf, None, None
        raise InputError(f"the linear program of the audit failed in HiGHS (status {res.status}): {res.message}")

    def cell_intervals(self, X: sparse.csc_array, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """[min, max] of x_cᵀy for the columns ``cells`` of X."""
        Xc = sparse.csc_array(X[:, cells])
        known = np.where(self.fixed, self.val, 0.0)
        low = np.asarray(Xc.T @ known, dtype=np.float64)
        high = low.copy()
        free_rows = sparse.csr_array(Xc[self.free]) if self.free.size else sparse.csr_array((0, cells.size))
        for k, blk in self.blocks.items():
            C = sparse.csc_array(free_rows[blk.cols])
            C.eliminate_zeros()
            touch = np.flatnonzero(np.diff(C.indptr))
            if touch.size == 0:
                continue
            lo_k, up_k = self._block_intervals(k, sparse.csc_array(C[:, touch]))
            low[touch] += lo_k
            high[touch] += up_k
        with np.errstate(invalid="ignore"):
            tight = np.isfinite(low) & np.isfinite(high) & (
                high - low <= _EXACT_TOL * np.maximum(self.scale, np.maximum(np.abs(low), np.abs(high))))
        mid = 0.5 * (low[tight] + high[tight])
        low[tight] = mid
        high[tight] = mid
        return low, high

    def _block_intervals(self, k: int, C: sparse.csc_array) -> tuple[np.ndarray, np.ndarray]:
        """Intervals of the objectives C[:, j] (local coefficients) over block k.

        Every LP solved yields a feasible y (its value for every objective bounds that
        objective's min from above and max from below) and row duals w (for any w, the
        Lagrangian r·w + Σ_i min/max over [l_i, u_i] of (x − Mᵀw)_i·y_i bounds every objective's
        min from below and max from above). An objective whose seen value meets its bound is
        settled without its own LP: e.g. one LP that minimises the sum of all objectives settles
        every cell that can be 0 at once. The rest get their own LP (exact, as before)."""
        blk = self.blocks[k]
        lb_, ub_ = blk.bounds[:, 0], blk.bounds[:, 1]
        s = C.shape[1]
        lb, ub = _lagrange(C, lb_, ub_, np.zeros(lb_.size), 0.0)  # w = 0: the bounds alone
        if blk.A is None:
            return lb, ub
        seen_min = np.full(s, np.inf)
        seen_max = np.full(s, -np.inf)
        lo_done = np.zeros(s, dtype=bool)
        up_done = np.zeros(s, dtype=bool)
        tol = _REL_TOL * self.scale

        def absorb(y: np.ndarray | None, w: np.ndarray | None) -> None:
            nonlocal lb, ub
            if y is not None:
                v = C.T @ y
                np.minimum(seen_min, v, out=seen_min)
                np.maximum(seen_max, v, out=seen_max)
            if w is not None:
                a, b = _lagrange(C, lb_, ub_, blk.A.T @ w, float(blk.b @ w))
                np.maximum(lb, a, out=lb)
                np.minimum(ub, b, out=ub)
            with np.errstate(invalid="ignore"):
                lo_done[:] |= (seen_min - lb <= tol) | (lb == -np.inf) & (seen_min == -np.inf)
                up_done[:] |= (ub - seen_max <= tol) | (ub == np.inf) & (seen_max == np.inf)

        # seed: one LP for the sum of all objectives
        st, _, y, w = self._lp(k, np.asarray(C.sum(axis=1)).ravel())
        if st == 0:
            absorb(y, w)
        for j in range(s):
            for sense, done in ((1.0, lo_done), (-1.0, up_done)):
                if done[j]:
                    continue
                col = C[:, [j]].toarray().ravel()
                st, val, y, w = self._lp(k, sense * col)
                if st == 3:
                    if sense > 0:
                        seen_min[j] = lb[j] = -np.inf
                    else:
                        seen_max[j] = ub[j] = np.inf
                    done[j] = True
                    continue
                assert y is not None and w is not None
                # the LP's own value settles this objective; its y and w help the others
                if sense > 0:
                    lb[j] = seen_min[j] = val
                else:
                    ub[j] = seen_max[j] = -val
                done[j] = True
                absorb(y, sense * w)
        return seen_min, seen_max


def _lagrange(C: sparse.csc_array, lo: np.ndarray, up: np.ndarray, v: np.ndarray,
              rw: float) -> tuple[np.ndarray, np.ndarray]:
    """For each objective x = C[:, j]: r·w + Σ_i min (and max) of (x − v)_i·y_i over
    lo_i ≤ y_i ≤ up_i, with v = Mᵀw: bounds on min xᵀy and max xᵀy over the block."""
    scale_v = max(1.0, float(np.abs(v).max(initial=0.0)))
    snap = 1e-9 * scale_v

    def terms(g: np.ndarray, lo_: np.ndarray, up_: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        g = np.where(np.abs(g) <= snap, 0.0, g)
        with np.errstate(invalid="ignore"):
            a = np.where(g > 0, g * lo_, np.where(g < 0, g * up_, 0.0))  # min g·y
            b = np.where(g > 0, g * up_, np.where(g < 0, g * lo_, 0.0))  # max g·y
        return a, b

    # every coordinate with x_i = 0, then the corrections on each objective's support
    a0, b0 = terms(-v, lo, up)
    rows = C.indices
    cols = np.repeat(np.arange(C.shape[1]), np.diff(C.indptr))
    a1, b1 = terms(C.data - v[rows], lo[rows], up[rows])
    out = []
    for t0, t1, inf in ((a0, a1, -np.inf), (b0, b1, np.inf)):
        fin0 = np.isfinite(t0)
        base = float(t0[fin0].sum())
        n_inf0 = int((~fin0).sum())
        fin1 = np.isfinite(t1)
        corr = np.bincount(cols, weights=np.where(fin1, t1, 0.0) - np.where(fin0[rows], t0[rows], 0.0),
                           minlength=C.shape[1])
        n_inf = n_inf0 + np.bincount(cols, weights=(~fin1).astype(np.float64) - (~fin0[rows]).astype(np.float64),
                                     minlength=C.shape[1])
        out.append(np.where(n_inf > 0.5, inf, rw + base + corr))
    return out[0], out[1]


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


# --------------------------------------------------------------------------------------------
# Protection requirements


def p_percent_protection(p: float, z: ArrayLike, x1: ArrayLike, x2: ArrayLike) -> np.ndarray:
    """The protection level of the p% rule, as tau-ARGUS and GaussSuppression define it.

    The second largest contributor knows x2 and learns, from an upper bound U of the cell, that
    the largest contribution is at most U − x2 (the other contributions being ≥ 0). That bound
    must exceed x1 by p %: U − x2 ≥ (1 + p/100)·x1, i.e. U ≥ z + p/100·x1 − (z − x1 − x2). The
    protection level is therefore PL = max(0, p/100·x1 − (z − x1 − x2)) (Hundepool et al. 2012,
    §4.2 and the tau-ARGUS manual's p% rule; GaussSuppression's MagnitudeRule with
    ``protectionIntervals`` uses the same PL = z·max(0, d2 + p/100·d1 − 1) with
    dᵢ = (x1 + … + xᵢ)/z). tau-ARGUS applies it symmetrically: the interval must reach z − PL
    and z + PL (below, a bound under the attainable minimum is met at the minimum).
    """
    zz, a, b = (np.asarray(v, dtype=np.float64) for v in (z, x1, x2))
    return np.maximum(0.0, float(p) / 100.0 * a - (zz - a - b))


def _requirement(v: Any, m: int, name: str, X_shape: tuple[int, int], primary: np.ndarray) -> np.ndarray:
    if v is None:
        return np.zeros(m)
    a = np.asarray(v, dtype=np.float64)
    a = np.full(m, float(a)) if a.ndim == 0 else _vector(a, m, name, X_shape)
    _finite(a, name, where=primary)
    neg = primary & (a < 0)
    if neg.any():
        raise InputError(f"{name} has negative values at primary cells {show_values(np.flatnonzero(neg).tolist())}")
    return np.where(primary, a, 0.0)


@dataclass
class _Req:
    primary: np.ndarray
    L: np.ndarray
    U: np.ndarray
    R: np.ndarray
    cmin: np.ndarray  # smallest / largest value of each cell under the bounds alone
    cmax: np.ndarray


def _requirements(A: sparse.csc_array, z: np.ndarray, supp: np.ndarray, primary: Any, protection_lower: Any,
                  protection_upper: Any, protection_range: Any, p_percent: Any, x1: Any, x2: Any,
                  lo: np.ndarray, up: np.ndarray) -> _Req:
    m = A.shape[1]
    prim = supp.copy() if primary is None else _cells(primary, m, "primary")
    not_supp = prim & ~supp
    if not_supp.any():
        raise InputError(
            f"primary cells {show_values(np.flatnonzero(not_supp).tolist())} are not suppressed; "
            "a primary cell must be among the suppressed cells (or use protect())"
        )
    if p_percent is not None:
        if protection_lower is not None or protection_upper is not None:
            raise SpecError("give either p_percent= (with x1=, x2=) or protection_lower=/protection_upper=, not both")
        if isinstance(p_percent, bool) or not isinstance(p_percent, (int, float, np.integer, np.floating)) \
                or not np.isfinite(p_percent) or p_percent < 0:
            raise SpecError(f"p_percent must be a number >= 0, got {p_percent!r}")
        if x1 is None or x2 is None:
            raise SpecError("p_percent= needs x1= and x2= (the largest and second largest contribution per cell)")
        a1 = _vector(x1, m, "x1", A.shape)
        a2 = _vector(x2, m, "x2", A.shape)
        _finite(a1, "x1", where=prim)
        _finite(a2, "x2", where=prim)
        pl_ = p_percent_protection(p_percent, z, np.where(prim, a1, 0.0), np.where(prim, a2, 0.0))
        L = U = np.where(prim, pl_, 0.0)
    else:
        if x1 is not None or x2 is not None:
            raise SpecError("x1=/x2= are used only with p_percent=")
        L = _requirement(protection_lower, m, "protection_lower", A.shape, prim)
        U = _requirement(protection_upper, m, "protection_upper", A.shape, prim)
    R = _requirement(protection_range, m, "protection_range", A.shape, prim)
    pos = A.copy()
    pos.data = np.maximum(pos.data, 0.0)
    neg = A.copy()
    neg.data = np.minimum(neg.data, 0.0)
    with np.errstate(invalid="ignore"):
        cmin = _dot_bounds(pos, lo) + _dot_bounds(neg, up)
        cmax = _dot_bounds(pos, up) + _dot_bounds(neg, lo)
    return _Req(prim, L, U, R, cmin, cmax)


def _dot_bounds(P: sparse.csc_array, b: np.ndarray) -> np.ndarray:
    """Pᵀb with 0·inf = 0 (P holds entries of one sign)."""
    inf = ~np.isfinite(b)
    out = P.T @ np.where(inf, 0.0, b)
    if inf.any():
        pat = P.copy()
        pat.data = np.sign(pat.data)
        s = pat.T @ np.where(inf, np.sign(b), 0.0)
        out = np.where(s > 0, np.inf, np.where(s < 0, -np.inf, out))
    return out


def _targets(req: _Req, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the interval must reach: z − L and z + U, capped at the cell's attainable range."""
    t_lo = np.maximum(z - req.L, req.cmin)
    t_hi = np.minimum(z + req.U, req.cmax)
    return np.minimum(t_lo, z), np.maximum(t_hi, z)


def _status(lo: np.ndarray, up: np.ndarray, z: np.ndarray, req: _Req, scale: float) -> tuple[np.ndarray, np.ndarray]:
    tol = _EXACT_TOL * scale
    exact = lo == up
    t_lo, t_hi = _targets(req, z)
    with np.errstate(invalid="ignore"):
        wide = (lo <= t_lo + tol) & (up >= t_hi - tol) & (up - lo >= req.R - tol)
    protected = ~exact & (~req.primary | wide)
    return protected, exact


def audit(X: Any, z: ArrayLike, suppressed: Any, *, primary: Any = None, protection_lower: Any = None,
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


# --------------------------------------------------------------------------------------------
# Adding suppressions


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

    The arguments are those of :func:`audit`; primary cells not yet suppressed are suppressed
    first. Raises InputError when a requirement cannot be met even with everything suppressed.
    """
    A, zz, supp, lo, up = _prepare(X, z, suppressed, lower, upper)
    m = A.shape[1]
    prim = _cells(primary, m, "primary")
    supp = supp | prim
    req = _requirements(A, zz, supp, prim, protection_lower, protection_upper, protection_range, p_percent,
                        x1, x2, lo, up)
    if cost is None:
        w = np.abs(zz) + 1.0
    else:
        w = _vector(cost, m, "cost", A.shape)
        _finite(w, "cost")
        if (w < 0).any():
            raise InputError("cost must be >= 0 for every published cell")
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
        t_lo, t_hi = _targets(req, zz)
        need = req.R[c] - (high[c] - low[c])
        if high[c] < t_hi[c] - tol:
            goal, sense = t_hi[c], 1.0
        elif low[c] > t_lo[c] + tol:
            goal, sense = t_lo[c], -1.0
        else:  # the range, or an exactly disclosed cell without a requirement: widen where there is room
            need = max(need, 0.01 * abs(zz[c]), 1e3 * tol)
            if high[c] + need <= req.cmax[c]:
                goal, sense = high[c] + need, 1.0
            elif low[c] - need >= req.cmin[c]:
                goal, sense = low[c] - need, -1.0
            else:
                raise InputError(f"protect: primary cell {c} cannot get an interval of width {req.R[c]:g} "
                                 "within the bounds on its inner cells")
        add = _push(A, zz, supp, lo, up, y0, c, goal, sense, w, tol)
        if not add.any():
            raise ProtabError(f"protect: no progress for primary cell {c} (numerical trouble in the LP)")
        supp = supp | add
    raise ProtabError(f"protect: not every primary cell is protected after {max_rounds} rounds")


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
