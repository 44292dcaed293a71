"""Utility and risk measures over aligned arrays of original and protected cell values.

Numeric only: arrays in, numbers out; nothing here knows of DuckDB (DESIGN.md). Formulas
follow ../METHODS.md §5 (ESSnet Handbook on SDC; Langsrud & Lupp 2022; Shlomo, Krenzke &
Li 2019).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from protab.errors import InputError


def _pair(original: ArrayLike, protected: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    f = np.asarray(original, dtype=float).ravel()
    g = np.asarray(protected, dtype=float).ravel()
    if f.shape != g.shape:
        raise InputError(
            f"original and protected values must be aligned: {f.size} against {g.size} cells"
        )
    if np.isnan(f).any() or np.isnan(g).any():
        raise InputError("original and protected values must not contain NaN (missing) cells")
    return f, g


def _signed_sqrt(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.sqrt(np.abs(x))


def hellinger_distance(original: ArrayLike, protected: ArrayLike) -> float:
    """HD = sqrt(½ Σ (√f − √g)²); negative values enter as sign(x)·√|x| (signed variant)."""
    f, g = _pair(original, protected)
    return float(np.sqrt(0.5 * np.sum((_signed_sqrt(f) - _signed_sqrt(g)) ** 2)))


def hellinger_utility(original: ArrayLike, protected: ArrayLike) -> float:
    """Hellinger utility 1 − HD/√(Σ f) (Langsrud & Heldal 2018; SmallCountRounding's HDutility).

    1 when protected equals original; within [0, 1] for non-negative values.
    """
    f, _ = _pair(original, protected)
    total = float(np.sum(f))
    if total <= 0:
        raise InputError("hellinger_utility needs original values with a positive sum")
    return 1.0 - hellinger_distance(original, protected) / np.sqrt(total)


def share_changed(original: ArrayLike, protected: ArrayLike) -> float:
    """Share of cells whose protected value differs from the original (0 … 1)."""
    f, g = _pair(original, protected)
    return float(np.mean(f != g)) if f.size else 0.0
