"""The reduced columns of the Gaussian-elimination suppression (Langsrud 2024's algorithm, as
described in :mod:`protab.suppression.gauss`, "Pivot rows and storage"): flat sorted segments,
dense long columns and a log-structured index of the columns of every row."""

from __future__ import annotations

import numpy as np
from scipy import sparse

_REDUCE_AT = 2**30  # divide a column by its content when an entry passes this


class _Columns:
    """The reduced columns, stored in flat arrays, with an index of the columns of every row.

    Column ``c`` occupies ``idx/val[start[c] : start[c] + seg[c]]`` (rows ascending); entries
    that became zero stay there as invalid slots (``valid`` False) until the column is
    rewritten, and ``length[c]`` counts the valid ones. An elimination step updates the entries
    of the pivot rows in place and rewrites (appends at the end of the arrays) only the columns
    that gain entries (fill-in); the arrays are compacted when full.

    The row index (:meth:`row`) holds (row, column) pairs, not positions, so moving a column
    does not touch it: only fill-in adds pairs. Pairs whose entry became zero stay until the
    index is rebuilt; :meth:`row` checks every pair against the column. The pairs are kept
    log-structured: sorted runs, the last two merged while the older is not more than
    ``_MERGE`` times the newer, and a small unsorted buffer of recent pairs."""

    _PENDING = 8192  # pairs held unsorted before they become a run
    _MERGE = 2

    _DENSE = 16  # a column with more than 1/_DENSE of the rows non-zero is kept as a dense vector
    _FIND_SCAN = 16384  # row lookups scan segments up to this total size, else binary search

    def __init__(self, W: sparse.csc_matrix, dense: bool = True) -> None:
        n = W.data.size
        cap = max(16, 2 * n)
        self.shape = W.shape
        self.idx = np.zeros(cap, dtype=np.int64)
        self.val = np.zeros(cap, dtype=np.int64)
        self.owner = np.full(cap, -1, dtype=np.int64)
        self.valid = np.zeros(cap, dtype=bool)
        self.idx[:n] = W.indices
        self.val[:n] = W.data
        lens = np.diff(W.indptr).astype(np.int64)
        self.owner[:n] = np.repeat(np.arange(W.shape[1]), lens)
        self.valid[:n] = True
        self.start = W.indptr[:-1].astype(np.int64)
        self.seg = lens.copy()
        self.length = lens
        self.vmax = np.zeros(W.shape[1])  # a bound on the absolute entries of each column
        if n:
            has = lens > 0
            self.vmax[has] = np.maximum.reduceat(np.abs(W.data).astype(float), W.indptr[:-1][has])
        self.count = np.bincount(W.indices, minlength=W.shape[0]).astype(np.int64)  # non-zeros per row
        self.home = np.arange(W.shape[1])  # a column moved by :meth:`move` lives on under another number
        self.end = n  # used part of the arrays
        self._index_rows()
        # dense columns: rows of D (slot[c] >= 0); their (row, column) pairs are not indexed
        self.dense_at = max(1, W.shape[0] // self._DENSE) if dense else np.iinfo(np.int64).max
        self.slot = np.full(W.shape[1], -1, dtype=np.int64)
        # int32: dense columns only hold entries below _REDUCE_AT (the in-place update keeps them there)
        self.D = np.zeros((0, W.shape[0]), dtype=np.int32)
        self.slot_col = np.zeros(0, dtype=np.int64)  # column of each slot (-1: free)
        big = np.flatnonzero((lens > self.dense_at) & (self.vmax < _REDUCE_AT))
        if big.size:
            pos, _ = self._segments(big)
            self._densify(big, self.idx[pos], self.val[pos], lens[big])

    # ------------------------------------------------------------------ row index

    def _index_rows(self) -> None:
        # every slot of a column's segment, zero ones included (they may come back in place)
        live, _ = self._segments(np.flatnonzero(self.seg > 0))
        rows = self.idx[live]
        order = np.argsort(rows, kind="stable")
        self._runs: list[tuple[np.ndarray, np.ndarray]] = [(rows[order], self.owner[live][order])]
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending_n = 0
        self._pairs = live.size  # pairs in the index (some may be stale)

    def _add_pairs(self, rows: np.ndarray, cols: np.ndarray) -> None:
        if not rows.size:
            return
        self._pending.append((rows, cols))
        self._pending_n += rows.size
        self._pairs += rows.size
        if self._pending_n <= self._PENDING:
            return
        rows = np.concatenate([r for r, _ in self._pending])
        cols = np.concatenate([c for _, c in self._pending])
        self._pending, self._pending_n = [], 0
        if self._pairs > 3 * int(self.seg.sum()) + 4 * self._PENDING:
            self._index_rows()  # drop stale pairs
            return
        order = np.argsort(rows, kind="stable")
        self._runs.append((rows[order], cols[order]))
        while len(self._runs) > 1 and self._runs[-2][0].size <= self._MERGE * self._runs[-1][0].size:
            (r1, c1), (r2, c2) = self._runs[-2], self._runs[-1]
            at2 = np.searchsorted(r1, r2, side="right") + np.arange(r2.size)
            from2 = np.zeros(r1.size + r2.size, dtype=bool)
            from2[at2] = True
            rows, cols = np.empty(from2.size, dtype=np.int64), np.empty(from2.size, dtype=np.int64)
            rows[at2], cols[at2] = r2, c2
            rows[~from2], cols[~from2] = r1, c1
            self._runs[-2:] = [(rows, cols)]

    def _find(self, cols: np.ndarray, p: int) -> np.ndarray:
        """Position of row p in each of ``cols`` (-1 where absent): one search over the segments
        when they are short, else a binary search per segment."""
        if int(self.seg[cols].sum()) <= self._FIND_SCAN:
            pos, seg = self._segments(cols)
            local = np.arange(cols.size, dtype=np.int64)
            key = np.repeat(local * self.shape[0], seg) + self.idx[pos]
            at = np.searchsorted(key, local * self.shape[0] + p)
            found = at < key.size
            found[found] = key[at[found]] == (local * self.shape[0] + p)[found]
            return np.where(found, pos[np.minimum(at, max(key.size - 1, 0))] if key.size else -1, -1)
        lo = self.start[cols].copy()
        end = lo + self.seg[cols]
        hi = end.copy()
        top = self.idx.size - 1
        while True:
            active = lo < hi
            if not active.any():
                break
            mid = np.minimum((lo + hi) // 2, top)
            less = self.idx[mid] < p
            lo = np.where(active & less, mid + 1, lo)
            hi = np.where(active & ~less, mid, hi)
        found = lo < end
        found[found] = self.idx[lo[found]] == p
        return np.where(found, lo, -1)

    def row(self, p: int) -> tuple[np.ndarray, np.ndarray]:
        """Columns with a non-zero in row p (ascending) and their entries there."""
        parts = []
        for rows, cols in self._runs:
            lo, hi = np.searchsorted(rows, (p, p + 1))
            if hi > lo:
                parts.append(cols[lo:hi])
        if len(self._pending) > 1:
            self._pending = [(np.concatenate([r for r, _ in self._pending]),
                              np.concatenate([c for _, c in self._pending]))]
        if self._pending:
            rows, cols = self._pending[0]
            parts.append(cols[rows == p])
        if parts:
            cols = np.unique(self.home[np.unique(np.concatenate(parts))])
            cols = cols[(self.length[cols] > 0) & (self.slot[cols] < 0)]
            pos = self._find(cols, p)
            ok = pos >= 0
            ok[ok] = self.valid[pos[ok]]
            cols, vals = cols[ok], self.val[pos[ok]]
        else:
            cols, vals = np.zeros(0, dtype=np.int64), self.val[:0]
        if self.D.shape[0]:
            d = self.D[:, p]
            hit = np.flatnonzero(d)
            if hit.size:
                cols = np.concatenate((cols, self.slot_col[hit]))
                vals = np.concatenate((vals, d[hit].astype(self.val.dtype)))
                order = np.argsort(cols)
                cols, vals = cols[order], vals[order]
        return cols, vals

    # ------------------------------------------------------------------ columns

    def column(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        if self.slot[c] >= 0:
            v = self.D[self.slot[c]]
            r = np.flatnonzero(v)
            return r, v[r].astype(self.val.dtype)
        s = self.start[c]
        e = s + self.seg[c]
        if self.seg[c] == self.length[c]:
            return self.idx[s:e], self.val[s:e]
        v = self.valid[s:e]
        return self.idx[s:e][v], self.val[s:e][v]

    def _segments(self, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions of the segments of ``cols`` (concatenated, invalid slots included) and their sizes."""
        seg = self.seg[cols]
        first = np.repeat(self.start[cols] - np.concatenate(([0], np.cumsum(seg)[:-1])), seg)
        return first + np.arange(first.size), seg

    def gather(self, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions of the non-zero entries of ``cols`` (concatenated) and the number of each."""
        self._sparsify(cols[self.slot[cols] >= 0])
        pos, _ = self._segments(cols)
        return pos[self.valid[pos]], self.length[cols]

    def drop(self, c: int) -> None:
        if self.slot[c] >= 0:
            k = self.slot[c]
            np.subtract.at(self.count, np.flatnonzero(self.D[k]), 1)
            self.D[k] = 0
            self.slot_col[k] = -1
            self.slot[c] = -1
            self.length[c] = 0
            return
        s = self.start[c]
        e = s + self.seg[c]
        np.subtract.at(self.count, self.idx[s:e][self.valid[s:e]], 1)
        self.valid[s:e] = False
        self.length[c] = self.seg[c] = 0

    def to_float(self) -> None:
        self.val = self.val.astype(float)
        self.D = self.D.astype(float)

    def nonempty(self) -> np.ndarray:
        return self.length > 0

    def move(self, j: int, k: int) -> None:
        """Column j becomes column k (an empty slot)."""
        s = self.start[j]
        self.owner[s : s + self.seg[j]] = k
        self.start[k], self.seg[k], self.length[k], self.vmax[k] = s, self.seg[j], self.length[j], self.vmax[j]
        self.length[j] = self.seg[j] = 0
        self.home[j] = k
        if self.slot[j] >= 0:
            self.slot[k], self.slot[j] = self.slot[j], -1
            self.slot_col[self.slot[k]] = k

    def replace(self, cols: np.ndarray, rows: np.ndarray, vals: np.ndarray, counts: np.ndarray,
                new: np.ndarray | None = None, recount: bool = True) -> None:
        """Give columns ``cols`` the entries ``rows, vals`` (grouped by column, ``counts`` each,
        rows ascending); ``new`` marks the entries whose (row, column) may not be indexed yet
        (default: all); ``recount=False``: the row counts are already up to date."""
        old, _ = self._segments(cols)
        if recount:
            np.subtract.at(self.count, self.idx[old][self.valid[old]], 1)
            np.add.at(self.count, rows, 1)
        self.valid[old] = False
        self.length[cols] = self.seg[cols] = 0
        k = rows.size
        if self.end + k > self.idx.size:
            self._compact(extra=k)
            new = None  # the rebuilt index lacks these columns
        e = self.end
        owners = np.repeat(cols, counts)
        self.idx[e : e + k] = rows
        self.val[e : e + k] = vals
        self.owner[e : e + k] = owners
        self.valid[e : e + k] = True
        self.start[cols] = e + np.concatenate(([0], np.cumsum(counts)[:-1]))
        self.seg[cols] = self.length[cols] = counts
        has = counts > 0
        if k:
            self.vmax[cols[has]] = np.maximum.reduceat(np.abs(vals).astype(float), (self.start[cols] - e)[has])
        self.end = e + k
        if new is None:
            self._add_pairs(rows, owners)
        else:
            self._add_pairs(rows[new], owners[new])

    def _compact(self, extra: int) -> None:
        keep = np.flatnonzero(self.valid[: self.end])
        n = keep.size
        cap = max(self.idx.size, 3 * (n + extra))
        for name in ("idx", "val", "owner"):
            arr = getattr(self, name)
            out = np.zeros(cap, dtype=arr.dtype)
            out[:n] = arr[keep]
            setattr(self, name, out)
        self.valid = np.zeros(cap, dtype=bool)
        self.valid[:n] = True
        self.end = n
        # every column's non-zero entries are now one run of positions
        self.seg[:] = 0
        if n:
            owner = self.owner[:n]
            first = np.flatnonzero(np.concatenate(([True], owner[1:] != owner[:-1])))
            cols = owner[first]
            self.start[cols] = first
            self.seg[cols] = np.diff(np.append(first, n))
        self._index_rows()

    def _densify(self, cols: np.ndarray, rows: np.ndarray, vals: np.ndarray, counts: np.ndarray) -> None:
        """Give sparse (or empty) columns ``cols`` the entries ``rows, vals`` as dense vectors."""
        old, _ = self._segments(cols)
        self.valid[old] = False
        self.seg[cols] = 0
        free = np.flatnonzero(self.slot_col < 0)
        if free.size < cols.size:
            grow = max(cols.size - free.size, self.D.shape[0] // 2, 4)
            D = np.zeros((self.D.shape[0] + grow, self.shape[0]), dtype=self.D.dtype)
            D[: self.D.shape[0]] = self.D
            self.D = D
            self.slot_col = np.concatenate((self.slot_col, np.full(grow, -1, dtype=np.int64)))
            free = np.flatnonzero(self.slot_col < 0)
        slots = free[: cols.size]
        self.slot[cols] = slots
        self.slot_col[slots] = cols
        self.D[np.repeat(slots, counts), rows] = vals
        self.length[cols] = counts
        has = counts > 0
        if rows.size:
            starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
            self.vmax[cols[has]] = np.maximum.reduceat(np.abs(vals).astype(float), starts[has])

    def _sparsify(self, cols: np.ndarray) -> None:
        """Dense columns ``cols`` back into the flat arrays."""
        if not cols.size:
            return
        slots = self.slot[cols]
        nz = self.D[slots] != 0
        r = np.nonzero(nz)
        rows, vals = r[1].astype(np.int64), self.D[slots][nz].astype(self.val.dtype)
        self.D[slots] = 0
        self.slot_col[slots] = -1
        self.slot[cols] = -1
        self.replace(cols, rows, vals, nz.sum(axis=1), recount=False)

    def _store(self, cols: np.ndarray, rows: np.ndarray, vals: np.ndarray, counts: np.ndarray,
               new: np.ndarray) -> None:
        """Rewrite columns ``cols`` (rows ascending, grouped, ``counts`` each; ``new`` = fill-in):
        long ones as dense vectors, the others in the flat arrays."""
        big = counts > self.dense_at
        if not big.any():
            self.replace(cols, rows, vals, counts, new=new, recount=False)
            return
        per = np.repeat(big, counts)
        self._densify(cols[big], rows[per], vals[per], counts[big])
        if (~big).any():
            self.replace(cols[~big], rows[~per], vals[~per], counts[~big], new=new[~per], recount=False)

    def update(self, rows: np.ndarray, vals: np.ndarray, cols: np.ndarray, f: np.ndarray) -> bool:
        """``c ← c − f_c·a`` for the pivot column ``a`` (``rows``, ``vals``): entries of the pivot
        rows are changed in place, columns with fill-in are rewritten. Returns False (nothing
        done) when entries could pass ``_REDUCE_AT``."""
        amax = float(np.abs(vals).max())
        if (self.vmax[cols] + np.abs(f).astype(float) * amax).max() >= _REDUCE_AT:
            return False
        dense = self.slot[cols] >= 0
        if dense.any():
            self._update_dense(rows, vals, cols[dense], f[dense])
            cols, f = cols[~dense], f[~dense]
            if not cols.size:
                return True
        self._update_sparse(rows, vals, cols, f)
        return True

    def _update_dense(self, rows: np.ndarray, vals: np.ndarray, dc: np.ndarray, df: np.ndarray) -> None:
        """The update of :meth:`update` on dense columns ``dc``: direct indexing."""
        sl = self.slot[dc]
        old = self.D[sl[:, None], rows[None, :]]
        new = old - df[:, None] * vals[None, :]
        self.D[sl[:, None], rows[None, :]] = new
        change = (new != 0).astype(np.int64) - (old != 0)
        self.count[rows] += change.sum(axis=0)
        self.length[dc] += change.sum(axis=1)
        self.vmax[dc] = np.maximum(self.vmax[dc], np.abs(new).max(axis=1))

    def _update_sparse(self, rows: np.ndarray, vals: np.ndarray, cols: np.ndarray, f: np.ndarray) -> None:
        """The update of :meth:`update` on sparse columns: entries in the pivot rows change in
        place; columns with fill-in (or mostly invalid slots) are rewritten."""
        m = self.shape[0]
        nc, k = cols.size, rows.size
        pos, seg = self._segments(cols)
        local = np.arange(nc, dtype=np.int64)
        key_old = np.repeat(local * m, seg) + self.idx[pos]
        key_new = (local[:, None] * m + rows[None, :]).ravel()
        delta = -(f[:, None] * vals[None, :]).ravel()
        at = np.searchsorted(key_old, key_new)
        hit = at < pos.size
        hit[hit] = key_old[at[hit]] == key_new[hit]
        hp = pos[at[hit]]
        was = self.valid[hp]
        new = np.where(was, self.val[hp], 0) + delta[hit]
        now = new != 0
        self.val[hp] = new
        self.valid[hp] = now
        result = delta.copy()
        result[hit] = new
        self.vmax[cols] = np.maximum(self.vmax[cols], np.abs(result).reshape(nc, k).max(axis=1))
        fill = ~hit
        change = np.zeros(nc * k, dtype=np.int64)
        change[hit] = now.astype(np.int64) - was
        change[fill] = 1
        self.count[rows] += change.reshape(nc, k).sum(axis=0)
        self.length[cols] += change.reshape(nc, k).sum(axis=1)
        redo = np.bincount(np.repeat(local, k)[fill], minlength=nc) > 0
        redo |= self.seg[cols] > 2 * self.length[cols] + 16
        if redo.any():
            old = redo[np.repeat(local, seg)] & self.valid[pos]
            fsel = fill & redo[np.repeat(local, k)]
            self._merge_fill(cols, redo, key_old[old], self.val[pos[old]], key_new[fsel], delta[fsel])

    def _merge_fill(self, cols: np.ndarray, redo: np.ndarray, old_key: np.ndarray, old_val: np.ndarray,
                    fill_key: np.ndarray, fill_val: np.ndarray) -> None:
        """Rewrite the columns ``cols[redo]``: their entries (keys ``column·m + row``, local column
        numbers) merged with the fill-in."""
        m = self.shape[0]
        at_fill = np.searchsorted(old_key, fill_key) + np.arange(fill_key.size)
        is_fill = np.zeros(old_key.size + fill_key.size, dtype=bool)
        is_fill[at_fill] = True
        key = np.empty(is_fill.size, dtype=np.int64)
        val = np.empty(is_fill.size, dtype=self.val.dtype)
        key[at_fill], val[at_fill] = fill_key, fill_val
        key[~is_fill], val[~is_fill] = old_key, old_val
        kcol = key // m
        counts = np.bincount(kcol, minlength=cols.size)[np.flatnonzero(redo)]
        self._store(cols[redo], key - kcol * m, val, counts, is_fill)
