"""Labels of the service's codes and names of its dimensions, in one language or several
(docs/serve.md, "Labels"): metadata the office declares, shown in the catalogue and, with a
table request's ``lang``, beside the codes of its answer.

Per dataset in serve.toml, with the vocabulary's types (:class:`protab.vocabulary.labels.Labels`,
:class:`~protab.vocabulary.labels.Names`: the checks of protect's ``labels`` and ``name``)::

    labels = { sex = { en = { F = "Female", M = "Male" }, nb = { F = "Kvinne", M = "Mann" } } }
    names = { sex = { en = "Sex", nb = "Kjønn" } }
    descriptions = { sex = { en = "Sex as registered", nb = "Registrert kjønn" } }

or read from code files by the vocabulary's reader, ``labels_file = { region = "regions.csv" }``
(a ``code`` and ``label_<lang>`` columns, a one-language code list, an SDMX code list: as
protect's ``labels_file``), and in a ``codes_file`` CSV: a column ``label_<lang>`` labels the row's code of the dimension,
``<level>_label_<lang>`` the row's code of that level of its hierarchy. Checked at start-up: a
labelled code must be declared (of any level of the dimension, or its margin ``Total``), a label
must not be empty, a code may not be labelled two ways, and a column's language must be a tag.
Codes stay the identifiers: labels are added beside them, never instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from protab.errors import SpecError, show_values
from protab.request import schema
from protab.vocabulary import (
    Labels,
    LabelsFile,
    Language,
    Names,
    check_text,
    read_labels_file,
    same_language,
    zeros_hint,
)

#: the name protab gives margins (protab.serve.classifications.MARGIN)
MARGIN = "Total"
#: serve.toml's datasets.<name>.labels and .names: per dimension, as protect's labels and name
LABELS = schema.Dict(Labels())
NAMES = schema.Dict(Names())
#: serve.toml's datasets.<name>.labels_file: per dimension, as protect's labels_file (a code file)
LABELS_FILE = schema.Dict(LabelsFile())
#: serve.toml's datasets.<name>.descriptions: per dimension, a text per language (as names)
DESCRIPTIONS = schema.Dict(Names())
#: a label column of a code file: ``label_<lang>`` or ``<level>_label_<lang>``
_COLUMN = re.compile(r"(?:(?P<level>.+)_)?label_(?P<lang>.*)")

#: labels of one column of a classification: language → code → label
ByLanguage = dict[str, dict[str, str]]


@dataclass(frozen=True)
class DimensionLabels:
    """A dimension's names and descriptions (language → text) and its codes' labels (language →
    code → label; the codes of every level of its hierarchy, and ``Total`` when the office
    labels it)."""

    names: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    descriptions: Mapping[str, str] = field(default_factory=dict)

    @property
    def languages(self) -> set[str]:
        return set(self.names) | set(self.labels) | set(self.descriptions)


def is_label_column(column: str) -> bool:
    return _COLUMN.fullmatch(column) is not None


def file_labels(frame: pl.DataFrame, levels: Sequence[str], where: str) -> dict[str, ByLanguage]:
    """The labels of a code file's label columns, by level column: ``label_<lang>`` labels the
    finest level, ``<level>_label_<lang>`` that level. SpecError naming the file (``where``), the
    column and the codes for a column of no level, a language that is no tag, an empty label, or a
    code of a level labelled two ways on two rows."""
    out: dict[str, ByLanguage] = {}
    for column in frame.columns:
        m = _COLUMN.fullmatch(column)
        if m is None or column in levels:
            continue
        level, lang = m["level"] or levels[-1], m["lang"]
        if level not in levels:
            raise SpecError(f"{where}: label column {column!r} names no level of the classification (its levels: "
                            f"{', '.join(levels)}); name it label_<lang> or <level>_label_<lang>")
        if not _is_language(lang):
            raise SpecError(f"{where}: label column {column!r}: {lang!r} is not a language tag (such as 'en', 'nb' "
                            "or 'en-GB'); name it label_<lang> or <level>_label_<lang>")
        pair = same_language([*out.get(level, {}), lang])
        if pair:
            raise SpecError(f"{where}: label column {column!r}: {pair[0]!r} and {pair[1]!r} are one language written "
                            "two ways; write it one way")
        pairs = frame.select(pl.col(level).alias("code"), pl.col(column).str.strip_chars().alias("label"))
        empty = pairs.filter(pl.col("label").is_null() | (pl.col("label") == ""))["code"].unique(maintain_order=True)
        if empty.len():
            raise SpecError(f"{where}: label column {column!r} has an empty label for the codes "
                            f"{show_values(empty.to_list())}; give every row a label, or drop the column")
        pairs = pairs.unique(maintain_order=True)
        for code, text in pairs.rows():
            check_text(text, f"{where}: label column {column!r}: the label of {code!r}")
        twice = pairs.filter(pl.col("code").is_duplicated())
        if twice.height:
            code = twice["code"][0]
            shown = show_values(twice.filter(pl.col("code") == code)["label"].to_list())
            raise SpecError(f"{where}: label column {column!r} labels the code {code!r} two ways ({shown}) on "
                            f"different rows (codes {show_values(twice['code'].unique(maintain_order=True).to_list())}); "
                            "give each code one label")
        _merge(out.setdefault(level, {}), lang, dict(pairs.rows()), f"{where}: label column {column!r}")
    return out


def _is_language(tag: str) -> bool:
    try:
        Language().check(tag, "label column")
    except SpecError:
        return False
    return True


def _merge(into: ByLanguage, lang: str, labels: Mapping[str, str], where: str) -> None:
    """Add ``labels`` of ``lang`` to ``into``; SpecError naming the codes ``into`` labels otherwise."""
    have = into.setdefault(lang, {})
    other = [c for c, text in labels.items() if have.get(c, text) != text]
    if other:
        raise SpecError(f"{where} labels {show_values(other)} in {lang!r} otherwise than "
                        f"{'its' if len(other) == 1 else 'their'} other label ("
                        f"{show_values([have[c] for c in other])}); give each code one label")
    have.update(labels)


def dataset_labels(name: str, ds: Mapping[str, Any], code_lists: Mapping[str, Any], where: str,
                   base: Path | None = None) -> dict[str, DimensionLabels]:
    """Each dimension's :class:`DimensionLabels` of dataset ``name``: its code files' label
    columns (``CodeList.column_labels``) and serve.toml's ``labels`` and ``names``, merged by level
    column (a region's label is the same in the region dimension and in the municipalities'
    hierarchy), and ``labels_file``'s files (paths relative to ``base``). SpecError naming
    serve.toml (or the labels file), the dataset, the dimension and the codes for a labelled code
    that is not declared, or a code labelled two ways."""
    given, names, texts = ds.get("labels", {}), ds.get("names", {}), ds.get("descriptions", {})
    files = ds.get("labels_file", {})
    for key, table in (("labels", given), ("names", names), ("descriptions", texts), ("labels_file", files)):
        stray = [d for d in table if d not in code_lists]
        if stray:
            raise SpecError(f"{where}: datasets.{name}.{key}.{stray[0]} names {stray[0]!r}, which is not one of "
                            f"the dataset's dims ({', '.join(code_lists)})")
    by_column: dict[str, ByLanguage] = {}
    for cl in code_lists.values():
        for column, by_lang in getattr(cl, "column_labels", {}).items():
            for lang, in_file in by_lang.items():
                _merge(by_column.setdefault(column, {}), lang, in_file, f"{where}: {cl.source}")
    margins: dict[str, ByLanguage] = {}
    for dim, by_lang in given.items():
        key = f"{where}: datasets.{name}.labels.{dim}"
        _declared_labels(dim, code_lists[dim], by_lang, by_column, margins.setdefault(dim, {}), key)
    for dim, value in files.items():
        for entry in value if isinstance(value, list) else [value]:
            shown = entry if isinstance(entry, str) else entry.get("file", entry.get("sdmx"))
            key = f"{where}: datasets.{name}.labels_file.{dim} {shown!r}"
            by_lang = read_labels_file(entry, base or Path("."), MARGIN, key)[0]
            _declared_labels(dim, code_lists[dim], by_lang, by_column, margins.setdefault(dim, {}), key)
    out = {}
    for dim, cl in code_lists.items():
        labels: ByLanguage = {}
        for column in cl.levels:
            for lang, found in by_column.get(column, {}).items():
                labels.setdefault(lang, {}).update(found)
        for lang, found in margins.get(dim, {}).items():
            labels.setdefault(lang, {}).update(found)
        if labels or dim in names or dim in texts:
            out[dim] = DimensionLabels(dict(names.get(dim, {})), labels, dict(texts.get(dim, {})))
    one_way({f"dimension {d!r}": dl for d, dl in out.items()}, f"{where}: datasets.{name}")
    return out


def one_way(dims_labels: Mapping[str, DimensionLabels], where: str) -> None:
    """A SpecError when the labels, names and descriptions of ``dims_labels`` (keyed by how the
    message names each: ``dimension 'sex'``) write one language two ways (``en`` and ``EN``)."""
    found: dict[str, tuple[str, str]] = {}  # a language in lower case: as the first one writes it, and that one
    for dim, dl in dims_labels.items():
        for lang in sorted(dl.languages):
            tag, first = found.setdefault(lang.lower(), (lang, dim))
            if tag != lang:
                raise SpecError(f"{where}: {dim} has labels or names in {lang!r}, {first} in {tag!r}: one language "
                                "written two ways; write it one way (in serve.toml, the code files and the labels "
                                "files)")


def _declared_labels(dim: str, cl: Any, by_lang: Mapping[str, Mapping[str, str]],
                     by_column: dict[str, ByLanguage], margin: ByLanguage, key: str) -> None:
    """Labels of dimension ``dim`` given in serve.toml or a labels file (``key`` names it in
    messages), each code put under the level column that holds it."""
    level_of = {}
    for column in reversed(cl.levels):
        level_of.update({c: column for c in cl.table[column].to_list() if c not in level_of})
    for lang, labels in by_lang.items():
        labels = {str(c): text.strip() for c, text in labels.items()}
        unknown = [c for c in labels if c != MARGIN and c not in level_of]
        if unknown:
            raise SpecError(f"{key}.{lang} labels {show_values(unknown)}, which "
                            f"{'is not a declared code' if len(unknown) == 1 else 'are not declared codes'} of "
                            f"dimension {dim!r} (declared in {cl.source}; its codes: "
                            f"{show_values(sorted(level_of), 10)}, and {MARGIN!r}){zeros_hint(unknown, level_of)}")
        if MARGIN in labels:
            _merge(margin, lang, {MARGIN: labels[MARGIN]}, key)
        for column in cl.levels:
            part = {c: t for c, t in labels.items() if level_of.get(c) == column}
            if part:
                _merge(by_column.setdefault(column, {}), lang, part, key)


def languages(datasets: Iterable[Any]) -> list[str]:
    """The languages of the service: every language a dataset's labels or names give (sorted)."""
    found: set[str] = set()
    for ds in datasets:
        for dl in ds.labels.values():
            found |= dl.languages
    return sorted(found)


def check_language(lang: Any, datasets: Iterable[Any]) -> str:
    """A table request's ``lang``: a language some dataset of ``datasets`` (the user's) declares,
    else a QueryRefused (400) naming it and the declared ones."""
    from protab.serve.query import QueryRefused

    known = languages(datasets)
    if not isinstance(lang, str):
        got = {bool: "a boolean", int: "an integer", float: "a number", list: "a list", dict: "an object"}
        raise QueryRefused(f"lang must be a language tag (a string such as 'en'), not {got.get(type(lang), 'that')}",
                           rule="validator", advice="give lang as a string, or leave it out (codes only)")
    if lang not in known:
        shown = show_values(known) if known else "none (the office declares no labels)"
        raise QueryRefused(f"lang: the service has no labels in {lang[:40]!r}; its languages: {shown}",
                           rule="validator", advice=f"use lang one of {shown}, or leave it out (codes only)")
    return lang


def catalog_labels(dl: DimensionLabels | None, codes: Iterable[str] | None) -> dict[str, Any]:
    """The catalogue's ``names`` and ``labels`` of a dimension whose codes shown are ``codes``
    (with the margin; None: every level's): language → name, language → code → label, in every
    language."""
    if dl is None:
        return {}
    shown = None if codes is None else set(codes) | {MARGIN}
    labels = {lang: {c: t for c, t in found.items() if shown is None or c in shown}
              for lang, found in sorted(dl.labels.items())}
    return {"names": dict(sorted(dl.names.items())), "labels": {k: v for k, v in labels.items() if v},
            "descriptions": dict(sorted(dl.descriptions.items()))}


@dataclass(frozen=True)
class Labelling:
    """An answer's labels in one language: the label columns to add (``<dim>_label_<lang>``, as
    protect names them) and each dimension's name (its column when it has none in ``lang``)."""

    lang: str
    labels: Mapping[str, Mapping[str, Mapping[str, str]]]
    names: Mapping[str, str]


def labelling(lang: str, dims: Sequence[str], dims_labels: Mapping[str, DimensionLabels]) -> Labelling:
    """The :class:`Labelling` of an answer in ``lang`` of dimensions ``dims``."""
    found = {d: dims_labels[d] for d in dims if d in dims_labels}
    labels = {d: {lang: dict(dl.labels[lang])} for d, dl in found.items() if dl.labels.get(lang)}
    names = {d: found[d].names.get(lang, d) if d in found else d for d in dims}
    return Labelling(lang, labels, names)


def labelled(answer: Any, lang: str | None, dims: Sequence[str], dims_labels: Mapping[str, DimensionLabels]) -> Any:
    """``answer`` (a broker's Answer) in ``lang``: a column ``<dim>_label_<lang>`` right after
    each dimension labelled in it, and the dimensions' names (``answer.labels``); as it is
    without ``lang``. After the answer cache: the protected frame is the same in every language."""
    if lang is None:
        return answer
    from protab.exchange.labels import with_label_columns

    answer.labels = labelling(lang, dims, dims_labels)
    answer.frame = with_label_columns(answer.frame, answer.labels.labels, [lang])
    return answer


def split_label_columns(frame: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, dict[str, dict[str, str]]]]:
    """A frame without its label columns ``<dim>_label_<lang>``, and their labels (dimension →
    language → code → label), for formats that carry labels otherwise (JSON-stat, SDMX-CSV)."""
    labels: dict[str, dict[str, dict[str, str]]] = {}
    drop = []
    for column in frame.columns:
        m = _COLUMN.fullmatch(column)
        if m is None or not m["level"] or m["level"] not in frame.columns:
            continue
        pairs = frame.select(pl.col(m["level"]).cast(pl.String), pl.col(column)).drop_nulls().unique()
        labels.setdefault(m["level"], {})[m["lang"]] = dict(pairs.rows())
        drop.append(column)
    return frame.drop(drop), labels
