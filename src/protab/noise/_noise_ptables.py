"""Shared helpers of protab.noise: parameter checks and p-tables from (i, v, p) rows.

Messages never show the value of a parameter (p-table parameters are secrets, docs/design.md).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from protab.errors import PTableError
from protab.ptable import PTable

#: Decimals of the interval bounds of the noise p-tables (den = 10**12): DP tails of 1e-7
#: keep three significant digits (8 decimals, R ptable's choice, would keep one or two).
DIGITS = 12


def positive_number(x: Any, name: str, *, error: type[Exception] = PTableError) -> float:
    """A finite number > 0 (bool refused)."""
    if (
        isinstance(x, bool)
        or not isinstance(x, (int, float, np.integer, np.floating))
        or not math.isfinite(float(x))
        or float(x) <= 0
    ):
        raise error(f"{name} must be a positive, finite number")
    return float(x)


def integer(x: Any, name: str, *, minimum: int, error: type[Exception] = PTableError) -> int:
    """An integer (or integral float) >= minimum (bool refused)."""
    ok = isinstance(x, (int, np.integer)) or (
        isinstance(x, (float, np.floating)) and math.isfinite(float(x)) and float(x).is_integer()
    )
    if isinstance(x, bool) or not ok or int(x) < minimum:
        raise error(f"{name} must be an integer >= {minimum}")
    return int(x)


def ptable_from_rows(
    i: np.ndarray,
    v: np.ndarray,
    p: np.ndarray,
    *,
    imax: int,
    period: int,
    digits: int,
) -> PTable:
    """A PTable from rows (i, v, p) via :meth:`PTable.from_frame` (intervals are cumulative
    sums in ascending v, rounded to ``digits`` decimals). Rows with p = 0 are left out."""
    if not (isinstance(digits, (int, np.integer)) and not isinstance(digits, bool) and 1 <= digits <= 15):
        raise PTableError("digits (decimals of the interval bounds) must be an integer in 1..15")
    keep = p > 0
    frame = pl.DataFrame(
        {
            "i": np.asarray(i, dtype=np.int64)[keep],
            "v": np.asarray(v, dtype=np.int64)[keep],
            "p": np.asarray(p, dtype=np.float64)[keep],
        }
    )
    return PTable.from_frame(frame, imax=imax, period=period, digits=int(digits))


def lost_mass(p: np.ndarray, digits: int) -> bool:
    """True when some positive probability is below the resolution 10**-digits (its interval
    may round to zero width, so the outcome can never be drawn)."""
    return bool(np.any((p > 0) & (p < 0.5 * 10.0 ** (-digits))))
