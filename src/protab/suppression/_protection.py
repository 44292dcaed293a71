"""Protection requirements of the suppression audit (Hundepool et al. 2012, §4.2; tau-ARGUS;
GaussSuppression's ``protectionIntervals``): what the interval of a primary cell must reach,
and whether it does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import sparse

from protab.errors import InputError, SpecError, show_values
from protab.suppression._attacker_system import _EXACT_TOL
from protab.suppression._audit_inputs import _cells, _finite, _vector


def p_percent_protection(p: float, z: ArrayLike, x1: ArrayLike, x2: ArrayLike) -> np.ndarray:
    """The protection level of the p% rule, as tau-ARGUS and GaussSuppression define it.

    The second largest contributor knows x2 and learns, from an upper bound U of the cell, that
    the largest contribution is at most U − x2 (the other contributions being ≥ 0). That bound
    must exceed x1 by p %: U − x2 ≥ (1 + p/100)·x1, i.e. U ≥ z + p/100·x1 − (z − x1 − x2). The
    protection level is therefore PL = max(0, p/100·x1 − (z − x1 − x2)) (Hundepool et al. 2012,
    §4.2 and the tau-ARGUS manual's p% rule; GaussSuppression's MagnitudeRule with
    ``protectionIntervals`` uses the same PL = z·max(0, d2 + p/100·d1 − 1) with
    dᵢ = (x1 + … + xᵢ)/z). tau-ARGUS applies it symmetrically: the interval must reach z − PL
    and z + PL (below, a bound under the attainable minimum is met at the minimum).
    """
    zz, a, b = (np.asarray(v, dtype=np.float64) for v in (z, x1, x2))
    return np.maximum(0.0, float(p) / 100.0 * a - (zz - a - b))


def _requirement(v: Any, m: int, name: str, X_shape: tuple[int, int], primary: np.ndarray) -> np.ndarray:
    if v is None:
        return np.zeros(m)
    a = np.asarray(v, dtype=np.float64)
    a = np.full(m, float(a)) if a.ndim == 0 else _vector(a, m, name, X_shape)
    _finite(a, name, where=primary)
    neg = primary & (a < 0)
    if neg.any():
        raise InputError(f"{name} has negative values at primary cells {show_values(np.flatnonzero(neg).tolist())}")
    return np.where(primary, a, 0.0)


@dataclass
class _Req:
    primary: np.ndarray
    L: np.ndarray
    U: np.ndarray
    R: np.ndarray
    cmin: np.ndarray  # smallest / largest value of each cell under the bounds alone
    cmax: np.ndarray


def _requirements(A: sparse.csc_array, z: np.ndarray, supp: np.ndarray, primary: Any, protection_lower: Any,
                  protection_upper: Any, protection_range: Any, p_percent: Any, x1: Any, x2: Any,
                  lo: np.ndarray, up: np.ndarray) -> _Req:
    m = A.shape[1]
    prim = supp.copy() if primary is None else _cells(primary, m, "primary")
    not_supp = prim & ~supp
    if not_supp.any():
        raise InputError(
            f"primary cells {show_values(np.flatnonzero(not_supp).tolist())} are not suppressed; "
            "a primary cell must be among the suppressed cells (or use protect())"
        )
    if p_percent is not None:
        if protection_lower is not None or protection_upper is not None:
            raise SpecError("give either p_percent= (with x1=, x2=) or protection_lower=/protection_upper=, not both")
        if isinstance(p_percent, bool) or not isinstance(p_percent, (int, float, np.integer, np.floating)) \
                or not np.isfinite(p_percent) or p_percent < 0:
            raise SpecError(f"p_percent must be a number >= 0, got {p_percent!r}")
        if x1 is None or x2 is None:
            raise SpecError("p_percent= needs x1= and x2= (the largest and second largest contribution per cell)")
        a1 = _vector(x1, m, "x1", A.shape)
        a2 = _vector(x2, m, "x2", A.shape)
        _finite(a1, "x1", where=prim)
        _finite(a2, "x2", where=prim)
        pl_ = p_percent_protection(float(p_percent), z, np.where(prim, a1, 0.0), np.where(prim, a2, 0.0))
        L = U = np.where(prim, pl_, 0.0)
    else:
        if x1 is not None or x2 is not None:
            raise SpecError("x1=/x2= are used only with p_percent=")
        L = _requirement(protection_lower, m, "protection_lower", A.shape, prim)
        U = _requirement(protection_upper, m, "protection_upper", A.shape, prim)
    R = _requirement(protection_range, m, "protection_range", A.shape, prim)
    pos = A.copy()
    pos.data = np.maximum(pos.data, 0.0)
    neg = A.copy()
    neg.data = np.minimum(neg.data, 0.0)
    with np.errstate(invalid="ignore"):
        cmin = _dot_bounds(pos, lo) + _dot_bounds(neg, up)
        cmax = _dot_bounds(pos, up) + _dot_bounds(neg, lo)
    return _Req(prim, L, U, R, cmin, cmax)


def _dot_bounds(P: sparse.csc_array, b: np.ndarray) -> np.ndarray:
    """Pᵀb with 0·inf = 0 (P holds entries of one sign)."""
    inf = ~np.isfinite(b)
    out = P.T @ np.where(inf, 0.0, b)
    if inf.any():
        pat = P.copy()
        pat.data = np.sign(pat.data)
        s = pat.T @ np.where(inf, np.sign(b), 0.0)
        out = np.where(s > 0, np.inf, np.where(s < 0, -np.inf, out))
    return out


def _targets(req: _Req, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the interval must reach: z − L and z + U, capped at the cell's attainable range."""
    t_lo = np.maximum(z - req.L, req.cmin)
    t_hi = np.minimum(z + req.U, req.cmax)
    return np.minimum(t_lo, z), np.maximum(t_hi, z)


def _status(lo: np.ndarray, up: np.ndarray, z: np.ndarray, req: _Req, scale: float) -> tuple[np.ndarray, np.ndarray]:
    tol = _EXACT_TOL * scale
    exact = lo == up
    t_lo, t_hi = _targets(req, z)
    with np.errstate(invalid="ignore"):
        wide = (lo <= t_lo + tol) & (up >= t_hi - tol) & (up - lo >= req.R - tol)
    protected = ~exact & (~req.primary | wide)
    return protected, exact
