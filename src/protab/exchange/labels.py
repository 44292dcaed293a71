"""Labels of a table's codes in its outputs (docs/vocabulary.md, "Labels"): label columns of a
frame, and the labels of one language for JSON-stat. ``labels`` is ``{dimension column:
{language: {code: label}}}``, as the ``labels`` of classifications give them
(:mod:`protab.vocabulary.labels`); ``names`` is ``{dimension column: {language: name}}``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

import polars as pl

#: labels of a table: dimension column → language → code → label
Labels = Mapping[str, Mapping[str, Mapping[str, str]]]
#: names of a table's dimensions: dimension column → language → name
Names = Mapping[str, Mapping[str, str]]
_T = TypeVar("_T")


def in_language(by_language: Mapping[str, _T], language: str | None) -> _T | None:
    """The entry of ``language``, or of the first language given when ``language`` is None."""
    if language is None:
        return next(iter(by_language.values()), None)
    return by_language.get(language)


def with_label_columns(frame: pl.DataFrame, labels: Labels, languages: Sequence[str]) -> pl.DataFrame:
    """``frame`` with a column ``<dim>_label_<lang>`` right after each labelled dimension, per
    language of ``languages``: the code's label, null for a code without one (one
    ``replace_strict`` per column, no loop over the rows)."""
    add: dict[str, list[pl.Expr]] = {}
    for dim, by_language in labels.items():
        if dim not in frame.columns:
            continue
        for lang in languages:
            found = by_language.get(lang)
            if found:
                expr = pl.col(dim).cast(pl.String).replace_strict(
                    list(found), list(found.values()), default=None, return_dtype=pl.String)
                add.setdefault(dim, []).append(expr.alias(f"{dim}_label_{lang}"))
    if not add:
        return frame
    out = frame.with_columns(*(e for exprs in add.values() for e in exprs))
    order: list[str] = []
    for c in frame.columns:
        order.append(c)
        order += [f"{c}_label_{lang}" for lang in languages if f"{c}_label_{lang}" in out.columns and c in add]
    return out.select(order)
