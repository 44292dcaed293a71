"""Array types and input checks of the fit package (model matrix, vectors per cell)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from protab.errors import InputError, show_values

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.int64]
Solver = Literal["auto", "dense", "lsqr", "lsmr"]


def _vector(
    v: ArrayLike, n: int, name: str, kind: str, *, X_shape: tuple[int, int] | None = None
) -> FloatArray:
    """A finite float vector of length n, or an InputError naming what is wrong."""
    a = np.asarray(v, dtype=np.float64)
    if a.ndim == 2 and 1 in a.shape:
        a = a.reshape(-1)
    if a.ndim != 1:
        raise InputError(f"{name} must be a 1-D vector, got an array of shape {a.shape}")
    if a.size != n:
        hint = ""
        if X_shape is not None and kind == "published" and a.size == X_shape[0]:
            hint = " (is X transposed? it must be inner cells × published cells, z = X.T @ y)"
        raise InputError(
            f"{name} has {a.size} values but X has {n} {kind} cells "
            f"(X has shape {X_shape or '?'}){hint}"
        )
    bad_nan = np.flatnonzero(np.isnan(a))
    if bad_nan.size:
        raise InputError(
            f"{name} has {bad_nan.size} NaN values at {kind} cells {show_values(bad_nan.tolist())}"
        )
    bad_inf = np.flatnonzero(np.isinf(a))
    if bad_inf.size:
        raise InputError(
            f"{name} has {bad_inf.size} infinite values at {kind} cells "
            f"{show_values(bad_inf.tolist())}"
        )
    return a


def _nonneg(a: FloatArray, name: str, kind: str) -> None:
    bad = np.flatnonzero(a < 0)
    if bad.size:
        raise InputError(
            f"{name} has {bad.size} negative values at {kind} cells {show_values(bad.tolist())} "
            f"(e.g. {a[bad[0]]:g}); it must be ≥ 0"
        )
