"""Magnitude p-tables from frames (R ptable's layout of ``create_num_ptable``, tau-ARGUS'
file): the entries (i, j, v) and their intervals as integers over den, one type picked."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from protab.errors import PTableError, show_values
from protab.ptable._bounds import _cumulated_bounds, _decimal_bounds
from protab.ptable._magnitude_checks import TYPES, _check_type, _clean, _floats, _frame_rows, _in_rows
from protab.ptable._values import _P_TOL, _R_DIGITS, _is_integral, _to_polars

Entries = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, str]


def frame_entries(frame: Any, *, type: str | None, digits: int | None) -> Entries:
    """(i, j, v, lb_n, ub_n, den, type) of :meth:`MagnitudePTable.from_frame`'s frame (see its
    docstring)."""
    df = _to_polars(frame)
    if "i" not in df.columns:
        raise PTableError("p-table frame lacks column 'i' (the original ratio class)")
    if "v" not in df.columns and "j" not in df.columns:
        raise PTableError("p-table frame needs column 'v' (noise) or 'j' (perturbed value)")
    if digits is not None and (not _is_integral(digits) or not 0 <= int(digits) <= 15):
        raise PTableError("digits must be an integer between 0 and 15")
    if "type" in df.columns:
        df, type = _one_type(df, type)
    type = _check_type("all" if type is None else type)
    if df.height == 0:
        raise PTableError("the p-table has no rows; it needs at least one entry per i")
    i, j, v = _values(df)
    lb_col = next((c for c in ("lb", "p_int_lb") if c in df.columns), None)
    ub_col = next((c for c in ("ub", "p_int_ub", "p_ij_ub") if c in df.columns), None)
    p = _floats(df, "p") if "p" in df.columns else None
    if ub_col is not None:
        ub = _floats(df, ub_col)
        lb = _floats(df, lb_col) if lb_col is not None else None
        lb_n, ub_n, scale = _decimal_bounds(i, lb, ub, p, digits, _in_rows)
    elif p is not None:
        lb_n, ub_n, scale = _probability_bounds(i, j, p, digits)
    else:
        raise PTableError(
            "p-table frame needs interval bounds (lb/ub or p_int_lb/p_int_ub, or the upper "
            "bounds alone) or probabilities p"
        )
    return i, j, v, lb_n, ub_n, scale, type


def _one_type(df: pl.DataFrame, type: str | None) -> tuple[pl.DataFrame, str | None]:
    """The entries of one type of a frame with a column ``type``: ``type``'s, or the only one."""
    t = df["type"].cast(pl.String).str.strip_chars()
    kinds = t.unique(maintain_order=True).to_list()
    unknown = [k for k in kinds if k not in TYPES]
    if unknown:
        raise PTableError(
            f"p-table column 'type' holds {show_values(unknown)}; the types are {', '.join(TYPES)}"
        )
    if type is None:
        if len(kinds) > 1:
            raise PTableError(
                f"the p-table holds the types {', '.join(kinds)}; pass type= to pick "
                "one, or use MagnitudePTable.read_set for all of them"
            )
        return df, kinds[0] if kinds else "all"
    if len(kinds) > 1 or (kinds and kinds[0] != type):
        df = df.filter(t == _check_type(type))
        if df.height == 0:
            raise PTableError(f"the p-table holds no entries of type {type!r}")
    return df, type


def _values(df: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(i, j, v) of the entries: j = i + v from whichever of j and v is given, checked when both are."""
    i = _floats(df, "i")
    if "v" in df.columns:
        v = _floats(df, "v")
        j = _floats(df, "j") if "j" in df.columns else _clean(i + v)
    else:
        j = _floats(df, "j")
        v = _clean(j - i)
    if np.any(np.abs(i + v - j) > 1e-6):
        raise PTableError(
            "p-table columns j and v disagree (j != i + v) in "
            f"{_frame_rows(np.abs(i + v - j) > 1e-6)}; give consistent values or only one"
        )
    return i, j, v


def _probability_bounds(
    i: np.ndarray, j: np.ndarray, p: np.ndarray, digits: int | None
) -> tuple[np.ndarray, np.ndarray, int]:
    """(lb_n, ub_n, den) from probabilities cumulated per i in ascending j (R ptable), in the
    entries' order; PTableError when they are outside [0, 1] or do not sum to 1 per i."""
    bad = (p < -_P_TOL) | (p > 1 + _P_TOL)
    if bad.any():
        raise PTableError(f"p-table probabilities outside [0, 1] in {_frame_rows(bad)}")
    scale = 10 ** int(_R_DIGITS if digits is None else digits)
    order = pl.DataFrame({"i": i, "j": j, "p": p}).with_row_index("_pos")
    order = order.sort(["i", "j"], maintain_order=True)
    sums = order.select(pl.col("p").sum().over("i")).to_series().to_numpy()
    if np.any(np.abs(sums - 1.0) > _P_TOL):
        raise PTableError(
            "p-table probabilities do not sum to 1 for some i; each i needs a complete "
            "distribution of its outcomes"
        )
    pos, lb_sorted, ub_sorted = _cumulated_bounds(i, j, p, scale)
    lb_n, ub_n = np.empty_like(ub_sorted), np.empty_like(ub_sorted)
    lb_n[pos], ub_n[pos] = lb_sorted, ub_sorted
    return lb_n, ub_n, scale
