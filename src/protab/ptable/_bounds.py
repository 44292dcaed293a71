"""Interval bounds of p-tables as integers over a denominator: from decimals, from
probabilities (cumulated as R ptable), and back to exact decimal text."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from protab.errors import PTableError
from protab.ptable._values import _MAX_DIGITS, _P_TOL, _R_DIGITS


def _decimal_bounds(
    i: np.ndarray,
    lb: np.ndarray | None,
    ub: np.ndarray,
    p: np.ndarray | None,
    digits: int | None,
    where: Callable[[np.ndarray], str],
) -> tuple[np.ndarray, np.ndarray, int]:
    """Decimal interval bounds as integers over a power of ten: (lb_n, ub_n, den).

    Without ``lb``, an entry's lower bound is the previous upper bound of its i, in the given
    order (tau-ARGUS' file). den is 10**digits, or, when ``digits`` is None, 10**d for the
    fewest d >= 8 decimals that hold every bound (more than 12: PTableError). A ``p`` given
    too must equal ub - lb (1e-7); ``where(mask)`` names the rows where it does not.
    Shared by PTable.from_frame and MagnitudePTable.from_frame."""
    if lb is None:
        lb = (
            pl.DataFrame({"i": i, "ub": ub})
            .select(pl.col("ub").shift(1, fill_value=0.0).over("i"))
            .to_series()
            .to_numpy()
        )
    if digits is None:
        d = _decimal_digits(np.concatenate([lb, ub]))
        if d is None:
            raise PTableError(
                f"p-table bounds carry more than {_MAX_DIGITS} decimals; round them "
                "(R ptable uses 8) or pass digits=8 to round them on input"
            )
        digits = max(d, _R_DIGITS)
    scale = 10 ** int(digits)
    lb_n = np.rint(lb * scale).astype(np.int64)
    ub_n = np.rint(ub * scale).astype(np.int64)
    if p is not None:
        bad = np.abs((ub_n - lb_n) / scale - p) > _P_TOL
        if bad.any():
            raise PTableError(
                f"p-table column p does not equal ub - lb {where(bad)}; fix p or the bounds "
                "(or leave p out)"
            )
    return lb_n, ub_n, scale


def _cumulated_bounds(
    i: np.ndarray, key: np.ndarray, p: np.ndarray, scale: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Intervals from probabilities, as R ptable: per i, in ascending ``key`` (v or j), the
    upper bounds are the cumulative sums of p rounded over ``scale``, the last one ``scale``
    (it absorbs float error), each lower bound the previous upper bound. Returns (pos, lb_n,
    ub_n) in that sorted order, ``pos`` the entries' positions in the input."""
    order = pl.DataFrame({"i": i, "key": key, "p": p}).with_row_index("_pos")
    order = order.sort(["i", "key"], maintain_order=True)
    cum = order.select(pl.col("p").cum_sum().over("i")).to_series().to_numpy()
    ub_n = np.rint(cum * scale).astype(np.int64)
    is_last = (
        order.select(pl.col("_pos") == pl.col("_pos").last().over("i")).to_series().to_numpy()
    )
    ub_n[is_last] = scale
    lb_n = (
        pl.DataFrame({"i": order["i"], "ub_n": ub_n})
        .select(pl.col("ub_n").shift(1, fill_value=0).over("i"))
        .to_series()
        .to_numpy()
    )
    return order["_pos"].to_numpy(), lb_n, ub_n


def _decimal_digits(values: np.ndarray) -> int | None:
    """Fewest decimals (0..12) that represent every value, allowing float noise; else None."""
    for d in range(_MAX_DIGITS + 1):
        x = values * 10.0**d
        if np.all(np.abs(x - np.rint(x)) <= max(1e-7, 1e-15 * 10.0**d)):
            return d
    return None


def _fmt_units(num: int, den: int) -> str:
    """The exact decimal of num/den when it terminates (den = 2^a 5^b), else a float repr."""
    a = b = 0
    d = den
    while d % 2 == 0:
        d //= 2
        a += 1
    while d % 5 == 0:
        d //= 5
        b += 1
    if d != 1:
        return repr(num / den)
    digits = max(a, b)
    scaled = num * (10**digits // den)
    sign = "-" if scaled < 0 else ""
    whole, frac = divmod(abs(scaled), 10**digits)
    if digits == 0 or frac == 0:
        return f"{sign}{whole}"
    return f"{sign}{whole}.{str(frac).zfill(digits).rstrip('0')}"
