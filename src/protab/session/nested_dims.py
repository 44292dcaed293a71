"""The model matrix of linked tables whose dimensions nest: a dimension that is a function of
another in the records (every municipality lies in one county) is a grouping of it, not a
dimension to cross with it as if independent (docs/audit.md; Session.model_matrix(..., nested=True)).

Linked tables over nested geographies (municipality × sex and county × sex) share one union
TableSpec whose inner cells would cross municipality with county: 300 × 20 × 2 inner cells of
which 19 in 20 cannot hold a record, and an LP system twenty times too large, whose intervals
are moreover wider than an attacker's, who knows which municipalities make a county (the
classification is published with the tables). So the records are asked, in one scan through
the session's engine, which dimension is a function of which, and every inner cell whose codes
break such a function is left out of X: the inner cells are the finer dimension's, and the
coarser one's published cells are sums of them. The intervals are those of the crossed audit
with the impossible combinations known to be empty (tests/audit/).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from protab.sqltools import quote_ident

if TYPE_CHECKING:  # pragma: no cover
    from scipy import sparse

    from protab.table import TableSpec

__all__ = ["functions_of", "without_impossible"]

_NULL = "\x00"  # NULL as a code of its own when the spec has no null_code


def without_impossible(s: Any, table: str, spec: TableSpec, X: sparse.csc_array, inner: pl.DataFrame,
                       published: pl.DataFrame) -> tuple[sparse.csc_array, pl.DataFrame, pl.DataFrame]:
    """(X, inner, published) of ``s.model_matrix(table, spec)`` (``s`` a protab.Session) without
    the inner cells that no record can hold because one dimension of ``spec`` is a function of
    another in ``table`` and no crossing of ``spec`` holds both (a table crossing them publishes
    their empty combinations too: a function that holds in the records by chance, e.g. every
    person of a small municipality of one sex, is not taken as structure)."""
    crossed = [set(t) for t in spec.terms]
    maps = functions_of(s, table, [d.column for d in spec.dimensions], spec.null_code)
    maps = {k: v for k, v in maps.items() if not any(set(k) <= t for t in crossed)}
    if not maps:
        return X, inner, published
    keep = np.ones(inner.height, dtype=bool)
    for (fine, coarse), pairs in maps.items():
        keep &= _consistent(inner, fine, coarse, pairs, spec.null_code)
    if keep.all():
        return X, inner, published
    rows = np.flatnonzero(keep)
    return X.tocsr()[rows].tocsc(), inner[rows], published


def functions_of(s: Any, table: str, dims: list[str], null_code: str | None = None) -> dict[tuple[str, str], pl.DataFrame]:
    """Per pair (fine, coarse) of ``dims`` where coarse is a function of fine in ``table`` (and
    not the reverse unless fine comes first): the distinct (fine, coarse) codes, as text. One
    scan for the distinct counts, one per pair found for its codes."""
    if len(dims) < 2:
        return {}
    fill = null_code if null_code is not None else _NULL
    code = {d: f"coalesce(CAST({quote_ident(d)} AS VARCHAR), ?)" for d in dims}
    pairs = [(a, b) for i, a in enumerate(dims) for b in dims[i + 1:]]
    items = [f"count(DISTINCT {code[d]})" for d in dims] + [f"count(DISTINCT ({code[a]}, {code[b]}))" for a, b in pairs]
    params = [fill] * (len(dims) + 2 * len(pairs))
    row = s.sql(f"SELECT {', '.join(items)} FROM {quote_ident(table)}", params).row(0)
    distinct = dict(zip(dims, row[: len(dims)]))
    out = {}
    for (a, b), both in zip(pairs, row[len(dims):]):
        if both == distinct[a] and distinct[b] > 1:
            fine, coarse = a, b  # b is a function of a
        elif both == distinct[b] and distinct[a] > 1:
            fine, coarse = b, a
        else:
            continue
        out[(fine, coarse)] = s.sql(
            f"SELECT DISTINCT {code[fine]} AS fine, {code[coarse]} AS coarse FROM {quote_ident(table)}", [fill, fill])
    return out


def _consistent(inner: pl.DataFrame, fine: str, coarse: str, pairs: pl.DataFrame, null_code: str | None) -> np.ndarray:
    """Inner rows whose coarse code is the one their fine code has in the records (rows whose
    fine code holds no record are kept: nothing is known of them)."""
    fill = null_code if null_code is not None else _NULL
    cells = inner.select(pl.col(fine).cast(pl.Utf8).fill_null(fill).alias("fine"),
                         pl.col(coarse).cast(pl.Utf8).fill_null(fill).alias("_cell"))
    joined = cells.join(pairs.select(pl.col("fine").cast(pl.Utf8), pl.col("coarse").cast(pl.Utf8)),
                        on="fine", how="left", maintain_order="left")
    return (joined["coarse"].is_null() | (joined["coarse"] == joined["_cell"])).to_numpy()
