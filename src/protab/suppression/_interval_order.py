"""Interval protection in candidate order (the way GaussSuppression's ``rangePercent``/``rangeMin``
and ``IntervalLimits`` add suppressions, Langsrud's ``FixRiskyIntervals``): published cells are
taken back in the order they were published, the most desirable first, and a cell is suppressed
when publishing it would make the interval of a primary cell miss its protection levels.

Why this gives every primary cell its levels: publishing more cells only narrows intervals, so
whether "the first i cells of the order (less those suppressed so far) leave some primary cell
under-protected" is monotone in i. The first such i names the cell whose publication breaks a
requirement; it is suppressed and the walk goes on after it. At the end, everything still
published is the prefix walked through, which passed the test. The first i is found by
bisection (one audit of the under-protected primary cells per probe), so the cost is about
(number of added cells + 1) · log2(published cells) audits. Then, as in GaussSuppression, the
Gaussian elimination runs once more with every suppressed cell as primary (no singleton
method), so that no suppressed cell is derivable; in exact arithmetic it adds nothing (a cell
taken back cannot lie in the span of the published ones, else publishing it would have changed
nothing).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse

from protab.errors import InputError, ProtabError, show_values
from protab.suppression._audit_inputs import _cells
from protab.suppression._protection import _Req, _requirements, _status
from protab.suppression.pattern_audit import _intervals, _prepare

__all__ = ["protect_in_order"]


def protect_in_order(X: Any, z: Any, suppressed: Any, primary: Any, *, candidates: Any = None, never: Any = None,
                     protection_lower: Any = None, protection_upper: Any = None, protection_range: Any = None,
                     p_percent: float | None = None, x1: Any = None, x2: Any = None, lower: Any = 0.0,
                     upper: Any = None) -> np.ndarray:
    """Suppress published cells, in candidate order, until every primary cell meets its
    protection levels; returns the new suppressed mask (module docstring).

    ``candidates``: published-cell indices, most desirable to publish first (the order of
    :func:`protab.suppression.gauss`; cells missing from it follow in index order); ``never``:
    cells that stay published. The requirements are those of :func:`protab.suppression.audit_pattern`.
    Raises InputError when some primary cell misses its levels even with every other cell
    (except ``never``) suppressed: no pattern can meet them.
    """
    from protab.suppression.gauss import gauss

    A, zz, supp, lo, up = _prepare(X, z, suppressed, lower, upper)
    m = A.shape[1]
    prim = _cells(primary, m, "primary")
    nev = _cells(never, m, "never")
    if (nev & (prim | supp)).any():
        raise InputError(f"protect_in_order: cells both never-suppressed and suppressed: "
                         f"{show_values(np.flatnonzero(nev & (prim | supp)).tolist())}")
    supp = supp | prim
    req = _requirements(A, zz, supp, prim, protection_lower, protection_upper, protection_range, p_percent,
                        x1, x2, lo, up)
    scale = max(1.0, float(np.abs(zz).max(initial=0.0)))
    walk = _Walk(A, zz, lo, up, req, scale, nev)
    risky = walk.risky(~supp, np.flatnonzero(prim))
    if risky.size == 0:
        return supp
    order = _published_order(candidates, supp | nev, m)
    extra = walk.take_back(order, risky)
    out = supp.copy()
    out[order[extra]] = True
    out = gauss(sparse.csc_matrix(A), zz, out, candidates=order, never=nev, singleton_method="none")
    left = walk.risky(~out, risky)
    if left.size:
        raise ProtabError(f"protect_in_order: primary cells {show_values(left.tolist())} still miss their "
                          "protection levels (numerical trouble in the LPs)")
    return out


def _published_order(candidates: Any, suppressed: np.ndarray, m: int) -> np.ndarray:
    """The published cells (not suppressed, not never) in candidate order, then the rest in
    index order, as GaussSuppression's ``unique(c(candidates, seq_len(ncol(x))))``."""
    if candidates is None:
        cand = np.arange(m)
    else:
        cand = np.asarray(candidates)
        if cand.ndim != 1 or (cand.size and cand.dtype.kind not in "iu") or (cand.size and (
                cand.min() < 0 or cand.max() >= m)):
            raise InputError(f"protect_in_order: candidates must be published-cell indices in 0..{m - 1}")
        cand = np.concatenate([cand.astype(np.int64), np.arange(m)])
    _, first = np.unique(cand, return_index=True)
    cand = cand[np.sort(first)]
    return cand[~suppressed[cand]]


class _Walk:
    """The audits of the walk: which primary cells miss their levels for a set of published cells."""

    def __init__(self, A: sparse.csc_array, z: np.ndarray, lo: np.ndarray, up: np.ndarray, req: _Req,
                 scale: float, never: np.ndarray) -> None:
        self.A, self.z, self.lo, self.up, self.req, self.scale, self.never = A, z, lo, up, req, scale, never

    def risky(self, published: np.ndarray, cells: np.ndarray) -> np.ndarray:
        """The cells among ``cells`` (primary) that miss their levels when ``published`` are."""
        low, high, _ = _intervals(self.A, self.z, ~published, self.lo, self.up, which=cells)
        protected, _ = _status(low, high, self.z, self.req, self.scale)
        return cells[~protected[cells]]

    def take_back(self, order: np.ndarray, check: np.ndarray) -> np.ndarray:
        """Which cells of ``order`` (published, in order) to suppress: each first cell whose
        publication, after the ones kept before it, leaves a cell of ``check`` under-protected."""
        k = order.size
        extra = np.zeros(k, dtype=bool)

        def bad(i: int) -> bool:
            pub = self.never.copy()
            pub[order[:i][~extra[:i]]] = True
            return self.risky(pub, check).size > 0

        if bad(0):
            raise InputError(
                f"protection levels cannot be met: primary cells {show_values(self.risky(self.never, check).tolist())} "
                "miss them even with every other cell suppressed (a cell with no possible partner, or a level "
                "larger than the bounds on its inner cells allow)"
            )
        safe = 0
        while bad(k):
            hi = k
            while hi - safe > 1:  # bisection: prefix `safe` passes, prefix `hi` fails
                mid = (safe + hi) // 2
                if bad(mid):
                    hi = mid
                else:
                    safe = mid
            extra[hi - 1] = True
            safe = hi
        return extra
