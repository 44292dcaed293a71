"""Post-randomisation of counts (PRAM) as a p-table, and the invariant (two-stage) matrix.

PRAM of counts (Shlomo & Young 2008; Shlomo, Krenzke & Li 2019, §3.3; docs/methods.md §3): a
count n of 0…K−1 moves to j with probability S[n, j] (a K × K matrix, the published one has
K = 7: values 0…6); a larger count keeps its block of ``modulus`` (m = 15) values and moves
its residue r = n mod m to the residue c with probability L[r, c], so the published count is
n − r + c (the perturbation p = r − c is subtracted: n − p). Zeros stay zero when S[0, 0] = 1,
as in the published matrix. Because L depends on n only through n mod m, the p-table is
periodic: rows i = 0…K−1 hold S and rows i = K…K+m−1 hold L for the residue i mod m, with
imax = K + m − 1 and period m, so the row class key(n) of a count n > imax is the row with
the same residue (docs/methods.md §3, the (imax, period) rule).

Invariant PRAM (Gouweleeuw, Kooiman, Willenborg & de Wolf 1998; Willenborg & de Waal 2001,
two-stage method): with t the distribution of the values and Q the backward transition
Q[k, j] = P[j, k]·t[j] / (tP)[k], the matrix R = P·Q satisfies t·R = t, so the expected
distribution of the values is unchanged. It depends on the data (the table's t).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl
import scipy.sparse as sp
from numpy.typing import ArrayLike

from protab._frames import as_polars
from protab.errors import InputError, PTableError, show_values
from protab.noise._noise_ptables import DIGITS, integer, ptable_from_rows
from protab.ptable import PTable

__all__ = ["make_invariant", "pram", "read_matrix"]

_ROW_TOL = 1e-3  # published matrices are printed to 5 decimals: rows sum to 1 within ~3e-5


def read_matrix(source: Any, *, name: str = "matrix") -> np.ndarray:
    """A transition matrix as a float array from an array, a polars/pandas/pyarrow frame or
    a CSV path. A first column that only numbers the rows 0…K−1 (``original``, ``residual``
    in the published CSV files) is dropped."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise PTableError(f"{name}: file {str(path)!r} does not exist")
        try:
            source = pl.read_csv(path, infer_schema_length=None)
        except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
            raise PTableError(f"{name}: cannot read {path.name!r} as CSV: {exc}") from exc
    if isinstance(source, (pl.DataFrame, pl.LazyFrame)) or type(source).__module__.startswith(
        ("pandas", "pyarrow")
    ):
        df = as_polars(source, "p-table", PTableError)  # as the p-table readers do
        if df.width == df.height + 1:
            first = df[df.columns[0]]
            if first.dtype.is_numeric() and first.cast(pl.Float64).to_list() == list(
                map(float, range(df.height))
            ):
                df = df.drop(df.columns[0])
        bad = [c for c in df.columns if not df[c].dtype.is_numeric()]
        if bad:
            raise PTableError(f"{name}: columns {show_values(bad)} are not numeric")
        return df.cast(pl.Float64).to_numpy()
    try:
        a = np.asarray(source, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise PTableError(f"{name}: cannot read a matrix of numbers from it") from exc
    return a


def _stochastic(M: np.ndarray, name: str, tol: float, *, renormalise: bool) -> np.ndarray:
    """Check a square, finite, non-negative matrix whose rows sum to 1 within ``tol``;
    with ``renormalise`` divide each row by its sum."""
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] == 0:
        raise PTableError(f"{name} must be a square matrix (rows = columns = values), got shape {M.shape}")
    if not np.all(np.isfinite(M)):
        raise PTableError(f"{name} has missing, NaN or infinite entries; fill them in")
    neg = np.flatnonzero((M < 0).any(axis=1))
    if neg.size:
        raise PTableError(f"{name} has negative probabilities in rows {show_values(neg.tolist())}")
    sums = M.sum(axis=1)
    off = np.flatnonzero(np.abs(sums - 1.0) > tol)
    if off.size:
        raise PTableError(
            f"rows {show_values(off.tolist())} of {name} do not sum to 1; each row must be the "
            "distribution of the perturbed value"
        )
    return M / sums[:, None] if renormalise else M


def make_invariant(matrix: Any, t: ArrayLike, *, tol: float = 1e-6) -> Any:
    """The invariant transition matrix R = P·Q of the two-stage method (Willenborg & de Waal
    2001; Gouweleeuw et al. 1998): Q[k, j] = P[j, k]·t[j] / (tP)[k] is the backward
    transition, and t·R = t for the distribution t of the values (any scale; t >= 0).

    ``matrix``: a square row-stochastic matrix (NumPy array or scipy.sparse, rows summing to
    1 within ``tol``); the result has the same kind. A value k no value reaches ((tP)[k] = 0)
    gets Q[k, k] = 1. R keeps t exactly whatever P is. How much it perturbs depends on t:
    spread-out values are moved more often than by P, isolated values less (a value with no
    neighbour in t comes back to itself). Mixing with the identity, α·R + (1 − α)·I, perturbs
    less and stays invariant.
    """
    is_sparse = sp.issparse(matrix)
    # a scipy.sparse array (scipy has no type information: Any) or a NumPy array
    P: Any = sp.csr_array(matrix, dtype=np.float64) if is_sparse else read_matrix(matrix)
    n = P.shape[0]
    if is_sparse:
        if P.shape[0] != P.shape[1] or n == 0:
            raise PTableError(f"the matrix must be square, got shape {P.shape}")
        if not np.all(np.isfinite(P.data)) or (P.data < 0).any():
            raise PTableError("the matrix has negative, NaN or infinite entries")
        off = np.flatnonzero(np.abs(np.asarray(P.sum(axis=1)).ravel() - 1.0) > tol)
        if off.size:
            raise PTableError(f"rows {show_values(off.tolist())} of the matrix do not sum to 1")
    else:
        P = _stochastic(P, "the matrix", tol, renormalise=False)
    tt = np.asarray(t, dtype=np.float64).ravel()
    if tt.size != n:
        raise InputError(f"t must have one entry per value of the matrix ({n}), got {tt.size}")
    if not np.all(np.isfinite(tt)) or (tt < 0).any() or tt.sum() <= 0:
        raise InputError("t must hold finite frequencies >= 0 with a positive sum")
    tt = tt / tt.sum()
    lam = np.asarray(tt @ P).ravel()  # (tP)[k]: the distribution of the values after P
    reached = lam > 0
    inv = np.where(reached, 1.0 / np.where(reached, lam, 1.0), 0.0)
    if is_sparse:
        Q = sp.diags_array(inv) @ sp.csr_array(P.T) @ sp.diags_array(tt)
        Q = Q + sp.diags_array((~reached).astype(np.float64))
        return sp.csr_array(P @ Q)
    Q = inv[:, None] * P.T * tt[None, :]
    Q[~reached, ~reached] = 1.0
    return P @ Q


def _counts(x: ArrayLike) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind == "f" and np.all(np.isfinite(a)) and np.all(a == np.round(a)):
        a = a.astype(np.int64)
    if a.dtype.kind not in "iu" or a.size == 0 or a.min() < 0:
        raise InputError(
            "invariant_to must hold the table's cell counts: integers >= 0, at least one"
        )
    return a.astype(np.int64).ravel()


def _rows_plain(S: np.ndarray, L: np.ndarray, first: int, last: int) -> tuple[np.ndarray, ...]:
    """(i, v, p) rows of the plain rule for i = first…last: S below K, L by residue above."""
    K, m = S.shape[0], L.shape[0]
    parts_i, parts_v, parts_p = [], [], []
    small = np.arange(first, min(last, K - 1) + 1)
    if small.size:
        i = np.repeat(small, K)
        j = np.tile(np.arange(K), small.size)
        parts_i.append(i)
        parts_v.append(j - i)
        parts_p.append(S[small].ravel())
    large = np.arange(max(first, K), last + 1)
    if large.size:
        r = large % m
        i = np.repeat(large, m)
        c = np.tile(np.arange(m), large.size)
        parts_i.append(i)
        parts_v.append(c - np.repeat(r, m))
        parts_p.append(L[r].ravel())
    return tuple(np.concatenate(x) for x in (parts_i, parts_v, parts_p))


def _count_matrix(S: np.ndarray, L: np.ndarray, top: int) -> sp.csr_array:
    """The PRAM transition matrix on the counts 0…top+m−1 (sparse, banded); counts above
    top keep their value (they do not occur in the table it is built for)."""
    m = L.shape[0]
    N = top + m
    i, v, p = _rows_plain(S, L, 0, top)
    extra = np.arange(top + 1, N)
    rows = np.concatenate([i, extra])
    cols = np.concatenate([i + v, extra])
    vals = np.concatenate([p, np.ones(extra.size)])
    return sp.csr_array((vals, (rows, cols)), shape=(N, N))


def pram(
    small: Any,
    large: Any,
    *,
    modulus: int = 15,
    invariant_to: ArrayLike | None = None,
    invariant: Literal["counts", "residues"] = "counts",
    tol: float = _ROW_TOL,
    digits: int = DIGITS,
) -> PTable:
    """PRAM of counts as a p-table (Shlomo & Young 2008; Shlomo, Krenzke & Li 2019).

    ``small``: K × K matrix for the counts 0…K−1 (row = original, column = perturbed value);
    ``large``: m × m matrix (m = ``modulus``) of the residue n mod m, row = original residue,
    column = perturbed residue c: the count n becomes n − (n mod m) + c. Arrays, frames or CSV
    paths (:func:`read_matrix`); rows are renormalised to sum to 1 (the published ones are
    printed to 5 decimals; rows off by more than ``tol`` raise PTableError).

    Row rule: rows i = 0…K−1 from ``small``, rows K…K+m−1 from ``large`` by residue i mod m;
    imax = K + m − 1, period m, so key(n) for n > imax has the residue of n.

    ``invariant_to`` (the table's cell counts) makes the p-table invariant for that table by
    :func:`make_invariant`: ``invariant="counts"`` builds the transition matrix of the counts
    0…max(count) and makes it invariant for the distribution of the values (t·R = t, the
    literal two-stage method; one explicit row per count up to the largest, then the plain
    periodic rows); ``"residues"`` makes ``small`` invariant for the counts below K and
    ``large`` for the residues of the counts from K on (compact and periodic; t is then kept
    per part, not for the counts as a whole). Either way the p-table depends on the data.
    """
    m = integer(modulus, "modulus", minimum=2)
    if invariant not in ("counts", "residues"):
        raise PTableError("invariant must be 'counts' or 'residues'")
    tl = float(tol)
    S = _stochastic(read_matrix(small, name="small"), "the small-value matrix", tl, renormalise=True)
    L = _stochastic(read_matrix(large, name="large"), "the residue matrix", tl, renormalise=True)
    if L.shape[0] != m:
        raise PTableError(
            f"the residue matrix must be {m} × {m} (one row and column per residue mod "
            f"modulus), got {L.shape[0]} × {L.shape[1]}"
        )
    K = S.shape[0]
    imax = K + m - 1
    if invariant_to is None:
        i, v, p = _rows_plain(S, L, 0, imax)
        return ptable_from_rows(i, v, p, imax=imax, period=m, digits=digits)
    counts = _counts(invariant_to)
    if invariant == "residues":
        return _invariant_residues(S, L, counts, tl, digits)
    return _invariant_counts(S, L, counts, tl, digits)


def _invariant_residues(S: np.ndarray, L: np.ndarray, counts: np.ndarray, tl: float, digits: int) -> PTable:
    """PRAM made invariant per part: ``S`` for the counts below K, ``L`` for the residues of the
    counts from K on (:func:`make_invariant`); compact and periodic."""
    K, m = S.shape[0], L.shape[0]
    imax = K + m - 1
    t_small = np.bincount(counts[counts < K], minlength=K)[:K]
    t_res = np.bincount(counts[counts >= K] % m, minlength=m)
    if t_small.sum() > 0:
        S = make_invariant(S, t_small, tol=tl)
    if t_res.sum() > 0:
        L = make_invariant(L, t_res, tol=tl)
    i, v, p = _rows_plain(S, L, 0, imax)
    return ptable_from_rows(i, v, p, imax=imax, period=m, digits=digits)


def _invariant_counts(S: np.ndarray, L: np.ndarray, counts: np.ndarray, tl: float, digits: int) -> PTable:
    """PRAM made invariant for the distribution of the counts (the two-stage method on the
    transition matrix of the counts 0…max): one explicit row per count, then the plain periodic
    rows."""
    K, m = S.shape[0], L.shape[0]
    top = max(int(counts.max()), K + m - 1)
    P = _count_matrix(S, L, top)
    t = np.bincount(counts, minlength=P.shape[0])
    R = sp.coo_array(make_invariant(P, t, tol=tl))
    keep = (R.row <= top) & (R.data > 0)
    ri, rj, rp = R.row[keep].astype(np.int64), R.col[keep].astype(np.int64), R.data[keep]
    ei, ev, ep = _rows_plain(S, L, top + 1, top + m)  # the plain rows past the table's values
    return ptable_from_rows(
        np.concatenate([ri, ei]),
        np.concatenate([rj - ri, ev]),
        np.concatenate([rp, ep]),
        imax=top + m,
        period=m,
        digits=digits,
    )
