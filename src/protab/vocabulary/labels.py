"""Labels of a classification's codes, and its own name, in one or more languages
(docs/vocabulary.md, "Labels")::

    [hierarchies.region]                # or [classifications.region] of a programme
    columns = ["region"]
    name = { en = "Region", nb = "Region" }
    labels = { en = { Total = "All regions", R1 = "North" }, nb = { Total = "Alle", R1 = "Nord" } }

A language is a tag such as ``en``, ``nb`` or ``en-GB``; a label is a non-empty string; a code
is a TOML key (``1 = "One"`` labels the code ``"1"``). The types are checked with the file
(:class:`Labels`, :class:`Names`); that every labelled code is a code of the classification
(its root among them) is checked once its codes are known (:func:`check_labels`). Labels may
also come from code files (``labels_file``, :mod:`protab.vocabulary.label_files`), merged into
``labels`` when the file is read. The SDMX
structure message names codes by them, JSON-stat takes them as ``category.label``, and
``protab protect`` writes them as label columns (``label_columns``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from protab.errors import SpecError, show_values
from protab.vocabulary.types import Str, Type, fail

#: a language tag (BCP 47 in its simple forms: a two- or three-letter language, then subtags: en, nb, en-GB, sr-Latn)
LANGUAGE = re.compile(r"[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*")
#: the key of a section whose labels were merged from files (protab.vocabulary.label_files): the codes
#: each source lists, by source (``labels`` for the inline ones); not a key of the vocabulary
LABEL_SOURCES = "_labels_from"
#: what no label or name may hold: the controls XML 1.0 cannot carry (tab and line breaks it can), so that
#: the SDMX structure message of every label can be written, and the non-characters U+FFFE, U+FFFF
_UNWRITABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def check_text(text: str, where: str) -> None:
    """A SpecError starting with ``where`` when a label or name holds a character no output can carry."""
    bad = _UNWRITABLE.search(text)
    if bad:
        ch = bad.group()
        raise SpecError(f"{where} holds the control character {ch!r} (U+{ord(ch):04X}), which the SDMX structure "
                        "message cannot carry; remove it")


def same_language(tags: Iterable[str]) -> tuple[str, str] | None:
    """Two of ``tags`` that differ only by case (``en`` and ``EN``: one language), else None."""
    seen: dict[str, str] = {}
    for tag in tags:
        first = seen.setdefault(tag.lower(), tag)
        if first != tag:
            return first, tag
    return None


def _one_way(tags: Iterable[str], path: str) -> None:
    pair = same_language(tags)
    if pair:
        raise SpecError(f"request: {path}: {pair[0]!r} and {pair[1]!r} are one language written two ways; "
                        "write it one way")


def _language(key: Any, path: str) -> None:
    if not isinstance(key, str) or not LANGUAGE.fullmatch(key):
        raise SpecError(f"request: {path}: {key!r} is not a language tag (such as 'en', 'nb' or 'en-GB')")


class Language(Type):
    """A language tag such as ``en``, ``nb`` or ``en-GB``."""

    name = "a language tag (such as 'en', 'nb' or 'en-GB')"

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, str):
            raise fail(path, self.name, value)
        _language(value, path)


class Names(Type):
    """``name = { en = "Region", nb = "Region" }``: a name per language."""

    name = "a table of language = name (such as { en = \"Region\" })"

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, dict) or not value:
            raise fail(path, self.name, value)
        for lang, text in value.items():
            _language(lang, path)
            Str().check(text, f"{path}.{lang}")
            check_text(text, f"request: {path}.{lang}")
        _one_way(value, path)


class Labels(Type):
    """``labels = { en = { CODE = "label", … }, … }``: per language, labels by code."""

    name = "a table of language = { code = label, … }"

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, dict) or not value:
            raise fail(path, self.name, value)
        for lang, by_code in value.items():
            _language(lang, path)
            if not isinstance(by_code, dict) or not by_code:
                raise fail(f"{path}.{lang}", "a table of code = label", by_code)
            for code, text in by_code.items():
                Str().check(text, f"{path}.{lang}.{code}")
                check_text(text, f"request: {path}.{lang}.{code}")
        _one_way(value, path)


def check_labels(section: Mapping[str, Any], codes: Iterable[str], file: str, where: str) -> None:
    """A SpecError naming ``file``, the classification ``where``, the source (``labels`` or a
    ``labels_file``) and the codes when a source labels (or lists) a code that ``codes`` (the
    classification's, root included) lacks."""
    sources = section.get(LABEL_SOURCES)
    if sources is None:
        sources = {f"labels.{lang}": list(by_code) for lang, by_code in (section.get("labels") or {}).items()}
    known = set(codes)
    for source, listed in sources.items():
        unknown = [c for c in listed if c not in known]
        if unknown:
            raise SpecError(f"{file}: {where} {source} labels {show_values(unknown)}, which "
                            f"{'is no code' if len(unknown) == 1 else 'are no codes'} of the classification "
                            f"(its codes: {show_values(sorted(known))}){zeros_hint(unknown, known)}")


def zeros_hint(unknown: Iterable[str], known: Iterable[str]) -> str:
    """``; '0301' and '301' differ only by leading zeros …`` for the first code of ``unknown``
    that is a code of ``known`` but for its leading zeros, else ``""``."""
    stripped = {c.lstrip("0"): c for c in known}
    for c in unknown:
        other = stripped.get(c.lstrip("0"))
        if other is not None and c.lstrip("0"):
            return (f"; {c!r} and {other!r} differ only by leading zeros: codes are text, write them as the "
                    "classification does (a spreadsheet may have dropped or added the zeros)")
    return ""
