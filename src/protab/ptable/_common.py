"""Shared constants and helpers of the p-table package: input conversion, column checks, messages."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import polars as pl

from protab._frames import as_polars
from protab.errors import InputError, PTableError, show_values

Interval = Literal["[lb,ub)", "(lb,ub]"]
_INTERVALS: tuple[str, ...] = ("[lb,ub)", "(lb,ub]")

_R_DIGITS = 8  # the R package ptable rounds interval bounds to 8 decimals
_R_EPS = 1e-8  # ... and gives every allowed outcome a probability of at least 1e-8
_MAX_DIGITS = 12  # most decimals accepted for bounds given as decimals
_P_TOL = 1e-7  # tolerance for probabilities given as floats
_VAR_TOL = 5e-4  # the variance counts as reached when it rounds to V at 3 decimals
_ONS_IMAX, _ONS_PERIOD = 750, 250  # pcv = n for n <= 750, ((n - 1) mod 250) + 501 above

_FRAME_SCHEMA = {
    "i": pl.Int64,
    "j": pl.Int64,
    "p": pl.Float64,
    "v": pl.Int64,
    "lb": pl.Float64,
    "ub": pl.Float64,
    "lb_n": pl.Int64,
    "ub_n": pl.Int64,
}


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------


def _name_i(values: Any) -> str:
    """'i = 1, 2 (2 in all)' for an error message naming the rows concerned."""
    vals = sorted({v for v in values if v is not None}, key=lambda x: (isinstance(x, str), x))
    return "i = " + show_values(vals)


def _to_polars(frame: Any) -> pl.DataFrame:
    """A p-table frame as polars (PTableError if it cannot be read as a table)."""
    return as_polars(frame, "p-table", PTableError)


def _int_array(frame: pl.DataFrame, col: str, i_col: str = "i") -> np.ndarray:
    """Column ``col`` as int64, refusing nulls, NaN and non-integers (naming the rows' i)."""
    s = frame[col]
    ivals = frame[i_col].to_list() if i_col in frame.columns else []
    if s.null_count():
        bad = s.is_null().to_numpy()
        where = _name_i(np.asarray(ivals, dtype=object)[bad]) if col != i_col else "some rows"
        raise PTableError(
            f"p-table column '{col}' has missing values ({int(bad.sum())} rows, {where}); "
            "every row needs an integer value"
        )
    if s.dtype.is_integer():
        return s.cast(pl.Int64).to_numpy()
    if s.dtype == pl.Boolean or not (s.dtype.is_float() or s.dtype == pl.String):
        raise PTableError(f"p-table column '{col}' must hold integers, not {s.dtype}")
    if s.dtype == pl.String:
        s = s.str.strip_chars().cast(pl.Float64, strict=False)
        if s.null_count():
            raise PTableError(
                f"p-table column '{col}' holds text that is not a number; "
                "it must hold integers"
            )
    a = s.cast(pl.Float64).to_numpy()
    bad = ~np.isfinite(a) | (a != np.round(a))
    if bad.any():
        shown = a[bad] if col == i_col else np.asarray(ivals, dtype=object)[bad]
        what = (
            f"values {show_values(sorted(set(shown.tolist())))}"
            if col == i_col
            else _name_i(shown)
        )
        raise PTableError(
            f"p-table column '{col}' must hold integers; NaN or non-integer values in "
            f"{int(bad.sum())} rows ({what})"
        )
    return a.astype(np.int64)


def _float_array(frame: pl.DataFrame, col: str, ivals: np.ndarray) -> np.ndarray:
    """Column ``col`` as float64, refusing nulls and NaN (naming the rows' i)."""
    s = frame[col]
    if s.dtype == pl.String:
        s = s.str.strip_chars().cast(pl.Float64, strict=False)
    elif not (s.dtype.is_numeric()):
        raise PTableError(f"p-table column '{col}' must hold numbers, not {s.dtype}")
    a = s.cast(pl.Float64).fill_null(float("nan")).to_numpy()
    bad = ~np.isfinite(a)
    if bad.any():
        raise PTableError(
            f"p-table column '{col}' has missing, NaN or non-numeric values in "
            f"{int(bad.sum())} rows ({_name_i(ivals[bad].tolist())}); fill them in"
        )
    return a


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


def _per_row(value: Any, ncat: int, name: str) -> list[Any]:
    """A scalar or a sequence of length ncat (one per row i = 1..ncat), as in R ptable."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        return [value] * ncat
    vals = list(value)
    if len(vals) != ncat:
        raise PTableError(
            f"'{name}' must be a scalar or have exactly one entry per row i = 1..ncat"
        )
    return vals


def _is_integral(x: Any) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, (int, np.integer)):
        return True
    return isinstance(x, (float, np.floating)) and math.isfinite(x) and float(x).is_integer()


def _check_p(i: np.ndarray, p: np.ndarray) -> None:
    """Probabilities in [0, 1] that sum to 1 per i (within 1e-7)."""
    bad = (p < -_P_TOL) | (p > 1 + _P_TOL)
    if bad.any():
        raise PTableError(
            f"p-table probabilities outside [0, 1] for {_name_i(i[bad].tolist())}; fix them"
        )
    sums = pl.DataFrame({"i": i, "p": p}).group_by("i").agg(pl.col("p").sum())
    off = sums.filter((pl.col("p") - 1.0).abs() > _P_TOL)
    if off.height:
        raise PTableError(
            f"p-table probabilities do not sum to 1 for {_name_i(off['i'].to_list())}; "
            "each i needs a complete distribution of its outcomes"
        )


def _as_int(x: Any, name: str) -> np.ndarray:
    """An int64 array from integers or integral floats."""
    a = np.asarray(x)
    if a.dtype.kind in "iu":
        return a.astype(np.int64)
    if a.dtype.kind == "f" and np.all(np.isfinite(a)) and np.all(a == np.round(a)):
        return a.astype(np.int64)
    if a.dtype.kind == "O":
        try:
            return np.asarray([int(v) for v in a.ravel()], dtype=np.int64).reshape(a.shape)
        except (TypeError, ValueError, OverflowError):
            pass
    raise InputError(f"'{name}' must hold integers (no NaN, no fractions)")


def _check_modulus(modulus: Any) -> int:
    """The modulus of integer cell keys, an integer in 1 .. 2**63 - 1 (else PTableError)."""
    if not _is_integral(modulus) or not 1 <= int(modulus) < 2**63:
        raise PTableError("modulus must be an integer in 1 .. 2**63 - 1")
    return int(modulus)


def _key_ranges(
    lb_n: Sequence[int], ub_n: Sequence[int], den: int, M: int, interval: str = "[lb,ub)"
) -> tuple[list[int], list[int]]:
    """For integer cell keys k in [0, M) (u = k/M), the inclusive key range klo..khi each
    interval [lb_n/den, ub_n/den) serves (``interval`` "[lb,ub)"; "(lb,ub]" puts k = 0 in
    the first interval), in exact integer arithmetic. khi < klo: the interval serves no key.
    Shared by PTable.keyspace and NumericPTable.keyspace."""
    if interval == "[lb,ub)":  # lb <= k/M < ub
        klo = [-((-a * M) // den) for a in lb_n]
        khi = [-((-b * M) // den) - 1 for b in ub_n]
    else:  # lb < k/M <= ub, and k = 0 in the first interval
        klo = [0 if a == 0 else (a * M) // den + 1 for a in lb_n]
        khi = [min((b * M) // den, M - 1) for b in ub_n]
    return klo, khi


def row_moments(frame: pl.DataFrame, den: int, reached: dict[Any, bool] | None) -> pl.DataFrame:
    """Per i of a p-table frame (integer bounds over ``den``): p_mean (Σ p v), p_var (Σ p v²,
    the variance when p_mean = 0, as R ptable's empResults), p_sum, p_stay (p of v = 0) and,
    given ``reached``, var_reached (null where a row has no entry in it)."""
    w = pl.col("ub_n") - pl.col("lb_n")
    out = (
        frame.group_by("i")
        .agg(
            (w * pl.col("v")).sum().alias("m1"),
            (w * pl.col("v") * pl.col("v")).sum().alias("m2"),
            w.sum().alias("m0"),
            (w * (pl.col("v") == 0)).sum().alias("s"),
        )
        .sort("i")
        .select(
            "i",
            (pl.col("m1") / den).alias("p_mean"),
            (pl.col("m2") / den).alias("p_var"),
            (pl.col("m0") / den).alias("p_sum"),
            (pl.col("s") / den).alias("p_stay"),
        )
    )
    if reached is not None:
        out = out.with_columns(
            pl.Series("var_reached", [reached.get(i) for i in out["i"].to_list()], dtype=pl.Boolean)
        )
    return out
