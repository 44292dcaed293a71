"""Input of the hierarchy package: codes as strings, frames, column checks, lookup keys, and the
listing of values in messages (with the default root's name)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from protab._frames import require_columns
from protab.errors import HierarchyError, show_values

DEFAULT_ROOT = "Total"

_FIX_LINKS = "give every code exactly one parent"


# --------------------------------------------------------------------------------------
# input conversion
# --------------------------------------------------------------------------------------


def _fallback_str(values: list[Any], what: str) -> pl.Series:
    """Convert a list of mixed Python values to strings, accepting only str and integers."""
    out: list[str | None] = []
    bad: list[Any] = []
    for v in values:
        if v is None or isinstance(v, str):
            out.append(v)
        elif isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
            out.append(str(v))
        else:
            out.append(None)
            bad.append(v)
    if bad:
        raise HierarchyError(
            f"{what}: codes must be strings (or integers, converted with str()); got "
            f"{show_values(bad)} of type {type(bad[0]).__name__}. Convert them to strings first."
        )
    return pl.Series(what, out, dtype=pl.String)


def _as_codes(values: Any, what: str) -> pl.Series:
    """Return ``values`` as a polars String series (nulls kept), converting integers."""
    if isinstance(values, pl.Series):
        s = values
    elif isinstance(values, (pa.Array, pa.ChunkedArray)):
        s = pl.Series(what, values)
    elif isinstance(values, np.ndarray):
        if values.dtype.kind in "OUS":
            s = _fallback_str(values.tolist(), what)
        else:
            s = pl.Series(what, values)
    elif type(values).__module__.startswith("pandas"):
        converted = pl.from_pandas(values)
        if not isinstance(converted, pl.Series):
            raise HierarchyError(f"{what}: expected a column of codes, got a frame")
        s = converted
    elif isinstance(values, (str, bytes)):
        raise HierarchyError(f"{what}: expected a collection of codes, got the single string {values!r}")
    else:
        lst = list(values)
        try:
            s = pl.Series(what, lst, strict=True)
        except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
            s = _fallback_str(lst, what)
    dt = s.dtype
    if dt == pl.String:
        return s.alias(what)
    if dt == pl.Null or dt.is_integer() or isinstance(dt, (pl.Categorical, pl.Enum)):
        return s.cast(pl.String).alias(what)
    if dt == pl.Object:
        return _fallback_str(s.to_list(), what)
    raise HierarchyError(
        f"{what}: codes must be strings (or integers, converted with str()); got a column of "
        f"type {dt} such as {show_values(s.drop_nulls().head(3).to_list())}. Convert the codes "
        f"to strings first (e.g. '0101', keeping leading zeros)."
    )


def _to_frame(obj: Any) -> pl.DataFrame | None:
    """A polars frame from a polars/pandas/pyarrow frame or a mapping of columns; else None."""
    if isinstance(obj, pl.DataFrame):
        return obj
    if isinstance(obj, pl.LazyFrame):
        return obj.collect()
    if isinstance(obj, (pa.Table, pa.RecordBatch)):
        out = pl.from_arrow(obj)
        assert isinstance(out, pl.DataFrame)
        return out
    if type(obj).__module__.startswith("pandas") and hasattr(obj, "columns"):
        return pl.from_pandas(obj)
    if isinstance(obj, Mapping):
        return pl.DataFrame(dict(obj))
    return None


def _columns(frame: pl.DataFrame, names: Iterable[str], what: str) -> None:
    require_columns(frame, names, what, HierarchyError, ". Rename the columns or name them in the call.")


def _key(code: object) -> str | None:
    """Lookup key for one code: strings as they are, integers as str(); else None."""
    if isinstance(code, str):
        return code
    if isinstance(code, (int, np.integer)) and not isinstance(code, (bool, np.bool_)):
        return str(code)
    return None


def _listing(values: list[Any]) -> str:
    """The first few values and how many in all — the count is stated even for one value."""
    shown = show_values(values)
    return shown if len(values) > 1 else f"{shown} (1 in all)"
