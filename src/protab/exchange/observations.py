"""A protected table as SDMX observations: one row per (cell, measure) with the dimension codes,
``OBS_VALUE`` and the two SDMX flags ``OBS_STATUS`` (code list CL_OBS_STATUS 2.2) and
``CONF_STATUS`` (CL_CONF_STATUS). The SDMX-CSV and JSON-stat writers share it (docs/exchange.md).

What protab's frames say about a cell, and the flags it becomes:

=============================================  ===========  ===========  =========
cell                                           OBS_VALUE    OBS_STATUS   CONF_STATUS
=============================================  ===========  ===========  =========
published value (perturbed or not)             the value    ``A``        ``F``
``suppressed == "primary"`` (Session.suppress)  empty        ``Q``        ``C``
``suppressed == "secondary"``                  empty        ``Q``        ``D``
other null value (a cell-key blank below the    empty        ``Q``        ``C``
threshold; a suppressed cell of ``protect``)
listed in ``structural_zeros``                 empty        ``M``        ``F``
=============================================  ===========  ===========  =========

A dimension's total — the code at ``<dim>_level`` 0 (the hierarchy's root, "Total" unless named
otherwise) or a null code (a dimension a query answer aggregates) — is SDMX's total code ``_T``
in every output, as the SDMX Content-Oriented Guidelines reserve it; a code ``_T`` that is not a
total is refused. JSON-stat keeps the root's name as the label of ``_T``.

``Q`` is "missing value; suppressed", ``M`` "missing value; data cannot exist", ``C``
"confidential", ``D`` "secondary confidentiality set by the sender", ``F`` "free". No cell is
flagged as changed by noise: such a flag would tell readers which counts are exact and undo the
cell key method (design, idea 5); say in the dataflow's metadata that the table is perturbed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import polars as pl

from protab.errors import InputError, SpecError

#: An SDMX identifier (the IDType of the SDMX information model).
ID_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
#: SDMX's total code: a dimension's root (level 0) and a dimension a grouping set aggregates.
TOTAL = "_T"
#: the label of ``_T`` when a frame does not name its total (a null code)
TOTAL_LABEL = "Total"
#: Columns that are never measures: suppression labels and the audit's intervals.
_NOT_MEASURES = {"suppressed", "lo", "up", "protected"}


def check_id(value: str, what: str) -> str:
    """``value`` if it is a valid SDMX identifier, else a SpecError naming ``what``."""
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise SpecError(
            f"{what}: {value!r} is not a valid SDMX identifier (a letter, then letters, digits, '_' "
            "or '-'); rename it"
        )
    return value


def _numeric(dtype: pl.DataType) -> bool:
    return dtype.is_numeric() and dtype != pl.Boolean


def pick_columns(frame: pl.DataFrame, dims: Sequence[str] | None, measures: Sequence[str] | None,
                 table: str) -> tuple[list[str], list[str]]:
    """The dimension and measure columns of a protab frame. Defaults: the text columns are the
    dimensions (their ``<dim>_level`` columns are dropped); the measures are the ``*_pert``
    columns if there are any (so originals kept by ``original=True`` are never written), else the
    other numeric columns."""
    cols = frame.columns
    if dims is None:
        dims = [c for c in cols if c not in _NOT_MEASURES and not _numeric(frame.schema[c])]
    levels = {f"{d}_level" for d in dims}
    if measures is None:
        rest = [c for c in cols if c not in dims and c not in levels and c not in _NOT_MEASURES
                and _numeric(frame.schema[c])]
        pert = [c for c in rest if c.endswith("_pert")]
        measures = pert or rest
    missing = [c for c in [*dims, *measures] if c not in cols]
    if missing:
        raise InputError(f"table {table!r}: no column {missing[0]!r} (columns: {', '.join(cols[:12])})")
    if not measures or (not dims and frame.height > 1):
        raise InputError(f"table {table!r}: needs a value column and, for more than one cell, a dimension (text) "
                         "column; "
                         f"name them with dims= and measures= (columns: {', '.join(cols[:12])})")
    for c in [*dims, *measures]:
        check_id(c.upper(), f"table {table!r}, column {c!r}")
    return list(dims), list(measures)


def observations(
    frame: Any, table: str, *, dims: Sequence[str] | None = None, measures: Sequence[str] | None = None,
    structural_zeros: Any = None,
) -> tuple[pl.DataFrame, list[str], dict[str, str]]:
    """The observations of ``frame`` (see the module docstring), in the frame's order: the
    dimension columns upper-cased (a total is ``_T``), ``MEASURE`` when there are several
    measures, ``OBS_VALUE`` (Float64), ``OBS_TEXT`` (the value as written in CSV),
    ``OBS_STATUS`` and ``CONF_STATUS``. Also the dimension ids and the measure id → column."""
    obs, ids, measure_ids, _ = observations_and_totals(frame, table, dims=dims, measures=measures,
                                                       structural_zeros=structural_zeros)
    return obs, ids, measure_ids


def observations_and_totals(
    frame: Any, table: str, *, dims: Sequence[str] | None = None, measures: Sequence[str] | None = None,
    structural_zeros: Any = None,
) -> tuple[pl.DataFrame, list[str], dict[str, str], dict[str, str]]:
    """:func:`observations`, and per dimension id the name its total had in ``frame`` (the
    root's code, else "Total"): the label JSON-stat gives ``_T``."""
    from protab._frames import as_polars

    frame = as_polars(frame, f"table {table!r}")
    dims, measures = pick_columns(frame, dims, measures, table)
    ids = [d.upper() for d in dims]
    totals = _totals(frame, dims, ids, table)
    raw = frame.select(pl.col(d).cast(pl.String).alias(i) for d, i in zip(dims, ids))
    codes = [pl.when(_is_total(frame, d)).then(pl.lit(TOTAL)).otherwise(pl.col(d).cast(pl.String)).alias(i)
             for d, i in zip(dims, ids)]
    base = frame.select(*codes, *measures, *([pl.col("suppressed")] if "suppressed" in frame.columns else []))
    empty = [i for i in ids if (base[i] == "").any()]
    if empty:
        raise InputError(f"table {table!r}: dimension {empty[0]!r} has empty codes; SDMX needs a code in every "
                         "dimension (give NULL codes a name with null_code=)")
    dup = base.select(ids).is_duplicated() if ids else pl.Series([False] * base.height)
    if dup.any():
        row = base.filter(dup).row(0)
        raise InputError(f"table {table!r}: {int(dup.sum())} rows share their codes (first {row[:len(ids)]}); "
                         "SDMX needs one row per cell")
    zero = _structural(raw, structural_zeros, dims, ids, table)
    parts = []
    for m in measures:
        value = pl.col(m)
        text = value.cast(pl.Int64) if frame.schema[m].is_integer() else value.cast(pl.Float64)
        conf = pl.lit("C")
        missing = value.is_null() | value.cast(pl.Float64).is_nan()
        if "suppressed" in base.columns:  # a labelled cell is withheld even if its value was kept
            conf = pl.when(pl.col("suppressed") == "secondary").then(pl.lit("D")).otherwise(pl.lit("C"))
            missing = missing | (pl.col("suppressed").fill_null("no") != "no")
        parts.append(base.with_columns(zero).select(
            *ids,
            *([pl.lit(m.upper()).alias("MEASURE")] if len(measures) > 1 else []),
            pl.when(missing | pl.col("_zero")).then(None).otherwise(value.cast(pl.Float64)).alias("OBS_VALUE"),
            pl.when(missing | pl.col("_zero")).then(None).otherwise(text.cast(pl.String)).alias("OBS_TEXT"),
            pl.when(pl.col("_zero")).then(pl.lit("M")).when(missing).then(pl.lit("Q")).otherwise(pl.lit("A"))
            .alias("OBS_STATUS"),
            pl.when(pl.col("_zero")).then(pl.lit("F")).when(missing).then(conf).otherwise(pl.lit("F"))
            .alias("CONF_STATUS"),
            pl.int_range(pl.len()).alias("_row"),
        ))
    out = pl.concat(parts).sort("_row", maintain_order=True).drop("_row")  # cell by cell, measures together
    return out, ids, {m.upper(): m for m in measures}, totals


def _is_total(frame: pl.DataFrame, dim: str) -> pl.Expr:
    """The rows where ``dim`` is at its total: a null code, or level 0 when the frame has levels."""
    level = f"{dim}_level"
    total = pl.col(dim).is_null()
    return total | (pl.col(level) == 0).fill_null(False) if level in frame.columns else total


def _totals(frame: pl.DataFrame, dims: list[str], ids: list[str], table: str) -> dict[str, str]:
    """Each dimension's total's own name (for JSON-stat's label); a code ``_T`` that is not the
    total is an InputError (it would be read as the total)."""
    out = {}
    for d, i in zip(dims, ids):
        code = pl.col(d).cast(pl.String)
        named = frame.filter(_is_total(frame, d) & code.is_not_null())[d].cast(pl.String).unique(maintain_order=True)
        out[i] = named[0] if named.len() else TOTAL_LABEL
        if f"{d}_level" in frame.columns and frame.select((~_is_total(frame, d) & (code == TOTAL)).any()).item():
            raise InputError(f"table {table!r}: dimension {d!r} has the code {TOTAL!r}, which SDMX reserves for the "
                             "total; rename that code")
    return out


def _structural(base: pl.DataFrame, zeros: Any, dims: list[str], ids: list[str], table: str) -> pl.Expr:
    """A boolean column ``_zero``: the cells listed in ``zeros`` (a frame of dimension codes)."""
    if zeros is None:
        return pl.lit(False).alias("_zero")
    from protab._frames import as_polars, require_columns

    z = as_polars(zeros, f"structural zeros of table {table!r}")
    require_columns(z, dims, f"structural zeros of table {table!r}")
    keys = z.select(pl.col(d).cast(pl.String).alias(i) for d, i in zip(dims, ids)).unique()
    mark = base.select(ids).with_row_index("_i").join(keys.with_columns(pl.lit(True).alias("_z")), on=ids,
                                                       how="left", nulls_equal=True)
    flags = mark.sort("_i")["_z"].fill_null(False)
    return pl.lit(flags).alias("_zero")
