"""Singleton handling of the Gaussian-elimination suppression (Langsrud 2024; the singleton
methods of :mod:`protab.suppression.gauss`): which method applies, repeated singleton rows, and
the virtual primary cells of ``subSum`` and ``sub2Sum``."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from protab.errors import SpecError, show_values


def _resolve_method(W0: sparse.csc_matrix, method: str, sing: np.ndarray, protect: np.ndarray,
                    never: np.ndarray, auto: tuple[bool, bool] = (True, True)) -> tuple[str, np.ndarray]:
    """The singleton method that applies and the singleton rows, as the package decides them:
    ``"none"`` drops the singletons; a never-suppressed cell of one inner cell publishes it (not
    a singleton); published singleton cells turn anySum into anySumNOTprimary (the subSum
    methods refuse); never cells turn anySum into subSumAny."""
    n_never = int(never.sum())
    if method == "none":
        sing = np.zeros(W0.shape[0], dtype=bool)
    if n_never and sing.any():
        # a never-suppressed cell that is a single inner cell is published: not a singleton
        sub = W0[:, np.flatnonzero(never)]
        one = (np.asarray(sub.sum(axis=0)).ravel() == 1) & (np.asarray(abs(sub).sum(axis=0)).ravel() == 1)
        if one.any():
            sing[sub[:, one].indices] = False
    if sing.any() and method in ("anySum", "subSum", "subSumAny") and auto[0]:
        single = (np.asarray(W0.sum(axis=0)).ravel() == 1) & (np.diff(W0.indptr) == 1)
        single_sing = single.copy()
        single_sing[single] = sing[W0.indices[W0.indptr[:-1][single]]]
        if (single_sing & ~protect).any():
            if method != "anySum":
                raise SpecError(
                    f"gauss: singleton inner cells are published unsuppressed (cells "
                    f"{show_values(np.flatnonzero(single_sing & ~protect).tolist())}); singleton_method "
                    f"{method!r} assumes they are primary: use 'anySumNOTprimary'"
                )
            method = "anySumNOTprimary"  # as the package does
    if n_never and sing.any() and method == "anySum" and auto[1]:
        method = "subSumAny"  # as the package: the virtual cells show what the never cells expose
    return method, sing


def _drop_duplicate_rows(W0: sparse.csc_matrix, sing: np.ndarray) -> tuple[sparse.csc_matrix, np.ndarray]:
    """Repeated singleton rows dropped (the package does; it matters for the singleton rules)."""
    if sing.any():
        dup = _duplicate_rows(W0, sing)
        if dup.any():
            return W0[~dup, :].tocsc(), sing[~dup]
    return W0, sing


def _duplicate_rows(X: sparse.csc_matrix, rows: np.ndarray) -> np.ndarray:
    """Among ``rows``, those equal to an earlier one of them (mask over all rows)."""
    R = X.tocsr()
    seen: set[bytes] = set()
    dup = np.zeros(X.shape[0], dtype=bool)
    for r in np.flatnonzero(rows):
        s, e = R.indptr[r], R.indptr[r + 1]
        key = R.indices[s:e].tobytes() + b"|" + R.data[s:e].tobytes()
        if key in seen:
            dup[r] = True
        seen.add(key)
    return dup


def _virtual_primaries(W0: sparse.csc_matrix, sing: np.ndarray, protect: np.ndarray,
                       method: str) -> tuple[sparse.csc_matrix | None, np.ndarray]:
    """The virtual primary cells of ``sub2Sum`` / ``subSum`` / ``subSumAny`` (None: none) and the
    singleton rows left for the anySum rule (none after sub2Sum and subSum)."""
    extra = None
    if method == "sub2Sum":
        extra = _sub2sum(W0, sing, protect)
        sing = np.zeros(W0.shape[0], dtype=bool)
    if sing.any() and method in ("subSum", "subSumAny"):
        extra = _subsum(W0, sing)
        if method == "subSum":
            sing = np.zeros(W0.shape[0], dtype=bool)
    return extra, sing


def _subsum(W0: sparse.csc_matrix, sing: np.ndarray) -> sparse.csc_matrix | None:
    """Virtual primary cells of ``subSum``: for every published cell with more than one singleton
    inner cell under it (and no negative coefficient there), the sum of those singleton cells."""
    pZ = sparse.diags(sing.astype(np.int64), dtype=np.int64) @ W0
    pZ = sparse.csc_matrix(pZ)
    pZ.eliminate_zeros()
    sums = np.asarray(pZ.sum(axis=0)).ravel()
    neg = np.asarray((pZ < 0).sum(axis=0)).ravel() > 0
    keep = np.flatnonzero((sums > 1) & ~neg)
    if keep.size:
        return _unique_columns(sparse.csc_matrix(pZ[:, keep], dtype=np.int64))
    return None


def _sub2sum(W0: sparse.csc_matrix, sing: np.ndarray, protect: np.ndarray) -> sparse.csc_matrix | None:
    """Virtual primary cells of the magnitude-table rule ``sub2Sum``.

    A published (non-primary) cell with exactly two primary inner cells under it and a
    singleton inner cell under it (in the package's test: any singleton, normally one of the
    two) gets a virtual primary cell = the sum of the two: the single contributor knows its own
    value and would get the other one from that sum. Cells with negative coefficients are left
    out, as in the package."""
    if not sing.any():
        return None
    colnnz = np.diff(W0.indptr)
    single = (np.asarray(W0.sum(axis=0)).ravel() == 1) & (colnnz == 1)
    inner_primary = np.zeros(W0.shape[0], dtype=bool)
    pc = np.flatnonzero(single & protect)
    inner_primary[W0.indices[W0.indptr[pc]]] = True
    pZ = sparse.csc_matrix(sparse.diags(inner_primary.astype(np.int64), dtype=np.int64) @ W0)
    pZ.eliminate_zeros()
    keep = ~protect & (np.asarray((pZ < 0).sum(axis=0)).ravel() == 0)
    keep &= np.asarray(pZ.sum(axis=0)).ravel() == 2
    pZs = sparse.diags(sing.astype(np.int64), dtype=np.int64) @ W0  # any singleton under the cell
    keep &= np.asarray(pZs.sum(axis=0)).ravel() > 0
    if not keep.any():
        return None
    return _unique_columns(sparse.csc_matrix(pZ[:, np.flatnonzero(keep)], dtype=np.int64))


def _unique_columns(M: sparse.csc_matrix) -> sparse.csc_matrix:
    seen: set[bytes] = set()
    uniq = []
    for k in range(M.shape[1]):
        s, e = M.indptr[k], M.indptr[k + 1]
        key = M.indices[s:e].tobytes() + b"|" + M.data[s:e].tobytes()
        if key not in seen:
            seen.add(key)
            uniq.append(k)
    return sparse.csc_matrix(M[:, uniq], dtype=np.int64)


def _keys(M: sparse.csc_matrix) -> list[bytes]:
    M = sparse.csc_matrix(M, dtype=np.int64)
    M.sort_indices()
    return [M.indices[M.indptr[k]:M.indptr[k + 1]].tobytes() + b"|" + M.data[M.indptr[k]:M.indptr[k + 1]].tobytes()
            for k in range(M.shape[1])]


def _column_groups(W: sparse.csc_matrix) -> np.ndarray:
    """For every column, the first column with the same content."""
    rep = np.arange(W.shape[1])
    first: dict[bytes, int] = {}
    for c in range(W.shape[1]):
        s, e = W.indptr[c], W.indptr[c + 1]
        key = W.indices[s:e].tobytes() + b"|" + W.data[s:e].tobytes()
        rep[c] = first.setdefault(key, c)
    return rep
