"""Input values of p-tables: the constants of R ptable and the ONS layout, the frame schema,
and the conversion and checks of columns, numbers and per-row parameters."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
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


def _name_i(values: Any) -> str:
    """'i = 1, 2 (2 in all)' for an error message naming the rows concerned."""
    vals = sorted({v for v in values if v is not None}, key=lambda x: (isinstance(x, str), x))
    return "i = " + show_values(vals)


def _to_polars(frame: Any) -> pl.DataFrame:
    """A p-table frame as polars (PTableError if it cannot be read as a table)."""
    return as_polars(frame, "p-table", PTableError)


def _constructor_input(frame: Any, den: Any, cls: str, layout: str) -> tuple[pl.DataFrame, int]:
    """The frame and den given to the constructor of class ``cls``: a table with the columns
    i, v, lb_n, ub_n (``layout`` names it in the message: "frame", "integer frame") and a
    positive integer den, else PTableError."""
    df = _to_polars(frame)
    missing = [c for c in ("i", "v", "lb_n", "ub_n") if c not in df.columns]
    if missing:
        raise PTableError(
            f"p-table frame lacks column(s) {show_values(missing)}; {cls}() takes the "
            f"{layout} (i, v, lb_n, ub_n) — use {cls}.from_frame for other layouts"
        )
    if not _is_integral(den) or int(den) < 1:
        raise PTableError("den must be a positive integer (the bounds are lb_n/den, ub_n/den)")
    return df, int(den)


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
        ints: np.ndarray = s.cast(pl.Int64).to_numpy()
        return ints
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
    out: np.ndarray = a.astype(np.int64)
    return out


def _float_column(
    frame: pl.DataFrame, col: str, where: Callable[[np.ndarray], str]
) -> np.ndarray:
    """Column ``col`` as finite float64 (text is stripped and parsed), else PTableError;
    ``where(mask)`` names the offending rows in the message ("in 2 rows (i = 1, 3)")."""
    s = frame[col]
    if s.dtype == pl.String:
        s = s.str.strip_chars().cast(pl.Float64, strict=False)
    elif not s.dtype.is_numeric():  # Boolean is not numeric
        raise PTableError(f"p-table column '{col}' must hold numbers, not {s.dtype}")
    a = s.cast(pl.Float64).fill_null(float("nan")).to_numpy().astype(np.float64)
    bad = ~np.isfinite(a)
    if bad.any():
        raise PTableError(
            f"p-table column '{col}' has missing, NaN or non-numeric values {where(bad)}; "
            "fill them in"
        )
    out: np.ndarray = a
    return out


def _float_array(frame: pl.DataFrame, col: str, ivals: np.ndarray) -> np.ndarray:
    """Column ``col`` as float64, refusing nulls and NaN (naming the rows' i)."""
    return _float_column(
        frame, col, lambda bad: f"in {int(bad.sum())} rows ({_name_i(ivals[bad].tolist())})"
    )


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


def _is_number(x: Any) -> bool:
    """A finite int or float (NumPy's too), not a bool."""
    return (
        not isinstance(x, (bool, np.bool_))
        and isinstance(x, (int, float, np.integer, np.floating))
        and math.isfinite(float(x))
    )


def _row_params(
    pstay: Any, mono: Any, optim: Any, ncat: int, per: str
) -> tuple[list[Any], list[Any], list[Any]]:
    """R ptable's per-row parameters of a maximum-entropy table, each a scalar or one per
    row (``per`` names a row in the messages: "row", "class of icat"), checked: pstay
    None or 0 < pstay < 1, mono a bool, optim 1..4."""
    pstays = _per_row(pstay, ncat, "pstay")
    for ps in pstays:
        if ps is not None and (not _is_number(ps) or not 0.0 < float(ps) < 1.0):
            raise PTableError("pstay must satisfy 0 < pstay < 1 (or be None)")
    monos = _per_row(mono, ncat, "mono")
    if not all(isinstance(mo, (bool, np.bool_)) for mo in monos):
        raise PTableError(f"mono must be True or False (or one per {per})")
    optims = _per_row(optim, ncat, "optim")
    if not all(_is_integral(o) and int(o) in (1, 2, 3, 4) for o in optims):
        raise PTableError(f"optim must be 1, 2, 3 or 4 (or one per {per})")
    return pstays, monos, optims


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


INFEASIBLE = ("error", "warn")


def check_infeasible(infeasible: Any) -> str:
    """The ``infeasible=`` option of the maximum-entropy builders, checked."""
    if infeasible not in INFEASIBLE:
        raise PTableError(f"infeasible must be 'error' or 'warn', not {infeasible!r}")
    return str(infeasible)
