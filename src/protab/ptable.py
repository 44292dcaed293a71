"""Perturbation tables (p-tables): generate, validate, read, write, look up.

A p-table says, for each original value (row class) ``i``, which noise ``v`` a cell gets for
its cell key: the intervals ``[lb, ub)`` of one ``i`` cut [0, 1) into one piece per outcome
``j = i + v`` (ESSnet Handbook on SDC, chapter on frequency tables; Giessing 2016). protab
holds the bounds as exact integers over a denominator ``den`` so that the lookup of an
integer cell key (DESIGN.md, idea 4) is exact arithmetic on every engine.

Two dialects are read and written: the Destatis / R ptable / tau-ARGUS table
``(i, j, p, v, p_int_lb, p_int_ub)`` and the ONS / ABS table ``(pcv, ckey, pvalue)``
(ONSdigital cell-key-perturbation 3.1.0). Values above the last row use the row class rule
``key(n)`` with ``imax`` and ``period`` (METHODS.md §3).

p-table parameters (D, V, js, pstay) are secrets: no repr, error or warning shows them.
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np
import polars as pl
from scipy.optimize import linprog, minimize

from protab._io import write_text
from protab.errors import InputError, PTableError, PTableWarning, show_values

__all__ = ["PTable", "Interval"]

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
    """Accept polars, pandas, pyarrow or anything ``pl.DataFrame`` takes."""
    if isinstance(frame, pl.LazyFrame):
        return frame.collect()
    if isinstance(frame, pl.DataFrame):
        return frame
    mod = type(frame).__module__
    try:
        if mod.startswith("pandas"):
            return pl.from_pandas(frame)
        if mod.startswith("pyarrow"):
            out = pl.from_arrow(frame)
            if isinstance(out, pl.DataFrame):
                return out
        return pl.DataFrame(frame)
    except Exception as exc:  # noqa: BLE001 - any conversion failure is an input mistake
        raise PTableError(
            f"cannot read a p-table from an object of type {type(frame).__name__}: "
            "pass a polars, pandas or pyarrow table"
        ) from exc


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


# --------------------------------------------------------------------------------------------
# maximum entropy (R package ptable 1.0.0, pt_create_pTable / pt_optim_entropy)
# --------------------------------------------------------------------------------------------


def _maxent_row(
    v: np.ndarray, V: float, lower: np.ndarray, mono: bool, optim: int
) -> np.ndarray | None:
    """Maximum-entropy probabilities over the noise values ``v`` (ascending), or None.

    Minimise sum p ln p subject to sum p = 1, sum p v = 0, sum p v^2 <= V (= V for optim 4),
    p >= lower and, with ``mono``, p non-decreasing up to v = 0 (ptable's constraints). The
    problem is convex; a phase-I linear programme (HiGHS) finds a strictly feasible start and a
    primal-dual interior-point method (Boyd & Vandenberghe 2004, §11.7) solves it to ~1e-12.
    None means the constraints cannot all hold.
    """
    n = len(v)
    if n == 0:
        return None
    eq_rows = [np.ones(n), v]
    eq_rhs = [1.0, 0.0]
    in_rows: list[np.ndarray] = []
    in_rhs: list[float] = []
    if optim == 4:
        eq_rows.append(v * v)
        eq_rhs.append(V)
    else:
        in_rows.append(v * v)
        in_rhs.append(V)
    if mono:
        zero = np.flatnonzero(v == 0)
        for k in range(int(zero[0]) if zero.size else 0):
            r = np.zeros(n)
            r[k], r[k + 1] = 1.0, -1.0
            in_rows.append(r)
            in_rhs.append(0.0)
    A, b = np.array(eq_rows), np.array(eq_rhs)
    G = np.vstack([np.array(in_rows).reshape(-1, n), -np.eye(n)])
    h = np.concatenate([np.array(in_rhs), -lower])
    m, q = G.shape[0], A.shape[0]
    if n == 1:  # a single outcome: feasible only if it is v = 0 (never for a valid row)
        return np.ones(1) if v[0] == 0 and np.all(G @ np.ones(1) <= h) else None

    # phase I: maximise the smallest slack s of the inequalities (s <= 1)
    lp = linprog(
        np.r_[np.zeros(n), -1.0],
        A_ub=np.hstack([G, np.ones((m, 1))]),
        b_ub=h,
        A_eq=np.hstack([A, np.zeros((q, 1))]),
        b_eq=b,
        bounds=[(None, None)] * n + [(None, 1.0)],
        method="highs",
    )
    if lp.status != 0 or lp.x[-1] < -1e-12:
        return None
    x = lp.x[:n].copy()
    if lp.x[-1] <= 1e-12:  # feasible, but with no interior: polish the LP point by SLSQP
        return _slsqp_row(x, A, b, G, h)
    fi = G @ x - h
    lam = 1.0 / -fi
    nu = np.zeros(q)
    mu = 10.0

    def residuals(x: np.ndarray, lam: np.ndarray, nu: np.ndarray, t: float) -> np.ndarray:
        fi = G @ x - h
        return np.concatenate(
            [np.log(x) + 1.0 + G.T @ lam + A.T @ nu, -lam * fi - 1.0 / t, A @ x - b]
        )

    for _ in range(300):
        fi = G @ x - h
        eta = float(-fi @ lam)
        t = mu * m / eta
        r = residuals(x, lam, nu, t)
        rd, rc, rp = r[:n], r[n : n + m], r[n + m :]
        grad_scale = 1.0 + float(np.abs(np.log(x)).max())
        if np.abs(rp).max() <= 1e-13 and np.abs(rd).max() <= 1e-11 * grad_scale and eta <= 1e-13:
            break
        # reduced Newton system: eliminate the inequality multipliers
        w = lam / -fi
        H = np.diag(1.0 / x) + G.T @ (w[:, None] * G)
        K = np.block([[H, A.T], [A, np.zeros((q, q))]])
        rhs = np.concatenate([-rd - G.T @ (rc / fi), -rp])
        try:
            sol = np.linalg.solve(K, rhs)
        except np.linalg.LinAlgError:
            sol = np.linalg.lstsq(K, rhs, rcond=None)[0]
        dx, dnu = sol[:n], sol[n:]
        dlam = (rc - lam * (G @ dx)) / fi
        neg = dlam < 0
        step = 0.99 * min(1.0, float(np.min(-lam[neg] / dlam[neg]))) if neg.any() else 0.99
        while step > 1e-16 and (np.any(G @ (x + step * dx) - h >= 0) or np.any(x + step * dx <= 0)):
            step *= 0.5
        r0 = float(np.linalg.norm(r))
        while step > 1e-16:
            if np.linalg.norm(residuals(x + step * dx, lam + step * dlam, nu + step * dnu, t)) <= (
                1.0 - 0.01 * step
            ) * r0:
                break
            step *= 0.5
        if step <= 1e-16:
            break
        x, lam, nu = x + step * dx, lam + step * dlam, nu + step * dnu

    return x if _feasible(x, A, b, G, h) else None


def _maxent_best_effort(
    v: np.ndarray, V: float, lower: np.ndarray, mono: bool, optim: int
) -> np.ndarray | None:
    """:func:`_maxent_row`, and when the variance target cannot be met (R ptable then returns
    a row that misses it without error), the maximum-entropy row whose variance is the
    attainable one nearest to V: the inequality form for optim 4, else the smallest variance
    the other constraints allow. None when even that is impossible."""
    p = _maxent_row(v, V, lower, mono, optim)
    if p is None and optim == 4:
        p = _maxent_row(v, V, lower, mono, 1)
    if p is None:
        vmin = _min_variance(v, lower, mono)
        if vmin is not None:
            p = _maxent_row(v, vmin * (1 + 1e-13) + 1e-15, lower, mono, 1)
    return p


def _min_variance(v: np.ndarray, lower: np.ndarray, mono: bool) -> float | None:
    """Smallest sum p v^2 under sum p = 1, sum p v = 0, p >= lower and mono (an LP)."""
    n = len(v)
    if n == 0:
        return None
    rows: list[np.ndarray] = []
    zero = np.flatnonzero(v == 0)
    if mono:
        for k in range(int(zero[0]) if zero.size else 0):
            r = np.zeros(n)
            r[k], r[k + 1] = 1.0, -1.0
            rows.append(r)
    lp = linprog(
        v * v,
        A_ub=np.array(rows) if rows else None,
        b_ub=np.zeros(len(rows)) if rows else None,
        A_eq=np.vstack([np.ones(n), v]),
        b_eq=np.array([1.0, 0.0]),
        bounds=[(lo, 1.0) for lo in lower],
        method="highs",
    )
    return float(lp.fun) if lp.status == 0 else None


def _feasible(x: np.ndarray, A: np.ndarray, b: np.ndarray, G: np.ndarray, h: np.ndarray) -> bool:
    return bool(
        np.all(np.isfinite(x))
        and np.abs(A @ x - b).max() <= 1e-9
        and np.all(G @ x - h <= 1e-9)
    )


def _slsqp_row(
    x0: np.ndarray, A: np.ndarray, b: np.ndarray, G: np.ndarray, h: np.ndarray
) -> np.ndarray | None:
    """Maximum entropy from a feasible start by SLSQP, for a feasible set without interior."""
    lower = np.maximum(-h[-len(x0) :], 1e-300)
    res = minimize(
        lambda p: float(np.sum(p * np.log(p))),
        np.maximum(x0, lower),
        jac=lambda p: np.log(p) + 1.0,
        method="SLSQP",
        bounds=[(lo, 1.0) for lo in lower],
        constraints=[
            {"type": "eq", "fun": lambda p: A @ p - b, "jac": lambda p: A},
            {"type": "ineq", "fun": lambda p: h - G @ p, "jac": lambda p: -G},
        ],
        options={"ftol": 1e-14, "maxiter": 1000},
    )
    x = np.asarray(res.x, dtype=np.float64)
    return x if _feasible(x, A, b, G, h) else None


# --------------------------------------------------------------------------------------------
# the p-table
# --------------------------------------------------------------------------------------------


class PTable:
    """A perturbation table: for original value i, move to j = i + v with probability p.

    ``frame`` holds the rows (i, j, p, v, lb, ub, lb_n, ub_n): the intervals [lb_n, ub_n) over
    ``den`` of one i partition [0, den). Values n > imax use row ``key(n)`` (``period``); the
    lookup convention for a cell key on a boundary is ``interval`` ("[lb,ub)" as R cellKey,
    ptable and tau-ARGUS; "(lb,ub]" as the ESSnet handbook and SSBcellKey).
    Build one with :meth:`maximum_entropy`, :meth:`from_frame`, :meth:`from_ons` or
    :meth:`read`; the constructor itself takes the integer frame (i, v, lb_n, ub_n) and den.
    """

    frame: pl.DataFrame
    den: int
    imax: int
    period: int
    interval: str

    def __init__(
        self,
        frame: Any,
        *,
        den: int,
        imax: int | None = None,
        period: int = 1,
        interval: Interval = "[lb,ub)",
    ) -> None:
        df = _to_polars(frame)
        missing = [c for c in ("i", "v", "lb_n", "ub_n") if c not in df.columns]
        if missing:
            raise PTableError(
                f"p-table frame lacks column(s) {show_values(missing)}; PTable() takes the "
                "integer frame (i, v, lb_n, ub_n) — use PTable.from_frame for other layouts"
            )
        if not _is_integral(den) or int(den) < 1:
            raise PTableError("den must be a positive integer (the bounds are lb_n/den, ub_n/den)")
        i = _int_array(df, "i")
        core = pl.DataFrame(
            {
                "i": i,
                "v": _int_array(df, "v"),
                "lb_n": _int_array(df, "lb_n"),
                "ub_n": _int_array(df, "ub_n"),
            },
            schema={"i": pl.Int64, "v": pl.Int64, "lb_n": pl.Int64, "ub_n": pl.Int64},
        )
        self._var_reached: dict[int, bool] | None = None
        self._set(core, int(den), imax, period, interval)

    # ---------------------------------------------------------------- validation and layout

    def _set(
        self, core: pl.DataFrame, den: int, imax: int | None, period: int, interval: str
    ) -> None:
        """Validate (i, v, lb_n, ub_n) over den, merge adjacent equal noise, fill the frame."""
        if interval not in _INTERVALS:
            raise PTableError(f"interval must be one of {_INTERVALS}, not {interval!r}")
        if not _is_integral(period) or int(period) < 1:
            raise PTableError("period must be an integer >= 1")
        period = int(period)
        if core.height == 0:
            raise PTableError("the p-table has no rows; it needs at least one row per i")

        bad = core.filter(pl.col("i") + pl.col("v") < 0)
        if bad.height:
            raise PTableError(
                "p-table has negative outcomes j = i + v < 0 for "
                f"{_name_i(bad['i'].to_list())} ({bad.height} rows); "
                "a count must not be perturbed below zero — remove or fix those rows"
            )
        bad = core.filter(pl.col("i") < 0)
        if bad.height:
            raise PTableError(
                f"p-table has negative original values {_name_i(bad['i'].to_list())}; i >= 0"
            )
        bad = core.filter(pl.col("ub_n") < pl.col("lb_n"))
        if bad.height:
            raise PTableError(
                "p-table has intervals with ub < lb (negative width) for "
                f"{_name_i(bad['i'].to_list())}; each interval must run upward"
            )
        bad = core.filter((pl.col("lb_n") < 0) | (pl.col("ub_n") > den))
        if bad.height:
            raise PTableError(
                "p-table has interval bounds outside [0, 1] for "
                f"{_name_i(bad['i'].to_list())}; bounds must lie in [0, 1]"
            )
        core = core.filter(pl.col("ub_n") > pl.col("lb_n")).sort(
            ["i", "lb_n", "ub_n"], maintain_order=True
        )
        chk = core.with_columns(
            prev_ub=pl.col("ub_n").shift(1).over("i"),
            last_ub=pl.col("ub_n").last().over("i"),
        )
        not_from_zero = chk.filter(pl.col("prev_ub").is_null() & (pl.col("lb_n") != 0))
        not_to_one = chk.filter(pl.col("last_ub") != den)
        gaps = chk.filter(pl.col("lb_n") > pl.col("prev_ub"))
        overlaps = chk.filter(pl.col("lb_n") < pl.col("prev_ub"))
        for rows, what in (
            (not_from_zero, "intervals that do not start at 0"),
            (not_to_one, "intervals that do not end at 1 (probabilities do not sum to 1)"),
            (gaps, "gaps between intervals"),
            (overlaps, "overlapping intervals"),
        ):
            if rows.height:
                raise PTableError(
                    f"p-table intervals are not a partition of [0, 1): {what} for "
                    f"{_name_i(rows['i'].to_list())}; the intervals of each i must tile "
                    "[0, 1) without gap or overlap (sorted by lb, each ub = next lb)"
                )

        ivals = np.unique(core["i"].to_numpy())
        imin, top = int(ivals[0]), int(ivals[-1])
        if imax is None:
            imax = top
        elif not _is_integral(imax) or int(imax) != top:
            raise PTableError(
                "imax must equal the largest i of the p-table (rows past imax are not used); "
                "leave imax=None to take it from the table"
            )
        imax = int(imax)
        missing = sorted(set(range(imin, imax + 1)) - set(ivals.tolist()))
        if missing:
            raise PTableError(
                f"p-table lacks rows for {_name_i(missing)}: every i from the smallest to "
                "imax needs its rows"
            )
        base = imax - period + 1
        if base < imin or (period > 1 and base < 1):
            raise PTableError(
                "period is too long for this p-table: the repeated rows imax - period + 1 .. "
                "imax must all exist (and start at i >= 1 when period > 1)"
            )

        run = (
            ((pl.col("v") != pl.col("v").shift(1)) | (pl.col("i") != pl.col("i").shift(1)))
            .fill_null(True)
            .cum_sum()
        )
        core = (
            core.with_columns(_run=run)
            .group_by("_run", maintain_order=True)
            .agg(
                pl.col("i").first(),
                pl.col("v").first(),
                pl.col("lb_n").min(),
                pl.col("ub_n").max(),
            )
            .drop("_run")
        )
        self.frame = core.select(
            pl.col("i"),
            (pl.col("i") + pl.col("v")).alias("j"),
            ((pl.col("ub_n") - pl.col("lb_n")) / den).alias("p"),
            pl.col("v"),
            (pl.col("lb_n") / den).alias("lb"),
            (pl.col("ub_n") / den).alias("ub"),
            pl.col("lb_n"),
            pl.col("ub_n"),
        ).cast(_FRAME_SCHEMA)  # type: ignore[arg-type]
        self.den = den
        self.imax = imax
        self.period = period
        self.interval = interval

    # ------------------------------------------------------------------------ constructors

    @classmethod
    def maximum_entropy(
        cls,
        D: int,
        V: float,
        js: int = 0,
        pstay: float | Sequence[float] | None = None,
        mono: bool | Sequence[bool] = True,
        optim: int | Sequence[int] = 1,
    ) -> "PTable":
        """A count p-table by maximum entropy, as R ptable 1.0.0 ``create_cnt_ptable``.

        Rows i = 0..ncat (ncat = D, or D + js + 1 when js > 0); row 0 keeps zeros. Row i
        allows j in [max(0, i-D), i+D] except 1..js and maximises entropy subject to
        unbiasedness, variance <= V (= V for optim 4), p >= max(pstay at v = 0, 1e-8) and,
        with ``mono``, p non-decreasing up to v = 0. A row that misses the variance lowers its
        pstay bound by 0.05 and retries (up to 20 solves). Bounds are cumulative sums rounded
        to 8 decimals (den = 10**8). ``pstay``, ``mono`` and ``optim`` may be given per row
        i = 1..ncat. Warns (PTableWarning) naming the rows whose variance was not reached.

        Differences from R, all outside its normal use: the variance counts as met within
        5e-4 of V (R: rounded to 3 decimals equal to V — the same for V with <= 3 decimals);
        blocked rows (i <= js) are judged too (R flags none); where no distribution meets
        the variance cap, the row takes the smallest attainable variance and is flagged (R's
        solver returns some point that breaks a constraint); a row with no distribution at all
        raises PTableError.
        """
        if not _is_integral(D) or int(D) < 1:
            raise PTableError("D (the largest noise) must be a positive integer")
        if (
            isinstance(V, bool)
            or not isinstance(V, (int, float, np.integer, np.floating))
            or not math.isfinite(float(V))
            or float(V) <= 0
        ):
            raise PTableError("V (the noise variance) must be a positive number")
        if not _is_integral(js) or int(js) < 0:
            raise PTableError("js (the blocked values 1..js) must be an integer >= 0")
        D, js, Vf = int(D), int(js), float(V)
        ncat = D if js == 0 else D + js + 1

        pstays = _per_row(pstay, ncat, "pstay")
        for ps in pstays:
            if ps is not None and (
                isinstance(ps, bool)
                or not isinstance(ps, (int, float, np.integer, np.floating))
                or not (0.0 < float(ps) < 1.0)
            ):
                raise PTableError("pstay must satisfy 0 < pstay < 1 (or be None)")
        monos = _per_row(mono, ncat, "mono")
        if not all(isinstance(mo, (bool, np.bool_)) for mo in monos):
            raise PTableError("mono must be True or False (or one per row)")
        optims = _per_row(optim, ncat, "optim")
        if not all(_is_integral(o) and int(o) in (1, 2, 3, 4) for o in optims):
            raise PTableError("optim must be 1, 2, 3 or 4 (or one per row)")

        parts: list[pl.DataFrame] = [
            pl.DataFrame({"i": [0], "v": [0], "lb_n": [0], "ub_n": [10**_R_DIGITS]})
        ]
        reached: dict[int, bool] = {}
        infeasible: list[int] = []
        scale = 10**_R_DIGITS
        for i in range(1, ncat + 1):
            j = np.arange(max(0, i - D), i + D + 1)
            j = j[(j < 1) | (j > js)]
            v = (j - i).astype(np.float64)
            zero = np.flatnonzero(v == 0)
            lower = np.full(len(v), _R_EPS)
            ps = pstays[i - 1]
            if zero.size and ps is not None:
                lower[zero] = max(float(ps), _R_EPS)
            blocked = 1 <= i <= js
            p: np.ndarray | None = None
            for _attempt in range(20):
                p = _maxent_best_effort(v, Vf, lower, bool(monos[i - 1]), int(optims[i - 1]))
                if p is None:
                    break
                ok = abs(float(p @ (v * v)) - Vf) < _VAR_TOL
                if ok or blocked or not zero.size or lower[zero[0]] <= _R_EPS:
                    break  # R would re-solve the very same problem: same answer
                lower[zero] = max(lower[zero[0]] - 0.05, _R_EPS)
            if p is None or abs(float(p.sum()) - 1.0) > 1e-10:
                infeasible.append(i)
                continue
            reached[i] = abs(float(p @ (v * v)) - Vf) < _VAR_TOL
            ub_n = np.rint(np.cumsum(p) * scale).astype(np.int64)
            ub_n[-1] = scale
            lb_n = np.r_[0, ub_n[:-1]]
            parts.append(
                pl.DataFrame(
                    {"i": np.full(len(v), i), "v": v.astype(np.int64), "lb_n": lb_n, "ub_n": ub_n}
                )
            )
        if infeasible:
            raise PTableError(
                "the maximum-entropy p-table cannot be computed without violating its "
                f"constraints for {_name_i(infeasible)}; change the parameters (a different "
                "variance is usually enough) or set mono=False or optim for those rows"
            )
        core = pl.concat(parts).cast(pl.Int64)
        out = cls(core, den=scale)
        out._var_reached = reached
        missed = sorted(i for i, ok in reached.items() if not ok)
        if missed:
            warnings.warn(
                f"p-table: the variance target was not met for {_name_i(missed)} (the "
                "other constraints do not allow it); see PTable.diagnostics, and change V, "
                "js or mono for those rows if that matters",
                PTableWarning,
                stacklevel=2,
            )
        return out

    @classmethod
    def from_frame(
        cls,
        frame: Any,
        *,
        imax: int | None = None,
        period: int = 1,
        interval: Interval = "[lb,ub)",
        den: int | None = None,
        digits: int | None = None,
    ) -> "PTable":
        """A p-table from a polars, pandas or pyarrow table.

        Columns: ``i``; ``v`` or ``j`` (both: they must agree); then either bounds — ``lb``/``ub``
        or R's ``p_int_lb``/``p_int_ub`` (``p_ij_ub`` as tau-ARGUS' example), or only the upper
        bound, whose lower bound is then the previous upper bound of that i in the given order —
        or only ``p``, whose intervals are cumulative sums in ascending j rounded to 8 decimals
        (as R ptable). Integer bounds ``lb_n``/``ub_n`` are taken as they are with ``den``.
        Decimal bounds are held over den = 10**8, or 10**d when they carry d = 9..12 decimals;
        more than 12 decimals raise PTableError unless ``digits`` says to round them (to 8, as
        R ptable does). Other columns (R's ``type``) are ignored.
        """
        df = _to_polars(frame)
        if "i" not in df.columns:
            raise PTableError("p-table frame lacks column 'i' (the original value)")
        if "v" not in df.columns and "j" not in df.columns:
            raise PTableError("p-table frame needs column 'v' (noise) or 'j' (perturbed value)")
        if df.height == 0:
            raise PTableError("the p-table has no rows; it needs at least one row per i")
        if digits is not None and (not _is_integral(digits) or not 0 <= int(digits) <= 15):
            raise PTableError("digits must be an integer between 0 and 15")
        i = _int_array(df, "i")
        if "v" in df.columns:
            v = _int_array(df, "v")
            if "j" in df.columns:
                j = _int_array(df, "j")
                bad = i + v != j
                if bad.any():
                    raise PTableError(
                        "p-table columns j and v disagree (j != i + v) for "
                        f"{_name_i(i[bad].tolist())}; give consistent values or only one of them"
                    )
        else:
            v = _int_array(df, "j") - i

        lb_col = next((c for c in ("lb", "p_int_lb") if c in df.columns), None)
        ub_col = next((c for c in ("ub", "p_int_ub", "p_ij_ub") if c in df.columns), None)
        p = _float_array(df, "p", i) if "p" in df.columns else None
        integer = "lb_n" in df.columns and "ub_n" in df.columns
        if integer and (den is not None or ub_col is None):
            if den is None:
                raise PTableError("integer bounds lb_n/ub_n need den= (the bounds are lb_n/den)")
            lb_i, ub_i = _int_array(df, "lb_n"), _int_array(df, "ub_n")
            core = pl.DataFrame({"i": i, "v": v, "lb_n": lb_i, "ub_n": ub_i})
            return cls(core, den=den, imax=imax, period=period, interval=interval)

        if ub_col is not None:
            ub = _float_array(df, ub_col, i)
            if lb_col is not None:
                lb = _float_array(df, lb_col, i)
            else:  # lower bound = previous upper bound of the same i, in the given order
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
                width = (ub_n - lb_n) / scale
                bad = np.abs(width - p) > _P_TOL
                if bad.any():
                    raise PTableError(
                        "p-table column p does not equal ub - lb for "
                        f"{_name_i(i[bad].tolist())}; fix p or the bounds (or leave p out)"
                    )
            core = pl.DataFrame({"i": i, "v": v, "lb_n": lb_n, "ub_n": ub_n})
            return cls(core, den=scale, imax=imax, period=period, interval=interval)

        if p is None:
            raise PTableError(
                "p-table frame needs interval bounds (lb/ub or p_int_lb/p_int_ub) or "
                "probabilities p"
            )
        _check_p(i, p)
        scale = 10 ** int(_R_DIGITS if digits is None else digits)
        order = pl.DataFrame({"i": i, "v": v, "p": p}).with_row_index("_row")
        order = order.sort(["i", "v"], maintain_order=True)
        cum = order.select(pl.col("p").cum_sum().over("i")).to_series().to_numpy()
        ub_n = np.rint(cum * scale).astype(np.int64)
        is_last = (
            order.select(pl.col("_row") == pl.col("_row").last().over("i")).to_series().to_numpy()
        )
        ub_n[is_last] = scale  # the last interval absorbs float error (sum checked to 1e-7)
        lb_n = (
            pl.DataFrame({"i": order["i"], "ub_n": ub_n})
            .select(pl.col("ub_n").shift(1, fill_value=0).over("i"))
            .to_series()
            .to_numpy()
        )
        core = pl.DataFrame({"i": order["i"], "v": order["v"], "lb_n": lb_n, "ub_n": ub_n})
        return cls(core, den=scale, imax=imax, period=period, interval=interval)

    @classmethod
    def from_ons(
        cls,
        frame: Any,
        *,
        period: int = _ONS_PERIOD,
        imax: int | None = None,
        fill_missing: bool = False,
    ) -> "PTable":
        """A p-table from an ONS/ABS table (pcv, ckey, pvalue), as ONS cell-key-perturbation.

        The ONS package adds pvalue of the row (pcv, ckey) with pcv = n for n <= 750, else
        ((n - 1) mod 250) + 501, and cell key = (sum of record keys) mod (max ckey + 1). Here
        den = max ckey + 1, row (pcv, c) is the interval [c, c + 1) over den, i = pcv,
        v = pvalue, adjacent ckeys with equal pvalue merge; imax = max pcv and period 250
        reproduce the ONS rule when the table runs to pcv 750. Every pcv needs every ckey
        0..max: ``fill_missing=True`` instead gives absent (pcv, ckey) — and absent pcv up to
        ``imax`` — noise 0, as the ONS package's left join does.
        """
        df = _to_polars(frame)
        missing = [c for c in ("pcv", "ckey", "pvalue") if c not in df.columns]
        if missing:
            raise PTableError(f"ONS p-table lacks column(s) {show_values(missing)}")
        if df.height == 0:
            raise PTableError("the ONS p-table has no rows")
        df = df.rename({"pcv": "i"})
        pcv = _int_array(df, "i")
        ckey = _int_array(df, "ckey")
        pvalue = _int_array(df, "pvalue")
        if ckey.min() < 0:
            raise PTableError("ONS p-table has negative ckey values; cell keys run 0..max")
        tab = pl.DataFrame({"i": pcv, "ckey": ckey, "v": pvalue})
        dup = tab.filter(pl.struct("i", "ckey").is_duplicated())
        if dup.height:
            raise PTableError(
                "ONS p-table has duplicate (pcv, ckey) rows for pcv "
                f"{show_values(sorted(set(dup['i'].to_list())))}; each (pcv, ckey) may occur once"
            )
        den = int(ckey.max()) + 1
        top = int(pcv.max()) if imax is None else int(imax)
        if fill_missing:
            lo = min(int(pcv.min()), 1)
            full = pl.DataFrame({"i": np.arange(lo, top + 1, dtype=np.int64)}).join(
                pl.DataFrame({"ckey": np.arange(den, dtype=np.int64)}), how="cross"
            )
            tab = full.join(tab, on=["i", "ckey"], how="left")
            tab = tab.with_columns(pl.col("v").fill_null(0))
        else:
            counts = tab.group_by("i").agg(pl.len().alias("n"))
            bad = counts.filter(pl.col("n") != den)
            if bad.height:
                raise PTableError(
                    f"ONS p-table lacks some ckeys 0..{den - 1} for pcv "
                    f"{show_values(sorted(bad['i'].to_list()))}; give every (pcv, ckey) or pass "
                    "fill_missing=True to give absent ones noise 0 (as the ONS package does)"
                )
        core = tab.select(
            "i", "v", pl.col("ckey").alias("lb_n"), (pl.col("ckey") + 1).alias("ub_n")
        )
        return cls(core, den=den, imax=imax, period=period, interval="[lb,ub)")

    # ------------------------------------------------------------------------ files

    @classmethod
    def read(
        cls,
        path: str | os.PathLike[str],
        format: Literal["auto", "ptable", "tauargus", "ons"] = "auto",
        *,
        period: int | None = None,
        interval: Interval = "[lb,ub)",
    ) -> "PTable":
        """Read a p-table file: "ptable" (R ptable CSV), "tauargus" (``pt_export`` ';' file,
        also the SAS variant with p_int_lb) or "ons" (pcv,ckey,pvalue CSV); "auto" detects
        it from the header and separator. Files do not store ``period`` (default 1, 250 for
        ONS) or ``interval``: pass them."""
        path = Path(path)
        if not path.is_file():
            raise PTableError(f"p-table file {str(path)!r} does not exist")
        with path.open(encoding="utf-8-sig") as fh:
            header = next((line for line in fh if line.strip()), "")
        names = [t.strip().strip("\"'").lower() for t in header.replace(";", ",").split(",")]
        if format == "auto":
            if ";" in header:
                format = "tauargus"
            elif {"pcv", "ckey", "pvalue"} <= set(names):
                format = "ons"
            else:
                format = "ptable"
        try:
            if format == "ons":
                df = pl.read_csv(path, infer_schema_length=None)
                return cls.from_ons(df, period=_ONS_PERIOD if period is None else period)
            if format == "ptable":
                df = pl.read_csv(path, infer_schema_length=None)
                return cls.from_frame(df, period=1 if period is None else period, interval=interval)
            if format == "tauargus":
                raw = pl.read_csv(path, separator=";", infer_schema_length=0)
                cols = raw.columns
                if len(cols) < 5:
                    raise PTableError(
                        f"tau-ARGUS p-table file {path.name!r} needs the columns i;j;p;v;p_int_ub"
                    )
                lower = [c.strip().strip('"').lower() for c in cols]
                sixth = raw[cols[5]].str.strip_chars() if len(cols) >= 6 else None
                sas = sixth is not None and (
                    lower[4] == "p_int_lb" or sixth.cast(pl.Float64, strict=False).null_count() == 0
                )
                use = ["i", "j", "p", "v"] + (["p_int_lb", "p_int_ub"] if sas else ["p_int_ub"])
                df = raw.select(cols[: len(use)]).rename(dict(zip(cols[: len(use)], use)))
                return cls.from_frame(df, period=1 if period is None else period, interval=interval)
        except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
            raise PTableError(f"cannot read p-table file {path.name!r} as {format}: {exc}") from exc
        raise PTableError(f"unknown p-table format {format!r}; use 'ptable', 'tauargus' or 'ons'")

    def write(
        self,
        path: str | os.PathLike[str],
        format: Literal["ptable", "tauargus", "ons"] = "ptable",
        *,
        modulus: int | None = None,
    ) -> None:
        """Write the p-table atomically (temporary file, then rename): "ptable" is R ptable's
        CSV (``"i","j","p","v","p_int_lb","p_int_ub","type"``), "tauargus" the ';' file of
        ``pt_export(SDCtool = "TauArgus")`` (``i;j;p;v;p_int_ub``), "ons" the (pcv, ckey,
        pvalue) CSV of :meth:`to_ons` (``modulus`` as there). Decimals are exact (8 of them for
        den = 10**8)."""
        path = Path(path)
        if format == "ons":
            text = self.to_ons(modulus).write_csv()
        elif format in ("ptable", "tauargus"):
            den = self.den
            rows = zip(
                self.frame["i"].to_list(),
                self.frame["j"].to_list(),
                self.frame["v"].to_list(),
                self.frame["lb_n"].to_list(),
                self.frame["ub_n"].to_list(),
            )
            if format == "ptable":
                lines = ['"i","j","p","v","p_int_lb","p_int_ub","type"']
                lines += [
                    f"{i},{j},{_fmt_units(u - lo, den)},{v},"
                    f'{_fmt_units(lo, den)},{_fmt_units(u, den)},"all"'
                    for i, j, v, lo, u in rows
                ]
            else:
                lines = ["i;j;p;v;p_int_ub"]
                lines += [
                    f"{i};{j};{_fmt_units(u - lo, den)};{v};{_fmt_units(u, den)}"
                    for i, j, v, lo, u in rows
                ]
            text = "\n".join(lines) + "\n"
        else:
            raise PTableError(
                f"unknown p-table format {format!r}; use 'ptable', 'tauargus' or 'ons'"
            )
        write_text(path, text)

    # -- the other mechanisms that are p-tables (built in protab.noise / protab.rounding) --
    @classmethod
    def discrete_laplace(cls, epsilon: float, cap: int, sensitivity: float = 1, **kwargs: Any) -> "PTable":
        """Capped discrete Laplace (DP); see :func:`protab.noise.discrete_laplace`."""
        from protab.noise import discrete_laplace

        return discrete_laplace(epsilon, cap, sensitivity, **kwargs)

    @classmethod
    def pram(cls, small: Any, large: Any, **kwargs: Any) -> "PTable":
        """PRAM of counts from two transition matrices; see :func:`protab.noise.pram`."""
        from protab.noise import pram

        return pram(small, large, **kwargs)

    @classmethod
    def drop_add_q(cls, rate: float = 0.01, cap: int = 7, **kwargs: Any) -> "PTable":
        """Drop/add-up-to-q; see :func:`protab.noise.drop_add_q`."""
        from protab.noise import drop_add_q

        return drop_add_q(rate, cap, **kwargs)

    @classmethod
    def random_rounding(cls, base: int) -> "PTable":
        """Unbiased random rounding to ``base`` (period b); see :func:`protab.rounding.random_rounding_ptable`."""
        from protab.rounding import random_rounding_ptable

        return random_rounding_ptable(base)

    @classmethod
    def barnardisation(cls, p: float) -> "PTable":
        """Barnardisation (±1 with probability p/2 each); see :func:`protab.rounding.barnardisation_ptable`."""
        from protab.rounding import barnardisation_ptable

        return barnardisation_ptable(p)

    def to_ons(self, modulus: int | None = None) -> pl.DataFrame:
        """The ONS/ABS table (pcv, ckey, pvalue) for cell keys 0..modulus-1 (default den).

        pcv runs 1..750 as the ONS package reads it (pcv = n up to 750, then
        ((n - 1) mod 250) + 501), each with the noise of row ``key(pcv)``; rows below the
        smallest i are left out (noise 0), pcv 0 is written only when row 0 moves zeros.
        Raises PTableError when the table's (imax, period) rule differs from the ONS rule
        for some count (e.g. imax > 750).
        """
        M = self.den if modulus is None else modulus
        if not _is_integral(M) or not 1 <= int(M) <= 2**20:
            raise PTableError("modulus for an ONS table must be an integer in 1..2**20")
        M = int(M)
        n = np.arange(_ONS_IMAX + 1, _ONS_IMAX + 1 + _ONS_PERIOD * self.period, dtype=np.int64)
        ons_pcv = (n - 1) % _ONS_PERIOD + (_ONS_IMAX - _ONS_PERIOD + 1)
        if self.imax > _ONS_IMAX or not np.array_equal(self.row_class(n), self.row_class(ons_pcv)):
            raise PTableError(
                "this p-table's rule for large counts (imax, period) differs from the ONS rule "
                "(pcv = ((n - 1) mod 250) + 501 above 750), so it has no ONS equivalent"
            )
        imin = int(self.frame["i"].min())  # type: ignore[arg-type]
        moves_zeros = bool((self.frame.filter(pl.col("i") == 0)["v"] != 0).any())
        ks = self.keyspace(M)
        classes = np.arange(imin, self.imax + 1)
        noise = np.zeros((len(classes), M), dtype=np.int64)
        for i, v, lo, hi in ks.iter_rows():
            noise[i - imin, lo : hi + 1] = v
        pcv = np.arange(0 if moves_zeros else max(1, imin), _ONS_IMAX + 1, dtype=np.int64)
        rows = self.row_class(pcv) - imin
        return pl.DataFrame(
            {
                "pcv": np.repeat(pcv, M),
                "ckey": np.tile(np.arange(M, dtype=np.int64), len(pcv)),
                "pvalue": noise[rows].reshape(-1),
            }
        )

    # ------------------------------------------------------------------------ lookup

    def row_class(self, n: Any) -> np.ndarray:
        """Row class of each count: n up to imax, then rows imax-period+1..imax repeating."""
        a = _as_int(n, "n")
        base = self.imax - self.period + 1
        return np.where(a <= self.imax, a, base + np.mod(a - base, self.period))

    def keyspace(self, modulus: int) -> pl.DataFrame:
        """For integer cell keys k in [0, modulus) (u = k/modulus), the inclusive range
        klo..khi of keys each row serves, in exact integer arithmetic; rows serving no key are
        dropped. Columns i, v, klo, khi (Int64). The join relation of the SQL lookup."""
        if not _is_integral(modulus) or not 1 <= int(modulus) < 2**63:
            raise PTableError("modulus must be an integer in 1 .. 2**63 - 1")
        M, den = int(modulus), self.den
        lbs, ubs = self.frame["lb_n"].to_list(), self.frame["ub_n"].to_list()
        if self.interval == "[lb,ub)":  # lb <= k/M < ub
            klo = [-((-a * M) // den) for a in lbs]
            khi = [-((-b * M) // den) - 1 for b in ubs]
        else:  # lb < k/M <= ub, and k = 0 in the first interval
            klo = [0 if a == 0 else (a * M) // den + 1 for a in lbs]
            khi = [min((b * M) // den, M - 1) for b in ubs]
        out = pl.DataFrame(
            {"i": self.frame["i"], "v": self.frame["v"], "klo": klo, "khi": khi},
            schema={"i": pl.Int64, "v": pl.Int64, "klo": pl.Int64, "khi": pl.Int64},
        )
        return out.filter(pl.col("khi") >= pl.col("klo"))

    def lookup(self, n: Any, cell_key_int: Any, modulus: int) -> np.ndarray:
        """Perturbed counts n + v for integer cell keys (u = k/modulus): a vectorised NumPy
        reference of the SQL lookup. A count whose row class is below the smallest i (0 with
        no row 0) keeps its value."""
        counts = _as_int(n, "n")
        keys = _as_int(cell_key_int, "cell_key_int")
        counts, keys = np.broadcast_arrays(counts, keys)
        if not _is_integral(modulus) or not 1 <= int(modulus) < 2**63:
            raise InputError("modulus must be an integer in 1 .. 2**63 - 1")
        M = int(modulus)
        if counts.size and counts.min() < 0:
            raise InputError(f"counts must be >= 0; {int((counts < 0).sum())} are negative")
        if keys.size and (keys.min() < 0 or keys.max() >= M):
            outside = int(((keys < 0) | (keys >= M)).sum())
            raise InputError(f"cell keys must lie in [0, modulus); {outside} do not")
        ks = self.keyspace(M).sort(["i", "klo"])
        imin = int(self.frame["i"].min())  # type: ignore[arg-type]
        cls_ = self.row_class(counts)
        has = cls_ >= imin
        noise = np.zeros(counts.shape, dtype=np.int64)
        ri = ks["i"].to_numpy() - imin
        rk = ks["klo"].to_numpy()
        rv = ks["v"].to_numpy()
        c, k = cls_[has] - imin, keys[has]
        nclass = self.imax - imin + 1
        if nclass * M < 2**62:  # one sorted int64 key (class, klo): one searchsorted
            pos = np.searchsorted(ri * M + rk, c * M + k, side="right") - 1
            noise[has] = rv[pos]
        else:  # keys too wide for one int64: search class by class (a loop over rows i)
            sub = np.zeros(c.shape, dtype=np.int64)
            for cc in np.unique(c):
                sel = c == cc
                rows = np.flatnonzero(ri == cc)
                sub[sel] = rv[rows[np.searchsorted(rk[rows], k[sel], side="right") - 1]]
            noise[has] = sub
        return counts + noise

    # ------------------------------------------------------------------------ views

    def transition_matrix(self) -> np.ndarray:
        """Dense transition matrix P[i, j] for i = 0..imax, j = 0..max(j, imax); rows below the
        smallest i are the identity (those counts are not perturbed)."""
        f = self.frame
        imin = int(f["i"].min())  # type: ignore[arg-type]
        ncol = max(int(f["j"].max()), self.imax) + 1  # type: ignore[arg-type]
        mat = np.zeros((self.imax + 1, ncol))
        np.add.at(mat, (f["i"].to_numpy(), f["j"].to_numpy()), f["p"].to_numpy())
        for i in range(imin):
            mat[i, i] = 1.0
        return mat

    def distribution(self) -> pl.DataFrame:
        """Probabilities per (i, j), rows of equal outcome summed: columns i, j, p."""
        return (
            self.frame.group_by("i", "j")
            .agg((pl.col("ub_n") - pl.col("lb_n")).sum().alias("w"))
            .sort("i", "j")
            .select("i", "j", (pl.col("w") / self.den).alias("p"))
        )

    @property
    def diagnostics(self) -> pl.DataFrame:
        """Per i: p_mean (sum p v), p_var (sum p v^2, the variance when p_mean = 0, as R
        ptable's empResults), p_sum, p_stay (p of v = 0); for maximum-entropy tables also
        var_reached (null for row 0)."""
        den = self.den
        out = (
            self.frame.group_by("i")
            .agg(
                ((pl.col("ub_n") - pl.col("lb_n")) * pl.col("v")).sum().alias("m1"),
                ((pl.col("ub_n") - pl.col("lb_n")) * pl.col("v") * pl.col("v")).sum().alias("m2"),
                (pl.col("ub_n") - pl.col("lb_n")).sum().alias("m0"),
                ((pl.col("ub_n") - pl.col("lb_n")) * (pl.col("v") == 0)).sum().alias("s"),
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
        if self._var_reached is not None:
            reached = self._var_reached
            out = out.with_columns(
                pl.Series(
                    "var_reached", [reached.get(i) for i in out["i"].to_list()], dtype=pl.Boolean
                )
            )
        return out

    # ------------------------------------------------------------------------ dunder

    def __len__(self) -> int:
        return self.frame.height

    def __repr__(self) -> str:
        return f"PTable({self.frame.height} rows)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        """Same rows, intervals (compared exactly across denominators), rule and convention."""
        if not isinstance(other, PTable):
            return NotImplemented
        if (self.imax, self.period, self.interval, len(self)) != (
            other.imax,
            other.period,
            other.interval,
            len(other),
        ):
            return False
        a, b = self.frame, other.frame
        if a["i"].to_list() != b["i"].to_list() or a["v"].to_list() != b["v"].to_list():
            return False
        d1, d2 = self.den, other.den
        return all(
            x * d2 == y * d1
            for col in ("lb_n", "ub_n")
            for x, y in zip(a[col].to_list(), b[col].to_list())
        )

    __hash__ = None  # type: ignore[assignment]


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
