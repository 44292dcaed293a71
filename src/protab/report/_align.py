"""Aligning a protected table with the original: value columns, joins, totals, inner cells, crossings."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from protab.errors import InputError, show_values

# --------------------------------------------------------------------------------------------
# aligning tables


def _value_column(frame: pl.DataFrame, given: str | None, names: Sequence[str], dims: Sequence[str],
                  avoid: str | None, what: str) -> str:
    if given is not None:
        if given not in frame.columns:
            raise InputError(
                f"{what}: no value column {given!r} (columns: {show_values(frame.columns, 10)})"
            )
        return given
    for name in names:
        if name in frame.columns:
            return name
    rest = [c for c in frame.columns
            if c not in dims and not c.endswith("_level") and c != avoid
            and frame.schema[c].is_numeric()]
    if len(rest) == 1:
        return rest[0]
    if avoid is not None and avoid in frame.columns and not rest:
        return avoid
    raise InputError(
        f"{what}: cannot tell which column holds the values (columns: "
        f"{show_values(frame.columns, 10)}); name it (value=… in the request, or a mapping "
        "protected_value= / expected_value=)"
    )


def _select(frame: pl.DataFrame, dims: Sequence[str], value: str, out: str, what: str) -> pl.DataFrame:
    missing = [d for d in dims if d not in frame.columns]
    if missing:
        raise InputError(
            f"{what}: no dimension column(s) {show_values(missing)} "
            f"(columns: {show_values(frame.columns, 10)})"
        )
    levels = [f"{d}_level" for d in dims if f"{d}_level" in frame.columns]
    if value in frame.columns and not (frame.schema[value].is_numeric() or frame.schema[value] == pl.Null):
        raise InputError(
            f"{what}: the value column {value!r} holds {frame.schema[value]}, not numbers; name the "
            "column of the counts (value=…)"
        )
    sel = frame.select(
        *[pl.col(d).cast(pl.String) for d in dims],
        *[pl.col(c).cast(pl.Int64) for c in levels],
        pl.col(value).cast(pl.Float64).alias(out),
    )
    dup = sel.select(dims).is_duplicated()
    if dup.any():
        first = sel.filter(dup).select(dims).unique(maintain_order=True).rows()
        raise InputError(
            f"{what}: {int(dup.sum())} rows share their dimension codes with another row "
            f"(codes {show_values(first, 3)}); give one row per cell"
        )
    return sel


def _align(orig: pl.DataFrame, prot: pl.DataFrame, dims: Sequence[str], total: str,
           label: str) -> pl.DataFrame:
    """Full join on the dims: columns dims, <dim>_level (where known), _f, _g."""
    j = orig.join(prot, on=list(dims), how="full", coalesce=True, suffix="_p",
                  maintain_order="left_right")
    for d in dims:
        lc = f"{d}_level"
        if lc in j.columns and f"{lc}_p" in j.columns:
            j = j.with_columns(pl.coalesce(lc, f"{lc}_p").alias(lc)).drop(f"{lc}_p")
    in_orig = pl.col("_f").is_not_null()
    missing = j.filter(pl.col("_f").fill_null(0) > 0).filter(pl.col("_g").is_null())
    # a protected cell given with a null value is blanked: count it as 0; a cell absent from
    # the protected table is 0 only when the original is 0
    present = prot.select(dims).with_columns(pl.lit(True).alias("_present"))
    missing = missing.join(present, on=list(dims), how="left").filter(pl.col("_present").is_null())
    if missing.height:
        raise InputError(
            f"method {label!r}: {missing.height} cells of the original with a positive count are "
            f"missing from its table (e.g. {show_values(missing.select(dims).rows(), 3)}); "
            "give the protected table for the same cells as the original"
        )
    extra = j.filter(~in_orig)
    if extra.height:
        tot = _total_mask(extra, dims, total, any_dim=True)
        margins = extra.filter(tot)
        if margins.height:
            raise InputError(
                f"method {label!r}: {margins.height} margin cells are missing from the original "
                f"(e.g. {show_values(margins.select(dims).rows(), 3)}); give the "
                "original table with the same margins (the published table, not the inner one)"
            )
    return j.with_columns(pl.col("_f").fill_null(0.0), pl.col("_g").fill_null(0.0))


def _is_total(frame: pl.DataFrame, d: str, total: str) -> pl.Expr:
    lc = f"{d}_level"
    if lc in frame.columns:
        return pl.col(lc).fill_null(-1) == 0
    return pl.col(d) == total


def _is_finest(frame: pl.DataFrame, d: str, total: str) -> pl.Expr:
    lc = f"{d}_level"
    if lc in frame.columns:
        top = frame[lc].max()
        return pl.col(lc).fill_null(-1) == (top if top is not None else 0)
    return pl.col(d) != total


def _total_mask(frame: pl.DataFrame, dims: Sequence[str], total: str, any_dim: bool) -> pl.Expr:
    exprs = [_is_total(frame, d, total) for d in dims]
    if not exprs:
        return pl.lit(False)
    return pl.any_horizontal(exprs) if any_dim else pl.all_horizontal(exprs)


def _all(exprs: list[pl.Expr]) -> pl.Expr:
    return pl.all_horizontal(exprs) if exprs else pl.lit(True)


def _inner_rows(a: pl.DataFrame, dims: Sequence[str], total: str) -> pl.DataFrame:
    return a.filter(_all([_is_finest(a, d, total) for d in dims]))


def _finest_published(a: pl.DataFrame, dims: Sequence[str], total: str) -> pl.DataFrame:
    """The cells of the finest published crossings: every dimension at its finest level or at
    its total, and no published crossing finer. For a full table these are the inner cells;
    for a table published by a formula such as ``a*b + a*c`` (no a×b×c cells) they are the
    cells of a×b and of a×c."""
    flags = [pl.when(_is_finest(a, d, total)).then(pl.lit("1"))
             .when(_is_total(a, d, total)).then(pl.lit("0")).otherwise(pl.lit("x"))
             for d in dims]
    if not flags:
        return a
    marked = a.with_columns(pl.concat_str(flags).alias("_crossing"))
    patterns = [p for p in marked["_crossing"].unique().to_list() if p is not None and "x" not in p]

    def finer(q: str, p: str) -> bool:
        return q != p and all(qc >= pc for qc, pc in zip(q, p))

    maximal = [p for p in patterns if not any(finer(q, p) for q in patterns)]
    return marked.filter(pl.col("_crossing").is_in(maximal)).drop("_crossing")


def _crossing(a: pl.DataFrame, dims: Sequence[str], total: str, finest: Sequence[str],
              any_level: Sequence[str] = ()) -> pl.DataFrame:
    """Cells of the crossing of ``finest`` (finest level) and ``any_level`` dims: the rows with
    every other dim at its total when the table has them, else the inner rows summed."""
    keep = [*finest, *any_level]
    others = [d for d in dims if d not in keep]
    # the finest level of a dimension is the largest level in the whole table ``a``
    rows = a.filter(_all([_is_finest(a, d, total) for d in finest]))
    if others:
        at_total = rows.filter(_all([_is_total(a, d, total) for d in others]))
        if at_total.height:
            rows = at_total
        else:
            rows = rows.filter(_all([_is_finest(a, d, total) for d in others]))
    return rows.group_by(keep, maintain_order=True).agg(pl.col("_f").sum(), pl.col("_g").sum())
