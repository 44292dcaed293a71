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
columns entry by entry and keeps the package's first-row pivots.) tests/suppression/test_suppression_gauss_props.py
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
tests/suppression/test_suppression_gauss.py runs the reference outputs of GaussSuppression 1.2.3 /
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

from protab.errors import ProtabError, SpecError, show_values
from protab.suppression._candidates import _candidate_order, candidates_default, candidates_num
from protab.suppression._elimination import _greedy_elimination
from protab.suppression._exact_test import derivable
from protab.suppression._numtthtt import _gauss_numtthtt
from protab.suppression._singletons import _drop_duplicate_rows, _resolve_method, _virtual_primaries
from protab.suppression._suppression_inputs import (
    _as_int_csc,
    _check_cells,
    _check_costs,
    _check_method,
    _float_vector,
    _singleton_rows,
)

__all__ = ["candidates_default", "candidates_num", "derivable", "gauss"]


def gauss(X: Any, z: Any, primary: Any, *, candidates: Sequence[int] | np.ndarray | None = None, forced: Any = None,
          never: Any = None, singleton: Any = None, singleton_method: str = "anySum", freq: Any = None,
          weight: Any = None, tol: float = 1e-9) -> np.ndarray:
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
    return _gauss(X, z, primary, candidates=candidates, forced=forced, never=never, singleton=singleton,
                  singleton_method=singleton_method, freq=freq, weight=weight, tol=tol)


def _gauss(X: Any, z: Any, primary: Any, *, candidates: Any = None, forced: Any = None, never: Any = None,
           singleton: Any = None, singleton_method: str = "anySum", freq: Any = None, weight: Any = None,
           tol: float = 1e-9, auto: tuple[bool, bool] = (True, True)) -> np.ndarray:
    """:func:`gauss`; ``auto``: whether anySum may turn into anySumNOTprimary (published singleton
    cells) and into subSumAny (never cells), as the package's ``auto_anySumNOTprimary`` and
    ``auto_subSumAny`` (its linked tables turn them off: their rows are merged first)."""
    W0 = _as_int_csc(X)
    m, n = W0.shape
    _check_method(singleton_method)
    zv = _float_vector(z, n, "z")
    prim, forc, nev = _check_cells(n, primary, forced, never)
    sing, codes = _singleton_rows(singleton, m, singleton_method)
    freq = _check_costs(freq, weight, n, tol)
    protect = prim | forc
    order = _candidate_order(W0, zv, candidates, freq, weight, protect, nev)
    suppressed = np.ones(n, dtype=bool)
    suppressed[order] = False
    if not protect.any():
        return suppressed
    _check_nonempty(W0, protect)
    method, sing = _resolve_method(W0, singleton_method, sing, protect, nev, auto)
    n_never = int(nev.sum())
    if method == "numttHTT":
        return _gauss_numtthtt(W0, order, n_never, protect, sing, codes, tol)
    W0, sing = _drop_duplicate_rows(W0, sing)
    extra, sing = _virtual_primaries(W0, sing, protect, method)
    secondary, exact = _greedy_elimination(W0, sing, order, protect, extra, method, n_never, tol)
    suppressed[order[secondary]] = True
    if not exact:
        _verify(X, suppressed, protect)
    return suppressed


def _check_nonempty(W0: sparse.csc_matrix, protect: np.ndarray) -> None:
    """Cells to protect must have inner cells (an empty column is known to be 0)."""
    empty_primary = protect & (np.diff(W0.indptr) == 0)
    if empty_primary.any():
        raise SpecError(
            f"gauss: primary cells {show_values(np.flatnonzero(empty_primary).tolist())} have no inner cells "
            "(an empty column of X): their value is known to be 0 and cannot be protected; build X with "
            "extend0 or do not mark them primary"
        )


def _verify(X: Any, suppressed: np.ndarray, protect: np.ndarray) -> None:
    """After the float fallback: no cell to protect may be derivable (the exact test)."""
    bad = derivable(X, suppressed) & protect
    if bad.any():
        raise ProtabError(
            "gauss: the floating-point fallback (integer overflow in the elimination) left primary cells "
            f"{show_values(np.flatnonzero(bad).tolist())} derivable; the table is numerically too hard"
        )
