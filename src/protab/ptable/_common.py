"""Shared constants and helpers of the p-table package: input conversion, column checks, messages."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
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
    return a


def _float_array(frame: pl.DataFrame, col: str, ivals: np.ndarray) -> np.ndarray:
    """Column ``col`` as float64, refusing nulls and NaN (naming the rows' i)."""
    return _float_column(
        frame, col, lambda bad: f"in {int(bad.sum())} rows ({_name_i(ivals[bad].tolist())})"
    )


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


def _check_modulus(modulus: Any, error: type[Exception] = PTableError) -> int:
    """The modulus of integer cell keys, an integer in 1 .. 2**63 - 1 (else ``error``)."""
    if not _is_integral(modulus) or not 1 <= int(modulus) < 2**63:
        raise error("modulus must be an integer in 1 .. 2**63 - 1")
    return int(modulus)


def _check_keys(keys: np.ndarray, M: int) -> None:
    """Integer cell keys must lie in [0, M) (else InputError)."""
    if keys.size and (keys.min() < 0 or keys.max() >= M):
        outside = int(((keys < 0) | (keys >= M)).sum())
        raise InputError(f"cell keys must lie in [0, modulus); {outside} do not")


def _key_ranges(
    lb_n: Sequence[int], ub_n: Sequence[int], den: int, M: int, interval: str = "[lb,ub)"
) -> tuple[list[int], list[int]]:
    """For integer cell keys k in [0, M) (u = k/M), the inclusive key range klo..khi each
    interval [lb_n/den, ub_n/den) serves (``interval`` "[lb,ub)"; "(lb,ub]" puts k = 0 in
    the first interval), in exact integer arithmetic. khi < klo: the interval serves no key."""
    if interval == "[lb,ub)":  # lb <= k/M < ub
        klo = [-((-a * M) // den) for a in lb_n]
        khi = [-((-b * M) // den) - 1 for b in ub_n]
    else:  # lb < k/M <= ub, and k = 0 in the first interval
        klo = [0 if a == 0 else (a * M) // den + 1 for a in lb_n]
        khi = [min((b * M) // den, M - 1) for b in ub_n]
    return klo, khi


def keyspace_frame(
    frame: pl.DataFrame, den: int, modulus: Any, interval: str, value_type: type[pl.DataType]
) -> pl.DataFrame:
    """The keyspace of a p-table frame: for integer cell keys k in [0, modulus), the inclusive
    range klo..khi of keys each entry serves (:func:`_key_ranges`); entries serving no key are
    dropped. Columns i, v (``value_type``), klo, khi (Int64), in the frame's order.
    Shared by PTable.keyspace and MagnitudePTable.keyspace."""
    M = _check_modulus(modulus)
    klo, khi = _key_ranges(frame["lb_n"].to_list(), frame["ub_n"].to_list(), den, M, interval)
    out = pl.DataFrame(
        {"i": frame["i"], "v": frame["v"], "klo": klo, "khi": khi},
        schema={"i": value_type, "v": value_type, "klo": pl.Int64, "khi": pl.Int64},
    )
    return out.filter(pl.col("khi") >= pl.col("klo"))


def noise_at(
    ri: np.ndarray, rk: np.ndarray, rv: np.ndarray, r: np.ndarray, k: np.ndarray, nrow: int, M: int
) -> np.ndarray:
    """The noise of keyspace entries (row ``ri``, first key ``rk``, noise ``rv``; sorted by
    row and key) for rows ``r`` (0..nrow-1) and cell keys ``k`` in [0, M): the entry of row r
    with the largest klo <= k. Shared by PTable.lookup and MagnitudePTable.lookup."""
    if nrow * M < 2**62:  # one sorted int64 key (row, klo): one searchsorted
        return rv[np.searchsorted(ri * M + rk, r * M + k, side="right") - 1]
    out = np.empty(r.shape, dtype=rv.dtype)  # keys too wide for one int64: row by row
    for rr in np.unique(r):
        sel = r == rr
        ent = np.flatnonzero(ri == rr)
        out[sel] = rv[ent[np.searchsorted(rk[ent], k[sel], side="right") - 1]]
    return out


def same_entries(
    a: pl.DataFrame, b: pl.DataFrame, cols: Sequence[str], den_a: int, den_b: int
) -> bool:
    """Two p-table frames hold the same entries: equal ``cols`` and the same intervals
    (lb_n/den_a = lb_n/den_b exactly, likewise ub_n)."""
    if a.height != b.height:
        return False
    if any(a[c].to_list() != b[c].to_list() for c in cols):
        return False
    return all(
        x * den_b == y * den_a
        for col in ("lb_n", "ub_n")
        for x, y in zip(a[col].to_list(), b[col].to_list())
    )


class _EntryTable:
    """What PTable and MagnitudePTable share as objects: ``frame`` holds the entries with
    integer bounds lb_n, ub_n over ``den``; len() counts the entries, str() is repr(), and the
    tables are unhashable (``==`` compares contents). Each class's ``__eq__`` checks its own
    type and settings, then :meth:`_same_entries`."""

    frame: pl.DataFrame
    den: int
    #: The columns ``==`` compares besides the intervals.
    _EQ_COLUMNS: tuple[str, ...] = ("i", "v")

    def __len__(self) -> int:
        return self.frame.height

    def __str__(self) -> str:
        return repr(self)

    def _same_entries(self, other: "_EntryTable") -> bool:
        """The same entries: equal _EQ_COLUMNS and intervals (compared exactly across
        denominators)."""
        return same_entries(self.frame, other.frame, self._EQ_COLUMNS, self.den, other.den)

    __hash__ = None  # type: ignore[assignment]


def entries(frame: pl.DataFrame) -> Iterator[tuple[Any, ...]]:
    """The entries (i, j, v, lb_n, ub_n) of a p-table frame, one tuple each, for the writers."""
    return zip(*(frame[c].to_list() for c in ("i", "j", "v", "lb_n", "ub_n")))


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


INFEASIBLE = ("error", "warn")


def check_infeasible(infeasible: Any) -> str:
    """The ``infeasible=`` option of the maximum-entropy builders, checked."""
    if infeasible not in INFEASIBLE:
        raise PTableError(f"infeasible must be 'error' or 'warn', not {infeasible!r}")
    return str(infeasible)


def refuse_variance_above(
    frame: pl.DataFrame, den: int, reached: dict[Any, bool], V: float, infeasible: str, what: str, fix: str
) -> None:
    """PTableError naming the rows of a maximum-entropy table whose smallest attainable
    variance is above V (``fix`` says which parameters to change), unless
    ``infeasible='warn'``. R ptable's pt_create_pTable stops for such rows ("The variance
    parameter you set is too small!"). The parameters are secrets: the message names
    neither them nor the smallest V that works, and says where the caller finds it."""
    if infeasible == "warn" or all(reached.values()):
        return
    m = row_moments(frame, den, None)
    above = [i for i, var in zip(m["i"].to_list(), m["p_var"].to_list()) if reached.get(i) is False and var > V]
    if above:
        raise PTableError(
            f"{what}: no distribution of {_name_i(above)} keeps its variance within V (the other "
            f"constraints leave those rows a larger smallest variance; R ptable stops here too). "
            f"{fix}. The smallest V that works is the largest p_var of those rows in the "
            "diagnostics of the table built with infeasible='warn', which keeps those rows at "
            "their smallest variance, above V"
        )


def read_file_text(path: Any) -> str:
    """The text of a p-table file (UTF-8, a BOM allowed); PTableError naming the file when
    it is missing, a folder, unreadable or not UTF-8."""
    p = Path(path)
    try:
        return p.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise PTableError(f"p-table file {str(p)!r} does not exist") from None
    except IsADirectoryError:
        raise PTableError(f"p-table file {str(p)!r} is a folder, not a file") from None
    except PermissionError:
        raise PTableError(f"p-table file {str(p)!r} cannot be read (permission denied)") from None
    except UnicodeDecodeError as exc:
        raise PTableError(
            f"p-table file {str(p)!r} is not UTF-8 text ({exc.reason} at byte {exc.start}); p-table "
            "files are CSV text as R ptable, tau-ARGUS and protab write them"
        ) from None
    except OSError as exc:
        raise PTableError(f"p-table file {str(p)!r} cannot be read ({exc.strerror or exc})") from None


def refuse_fractional_i(df: pl.DataFrame, name: str, holds: str) -> None:
    """PTableError naming the file, column 'i', the first data row (counted from 1) and its
    value when a p-table file's i are not whole numbers; ``holds`` says what i should be.
    R ptable and tau-ARGUS write whole i in both kinds of file, so a fractional i tells
    neither kind: it is a mistake in the file, not a sign that it is the other kind."""
    if "i" not in df.columns:
        return
    text = df["i"].cast(pl.String).str.strip_chars()
    num = text.cast(pl.Float64, strict=False).to_numpy()
    given = text.is_not_null().to_numpy() & (text.str.len_bytes() > 0).fill_null(False).to_numpy()
    with np.errstate(invalid="ignore"):
        bad = given & ~(np.isfinite(num) & (num == np.round(num)))
    rows = np.flatnonzero(bad)
    if rows.size:
        more = f" (and {rows.size - 1} more row(s))" if rows.size > 1 else ""
        raise PTableError(
            f"p-table file {name!r}: column 'i' must hold whole numbers ({holds}); data row "
            f"{int(rows[0]) + 1} has {text[int(rows[0])]!r}{more}. Fix those rows"
        )
