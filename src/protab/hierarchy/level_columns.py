"""A hierarchy from level columns, coarsest first (region, municipality): the parent-child
links of each row's codes, with the check that no code stands at two levels (a band '0' and an
age '0' would name one cell twice). Used for records (Session.hierarchy_from_columns) and for
the service's declared code lists alike."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from protab.errors import InputError
from protab.hierarchy.hierarchy_class import Hierarchy

__all__ = ["from_level_columns"]


def from_level_columns(frame: pl.DataFrame, levels: Sequence[str], *, root: str, source: str) -> Hierarchy:
    """Total ``root`` → ``levels[0]`` → … → ``levels[-1]`` from the distinct rows of ``frame``
    (text codes, no nulls); InputError naming both columns and the codes found at two levels."""
    levels = list(levels)
    rows = frame.select(pl.col(c).cast(pl.Utf8) for c in levels).unique(maintain_order=True)
    _refuse_shared_codes(rows, levels, source)
    parts = [rows.select(pl.lit(root).alias("parent"), pl.col(levels[0]).alias("child"))]
    parts += [rows.select(pl.col(a).alias("parent"), pl.col(b).alias("child")) for a, b in zip(levels, levels[1:])]
    return Hierarchy.from_parent_child(pl.concat(parts).unique().sort("parent", "child"), root=root)


def _refuse_shared_codes(rows: pl.DataFrame, levels: list[str], source: str) -> None:
    if len(levels) < 2:
        return
    at = pl.concat([rows.select(pl.col(c).alias("code")).unique().with_columns(level=pl.lit(i))
                    for i, c in enumerate(levels)])
    twice = (at.group_by("code").agg(pl.col("level").min().alias("a"), pl.col("level").max().alias("b"),
                                     pl.len().alias("n"))
             .filter(pl.col("n") > 1).sort("code"))
    if twice.height:
        codes = twice["code"].to_list()
        shown = ", ".join(repr(c) for c in codes[:5]) + (", …" if len(codes) > 5 else "")
        first = twice.row(0, named=True)
        raise InputError(
            f"{source} has codes at two levels of one classification: {shown} ({len(codes)} in all; the first "
            f"both in {levels[first['a']]!r} and in {levels[first['b']]!r}); a code names one cell, so recode "
            "one level (e.g. bands as '0-9' or with a prefix)")
