"""Input frames: polars from whatever a user hands in (polars, pandas, pyarrow)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import polars as pl

from protab.errors import InputError, ProtabError, show_values


def as_polars(obj: Any, what: str, error: type[ProtabError] = InputError) -> pl.DataFrame:
    """A polars DataFrame from polars (lazy or not), pandas, pyarrow or anything
    ``pl.DataFrame`` accepts; ``error`` (naming ``what``) when it cannot be read as one."""
    if isinstance(obj, pl.LazyFrame):
        return obj.collect()
    if isinstance(obj, pl.DataFrame):
        return obj
    if obj is None or isinstance(obj, (str, bytes, int, float)):
        raise error(f"{what}: expected a table (polars, pandas or pyarrow), not {type(obj).__name__}")
    try:
        if type(obj).__module__.startswith("pandas"):
            return pl.from_pandas(obj)
        out = pl.from_arrow(obj) if type(obj).__module__.startswith("pyarrow") else pl.DataFrame(obj)
        if isinstance(out, pl.DataFrame):
            return out
    except Exception as exc:
        raise error(
            f"{what}: cannot read a table from an object of type {type(obj).__name__}; pass a "
            "polars, pandas or pyarrow table"
        ) from exc
    raise error(f"{what}: expected a table (polars, pandas or pyarrow), not {type(obj).__name__}")


def require_columns(
    frame: pl.DataFrame, names: Iterable[str], what: str, error: type[ProtabError] = InputError, hint: str = ""
) -> None:
    """``error`` naming the columns of ``names`` that ``frame`` lacks, and the ones it has."""
    missing = [c for c in names if c not in frame.columns]
    if missing:
        raise error(
            f"{what}: missing column(s) {show_values(missing)}; the frame has columns "
            f"{show_values(frame.columns, limit=10)}{hint}"
        )
