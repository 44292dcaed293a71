"""Maximum-entropy p-table rows (R package ptable 1.0.0, pt_create_pTable / pt_optim_entropy)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import polars as pl
import scipy.sparse as sp
from scipy.linalg import cho_solve_banded, cholesky_banded
from scipy.optimize import linprog, minimize

from protab.errors import PTableError
from protab.ptable._values import _R_DIGITS, _R_EPS, _VAR_TOL, _is_integral, _is_number, _name_i, _row_params


def _constraints(
    v: np.ndarray, V: float, lower: np.ndarray, mono: bool, optim: int
) -> tuple[np.ndarray, np.ndarray, sp.csr_matrix, np.ndarray, int, int]:
    """Equalities A p = b and inequalities G p <= h of one row, G sparse.

    Rows of G, in order: the variance cap sum p v^2 <= V (unless optim 4, where it is an
    equality), ``n_mono`` rows p_k − p_(k+1) <= 0 below v = 0 (with ``mono``), and −p <= −lower.
    Returns (A, b, G, h, n_var, n_mono) with n_var = 1 when the variance row is in G.
    """
    n = len(v)
    g = v * v
    eq_rows = [np.ones(n), v]
    eq_rhs = [1.0, 0.0]
    n_var = 0 if optim == 4 else 1
    if optim == 4:
        eq_rows.append(g)
        eq_rhs.append(V)
    zero = np.flatnonzero(v == 0)
    n_mono = int(zero[0]) if (mono and zero.size) else 0
    blocks = []
    if n_var:
        blocks.append(sp.csr_matrix(g[None, :]))
    if n_mono:
        blocks.append(sp.eye(n_mono, n, format="csr") - sp.eye(n_mono, n, k=1, format="csr"))
    blocks.append(-sp.eye(n, format="csr"))
    G = sp.vstack(blocks, format="csr")
    h = np.concatenate([np.full(n_var, V), np.zeros(n_mono), -lower])
    return np.array(eq_rows), np.array(eq_rhs), G, h, n_var, n_mono


#: Rows with at most this many noise values solve the Newton system densely (LU of the full
#: KKT matrix, O(n³), most accurate); longer rows use the O(n) sparse solve of _newton_step.
_DENSE_MAX_N = 100
#: The sparse solve loses a few digits near the optimum (dual residual ~1e-8 where the dense
#: one reaches 1e-12): a search that stops improving with the residual below this, or with
#: the duality gap below 1e-11 and the dual residual below 1e-6 (relative), stops there. That
#: moves log p by ~1e-8, far below the 8 decimals the probabilities are stored with.
_STALL_RESIDUAL = 1e-10


def _dense_newton_step(
    x: np.ndarray, w: np.ndarray, A: np.ndarray, G: np.ndarray, r1: np.ndarray, r2: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The Newton system of :func:`_newton_step` by a dense LU of the full KKT matrix."""
    n, q = x.size, A.shape[0]
    H = np.diag(1.0 / x) + G.T @ (w[:, None] * G)
    K = np.block([[H, A.T], [A, np.zeros((q, q))]])
    rhs = np.concatenate([r1, r2])
    try:
        sol = np.linalg.solve(K, rhs)
    except np.linalg.LinAlgError:
        sol = np.linalg.lstsq(K, rhs, rcond=None)[0]
    return sol[:n], sol[n:]


def _newton_step(
    x: np.ndarray, w: np.ndarray, A: np.ndarray, G: sp.csr_matrix, n_var: int, n_mono: int,
    r1: np.ndarray, r2: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Solve [[H, Aᵀ], [A, 0]] [dx; dν] = [r1; r2] for H = diag(1/x) + Gᵀ diag(w) G, sparse.

    H is tridiagonal B (the lower bounds and the monotonicity differences) plus w_var·g gᵀ
    (the variance row), dense. With ζ = w_var·gᵀdx as one more unknown the system is
    B dx + Aᵀdν + g ζ = r1, A dx = r2, gᵀdx − ζ/w_var = 0: a banded Cholesky solve with B
    (scaled to a unit diagonal) and a Schur complement of 3 or 4 rows, refined iteratively
    against the original system. O(n) instead of the O(n³) of the dense solve.
    """
    n, q = x.size, A.shape[0]
    w_mono = w[n_var : n_var + n_mono]
    diag = 1.0 / x + w[n_var + n_mono :]
    off = np.zeros(n - 1)
    if n_mono:
        diag[:n_mono] += w_mono
        diag[1 : n_mono + 1] += w_mono
        off[:n_mono] = -w_mono
    # scaled to a unit diagonal; banded Cholesky of B, then the Schur complement of the
    # constraint rows (A, and g with its −1/w_var slack): O(n) per solve
    sx = 1.0 / np.sqrt(diag)
    offs = off * sx[:-1] * sx[1:]
    ab = np.vstack([np.r_[0.0, offs], np.ones(n)])
    aug = (np.vstack([A, G[0].toarray()]) if n_var else A) * sx
    try:
        cf = cholesky_banded(ab, check_finite=False)
    except np.linalg.LinAlgError:
        raise RuntimeError("singular Newton system") from None
    BiA = cho_solve_banded((cf, False), aug.T, check_finite=False)
    S = aug @ BiA
    if n_var:
        S[-1, -1] += 1.0 / w[0]
    GT = G.T.tocsr()
    dx, dnu = np.zeros(n), np.zeros(q)
    res1, res2 = r1, r2
    for _ in range(3):  # iterative refinement against the unscaled, unaugmented system
        Bir = cho_solve_banded((cf, False), res1 * sx, check_finite=False)
        y = np.linalg.solve(S, aug @ Bir - np.r_[res2, np.zeros(n_var)])
        dx = dx + (Bir - BiA @ y) * sx
        dnu = dnu + y[:q]
        res1 = r1 - (dx / x + GT @ (w * (G @ dx)) + A.T @ dnu)
        res2 = r2 - A @ dx
    return dx, dnu


class _Row(NamedTuple):
    """The convex programme of one row: equalities A p = b and inequalities G p <= h (G sparse,
    GT its transpose; ``n_var``, ``n_mono`` as :func:`_constraints` counts them)."""

    A: np.ndarray
    b: np.ndarray
    G: sp.csr_matrix
    GT: sp.csr_matrix
    h: np.ndarray
    n_var: int
    n_mono: int

    def residuals(self, x: np.ndarray, lam: np.ndarray, nu: np.ndarray, t: float) -> np.ndarray:
        """The primal-dual residuals (dual, centrality, primal) at barrier parameter t."""
        fi = self.G @ x - self.h
        return np.concatenate(
            [np.log(x) + 1.0 + self.GT @ lam + self.A.T @ nu, -lam * fi - 1.0 / t, self.A @ x - self.b]
        )


#: The factor μ by which each step aims to shrink the duality gap (Boyd & Vandenberghe, §11.7).
_MU = 10.0


# a step that reaches the boundary gives inf/NaN, caught by the residual and feasibility checks
@np.errstate(divide="ignore", invalid="ignore")
def _maxent_row(
    v: np.ndarray, V: float, lower: np.ndarray, mono: bool, optim: int, dense: bool | None = None
) -> np.ndarray | None:
    """Maximum-entropy probabilities over the noise values ``v`` (ascending), or None.

    Minimise sum p ln p subject to sum p = 1, sum p v = 0, sum p v^2 <= V (= V for optim 4),
    p >= lower and, with ``mono``, p non-decreasing up to v = 0 (ptable's constraints). The
    problem is convex; a phase-I linear programme (HiGHS, sparse) finds a strictly feasible
    start and a primal-dual interior-point method (Boyd & Vandenberghe 2004, §11.7) solves it
    to ~1e-12. Each Newton step costs O(n) for n = len(v): the Hessian is tridiagonal plus one
    dense rank-one term (:func:`_newton_step`). None means the constraints cannot all hold.
    """
    n = len(v)
    if n == 0:
        return None
    A, b, G, h, n_var, n_mono = _constraints(v, V, lower, mono, optim)
    if n == 1:  # a single outcome: feasible only if it is v = 0 (never for a valid row)
        return np.ones(1) if v[0] == 0 and np.all(G @ np.ones(1) <= h) else None
    start = _phase_one(A, b, G, h)
    if start is None:
        return None
    x = start[:n].copy()
    if start[-1] <= 1e-12:  # feasible, but with no interior: polish the LP point by SLSQP
        return _slsqp_row(x, A, b, G.toarray(), h)
    if dense is None:  # the O(n) solve first; where it fails (a thin interior), the dense one
        p = _maxent_row(v, V, lower, mono, optim, dense=n <= _DENSE_MAX_N)
        return p if p is not None or n <= _DENSE_MAX_N else _maxent_row(v, V, lower, mono, optim, True)
    x, done = _interior_point(_Row(A, b, G, G.T.tocsr(), h, n_var, n_mono), x, dense)
    if not done and not dense:
        return None  # the O(n) solve gave up before the optimum: the caller retries densely
    return x if _feasible(x, A, b, G, h) else None


def _phase_one(A: np.ndarray, b: np.ndarray, G: sp.csr_matrix, h: np.ndarray) -> np.ndarray | None:
    """Phase I: the point (p, s) that maximises the smallest slack s <= 1 of the inequalities
    (HiGHS); None when the constraints cannot all hold."""
    m, q = G.shape[0], A.shape[0]
    n = G.shape[1]
    lp = linprog(
        np.r_[np.zeros(n), -1.0],
        A_ub=sp.hstack([G, sp.csr_matrix(np.ones((m, 1)))], format="csr"),
        b_ub=h,
        A_eq=np.hstack([A, np.zeros((q, 1))]),
        b_eq=b,
        bounds=[(None, None)] * n + [(None, 1.0)],
        method="highs",
    )
    if lp.status != 0 or lp.x[-1] < -1e-12:
        return None
    out: np.ndarray | None = lp.x
    return out


def _interior_point(row: _Row, x: np.ndarray, dense: bool) -> tuple[np.ndarray, bool]:
    """The primal-dual interior-point iterations from a strictly feasible ``x``: the last point
    and whether it stopped at the optimum (or within what the 8 decimals of the bounds show)."""
    G, h = row.G, row.h
    n, m = x.size, G.shape[0]
    Gd = G.toarray() if dense else None
    lam = 1.0 / -(G @ x - h)
    nu = np.zeros(row.A.shape[0])
    best, stalled = np.inf, 0
    for _ in range(300):
        fi = G @ x - h
        eta = float(-fi @ lam)
        t = _MU * m / eta
        r = row.residuals(x, lam, nu, t)
        rd, rc, rp = r[:n], r[n : n + m], r[n + m :]
        grad_scale = 1.0 + float(np.abs(np.log(x)).max())
        if np.abs(rp).max() <= 1e-13 and np.abs(rd).max() <= 1e-11 * grad_scale and eta <= 1e-13:
            return x, True
        rn = float(np.linalg.norm(r))
        stalled = stalled + 1 if rn > 0.9 * best else 0
        best = min(best, rn)
        if stalled >= 5 and eta <= 1e-11 and np.abs(rp).max() <= 1e-12 and np.abs(rd).max() <= 1e-6 * grad_scale:
            return x, True
        direction = _direction(row, Gd, x, lam, fi, rd, rc, rp)
        if direction is None:  # a singular Newton system
            return x, False
        dx, dlam, dnu = direction
        step = _step_length(row, x, lam, nu, dx, dlam, dnu, t, rn)
        if step < 1e-6 and rn <= _STALL_RESIDUAL:
            return x, True  # progress only below what the 8 decimals of the bounds show
        if step <= 1e-16:
            return x, False  # no more progress
        x, lam, nu = x + step * dx, lam + step * dlam, nu + step * dnu
    return x, False


def _direction(
    row: _Row,
    Gd: np.ndarray | None,
    x: np.ndarray,
    lam: np.ndarray,
    fi: np.ndarray,
    rd: np.ndarray,
    rc: np.ndarray,
    rp: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The Newton direction (dx, dλ, dν) of the reduced system (the inequality multipliers
    eliminated), densely when ``Gd`` (G as a dense array) is given; None when it is singular."""
    w = lam / -fi
    try:
        if Gd is not None:
            dx, dnu = _dense_newton_step(x, w, row.A, Gd, -rd - row.GT @ (rc / fi), -rp)
        else:
            dx, dnu = _newton_step(x, w, row.A, row.G, row.n_var, row.n_mono, -rd - row.GT @ (rc / fi), -rp)
    except (np.linalg.LinAlgError, RuntimeError):
        return None
    dlam = (rc - lam * (row.G @ dx)) / fi
    return dx, dlam, dnu


def _step_length(
    row: _Row,
    x: np.ndarray,
    lam: np.ndarray,
    nu: np.ndarray,
    dx: np.ndarray,
    dlam: np.ndarray,
    dnu: np.ndarray,
    t: float,
    r0: float,
) -> float:
    """The step along the direction: 0.99 of the largest that keeps λ > 0, halved until the
    point is strictly feasible and the residual norm ``r0`` shrinks enough (backtracking)."""
    neg = dlam < 0
    step = 0.99 * min(1.0, float(np.min(-lam[neg] / dlam[neg]))) if neg.any() else 0.99
    while step > 1e-16 and (np.any(row.G @ (x + step * dx) - row.h >= 0) or np.any(x + step * dx <= 0)):
        step *= 0.5
    while step > 1e-16:
        if np.linalg.norm(row.residuals(x + step * dx, lam + step * dlam, nu + step * dnu, t)) <= (
            1.0 - 0.01 * step
        ) * r0:
            break
        step *= 0.5
    return step


def _maxent_best_effort(
    v: np.ndarray, V: float, lower: np.ndarray, mono: bool, optim: int
) -> np.ndarray | None:
    """:func:`_maxent_row`, and when the variance target cannot be met (R ptable then returns
    a row that misses it without error), the maximum-entropy row whose variance is the
    attainable one nearest to V: the inequality form for optim 4, else the smallest variance
    the other constraints allow. None when even that is impossible."""
    p = _maxent_row(v, V, lower, mono, optim)
    if p is None and optim == 4:
        p = _maxent_row(v, V, lower, mono, 1)
    if p is None:
        vmin = _min_variance(v, lower, mono)
        if vmin is not None:
            p = _maxent_row(v, vmin * (1 + 1e-13) + 1e-15, lower, mono, 1)
    return p


def _min_variance(v: np.ndarray, lower: np.ndarray, mono: bool) -> float | None:
    """Smallest sum p v^2 under sum p = 1, sum p v = 0, p >= lower and mono (an LP)."""
    n = len(v)
    if n == 0:
        return None
    zero = np.flatnonzero(v == 0)
    n_mono = int(zero[0]) if (mono and zero.size) else 0
    mono_rows = sp.eye(n_mono, n, format="csr") - sp.eye(n_mono, n, k=1, format="csr")
    lp = linprog(
        v * v,
        A_ub=mono_rows if n_mono else None,
        b_ub=np.zeros(n_mono) if n_mono else None,
        A_eq=np.vstack([np.ones(n), v]),
        b_eq=np.array([1.0, 0.0]),
        bounds=[(lo, 1.0) for lo in lower],
        method="highs",
    )
    return float(lp.fun) if lp.status == 0 else None


def _feasible(x: np.ndarray, A: np.ndarray, b: np.ndarray, G: np.ndarray | sp.csr_matrix, h: np.ndarray) -> bool:
    return bool(
        np.all(np.isfinite(x))
        and np.abs(A @ x - b).max() <= 1e-9
        and np.all(G @ x - h <= 1e-9)
    )


def _slsqp_row(
    x0: np.ndarray, A: np.ndarray, b: np.ndarray, G: np.ndarray, h: np.ndarray
) -> np.ndarray | None:
    """Maximum entropy from a feasible start by SLSQP, for a feasible set without interior."""
    lower = np.maximum(-h[-len(x0) :], 1e-300)
    res = minimize(
        lambda p: float(np.sum(p * np.log(p))),
        np.maximum(x0, lower),
        jac=lambda p: np.log(p) + 1.0,
        method="SLSQP",
        bounds=[(lo, 1.0) for lo in lower],
        constraints=[
            {"type": "eq", "fun": lambda p: A @ p - b, "jac": lambda p: A},
            {"type": "ineq", "fun": lambda p: h - G @ p, "jac": lambda p: -G},
        ],
        options={"ftol": 1e-14, "maxiter": 1000},
    )
    x = np.asarray(res.x, dtype=np.float64)
    return x if _feasible(x, A, b, G, h) else None


def solve_row(
    v: np.ndarray, V: float, lower: np.ndarray, mono: bool, optim: int, blocked: bool = False
) -> np.ndarray | None:
    """One p-table row as R ptable's loop in pt_create_pTable: solve; while the variance
    misses V (and the row is not blocked), lower the bound at v = 0 by 0.05 (not below 1e-8)
    and solve again, at most 20 solves. ``lower`` is updated in place. None: no distribution.
    The noise values ``v`` may be fractional (magnitude p-tables, R create_num_ptable)."""
    zero = np.flatnonzero(v == 0)
    p: np.ndarray | None = None
    for _attempt in range(20):
        p = _maxent_best_effort(v, V, lower, mono, optim)
        if p is None:
            break
        ok = abs(float(p @ (v * v)) - V) < _VAR_TOL
        if ok or blocked or not zero.size or lower[zero[0]] <= _R_EPS:
            break  # R would re-solve the very same problem: same answer
        lower[zero] = max(lower[zero[0]] - 0.05, _R_EPS)
    return p


def row_bounds(
    v: np.ndarray,
    V: float,
    lower: np.ndarray,
    mono: bool,
    optim: int,
    scale: int,
    blocked: bool = False,
) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """One solved row (:func:`solve_row`) as intervals over ``scale``: (lb_n, ub_n, reached),
    the upper bounds the cumulative sums of p rounded (the last one ``scale``), each lower
    bound the previous upper bound, and whether the variance reached V. None: the row has
    no distribution (or one that does not sum to 1). Shared by the count and the magnitude
    maximum-entropy tables."""
    p = solve_row(v, V, lower, mono, optim, blocked)
    if p is None or abs(float(p.sum()) - 1.0) > 1e-10:
        return None
    ub_n = np.rint(np.cumsum(p) * scale).astype(np.int64)
    ub_n[-1] = scale
    return np.r_[0, ub_n[:-1]], ub_n, abs(float(p @ (v * v)) - V) < _VAR_TOL


#: The largest D :func:`maximum_entropy_rows` accepts (see the error it raises above it).
MAX_D = 200


def maximum_entropy_rows(
    D: int,
    V: float,
    js: int,
    pstay: float | Sequence[float] | None,
    mono: bool | Sequence[bool],
    optim: int | Sequence[int],
) -> tuple[pl.DataFrame, int, dict[int, bool]]:
    """The rows (i, v, lb_n, ub_n) over den of :meth:`PTable.maximum_entropy`, den, and for
    each row i >= 1 whether its variance target was reached."""
    D, js, Vf = _checked_parameters(D, V, js)
    ncat = D if js == 0 else D + js + 1

    pstays, monos, optims = _row_params(pstay, mono, optim, ncat, "row")

    parts: list[pl.DataFrame] = [
        pl.DataFrame({"i": [0], "v": [0], "lb_n": [0], "ub_n": [10**_R_DIGITS]})
    ]
    reached: dict[int, bool] = {}
    infeasible: list[int] = []
    scale = 10**_R_DIGITS
    for i in range(1, ncat + 1):
        j = np.arange(max(0, i - D), i + D + 1)
        j = j[(j < 1) | (j > js)]
        v = (j - i).astype(np.float64)
        zero = np.flatnonzero(v == 0)
        lower = np.full(len(v), _R_EPS)
        ps = pstays[i - 1]
        if zero.size and ps is not None:
            lower[zero] = max(float(ps), _R_EPS)
        blocked = 1 <= i <= js
        row = row_bounds(v, Vf, lower, bool(monos[i - 1]), int(optims[i - 1]), scale, blocked)
        if row is None:
            infeasible.append(i)
            continue
        lb_n, ub_n, reached[i] = row
        parts.append(
            pl.DataFrame(
                {"i": np.full(len(v), i), "v": v.astype(np.int64), "lb_n": lb_n, "ub_n": ub_n}
            )
        )
    if infeasible:
        raise PTableError(
            "the maximum-entropy p-table cannot be computed without violating its "
            f"constraints for {_name_i(infeasible)}; change the parameters (a different "
            "variance is usually enough) or set mono=False or optim for those rows"
        )
    core = pl.concat(parts).cast(pl.Int64)
    return core, scale, reached


def _checked_parameters(D: int, V: float, js: int) -> tuple[int, int, float]:
    """D, js and V of a count maximum-entropy table, checked (PTableError) and converted."""
    if not _is_integral(D) or int(D) < 1:
        raise PTableError("D (the largest noise) must be a positive integer")
    if int(D) > MAX_D:
        raise PTableError(
            f"D is above the limit of {MAX_D} for maximum-entropy p-tables: each of the D + js + 1 "
            "rows is a convex programme over up to 2D + 1 noise values, so the time grows with "
            "D squared (about a minute at the limit), and every noise value keeps a probability of at "
            "least 1e-8, which alone adds a variance of about (2/3)·D³·1e-8 (53 at D = 2000), "
            "more than any usual V. Use a smaller D (noise beyond a few standard deviations "
            "has almost no probability)"
        )
    if not _is_number(V) or float(V) <= 0:
        raise PTableError("V (the noise variance) must be a positive number")
    if not _is_integral(js) or int(js) < 0:
        raise PTableError("js (the blocked values 1..js) must be an integer >= 0")
    return int(D), int(js), float(V)
