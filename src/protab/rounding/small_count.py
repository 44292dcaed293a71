"""Small count rounding (SCR) of inner cells: the method of Langsrud & Heldal (2018) and the
R package SmallCountRounding (PLSrounding), in protab's own implementation.

What it does (docs/methods.md §2.7): only *inner* cells are rounded and
every published cell is a sum of rounded inner cells (z = Xᵀy), so the output is additive and
consistent across every table made from the same inner cells. The first pass takes the small
inner cells (value < max_round + 1, not a multiple of the base b) under a published cell of
1 … max_round (multiples of b included, as SmallCountRounding does); each keeps its
multiple-of-b part and has its residual r = y mod b rounded to 0 or b. How many go up is
fixed to keep the grand total within b/2 of the original; which ones go up is chosen to keep
the published table close to the original. Published cells that the rounding leaves small
(1 … max_round, not a multiple of b) are found and their small inner cells rounded in the
next pass, until no published cell is small; an inner cell that an intruder can derive
exactly from the rounded table (zeros and single-cell sums, SSBtools' Reduce0exact "easy
check"; with ``leverage_check`` also by linear algebra) is rounded as well when it is small.
The options of :func:`small_count` (identify_new, zero_candidates, force_inner, pre_rounded,
step, leverage_check) change these rules as SmallCountRounding's parameters of the same
meaning do.

How protab chooses (its own algorithm, not a port): the criterion is Σ_c (z_c − g_c)²/(4 z_c^¼)
over the published cells — between the Hellinger distance (≈ (z − g)²/(4z), by which the
result is judged) and SmallCountRounding's least squares; on the R package's own test cases it
beats R on both Hellinger utility and mean absolute difference (tests/test_rounding_scr_r.py)
— plus a penalty per published cell left in 1 … max_round, so that a pass creates few new
small cells (each would cost further changed inner cells). Starting from every candidate
rounded down, a vectorised greedy raises candidates in sweeps: each sweep scores every
candidate by the exact change of the criterion if it alone went up (one sparse product) and
raises, all at once, the candidates that score best among the candidates sharing a published
cell with them (a Luby-style independent set; published cells holding very many candidates,
such as large margins, do not block each other). Then swap sweeps move a rounding-up from a
raised cell to the best partner in one of its published cells wherever the exact change of
the criterion is negative, again many non-overlapping swaps per sweep, keeping a sweep only
if the criterion falls (after the first sweep only candidates next to a cell the last sweep
changed are looked at). When no published cell is small any more, a last round of such
swaps over all rounded cells moves roundings-up only where that lowers the mean absolute
difference of the published cells without raising their Hellinger distance (first pair by
pair, then in total) or making a published cell small (kept only if the easy / leverage
check still finds nothing), so it can only improve both measures. Ties are broken by a random order drawn from ``seed``. Every step is
a handful of sparse products over all candidates: no Python loop over cells (the optional
``step`` backward-forward rounds and the dense ``leverage_check`` are the costlier paths).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
from scipy import sparse

from protab._progress import bar
from protab.errors import ConvergenceWarning, InputError
from protab.measures import hellinger_utility
from protab.rounding._common import as_frame, check_base, counts, prepare, xty

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


def _criterion(
    f: np.ndarray, g: np.ndarray, b: int, M: int, lam: float, w: np.ndarray | None = None
) -> np.ndarray:
    """Per published cell: (f − g)² / (4 f^¼) plus ``lam`` if g is small (1 … M−1, not a
    multiple of b).

    The squared change over 4 f^¼ sits between the Hellinger term (≈ (f − g)²/(4f), which
    lets large cells absorb the changes) and plain least squares (SmallCountRounding's
    criterion, which spreads them evenly over small and large cells): on the R package's own
    test cases it gives both a higher Hellinger utility and a lower mean absolute difference
    of the published cells than R (tests/test_rounding_scr_r.py), for every seed tried; the
    power ½ did so on fewer of the package's larger (sosialFiktiv) cases."""
    if w is None:  # the weights 1/(4 f^¼), computed once per pass by the caller
        w = _weights(f)
    d = f - np.maximum(g, 0)
    h = d * d * w
    if lam:
        h = h + lam * ((g > 0) & (g < M) & (g % b != 0))
    return h


def _weights(f: np.ndarray) -> np.ndarray:
    return 0.25 / np.sqrt(np.sqrt(np.maximum(f, 1.0)))


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


def _batch(
    XR: sparse.csr_matrix, g: np.ndarray, b: int, down: np.ndarray, upj: np.ndarray, measures: list, totals: list
) -> tuple[np.ndarray, list[float], bool]:
    """Published values after a batch of swaps, the measures' totals, and whether the first
    fell and none of the others exceeds its cap (``totals[1:]``)."""
    m = XR.shape[1]
    g_new = g - b * _col_counts(XR, down, m) + b * _col_counts(XR, upj, m)
    new = [float(mf(g_new).sum()) for mf in measures]
    ok = new[0] < totals[0] - 1e-12 and all(v <= t + 1e-12 for v, t in zip(new[1:], totals[1:]))
    return g_new, new, ok


def _swaps(
    XR: sparse.csr_matrix,
    up: np.ndarray,
    g: np.ndarray,
    b: int,
    measures: list,
    conflict: np.ndarray,
    tie: np.ndarray,
    polish: int,
    rows_nz: np.ndarray,
    cols_nz: np.ndarray,
    by_col: _Incidence,
    caps: list[float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Swap sweeps: move raises to partners sharing a published cell while the first of
    ``measures`` (per-published-cell functions of g) falls and none of the others rises —
    or, with ``caps``, while the others' totals stay within the caps (a swap may then
    spend what earlier swaps saved)."""
    n, m = XR.shape
    up, g = up.copy(), g.copy()
    totals = [float(mf(g).sum()) for mf in measures]
    if caps is not None:
        totals[1:] = caps
    col_sorted = np.sort(cols_nz, kind="stable")
    dirty = np.ones(m, dtype=bool)  # cells whose value changed in the last sweep
    for _ in range(polish):
        # a pair can only have become improving if one of its cells changed; changes of
        # large cells (more than conflict_max candidates) are too small to count here
        active = (XR @ (dirty & conflict).astype(np.float64)) > 0
        dns, ups_ = [], []
        for mf in measures:
            base_c = mf(g)
            dns.append(mf(g - b) - base_c)
            ups_.append(mf(g + b) - base_c)
        sdown = XR @ dns[0]
        sup = XR @ ups_[0]
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
        delta = sdown[pi] + sup[pj] - shared @ (dns[0] + ups_[0])
        good = delta < -1e-12
        if caps is None:
            for dn_k, up_k in zip(dns[1:], ups_[1:]):
                d_k = XR[pi] @ dn_k + XR[pj] @ up_k - shared @ (dn_k + up_k)
                good &= d_k <= 1e-12
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
        g_new, new_totals, ok = _batch(XR, g, b, pi[win], pj[win], measures, totals)
        while not ok and win.size > 1:
            # interactions through large cells spoilt the batch: keep its better half
            win = win[np.argsort(prank[win])[: win.size // 2]]
            g_new, new_totals, ok = _batch(XR, g, b, pi[win], pj[win], measures, totals)
        if not ok:
            break
        up[pi[win]] = False
        up[pj[win]] = True
        dirty = g_new != g
        g = g_new
        totals = new_totals if caps is None else [new_totals[0], *caps]
    return up, g


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
    step: tuple[int, int, int] = (1, 0, 1),
) -> np.ndarray:
    """Which of the candidates (rows of XR, published cells as columns) to raise by b.

    ``step`` = (forward, backward, final) as R's step: with forward > 1 a sweep raises at
    most ``forward`` candidates, after which the ``backward`` least useful earlier raises are
    taken back (and raised again only if they are still the best); with final > 1, after the
    swap sweeps, rounds take back the ``final`` least useful raises and refill with the best
    candidates while that lowers the criterion."""
    s1, s2, s3 = step
    w = _weights(f)
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
        gain = _criterion(f, g + b, b, M, lam, w) - _criterion(f, g, b, M, lam, w)
        score = XR @ gain
        win = inc.winners(_rank(score, tie), ~up)
        idx = np.flatnonzero(win)
        cap = need if s1 <= 1 else min(need, s1)
        if idx.size > cap:
            idx = idx[np.lexsort((tie[idx], score[idx]))[:cap]]
        up[idx] = True
        need -= idx.size
        g += b * _col_counts(XR, idx, m)
        if s1 > 1 and s2 > 0 and need > 0:
            # backward steps: take back the earlier raises whose removal costs least (never
            # the ones just made, and fewer than were made, so every round gains ground)
            old = up.copy()
            old[idx] = False
            k = min(s2, idx.size - 1, int(old.sum()))
            if k > 0:
                loss = XR @ (_criterion(f, g - b, b, M, lam, w) - _criterion(f, g, b, M, lam, w))
                cand_down = np.flatnonzero(old)
                down = cand_down[np.lexsort((tie[cand_down], loss[cand_down]))[:k]]
                up[down] = False
                need += down.size
                g -= b * _col_counts(XR, down, m)

    # swap sweeps: move a raise to a better partner sharing a published cell
    crit = lambda gg: _criterion(f, gg, b, M, lam, w)  # noqa: E731
    by_col = _Incidence(rows_nz, cols_nz, n)  # all published cells, grouped by cell
    up, g = _swaps(XR, up, g, b, [crit], conflict, tie, polish, rows_nz, cols_nz, by_col)
    if s3 > 1:
        total = float(_criterion(f, g, b, M, lam, w).sum())
        for _ in range(polish):
            # take back the s3 least useful raises, refill with the best candidates one by one
            loss = XR @ (_criterion(f, g - b, b, M, lam, w) - _criterion(f, g, b, M, lam, w))
            ups = np.flatnonzero(up)
            k = min(s3, ups.size, n - ups.size)
            if k == 0:
                break
            down = ups[np.lexsort((tie[ups], loss[ups]))[:k]]
            up2, g2 = up.copy(), g - b * _col_counts(XR, down, m)
            up2[down] = False
            for _k in range(k):
                score = XR @ (_criterion(f, g2 + b, b, M, lam, w) - _criterion(f, g2, b, M, lam, w))
                score[up2] = np.inf
                j = int(np.lexsort((tie, score))[0])
                up2[j] = True
                g2 += b * _col_counts(XR, np.array([j]), m)
            new_total = float(_criterion(f, g2, b, M, lam, w).sum())
            if new_total >= total - 1e-12:
                break
            up, g, total = up2, g2, new_total
    return up


def _final_swaps(
    Xr: sparse.csr_matrix,
    y: np.ndarray,
    yr: np.ndarray,
    z: np.ndarray,
    b: int,
    iM: int,
    movable: np.ndarray,
    tie: np.ndarray,
    conflict_max: int | None,
    polish: int,
) -> np.ndarray:
    """A last round of swaps over every rounded inner cell: a rounding-up moves to another
    rounded cell (from its multiple below to the one above) where that lowers the mean
    absolute difference of the published cells without raising their Hellinger distance —
    the two measures the result is judged by — and without making any published cell small.
    The grand total does not change. Returns the new rounded inner counts."""
    R = np.flatnonzero(movable)
    if R.size < 2:
        return yr
    low = y[R] - y[R] % b
    up = yr[R] > low
    XR = Xr[R]
    cnt = np.bincount(XR.indices, minlength=Xr.shape[1])
    cols = np.flatnonzero((cnt > 0) & (cnt < R.size))
    if cols.size == 0:
        return yr
    XRl = XR[:, cols].tocsr()
    n, m = XRl.shape
    zr = xty(Xr, yr)
    g = zr[cols].copy()
    f = z[cols].astype(np.float64)
    sf = np.sqrt(f)
    big = 1e9 * (1.0 + f.sum())

    def small(gg: np.ndarray) -> np.ndarray:
        return big * ((gg > 0) & (gg < iM) & (gg % b != 0))

    def l1(gg: np.ndarray) -> np.ndarray:
        return np.abs(f - gg) + small(gg)

    def hd(gg: np.ndarray) -> np.ndarray:
        return (sf - np.sqrt(np.maximum(gg, 0))) ** 2 + small(gg)

    rows_nz = np.repeat(np.arange(n), np.diff(XRl.indptr))
    cols_nz = XRl.indices.astype(np.int64)
    cmax = max(64, int(np.sqrt(n))) if conflict_max is None else conflict_max
    conflict = np.bincount(cols_nz, minlength=m) <= cmax
    by_col = _Incidence(rows_nz, cols_nz, n)
    hd0 = float(hd(g).sum())
    # first swaps that lower one measure and raise neither, then swaps that lower the
    # mean absolute difference as long as the Hellinger distance stays within its start
    # (at most polish/8 sweeps each: nearly all the gain comes in the first sweeps)
    sweeps = max(1, polish // 8)
    up2, g2 = _swaps(XRl, up, g, b, [l1, hd], conflict, tie[R], sweeps, rows_nz, cols_nz, by_col)
    up2, _ = _swaps(XRl, up2, g2, b, [l1, hd], conflict, tie[R], sweeps, rows_nz, cols_nz, by_col, caps=[hd0])
    out = yr.copy()
    out[R] = low + b * up2
    return out


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


def _mask(value: Any, n: int, name: str) -> np.ndarray:
    """A per-inner-cell boolean option: a bool for all cells or a boolean vector of length n."""
    if isinstance(value, (bool, np.bool_)):
        return np.full(n, bool(value))
    a = np.asarray(value)
    if a.shape != (n,) or a.dtype.kind not in "biu":
        raise InputError(f"{name} must be True/False or a boolean vector with one value per inner cell ({n})")
    return a.astype(bool)


def _steps(step: Any) -> tuple[tuple[int, int, int], tuple[int, int, int] | None, tuple[int, int, int]]:
    """R's step parameter: a number or (forward, backward, final) numbers, or a list of up to
    three such settings for the main passes, a final re-run (None: none) and the passes
    caused by easy_check / leverage_check."""

    def one(v: Any) -> tuple[int, int, int]:
        try:
            vals = [int(v)] if np.isscalar(v) else [int(x) for x in v]
        except (TypeError, ValueError) as exc:
            raise InputError(f"step: expected a number >= 0 or up to three of them, got {v!r}") from exc
        if not vals or len(vals) > 3 or any(x < 0 for x in vals):
            raise InputError(f"step: expected a number >= 0 or up to three of them, got {v!r}")
        s1 = max(1, vals[0])
        s2 = vals[1] if len(vals) >= 2 else int(np.round(s1 / 2))
        s3 = vals[2] if len(vals) >= 3 else s1
        return s1, s2, max(1, s3)

    if isinstance(step, list):
        if not 1 <= len(step) <= 3:
            raise InputError("step as a list takes one to three settings (main, re-run, checks)")
        full = [step[k % len(step)] for k in range(3)]  # recycled to three, as R's rep_len
        if full[0] is None:
            raise InputError("step: the first setting of the list cannot be None")
        return one(full[0]), (None if full[1] is None else one(full[1])), one(full[2] if full[2] is not None else full[0])
    return one(step), None, one(step)


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
    identify_new: bool | None = True,
    zero_candidates: Any = False,
    force_inner: Any = False,
    pre_rounded: Any = None,
    step: Any = 0,
    leverage_check: bool | float = False,
) -> tuple[np.ndarray, int]:
    """Small count rounding on a model matrix: X (inner × published, 0/1) and inner counts
    y. Returns (rounded inner counts, number of passes). See :func:`small_count`."""
    b = check_base(base)
    Xc = sparse.csc_matrix(X)
    yv = counts(y, "small count rounding: inner counts").ravel()
    n = yv.size
    if n != Xc.shape[0]:
        raise InputError(f"small count rounding: {n} inner counts for a matrix with {Xc.shape[0]} rows")
    mr = b - 1 if max_round is None else max_round
    if isinstance(mr, bool) or not isinstance(mr, (int, np.integer)) or mr < b - 1:
        raise InputError(f"max_round must be an integer >= base - 1 ({b - 1}), got {max_round!r}")
    M = int(mr) + 1
    if small_penalty < 0 or not np.isfinite(small_penalty):
        raise InputError("small_penalty must be a finite number >= 0")
    if identify_new not in (True, False, None):
        raise InputError(f"identify_new must be True, False or None, got {identify_new!r}")
    zc = _mask(zero_candidates, n, "zero_candidates") & (yv % b == 0)
    fi = _mask(force_inner, n, "force_inner")
    if isinstance(leverage_check, (bool, np.bool_)):
        lev_limit = 0.999999 if leverage_check else None
    elif isinstance(leverage_check, (int, float, np.floating)) and 0 < leverage_check:
        lev_limit = float(leverage_check)
    else:
        raise InputError(f"leverage_check must be True/False or a leverage limit > 0, got {leverage_check!r}")
    steps_main, steps_rerun, steps_check = _steps(step)
    fixed = np.zeros(n, dtype=bool)
    pre_vals = None
    if pre_rounded is not None:
        pr = np.asarray(pre_rounded, dtype=np.float64).ravel()
        if pr.size != n:
            raise InputError(f"pre_rounded must have one value (or NaN) per inner cell ({n}), got {pr.size}")
        fixed = ~np.isnan(pr)
        pre_vals = counts(pr[fixed], "pre_rounded")
    if b == 1:  # every count is a multiple of 1: nothing to round
        out = yv.copy()
        if pre_vals is not None:
            out[fixed] = pre_vals
        return out, 0
    rng = np.random.default_rng(seed)
    tie = rng.permutation(n)
    z = xty(Xc, yv)
    zf = z.astype(np.float64)
    total0 = int(yv.sum())
    # the cells of the first pass (R's semantics): small inner cells under a published cell
    # of 1 … max_round (multiples of the base included), zero candidates among them, forced
    # cells, and cells revealed by the leverage check
    Xr = Xc.tocsr()
    under0 = (Xr @ ((z > 0) & (z < M)).astype(np.float64)) > 0
    first = under0 & (yv < M) & ((yv % b != 0) | zc)
    first |= fi & ((yv % b != 0) | zc)
    if lev_limit is not None and not fi.all():
        first |= _known_cells(Xc, Xr, yv, z, lev_limit) & (yv < M) & (yv % b != 0)
    yr = yv.copy()
    if pre_vals is not None:
        yr[fixed] = pre_vals
    first &= ~fixed
    zr = xty(Xc, yr)
    # later passes look for published cells that the rounding made small
    iM = M if identify_new else b
    forced = first.copy()
    rerun = steps_rerun is not None
    cur_step = steps_main
    it = 0
    with bar("small count rounding", unit="pass") as pbar:
        while True:
            if identify_new is False:
                small = np.zeros_like(zr, dtype=bool)
                cand = forced.copy()
            else:
                small = (zr > 0) & (zr < iM) & (zr % b != 0)
                roundable = (yr < iM) & (yr % b != 0) & ~fixed
                cand = forced | (roundable & ((Xr @ small.astype(np.float64)) > 0))
            if not cand.any():
                if small.any():
                    warnings.warn(
                        f"small count rounding: {int(small.sum())} published cells are still small "
                        "and no inner cell can be rounded for them"
                        + (" (pre_rounded cells are kept)" if fixed.any() else ""),
                        ConvergenceWarning,
                        stacklevel=3,
                    )
                    break
                if rerun and it > 1:
                    # R's re-run: undo every change and round the changed cells together
                    rerun = False
                    changed = (yr != yv) & ~fixed
                    yr[changed] = yv[changed]
                    zr = xty(Xc, yr)
                    forced = changed
                    cur_step = steps_rerun
                    continue
                rerun = False
                if easy_check or lev_limit is not None:
                    known = _known_cells(Xc, Xr, yr, zr, lev_limit)
                    newf = known & (yr < M) & (yr % b != 0) & ~fixed
                    if newf.any():
                        forced |= newf
                        cur_step = steps_check
                        continue
                break
            it += 1
            pbar.update(1)
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
                XRl, zf[cols], g0[cols], b, M, n_up, tie[R], small_penalty, conflict_max, polish,
                cur_step,
            )
            yr[R] = yr[R] - r + b * up
            zr = g0 + b * xty(XR, up.astype(np.int64))
            forced[R] = False
    if it and identify_new is not False and polish > 0:
        # last swaps among all rounded cells for the two measures the result is judged by;
        # kept only if no small inner cell becomes derivable (easy / leverage check)
        movable = (yr != yv) & ~fixed & (yv % b != 0)
        y2 = _final_swaps(Xr, yv, yr, z, b, iM, movable, tie, conflict_max, polish)
        if not np.array_equal(y2, yr):
            safe = True
            if easy_check or lev_limit is not None:
                known = _known_cells(Xc, Xr, y2, xty(Xc, y2), lev_limit)
                safe = not np.any(known & (y2 < M) & (y2 % b != 0) & ~fixed)
            if safe:
                yr = y2
    return yr, it


def _cell_option(frame: Any, value: Any, prep: Any, kind: str, name: str) -> Any:
    """A per-inner-cell option of :func:`small_count` given as a bool, a column name of the
    input frame or a vector with one value per input row, mapped onto the inner cells of
    ``prep`` (duplicate rows combined; the zero cells added by Extend0 get False / NaN)."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return value
    src = as_frame(frame, "small_count")
    if isinstance(value, str):
        if value not in src.columns:
            raise InputError(f"small_count: {name}={value!r} is not a column of the inner cells")
        col = src[value]
    else:
        arr = np.asarray(value)
        if arr.shape != (src.height,):
            raise InputError(f"small_count: {name} must have one value per input row ({src.height}), got shape {arr.shape}")
        col = pl.Series(arr)
    dims = prep.spec.columns
    keyed = src.select(dims).with_columns(col.alias("_v")).with_columns(pl.col(d).cast(prep.inner[d].dtype) for d in dims)
    if kind == "bool":
        agg = keyed.group_by(dims).agg(pl.col("_v").cast(pl.Boolean).fill_null(False).any())
        out = prep.inner.select(dims).join(agg, on=dims, how="left", maintain_order="left")["_v"]
        return out.fill_null(False).to_numpy().astype(bool)
    agg = keyed.group_by(dims).agg(pl.col("_v").cast(pl.Float64).sum().alias("_s"), pl.col("_v").is_null().all().alias("_na"))
    out = prep.inner.select(dims).join(agg, on=dims, how="left", maintain_order="left")
    vals = out["_s"].fill_null(np.nan).to_numpy().astype(np.float64)
    vals[out["_na"].fill_null(True).to_numpy()] = np.nan
    return vals


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
    extend0: bool = True,
    identify_new: bool | None = True,
    zero_candidates: Any = False,
    force_inner: Any = False,
    pre_rounded: Any = None,
    step: Any = 0,
    leverage_check: bool | float = False,
) -> SmallCountResult:
    """Small count rounding (SCR) of a table of inner cells (Langsrud & Heldal 2018; the R
    package SmallCountRounding's PLSrounding, re-implemented — see the module docstring).

    ``inner``: a frame (polars, pandas, pyarrow) with the dimension columns of ``spec`` and the
    whole non-negative counts ``freq``; duplicate rows are summed and, with ``extend0``
    (default), the zero cells of every combination of occurring codes are added (Extend0).
    ``spec``: a :class:`TableSpec` (hierarchies, formula) saying which cells are published.
    Inner cells of at most ``max_round`` (default base − 1), not multiples of ``base``, under
    a published cell in 1 … max_round are rounded to a multiple of the base; afterwards no
    published cell (the sums of the rounded inner cells) lies in 1 … max_round unless it is
    a multiple of the base, and the grand total is within base/2 of the original.

    Options with the meaning of SmallCountRounding's (PLSrounding) parameters of similar
    names:

    * ``identify_new`` — True (default): after the first pass, published cells that the
      rounding left or made small (1 … max_round, not a multiple of the base) get their small
      inner cells rounded in further passes. None (R's NA, the older, less conservative
      rule): only published cells below the base count as small in those passes. False: only
      the cells found before rounding are rounded (published cells may stay small).
    * ``zero_candidates`` — True, a boolean column name or vector: inner cells that are
      multiples of the base (zeros included) under a small published cell may be rounded *up*
      by one base in the first pass.
    * ``force_inner`` — True, a column name or vector: these inner cells are rounded whatever
      their size (their remainder modulo the base goes to 0 or to the base); multiples of the
      base only when also zero candidates.
    * ``pre_rounded`` — a column name or vector of predetermined rounded values (null/NaN
      where none): those cells take these values and are never rounded; the rest make up
      for the change of the grand total as far as they can.
    * ``step`` — a number s or (forward, backward, final) numbers, as R's step: with
      forward > 1 the forward sweeps raise at most ``forward`` candidates and then take back
      up to ``backward`` (default round(s/2)) earlier raises; with final > 1 backward-forward
      rounds of ``final`` raises follow the swap sweeps. A list of up to three such settings
      (recycled to three) sets the main passes, a final re-run (all changed cells put back
      and rounded again together, as R does; None: no re-run) and the passes caused by
      ``easy_check`` / ``leverage_check``.
    * ``leverage_check`` — True or a leverage limit (True means 0.999999): before and after
      rounding, small inner cells that follow exactly from the published cells by linear
      algebra (leverage above the limit, SSBtools' Reduce0exact) are rounded too; costly
      (dense) for large tables. ``easy_check`` (default True) is its light form: zeros and
      single-cell sums only, after rounding.

    Tuning: ``small_penalty`` (criterion weight of a published cell left small, against the
    squared-change terms), ``conflict_max`` (published cells with more candidates than this
    do not block simultaneous choices; default √(candidates), at least 64), ``polish`` (most
    swap sweeps per pass). ``seed`` breaks ties (R's default rndSeed is 123 too).
    """
    b = check_base(base)
    prep = prepare(inner, spec, freq, "small_count", extend0=extend0)
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
        identify_new=identify_new,
        zero_candidates=_cell_option(inner, zero_candidates, prep, "bool", "zero_candidates"),
        force_inner=_cell_option(inner, force_inner, prep, "bool", "force_inner"),
        pre_rounded=_cell_option(inner, pre_rounded, prep, "num", "pre_rounded"),
        step=step,
        leverage_check=leverage_check,
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
