"""Checks of magnitude p-tables: their types, columns and entries (intervals that tile [0, 1)
for every ratio class, the row i = 0), the frame of :class:`protab.ptable.MagnitudePTable`, and
the parameters of R ptable's ``create_num_ptable``.

Messages name the positions of offending entries, never their i: the largest i of an R table
is D, a secret.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from protab.errors import PTableError, show_values
from protab.ptable._values import _float_column, _is_integral, _is_number

#: The types of magnitude p-tables (R ptable: all, even, odd; R cellKey adds small_cells).
TYPES: tuple[str, ...] = ("all", "even", "odd", "small_cells")
#: R ptable refuses D * step >= 50 (a row has up to 2·D·step + 1 noise values).
_MAX_D_STEP = 50

_SCHEMA = {
    "i": pl.Float64,
    "j": pl.Float64,
    "p": pl.Float64,
    "v": pl.Float64,
    "lb": pl.Float64,
    "ub": pl.Float64,
    "lb_n": pl.Int64,
    "ub_n": pl.Int64,
    "type": pl.Utf8,
}


def _frame_rows(mask: np.ndarray) -> str:
    """'frame rows 3, 4 (2 in all)': positions (0-based) of offending entries, never their i
    (the largest i of an R table is D, a secret)."""
    return "frame rows " + show_values(np.flatnonzero(mask).tolist())


def _in_rows(mask: np.ndarray) -> str:
    return "in " + _frame_rows(mask)


def _floats(df: pl.DataFrame, col: str) -> np.ndarray:
    """Column ``col`` as finite float64 (text is stripped and parsed), else PTableError."""
    return _float_column(df, col, _in_rows)


def _as_int_col(df: pl.DataFrame, col: str) -> np.ndarray:
    a = _floats(df, col)
    bad = a != np.round(a)
    if bad.any():
        raise PTableError(f"p-table column '{col}' must hold integers ({_frame_rows(bad)})")
    return a.astype(np.int64)


def _clean(x: np.ndarray) -> np.ndarray:
    """Float noise off values that are decimals of at most 10 digits (i + v -> j); -0 -> 0."""
    return np.round(x, 10) + 0.0


def _check_type(type: Any) -> str:
    if not isinstance(type, str) or type not in TYPES:
        raise PTableError(f"type must be one of {', '.join(TYPES)}")
    return type


def magnitude_frame(
    i: np.ndarray,
    j: np.ndarray,
    v: np.ndarray,
    lb_n: np.ndarray,
    ub_n: np.ndarray,
    den: int,
    type: str,
) -> tuple[pl.DataFrame, np.ndarray]:
    """The frame of the checked entries (sorted by i and lb) and the sorted distinct i."""
    if i.size == 0:
        raise PTableError("the p-table has no rows; it needs at least one entry per i")
    for bad, what in (
        (i < 0, "negative original values i (i >= 0)"),
        (j < -1e-9, "negative outcomes j = i + v (a magnitude must not change sign)"),
        (np.abs(i + v - j) > 1e-6, "j different from i + v"),
        (ub_n < lb_n, "intervals with ub < lb (negative width)"),
        ((lb_n < 0) | (ub_n > den), "interval bounds outside [0, 1]"),
    ):
        if bad.any():
            raise PTableError(f"p-table has {what} in {_frame_rows(bad)}; fix them")
    core = pl.DataFrame(
        {"i": i, "j": j, "v": v, "lb_n": lb_n, "ub_n": ub_n},
        schema={"i": pl.Float64, "j": pl.Float64, "v": pl.Float64, "lb_n": pl.Int64, "ub_n": pl.Int64},
    ).with_row_index("_pos")
    core = core.sort(["i", "lb_n", "ub_n"], maintain_order=True)
    _refuse_gaps_and_overlaps(core, den, i.size)
    rows = np.unique(core["i"].to_numpy())
    if rows[0] != 0:
        raise PTableError(
            "a magnitude p-table needs the row i = 0 (noise 0), toward which the lookup "
            "interpolates ratios below the first class"
        )
    frame = core.select(
        "i",
        "j",
        ((pl.col("ub_n") - pl.col("lb_n")) / den).alias("p"),
        "v",
        (pl.col("lb_n") / den).alias("lb"),
        (pl.col("ub_n") / den).alias("ub"),
        "lb_n",
        "ub_n",
        pl.lit(type).alias("type"),
    ).cast(_SCHEMA)  # type: ignore[arg-type]
    return frame, rows


def _refuse_gaps_and_overlaps(core: pl.DataFrame, den: int, n: int) -> None:
    """PTableError unless the intervals of each i (sorted by lb) tile [0, den); ``core`` holds
    the entries' positions ``_pos`` among ``n``."""
    chk = core.with_columns(
        prev_ub=pl.col("ub_n").shift(1).over("i"),
        last_ub=pl.col("ub_n").last().over("i"),
    )
    for cond, what in (
        (pl.col("prev_ub").is_null() & (pl.col("lb_n") != 0), "do not start at 0"),
        (pl.col("last_ub") != den, "do not end at 1 (probabilities do not sum to 1)"),
        (pl.col("lb_n") > pl.col("prev_ub"), "have gaps"),
        (pl.col("lb_n") < pl.col("prev_ub"), "overlap"),
    ):
        bad = chk.filter(cond)
        if bad.height:
            mask = np.zeros(n, dtype=bool)
            mask[bad["_pos"].to_numpy()] = True
            raise PTableError(
                f"p-table intervals are not a partition of [0, 1): the intervals of one i "
                f"{what} ({_frame_rows(mask)}); the intervals of each i must tile [0, 1) "
                "without gap or overlap (sorted by lb, each ub = next lb)"
            )


def maxent_parameters(D: Any, V: Any, step: Any, type: Any, icat: Any) -> tuple[int, int, float, str, list[int]]:
    """D, step, V, type and the sorted ratio classes of :meth:`MagnitudePTable.maximum_entropy`,
    checked as R ptable's ``create_num_ptable`` checks them (PTableError)."""
    if not _is_integral(D) or int(D) < 1:
        raise PTableError("D (the largest noise) must be a positive integer")
    if not _is_number(V) or float(V) <= 0:
        raise PTableError("V (the noise variance) must be a positive number")
    if not _is_integral(step) or int(step) < 1:
        raise PTableError("step must be a positive integer (the noise grid is 1/step)")
    D, step, Vf = int(D), int(step), float(V)
    if D * step >= _MAX_D_STEP:
        raise PTableError(f"D * step must be below {_MAX_D_STEP} (R ptable's limit): reduce D, step or both")
    type = _check_type(type)
    return D, step, Vf, type, _classes(icat, D)


def _classes(icat: Any, D: int) -> list[int]:
    """The sorted distinct ratio classes of ``icat``: integers 1..D that include 1 and D."""
    if icat is None:
        raise PTableError(
            "icat (the ratio classes) is required for magnitude p-tables; it must include 1 and D"
        )
    if isinstance(icat, (str, bytes)) or not isinstance(icat, (Sequence, np.ndarray)):
        icat = [icat]
    cats = list(icat)
    if not cats or not all(_is_integral(c) for c in cats):
        raise PTableError("icat must hold integers (the ratio classes), including 1 and D")
    classes = sorted({int(c) for c in cats})
    if classes[0] < 1:
        raise PTableError("icat values must be integers from 1 to D")
    if 1 not in classes or D not in classes:
        raise PTableError("icat must include 1 and D, e.g. icat = [1, D]")
    if classes[-1] > D:
        raise PTableError("the largest entry of icat can be D")
    return classes
