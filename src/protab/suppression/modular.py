"""Modular secondary cell suppression: a hierarchical table cut into non-hierarchical subtables
along its hierarchies, each protected by the optimal mode (:func:`protab.suppression.optimal`),
the pattern made consistent across subtables (in the spirit of tau-ARGUS' MODULAR and sdcTable's
HITAS: de Wolf 2002, *HiTaS: a heuristic approach to cell suppression in hierarchical tables*;
docs/methods.md §6.4).

Subtables
---------
A cell has, in each dimension d, a code c_d. A subtable is one parent code P_d per dimension,
crossed: its cells are those with c_d ∈ {P_d} ∪ children(P_d) in every d, its inner cells
those with a child code in every d, and its published cells add up from its inner cells as a
table with margins (the hierarchy's levels below are not seen). A cell lies in up to 2^k
subtables: in d as the parent (a code with children) or as a child (a code with a parent).

Consistency
-----------
Subtables are solved from the top (largest grand total first). In each, the cells already
suppressed (in any subtable) are forced, and besides the primary cells (with their levels)
they are protected from exact disclosure (the optimal mode's minimum width): a total hidden in
its upper subtable must not be recomputable in the subtable where it is an inner cell. A
subtable is solved again when a later one has suppressed one of its cells; passes repeat until
no subtable changes. Suppressions only grow, so this ends.

The whole pattern then goes through the exact audit of every primary cell
(:func:`protab.suppression.intervals`); a primary cell it leaves under-protected (cells in
several subtables can combine) gets Gauss-mode secondaries
(:func:`protab.suppression.protect_in_order`, dearest cells published first), and the result
counts them (``fallback``). ``time_limit`` bounds the subtable passes: when it runs out, the
pattern so far is completed by the same step and ``complete`` is false. The pattern is never
proven optimal for the whole table (each subtable's is least cost given the others).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse

from protab.errors import InputError
from protab.suppression._audit_inputs import _cells
from protab.suppression._protection import _requirements
from protab.suppression.optimal import _check_limit, _cost, _names, _unprotected, _with_min_width, optimal
from protab.suppression.pattern_audit import _prepare

__all__ = ["ModularSuppression", "modular", "subtables"]


@dataclass(frozen=True)
class ModularSuppression:
    """The result of :func:`modular`.

    ``suppressed``: bool per published cell; ``cost``: its cost; ``complete``: every subtable
    solved to its proof and the passes stable before ``time_limit``; ``subtable_gap``: the
    largest gap of a subtable stopped by the limit (0 when none was); ``subtables``: how many;
    ``solves``: subtable MILP searches run; ``passes``: passes over the subtables;
    ``fallback``: cells added by the final Gauss-mode step; ``timed_out``: the limit stopped the
    passes; ``seconds``: time taken. The gap of the whole table is not known."""

    suppressed: np.ndarray
    cost: float
    complete: bool
    timed_out: bool
    subtable_gap: float
    subtables: int
    solves: int
    passes: int
    fallback: int
    seconds: float


def subtables(codes: Any, parent: list[Any]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The subtables of a table (module docstring): per subtable (cells, roles), ``cells`` the
    published-cell indices and ``roles`` a bit per dimension (set: the cell holds the parent code
    there; 0: an inner cell of the subtable).

    ``codes``: (cells × dimensions) integer code ids; ``parent[d]``: per code id of dimension
    d its parent's id, −1 at the root."""
    codes = np.asarray(codes, dtype=np.int64)
    m, k = codes.shape
    par = [np.asarray(p, dtype=np.int64) for p in parent]
    has_kids = [np.bincount(p[p >= 0], minlength=p.size) > 0 for p in par]
    cells, keys, roles = [], [], []
    for mask in range(1 << k):
        ok = np.ones(m, dtype=bool)
        key = np.empty((m, k), dtype=np.int64)
        for d in range(k):
            c = codes[:, d]
            if mask >> d & 1:
                ok &= has_kids[d][c]
                key[:, d] = c
            else:
                key[:, d] = par[d][c]
                ok &= key[:, d] >= 0
        cells.append(np.flatnonzero(ok))
        keys.append(key[ok])
        roles.append(np.full(int(ok.sum()), mask, dtype=np.int64))
    cell, key, role = np.concatenate(cells), np.concatenate(keys), np.concatenate(roles)
    _, group = np.unique(key, axis=0, return_inverse=True)
    group = group.ravel()
    order = np.argsort(group, kind="stable")
    bounds = np.flatnonzero(np.diff(group[order])) + 1
    return [(cell[i], role[i]) for i in np.split(order, bounds) if (role[i] == 0).any()]


def _local_matrix(codes: np.ndarray, cells: np.ndarray, roles: np.ndarray) -> sparse.csc_array:
    """The subtable's inner-to-published matrix: inner cell i adds to cell j when their codes
    agree in every dimension where j holds a child code."""
    inner = cells[roles == 0]
    ci, cj = codes[inner], codes[cells]
    hit = np.ones((inner.size, cells.size), dtype=bool)
    for d in range(codes.shape[1]):
        hit &= ((roles >> d) & 1).astype(bool)[None, :] | (ci[:, d][:, None] == cj[:, d][None, :])
    return sparse.csc_array(hit.astype(np.float64))


def modular(X: Any, z: Any, primary: Any, *, codes: Any, parent: list[Any], cost: Any, never: Any = None,
            protection_lower: Any = None, protection_upper: Any = None, protection_range: Any = None,
            p_percent: float | None = None, x1: Any = None, x2: Any = None, lower: Any = 0.0,
            upper: Any = None, time_limit: float | None = None, labels: Any = None) -> ModularSuppression:
    """Suppression by optimal subtables made consistent, then the exact audit (module docstring).

    ``X``, ``z``, ``primary``, ``cost``, ``never``, the requirements and bounds are those of
    :func:`protab.suppression.optimal`; ``codes`` and ``parent`` the table's cells and
    hierarchies (:func:`subtables`). Raises InputError naming the cell and subtable where a
    primary cell cannot be protected even with every other cell of its subtable suppressed.
    """
    t0 = time.monotonic()
    A, zz, _, lo, up = _prepare(X, z, None, lower, upper)
    m = A.shape[1]
    prim = _cells(primary, m, "primary")
    nev = _cells(never, m, "never")
    w = _cost(cost, m, A.shape)
    _check_limit(time_limit)
    codes = np.asarray(codes, dtype=np.int64)
    if codes.shape[0] != m:
        raise InputError(f"modular suppression: codes has {codes.shape[0]} rows for {m} published cells")
    req = _with_min_width(_requirements(A, zz, prim, prim, protection_lower, protection_upper, protection_range,
                                        p_percent, x1, x2, lo, up), zz)
    parts = subtables(codes, parent)
    parts.sort(key=lambda p: -float(np.abs(zz[p[0]]).max(initial=0.0)))
    run = _Run(A, zz, codes, req, w, prim, nev, labels, t0, time_limit)
    supp, timed_out = run.passes(parts)
    supp, added = _complete(A, zz, lo, up, req, w, supp, nev, max(1.0, float(np.abs(zz).max(initial=0.0))))
    done = run.proven and not timed_out and not added
    return ModularSuppression(supp, float(w[supp].sum()), done, timed_out, run.gap, len(parts), run.solves,
                              run.rounds, added, time.monotonic() - t0)


class _Run:
    """The passes over the subtables (module docstring)."""

    def __init__(self, A: sparse.csc_array, z: np.ndarray, codes: np.ndarray, req: Any, cost: np.ndarray,
                 prim: np.ndarray, never: np.ndarray, labels: Any, t0: float, limit: float | None) -> None:
        self.A, self.z, self.codes, self.req, self.cost = A, z, codes, req, cost
        self.prim, self.never, self.labels, self.t0, self.limit = prim, never, labels, t0, limit
        self.solves = self.rounds = 0
        self.gap = 0.0
        self.proven = True

    def left(self) -> float | None:
        return None if self.limit is None else self.limit - (time.monotonic() - self.t0)

    def passes(self, parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, bool]:
        supp = self.prim.copy()
        seen = np.full(len(parts), -1)  # suppressed cells of each subtable when it was last solved
        while True:
            self.rounds += 1
            changed = False
            for i, (cells, roles) in enumerate(parts):
                n = int(supp[cells].sum())
                if n == seen[i] or n == 0:
                    continue
                left = self.left()
                if left is not None and left <= 0:
                    return supp, True
                supp[cells] |= self._solve(cells, roles, supp[cells], left)
                seen[i] = int(supp[cells].sum())
                changed = True
            if not changed:
                return supp, False

    def _solve(self, cells: np.ndarray, roles: np.ndarray, forced: np.ndarray, left: float | None) -> np.ndarray:
        """The subtable's optimal pattern with its suppressed cells forced and protected."""
        req = self.req
        inner = cells[roles == 0]
        B = _local_matrix(self.codes, cells, roles)
        real = self.prim[cells]
        protect = forced & ~self.never[cells]
        labels = None if self.labels is None else _SubLabels(self.labels, cells)
        kw = dict(cost=self.cost[cells], forced=forced, never=self.never[cells] & ~forced,
                  protection_lower=np.where(real, req.L[cells], 0.0),
                  protection_upper=np.where(real, req.U[cells], 0.0),
                  protection_range=np.where(real, req.R[cells], 0.0),
                  lower=req.cmin[inner], upper=req.cmax[inner], time_limit=left, labels=labels)
        self.solves += 1
        try:
            res = optimal(B, self.z[cells], protect, **kw)
        except InputError:
            bad = self._unprotectable(B, cells, real, kw)
            if bad.size:
                raise InputError(
                    f"modular suppression: primary cells {_names(cells[bad], self.labels)} cannot be protected in "
                    f"their subtable of {cells.size} cells (with {_names(cells[roles == roles.max()][:1], self.labels)} "
                    "as its total) even with every other cell of it suppressed; use method='optimal' or 'gauss'"
                ) from None
            res = optimal(B, self.z[cells], real, **kw)  # the other suppressed cells cannot all be kept hidden here
        if not res.optimal:
            self.proven = False
            self.gap = max(self.gap, res.gap)
        return res.suppressed

    def _unprotectable(self, B: sparse.csc_array, cells: np.ndarray, real: np.ndarray, kw: dict[str, Any]) -> np.ndarray:
        """Local indices of the subtable's primary cells that miss their levels with every cell
        but the never ones suppressed."""
        A, z, _, lo, up = _prepare(B, self.z[cells], None, kw["lower"], kw["upper"])
        req = _with_min_width(_requirements(A, z, real, real, kw["protection_lower"], kw["protection_upper"],
                                            kw["protection_range"], None, None, None, lo, up), z)
        scale = max(1.0, float(np.abs(z).max(initial=0.0)))
        return _unprotected(A, z, ~kw["never"], lo, up, req, scale)


class _SubLabels:
    """The names of a subtable's cells, looked up only for the cells an error names."""

    def __init__(self, labels: Any, cells: np.ndarray) -> None:
        self.labels, self.cells = labels, cells

    def __getitem__(self, i: int) -> Any:
        return self.labels[int(self.cells[i])]


def _complete(A: sparse.csc_array, z: np.ndarray, lo: np.ndarray, up: np.ndarray, req: Any, cost: np.ndarray,
              supp: np.ndarray, never: np.ndarray, scale: float) -> tuple[np.ndarray, int]:
    """The exact audit of the whole pattern, and Gauss-mode secondaries where it fails."""
    from protab.suppression._interval_order import protect_in_order

    if _unprotected(A, z, supp, lo, up, req, scale).size == 0:
        return supp, 0
    order = np.argsort(-cost, kind="stable")
    out = protect_in_order(A, z, supp & ~never, req.primary, candidates=order, never=never,
                           protection_lower=req.L, protection_upper=req.U, protection_range=req.R, lower=lo, upper=up)
    return out, int((out & ~supp).sum())
