"""The rounding passes of small count rounding (Langsrud & Heldal 2018; the passes of
SmallCountRounding's PLSrounding, in protab's own implementation described in
:mod:`protab.rounding.small_count`): candidates, one pass, the re-run and the checks for
derivable cells, and the last swaps."""

from __future__ import annotations

import warnings

import numpy as np
from scipy import sparse

from protab._progress import bar
from protab.errors import ConvergenceWarning
from protab.rounding._rounding_inputs import xty
from protab.rounding._scr_choice import _choose_up
from protab.rounding._scr_options import Step, _Options
from protab.rounding._scr_swaps import _final_swaps


class _Passes:
    """Rounding passes over the inner counts ``yv`` (model matrix ``Xc``) to base ``b``: ``yr``
    the rounded counts so far, ``zr`` the published sums of them, ``forced`` the cells to round
    in the next pass whatever their published cells."""

    def __init__(self, Xc: sparse.csc_matrix, yv: np.ndarray, b: int, opts: _Options, tie: np.ndarray,
                 identify_new: bool | None, easy_check: bool, polish_tol: float = 0.0) -> None:
        self.Xc, self.Xr, self.yv, self.b, self.opts, self.tie = Xc, Xc.tocsr(), yv, b, opts, tie
        self.identify_new, self.easy_check, self.polish_tol = identify_new, easy_check, polish_tol
        self.M = opts.M
        self.z = xty(Xc, yv)
        self.zf = self.z.astype(np.float64)
        self.total0 = int(yv.sum())
        # later passes look for published cells that the rounding made small
        self.iM = self.M if identify_new else b
        self.yr = yv.copy()
        if opts.pre_vals is not None:
            self.yr[opts.fixed] = opts.pre_vals
        self.forced = self._first() & ~opts.fixed
        self.zr = xty(Xc, self.yr)

    def _first(self) -> np.ndarray:
        """The cells of the first pass (R's semantics): small inner cells under a published cell
        of 1 … max_round (multiples of the base included), zero candidates among them, forced
        cells, and cells revealed by the leverage check."""
        yv, b, M, z, opts = self.yv, self.b, self.M, self.z, self.opts
        under0 = (self.Xr @ ((z > 0) & (z < M)).astype(np.float64)) > 0
        first = under0 & (yv < M) & ((yv % b != 0) | opts.zc)
        first |= opts.fi & ((yv % b != 0) | opts.zc)
        if opts.lev_limit is not None and not opts.fi.all():
            first |= _known_cells(self.Xc, self.Xr, yv, z, opts.lev_limit) & (yv < M) & (yv % b != 0)
        return first

    def run(self, max_iter: int, small_penalty: float, conflict_max: int | None, polish: int) -> int:
        """Round until no published cell is small (or ``max_iter`` passes); returns the passes."""
        cur_step: Step = self.opts.steps_main
        rerun = self.opts.steps_rerun is not None
        it = 0
        with bar("small count rounding", unit="pass") as pbar:
            while True:
                small, cand = self._candidates()
                if not cand.any():
                    next_step = self._restart(small, rerun and it > 1)
                    rerun = False
                    if next_step is None:
                        break
                    cur_step = next_step
                    continue
                it += 1
                pbar.update(1)
                if it > max_iter:
                    warnings.warn(
                        f"small count rounding stopped after {max_iter} passes with "
                        f"{int(small.sum())} small published cells left; raise max_iter",
                        ConvergenceWarning,
                        stacklevel=4,
                    )
                    break
                self._round(cand, cur_step, small_penalty, conflict_max, polish)
        return it

    def _candidates(self) -> tuple[np.ndarray, np.ndarray]:
        """The small published cells and the inner cells to round in the next pass."""
        b, iM, yr, zr = self.b, self.iM, self.yr, self.zr
        if self.identify_new is False:
            return np.zeros_like(zr, dtype=bool), self.forced.copy()
        small = (zr > 0) & (zr < iM) & (zr % b != 0)
        roundable = (yr < iM) & (yr % b != 0) & ~self.opts.fixed
        return small, self.forced | (roundable & ((self.Xr @ small.astype(np.float64)) > 0))

    def _restart(self, small: np.ndarray, rerun: bool) -> Step | None:
        """No cell to round: the step setting of further passes (R's re-run of the changed
        cells, or the cells the checks find derivable), or None: done."""
        yr, yv, b, M, fixed = self.yr, self.yv, self.b, self.M, self.opts.fixed
        if small.any():
            warnings.warn(
                f"small count rounding: {int(small.sum())} published cells are still small "
                "and no inner cell can be rounded for them"
                + (" (pre_rounded cells are kept)" if fixed.any() else ""),
                ConvergenceWarning,
                stacklevel=5,
            )
            return None
        if rerun:
            # R's re-run: undo every change and round the changed cells together
            changed = (yr != yv) & ~fixed
            yr[changed] = yv[changed]
            self.zr = xty(self.Xc, yr)
            self.forced = changed
            return self.opts.steps_rerun
        if self.easy_check or self.opts.lev_limit is not None:
            known = _known_cells(self.Xc, self.Xr, yr, self.zr, self.opts.lev_limit)
            newf = known & (yr < M) & (yr % b != 0) & ~fixed
            if newf.any():
                self.forced |= newf
                return self.opts.steps_check
        return None

    def _round(self, cand: np.ndarray, step: Step, small_penalty: float, conflict_max: int | None,
               polish: int) -> None:
        """One pass: each candidate keeps its multiple of the base and has its remainder
        rounded to 0 or b; how many go up keeps the grand total within b/2 (half to even, as
        R's round())."""
        b = self.b
        R = np.flatnonzero(cand)
        r = self.yr[R] % b
        D = int(r.sum()) + self.total0 - int(self.yr.sum())
        n_up = int(np.clip(np.round(D / b), 0, R.size))  # half to even, as R's round()
        XR = self.Xr[R]
        g0 = self.zr - xty(XR, r)
        XRl, cols = _local_matrix(XR, self.Xc.shape[1])
        up = _choose_up(XRl, self.zf[cols], g0[cols], b, self.M, n_up, self.tie[R],
                        small_penalty, conflict_max, polish, step, self.polish_tol)
        self.yr[R] = self.yr[R] - r + b * up
        self.zr = g0 + b * xty(XR, up.astype(np.int64))
        self.forced[R] = False

    def final_swaps(self, conflict_max: int | None, polish: int) -> None:
        """Last swaps among all rounded cells for the two measures the result is judged by;
        kept only if no small inner cell becomes derivable (easy / leverage check)."""
        yr, yv, b, fixed = self.yr, self.yv, self.b, self.opts.fixed
        movable = (yr != yv) & ~fixed & (yv % b != 0)
        y2 = _final_swaps(self.Xr, yv, yr, self.z, b, self.iM, movable, self.tie, conflict_max, polish)
        if np.array_equal(y2, yr):
            return
        if self.easy_check or self.opts.lev_limit is not None:
            known = _known_cells(self.Xc, self.Xr, y2, xty(self.Xc, y2), self.opts.lev_limit)
            if np.any(known & (y2 < self.M) & (y2 % b != 0) & ~fixed):
                return
        self.yr = y2


def _local_matrix(XR: sparse.csr_matrix, n_pub: int) -> tuple[sparse.csr_matrix, np.ndarray]:
    """The candidates (rows of XR) × the published cells that depend on the choice (those
    holding some but not all candidates), 0/1; and those cells."""
    cnt = np.bincount(XR.indices, minlength=n_pub)
    rel = (cnt > 0) & (cnt < XR.shape[0])
    cols = np.flatnonzero(rel)
    remap = np.full(n_pub, -1, dtype=np.int64)
    remap[cols] = np.arange(cols.size)
    keep = rel[XR.indices]
    rows_nz = np.repeat(np.arange(XR.shape[0]), np.diff(XR.indptr))
    XRl = sparse.csr_matrix(
        (np.ones(int(keep.sum())), (rows_nz[keep], remap[XR.indices[keep]])),
        shape=(XR.shape[0], cols.size),
    )
    return XRl, cols


def _known_cells(
    Xc: sparse.csc_matrix,
    Xr: sparse.csr_matrix,
    y: np.ndarray,
    zr: np.ndarray,
    leverage_limit: float | None = None,
) -> np.ndarray:
    """Inner cells whose value an intruder can work out from the published values zr = Xᵀy
    (SSBtools' Reduce0exact): cells under a published cell whose unknown part is 0 are 0; a
    published cell with one unknown inner cell left gives that cell; with ``leverage_limit``
    also cells whose leverage (hat value) in the rows and columns still unknown exceeds the
    limit — a leverage of one means the cell is a linear combination of published values.
    Repeated until nothing new is found. The leverages use a dense SVD of the unknown part,
    which is meant for up to a few thousand inner cells (as in R, it is the costly check)."""
    n = Xc.shape[0]
    known = np.zeros(n, dtype=bool)
    idx = np.arange(n, dtype=np.float64)
    while True:
        unk = (~known).astype(np.float64)
        zrest = zr - xty(Xc, np.where(known, y, 0))
        cnt = np.rint(Xc.T @ unk)
        new = ((Xr @ ((zrest == 0) & (cnt > 0)).astype(np.float64)) > 0) & ~known
        single = cnt == 1
        if single.any():
            rows = np.rint((Xc.T @ (unk * idx))[single]).astype(np.int64)
            new[rows] = True
            new &= ~known
        if not new.any() and leverage_limit is not None:
            rows = np.flatnonzero(~known)
            cols = np.flatnonzero(cnt > 0)
            if rows.size and cols.size:
                A = Xr[rows][:, cols].toarray()
                u, sv, _ = np.linalg.svd(A, full_matrices=False)
                tol = sv.max() * max(A.shape) * np.finfo(np.float64).eps if sv.size else 0.0
                rank = int((sv > tol).sum())
                lev = (u[:, :rank] ** 2).sum(axis=1)
                new[rows[lev > leverage_limit]] = True
        if not new.any():
            return known
        known |= new
