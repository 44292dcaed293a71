"""The ``"consistent"`` mode of linked tables (:mod:`protab.suppression.linked`): the tables side
by side (a block-diagonal model matrix of their own inner cells) and the copies of every common
cell tied into a *group* that is suppressed or published as one, without the attacker being
told that the copies are equal (that is the super-consistent mode).

The greedy choice of GaussSuppression (its ``cell_grouping``) over groups instead of cells.
The candidates are visited in order, the published cells spanning a space S; at an undecided
candidate c:

* if c is already in S (derivable from the published cells) it is published, and the rest of
  its group is visited next as one block;
* otherwise the block is c with the rest of its group, closed under "would become derivable":
  a grouped candidate of another group that lies in S + span(block) would be published with
  the block, so it and its group join the block (repeated until nothing joins);
* the block is suppressed when some primary cell (or forced one) lies in S + span(block),
  else all of it is published.

A common cell is therefore suppressed in every table or in none (apart from a copy made
derivable by the cells published in its table before the rest of its group was reached, which
the package also leaves inconsistent), and no primary cell is derivable from the equations of
the tables side by side; an attacker who also equates the copies is the super-consistent mode's.

The span tests are dense floating-point projections (the residuals of every column modulo S,
updated as cells are published; a block's orthonormal basis by SVD), checked at the end by the
exact rank test :func:`protab.suppression.derivable` on the block-diagonal matrix: a failed check
raises instead of returning an unsafe pattern. The residuals are dense (inner rows x cells of
all tables, float64; refused past 4 GiB): three linked two-way tables of 2 883 cells take
about 2 s, of 19 683 cells about 2.4 minutes and 3 GiB (super-consistent: 8 s, the sparse
elimination of :mod:`protab.suppression.gauss`). Only the
singleton method "none" is implemented (the package also refuses several methods here).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from protab.errors import ProtabError, SpecError, show_values
from protab.suppression._exact_test import derivable

_TOL = 1e-9
_MAX_ENTRIES = 2**29  # 4 GiB of float64 residuals


class _Span:
    """Residuals of every column of X modulo the span of the published columns, with their
    number of non-zero entries (a column can lie in a span only within that span's rows, so
    every test looks at the rows of the block only)."""

    def __init__(self, X: sparse.csc_matrix) -> None:
        if X.shape[0] * X.shape[1] > _MAX_ENTRIES:
            raise SpecError(f"linked tables: the 'consistent' mode keeps {X.shape[0]} inner rows x {X.shape[1]} "
                            f"cells dense ({X.shape[0] * X.shape[1] * 8 / 2**30:.1f} GiB, more than "
                            f"{_MAX_ENTRIES * 8 / 2**30:.0f}); use 'super-consistent' or 'local' for tables this large")
        self.R = np.asarray(X.toarray(), dtype=float)
        self.scale = np.maximum(1.0, np.abs(self.R).max(axis=0)) if self.R.size else np.ones(X.shape[1])
        self.nnz = np.count_nonzero(self.R, axis=0)

    def zero(self, cols: np.ndarray) -> np.ndarray:
        """Whether the columns are in the published span (empty residual)."""
        return self.nnz[cols] == 0

    def within(self, block: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Whether each of ``cols`` lies in the published span plus the span of ``block``."""
        out = np.zeros(cols.size, dtype=bool)
        rows = np.flatnonzero(np.any(self.R[:, block] != 0, axis=1))
        if not cols.size or not rows.size:
            return out
        inside = np.count_nonzero(self.R[np.ix_(rows, cols)], axis=0)
        maybe = np.flatnonzero((inside == self.nnz[cols]) & (self.nnz[cols] > 0))
        if not maybe.size:
            return out
        U, sv, _ = np.linalg.svd(self.R[np.ix_(rows, block)], full_matrices=False)
        U = U[:, sv > _TOL * max(1.0, sv.max(initial=0.0))]
        Rc = self.R[np.ix_(rows, cols[maybe])]
        res = Rc - U @ (U.T @ Rc)
        out[maybe] = np.abs(res).max(axis=0, initial=0.0) <= 1e-7 * self.scale[cols[maybe]]
        return out

    def publish(self, cols: np.ndarray) -> None:
        """Add the columns to the published span (one pivot step each, on the columns that
        have the pivot row)."""
        for c in cols:
            if self.nnz[c] == 0:
                continue
            r = self.R[:, c]
            p = int(np.argmax(np.abs(r)))
            hit = np.flatnonzero(r)
            r = r[hit] / r[p]
            touched = np.flatnonzero(self.R[p] != 0)
            block = self.R[np.ix_(hit, touched)] - np.outer(r, self.R[p, touched])
            block[np.abs(block) <= _TOL * self.scale[touched]] = 0.0
            self.R[np.ix_(hit, touched)] = block
            self.R[p, touched] = 0.0
            self.nnz[touched] = np.count_nonzero(self.R[:, touched], axis=0)


def consistent_elimination(X: sparse.csc_matrix, protect: np.ndarray, never: np.ndarray, order: np.ndarray,
                           group: np.ndarray) -> np.ndarray:
    """Suppressed mask over the columns of the block-diagonal ``X``: ``protect`` (primary and
    forced copies), ``never`` (published first), ``order`` (the candidates, best to publish
    first; columns missing are suppressed), ``group`` (one id per column, the copies of a
    common cell share it; -1 = not common)."""
    n = X.shape[1]
    group = np.asarray(group, dtype=np.int64).copy()
    protect = _spread(protect, group)
    never = _spread(never, group) & ~protect
    sp = _Span(X)
    suppressed = np.ones(n, dtype=bool)
    first = np.flatnonzero(never)
    sp.publish(first)
    suppressed[first] = False
    prim = np.flatnonzero(protect)
    if prim.size and sp.zero(prim).any():
        bad = prim[sp.zero(prim)]
        raise SpecError(f"suppress: cells that must not be suppressed disclose primary cells {show_values(bad.tolist())}")
    # a group with a member derivable from the never-suppressed cells is not kept together
    hit = np.unique(group[np.flatnonzero(sp.zero(np.arange(n)) & (group >= 0))])
    group[np.isin(group, hit)] = -1
    order = np.asarray(order, dtype=np.int64)
    order = order[~protect[order] & ~never[order]]
    undecided = np.zeros(n, dtype=bool)
    undecided[order] = True
    _visit(sp, order, undecided, suppressed, group, prim)
    suppressed[protect] = True
    _verify(X, suppressed, protect)
    return suppressed


def _visit(sp: _Span, order: np.ndarray, undecided: np.ndarray, suppressed: np.ndarray, group: np.ndarray,
           prim: np.ndarray) -> None:
    """The greedy visit of the candidates, block by block (module docstring)."""
    for c in order:
        if not undecided[c]:
            continue
        undecided[c] = False
        if sp.zero(np.array([c]))[0]:
            suppressed[c] = False
            mates = np.flatnonzero(undecided & (group == group[c])) if group[c] >= 0 else np.zeros(0, np.int64)
            if not mates.size:
                continue
            undecided[mates] = False
            block = mates
        else:
            block = np.array([c], dtype=np.int64)
            if group[c] >= 0:
                mates = np.flatnonzero(undecided & (group == group[c]))
                undecided[mates] = False
                block = np.concatenate((block, mates))
        block = _close(sp, block, undecided, group)
        if prim.size and sp.within(block, prim).any():
            continue  # the block stays suppressed
        suppressed[block] = False
        sp.publish(block)


def _close(sp: _Span, block: np.ndarray, undecided: np.ndarray, group: np.ndarray) -> np.ndarray:
    """The block with every undecided grouped candidate (and its group) that it would make
    derivable, until nothing joins."""
    while True:
        others = np.flatnonzero(undecided & (group >= 0))
        if not others.size:
            return block
        others = others[~sp.zero(others)]
        join = others[sp.within(block, others)]
        if not join.size:
            return block
        more = np.flatnonzero(undecided & np.isin(group, np.unique(group[join])))
        undecided[more] = False
        block = np.concatenate((block, more))


def _spread(mask: np.ndarray, group: np.ndarray) -> np.ndarray:
    """The mask extended to every member of a group that has a member in it."""
    out = np.asarray(mask, dtype=bool).copy()
    g = np.unique(group[out & (group >= 0)])
    out[np.isin(group, g) & (group >= 0)] = True
    return out


def _verify(X: sparse.csc_matrix, suppressed: np.ndarray, protect: np.ndarray) -> None:
    bad = derivable(X, suppressed) & protect
    if bad.any():
        raise ProtabError("linked tables (consistent): the floating-point elimination left primary cells "
                          f"{show_values(np.flatnonzero(bad).tolist())} derivable; the tables are numerically too hard")
