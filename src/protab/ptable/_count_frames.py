"""Count p-tables from frames: the R ptable / tau-ARGUS layouts (bounds or probabilities) and
the ONS/ABS layout (pcv, ckey, pvalue), as integer rows (i, v, lb_n, ub_n) over den for the
constructor of :class:`protab.ptable.PTable`."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from protab.errors import PTableError, show_values
from protab.ptable._bounds import _cumulated_bounds, _decimal_bounds
from protab.ptable._values import _R_DIGITS, _check_p, _float_array, _int_array, _is_integral, _name_i, _to_polars


def frame_rows(frame: Any, *, den: int | None, digits: int | None) -> tuple[pl.DataFrame, int]:
    """The rows (i, v, lb_n, ub_n) and den of :meth:`PTable.from_frame`'s frame (see its docstring)."""
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
    v = _noise(df, i)
    lb_col = next((c for c in ("lb", "p_int_lb") if c in df.columns), None)
    ub_col = next((c for c in ("ub", "p_int_ub", "p_ij_ub") if c in df.columns), None)
    p = _float_array(df, "p", i) if "p" in df.columns else None
    integer = "lb_n" in df.columns and "ub_n" in df.columns
    if integer and (den is not None or ub_col is None):
        if den is None:
            raise PTableError("integer bounds lb_n/ub_n need den= (the bounds are lb_n/den)")
        lb_i, ub_i = _int_array(df, "lb_n"), _int_array(df, "ub_n")
        return pl.DataFrame({"i": i, "v": v, "lb_n": lb_i, "ub_n": ub_i}), den
    if ub_col is not None:
        ub = _float_array(df, ub_col, i)
        lb = _float_array(df, lb_col, i) if lb_col is not None else None
        lb_n, ub_n, scale = _decimal_bounds(i, lb, ub, p, digits, lambda bad: f"for {_name_i(i[bad].tolist())}")
        return pl.DataFrame({"i": i, "v": v, "lb_n": lb_n, "ub_n": ub_n}), scale
    if p is None:
        raise PTableError("p-table frame needs interval bounds (lb/ub or p_int_lb/p_int_ub) or probabilities p")
    _check_p(i, p)
    scale = 10 ** int(_R_DIGITS if digits is None else digits)
    pos, lb_n, ub_n = _cumulated_bounds(i, v, p, scale)
    return pl.DataFrame({"i": i[pos], "v": v[pos], "lb_n": lb_n, "ub_n": ub_n}), scale


def _noise(df: pl.DataFrame, i: np.ndarray) -> np.ndarray:
    """The noise v: column v (checked against j = i + v when j is given too), else j − i."""
    if "v" not in df.columns:
        out: np.ndarray = _int_array(df, "j") - i
        return out
    v = _int_array(df, "v")
    if "j" in df.columns:
        j = _int_array(df, "j")
        bad = i + v != j
        if bad.any():
            raise PTableError(
                "p-table columns j and v disagree (j != i + v) for "
                f"{_name_i(i[bad].tolist())}; give consistent values or only one of them"
            )
    return v


def ons_rows(frame: Any, *, imax: int | None, fill_missing: bool) -> tuple[pl.DataFrame, int]:
    """The rows (i, v, lb_n, ub_n) and den of :meth:`PTable.from_ons`'s frame (see its docstring)."""
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
    tab = _all_ckeys(tab, pcv, den, top) if fill_missing else _refuse_missing_ckeys(tab, den)
    return tab.select("i", "v", pl.col("ckey").alias("lb_n"), (pl.col("ckey") + 1).alias("ub_n")), den


def _all_ckeys(tab: pl.DataFrame, pcv: np.ndarray, den: int, top: int) -> pl.DataFrame:
    """Every (pcv, ckey) for pcv up to ``top`` and ckey 0..den-1, absent ones with noise 0."""
    lo = min(int(pcv.min()), 1)
    full = pl.DataFrame({"i": np.arange(lo, top + 1, dtype=np.int64)}).join(
        pl.DataFrame({"ckey": np.arange(den, dtype=np.int64)}), how="cross"
    )
    tab = full.join(tab, on=["i", "ckey"], how="left")
    return tab.with_columns(pl.col("v").fill_null(0))


def _refuse_missing_ckeys(tab: pl.DataFrame, den: int) -> pl.DataFrame:
    """``tab`` when every pcv has every ckey 0..den-1, else PTableError naming the pcv."""
    counts = tab.group_by("i").agg(pl.len().alias("n"))
    bad = counts.filter(pl.col("n") != den)
    if bad.height:
        raise PTableError(
            f"ONS p-table lacks some ckeys 0..{den - 1} for pcv "
            f"{show_values(sorted(bad['i'].to_list()))}; give every (pcv, ckey) or pass "
            "fill_missing=True to give absent ones noise 0 (as the ONS package does)"
        )
    return tab
