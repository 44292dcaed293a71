"""Optimal secondary cell suppression: the pattern of least cost that gives every primary cell
its protection levels (the classical model of Fischetti and Salazar-González 2001, behind
tau-ARGUS' OPTIMAL and sdcTable's OPT; docs/methods.md §6.4).

Model
-----
One binary x_c per published cell (1 = suppressed): minimise Σ cost_c·x_c with x = 1 at the
primary (and forced) cells, x = 0 at the ``never`` cells, such that for every primary cell p
the attacker's interval [lo_p, up_p] (:func:`protab.suppression.audit_pattern`: min and max of x_pᵀy
over the inner values y within the bounds that reproduce every published cell) reaches
z_p − L_p and z_p + U_p and has width at least R_p. A primary cell is never left exactly
disclosed: its width must be at least max(R_p, 1 % of |z_p|, 10⁻⁶·max|z|), the default step of
:func:`protab.suppression.protect`.

Those conditions are an LP per cell and end, so they are not written out: they are generated
as cuts (Benders decomposition, "branch and cut" in its simplest form: cuts between MILPs).
The master MILP (HiGHS through ``scipy.optimize.milp``) starts with no protection constraint;
its optimum is audited with the exact interval LPs, and each primary cell that misses a level
gives a capacity cut from the duals of its LP (:mod:`protab.suppression._optimal_cuts`), a
linear inequality that every protecting pattern satisfies and the audited one violates. The
master is solved again with the cuts, until its optimum passes the audit: that pattern is
optimal, since each master is a relaxation of the problem.

Time limit
----------
``time_limit`` (seconds) bounds the whole search. When it runs out before the proof, the last
master solution is completed into a protecting pattern by :func:`protect_in_order` (published
cells taken back dearest first), and the result says that it is not proven optimal, with the
master's lower bound and the relative gap (cost − bound)/cost. Every pattern returned passes the
exact audit; one that does not is never returned.

Bad input: a negative, NaN or missing cost, or levels that no pattern meets (a primary cell that
misses them even with every cell but the ``never`` ones suppressed: no possible partner)
raise :class:`protab.errors.InputError` naming the cells.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from protab.errors import InputError, show_values
from protab.suppression._audit_inputs import _cells, _finite, _vector
from protab.suppression._optimal_cuts import _Attacker, _Cut, cuts_for
from protab.suppression._protection import _Req, _requirements, _status, _targets
from protab.suppression.pattern_audit import _intervals, _prepare

__all__ = ["OptimalSuppression", "optimal"]


@dataclass(frozen=True)
class OptimalSuppression:
    """The result of :func:`optimal`.

    ``suppressed``: bool per published cell (primary, forced and secondary); ``cost``: its cost;
    ``bound``: a lower bound on the cost of every protecting pattern; ``optimal``: whether the
    pattern is proven of least cost (``gap`` 0 then, up to HiGHS' tolerance); ``gap``:
    (cost − bound)/cost; ``rounds``: master MILPs solved; ``cuts``: protection cuts generated;
    ``seconds``: time taken."""

    suppressed: np.ndarray
    cost: float
    bound: float
    optimal: bool
    gap: float
    rounds: int
    cuts: int
    seconds: float


def optimal(X: Any, z: Any, primary: Any, *, cost: Any, forced: Any = None, never: Any = None,
            protection_lower: Any = None, protection_upper: Any = None, protection_range: Any = None,
            p_percent: float | None = None, x1: Any = None, x2: Any = None, lower: Any = 0.0,
            upper: Any = None, time_limit: float | None = None, labels: Any = None) -> OptimalSuppression:
    """The least-cost suppression pattern that meets every primary cell's protection levels
    (module docstring).

    ``X``, ``z``, the requirements and ``lower``/``upper`` are those of
    :func:`protab.suppression.audit_pattern`; ``primary``: mask or indices of the cells to protect;
    ``cost``: one number of 0 or more per published cell (e.g. |z|, the frequencies, or ones for
    the number of cells); ``forced``: cells suppressed whatever they cost (not protected);
    ``never``: cells that stay published; ``time_limit``: seconds (None: until proven);
    ``labels``: optional names of the published cells for error messages.
    """
    t0 = time.monotonic()
    A, zz, _, lo, up = _prepare(X, z, None, lower, upper)
    m = A.shape[1]
    prim = _cells(primary, m, "primary")
    forc = _cells(forced, m, "forced") | prim
    nev = _cells(never, m, "never")
    w = _cost(cost, m, A.shape)
    _check_limit(time_limit)
    if (nev & forc).any():
        raise InputError(f"optimal suppression: cells both never suppressed and primary or forced: "
                         f"{_names(np.flatnonzero(nev & forc), labels)}")
    req = _requirements(A, zz, forc, prim, protection_lower, protection_upper, protection_range, p_percent,
                        x1, x2, lo, up)
    req = _with_min_width(req, zz)
    scale = max(1.0, float(np.abs(zz).max(initial=0.0)))
    _check_possible(A, zz, lo, up, req, nev, scale, labels)
    search = _Search(A, zz, lo, up, req, w, forc, nev, scale, labels)
    return search.run(t0, time_limit)


def _cost(cost: Any, m: int, shape: tuple[int, int]) -> np.ndarray:
    if cost is None:
        raise InputError("optimal suppression: a cost per published cell is needed (e.g. |z|, frequencies, ones)")
    c = np.asarray(cost, dtype=np.float64)
    c = np.full(m, float(c)) if c.ndim == 0 else _vector(c, m, "cost", shape)
    _finite(c, "cost")
    if (c < 0).any():
        raise InputError(f"optimal suppression: cost must be 0 or more; negative at cells "
                         f"{show_values(np.flatnonzero(c < 0).tolist())}")
    return c


def _check_limit(time_limit: Any) -> None:
    if time_limit is None:
        return
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not np.isfinite(time_limit) \
            or time_limit <= 0:
        raise InputError(f"optimal suppression: time_limit must be a number of seconds > 0, got {time_limit!r}")


def _names(cells: np.ndarray, labels: Any) -> str:
    if labels is None:
        return show_values(cells.tolist())
    return show_values([labels[i] for i in cells.tolist()])


def _with_min_width(req: _Req, z: np.ndarray) -> _Req:
    """The requirement with a width of at least 1 % of |z| (and 10⁻⁶ of max |z|) at every primary
    cell, within what the bounds allow: the cell is not to be disclosed exactly."""
    scale = max(1.0, float(np.abs(z).max(initial=0.0)))
    eps = np.maximum(0.01 * np.abs(z), 1e-6 * scale)
    room = req.cmax - req.cmin
    eps = np.where(room > 0, np.minimum(eps, room), eps)
    R = np.where(req.primary, np.maximum(req.R, eps), 0.0)
    return _Req(req.primary, req.L, req.U, R, req.cmin, req.cmax)


def _unprotected(A: sparse.csc_array, z: np.ndarray, supp: np.ndarray, lo: np.ndarray, up: np.ndarray,
                 req: _Req, scale: float) -> np.ndarray:
    """The primary cells that miss their levels when ``supp`` are suppressed (the exact audit)."""
    cells = np.flatnonzero(req.primary)
    low, high, _ = _intervals(A, z, supp, lo, up, which=cells)
    protected, _ = _status(low, high, z, req, scale)
    return cells[~protected[cells]]


def _check_possible(A: sparse.csc_array, z: np.ndarray, lo: np.ndarray, up: np.ndarray, req: _Req,
                    never: np.ndarray, scale: float, labels: Any) -> None:
    bad = _unprotected(A, z, ~never, lo, up, req, scale)
    if bad.size:
        raise InputError(
            f"optimal suppression: protection levels cannot be met: primary cells {_names(bad, labels)} miss them "
            "even with every other cell suppressed (a cell with no possible partner, or a level larger than the "
            "bounds on its inner cells allow)"
        )


class _Search:
    """The cut loop: master MILP, exact audit, cuts (module docstring)."""

    def __init__(self, A: sparse.csc_array, z: np.ndarray, lo: np.ndarray, up: np.ndarray, req: _Req,
                 cost: np.ndarray, forced: np.ndarray, never: np.ndarray, scale: float, labels: Any) -> None:
        self.A, self.z, self.lo, self.up, self.req, self.cost = A, z, lo, up, req, cost
        self.forced, self.never, self.scale, self.labels = forced, never, scale, labels
        self.tol = 1e-7 * scale
        self.t_lo, self.t_hi = _targets(req, z)
        self.cuts: list[_Cut] = []
        self.bound = float(cost[forced].sum())
        # zero-cost cells get a tie-break far below any other cost, so that none is suppressed for nothing
        pos = cost[cost > 0]
        tiny = (float(pos.min()) if pos.size else 1.0) * 1e-3 / max(1, cost.size)
        self.obj = np.where(cost > 0, cost, tiny)

    def run(self, t0: float, time_limit: float | None) -> OptimalSuppression:
        supp = self.forced.copy()
        rounds = 0
        while True:
            bad = _unprotected(self.A, self.z, supp, self.lo, self.up, self.req, self.scale)
            if bad.size == 0:
                return self._result(supp, rounds, t0, proven=True)
            self._add_cuts(supp, bad)
            left = None if time_limit is None else time_limit - (time.monotonic() - t0)
            if left is not None and left <= 0:
                return self._fallback(supp, rounds, t0)
            x, done = self._master(left)
            rounds += 1
            if x is None:
                return self._fallback(supp, rounds, t0)
            supp = x
            if not done:
                return self._fallback(supp, rounds, t0)

    def _add_cuts(self, supp: np.ndarray, bad: np.ndarray) -> None:
        att = _Attacker(self.A, self.z, supp, self.lo, self.up, self.req.cmin, self.req.cmax)
        new, stuck = cuts_for(att, bad, self.t_lo, self.t_hi, self.req.R, self.tol)
        if stuck:
            raise InputError(
                f"optimal suppression: no published cell can widen the interval of primary cells "
                f"{_names(np.asarray(stuck), self.labels)}; their protection levels cannot be met")
        self.cuts.extend(new)

    def _master(self, left: float | None) -> tuple[np.ndarray | None, bool]:
        """The master MILP with every cut so far: (its solution or None, solved to optimality)."""
        m = self.cost.size
        rows = np.repeat(np.arange(len(self.cuts)), [c.cols.size for c in self.cuts])
        cols = np.concatenate([c.cols for c in self.cuts])
        vals = np.concatenate([c.coef for c in self.cuts])
        C = sparse.csr_array((vals, (rows, cols)), shape=(len(self.cuts), m))
        lb = self.forced.astype(np.float64)
        ub = np.where(self.never, 0.0, 1.0)
        options: dict[str, Any] = {"mip_rel_gap": 1e-9}
        if left is not None:
            options["time_limit"] = max(left, 0.01)
        res = milp(self.obj, integrality=np.ones(m), bounds=Bounds(lb, ub),
                   constraints=LinearConstraint(C, lb=1.0 - 1e-9, ub=np.inf), options=options)
        bound = getattr(res, "mip_dual_bound", None)
        if bound is not None and np.isfinite(bound):
            self.bound = max(self.bound, _true_bound(float(bound), self.obj, self.cost))
        if res.x is None:
            if res.status == 2:  # infeasible master: the cuts say no pattern protects (checked before)
                raise InputError("optimal suppression: the protection cuts admit no pattern (numerical trouble)")
            return None, False
        x = np.rint(res.x).astype(bool)
        return x, res.status == 0

    def _fallback(self, supp: np.ndarray, rounds: int, t0: float) -> OptimalSuppression:
        """Out of time: the cheaper of the pattern so far completed to a protecting one and Gauss
        mode's pattern (elimination in order of cost, then the levels), never cells published."""
        from protab.errors import ProtabError
        from protab.suppression._interval_order import protect_in_order
        from protab.suppression.gauss import gauss

        order = np.argsort(-self.cost, kind="stable")
        req = self.req

        def complete(start: np.ndarray) -> np.ndarray:
            return protect_in_order(self.A, self.z, start & ~self.never, req.primary, candidates=order,
                                    never=self.never, protection_lower=req.L, protection_upper=req.U,
                                    protection_range=req.R, lower=self.lo, upper=self.up)

        best = complete(supp)
        try:
            start = gauss(sparse.csc_matrix(self.A), self.z, self.forced, candidates=order, never=self.never,
                          singleton_method="none")
            other = complete(start)
        except ProtabError:  # e.g. X with coefficients the elimination does not take
            other = best
        if float(self.cost[other].sum()) < float(self.cost[best].sum()):
            best = other
        return self._result(best, rounds, t0, proven=False)

    def _result(self, supp: np.ndarray, rounds: int, t0: float, proven: bool) -> OptimalSuppression:
        cost = float(self.cost[supp].sum())
        bound = min(self.bound, cost)
        if proven:
            bound = cost
        gap = 0.0 if cost <= 0 else max(0.0, (cost - bound) / cost)
        return OptimalSuppression(supp, cost, bound, proven, gap, rounds, len(self.cuts), time.monotonic() - t0)


def _true_bound(bound: float, obj: np.ndarray, cost: np.ndarray) -> float:
    """A lower bound on the true cost from one on the tie-broken objective (the tie-breaks of the
    zero-cost cells add at most their sum)."""
    return bound - float((obj - cost).sum())
