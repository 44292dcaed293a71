"""Small count rounding (SCR) of inner cells: the method of Langsrud & Heldal (2018) and the
R package SmallCountRounding (PLSrounding), in protab's own implementation.

What it does (METHODS.md §2, REFERENCE_ALGORITHMS.md §4): only *inner* cells are rounded and
every published cell is a sum of rounded inner cells (z = Xᵀy), so the output is additive and
consistent across every table made from the same inner cells. A small inner cell
(value < max_round + 1, not a multiple of the base b) that lies under a small published cell
(1 … max_round, not a multiple of b) keeps its multiple-of-b part and has its residual
r = y mod b rounded to 0 or b. How many go up is fixed to keep the grand total within b/2 of
the original; which ones go up is chosen to keep the published table close to the original.
Published cells that the rounding makes small are found and their small inner cells rounded
in the next pass, until no published cell is small; an inner cell that an intruder can
derive exactly from the rounded table (zeros and single-cell sums, SSBtools' Reduce0exact
"easy check") is rounded as well when it is small.

How protab chooses (its own algorithm, not a port): the criterion is the one the result is
judged by — the Hellinger distance of the published cells, Σ_c (√z_c − √g_c)² — plus a
penalty per published cell left in 1 … max_round, so that a pass creates few new small cells
(each would cost further changed inner cells). Starting from every candidate rounded down, a
vectorised greedy raises candidates in sweeps: each sweep scores every candidate by the exact
change of the criterion if it alone went up (one sparse product) and raises, all at once, the
candidates that score best among the candidates sharing a published cell with them (a
Luby-style independent set; published cells holding very many candidates, such as large
margins, do not block each other). Then swap sweeps move a rounding-up from a raised cell to
the best partner in one of its published cells wherever the exact change of the criterion is
negative, again many non-overlapping swaps per sweep, keeping a sweep only if the criterion
falls (after the first sweep only candidates next to a cell the last sweep changed are
looked at). Ties are broken by a random order drawn from ``seed``. Every step is a handful
of sparse products over all candidates: no Python loop over cells.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
from scipy import sparse

from protab.errors import ConvergenceWarning, InputError
from protab.measures import hellinger_utility
from protab.rounding._common import check_base, counts, prepare, xty

__all__ = ["SmallCountResult", "small_count", "small_count_matrix"]

_BIG = np.iinfo(np.int64).max


@dataclass(frozen=True)
class SmallCountResult:
    """The outcome of :func:`small_count`.

    ``inner``: dims, ``n`` (original) and ``rounded`` for every inner cell (Extend0 zeros
    included); ``published``: dims, ``<dim>_level``, ``n`` and ``rounded`` for every published
    cell (sums of rounded inner cells); ``changed``: boolean per inner row;
    ``hellinger_utility`` of the published cells (1 − HD/√Σz, as SmallCountRounding's
    HDutility) and ``hellinger_utility_inner`` of the inner cells; ``iterations``: rounding
    passes; ``X`` the model matrix (inner × published), e.g. for ``protab.fit.ipf``.
    """

    inner: pl.DataFrame
    published: pl.DataFrame
    changed: np.ndarray
    hellinger_utility: float
    hellinger_utility_inner: float
    base: int
    max_round: int
    iterations: int
    X: sparse.csc_matrix = field(repr=False)

    @property
    def n_changed(self) -> int:
        """Number of inner cells whose value changed."""
        return int(self.changed.sum())

    @property
    def changed_cells(self) -> pl.DataFrame:
        """The inner cells that changed (dims, n, rounded)."""
        return self.inner.filter(pl.Series(self.changed))


# --------------------------------------------------------------------------- helpers


def _criterion(f: np.ndarray, g: np.ndarray, b: int, M: int, lam: float) -> np.ndarray:
    """Per published cell: (√f − √g)² plus ``lam`` if g is small (1 … M−1, not a multiple of b)."""
    h = (np.sqrt(f) - np.sqrt(np.maximum(g, 0).astype(np.float64))) ** 2
    if lam:
        h = h + lam * ((g > 0) & (g < M) & (g % b != 0))
    return h


class _Incidence:
    """Items × keys incidence (e.g. candidates × published cells) for Luby-style selection:
    an item wins when its rank is the smallest among the active items on each of its keys."""

    def __init__(self, items: np.ndarray, keys: np.ndarray, n_items: int) -> None:
        order = np.argsort(keys, kind="stable")
        self.items = items[order]
        k = keys[order]
        self.starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if k.size else np.zeros(0, np.int64)
        self.lengths = np.diff(np.r_[self.starts, k.size])
        self.n_items = n_items

    def winners(self, rank: np.ndarray, active: np.ndarray) -> np.ndarray:
        if self.items.size == 0:
            return active.copy()
        act = active[self.items]
        rk = np.where(act, rank[self.items], _BIG)
        kmin = np.repeat(np.minimum.reduceat(rk, self.starts), self.lengths)
        lose = act & (rk != kmin)
        bad = np.bincount(self.items[lose], minlength=self.n_items)
        return active & (bad == 0)


def _rank(score: np.ndarray, tie: np.ndarray) -> np.ndarray:
    """Rank (0 = best) by ascending score, ties by the random order ``tie``."""
    order = np.lexsort((tie, score))
    rank = np.empty(score.size, dtype=np.int64)
    rank[order] = np.arange(score.size)
    return rank


def _col_counts(XR: sparse.csr_matrix, rows: np.ndarray, m: int) -> np.ndarray:
    if rows.size == 0:
        return np.zeros(m, dtype=np.int64)
    return np.bincount(XR[rows].indices, minlength=m).astype(np.int64)


def _choose_up(
    XR: sparse.csr_matrix,
    f: np.ndarray,
    g0: np.ndarray,
    b: int,
    M: int,
    n_up: int,
    tie: np.ndarray,
    lam: float,
    conflict_max: int | None,
    polish: int,
) -> np.ndarray:
    """Which of the candidates (rows of XR, published cells as columns) to raise by b."""
    n, m = XR.shape
    if conflict_max is None:
        # cells with up to √n candidates (at least 64) guard each other; only the few largest
        # margins are left out, where one more rounding changes little. A fixed 64 left the
        # region × age × sex cells of a 1e6-cell census unguarded (utility 0.898 against
        # 0.909 with them guarded).
        conflict_max = max(64, int(np.sqrt(n)))
    up = np.zeros(n, dtype=bool)
    if n_up <= 0:
        return up
    if n_up >= n:
        up[:] = True
        return up
    rows_nz = np.repeat(np.arange(n), np.diff(XR.indptr))
    cols_nz = XR.indices.astype(np.int64)
    cnt = np.bincount(cols_nz, minlength=m)
    conflict = cnt <= conflict_max
    cnz = conflict[cols_nz]
    inc = _Incidence(rows_nz[cnz], cols_nz[cnz], n)
    g = g0.astype(np.int64).copy()

    # forward sweeps: raise locally best candidates until n_up are raised
    need = n_up
    while need > 0:
        gain = _criterion(f, g + b, b, M, lam) - _criterion(f, g, b, M, lam)
        score = XR @ gain
        win = inc.winners(_rank(score, tie), ~up)
        idx = np.flatnonzero(win)
        if idx.size > need:
            idx = idx[np.lexsort((tie[idx], score[idx]))[:need]]
        up[idx] = True
        need -= idx.size
        g += b * _col_counts(XR, idx, m)

    # swap sweeps: move a raise to a better partner sharing a published cell
    total = float(_criterion(f, g, b, M, lam).sum())
    by_col = _Incidence(rows_nz, cols_nz, n)  # all published cells, grouped by cell
    col_sorted = np.sort(cols_nz, kind="stable")
    dirty = np.ones(m, dtype=bool)  # cells whose value changed in the last sweep
    for _ in range(polish):
        # a pair can only have become improving if one of its cells changed; changes of
        # large cells (more than conflict_max candidates) are too small to count here
        active = (XR @ (dirty & conflict).astype(np.float64)) > 0
        base_c = _criterion(f, g, b, M, lam)
        dn = _criterion(f, g - b, b, M, lam) - base_c
        upg = _criterion(f, g + b, b, M, lam) - base_c
        sdown = XR @ dn
        sup = XR @ upg
        # best raisable partner in each published cell (smallest sup; ties: last in order)
        sv = np.where(up[by_col.items], np.inf, sup[by_col.items])
        cmin = np.repeat(np.minimum.reduceat(sv, by_col.starts), by_col.lengths)
        hit = np.isfinite(sv) & (sv == cmin)
        partner = np.full(m, -1, dtype=np.int64)
        partner[col_sorted[hit]] = by_col.items[hit]
        sel = up[rows_nz]
        pi, pj = rows_nz[sel], partner[cols_nz[sel]]
        keep = pj >= 0
        keep[keep] = active[pi[keep]] | active[pj[keep]]
        if not keep.any():
            break
        pi, pj = pi[keep], pj[keep]  # a pair may repeat; the selection below keeps one
        shared = XR[pi].multiply(XR[pj]).tocsr()
        delta = sdown[pi] + sup[pj] - shared @ (dn + upg)
        good = delta < -1e-12
        if not good.any():
            break
        pi, pj, delta = pi[good], pj[good], delta[good]
        P = pi.size
        Xi, Xj = XR[pi].tocoo(), XR[pj].tocoo()
        ci, cj = conflict[Xi.col], conflict[Xj.col]
        items = np.concatenate([Xi.row[ci], Xj.row[cj], np.arange(P), np.arange(P)])
        keys = np.concatenate([Xi.col[ci], Xj.col[cj], m + pi, m + pj])
        prank = _rank(delta, tie[pi])
        win = np.flatnonzero(_Incidence(items, keys, P).winners(prank, np.ones(P, dtype=bool)))
        g_new = g - b * _col_counts(XR, pi[win], m) + b * _col_counts(XR, pj[win], m)
        new_total = float(_criterion(f, g_new, b, M, lam).sum())
        while new_total >= total - 1e-12 and win.size > 1:
            # interactions through large cells spoilt the batch: keep its better half
            win = win[np.argsort(prank[win])[: win.size // 2]]
            g_new = g - b * _col_counts(XR, pi[win], m) + b * _col_counts(XR, pj[win], m)
            new_total = float(_criterion(f, g_new, b, M, lam).sum())
        if new_total >= total - 1e-12:
            break
        up[pi[win]] = False
        up[pj[win]] = True
        dirty = g_new != g
        g, total = g_new, new_total
    return up


def _derivable(Xc: sparse.csc_matrix, Xr: sparse.csr_matrix, zr: np.ndarray) -> np.ndarray:
    """Inner cells whose value follows from the published values by zeros and single-cell
    sums (SSBtools' Reduce0exact without leverage): cells under a zero published cell are 0;
    a published cell with one unknown inner cell left gives that cell; repeat."""
    n = Xc.shape[0]
    known = (Xr @ (zr == 0).astype(np.float64)) > 0
    idx = np.arange(n, dtype=np.float64)
    while True:
        unk = (~known).astype(np.float64)
        cnt = np.rint(Xc.T @ unk)
        single = cnt == 1
        if not single.any():
            break
        rows = np.unique(np.rint((Xc.T @ (unk * idx))[single]).astype(np.int64))
        rows = rows[~known[rows]]
        if rows.size == 0:
            break
        known[rows] = True
    return known


def small_count_matrix(
    X: Any,
    y: Any,
    base: int = 3,
    *,
    max_round: int | None = None,
    seed: int = 123,
    small_penalty: float = 1.0,
    easy_check: bool = True,
    conflict_max: int | None = None,
    polish: int = 400,
    max_iter: int = 1000,
) -> tuple[np.ndarray, int]:
    """Small count rounding on a model matrix: X (inner × published, 0/1) and inner counts
    y. Returns (rounded inner counts, number of passes). See :func:`small_count`."""
    b = check_base(base)
    Xc = sparse.csc_matrix(X)
    yv = counts(y, "small count rounding: inner counts").ravel()
    if yv.size != Xc.shape[0]:
        raise InputError(f"small count rounding: {yv.size} inner counts for a matrix with {Xc.shape[0]} rows")
    mr = b - 1 if max_round is None else max_round
    if isinstance(mr, bool) or not isinstance(mr, (int, np.integer)) or mr < b - 1:
        raise InputError(f"max_round must be an integer >= base - 1 ({b - 1}), got {max_round!r}")
    M = int(mr) + 1
    if small_penalty < 0 or not np.isfinite(small_penalty):
        raise InputError("small_penalty must be a finite number >= 0")
    if b == 1:  # every count is a multiple of 1: nothing to round
        return yv.copy(), 0
    Xr = Xc.tocsr()
    rng = np.random.default_rng(seed)
    tie = rng.permutation(Xc.shape[0])
    z = xty(Xc, yv)
    zf = z.astype(np.float64)
    yr = yv.copy()
    zr = z.copy()
    total0 = int(yv.sum())
    forced = np.zeros(yv.size, dtype=bool)
    it = 0
    while True:
        small = (zr > 0) & (zr < M) & (zr % b != 0)
        roundable = (yr < M) & (yr % b != 0)
        cand = roundable & (forced | ((Xr @ small.astype(np.float64)) > 0))
        if not cand.any():
            if small.any():  # cannot happen for max_round >= b - 1; kept as a guard
                warnings.warn(
                    f"small count rounding: {int(small.sum())} published cells are still small "
                    "and no inner cell can be rounded for them",
                    ConvergenceWarning,
                    stacklevel=3,
                )
                break
            if easy_check:
                newf = _derivable(Xc, Xr, zr) & roundable
                if newf.any():
                    forced |= newf
                    continue
            break
        it += 1
        if it > max_iter:
            warnings.warn(
                f"small count rounding stopped after {max_iter} passes with "
                f"{int(small.sum())} small published cells left; raise max_iter",
                ConvergenceWarning,
                stacklevel=3,
            )
            break
        R = np.flatnonzero(cand)
        r = yr[R] % b
        D = int(r.sum()) + total0 - int(yr.sum())
        n_up = int(np.clip(np.round(D / b), 0, R.size))  # half to even, as R's round()
        XR = Xr[R]
        g0 = zr - xty(XR, r)
        # only published cells holding some but not all candidates depend on the choice
        cnt = np.bincount(XR.indices, minlength=Xc.shape[1])
        rel = (cnt > 0) & (cnt < R.size)
        cols = np.flatnonzero(rel)
        remap = np.full(Xc.shape[1], -1, dtype=np.int64)
        remap[cols] = np.arange(cols.size)
        keep = rel[XR.indices]
        rows_nz = np.repeat(np.arange(R.size), np.diff(XR.indptr))
        XRl = sparse.csr_matrix(
            (np.ones(int(keep.sum())), (rows_nz[keep], remap[XR.indices[keep]])),
            shape=(R.size, cols.size),
        )
        up = _choose_up(
            XRl, zf[cols], g0[cols], b, M, n_up, tie[R], small_penalty, conflict_max, polish
        )
        yr[R] = yr[R] - r + b * up
        zr = g0 + b * xty(XR, up.astype(np.int64))
        forced[R] = False
    return yr, it


def small_count(
    inner: Any,
    spec: Any,
    base: int = 3,
    *,
    max_round: int | None = None,
    seed: int = 123,
    freq: str = "n",
    small_penalty: float = 1.0,
    easy_check: bool = True,
    conflict_max: int | None = None,
    polish: int = 400,
    max_iter: int = 1000,
) -> SmallCountResult:
    """Small count rounding (SCR) of a table of inner cells (Langsrud & Heldal 2018; the R
    package SmallCountRounding's PLSrounding, re-implemented — see the module docstring).

    ``inner``: a frame (polars, pandas, pyarrow) with the dimension columns of ``spec`` and the
    whole non-negative counts ``freq``; duplicate rows are summed and the zero cells of every
    combination of occurring codes are added (Extend0). ``spec``: a :class:`TableSpec`
    (hierarchies, formula) saying which cells are published. Inner cells below
    ``max_round`` + 1 (default base − 1) under a published cell in 1 … max_round that is not
    a multiple of ``base`` are rounded to a multiple of the base; afterwards no published cell
    (the sums of the rounded inner cells) lies in 1 … max_round unless it is a multiple of
    the base, and the grand total is within base/2 of the original.

    Tuning: ``small_penalty`` (criterion weight of a published cell left small, against the
    Hellinger terms), ``easy_check`` (also round small inner cells derivable from the
    rounded table), ``conflict_max`` (published cells with more candidates than this do not
    block simultaneous choices; default √(candidates), at least 64), ``polish`` (most swap
    sweeps per pass). ``seed`` breaks ties (R's default rndSeed is 123 too).
    """
    b = check_base(base)
    prep = prepare(inner, spec, freq, "small_count")
    yr, it = small_count_matrix(
        prep.X,
        prep.y,
        b,
        max_round=max_round,
        seed=seed,
        small_penalty=small_penalty,
        easy_check=easy_check,
        conflict_max=conflict_max,
        polish=polish,
        max_iter=max_iter,
    )
    zr = xty(prep.X, yr)
    inner_f = prep.inner.with_columns(pl.Series("rounded", yr, dtype=pl.Int64))
    pub_f = prep.published.with_columns(pl.Series("rounded", zr, dtype=pl.Int64))
    hu = hellinger_utility(prep.z, zr) if prep.z.sum() > 0 else 1.0
    hui = hellinger_utility(prep.y, yr) if prep.y.sum() > 0 else 1.0
    return SmallCountResult(
        inner=inner_f,
        published=pub_f,
        changed=yr != prep.y,
        hellinger_utility=float(hu),
        hellinger_utility_inner=float(hui),
        base=b,
        max_round=b - 1 if max_round is None else int(max_round),
        iterations=it,
        X=prep.X,
    )
