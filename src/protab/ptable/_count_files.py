"""Count p-table files: R ptable's CSV, tau-ARGUS' ';' file (and its SAS variant) and the
ONS/ABS (pcv, ckey, pvalue) CSV, read into frames and written from the entries; and the
ONS table of a p-table."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import polars as pl

from protab.errors import PTableError
from protab.ptable._bounds import _fmt_units
from protab.ptable._entries import entries
from protab.ptable._file_text import read_file_text, refuse_fractional_i
from protab.ptable._values import _ONS_IMAX, _ONS_PERIOD, _is_integral
from protab.ptable.keyspace import keyspace_frame, row_classes

_COUNTS = "the original counts"
_UNKNOWN = "unknown p-table format {!r}; use 'ptable', 'tauargus' or 'ons'"


@contextmanager
def read_errors(path: Path, format: str) -> Iterator[None]:
    """Errors of polars and the file system while reading ``path`` as PTableError naming it."""
    try:
        yield
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
        raise PTableError(f"cannot read p-table file {path.name!r} as {format}: {exc}") from exc


def count_file_frame(path: Path, format: str) -> tuple[str, pl.DataFrame]:
    """The format of a count p-table file ("auto" detected from the header and separator) and
    its frame: R's columns for "ptable" and "tauargus", (pcv, ckey, pvalue) for "ons".
    PTableError for a magnitude p-table file."""
    header = next((line for line in read_file_text(path).splitlines() if line.strip()), "")
    names = [t.strip().strip("\"'").lower() for t in header.replace(";", ",").split(",")]
    if format == "auto":
        if ";" in header:
            format = "tauargus"
        elif {"pcv", "ckey", "pvalue"} <= set(names):
            format = "ons"
        else:
            format = "ptable"
    if format not in ("ons", "ptable", "tauargus"):
        raise PTableError(_UNKNOWN.format(format))
    with read_errors(path, format):
        if format == "ons":
            return format, pl.read_csv(path, infer_schema_length=None)
        if format == "ptable":
            df = pl.read_csv(path, infer_schema_length=None)
            refuse_fractional_i(df, path.name, _COUNTS)
            _refuse_numeric(df, path.name)
            return format, df
        return format, _tauargus_frame(path)


def _tauargus_frame(path: Path) -> pl.DataFrame:
    """A tau-ARGUS ``pt_export`` file (i;j;p;v;p_int_ub, or i;j;p;v;p_int_lb;p_int_ub) as a frame."""
    raw = pl.read_csv(path, separator=";", infer_schema_length=0)
    cols = raw.columns
    if len(cols) < 5:
        raise PTableError(f"tau-ARGUS p-table file {path.name!r} needs the columns i;j;p;v;p_int_ub")
    lower = [c.strip().strip('"').lower() for c in cols]
    sixth = raw[cols[5]].str.strip_chars() if len(cols) >= 6 else None
    sas = sixth is not None and (lower[4] == "p_int_lb" or sixth.cast(pl.Float64, strict=False).null_count() == 0)
    use = ["i", "j", "p", "v"] + (["p_int_lb", "p_int_ub"] if sas else ["p_int_ub"])
    df = raw.select(cols[: len(use)]).rename(dict(zip(cols[: len(use)], use)))
    refuse_fractional_i(df, path.name, _COUNTS)
    if len(cols) >= 6 and not sas:  # a sixth column that is no bound: R's type
        _refuse_numeric(raw.select(pl.col(cols[5]).alias("type")), path.name)
    _refuse_numeric(df, path.name)
    return df


def _refuse_numeric(df: pl.DataFrame, name: str) -> None:
    """PTableError pointing to MagnitudePTable when a count p-table file is a magnitude one:
    fractional j or v, or a type other than "all" (even, odd, small_cells)."""
    def values(c: str) -> pl.Series:
        out: pl.Series = df[c].cast(pl.String).str.strip_chars()
        return out

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


def count_file_text(frame: pl.DataFrame, den: int, format: str) -> str:
    """The text of R ptable's CSV ("ptable") or tau-ARGUS' ';' file ("tauargus"), exact decimals."""
    rows = entries(frame)
    if format == "ptable":
        lines = ['"i","j","p","v","p_int_lb","p_int_ub","type"']
        lines += [
            f"{i},{j},{_fmt_units(u - lo, den)},{v},"
            f'{_fmt_units(lo, den)},{_fmt_units(u, den)},"all"'
            for i, j, v, lo, u in rows
        ]
    elif format == "tauargus":
        lines = ["i;j;p;v;p_int_ub"]
        lines += [f"{i};{j};{_fmt_units(u - lo, den)};{v};{_fmt_units(u, den)}" for i, j, v, lo, u in rows]
    else:
        raise PTableError(_UNKNOWN.format(format))
    return "\n".join(lines) + "\n"


def ons_table(
    frame: pl.DataFrame, den: int, imax: int, period: int, interval: str, modulus: int | None
) -> pl.DataFrame:
    """What :meth:`PTable.to_ons` gives (see its docstring), from the p-table's entries and rule."""
    M = den if modulus is None else modulus
    if not _is_integral(M) or not 1 <= int(M) <= 2**20:
        raise PTableError("modulus for an ONS table must be an integer in 1..2**20")
    M = int(M)
    n = np.arange(_ONS_IMAX + 1, _ONS_IMAX + 1 + _ONS_PERIOD * period, dtype=np.int64)
    ons_pcv = (n - 1) % _ONS_PERIOD + (_ONS_IMAX - _ONS_PERIOD + 1)
    if imax > _ONS_IMAX or not np.array_equal(row_classes(n, imax, period), row_classes(ons_pcv, imax, period)):
        raise PTableError(
            "this p-table's rule for large counts (imax, period) differs from the ONS rule "
            "(pcv = ((n - 1) mod 250) + 501 above 750), so it has no ONS equivalent"
        )
    imin = int(frame["i"].min())  # type: ignore[arg-type]
    moves_zeros = bool((frame.filter(pl.col("i") == 0)["v"] != 0).any())
    ks = keyspace_frame(frame, den, M, interval, pl.Int64)
    classes = np.arange(imin, imax + 1)
    noise = np.zeros((len(classes), M), dtype=np.int64)
    for i, v, lo, hi in ks.iter_rows():
        noise[i - imin, lo : hi + 1] = v
    pcv = np.arange(0 if moves_zeros else max(1, imin), _ONS_IMAX + 1, dtype=np.int64)
    rows = row_classes(pcv, imax, period) - imin
    return pl.DataFrame(
        {
            "pcv": np.repeat(pcv, M),
            "ckey": np.tile(np.arange(M, dtype=np.int64), len(pcv)),
            "pvalue": noise[rows].reshape(-1),
        }
    )
