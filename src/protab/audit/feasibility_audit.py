"""The feasibility-interval audit of tables protected by the cell key method: what an attacker
who knows the model matrix X and the noise bound D derives from all published tables of a run
(docs/audit.md; the LP audit of Hundepool et al. 2012; the ESS guidelines on the cell key method)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import polars as pl
from scipy import sparse

from protab._frames import as_polars
from protab._matrices import as_csc
from protab.audit.lp_intervals import intervals
from protab.audit.noise_bounds import check_noise, noise_bounds
from protab.errors import InputError, show_values

__all__ = ["feasibility"]

_EPS = 1e-6


def feasibility(
    tables: Mapping[str, Any], X: Any, published: Any, inner: Any, D: float, *, value: str = "n_pert",
    support: Iterable[int] | None = None, zeros_perturbed: bool = False, max_width: int = 0,
    alone: bool = False, budget: float | None = 600.0,
) -> pl.DataFrame:
    """Audit published cell-key tables: the attacker's interval of every true count.

    ``tables``: name → published frame (dimension columns with their ``<dim>_level`` columns and
    the perturbed count ``value``, null where blanked), all from one run; ``X, inner,
    published``: :meth:`protab.Session.model_matrix` of one TableSpec publishing every cell of
    the tables (for linked tables the union of their dimensions and crossings; a table lacking a
    dimension is matched to that dimension's total). X reveals structure only, not counts.
    ``D``: the p-table's largest absolute deviation; ``support``: the deviations it can make
    (optional; default every integer in ±D); ``zeros_perturbed``: whether an empty cell can be
    published non-zero (protab's p-tables keep 0 at 0, so by default a published non-zero count
    means a true count ≥ 1).

    Every published cell with a value constrains its true count to [value − max v, value − min v]
    (and ≥ 0); blanked cells constrain nothing. One joint LP system over all tables (so links
    between tables are used) gives, per target, min and max of its true count over real
    non-negative inner counts (:func:`protab.audit.intervals`); the bounds are then rounded
    inward (``lo`` = ceil, ``up`` = floor), as true counts are integers.

    One row per inner cell of X (``table`` null) and per cell of each table: ``table``, the
    dimensions of X (a table's missing ones at their total), ``lo``, ``up`` (null when
    unbounded), ``width`` = up − lo, ``disclosed`` (width ≤ ``max_width``; 0 = the count is known
    exactly), ``small`` (1 ≤ lo and up ≤ 2: a count of 1 or 2 is pinned), ``risky`` (either).
    ``alone=True`` adds ``lo_alone``/``up_alone``: the table's cells from that table only.
    ``budget``: seconds the LPs may take (default 600; None = no limit): the work is estimated
    before solving (and again once each block's open ends are known) and a run past the budget
    is refused with an InputError stating the estimate and the budget.
    D never appears in the result or in a message.
    """
    check_noise(D, support)
    if isinstance(max_width, bool) or not isinstance(max_width, (int, np.integer)) or max_width < 0:
        raise InputError(f"feasibility audit: max_width must be an integer of 0 or more, not {max_width!r}")
    A = as_csc(X)
    pub, inn, dims = _structure(A, published, inner)
    cells = {name: _cells(name, frame, pub, dims, value) for name, frame in _named(tables).items()}
    lower, upper = _column_bounds(A, cells, D, support, zeros_perturbed)
    used = np.unique(np.concatenate([c for c, _ in cells.values()] + [np.zeros(0, dtype=np.int64)]))
    targets = sparse.hstack([sparse.identity(A.shape[0], format="csc"), A[:, used]], format="csc")
    n = A.shape[0]
    known = (np.concatenate([np.full(n, -np.inf), lower[used]]), np.concatenate([np.full(n, np.inf), upper[used]]))
    lo, up = intervals(A, lower, upper, targets=targets, known=known, budget=budget)
    out = _report(lo, up, used, cells, pub, inn, dims, max_width)
    if alone:
        out = out.join(_alone(A, cells, pub, dims, (D, support, zeros_perturbed), budget), on=["table", *dims], how="left")
    return out


def _named(tables: Mapping[str, Any]) -> dict[str, pl.DataFrame]:
    if not isinstance(tables, Mapping) or not tables:
        raise InputError("feasibility audit: tables must be a non-empty mapping of table name → published frame")
    return {str(k): as_polars(v, f"feasibility audit: table {k!r}") for k, v in tables.items()}


def _structure(A: sparse.csc_array, published: Any, inner: Any) -> tuple[pl.DataFrame, pl.DataFrame, list[str]]:
    """The frames of X's columns and rows, checked against X; the dimensions (codes as text)."""
    pub = as_polars(published, "feasibility audit: published (the columns of X)")
    inn = as_polars(inner, "feasibility audit: inner (the rows of X)")
    dims = [c for c in pub.columns if f"{c}_level" in pub.columns]
    if not dims:
        raise InputError("feasibility audit: published (the columns of X) has no <dim>_level columns; pass the "
                         "published frame of Session.model_matrix")
    if pub.height != A.shape[1] or inn.height != A.shape[0]:
        raise InputError(
            f"feasibility audit: X has {A.shape[0]} inner × {A.shape[1]} published cells, but inner has "
            f"{inn.height} rows and published {pub.height}: pass the three parts of one Session.model_matrix"
        )
    missing = [d for d in dims if d not in inn.columns]
    if missing:
        raise InputError(f"feasibility audit: inner (the rows of X) lacks the dimension(s) {show_values(missing)}")
    text = [pl.col(d).cast(pl.Utf8) for d in dims]
    return pub.with_columns(text), inn.select(text), dims


def _cells(name: str, frame: pl.DataFrame, pub: pl.DataFrame, dims: list[str],
           value: str) -> tuple[np.ndarray, np.ndarray]:
    """The X column of every cell of one table and its published value (NaN where blank)."""
    if value not in frame.columns:
        raise InputError(f"feasibility audit: table {name!r} has no column {value!r} (the published count); "
                         f"its columns: {show_values(frame.columns, 10)}")
    if not (frame.schema[value].is_numeric() or frame.schema[value] == pl.Null):
        raise InputError(f"feasibility audit: column {value!r} of table {name!r} must be numeric, "
                         f"not {frame.schema[value]}")
    own = [c for c in frame.columns if f"{c}_level" in frame.columns]
    alien = [c for c in own if c not in dims]
    if not own or alien:
        raise InputError(
            f"feasibility audit: table {name!r} has dimension(s) {show_values(alien or frame.columns)} that X "
            f"does not have (X's: {show_values(dims)}); the tables and X must come from one run"
        )
    keep = pl.lit(True)
    for d in dims:
        if d not in own:
            keep = keep & (pl.col(f"{d}_level") == 0)
    cols = pub.with_row_index("_col").filter(keep).select("_col", *own)
    got = frame.select([pl.col(d).cast(pl.Utf8) for d in own] + [pl.col(value).cast(pl.Float64).alias("_v")])
    joined = got.join(cols, on=own, how="left", nulls_equal=True)
    lost = joined.filter(pl.col("_col").is_null())
    if lost.height:
        shown = show_values(lost.select(own).head(5).rows())
        raise InputError(f"feasibility audit: {lost.height} cell(s) of table {name!r} are not cells of X "
                         f"({', '.join(own)} = {shown}); the tables and X must come from one run")
    if joined["_col"].n_unique() < joined.height:
        raise InputError(f"feasibility audit: table {name!r} lists a cell more than once")
    return joined["_col"].to_numpy().astype(np.int64), joined["_v"].fill_null(np.nan).to_numpy()


def _column_bounds(A: sparse.csc_array, cells: Mapping[str, tuple[np.ndarray, np.ndarray]], D: float,
                   support: Any, zeros_perturbed: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per column of X: the intersection of what every table publishing it says."""
    nonneg = np.asarray((A < 0).sum(axis=0)).ravel() == 0
    lower = np.full(A.shape[1], -np.inf)
    upper = np.full(A.shape[1], np.inf)
    for cols, z in cells.values():
        lo, up = noise_bounds(z, D, support=support, zeros_perturbed=zeros_perturbed, nonneg=nonneg[cols])
        np.maximum.at(lower, cols, lo)
        np.minimum.at(upper, cols, up)
    return lower, upper


def _rounded(lo: np.ndarray, up: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.ceil(lo - _EPS), np.floor(up + _EPS)


def _report(lo: np.ndarray, up: np.ndarray, used: np.ndarray, cells: Mapping[str, tuple[np.ndarray, np.ndarray]],
            pub: pl.DataFrame, inn: pl.DataFrame, dims: list[str], max_width: int) -> pl.DataFrame:
    n = inn.height
    lo_i, up_i = _rounded(lo, up)
    where = np.searchsorted(used, np.arange(pub.height))  # target index of a used X column: n + where
    parts = [inn.with_columns(pl.lit(None, dtype=pl.Utf8).alias("table"),
                              pl.Series("lo", lo_i[:n]), pl.Series("up", up_i[:n]))]
    for name, (cols, _) in cells.items():
        t = n + where[cols]
        parts.append(pub[cols].select(dims).with_columns(pl.lit(name).alias("table"),
                                                         pl.Series("lo", lo_i[t]), pl.Series("up", up_i[t])))
    out = pl.concat(parts).select("table", *dims, "lo", "up")
    return _flags(out, max_width)


def _flags(out: pl.DataFrame, max_width: int) -> pl.DataFrame:
    finite = [pl.when(pl.col(c).is_finite()).then(pl.col(c)).cast(pl.Int64).alias(c) for c in ("lo", "up")]
    out = out.with_columns(finite)
    width = (pl.col("up") - pl.col("lo")).alias("width")
    out = out.with_columns(width)
    disclosed = (pl.col("width") <= max_width).fill_null(False).alias("disclosed")
    small = ((pl.col("lo") >= 1) & (pl.col("up") <= 2)).fill_null(False).alias("small")
    out = out.with_columns(disclosed, small)
    return out.with_columns((pl.col("disclosed") | pl.col("small")).alias("risky"))


def _alone(A: sparse.csc_array, cells: Mapping[str, tuple[np.ndarray, np.ndarray]], pub: pl.DataFrame,
           dims: list[str], noise: tuple[float, Any, bool], budget: float | None) -> pl.DataFrame:
    """Each table's cells audited from that table alone."""
    D, support, zeros_perturbed = noise
    parts = []
    for name, one in cells.items():
        lower, upper = _column_bounds(A, {name: one}, D, support, zeros_perturbed)
        lo, up = _rounded(*intervals(A, lower, upper, targets=A[:, one[0]], known=(lower[one[0]], upper[one[0]]),
                                          budget=budget))
        parts.append(pub[one[0]].select(dims).with_columns(
            pl.lit(name).alias("table"), pl.Series("lo_alone", lo), pl.Series("up_alone", up)))
    out = pl.concat(parts)
    return out.with_columns([pl.when(pl.col(c).is_finite()).then(pl.col(c)).cast(pl.Int64).alias(c)
                             for c in ("lo_alone", "up_alone")])
