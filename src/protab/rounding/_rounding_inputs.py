"""Input checks of the rounding methods and the table of inner cells with its model matrix
(numeric: no DuckDB here; the model matrix comes from the session's roll-up)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import polars as pl
from scipy import sparse

from protab._frames import as_polars
from protab.errors import InputError, SpecError, show_values
from protab.table import TableSpec


def check_base(base: Any, name: str = "base") -> int:
    """The rounding base as a positive int (bool and fractions refused)."""
    if isinstance(base, (bool, np.bool_)) or not isinstance(base, (int, np.integer, float, np.floating)):
        raise InputError(f"{name} must be a positive integer, not {type(base).__name__}")
    if not np.isfinite(base) or float(base) != int(base) or int(base) < 1:
        raise InputError(f"{name} must be a positive integer (1, 2, 3, …), got {base!r}")
    return int(base)


def check_seed(seed: Any, what: str) -> int | np.random.SeedSequence:
    """An explicit seed (int or SeedSequence); None is refused so runs are reproducible."""
    if seed is None:
        raise InputError(f"{what} needs an explicit seed (an int), e.g. seed=20240101")
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer, np.random.SeedSequence)):
        raise InputError(f"{what}: seed must be an int, not {type(seed).__name__}")
    return seed if isinstance(seed, np.random.SeedSequence) else int(seed)


def counts(values: Any, what: str, *, integer: bool = True) -> np.ndarray:
    """Non-negative counts as int64 (integral floats accepted); NaN, negatives and
    fractions raise InputError naming how many values are at fault."""
    if isinstance(values, pl.Series):
        if values.null_count():
            raise InputError(f"{what} has {values.null_count()} missing (null) values; counts are needed")
        values = values.to_numpy()
    a = np.asarray(values)
    if a.dtype == object:
        try:
            a = a.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise InputError(f"{what} must hold numbers (counts)") from exc
    if a.dtype.kind not in "iuf":
        raise InputError(f"{what} must hold numbers (counts), not {a.dtype}")
    if a.dtype.kind == "f":
        bad = ~np.isfinite(a)
        if bad.any():
            raise InputError(f"{what} has {int(bad.sum())} NaN or infinite values; counts are needed")
        frac = a != np.round(a)
        if integer and frac.any():
            raise InputError(
                f"{what} must hold whole counts; {int(frac.sum())} values have fractions "
                f"({show_values(sorted(set(a[frac].tolist())))}); round or integerise them first"
            )
    neg = a < 0
    if neg.any():
        raise InputError(
            f"{what} must be >= 0; {int(neg.sum())} values are negative "
            f"({show_values(sorted(set(a[neg].tolist())))})"
        )
    return a.astype(np.int64) if integer else a.astype(np.float64)


def as_frame(obj: Any, what: str) -> pl.DataFrame:
    """polars from polars, pandas or pyarrow input (InputError otherwise)."""
    if not isinstance(obj, (pl.DataFrame, pl.LazyFrame)) and not type(obj).__module__.startswith(("pandas", "pyarrow")):
        raise InputError(
            f"{what} must be a frame of inner cells (polars, pandas or pyarrow), "
            f"not {type(obj).__name__}"
        )
    return as_polars(obj, what)


@dataclasses.dataclass(frozen=True)
class Prepared:
    """A table of inner cells with its model matrix: z = X.T @ y."""

    X: sparse.csc_matrix
    inner: pl.DataFrame  # dims + n (Extend0 zeros included)
    published: pl.DataFrame  # dims + levels + n
    y: np.ndarray  # int64 inner counts
    z: np.ndarray  # int64 published counts
    spec: TableSpec


def prepare(inner: Any, spec: Any, freq: str, what: str, *, extend0: bool = True) -> Prepared:
    """Check a frame of inner cells against ``spec`` and build X with ``protab.model_matrix``."""
    from protab.session import model_matrix  # the SQL roll-up lives with the Session

    if not isinstance(spec, TableSpec):
        raise SpecError(f"{what}: spec must be a protab.TableSpec, not {type(spec).__name__}")
    frame = as_frame(inner, what)
    dims = spec.columns
    missing = [d for d in dims if d not in frame.columns]
    if missing:
        raise SpecError(
            f"{what}: the inner cells have no column {show_values(missing)} for the dimension(s) of "
            f"the spec (columns: {show_values(frame.columns, 10)})"
        )
    if freq not in frame.columns:
        raise InputError(
            f"{what}: the inner cells have no frequency column {freq!r}; pass freq= "
            f"(columns: {show_values(frame.columns, 10)})"
        )
    if frame.height == 0:
        raise InputError(f"{what}: the table of inner cells is empty")
    n = counts(frame[freq], f"{what}: frequency column {freq!r}")
    for d in dims:
        nulls = frame[d].null_count()
        if nulls:
            raise InputError(
                f"{what}: dimension column {d!r} has {nulls} missing (null) codes; "
                "give them a code (TableSpec null_code) or drop them"
            )
    frame = frame.select(dims).with_columns(pl.Series("n", n, dtype=pl.Int64))
    spec2 = dataclasses.replace(spec, weight=None, sums=(), freq="n")
    X, inner_f, pub_f = model_matrix(frame, spec2, freq="n", extend0=extend0)
    y = inner_f["n"].to_numpy().astype(np.int64)
    z = pub_f["n"].to_numpy().astype(np.int64)
    inner_f = inner_f.select([*dims, "n"])
    pub_f = pub_f.select([*dims, *[f"{d}_level" for d in dims], "n"])
    return Prepared(sparse.csc_matrix(X), inner_f, pub_f, y, z, spec2)


def xty(X: sparse.spmatrix, y: np.ndarray) -> np.ndarray:
    """Xᵀy for 0/1 X and integer y, as int64 (float products are exact below 2^53)."""
    return np.rint(X.T @ y.astype(np.float64)).astype(np.int64)
