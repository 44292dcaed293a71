"""The ``numttHTT`` singleton method of the Gaussian-elimination suppression (Langsrud 2024;
GaussSuppression's default for magnitude tables, described in :mod:`protab.suppression.gauss`):
virtual primary cells "t" and "H", and two eliminations ("T") with the singleton rows in two
orders, each candidate tested for what it would reveal to a single contributor."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from protab.errors import SpecError
from protab.suppression._elimination import _eliminate
from protab.suppression._reduced_columns import _Columns
from protab.suppression._singletons import _column_groups, _keys, _unique_columns


def _gauss_numtthtt(W0: sparse.csc_matrix, order: np.ndarray, n_never: int, protect: np.ndarray,
                    sing: np.ndarray, codes: np.ndarray | None, tol: float) -> np.ndarray:
    """numttHTT; returns the suppressed mask over the published cells. ``codes``: contributor
    codes of the singleton rows (None: every singleton row is its own contributor)."""
    integer = codes is not None
    codes = np.where(sing, codes, 0) if codes is not None else sing.astype(np.int64)
    if sing.any():
        W0, codes = _drop_repeated_singletons(W0, codes, integer)
    sing = codes > 0
    if not integer:
        codes = np.zeros(W0.shape[0], dtype=np.int64)
        codes[sing] = np.arange(1, int(sing.sum()) + 1)
    cells = _DistinctCells(W0, order, n_never, protect)
    blocks, n_real, n_units = _numtthtt_blocks(cells.W, codes, cells.protect, cells.cand, integer)
    nA = cells.cand.size
    # rows: the others first, then singletons by how many rows their contributor has, then code
    m = W0.shape[0]
    freq_code = np.bincount(codes)[codes] * sing
    row_order = np.lexsort((np.arange(m), codes, freq_code))
    Wall = sparse.csc_matrix(sparse.hstack(blocks, format="csc")[row_order, :], dtype=np.int64)
    nB0 = Wall.shape[1] - nA
    Wall = sparse.hstack([Wall, sparse.csc_matrix((m, nA), dtype=np.int64)], format="csc")  # room for new B
    Wall = sparse.csc_matrix(Wall, dtype=np.int64)
    Wall.sort_indices()
    run = _TwoEliminations(Wall, codes[row_order], nA, nB0, nA + n_real + n_units, n_real, integer, tol)
    secondary = run.run(cells.n_never)
    return cells.suppressed(order, secondary)


def _drop_repeated_singletons(W0: sparse.csc_matrix, codes: np.ndarray,
                              integer: bool) -> tuple[sparse.csc_matrix, np.ndarray]:
    """Singleton rows of one contributor repeated: one kept; singleton rows repeated more than
    twice are not singleton problems: one of them is kept, unmarked (as the package does); pairs
    are kept as they are."""
    srows = np.flatnonzero(codes > 0)
    keys = _keys(sparse.csc_matrix(W0.T)[:, srows])
    drop = np.zeros(W0.shape[0], dtype=bool)
    if integer:  # the same contributor in identical rows: one row is enough
        seen: set[tuple[bytes, int]] = set()
        for r, key in zip(srows, keys):
            if (key, int(codes[r])) in seen:
                drop[r] = True
            seen.add((key, int(codes[r])))
    groups: dict[bytes, list[int]] = {}
    for r, key in zip(srows, keys):
        if not drop[r]:
            groups.setdefault(key, []).append(int(r))
    codes = codes.copy()
    for g in groups.values():
        if len(g) > 2:
            codes[g] = 0
            drop[g[1:]] = True
    if drop.any():
        return sparse.csc_matrix(W0[~drop, :]), codes[~drop]
    return W0, codes


class _DistinctCells:
    """The published cells with distinct columns (equal columns are one cell here): the matrix
    ``W``, the cells to ``protect``, the candidates ``cand`` in order (the ``n_never`` first
    published whatever they reveal)."""

    def __init__(self, W0: sparse.csc_matrix, order: np.ndarray, n_never: int, protect: np.ndarray) -> None:
        n = W0.shape[1]
        rep = _column_groups(W0)
        reps = np.flatnonzero(rep == np.arange(n))
        new_id = np.full(n, -1)
        new_id[reps] = np.arange(reps.size)
        self.of = new_id[rep]  # the distinct cell of every published cell
        self.W = W0[:, reps]
        self.protect = np.zeros(reps.size, dtype=bool)
        self.protect[self.of[protect]] = True
        cand = self.of[order]
        _, first = np.unique(cand, return_index=True)
        cand = cand[np.sort(first)]
        if n_never:
            nev_d = np.unique(self.of[order[:n_never]])
            if self.protect[nev_d].any():
                raise SpecError("gauss: a never-suppressed cell equals a primary cell (same inner cells); it cannot be published")
        self.cand = cand[~self.protect[cand]]
        self.n_never = int(np.isin(self.cand, self.of[order[:n_never]]).sum()) if n_never else 0

    def suppressed(self, order: np.ndarray, secondary: np.ndarray) -> np.ndarray:
        """The suppressed mask over the published cells from the secondary candidates."""
        sec_d = np.zeros(self.protect.size, dtype=bool)
        sec_d[self.cand[secondary]] = True
        sec_d |= self.protect
        suppressed = np.ones(self.of.size, dtype=bool)
        suppressed[order] = sec_d[self.of[order]]
        return suppressed


def _numtthtt_blocks(Wd: sparse.csc_matrix, codes: np.ndarray, prot_d: np.ndarray, cand: np.ndarray,
                     integer: bool) -> tuple[list[sparse.csc_matrix], int, int]:
    """The columns of the elimination: candidates, primary cells, the unit columns "t" and the
    pair cells "H" not equal to a primary cell already there; and the numbers of primary and
    unit columns."""
    units, pairs = _numtthtt_extra(Wd, codes, prot_d, integer)
    B_real = np.flatnonzero(prot_d)
    blocks = [Wd[:, cand], Wd[:, B_real], units]
    if pairs is not None:
        # pair cells equal to a primary cell already there are left out
        before = sparse.hstack([Wd[:, B_real], units], format="csc")
        have = set(_keys(before))
        keep = [k for k, key in enumerate(_keys(pairs)) if key not in have]
        if keep:
            blocks.append(pairs[:, keep])
    return blocks, B_real.size, units.shape[1]


class _TwoEliminations:
    """The elimination "T" of numttHTT, twice: over ``Wall`` (candidates ``0 … nA−1``, then the
    ``nB0`` cells to protect, the first ``n_rel_end − nA`` tested for single contributors, then
    room for candidates that become primary) with the singleton rows in order, and, from the
    first candidate on a singleton row, in reverse order too; a candidate is suppressed if
    either says so."""

    def __init__(self, Wall: sparse.csc_matrix, ids: np.ndarray, nA: int, nB0: int, n_rel_end: int, n_real: int,
                 integer: bool, tol: float) -> None:
        self.S1 = _Columns(Wall, dense=False)  # _reveals reads the flat arrays
        self.S2: _Columns | None = None
        self.ids1 = self.ids2 = ids
        self.nA, self.n_real, self.n_rel_end, self.integer, self.tol = nA, n_real, n_rel_end, integer, tol
        self.is_B = np.zeros(Wall.shape[1], dtype=bool)
        self.is_B[nA:nA + nB0] = True
        self.next_slot = nA + nB0
        self.own = _own_contributors(self.S1, ids, nA, n_rel_end)
        self.start_nonempty = self.S1.nonempty()[nA:nA + n_real]

    def run(self, n_never: int) -> np.ndarray:
        """Which candidates are secondary suppressions (the first ``n_never`` are published)."""
        secondary = np.zeros(self.nA, dtype=bool)
        for j in range(self.nA):
            if j == n_never and n_never:
                lost = self.start_nonempty & ~self.S1.nonempty()[self.nA:self.nA + self.n_real]
                if lost.any():
                    raise SpecError("gauss: primary cells cannot be protected: they are derivable from the cells "
                                    "marked never-suppress alone")
            secondary[j] = self._step(j, j >= n_never)
        return secondary

    def _step(self, j: int, test: bool) -> bool:
        """Decide candidate j (published without a test unless ``test``); True: suppressed."""
        r1, x1 = self.S1.column(j)
        if not r1.size:
            return False
        r1, x1 = r1.copy(), x1.copy()
        if self.S2 is None and self.ids1[r1[0]] > 0:
            self.S2, self.ids2 = _reversed_copy(self.S1, self.ids1, self.is_B.size)
        verdict = self._verdict(j, r1, x1) if test else 0
        runs = [S for S in (self.S1, self.S2) if S is not None]
        if verdict == 1:  # revealed to a single contributor: protected as a primary cell
            for S in runs:
                S.move(j, self.next_slot)
            self.is_B[self.next_slot] = True
            self.next_slot += 1
        elif verdict:
            for S in runs:
                S.drop(j)
        else:
            for S in runs:
                self._publish(S, j)
        return bool(verdict)

    def _verdict(self, j: int, r1: np.ndarray, x1: np.ndarray) -> int:
        """:func:`_reveals` in the first elimination, else in the second (also with its pivot
        moved to the next row)."""
        args = (self.is_B, self.n_rel_end, self.own, self.integer)
        verdict = _reveals(self.S1, self.ids1, r1, x1, *args)
        if not verdict and self.S2 is not None:
            r2, x2 = self.S2.column(j)
            r2, x2 = r2.copy(), x2.copy()
            verdict = _reveals(self.S2, self.ids2, r2, x2, *args)
            if not verdict and self.ids1[r2[0]] and r2.size > 1:
                verdict = _reveals(self.S2, self.ids2, np.roll(r2, -1), np.roll(x2, -1), *args)
        return verdict

    def _publish(self, S: _Columns, j: int) -> None:
        r, x = S.column(j)
        r, x = r.copy(), x.copy()
        cols, cp = S.row(int(r[0]))
        keep = cols != j
        S.drop(j)
        if keep.any():
            if not _eliminate(S, r, x, cols[keep], cp[keep], True, self.tol):
                raise NotImplementedError("gauss: numttHTT needs exact integer elimination; integers overflowed")


def _own_contributors(S: _Columns, ids: np.ndarray, nA: int, n_rel_end: int) -> np.ndarray:
    """Per column of ``S``, for the primary columns ``nA … n_rel_end−1``: the contributor of the
    column's first row when the signs of its sums per singleton contributor add up to 1 (the
    primary cell's own contributor, which may know it); 0 otherwise."""
    own = np.zeros(S.shape[1], dtype=np.int64)
    for i in np.arange(nA, n_rel_end):
        rB, xB = S.column(int(i))
        sb = ids[rB] > 0
        if rB.size and sb.any():
            u, inv = np.unique(ids[rB][sb], return_inverse=True)
            per = np.zeros(u.size, dtype=np.int64)
            np.add.at(per, inv, xB[sb])
            if int(np.sign(per).sum()) == 1:
                own[i] = ids[rB[0]]
    return own


def _find_diff_parents(x_child: sparse.csc_matrix, y: sparse.csc_matrix, ids: np.ndarray,
                       max_diff: int, integer: bool) -> np.ndarray:
    """Columns of ``y`` that equal some column of ``x_child`` plus the rows of one singleton.

    (The hierarchy search of numttHTT's "H": a published cell whose primary inner cells are
    those of a primary cell plus one singleton inner cell, or with contributor codes, plus
    cells of one contributor.)"""
    sing = ids > 0
    out = np.zeros(y.shape[1], dtype=bool)
    if not x_child.shape[1] or not y.shape[1]:
        return out
    xty = sparse.coo_matrix(x_child.T @ y)
    cs_x = np.asarray(x_child.sum(axis=0)).ravel()
    cs_y = np.asarray(y.sum(axis=0)).ravel()
    ok = (cs_x[xty.row] == xty.data) & (cs_y[xty.col] != xty.data) & (cs_y[xty.col] - xty.data <= max_diff)
    for child, parent in zip(xty.row[ok], xty.col[ok]):
        d = (y[:, parent] - x_child[:, child]).toarray().ravel()
        if np.any(d[~sing] != 0):
            continue
        if (d.sum() == 1 and np.abs(d).sum() == 1) or (integer and np.unique(ids[d != 0]).size == 1):
            out[parent] = True
    return out


def _numtthtt_extra(W0: sparse.csc_matrix, ids: np.ndarray, protect: np.ndarray, integer: bool):
    """Virtual primary cells of numttHTT ("t" and "H"): returns (unit columns, pair columns).

    ``ids``: the contributor of each singleton row (0 for other rows)."""
    m, n = W0.shape
    sing = ids > 0
    colsum = np.asarray(W0.sum(axis=0)).ravel()
    colabs = np.asarray(abs(W0).sum(axis=0)).ravel()
    single = (colsum == 1) & (colabs == 1)
    inner_primary = np.zeros(m, dtype=bool)
    pc = np.flatnonzero(single & protect)
    inner_primary[W0.indices[W0.indptr[pc]]] = True
    # "t": singletons not published as primary cells become primary (unit columns)
    lonely = np.flatnonzero(sing & ~inner_primary)
    units = sparse.csc_matrix((np.ones(lonely.size, dtype=np.int64), (lonely, np.arange(lonely.size))),
                              shape=(m, lonely.size))
    inner_primary[lonely] = True
    Xall = sparse.hstack([W0, units], format="csc")
    prim_all = np.concatenate([protect, np.ones(lonely.size, dtype=bool)])
    pZ = sparse.csc_matrix(sparse.diags(inner_primary.astype(np.int64), dtype=np.int64) @ Xall)
    pZ.eliminate_zeros()
    zero_cols = prim_all | (np.asarray((pZ < 0).sum(axis=0)).ravel() > 0)
    pZ = sparse.csc_matrix(pZ @ sparse.diags((~zero_cols).astype(np.int64), dtype=np.int64))
    pZ.eliminate_zeros()
    cs = np.asarray(pZ.sum(axis=0)).ravel()
    if integer:
        # contributors under the cell's primary inner cells (one singleton contributor counted once)
        who = np.where(sing, ids, -np.arange(1, m + 1))
        pZ.sort_indices()
        n_who = np.array([np.unique(who[pZ.indices[pZ.indptr[c]:pZ.indptr[c + 1]]]).size for c in range(pZ.shape[1])])
        more = n_who > 2
        requirement = ~more & (cs > 1)
        g2 = np.flatnonzero(more & (cs > 1))
        max_diff = int(np.bincount(ids[sing]).max()) if sing.any() else 1
    else:
        requirement = cs == 2
        g2 = np.flatnonzero(cs > 2)
        max_diff = 1
    if g2.size:
        pcols = np.flatnonzero(prim_all)
        pcols = pcols[np.asarray(Xall[:, pcols].sum(axis=0)).ravel() > 1]
        requirement[g2[_find_diff_parents(Xall[:, pcols], pZ[:, g2], ids, max_diff, integer)]] = True
    has_sing = np.asarray((sparse.diags(sing.astype(np.int64), dtype=np.int64) @ Xall).sum(axis=0)).ravel() > 0
    colz = np.flatnonzero(has_sing & requirement)
    pairs = _unique_columns(sparse.csc_matrix(pZ[:, colz], dtype=np.int64)) if colz.size else None
    return units, pairs


def _check_s(s_unique: np.ndarray, own: int) -> int:
    """numttHTT: a difference on the rows of one singleton (not the primary cell's own) reveals."""
    if s_unique.size > 1:
        return 0
    if s_unique.size == 0:
        return 2  # plainly proportional
    s = int(s_unique[0])
    if s == 0 or s == own:
        return 0
    return 1  # revealed to that singleton: the candidate also becomes a primary cell


def _reveals(W: _Columns, ids: np.ndarray, r: np.ndarray, x: np.ndarray, is_B: np.ndarray, n_rel_end: int,
             own: np.ndarray, integer: bool = False) -> int:
    """0: publishing (r, x) is safe; 2: it reveals a primary cell; 1: it reveals one to a
    single contributor (the candidate is then suppressed and protected as a primary cell).

    ``ids``: the contributor of each singleton row (0 for other rows); unless ``integer``, one
    per row."""
    s_all = np.unique(ids[r])
    if s_all.size <= 2 and s_all.min() > 0:
        return 1  # a combination of at most two singletons' cells
    # primary columns sharing rows with the candidate; with one contributor per singleton row
    # only those differing from it in at most one row (identical ones, for the columns without
    # the singleton check) can pass the tests below
    mask = np.zeros(W.shape[0], dtype=bool)
    mask[r] = True
    pos = np.flatnonzero(mask[W.idx[: W.end]] & W.valid[: W.end])
    owners = W.owner[pos]
    owners = owners[is_B[owners]]
    if not owners.size:
        return 0
    cnt = np.bincount(owners)
    cand = np.flatnonzero(cnt)
    common = cnt[cand]
    differ = (r.size - common) + (W.length[cand] - common)
    if integer:
        cand = cand[(differ == 0) | (cand < n_rel_end)]
    else:
        cand = cand[(differ == 0) | ((differ == 1) & (cand < n_rel_end))]
    for i in cand:
        rB, xB = W.column(int(i))
        relevant = i < n_rel_end
        if rB.size == r.size and np.array_equal(rB, r):
            verdict, xh, xbh, rc, s_u = 2, x, xB, r, np.zeros(0, dtype=np.int64)
        elif relevant:
            r_in = np.isin(r, rB)
            rB_in = np.isin(rB, r)
            s_u = np.unique(ids[np.concatenate((r[~r_in], rB[~rB_in]))])
            verdict = _check_s(s_u, int(own[i]))
            xh, xbh, rc = x[r_in], xB[rB_in], r[r_in]
        else:
            continue
        if not verdict:
            continue
        if r.size == 1 or np.array_equal(xh, xbh) or np.array_equal(-xh, xbh):
            return verdict
        g = np.gcd(xh[0], xbh[0])
        lhs, rhs = (xbh[0] // g) * xh, (xh[0] // g) * xbh
        if np.array_equal(lhs, rhs):
            return verdict
        if relevant:
            v = _check_s(np.unique(np.concatenate((s_u, ids[rc[lhs != rhs]]))), int(own[i]))
            if v:
                return v
    return 0


def _reversed_copy(S: _Columns, ids: np.ndarray, ncol: int) -> tuple[_Columns, np.ndarray]:
    """The second elimination of numttHTT: the same reduced columns with the singleton rows in
    reverse order (pivots then differ)."""
    m = S.shape[0]
    perm = np.arange(m)
    srows = np.flatnonzero(ids > 0)
    perm[srows] = srows[::-1]
    live = np.flatnonzero(S.valid[: S.end])
    M = sparse.csc_matrix((S.val[live], (perm[S.idx[live]], S.owner[live])), shape=(m, ncol), dtype=np.int64)
    M.sort_indices()
    return _Columns(M, dense=False), ids[perm]
