"""Input checks of the suppression audit (:mod:`protab.suppression.pattern_audit`): the model matrix,
vectors per published or inner cell, masks of cells and the attacker's bounds."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from scipy import sparse

from protab._matrices import as_csc as _fit_csc
from protab.errors import InputError, show_values


def _as_csc(X: Any) -> sparse.csc_array:
    """X as a float64 CSC array, checked (the validation of the fit package)."""
    return _fit_csc(X)


def _vector(v: Any, m: int, name: str, X_shape: tuple[int, int], kind: str = "published") -> np.ndarray:
    a = np.asarray(v, dtype=np.float64)
    if a.ndim == 2 and 1 in a.shape:
        a = a.reshape(-1)
    if a.ndim != 1 or a.size != m:
        hint = ""
        if kind == "published" and a.ndim == 1 and a.size == X_shape[0]:
            hint = " (is X transposed? it must be inner cells × published cells, z = X.T @ y)"
        raise InputError(
            f"{name} must have one value per {kind} cell ({m}, X has shape {X_shape}), got an array "
            f"of shape {a.shape}{hint}"
        )
    return a


def _finite(a: np.ndarray, name: str, kind: str = "published", where: np.ndarray | None = None) -> None:
    bad = ~np.isfinite(a) if where is None else (~np.isfinite(a) & where)
    if bad.any():
        idx = np.flatnonzero(bad)
        raise InputError(f"{name} has {idx.size} NaN or infinite values at {kind} cells {show_values(idx.tolist())}")


def _cells(sel: Any, m: int, name: str) -> np.ndarray:
    """A boolean mask over the m published cells from a mask or an array of cell indices."""
    if sel is None:
        return np.zeros(m, dtype=bool)
    if isinstance(sel, pl.Series):
        if sel.null_count():
            raise InputError(f"{name} has {sel.null_count()} missing (null) values")
        sel = sel.to_numpy()
    a = np.asarray(sel)
    if a.ndim != 1:
        raise InputError(f"{name} must be a 1-D boolean mask or an array of cell indices, got shape {a.shape}")
    if a.dtype == bool:
        if a.size != m:
            raise InputError(f"{name} is a boolean mask of {a.size} values but there are {m} published cells")
        return a.copy()
    if a.size == 0:
        return np.zeros(m, dtype=bool)
    if a.dtype.kind not in "iu":
        if a.dtype.kind == "f" and np.isnan(a).any():
            raise InputError(f"{name} has NaN values; give a boolean mask or integer cell indices")
        raise InputError(f"{name} must be a boolean mask or integer cell indices, not {a.dtype}")
    bad = (a < 0) | (a >= m)
    if bad.any():
        raise InputError(
            f"{name} has cell indices outside 0..{m - 1}: {show_values(a[bad].tolist())}"
        )
    mask = np.zeros(m, dtype=bool)
    mask[a] = True
    return mask


def _bounds(lower: Any, upper: Any, n: int, X_shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    def one(v: Any, default: float, name: str) -> np.ndarray:
        if v is None:
            return np.full(n, default)
        a = np.asarray(v, dtype=np.float64)
        if a.ndim == 0:
            a = np.full(n, float(a))
        else:
            a = _vector(a, n, name, X_shape, kind="inner")
        if np.isnan(a).any():
            raise InputError(f"{name} has {int(np.isnan(a).sum())} NaN values (use None or ±inf for no bound)")
        return a

    lo = one(lower, -np.inf, "lower")
    up = one(upper, np.inf, "upper")
    if (lo == np.inf).any() or (up == -np.inf).any():
        raise InputError("lower must be < +inf and upper > -inf for every inner cell")
    bad = lo > up
    if bad.any():
        raise InputError(
            f"lower > upper at {int(bad.sum())} inner cells {show_values(np.flatnonzero(bad).tolist())}"
        )
    return lo, up
