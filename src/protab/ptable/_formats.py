"""Reading and writing p-tables: frames and R ptable / tau-ARGUS files, and the ONS/ABS layout."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import polars as pl

from protab._io import write_text
from protab.errors import PTableError, show_values
from protab.ptable._common import (
    _ONS_IMAX,
    _ONS_PERIOD,
    _R_DIGITS,
    Interval,
    _check_p,
    _cumulated_bounds,
    _decimal_bounds,
    _float_array,
    _fmt_units,
    _int_array,
    _is_integral,
    _name_i,
    _to_polars,
    entries,
    read_file_text,
    refuse_fractional_i,
)

if TYPE_CHECKING:  # pragma: no cover
    from protab.ptable.core import PTable

_COUNTS = "the original counts"


def from_frame(
    cls: type[PTable],
    frame: Any,
    *,
    imax: int | None,
    period: int,
    interval: Interval,
    den: int | None,
    digits: int | None,
) -> PTable:
    """What :meth:`PTable.from_frame` does (see its docstring)."""
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
        lb = _float_array(df, lb_col, i) if lb_col is not None else None
        lb_n, ub_n, scale = _decimal_bounds(
            i, lb, ub, p, digits, lambda bad: f"for {_name_i(i[bad].tolist())}"
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
    pos, lb_n, ub_n = _cumulated_bounds(i, v, p, scale)
    core = pl.DataFrame({"i": i[pos], "v": v[pos], "lb_n": lb_n, "ub_n": ub_n})
    return cls(core, den=scale, imax=imax, period=period, interval=interval)


def from_ons(
    cls: type[PTable], frame: Any, *, period: int, imax: int | None, fill_missing: bool
) -> PTable:
    """What :meth:`PTable.from_ons` does (see its docstring)."""
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


def read(
    cls: type[PTable],
    path: str | os.PathLike[str],
    format: Literal["auto", "ptable", "tauargus", "ons"],
    *,
    period: int | None,
    interval: Interval,
) -> PTable:
    """What :meth:`PTable.read` does (see its docstring)."""
    path = Path(path)
    header = next((line for line in read_file_text(path).splitlines() if line.strip()), "")
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
            refuse_fractional_i(df, path.name, _COUNTS)
            _refuse_numeric(df, path.name)
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
            refuse_fractional_i(df, path.name, _COUNTS)
            if len(cols) >= 6 and not sas:  # a sixth column that is no bound: R's type
                _refuse_numeric(raw.select(pl.col(cols[5]).alias("type")), path.name)
            _refuse_numeric(df, path.name)
            return cls.from_frame(df, period=1 if period is None else period, interval=interval)
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
        raise PTableError(f"cannot read p-table file {path.name!r} as {format}: {exc}") from exc
    raise PTableError(f"unknown p-table format {format!r}; use 'ptable', 'tauargus' or 'ons'")


def _refuse_numeric(df: pl.DataFrame, name: str) -> None:
    """PTableError pointing to MagnitudePTable when a count p-table file is a magnitude one:
    fractional j or v, or a type other than "all" (even, odd, small_cells)."""
    def values(c: str) -> pl.Series:
        return df[c].cast(pl.String).str.strip_chars()

    frac = any(
        bool(np.any(a != np.round(a)))
        for c in ("j", "v")
        if c in df.columns
        for a in [values(c).cast(pl.Float64, strict=False).drop_nulls().to_numpy()]
    )
    kinds = set(values("type").to_list()) if "type" in df.columns else set()
    if frac or kinds - {"all", None}:
        raise PTableError(
            f"p-table file {name!r} is a numeric (magnitude) p-table (fractional noise or a "
            "type even/odd/small_cells); read it with protab.MagnitudePTable.read (or read_set)"
        )


def write(
    pt: PTable,
    path: str | os.PathLike[str],
    format: Literal["ptable", "tauargus", "ons"],
    *,
    modulus: int | None,
) -> None:
    """What :meth:`PTable.write` does (see its docstring)."""
    path = Path(path)
    if format == "ons":
        text = pt.to_ons(modulus).write_csv()
    elif format in ("ptable", "tauargus"):
        den = pt.den
        rows = entries(pt.frame)
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


def to_ons(pt: PTable, modulus: int | None) -> pl.DataFrame:
    """What :meth:`PTable.to_ons` does (see its docstring)."""
    M = pt.den if modulus is None else modulus
    if not _is_integral(M) or not 1 <= int(M) <= 2**20:
        raise PTableError("modulus for an ONS table must be an integer in 1..2**20")
    M = int(M)
    n = np.arange(_ONS_IMAX + 1, _ONS_IMAX + 1 + _ONS_PERIOD * pt.period, dtype=np.int64)
    ons_pcv = (n - 1) % _ONS_PERIOD + (_ONS_IMAX - _ONS_PERIOD + 1)
    if pt.imax > _ONS_IMAX or not np.array_equal(pt.row_class(n), pt.row_class(ons_pcv)):
        raise PTableError(
            "this p-table's rule for large counts (imax, period) differs from the ONS rule "
            "(pcv = ((n - 1) mod 250) + 501 above 750), so it has no ONS equivalent"
        )
    imin = int(pt.frame["i"].min())  # type: ignore[arg-type]
    moves_zeros = bool((pt.frame.filter(pl.col("i") == 0)["v"] != 0).any())
    ks = pt.keyspace(M)
    classes = np.arange(imin, pt.imax + 1)
    noise = np.zeros((len(classes), M), dtype=np.int64)
    for i, v, lo, hi in ks.iter_rows():
        noise[i - imin, lo : hi + 1] = v
    pcv = np.arange(0 if moves_zeros else max(1, imin), _ONS_IMAX + 1, dtype=np.int64)
    rows = pt.row_class(pcv) - imin
    return pl.DataFrame(
        {
            "pcv": np.repeat(pcv, M),
            "ckey": np.tile(np.arange(M, dtype=np.int64), len(pcv)),
            "pvalue": noise[rows].reshape(-1),
        }
    )
