"""The elimination of the Gaussian-elimination suppression (Langsrud 2024; the algorithm of
:mod:`protab.suppression.gauss`): the candidates are visited once, in order, over reduced
columns; each is published (its pivot row cleared from the other columns) or suppressed."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from protab.errors import SpecError, show_values
from protab.suppression._reduced_columns import _REDUCE_AT, _Columns

_INT_LIMIT = 2**62  # switch to float beyond this bound on new entries


def _pivot(W: _Columns, rows: np.ndarray, n_plain: int) -> int:
    """Index in ``rows`` of the pivot: the non-singleton row (``< n_plain``) that is in the fewest
    columns (Markowitz's choice for a given pivot column); singleton rows only in their order.

    The decisions do not depend on which non-singleton row is chosen: a candidate's reduced
    column has no non-singleton entry exactly when its non-singleton part lies in that of the
    published span, and "publishing c makes b derivable" is ``b − λc ∈ span``; both are
    properties of the span, not of the pivots, while singleton rows keep the package's order."""
    n_n = int(np.searchsorted(rows, n_plain))
    if n_n <= 1:
        return 0
    return int(np.argmin(W.count[rows[:n_n]]))


def _covers_primary(W: _Columns, rows: np.ndarray, is_B: np.ndarray) -> bool:
    """Whether some non-empty primary column lies within ``rows``."""
    pos = np.flatnonzero(np.isin(W.idx[: W.end], rows) & W.valid[: W.end])
    owner = W.owner[pos]
    owner = owner[is_B[owner]]
    if not owner.size:
        return False
    cnt = np.bincount(owner, minlength=is_B.size)
    hit = np.flatnonzero(cnt)
    return bool(np.any(cnt[hit] == W.length[hit]))


def _forget_rows(W: _Columns, rows: np.ndarray, j: int) -> None:
    """Remove ``rows`` from every column after j (their values are known)."""
    pos = np.flatnonzero(np.isin(W.idx[: W.end], rows) & W.valid[: W.end])
    cols = np.unique(W.owner[pos])
    cols = cols[cols > j]
    if not cols.size:
        return
    gpos, lens = W.gather(cols)
    keep = ~np.isin(W.idx[gpos], rows)
    counts = np.bincount(np.repeat(np.arange(cols.size), lens)[keep], minlength=cols.size)
    W.replace(cols, W.idx[gpos][keep], W.val[gpos][keep], counts, new=np.zeros(int(keep.sum()), dtype=bool))


def _eliminate(
    W: _Columns,
    rows: np.ndarray,
    vals: np.ndarray,
    cols: np.ndarray,
    cp: np.ndarray,
    exact: bool,
    tol: float,
    piv: int = 0,
) -> bool:
    """Clear pivot row rows[piv] from columns ``cols`` (entries ``cp`` there) using the pivot
    column (``rows``, ``vals``). Where the pivot divides every ``c_p`` (always for ±1 pivots)
    ``c ← c − (c_p/α)·a``, updating only the pivot rows; otherwise fraction free,
    ``c ← (α/g)·c − (c_p/g)·a`` with ``g = gcd(α, c_p)``. Returns whether still exact."""
    alpha = vals[piv]
    if exact and not (cp % alpha).any() and W.update(rows, vals, cols, cp // alpha):
        return True
    pos, lens = W.gather(cols)
    v1, v2, exact = _combination_terms(W, W.val[pos], lens, vals, cp, alpha, exact)
    m = W.shape[0]
    k = np.arange(cols.size)
    key = np.concatenate((np.repeat(k, lens) * m + W.idx[pos], np.repeat(k, rows.size) * m + np.tile(rows, cols.size)))
    val = np.concatenate((v1, v2))
    srt = np.argsort(key, kind="stable")
    key, val = key[srt], val[srt]
    first = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    key = key[first]
    val = np.add.reduceat(val, first)
    kcol = key // m
    key, val, kcol, counts = _drop_zeros(key, val, kcol, cols.size, exact, tol)
    W.replace(cols, key - kcol * m, val, counts)
    return exact


def _combination_terms(W: _Columns, old: np.ndarray, lens: np.ndarray, vals: np.ndarray, cp: np.ndarray,
                       alpha: int, exact: bool) -> tuple[np.ndarray, np.ndarray, bool]:
    """The two terms of the new columns, ``(α/g)·c`` (``old``, ``lens`` entries per column) and
    ``−(c_p/g)·a``; in float (``W`` switched over) when the integers could pass ``_INT_LIMIT``."""
    if exact:
        g = np.gcd(cp, alpha)
        s = alpha // g
        t = cp // g
        starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
        colmax = np.maximum.reduceat(np.abs(old), starts)
        bound = np.abs(s).astype(float) * colmax + np.abs(t).astype(float) * float(np.abs(vals).max())
        if bound.max() >= _INT_LIMIT:
            W.to_float()
            old = old.astype(float)
            exact = False
    if exact:
        return old * np.repeat(s, lens), -np.outer(t, vals).ravel(), exact
    return old, -np.outer(cp / float(alpha), vals.astype(float)).ravel(), exact


def _drop_zeros(key: np.ndarray, val: np.ndarray, kcol: np.ndarray, ncols: int, exact: bool,
                tol: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The non-zero entries of the new columns (in float: relative to each column's largest) and
    their number per column; exact columns with large entries divided by their gcd."""
    if not exact:
        ref = np.zeros(ncols)
        np.maximum.at(ref, kcol, np.abs(val))
        val[np.abs(val) < tol * np.maximum(ref[kcol], 1.0)] = 0.0
    nz = val != 0
    key, val, kcol = key[nz], val[nz], kcol[nz]
    counts = np.bincount(kcol, minlength=ncols)
    if exact and val.size and np.abs(val).max() > _REDUCE_AT:
        has = counts > 0
        starts_new = np.concatenate(([0], np.cumsum(counts)[:-1]))
        gg = np.ones(ncols, dtype=np.int64)
        gg[has] = np.gcd.reduceat(np.abs(val), starts_new[has])
        val = val // np.repeat(gg, counts)
    return key, val, kcol, counts


def _greedy_elimination(W0: sparse.csc_matrix, sing: np.ndarray, order: np.ndarray, protect: np.ndarray,
                        extra: sparse.csc_matrix | None, method: str, n_never: int,
                        tol: float) -> tuple[np.ndarray, bool]:
    """Visit the candidates ``order`` (the first ``n_never`` published whatever they reveal)
    against the cells to protect and the virtual primary cells ``extra``; returns which
    candidates are secondary suppressions and whether the elimination stayed exact."""
    B_cols = np.flatnonzero(protect)
    any_sum = bool(sing.any())
    if any_sum:
        row_order = np.argsort(sing, kind="stable")  # non-singleton rows first
        n_plain = int((~sing).sum())
        if n_never == 0 and method == "anySum":
            plain_sum = np.asarray(W0[~sing, :][:, B_cols].sum(axis=0)).ravel()
            B_cols = B_cols[plain_sum != 0]
    else:
        row_order = np.arange(W0.shape[0])
        n_plain = W0.shape[0]
    blocks = [W0[:, order], W0[:, B_cols]]
    if extra is not None:
        blocks.append(extra)
    W1 = sparse.csc_matrix(sparse.hstack(blocks, format="csc")[row_order, :], dtype=np.int64)
    W1.sort_indices()
    not_primary = method == "anySumNOTprimary"
    W = _Columns(W1, dense=not not_primary)  # _covers_primary, _forget_rows read the flat arrays
    run = _Greedy(W, order.size, n_never, n_plain, B_cols, any_sum, not_primary, tol)
    run.run()
    return run.secondary, run.exact


class _Greedy:
    """The greedy visit of the candidates (columns ``0 … nA−1`` of ``W``; the columns after them
    are the cells to protect, real then virtual): each is published unless that would make a
    primary cell derivable, or, with singletons, reveal a sum of singleton cells."""

    def __init__(self, W: _Columns, nA: int, n_never: int, n_plain: int, B_cols: np.ndarray, any_sum: bool,
                 not_primary: bool, tol: float) -> None:
        self.W, self.nA, self.n_never, self.n_plain = W, nA, n_never, n_plain
        self.B_cols, self.any_sum, self.not_primary, self.tol = B_cols, any_sum, not_primary, tol
        self.is_B = np.zeros(W.shape[1], dtype=bool)
        self.is_B[nA:] = True
        self.B_start_nonempty = W.nonempty()[nA:]
        self.sub_used = np.zeros(W.shape[0], dtype=bool)  # singleton rows of a published difference
        self.secondary = np.zeros(nA, dtype=bool)
        self.exact = True

    def run(self) -> None:
        """Every candidate in order; the primary cells checked after the never-suppressed ones."""
        for j in range(self.nA):
            if j == self.n_never and self.n_never:
                self._check_never()
            self._step(j)
        if self.n_never and self.n_never == self.nA:
            self._check_never()

    def _step(self, j: int) -> None:
        """Decide candidate j; publishing it clears its pivot row from every later column."""
        W = self.W
        rows, vals = W.column(j)
        if not rows.size:
            return  # determined by what is published already
        rows, vals = rows.copy(), vals.copy()
        # pivot: among the non-singleton rows, the one in the fewest columns (least fill-in);
        # which one does not change any decision (see _pivot)
        piv = _pivot(W, rows, self.n_plain)
        p = int(rows[piv])
        cols, cp = W.row(p)
        keep = cols > j
        cols, cp = cols[keep], cp[keep]
        verdict = self._verdict(j, rows, vals, vals[piv], p, cols, cp) if j >= self.n_never else "publish"
        W.drop(j)
        if verdict == "secondary":
            self.secondary[j] = True
        elif verdict == "publish" and cols.size:
            self.exact = _eliminate(W, rows, vals, cols, cp, self.exact, self.tol, piv)

    def _verdict(self, j: int, rows: np.ndarray, vals: np.ndarray, alpha: int, p: int, cols: np.ndarray,
                 cp: np.ndarray) -> str:
        """The verdict on a candidate: "secondary", "known" (a published sum of singletons: its
        rows are known from now on) or "publish"."""
        if self.any_sum and p >= self.n_plain:
            rule = self._singleton_rule(j, rows, vals)
            if rule is not None:
                return rule
        return "secondary" if self._clears_primary(rows, vals, alpha, cols, cp) else "publish"

    def _singleton_rule(self, j: int, rows: np.ndarray, vals: np.ndarray) -> str | None:
        """A candidate on singleton rows only: suppressed, except a first difference on its rows
        (None: go on to the primary test) or, anySumNOTprimary, a sum covering no primary cell."""
        if (vals > 0).any() and (vals < 0).any() and not self.sub_used[rows].any():
            self.sub_used[rows] = True
            return None
        if self.not_primary and not _covers_primary(self.W, rows, self.is_B):
            # a sum of singleton cells published: those cells count as known from now on
            _forget_rows(self.W, rows, j)
            return "known"
        return "secondary"

    def _clears_primary(self, rows: np.ndarray, vals: np.ndarray, alpha: int, cols: np.ndarray,
                        cp: np.ndarray) -> bool:
        """Whether a primary column in the pivot row equals this one up to a factor (publishing
        this one would clear it: the primary cell would be derivable)."""
        W = self.W
        bsel = self.is_B[cols]
        if not bsel.any():
            return False
        bcols, bcp = cols[bsel], cp[bsel]
        lens = W.length[bcols]
        for c, f in zip(bcols[lens == rows.size], bcp[lens == rows.size]):
            crow, cval = W.column(int(c))
            if not np.array_equal(crow, rows):
                continue
            if self.exact:
                if np.array_equal(cval * alpha, vals * f):
                    return True
            elif np.allclose(cval, vals * (f / alpha), rtol=self.tol, atol=self.tol * np.abs(cval).max()):
                return True
        return False

    def _check_never(self) -> None:
        """After the never-suppressed cells are published: every primary cell must still be hidden."""
        nB = self.B_cols.size  # real primary cells (the virtual ones follow)
        lost = self.B_start_nonempty & ~self.W.nonempty()[self.nA:]
        lost_real = np.flatnonzero(lost[:nB])
        if lost_real.size:
            raise SpecError(
                f"gauss: primary cells {show_values(self.B_cols[lost_real].tolist())} cannot be protected: they are "
                "derivable from the cells marked never-suppress alone"
            )
        if lost[nB:].any():
            raise SpecError(
                "gauss: the never-suppressed cells reveal a sum of singleton inner cells (a single contributor can "
                "derive another's value); unmark some never cells"
            )
