"""Input checks and small helpers shared by the measures (aligned vectors, groups, columns, entropy)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
from numpy.typing import ArrayLike

from protab._frames import require_columns
from protab.errors import InputError


def _vec(x: ArrayLike, name: str) -> np.ndarray:
    if isinstance(x, pl.DataFrame):
        raise InputError(f"{name}: give one column (a Series or array), not a whole frame")
    try:
        a = np.asarray(x.to_numpy() if isinstance(x, pl.Series) else x, dtype=float).ravel()
    except (TypeError, ValueError):
        raise InputError(f"{name} must be numbers (counts or values per cell)") from None
    if np.isnan(a).any():
        raise InputError(
            f"{name} must not contain NaN or null (missing) cells; {int(np.isnan(a).sum())} do"
        )
    return a


def _pair(original: ArrayLike, protected: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    f = _vec(original, "original")
    g = _vec(protected, "protected")
    if f.shape != g.shape:
        raise InputError(
            f"original and protected values must be aligned: {f.size} against {g.size} cells"
        )
    return f, g


def _groups(groups: ArrayLike | None, size: int) -> tuple[np.ndarray, int]:
    """Integer group ids 0..G-1 for each cell (each cell its own group when None)."""
    if groups is None:
        return np.arange(size), size
    s = groups if isinstance(groups, pl.Series) else pl.Series("g", np.asarray(groups).ravel())
    if s.len() != size:
        raise InputError(f"groups must label every cell: {s.len()} labels for {size} cells")
    if s.null_count():
        raise InputError(f"groups: {s.null_count()} cells have no group (null); fill them first")
    # ids 0..G-1 in sorted label order (a join to the sorted distinct labels: only the G
    # labels are sorted), so that sums over groups run in the same order on every call
    df = pl.DataFrame({"g": s})
    keys = df.unique().sort("g").with_row_index("_id")
    ids = df.join(keys, on="g", how="left", maintain_order="left")["_id"].cast(pl.Int64).to_numpy()
    return ids, keys.height


def _signed_sqrt(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.sqrt(np.abs(x))


def _entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-np.sum(p * np.log(p)))


def _columns(frame: pl.DataFrame, cols: Sequence[str], what: str) -> None:
    require_columns(frame, cols, what)
