"""The attacker's system of the suppression audit (Hundepool et al. 2012, ch. 4; the method of
:mod:`protab.suppression.pattern_audit`): the published cells' equations presolved by propagation,
split into independent blocks, and the interval of a cell from small LPs (HiGHS) per block."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse
from scipy.optimize import linprog
from scipy.sparse.csgraph import connected_components

from protab.errors import InputError, show_values

# Relative tolerance (times max(1, max |z|)) for data consistency and the presolve's equalities.
_REL_TOL = 1e-9
# Relative tolerance (times max(1, max |z|)) for "the interval collapsed" and "protected".
_EXACT_TOL = 1e-9


def _linprog(c: np.ndarray, **kw: Any) -> Any:
    """HiGHS (its choice of simplex or IPM); on numerical trouble (status 4) once more with the
    dual simplex, then the interior point method with crossover."""
    res = linprog(c, method="highs", **kw)
    for method in ("highs-ds", "highs-ipm"):
        if res.status != 4:
            break
        res = linprog(c, method=method, **kw)
    return res


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
        lb, ub = _lagrange(C, blk.bounds[:, 0], blk.bounds[:, 1], np.zeros(blk.bounds.shape[0]), 0.0)  # w = 0
        if blk.A is None:
            return lb, ub
        ends = _Ends(C, blk, lb, ub, _REL_TOL * self.scale)
        # seed: one LP for the sum of all objectives
        st, _, y, w = self._lp(k, np.asarray(C.sum(axis=1)).ravel())
        if st == 0:
            ends.absorb(y, w)
        for j in range(C.shape[1]):
            for sense, done in ((1.0, ends.lo_done), (-1.0, ends.up_done)):
                if not done[j]:
                    st, val, y, w = self._lp(k, sense * C[:, [j]].toarray().ravel())
                    ends.settle(j, sense, st, val, y, w)
        return ends.seen_min, ends.seen_max


class _Ends:
    """The interval ends of the objectives C[:, j] over one block as the LPs come in: the values
    seen at feasible points (``seen_min``, ``seen_max``) and the Lagrangian bounds (``lb``,
    ``ub``); an end is done when the two meet (to ``tol``)."""

    def __init__(self, C: sparse.csc_array, blk: _Block, lb: np.ndarray, ub: np.ndarray, tol: float) -> None:
        self.C, self.blk, self.lb, self.ub, self.tol = C, blk, lb, ub, tol
        s = C.shape[1]
        self.seen_min = np.full(s, np.inf)
        self.seen_max = np.full(s, -np.inf)
        self.lo_done = np.zeros(s, dtype=bool)
        self.up_done = np.zeros(s, dtype=bool)

    def absorb(self, y: np.ndarray | None, w: np.ndarray | None) -> None:
        """A feasible point ``y`` and row duals ``w`` of some LP over the block."""
        if y is not None:
            v = self.C.T @ y
            np.minimum(self.seen_min, v, out=self.seen_min)
            np.maximum(self.seen_max, v, out=self.seen_max)
        if w is not None:
            blk = self.blk
            assert blk.A is not None and blk.b is not None  # only a block with constraints has duals
            a, b = _lagrange(self.C, blk.bounds[:, 0], blk.bounds[:, 1], blk.A.T @ w, float(blk.b @ w))
            np.maximum(self.lb, a, out=self.lb)
            np.minimum(self.ub, b, out=self.ub)
        lb, ub, tol = self.lb, self.ub, self.tol
        with np.errstate(invalid="ignore"):
            self.lo_done[:] |= (self.seen_min - lb <= tol) | (lb == -np.inf) & (self.seen_min == -np.inf)
            self.up_done[:] |= (ub - self.seen_max <= tol) | (ub == np.inf) & (self.seen_max == np.inf)

    def settle(self, j: int, sense: float, st: int, val: float, y: np.ndarray | None, w: np.ndarray | None) -> None:
        """The LP of objective j's lower (``sense`` 1) or upper end (−1): its value settles that
        end (±inf when unbounded, ``st`` 3); its y and w help the others."""
        if st == 3:
            if sense > 0:
                self.seen_min[j] = self.lb[j] = -np.inf
            else:
                self.seen_max[j] = self.ub[j] = np.inf
            (self.lo_done if sense > 0 else self.up_done)[j] = True
            return
        assert y is not None and w is not None
        if sense > 0:
            self.lb[j] = self.seen_min[j] = val
            self.lo_done[j] = True
        else:
            self.ub[j] = self.seen_max[j] = -val
            self.up_done[j] = True
        self.absorb(y, sense * w)


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
