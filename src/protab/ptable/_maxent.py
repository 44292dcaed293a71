"""Maximum-entropy p-table rows (R package ptable 1.0.0, pt_create_pTable / pt_optim_entropy)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import polars as pl
from scipy.optimize import linprog, minimize

from protab.errors import PTableError
from protab.ptable._common import (
    _R_DIGITS,
    _R_EPS,
    _VAR_TOL,
    _is_integral,
    _name_i,
    _per_row,
)


def _maxent_row(
    v: np.ndarray, V: float, lower: np.ndarray, mono: bool, optim: int
) -> np.ndarray | None:
    """Maximum-entropy probabilities over the noise values ``v`` (ascending), or None.

    Minimise sum p ln p subject to sum p = 1, sum p v = 0, sum p v^2 <= V (= V for optim 4),
    p >= lower and, with ``mono``, p non-decreasing up to v = 0 (ptable's constraints). The
    problem is convex; a phase-I linear programme (HiGHS) finds a strictly feasible start and a
    primal-dual interior-point method (Boyd & Vandenberghe 2004, §11.7) solves it to ~1e-12.
    None means the constraints cannot all hold.
    """
    n = len(v)
    if n == 0:
        return None
    eq_rows = [np.ones(n), v]
    eq_rhs = [1.0, 0.0]
    in_rows: list[np.ndarray] = []
    in_rhs: list[float] = []
    if optim == 4:
        eq_rows.append(v * v)
        eq_rhs.append(V)
    else:
        in_rows.append(v * v)
        in_rhs.append(V)
    if mono:
        zero = np.flatnonzero(v == 0)
        for k in range(int(zero[0]) if zero.size else 0):
            r = np.zeros(n)
            r[k], r[k + 1] = 1.0, -1.0
            in_rows.append(r)
            in_rhs.append(0.0)
    A, b = np.array(eq_rows), np.array(eq_rhs)
    G = np.vstack([np.array(in_rows).reshape(-1, n), -np.eye(n)])
    h = np.concatenate([np.array(in_rhs), -lower])
    m, q = G.shape[0], A.shape[0]
    if n == 1:  # a single outcome: feasible only if it is v = 0 (never for a valid row)
        return np.ones(1) if v[0] == 0 and np.all(G @ np.ones(1) <= h) else None

    # phase I: maximise the smallest slack s of the inequalities (s <= 1)
    lp = linprog(
        np.r_[np.zeros(n), -1.0],
        A_ub=np.hstack([G, np.ones((m, 1))]),
        b_ub=h,
        A_eq=np.hstack([A, np.zeros((q, 1))]),
        b_eq=b,
        bounds=[(None, None)] * n + [(None, 1.0)],
        method="highs",
    )
    if lp.status != 0 or lp.x[-1] < -1e-12:
        return None
    x = lp.x[:n].copy()
    if lp.x[-1] <= 1e-12:  # feasible, but with no interior: polish the LP point by SLSQP
        return _slsqp_row(x, A, b, G, h)
    fi = G @ x - h
    lam = 1.0 / -fi
    nu = np.zeros(q)
    mu = 10.0

    def residuals(x: np.ndarray, lam: np.ndarray, nu: np.ndarray, t: float) -> np.ndarray:
        fi = G @ x - h
        return np.concatenate(
            [np.log(x) + 1.0 + G.T @ lam + A.T @ nu, -lam * fi - 1.0 / t, A @ x - b]
        )

    for _ in range(300):
        fi = G @ x - h
        eta = float(-fi @ lam)
        t = mu * m / eta
        r = residuals(x, lam, nu, t)
        rd, rc, rp = r[:n], r[n : n + m], r[n + m :]
        grad_scale = 1.0 + float(np.abs(np.log(x)).max())
        if np.abs(rp).max() <= 1e-13 and np.abs(rd).max() <= 1e-11 * grad_scale and eta <= 1e-13:
            break
        # reduced Newton system: eliminate the inequality multipliers
        w = lam / -fi
        H = np.diag(1.0 / x) + G.T @ (w[:, None] * G)
        K = np.block([[H, A.T], [A, np.zeros((q, q))]])
        rhs = np.concatenate([-rd - G.T @ (rc / fi), -rp])
        try:
            sol = np.linalg.solve(K, rhs)
        except np.linalg.LinAlgError:
            sol = np.linalg.lstsq(K, rhs, rcond=None)[0]
        dx, dnu = sol[:n], sol[n:]
        dlam = (rc - lam * (G @ dx)) / fi
        neg = dlam < 0
        step = 0.99 * min(1.0, float(np.min(-lam[neg] / dlam[neg]))) if neg.any() else 0.99
        while step > 1e-16 and (np.any(G @ (x + step * dx) - h >= 0) or np.any(x + step * dx <= 0)):
            step *= 0.5
        r0 = float(np.linalg.norm(r))
        while step > 1e-16:
            if np.linalg.norm(residuals(x + step * dx, lam + step * dlam, nu + step * dnu, t)) <= (
                1.0 - 0.01 * step
            ) * r0:
                break
            step *= 0.5
        if step <= 1e-16:
            break
        x, lam, nu = x + step * dx, lam + step * dlam, nu + step * dnu

    return x if _feasible(x, A, b, G, h) else None


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
    rows: list[np.ndarray] = []
    zero = np.flatnonzero(v == 0)
    if mono:
        for k in range(int(zero[0]) if zero.size else 0):
            r = np.zeros(n)
            r[k], r[k + 1] = 1.0, -1.0
            rows.append(r)
    lp = linprog(
        v * v,
        A_ub=np.array(rows) if rows else None,
        b_ub=np.zeros(len(rows)) if rows else None,
        A_eq=np.vstack([np.ones(n), v]),
        b_eq=np.array([1.0, 0.0]),
        bounds=[(lo, 1.0) for lo in lower],
        method="highs",
    )
    return float(lp.fun) if lp.status == 0 else None


def _feasible(x: np.ndarray, A: np.ndarray, b: np.ndarray, G: np.ndarray, h: np.ndarray) -> bool:
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
    if not _is_integral(D) or int(D) < 1:
        raise PTableError("D (the largest noise) must be a positive integer")
    if (
        isinstance(V, bool)
        or not isinstance(V, (int, float, np.integer, np.floating))
        or not math.isfinite(float(V))
        or float(V) <= 0
    ):
        raise PTableError("V (the noise variance) must be a positive number")
    if not _is_integral(js) or int(js) < 0:
        raise PTableError("js (the blocked values 1..js) must be an integer >= 0")
    D, js, Vf = int(D), int(js), float(V)
    ncat = D if js == 0 else D + js + 1

    pstays = _per_row(pstay, ncat, "pstay")
    for ps in pstays:
        if ps is not None and (
            isinstance(ps, bool)
            or not isinstance(ps, (int, float, np.integer, np.floating))
            or not (0.0 < float(ps) < 1.0)
        ):
            raise PTableError("pstay must satisfy 0 < pstay < 1 (or be None)")
    monos = _per_row(mono, ncat, "mono")
    if not all(isinstance(mo, (bool, np.bool_)) for mo in monos):
        raise PTableError("mono must be True or False (or one per row)")
    optims = _per_row(optim, ncat, "optim")
    if not all(_is_integral(o) and int(o) in (1, 2, 3, 4) for o in optims):
        raise PTableError("optim must be 1, 2, 3 or 4 (or one per row)")

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
        p: np.ndarray | None = None
        for _attempt in range(20):
            p = _maxent_best_effort(v, Vf, lower, bool(monos[i - 1]), int(optims[i - 1]))
            if p is None:
                break
            ok = abs(float(p @ (v * v)) - Vf) < _VAR_TOL
            if ok or blocked or not zero.size or lower[zero[0]] <= _R_EPS:
                break  # R would re-solve the very same problem: same answer
            lower[zero] = max(lower[zero[0]] - 0.05, _R_EPS)
        if p is None or abs(float(p.sum()) - 1.0) > 1e-10:
            infeasible.append(i)
            continue
        reached[i] = abs(float(p @ (v * v)) - Vf) < _VAR_TOL
        ub_n = np.rint(np.cumsum(p) * scale).astype(np.int64)
        ub_n[-1] = scale
        lb_n = np.r_[0, ub_n[:-1]]
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
