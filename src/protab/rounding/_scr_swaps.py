"""Swap sweeps of small count rounding (protab's own algorithm, described in
:mod:`protab.rounding.small_count`): a rounding-up moves to a partner sharing a published cell
where that improves the criterion; many non-overlapping swaps per sweep (Luby-style selection)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import sparse

from protab.rounding._rounding_inputs import xty

_BIG = np.iinfo(np.int64).max

#: sweeps over which the gain is judged when swap sweeps stop early (``tol`` of :func:`_swaps`)
TOL_WINDOW = 25

#: the best raisable partners per published cell that a sweep pairs raised cells with
PARTNERS = 3

#: rounds of :func:`_matching`: raised cells whose best partner went to another try their next
MATCH_ROUNDS = 4

#: per published cell, a function of the published values: ``mf(g)`` for every cell, or
#: ``mf(g[at], at)`` for the cells ``at`` alone (the same values, elementwise)
Measure = Callable[..., np.ndarray]


def _run_starts(sorted_keys: np.ndarray) -> np.ndarray:
    """Where each run of equal values of ``sorted_keys`` begins."""
    if sorted_keys.size == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])


class _Incidence:
    """Items × keys incidence (e.g. candidates × published cells) for Luby-style selection:
    an item wins when its rank is the smallest among the active items on each of its keys."""

    def __init__(self, items: np.ndarray, keys: np.ndarray, n_items: int) -> None:
        order = np.argsort(keys, kind="stable")
        self._group_by(items[order], keys[order], n_items)

    def _group_by(self, items: np.ndarray, sorted_keys: np.ndarray, n_items: int) -> None:
        self.items, self.n_items = items, n_items
        self.starts = _run_starts(sorted_keys)
        self.lengths = np.diff(np.r_[self.starts, sorted_keys.size])
        self.group = np.repeat(np.arange(self.starts.size), self.lengths)  # the key group of each entry
        self.degree = np.bincount(items, minlength=n_items)  # the entries of each item

    def without(self, dead: np.ndarray) -> _Incidence:
        """The same incidence without the entries of the ``dead`` items (a boolean per item):
        the same winners for less work as long as no dead item is active again (a dead item
        that is active has no key left and would win)."""
        keep = ~dead[self.items]
        out = _Incidence.__new__(_Incidence)
        out._group_by(self.items[keep], self.group[keep], self.n_items)
        return out

    def winners(self, rank: np.ndarray, active: np.ndarray) -> np.ndarray:
        if self.items.size == 0:
            return active.copy()
        act = active[self.items]
        rk = np.where(act, rank[self.items], _BIG)
        kmin = np.repeat(np.minimum.reduceat(rk, self.starts), self.lengths)
        lose = act & (rk != kmin)
        bad = np.bincount(self.items[lose], minlength=self.n_items)
        return active & (bad == 0)


    def winners_by(self, score: np.ndarray, tie: np.ndarray, active: np.ndarray) -> np.ndarray:
        """:meth:`winners` for the order by (score, tie) with ``tie`` all distinct (a random
        permutation): the same winners as ranking by them, two minima per key instead of a sort."""
        if self.items.size == 0:
            return active.copy()
        act = active[self.items]
        sc = np.where(act, score[self.items], np.inf)
        at = np.flatnonzero(act & (sc == np.repeat(np.minimum.reduceat(sc, self.starts), self.lengths)))
        # of the few entries at their key's smallest score, the smallest tie per key
        grp, tk = self.group[at], tie[self.items[at]]
        runs = _run_starts(grp)
        best = at[tk == np.repeat(np.minimum.reduceat(tk, runs), np.diff(np.r_[runs, at.size]))] if at.size else at
        # an active item wins when it is the best on every one of its keys
        return active & (np.bincount(self.items[best], minlength=self.n_items) == self.degree)

    def independent(self, rank: np.ndarray, active: np.ndarray, rounds: int = 32) -> np.ndarray:
        """Luby's selection repeated: after each round the winners' neighbours (items sharing a
        key with a winner) drop out and the rest compete again, up to ``rounds`` rounds; the
        winners share no key (a maximal such set when the rounds suffice)."""
        chosen = np.zeros(self.n_items, dtype=bool)
        active = active.copy()
        for _ in range(rounds):
            win = self.winners(rank, active)
            if not win.any():
                break
            chosen |= win
            if self.items.size == 0:
                break
            taken = np.maximum.reduceat(win[self.items].astype(np.int8), self.starts) > 0
            near = np.bincount(self.items[np.repeat(taken, self.lengths)], minlength=self.n_items) > 0
            active &= ~near & ~win
            if not active.any():
                break
        return chosen


def _first_best(key: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Per run of equal values of ``key`` (ascending, as pairs come by raised cell), the first
    position of its smallest ``score``: what ranking all by (score, position) and keeping the
    best per key gives when the tie-break is the same within a run, without a sort."""
    if key.size == 0:
        return np.zeros(0, dtype=np.int64)
    if np.any(key[1:] < key[:-1]):
        raise ValueError("_first_best needs keys in ascending order")
    starts = _run_starts(key)
    lowest = np.repeat(np.minimum.reduceat(score, starts), np.diff(np.r_[starts, key.size]))
    at = np.flatnonzero(score == lowest)
    return at[np.r_[True, key[at][1:] != key[at][:-1]]]


def _best_per(key: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """The positions (ascending) of the best ranked pair per value of ``key`` (non-negative
    integers), ``rank`` all distinct: a smallest rank per key, without a sort."""
    if key.size == 0:
        return np.zeros(0, dtype=np.int64)
    best = np.full(int(key.max()) + 1, _BIG, dtype=np.int64)
    np.minimum.at(best, key, rank)
    return np.flatnonzero(rank == best[key])


def _rank(score: np.ndarray, tie: np.ndarray) -> np.ndarray:
    """Rank (0 = best) by ascending score, ties by the random order ``tie`` (then by position),
    as ``np.lexsort((tie, score))``."""
    by_tie = np.argsort(tie, kind="stable")
    order = by_tie[np.argsort(score[by_tie], kind="stable")]
    rank = np.empty(score.size, dtype=np.int64)
    rank[order] = np.arange(score.size)
    return rank


def _col_counts(XR: sparse.csr_matrix, rows: np.ndarray, m: int) -> np.ndarray:
    if rows.size == 0:
        return np.zeros(m, dtype=np.int64)
    return np.bincount(XR[rows].indices, minlength=m).astype(np.int64)


def _batch(
    XR: sparse.csr_matrix, g: np.ndarray, b: int, down: np.ndarray, upj: np.ndarray, measures: list, totals: list,
    levels: _Levels,
) -> tuple[np.ndarray, list[float], bool, list[np.ndarray], np.ndarray]:
    """Published values after a batch of swaps, the measures' totals, whether the first
    fell and none of the others exceeds its cap (``totals[1:]``), the measures per cell
    (recomputed only where a value changed: ``levels`` holds them for ``g``) and those cells."""
    m = XR.shape[1]
    g_new = g - b * _col_counts(XR, down, m) + b * _col_counts(XR, upj, m)
    ch = np.flatnonzero(g_new != g)
    per_cell = []
    for mf, base in zip(measures, levels.base):
        v = base.copy()
        v[ch] = mf(g_new[ch], ch)
        per_cell.append(v)
    new = [float(v.sum()) for v in per_cell]
    ok = new[0] < totals[0] - 1e-12 and all(v <= t + 1e-12 for v, t in zip(new[1:], totals[1:]))
    return g_new, new, ok, per_cell, ch


def _combined(XR: sparse.csr_matrix, g: np.ndarray, b: int, D: sparse.coo_matrix, pi: np.ndarray, pj: np.ndarray,
              rank: np.ndarray, measures: list, totals: list, levels: _Levels,
              rounds: int = 8) -> tuple[np.ndarray | None, tuple]:
    """Swaps done together whatever cells they share, their combined change computed: in each
    published cell the swaps count in the order of ``rank``, each with the change of the cell's
    measure from the value the better-ranked swaps left to the value with it as well, so the
    swaps' changes add up exactly to the batch's. Swaps whose change does not lower the first
    measure (or raises another) are dropped and the rest counted again; the batch is taken if
    every swap left lowers it (None: not)."""
    on = D.data != 0
    rows, cols, d = D.row[on], D.col[on], D.data[on].astype(np.int64)
    order = np.lexsort((rank[rows], cols))
    rows, cols, d = rows[order], cols[order], d[order]
    starts = _run_starts(cols)
    lengths = np.diff(np.r_[starts, cols.size])
    alive = np.ones(pi.size, dtype=bool)
    for _ in range(rounds):
        dk = np.where(alive[rows], d, 0)
        cs = np.cumsum(dk)
        s_k = cs - np.repeat(cs[starts] - dk[starts], lengths)  # running sum within the cell
        after, before = g[cols] - b * s_k, g[cols] - b * (s_k - dk)
        drop = np.zeros(pi.size, dtype=bool)
        for k, mf in enumerate(measures):
            marg = np.bincount(rows, weights=mf(after, cols) - mf(before, cols), minlength=pi.size)
            drop |= alive & ((marg >= -1e-12) if k == 0 else (marg > 1e-12))
        if not drop.any():
            win = np.flatnonzero(alive)
            if win.size == 0:
                return None, ()
            done = _batch(XR, g, b, pi[win], pj[win], measures, totals, levels)
            return (win, done) if done[2] else (None, ())
        alive &= ~drop
    return None, ()


def _matching(pi: np.ndarray, pj: np.ndarray, delta: np.ndarray, tie: np.ndarray,
              rounds: int = MATCH_ROUNDS) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (raised i, partner j; ``pi`` ascending) of which no two share a candidate: the
    best pair per i, then the best of those per j; the candidates left compete again with
    their other pairs, up to ``rounds`` rounds. Returns the pairs and their rank (by round,
    then by change, ties by ``tie``)."""
    rem = np.arange(pi.size)
    sels, rounds_of = [], []
    n = int(max(pi.max(), pj.max())) + 1 if pi.size else 0
    for r in range(rounds):
        if rem.size == 0:
            break
        s = _first_best(pi[rem], delta[rem])  # the best pair per i (ties: the first)
        rk = _rank(delta[rem][s], tie[pi[rem][s]])
        chosen = rem[s[_best_per(pj[rem][s], rk)]]  # then the best of those per partner j
        sels.append(chosen)
        rounds_of.append(np.full(chosen.size, r))
        used = np.zeros(n, dtype=bool)
        used[pi[chosen]] = used[pj[chosen]] = True
        rem = rem[~used[pi[rem]] & ~used[pj[rem]]]
    sel = np.concatenate(sels) if sels else rem
    rnd_ = np.concatenate(rounds_of) if rounds_of else rem
    order = np.lexsort((tie[pi[sel]], delta[sel], rnd_))
    rank = np.empty(sel.size, dtype=np.int64)
    rank[order] = np.arange(sel.size)
    return sel, rank


class _Levels:
    """The measures per published cell at the values ``g`` (``base``) and their changes if a
    cell went down or up by one base (``dn``, ``up``): computed once, then updated in the cells
    a batch changes (the measures are elementwise, so the values are the same)."""

    def __init__(self, g: np.ndarray, base: list[np.ndarray], dn: list[np.ndarray], up: list[np.ndarray]) -> None:
        self.g, self.base, self.dn, self.up = g, base, dn, up

    @classmethod
    def of(cls, measures: list[Measure], g: np.ndarray, b: int) -> _Levels:
        """The levels at ``g``, every cell computed."""
        base = [mf(g) for mf in measures]
        return cls(g, base, [mf(g - b) - v for mf, v in zip(measures, base)],
                   [mf(g + b) - v for mf, v in zip(measures, base)])

    def moved(self, measures: list[Measure], g_new: np.ndarray, b: int, base: list[np.ndarray],
              ch: np.ndarray) -> _Levels:
        """The levels at ``g_new`` (measures ``base``), which differs from ``g`` in the cells ``ch``."""
        gc = g_new[ch]
        dn, up = [d.copy() for d in self.dn], [u.copy() for u in self.up]
        for mf, v, d, u in zip(measures, base, dn, up):
            d[ch] = mf(gc - b, ch) - v[ch]
            u[ch] = mf(gc + b, ch) - v[ch]
        return _Levels(g_new, base, dn, up)


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
    tol: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Swap sweeps: move raises to partners sharing a published cell while the first of
    ``measures`` (per-published-cell functions of g) falls and none of the others rises —
    or, with ``caps``, while the others' totals stay within the caps (a swap may then
    spend what earlier swaps saved). At most ``polish`` sweeps; with ``tol`` > 0 they stop
    once the last :data:`TOL_WINDOW` sweeps together lowered the first measure by less than
    ``tol`` times its value before them (the long tail of a large table's sweeps gains little)."""
    sweeps = _SwapSweeps(XR, b, measures, conflict, tie, rows_nz, cols_nz, by_col, caps)
    up, g = up.copy(), g.copy()
    totals = [float(mf(g).sum()) for mf in measures]
    if caps is not None:
        totals[1:] = caps
    dirty = np.ones(XR.shape[1], dtype=bool)  # cells whose value changed in the last sweep
    seen = [totals[0]]  # the first measure after each sweep
    for _ in range(polish):
        done = sweeps.sweep(up, g, dirty, totals)
        if done is None:
            break
        g_new, new_totals = done
        dirty = g_new != g
        g = g_new
        totals = new_totals if caps is None else [new_totals[0], *caps]
        seen.append(totals[0])
        if tol > 0 and len(seen) > TOL_WINDOW:
            before = seen[-1 - TOL_WINDOW]
            if before - seen[-1] < tol * abs(before):
                break
    return up, g


class _SwapSweeps:
    """The swap sweeps of :func:`_swaps` over candidates (rows of ``XR``) and published cells
    (its columns); ``by_col`` groups the entries by published cell."""

    def __init__(self, XR: sparse.csr_matrix, b: int, measures: list[Measure], conflict: np.ndarray,
                 tie: np.ndarray, rows_nz: np.ndarray, cols_nz: np.ndarray, by_col: _Incidence,
                 caps: list[float] | None) -> None:
        self.XR, self.b, self.measures, self.conflict, self.tie = XR, b, measures, conflict, tie
        self.rows_nz, self.cols_nz, self.by_col, self.caps = rows_nz, cols_nz, by_col, caps
        self.cells = np.sort(cols_nz, kind="stable")[by_col.starts]  # the cell of each group of by_col
        self._known: _Levels | None = None  # the measures at the values of the last batch

    def sweep(self, up: np.ndarray, g: np.ndarray, dirty: np.ndarray,
              totals: list[float]) -> tuple[np.ndarray, list[float]] | None:
        """One sweep, ``up`` in place: the published values after it and the measures' totals
        (None: no improving batch of swaps, the sweeps are over)."""
        pairs = self._improving_pairs(up, g, dirty)
        if pairs is None:
            return None
        pi, pj, delta = pairs
        win, g_new, new_totals = self._batch(g, pi, pj, delta, totals)
        if win is None:
            return None
        up[pi[win]] = False
        up[pj[win]] = True
        return g_new, new_totals

    def _improving_pairs(self, up: np.ndarray, g: np.ndarray,
                         dirty: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Pairs (raised i, best partner j in one of i's published cells) whose swap lowers the
        first measure (and, without caps, raises none of the others), with that change."""
        XR, b = self.XR, self.b
        # a pair can only have become improving if one of its cells changed; changes of
        # large cells (more than conflict_max candidates) are too small to count here
        active = (XR @ (dirty & self.conflict).astype(np.float64)) > 0
        if self._known is None or self._known.g is not g:
            self._known = _Levels.of(self.measures, g, b)
        dns, ups_ = self._known.dn, self._known.up
        sup = XR @ ups_[0]
        sel = up[self.rows_nz]
        ri, ci = self.rows_nz[sel], self.cols_nz[sel]
        # the PARTNERS best raisable partners of each cell: many raised cells share their best
        skip, pis, pjs = np.zeros(self.by_col.items.size, dtype=bool), [], []
        for _ in range(PARTNERS):
            partner = self._partners(up, sup, skip)
            pis.append(ri)
            pjs.append(partner[ci])
        pi, pj = np.concatenate(pis), np.concatenate(pjs)
        keep = pj >= 0
        keep[keep] = active[pi[keep]] | active[pj[keep]]
        if not keep.any():
            return None
        pi, pj = pi[keep], pj[keep]  # a pair may repeat; the selection below keeps one
        shared = XR[pi].multiply(XR[pj]).tocsr()
        delta = (XR @ dns[0])[pi] + sup[pj] - shared @ (dns[0] + ups_[0])
        good = delta < -1e-12
        if self.caps is None:
            for dn_k, up_k in zip(dns[1:], ups_[1:]):  # per-row sums gathered (not rows gathered, then summed)
                d_k = (XR @ dn_k)[pi] + (XR @ up_k)[pj] - shared @ (dn_k + up_k)
                good &= d_k <= 1e-12
        if not good.any():
            return None
        order = np.flatnonzero(good)
        order = order[np.argsort(pi[order], kind="stable")]  # by raised cell, as the selection needs
        return pi[order], pj[order], delta[order]

    def _partners(self, up: np.ndarray, sup: np.ndarray, skip: np.ndarray | None = None) -> np.ndarray:
        """The best raisable partner in each published cell (smallest ``sup``; ties: last in
        order); −1 where none. With ``skip`` (a boolean per entry of ``by_col``) those entries
        do not count, and the chosen ones are added to it: the next call gives the next best."""
        by_col = self.by_col
        sv = np.where(up, np.inf, sup)[by_col.items]
        if skip is not None:
            sv[skip] = np.inf
        cmin = np.minimum.reduceat(sv, by_col.starts)
        at = np.flatnonzero(sv == np.repeat(cmin, by_col.lengths))
        # items ascend within a cell: the last of the best is the largest
        grp = by_col.group[at]
        last = at[np.r_[grp[1:] != grp[:-1], True]] if at.size else at
        best = np.full(cmin.size, -1, dtype=np.int64)
        best[by_col.group[last]] = by_col.items[last]
        if skip is not None:
            skip[last] = True
        best[~np.isfinite(cmin)] = -1  # every candidate of the cell is raised
        partner = np.full(self.XR.shape[1], -1, dtype=np.int64)
        partner[self.cells] = best
        return partner

    def _batch(self, g: np.ndarray, pi: np.ndarray, pj: np.ndarray, delta: np.ndarray,
               totals: list[float]) -> tuple[np.ndarray | None, np.ndarray, list[float]]:
        """The swaps done at once: the best among pairs sharing a guarded published cell or a
        candidate, halved while interactions through large cells spoil the batch (None: none)."""
        XR, m = self.XR, self.XR.shape[1]
        sel, rank = _matching(pi, pj, delta, self.tie)
        P = sel.size
        # a swap changes the cells of i or j but not of both (there down and up cancel): two swaps
        # interact only through such cells, so only they are keys of the selection
        Xi, Xj = XR[pi[sel]], XR[pj[sel]]
        Xi.data[:], Xj.data[:] = 1, 1
        D = (Xi - Xj).tocoo()
        on = (D.data != 0) & self.conflict[D.col]
        items = np.concatenate([D.row[on], np.arange(P), np.arange(P)])
        keys = np.concatenate([D.col[on], m + pi[sel], m + pj[sel]])
        levels = self._known
        assert levels is not None  # set for g by _improving_pairs
        # first every best pair at once (no two share a candidate), kept while the combined
        # change of each swap is negative; only if that batch fails, the independent set
        win, done = _combined(XR, g, self.b, D, pi[sel], pj[sel], rank, self.measures, totals, levels)
        if win is not None:
            g_new, new_totals, ok, per_cell, ch = done
            self._known = levels.moved(self.measures, g_new, self.b, per_cell, ch)
            return sel[win], g_new, new_totals
        win = np.flatnonzero(_Incidence(items, keys, P).independent(rank, np.ones(P, dtype=bool)))
        g_new, new_totals, ok, per_cell, ch = _batch(XR, g, self.b, pi[sel[win]], pj[sel[win]], self.measures, totals,
                                                     levels)
        while not ok and win.size > 1:
            # interactions through large cells spoilt the batch: keep its better half
            win = win[np.argsort(rank[win])[: win.size // 2]]
            g_new, new_totals, ok, per_cell, ch = _batch(XR, g, self.b, pi[sel[win]], pj[sel[win]], self.measures,
                                                         totals, levels)
        self._known = levels.moved(self.measures, g_new, self.b, per_cell, ch) if ok else None
        return (sel[win] if ok else None), g_new, new_totals


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
    g = xty(Xr, yr)[cols]
    f = z[cols].astype(np.float64)
    sf = np.sqrt(f)
    big = 1e9 * (1.0 + f.sum())

    def small(gg: np.ndarray) -> np.ndarray:
        return big * ((gg > 0) & (gg < iM) & (gg % b != 0))

    def l1(gg: np.ndarray, at: np.ndarray | None = None) -> np.ndarray:
        return np.abs((f if at is None else f[at]) - gg) + small(gg)

    def hd(gg: np.ndarray, at: np.ndarray | None = None) -> np.ndarray:
        return ((sf if at is None else sf[at]) - np.sqrt(np.maximum(gg, 0))) ** 2 + small(gg)

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
    # (no early stop by polish_tol: a published cell left small adds a huge penalty to both
    # measures, against which every gain would look too small to go on)
    up2, g2 = _swaps(XRl, up, g, b, [l1, hd], conflict, tie[R], sweeps, rows_nz, cols_nz, by_col)
    up2, _ = _swaps(XRl, up2, g2, b, [l1, hd], conflict, tie[R], sweeps, rows_nz, cols_nz, by_col, caps=[hd0])
    out = yr.copy()
    out[R] = low + b * up2
    return out
