"""Magnitude p-table files: R ptable's CSV (``i,j,p,v,p_int_lb,p_int_ub,type``) and tau-ARGUS'
';' file of ``pt_export`` (``i;j;p;v;p_int_ub;type``, or its SAS variant with p_int_lb), read
into frames and written from the entries of one or several tables."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import polars as pl

from protab.errors import PTableError
from protab.ptable._bounds import _fmt_units
from protab.ptable._entries import entries
from protab.ptable._file_text import read_file_text, refuse_fractional_i

_UNKNOWN = "unknown p-table format {!r}; use 'r' or 'argus'"


def _fmt_dec(x: float) -> str:
    """Shortest decimal of a float (no exponent): 0.3333, -0.5, 10."""
    return np.format_float_positional(float(x) + 0.0, trim="-")


def _fmt_sig8(x: float) -> str:
    """A number with 8 significant digits and no exponent (R pt_export's digits = 8)."""
    return np.format_float_positional(float(x) + 0.0, precision=8, unique=False, fractional=False, trim="-")


def read_frame(path: str | os.PathLike[str], format: str) -> pl.DataFrame:
    """The file as a frame with R's column names (i, j, p, v, [p_int_lb,] p_int_ub[, type]);
    PTableError for a count p-table file."""
    path = Path(path)
    header = next((line for line in read_file_text(path).splitlines() if line.strip()), "")
    if format == "auto":
        format = "argus" if ";" in header else "r"
    if format not in ("r", "argus"):
        raise PTableError(_UNKNOWN.format(format))
    try:
        if format == "r":
            df = pl.read_csv(path, infer_schema_length=0)
            df = df.rename({c: c.strip().strip("\"'").lower() for c in df.columns})
        else:
            df = _argus_frame(path)
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
        raise PTableError(f"cannot read p-table file {path.name!r} as {format}: {exc}") from exc
    df = df.with_columns(pl.col(c).str.strip_chars() for c in df.columns if df[c].dtype == pl.String)
    refuse_fractional_i(df, path.name, "the ratio classes, as R ptable's icat; a table of other "
                        "classes is built with MagnitudePTable.from_frame")
    if "type" not in df.columns and {"i", "v"} <= set(df.columns):
        v = df["v"].cast(pl.Float64, strict=False).drop_nulls().to_numpy()
        if v.size and np.all(v == np.round(v)):
            raise PTableError(
                f"p-table file {path.name!r} is a count p-table (integer noise, no type "
                "column); read it with protab.PTable.read"
            )
    return df


def _argus_frame(path: Path) -> pl.DataFrame:
    """A tau-ARGUS ';' file with R's column names, the type column found by its text."""
    raw = pl.read_csv(path, separator=";", infer_schema_length=0)
    cols = raw.columns
    names = [c.strip().strip("\"'").lower() for c in cols]
    if len(cols) < 5:
        raise PTableError(f"tau-ARGUS p-table file {path.name!r} needs the columns i;j;p;v;p_int_ub;type")
    has_type = "type" in names or (
        len(cols) in (6, 7) and raw[cols[-1]].str.strip_chars().cast(pl.Float64, strict=False).null_count() > 0
    )
    sas = len(cols) - has_type >= 6
    use = ["i", "j", "p", "v"] + (["p_int_lb", "p_int_ub"] if sas else ["p_int_ub"])
    use += ["type"] if has_type else []
    return raw.select(cols[: len(use)]).rename(dict(zip(cols[: len(use)], use)))


def _r_line(i: float, j: float, v: float, lo: int, u: int, den: int, type: str) -> str:
    """One entry of R ptable's CSV: exact decimals."""
    return (
        f"{_fmt_dec(i)},{_fmt_dec(j)},{_fmt_units(u - lo, den)},{_fmt_dec(v)},"
        f"{_fmt_units(lo, den)},{_fmt_units(u, den)},{type}"
    )


def _argus_line(i: float, j: float, v: float, lo: int, u: int, den: int, type: str) -> str:
    """One entry of tau-ARGUS' file: 8 significant digits, no lower bound."""
    return (
        f"{_fmt_sig8(i)};{_fmt_sig8(j)};{_fmt_sig8((u - lo) / den)};{_fmt_sig8(v)};"
        f"{_fmt_sig8(u / den)};{type}"
    )


def render(tables: Sequence[tuple[pl.DataFrame, int, str]], format: str) -> str:
    """The text of a file holding the tables given as (frame, den, type), in that order."""
    line: Callable[..., str]
    if format == "r":
        header, line = "i,j,p,v,p_int_lb,p_int_ub,type", _r_line
    elif format == "argus":
        header, line = "i;j;p;v;p_int_ub;type", _argus_line
    else:
        raise PTableError(_UNKNOWN.format(format))
    lines = [header]
    for frame, den, type in tables:
        lines += [line(i, j, v, lo, up, den, type) for i, j, v, lo, up in entries(frame)]
    return "\n".join(lines) + "\n"
