"""Secondary cell suppression by Gaussian elimination (the GaussSuppression method).

The method is the one of Statistics Norway's R packages SSBtools / GaussSuppression
(Langsrud 2024, *Secondary cell suppression by Gaussian elimination: an algorithm suitable
for handling issues of zeros and singletons*). This is an independent implementation of that
published algorithm; no code of those packages is used.

Setting
-------
``X`` (inner × published, as from :meth:`protab.Session.model_matrix`) gives every published
cell as a linear combination of inner cells, ``z = Xᵀ y``. A suppressed cell is *derivable*
when its column of ``X`` lies in the span of the columns of the published cells: then a reader
can compute it exactly from the published table. The primary cells must not be derivable.

Algorithm
---------
The non-primary cells are visited once, in candidate order (most desirable to publish first);
a cell is published unless publishing it would make some primary cell derivable, in which case
it becomes a secondary suppression. The visiting keeps a reduced copy of every column not yet
decided (candidates and primaries) modulo the span of the columns published so far
(Gaussian elimination: publishing a cell picks a pivot row, the first non-zero row of its
reduced column, and clears that row from every other column). With that bookkeeping

* a candidate whose reduced column is empty is already determined by the published cells:
  publishing it reveals nothing new, it is published;
* otherwise publishing it makes a primary cell derivable exactly when the reduced column of
  that primary cell is a multiple of the candidate's reduced column (the elimination step would
  clear it); such a candidate is suppressed and its column dropped.

The outcome for ``singleton_method="none"`` depends only on the candidate order (it is the
greedy choice over the column matroid), not on how the elimination is carried out.

Singletons (``singleton_method="anySum"``, the package default for frequency tables): inner
cells flagged as singletons (a single contributor; or the zeros when zeros are protected) are
ordered after the other inner cells, so pivots are taken from them last. A candidate whose
reduced column lives on singleton rows only would, if published, tell a sum of singleton cells
(or of differences of them), which a contributor could use to disclose another; it is suppressed
— except a column with mixed signs on singleton rows that no earlier such exception touched
(a difference, published once per set of rows). Primary cells with no non-singleton part are
left to this rule. ``"subSum"`` instead adds, for every published cell with more than one
singleton inner cell under it, a virtual primary cell = the sum of those singleton inner cells;
``"subSumAny"`` does both (and is what ``"anySum"`` turns into when ``never`` cells exist, as
in the package, so that the virtual cells flag what the never cells expose). All these assume
that a published singleton inner cell is primary. When it is not (e.g. zeros as singletons but
not protected), ``"anySum"`` turns into ``"anySumNOTprimary"``, as in the package: a candidate
that would publish a sum over singleton rows only is published unless that sum covers a
primary cell, and those rows then count as known (they are removed from every column).

Magnitude tables (``singleton`` = inner cells with a single contributor):

* ``"sub2Sum"`` adds, for every non-primary published cell over exactly two primary inner
  cells and with a singleton under it, a virtual primary cell = the sum of those two (the single
  contributor knows its own value and would get the other from that sum); the package's
  ``"sub2Sum"`` (= ``"numFFT"``).
* ``"numttHTT"``, the default of the package's dominance and few-contributors wrappers:
  singleton inner cells that are not published primary cells become primary ("t"); the pair
  cells of sub2Sum, also found down a hierarchy (a cell whose primary inner cells are those of
  a primary cell plus one singleton, "H"); and during the elimination ("T") a candidate is
  suppressed when it would reveal a primary cell to a single contributor, i.e. when it is
  proportional to the primary cell's reduced column apart from rows of one other singleton,
  or lives on the rows of at most two singletons (it is then protected like a primary cell
  too). As in the package the elimination runs twice, the second time with the singleton rows
  in reverse order, and a candidate is suppressed if either run says so. ``singleton`` may be
  boolean (each singleton inner cell its own contributor) or, as in the package, integer
  contributor codes (0 = not a singleton), so that one holding that is the single contributor
  of several cells is recognised across them. The package's other ``NumSingleton`` codes are
  not implemented. This path needs exact integers (no float fallback).

The other package methods (``"subSpace"``, ``"subSumSpace"``, ``"anySum0"``, the other
``NumSingleton`` codes) raise :class:`NotImplementedError`.

Exact arithmetic
----------------
``X`` must have integer coefficients. The reduced columns are kept as integer vectors. A pivot
step with a pivot ``α`` that divides every ``c_p`` (always so for ±1 pivots, the rule on 0/±1
tables) does ``c ← c − (c_p/α)·a``: only the entries in the rows of the pivot column change,
in place, and a column is rewritten only when it gains entries (fill-in). Otherwise the step is
fraction free, ``c ← (α/g)·c − (c_p/g)·a`` with ``g = gcd(α, c_p)`` (no rounding), and columns
whose entries grow past 2³⁰ are divided by the gcd of their entries. Before every step a bound
on the new entries is checked; if it would pass 2⁶² the elimination switches to
float64 with a relative tolerance (as the R package does on integer overflow) and the final
result is then verified with the exact test :func:`derivable` (unbounded Python integers); a
failed verification raises instead of returning an unsafe pattern. For 0/±1 hierarchical tables
the pivots are ±1 and the integers stay small, so the float path is practically never taken.

Pivot rows and storage
----------------------
The pivot of a published column may be any of its non-zero rows as far as the decisions go,
as long as non-singleton rows come first and singleton rows keep their order: "publishing c
makes b derivable" is ``b − λc ∈ span`` and "c lives on singleton rows only" is "c's
non-singleton part lies in that of the span", properties of the span, not of the pivots (and
with pivots on non-singleton rows only, the singleton parts are the same). So the pivot is the
non-singleton row in the fewest columns (Markowitz's rule for a fixed pivot column), which
limits fill-in; the singleton rows follow GaussSuppression's order. (numttHTT compares reduced
columns entry by entry and keeps the package's first-row pivots.) tests/test_suppression_gauss_props.py
checks the patterns against a textbook elimination in fractions with the package's pivots.

Columns are stored as sorted segments of flat arrays (entries that became zero stay as
invalid slots until the column is rewritten); columns with more than 1/16 of the rows non-zero
(a margin minus the grand total, say) become dense int32 vectors, updated by direct indexing.
An index of (row, column) pairs, log-structured, finds the columns of a pivot row; only fill-in
adds pairs. The loop over candidates is inherently sequential; each step is a few vectorised
operations whose cost is the size of the pivot column times the columns it touches, plus the
columns it rewrites. benchmarks/suppression_scale.py (3-way hierarchical frequency table,
anySum, 2 shared cores): 98 406 published cells in 17–29 s, 649 506 cells in about 4.5 minutes
with a peak of 3.6 GiB.

Reproduction
------------
tests/test_suppression_gauss.py runs the reference outputs of GaussSuppression 1.2.3 /
SSBtools 1.8.6 (tests/data/gauss_rules) with the package's candidate orders and singleton
definitions: its SuppressSmallCounts examples (anySum) and its dominance, p% and
few-contributors tables (numttHTT; flat, hierarchical and formula tables, with and without
holdings, weights, zeros) are reproduced cell for cell, except where the package used
``removeCodes`` (not part of this API). Primary cells whose column is empty (no inner cell)
are refused here, where the package warns and leaves them unprotected.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import sparse

from protab.errors import InputError, ProtabError, SpecError, show_values

__all__ = ["candidates_default", "candidates_num", "derivable", "gauss"]

_IMPLEMENTED = ("none", "anySum", "anySumNOTprimary", "subSum", "subSumAny", "sub2Sum", "numttHTT")
_KNOWN_NOT_IMPLEMENTED = ("subSpace", "subSumSpace", "anySum0")
_REDUCE_AT = 2**30  # divide a column by its content when an entry passes this
_INT_LIMIT = 2**62  # switch to float beyond this bound on new entries


# ----------------------------------------------------------------------------- input checks


def _as_int_csc(X: Any, what: str = "gauss") -> sparse.csc_matrix:
    if not sparse.issparse(X):
        if isinstance(X, np.ndarray) and X.ndim == 2:
            X = sparse.csc_matrix(X)
        else:
            raise InputError(f"{what}: X must be a scipy.sparse matrix (inner × published), not {type(X).__name__}")
    X = sparse.csc_matrix(X)
    if X.ndim != 2:
        raise InputError(f"{what}: X must be two-dimensional")
    data = np.asarray(X.data)
    if data.dtype.kind == "b":
        data = data.astype(np.int64)
    if data.dtype.kind not in "iuf":
        raise InputError(f"{what}: X must be numeric, not {data.dtype}")
    if data.dtype.kind == "f":
        if not np.all(np.isfinite(data)):
            raise InputError(f"{what}: X has NaN or infinite coefficients")
        if np.any(data != np.round(data)):
            bad = np.unique(data[data != np.round(data)])
            raise InputError(
                f"{what}: X must have integer coefficients (as a model matrix has); found "
                f"{show_values(bad.tolist())}"
            )
        if data.size and np.abs(data).max() >= 2**53:
            raise InputError(f"{what}: X has coefficients too large to be exact in floating point")
    out = sparse.csc_matrix((data.astype(np.int64), X.indices.copy(), X.indptr.copy()), shape=X.shape)
    out.eliminate_zeros()
    out.sort_indices()
    return out


def _bool_vector(v: Any, n: int, name: str, what: str = "gauss") -> np.ndarray:
    if v is None:
        return np.zeros(n, dtype=bool)
    a = np.asarray(v)
    if a.ndim != 1:
        raise InputError(f"{what}: {name} must be one-dimensional, got shape {a.shape}")
    if a.dtype.kind == "b":
        if a.shape[0] != n:
            raise InputError(f"{what}: {name} has length {a.shape[0]}, expected {n}")
        return a.copy()
    if a.dtype.kind in "iu":
        if a.size and (a.min() < 0 or a.max() >= n):
            raise InputError(f"{what}: {name} indices must lie in 0..{n - 1}")
        out = np.zeros(n, dtype=bool)
        out[a] = True
        return out
    if a.size == 0:
        return np.zeros(n, dtype=bool)
    raise InputError(f"{what}: {name} must be a boolean mask or integer indices, not {a.dtype}")


def _float_vector(v: Any, n: int, name: str) -> np.ndarray:
    a = np.asarray(v, dtype=float)
    if a.ndim != 1 or a.shape[0] != n:
        raise InputError(f"gauss: {name} must be a vector of length {n} (one per published cell), got shape {a.shape}")
    if not np.isfinite(a).all():
        raise InputError(
            f"gauss: {name} has NaN or infinite values at published cells "
            f"{show_values(np.flatnonzero(~np.isfinite(a)).tolist())}"
        )
    return a


# ----------------------------------------------------------------------------- candidate order


def _freq_plus1(freq: np.ndarray) -> np.ndarray:
    """freq + 1, but negative frequencies move away from zero (freq − 1 where freq+1 ≤ 0)."""
    f = freq + 1.0
    nonpos = f <= 0
    f[nonpos] -= 1.0
    return f


def candidates_default(
    X: Any, freq: Any, weight: Any = None, *, secondary_zeros: bool = False
) -> np.ndarray:
    """Candidate order of GaussSuppression's ``CandidatesDefault`` (0-based column indices).

    Cells are tried in decreasing ``|(freq+1)·weight|``; ties go to cells covering much of the
    table (``|XᵀX((freq+1)·weight)|``, scaled to at most 0.99). Unless ``secondary_zeros``,
    zero cells come first (they are never chosen as secondary suppressions when avoidable).
    The sort is stable, as R's ``order``.
    """
    Xc = _as_int_csc(X, "candidates_default").astype(float)
    n = Xc.shape[1]
    freq = _float_vector(freq, n, "freq")
    if weight is None:
        w = np.ones(n)
    else:
        w = _float_vector(weight, n, "weight")
        if (w < 0).any():
            raise InputError(
                f"candidates: weight (cost) must not be negative; negative at cells "
                f"{show_values(np.flatnonzero(w < 0).tolist())}"
            )
        if w.size and w.min() == 0:
            w = w + w.max() * 1e-20
    fw = _freq_plus1(freq) * w
    tie = np.abs(Xc.T @ (Xc @ fw))
    top = tie.max() if tie.size else 0.0
    if top > 0:
        tie = tie / top
    order_key = np.abs(fw) + 0.99 * tie
    if not secondary_zeros and order_key.size:
        zero = freq == 0
        order_key[zero] = 0.01 + order_key.max() + order_key[zero]
    return np.argsort(-order_key, kind="stable")


def candidates_num(
    X: Any, num: Any, freq: Any = None, weight: Any = None, *, secondary_zeros: bool = False
) -> np.ndarray:
    """Candidate order of GaussSuppression's ``CandidatesNum`` (0-based column indices).

    The weight of ``candidates_default`` becomes ``|num|/(freq+1)``, so cells are tried in
    decreasing ``|num|`` (large cells published first), with the same tie-breaking and zeros
    first. ``freq`` defaults to the column sums of ``X`` (the inner cells under each cell); the
    package passes the number of records when it has them. The package computes the order on
    the rows of its data before aggregation to inner cells (records, or inner cell × holding);
    its tie-breaking term counts those rows, so pass ``X`` with one row per such data row
    (``X[inner_of_row]``) to reproduce it exactly. (The package also puts cells made zero only
    by ``removeCodes`` first; protab has no removeCodes here.)
    """
    Xc = _as_int_csc(X, "candidates_num")
    n = Xc.shape[1]
    num = _float_vector(num, n, "num")
    if freq is None:
        freq = np.asarray(Xc.sum(axis=0), dtype=float).ravel()
    freq = _float_vector(freq, n, "freq")
    w = np.abs(num / _freq_plus1(freq))
    if weight is not None:
        w = w * _float_vector(weight, n, "weight")
    return candidates_default(Xc, freq, w, secondary_zeros=secondary_zeros)


# ----------------------------------------------------------------------------- exact test


def derivable(X: Any, suppressed: Any) -> np.ndarray:
    """Which suppressed cells are exactly determined by the published ones.

    A boolean per published cell (False for published cells): True where the column of a
    suppressed cell lies in the span of the columns of the non-suppressed cells. An independent
    exact test: fraction-free elimination in unbounded Python integers over the published
    columns, then every suppressed column is reduced against that basis. Cost grows with the
    size of the table (Python-level loops); meant for checking results.
    """
    Xc = _as_int_csc(X, "derivable")
    n = Xc.shape[1]
    supp = _bool_vector(suppressed, n, "suppressed", "derivable")
    basis: dict[int, dict[int, int]] = {}  # pivot row → integer vector (pivot entry positive)

    def column(j: int) -> dict[int, int]:
        s, e = Xc.indptr[j], Xc.indptr[j + 1]
        return {int(r): int(v) for r, v in zip(Xc.indices[s:e], Xc.data[s:e])}

    def reduce(v: dict[int, int]) -> dict[int, int]:
        while v:
            hit = [r for r in v if r in basis]
            if not hit:
                return v
            r = min(hit)
            b = basis[r]
            f, g = b[r], v[r]
            out = {k: f * x for k, x in v.items()}
            for k, x in b.items():
                out[k] = out.get(k, 0) - g * x
            v = {k: x for k, x in out.items() if x != 0}
        return v

    for j in np.flatnonzero(~supp):
        v = reduce(column(int(j)))
        if v:
            p = min(v)
            if v[p] < 0:
                v = {k: -x for k, x in v.items()}
            # keep reduced: eliminate p from existing basis vectors is not needed for membership
            basis[p] = v
    out = np.zeros(n, dtype=bool)
    for j in np.flatnonzero(supp):
        out[j] = not reduce(column(int(j)))
    return out


# ----------------------------------------------------------------------------- main


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


def gauss(
    X: Any,
    z: Any,
    primary: Any,
    *,
    candidates: Sequence[int] | np.ndarray | None = None,
    forced: Any = None,
    never: Any = None,
    singleton: Any = None,
    singleton_method: str = "anySum",
    freq: Any = None,
    weight: Any = None,
    tol: float = 1e-9,
) -> np.ndarray:
    """Secondary cell suppression by Gaussian elimination; returns the suppressed cells.

    Parameters
    ----------
    X : scipy.sparse matrix, inner × published, integer coefficients (``z = Xᵀ y``).
    z : the published values (used for the default candidate order; NaN is refused).
    primary : bool per published cell (or indices): the cells to protect.
    candidates : the order (0-based published-cell indices) in which non-primary cells are tried
        for publication. Cells missing from it are suppressed without needing protection
        (GaussSuppression's *hidden*); primary/forced cells in it are skipped. Default:
        :func:`candidates_num` of ``z`` (and ``freq``/``weight``), the order of the package's
        magnitude-table wrappers; pass ``candidates_default(X, z)`` for its frequency-table order.
    forced : cells that must be suppressed; they are protected like primary cells.
    never : cells that must not be suppressed (GaussSuppression's *forced*); they are
        published first. A primary cell they make derivable raises :class:`SpecError`.
    singleton : bool per inner cell (row of X): a single contributor (or, for frequency tables
        with protected zeros, the zero cells). With ``"numttHTT"`` also integer contributor
        codes (0 = not a singleton; equal codes = the same contributor).
    singleton_method : ``"anySum"`` (default; frequency tables), ``"anySumNOTprimary"``,
        ``"none"``, ``"subSum"``, ``"subSumAny"``, or for magnitude tables ``"numttHTT"`` (the
        package's magnitude default) or ``"sub2Sum"``; see the module docstring. Others of the
        package raise :class:`NotImplementedError`.
    freq, weight : optional frequencies and non-negative costs for the default candidate order.
    tol : relative tolerance of the float fallback (only used if the integers would overflow).

    Returns
    -------
    Boolean per published cell: suppressed (primary, forced, hidden and secondary).
    """
    W0 = _as_int_csc(X)
    m, n = W0.shape
    if not isinstance(singleton_method, str):
        raise SpecError(f"gauss: singleton_method must be a string, not {type(singleton_method).__name__}")
    if singleton_method not in _IMPLEMENTED:
        if singleton_method in _KNOWN_NOT_IMPLEMENTED or singleton_method.startswith("num"):
            raise NotImplementedError(
                f"gauss: singleton_method {singleton_method!r} (a GaussSuppression method) is not implemented "
                f"in protab; available: {', '.join(_IMPLEMENTED)}"
            )
        raise SpecError(f"gauss: unknown singleton_method {singleton_method!r}; use one of {', '.join(_IMPLEMENTED)}")
    zv = _float_vector(z, n, "z")
    prim = _bool_vector(primary, n, "primary")
    forc = _bool_vector(forced, n, "forced")
    nev = _bool_vector(never, n, "never")
    if (forc & nev).any():
        raise SpecError(
            f"gauss: cells both forced (must be suppressed) and never (must be published): "
            f"{show_values(np.flatnonzero(forc & nev).tolist())}"
        )
    if (prim & nev).any():
        raise SpecError(
            f"gauss: primary cells marked never-suppress: {show_values(np.flatnonzero(prim & nev).tolist())}; "
            "a primary cell must be suppressed"
        )
    codes = None
    sarr = None if singleton is None else np.asarray(singleton)
    if sarr is not None and sarr.dtype.kind in "iu" and singleton_method == "numttHTT":
        if sarr.shape != (m,) or (sarr < 0).any():
            raise InputError(
                f"gauss: singleton as contributor codes must be {m} non-negative integers (one per inner cell, "
                "0 = not a singleton)"
            )
        codes = sarr.astype(np.int64)
        sing = codes > 0
    else:
        if sarr is not None and sarr.dtype.kind != "b":
            raise InputError(
                "gauss: singleton must be a boolean mask over the inner cells (rows of X); integer contributor "
                "codes only with singleton_method='numttHTT'"
            )
        sing = _bool_vector(singleton, m, "singleton")
    if freq is not None:
        freq = _float_vector(freq, n, "freq")
    if weight is not None:
        w = _float_vector(weight, n, "weight")
        if (w < 0).any():
            raise InputError(
                f"gauss: weight (cost) must not be negative; negative at cells {show_values(np.flatnonzero(w < 0).tolist())}"
            )
    if not np.isfinite(tol) or tol <= 0:
        raise InputError(f"gauss: tol must be a positive number, got {tol!r}")

    protect = prim | forc
    if candidates is None:
        order = candidates_num(W0, zv, freq, weight)
    else:
        order = np.asarray(candidates)
        if order.ndim != 1 or (order.size and order.dtype.kind not in "iu"):
            raise InputError("gauss: candidates must be a sequence of 0-based published-cell indices")
        if order.size and (order.min() < 0 or order.max() >= n):
            raise InputError(f"gauss: candidates must lie in 0..{n - 1}")
        order = order.astype(np.int64)
        _, first = np.unique(order, return_index=True)
        order = order[np.sort(first)]
    order = np.concatenate([np.flatnonzero(nev), order[~protect[order] & ~nev[order]]]).astype(np.int64)
    n_never = int(nev.sum())
    suppressed = np.ones(n, dtype=bool)
    suppressed[order] = False
    if not protect.any():
        return suppressed

    colnnz = np.diff(W0.indptr)
    empty_primary = protect & (colnnz == 0)
    if empty_primary.any():
        raise SpecError(
            f"gauss: primary cells {show_values(np.flatnonzero(empty_primary).tolist())} have no inner cells "
            "(an empty column of X): their value is known to be 0 and cannot be protected; build X with "
            "extend0 or do not mark them primary"
        )

    # singleton handling
    method = singleton_method
    if method == "none":
        sing = np.zeros(m, dtype=bool)
    if n_never and sing.any():
        # a never-suppressed cell that is a single inner cell is published: not a singleton
        nv = np.flatnonzero(nev)
        sub = W0[:, nv]
        one = (np.asarray(sub.sum(axis=0)).ravel() == 1) & (np.asarray(abs(sub).sum(axis=0)).ravel() == 1)
        if one.any():
            sing[sub[:, one].indices] = False
    if sing.any() and method in ("anySum", "subSum", "subSumAny"):
        single = (np.asarray(W0.sum(axis=0)).ravel() == 1) & (colnnz == 1)
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
    if n_never and sing.any() and method == "anySum":
        method = "subSumAny"  # as the package: the virtual cells show what the never cells expose
    not_primary = method == "anySumNOTprimary"
    if method == "numttHTT":
        return _gauss_numtthtt(W0, order, n_never, protect, sing, codes, tol)
    # drop repeated singleton rows (the package does; it matters for the singleton rules)
    if sing.any():
        dup = _duplicate_rows(W0, sing)
        if dup.any():
            W0 = W0[~dup, :].tocsc()
            sing = sing[~dup]
            m = W0.shape[0]

    B_cols = np.flatnonzero(protect)
    extra: sparse.csc_matrix | None = None
    if method == "sub2Sum":
        extra = _sub2sum(W0, sing, protect)
        sing = np.zeros(m, dtype=bool)
    if sing.any() and method in ("subSum", "subSumAny"):
        pZ = sparse.diags(sing.astype(np.int64), dtype=np.int64) @ W0
        pZ = sparse.csc_matrix(pZ)
        pZ.eliminate_zeros()
        sums = np.asarray(pZ.sum(axis=0)).ravel()
        neg = np.asarray((pZ < 0).sum(axis=0)).ravel() > 0
        keep = np.flatnonzero((sums > 1) & ~neg)
        if keep.size:
            extra = _unique_columns(sparse.csc_matrix(pZ[:, keep], dtype=np.int64))
        if method == "subSum":
            sing = np.zeros(m, dtype=bool)

    any_sum = bool(sing.any())
    if any_sum:
        row_order = np.argsort(sing, kind="stable")  # non-singleton rows first
        n_plain = int((~sing).sum())
        if n_never == 0 and method == "anySum":
            plain_sum = np.asarray(W0[~sing, :][:, B_cols].sum(axis=0)).ravel()
            B_cols = B_cols[plain_sum != 0]
    else:
        row_order = np.arange(m)
        n_plain = m

    blocks = [W0[:, order], W0[:, B_cols]]
    if extra is not None:
        blocks.append(extra)
    W1 = sparse.csc_matrix(sparse.hstack(blocks, format="csc")[row_order, :], dtype=np.int64)
    W1.sort_indices()
    W = _Columns(W1, dense=not not_primary)  # _covers_primary, _forget_rows read the flat arrays
    nA = order.size
    nB_orig = B_cols.size  # real primary cells (extra virtual ones follow)
    ncol = W.shape[1]
    is_B = np.zeros(ncol, dtype=bool)
    is_B[nA:] = True
    B_start_nonempty = W.nonempty()[nA:]
    sub_used = np.zeros(W.shape[0], dtype=bool)
    secondary = np.zeros(nA, dtype=bool)
    exact = True

    for j in range(nA):
        if j == n_never and n_never:
            _check_never(W, nA, B_start_nonempty, B_cols, nB_orig)
        rows, vals = W.column(j)
        if not rows.size:
            continue  # determined by what is published already
        rows, vals = rows.copy(), vals.copy()
        # pivot: among the non-singleton rows, the one in the fewest columns (least fill-in);
        # which one does not change any decision (see _pivot)
        piv = _pivot(W, rows, n_plain)
        p = int(rows[piv])
        alpha = vals[piv]
        cols, cp = W.row(p)
        keep = cols > j
        cols, cp = cols[keep], cp[keep]
        is_sec = known = False
        if j >= n_never:
            if any_sum and p >= n_plain:
                is_sec = True
                if (vals > 0).any() and (vals < 0).any() and not sub_used[rows].any():
                    is_sec = False
                    sub_used[rows] = True
                if is_sec and not_primary and not _covers_primary(W, rows, is_B):
                    # a sum of singleton cells published: those cells count as known from now on
                    _forget_rows(W, rows, j)
                    is_sec, known = False, True
            if known:
                pass
            elif not is_sec:
                bsel = is_B[cols]
                if bsel.any():
                    bcols, bcp = cols[bsel], cp[bsel]
                    # a primary column equal (up to a factor) to this one would be cleared
                    lens = W.length[bcols]
                    same = bcols[lens == rows.size]
                    same_cp = bcp[lens == rows.size]
                    for c, f in zip(same, same_cp):
                        crow, cval = W.column(int(c))
                        if np.array_equal(crow, rows):
                            if exact:
                                if np.array_equal(cval * alpha, vals * f):
                                    is_sec = True
                                    break
                            elif np.allclose(cval, vals * (f / alpha), rtol=tol, atol=tol * np.abs(cval).max()):
                                is_sec = True
                                break
        W.drop(j)
        if is_sec:
            secondary[j] = True
            continue
        if known:
            continue
        # publish column j: clear row p from every affected column
        if cols.size:
            exact = _eliminate(W, rows, vals, cols, cp, exact, tol, piv)
    if n_never and n_never == nA:
        _check_never(W, nA, B_start_nonempty, B_cols, nB_orig)

    suppressed[order[secondary]] = True
    if not exact:
        bad = derivable(X, suppressed) & protect
        if bad.any():
            raise ProtabError(
                "gauss: the floating-point fallback (integer overflow in the elimination) left primary cells "
                f"{show_values(np.flatnonzero(bad).tolist())} derivable; the table is numerically too hard"
            )
    return suppressed


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


def _check_never(W: _Columns, nA: int, start_nonempty: np.ndarray, B_cols: np.ndarray, nB: int) -> None:
    """After the never-suppressed cells are published: every primary cell must still be hidden."""
    now = W.nonempty()[nA:]
    lost = start_nonempty & ~now
    lost_real = np.flatnonzero(lost[:nB])
    if lost_real.size:
        raise SpecError(
            f"gauss: primary cells {show_values(B_cols[lost_real].tolist())} cannot be protected: they are derivable "
            "from the cells marked never-suppress alone"
        )
    if lost[nB:].any():
        raise SpecError(
            "gauss: the never-suppressed cells reveal a sum of singleton inner cells (a single contributor can "
            "derive another's value); unmark some never cells"
        )


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
            dc, df = cols[dense], f[dense]
            sl = self.slot[dc]
            old = self.D[sl[:, None], rows[None, :]]
            new = old - df[:, None] * vals[None, :]
            self.D[sl[:, None], rows[None, :]] = new
            change = (new != 0).astype(np.int64) - (old != 0)
            self.count[rows] += change.sum(axis=0)
            self.length[dc] += change.sum(axis=1)
            self.vmax[dc] = np.maximum(self.vmax[dc], np.abs(new).max(axis=1))
            cols, f = cols[~dense], f[~dense]
            if not cols.size:
                return True
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
        kk = np.repeat(local, k)
        fill = ~hit
        change = np.zeros(nc * k, dtype=np.int64)
        change[hit] = now.astype(np.int64) - was
        change[fill] = 1
        self.count[rows] += change.reshape(nc, k).sum(axis=0)
        self.length[cols] += change.reshape(nc, k).sum(axis=1)
        # columns with fill-in (or mostly invalid slots) are rewritten: old entries and fill merged
        redo = np.bincount(kk[fill], minlength=nc) > 0
        redo |= self.seg[cols] > 2 * self.length[cols] + 16
        if not redo.any():
            return True
        rc = np.flatnonzero(redo)
        sel = redo[np.repeat(local, seg)] & self.valid[pos]
        old_key = key_old[sel]
        fsel = fill & redo[kk]
        fill_key = key_new[fsel]
        at_fill = np.searchsorted(old_key, fill_key) + np.arange(fill_key.size)
        is_fill = np.zeros(old_key.size + fill_key.size, dtype=bool)
        is_fill[at_fill] = True
        key = np.empty(is_fill.size, dtype=np.int64)
        val = np.empty(is_fill.size, dtype=self.val.dtype)
        key[at_fill], val[at_fill] = fill_key, delta[fsel]
        key[~is_fill], val[~is_fill] = old_key, self.val[pos[sel]]
        kcol = key // m
        counts = np.bincount(kcol, minlength=nc)[rc]
        self._store(cols[rc], key - kcol * m, val, counts, is_fill)
        return True


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
    m = W.shape[0]
    alpha = vals[piv]
    if exact and not (cp % alpha).any() and W.update(rows, vals, cols, cp // alpha):
        return True
    pos, lens = W.gather(cols)
    old = W.val[pos]
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
        v1 = old * np.repeat(s, lens)
        v2 = -np.outer(t, vals).ravel()
    else:
        v1 = old
        v2 = -np.outer(cp / float(alpha), vals.astype(float)).ravel()
    k = np.arange(cols.size)
    key = np.concatenate((np.repeat(k, lens) * m + W.idx[pos], np.repeat(k, rows.size) * m + np.tile(rows, cols.size)))
    val = np.concatenate((v1, v2))
    srt = np.argsort(key, kind="stable")
    key, val = key[srt], val[srt]
    first = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    key = key[first]
    val = np.add.reduceat(val, first)
    kcol = key // m
    if not exact:
        ref = np.zeros(cols.size)
        np.maximum.at(ref, kcol, np.abs(val))
        val[np.abs(val) < tol * np.maximum(ref[kcol], 1.0)] = 0.0
    nz = val != 0
    key, val, kcol = key[nz], val[nz], kcol[nz]
    counts = np.bincount(kcol, minlength=cols.size)
    if exact and val.size and np.abs(val).max() > _REDUCE_AT:
        has = counts > 0
        starts_new = np.concatenate(([0], np.cumsum(counts)[:-1]))
        gg = np.ones(cols.size, dtype=np.int64)
        gg[has] = np.gcd.reduceat(np.abs(val), starts_new[has])
        val = val // np.repeat(gg, counts)
    W.replace(cols, key - kcol * m, val, counts)
    return exact


# ----------------------------------------------------------------------------- numttHTT


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


def _column_groups(W: sparse.csc_matrix) -> np.ndarray:
    """For every column, the first column with the same content."""
    rep = np.arange(W.shape[1])
    first: dict[bytes, int] = {}
    for c in range(W.shape[1]):
        s, e = W.indptr[c], W.indptr[c + 1]
        key = W.indices[s:e].tobytes() + b"|" + W.data[s:e].tobytes()
        rep[c] = first.setdefault(key, c)
    return rep


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


def _gauss_numtthtt(W0: sparse.csc_matrix, order: np.ndarray, n_never: int, protect: np.ndarray,
                    sing: np.ndarray, codes: np.ndarray | None, tol: float) -> np.ndarray:
    """numttHTT; returns the suppressed mask over the published cells. ``codes``: contributor
    codes of the singleton rows (None: every singleton row is its own contributor)."""
    integer = codes is not None
    codes = np.where(sing, codes, 0) if integer else sing.astype(np.int64)
    if sing.any():
        srows = np.flatnonzero(codes > 0)
        keys = _keys(sparse.csc_matrix(W0.T)[:, srows])
        drop = np.zeros(W0.shape[0], dtype=bool)
        if integer:  # the same contributor in identical rows: one row is enough
            seen: set[tuple[bytes, int]] = set()
            for r, key in zip(srows, keys):
                if (key, int(codes[r])) in seen:
                    drop[r] = True
                seen.add((key, int(codes[r])))
        # singleton rows repeated more than twice are not singleton problems: one of them is
        # kept, unmarked (as the package does); pairs are kept as they are
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
            W0 = sparse.csc_matrix(W0[~drop, :])
            codes = codes[~drop]
    sing = codes > 0
    m, n = W0.shape
    if not integer:
        codes = np.zeros(m, dtype=np.int64)
        codes[sing] = np.arange(1, int(sing.sum()) + 1)
    rep = _column_groups(W0)
    reps = np.flatnonzero(rep == np.arange(n))
    new_id = np.full(n, -1)
    new_id[reps] = np.arange(reps.size)
    Wd = W0[:, reps]
    prot_d = np.zeros(reps.size, dtype=bool)
    prot_d[new_id[rep[protect]]] = True
    cand = new_id[rep[order]]
    _, first = np.unique(cand, return_index=True)
    cand = cand[np.sort(first)]
    if n_never:
        nev_d = np.unique(new_id[rep[order[:n_never]]])
        if prot_d[nev_d].any():
            raise SpecError("gauss: a never-suppressed cell equals a primary cell (same inner cells); it cannot be published")
    cand = cand[~prot_d[cand]]
    n_nev_d = int(np.isin(cand, new_id[rep[order[:n_never]]]).sum()) if n_never else 0
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
    nA = cand.size
    n_rel_end = nA + B_real.size + units.shape[1]
    # rows: the others first, then singletons by how many rows their contributor has, then code
    freq_code = np.bincount(codes)[codes] * sing
    row_order = np.lexsort((np.arange(m), codes, freq_code))
    ids1 = codes[row_order]
    Wall = sparse.csc_matrix(sparse.hstack(blocks, format="csc")[row_order, :], dtype=np.int64)
    nB0 = Wall.shape[1] - nA
    Wall = sparse.hstack([Wall, sparse.csc_matrix((m, nA), dtype=np.int64)], format="csc")  # room for new B
    Wall = sparse.csc_matrix(Wall, dtype=np.int64)
    Wall.sort_indices()
    S1 = _Columns(Wall, dense=False)  # _reveals reads the flat arrays
    ncol = Wall.shape[1]
    is_B = np.zeros(ncol, dtype=bool)
    is_B[nA:nA + nB0] = True
    next_slot = nA + nB0
    own = np.zeros(ncol, dtype=np.int64)
    rel = np.arange(nA, n_rel_end)
    for i in rel:
        rB, xB = S1.column(int(i))
        sb = ids1[rB] > 0
        if rB.size and sb.any():
            u, inv = np.unique(ids1[rB][sb], return_inverse=True)
            per = np.zeros(u.size, dtype=np.int64)
            np.add.at(per, inv, xB[sb])
            if int(np.sign(per).sum()) == 1:
                own[i] = ids1[rB[0]]
    start_nonempty = S1.nonempty()[nA:nA + B_real.size]
    S2: _Columns | None = None
    ids2 = ids1
    secondary = np.zeros(nA, dtype=bool)

    def publish(S: _Columns, j: int) -> None:
        r, x = S.column(j)
        r, x = r.copy(), x.copy()
        cols, cp = S.row(int(r[0]))
        keep = cols != j
        S.drop(j)
        if keep.any():
            if not _eliminate(S, r, x, cols[keep], cp[keep], True, tol):
                raise NotImplementedError("gauss: numttHTT needs exact integer elimination; integers overflowed")

    for j in range(nA):
        if j == n_nev_d and n_nev_d:
            lost = start_nonempty & ~S1.nonempty()[nA:nA + B_real.size]
            if lost.any():
                raise SpecError("gauss: primary cells cannot be protected: they are derivable from the cells marked "
                                "never-suppress alone")
        r1, x1 = S1.column(j)
        if not r1.size:
            continue
        r1, x1 = r1.copy(), x1.copy()
        if S2 is None and ids1[r1[0]] > 0:
            S2, ids2 = _reversed_copy(S1, ids1, ncol)
        verdict = 0
        if j >= n_nev_d:
            verdict = _reveals(S1, ids1, r1, x1, is_B, n_rel_end, own, integer)
            if not verdict and S2 is not None:
                r2, x2 = S2.column(j)
                r2, x2 = r2.copy(), x2.copy()
                verdict = _reveals(S2, ids2, r2, x2, is_B, n_rel_end, own, integer)
                if not verdict and ids1[r2[0]] and r2.size > 1:
                    verdict = _reveals(S2, ids2, np.roll(r2, -1), np.roll(x2, -1), is_B, n_rel_end, own, integer)
        if verdict:
            secondary[j] = True
            if verdict == 1:
                for S in (S1, S2):
                    if S is not None:
                        S.move(j, next_slot)
                is_B[next_slot] = True
                next_slot += 1
            else:
                S1.drop(j)
                if S2 is not None:
                    S2.drop(j)
            continue
        publish(S1, j)
        if S2 is not None:
            publish(S2, j)
    sec_d = np.zeros(reps.size, dtype=bool)
    sec_d[cand[secondary]] = True
    sec_d |= prot_d
    suppressed = np.ones(n, dtype=bool)
    suppressed[order] = sec_d[new_id[rep[order]]]
    return suppressed


def _keys(M: sparse.csc_matrix) -> list[bytes]:
    M = sparse.csc_matrix(M, dtype=np.int64)
    M.sort_indices()
    return [M.indices[M.indptr[k]:M.indptr[k + 1]].tobytes() + b"|" + M.data[M.indptr[k]:M.indptr[k + 1]].tobytes()
            for k in range(M.shape[1])]


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
