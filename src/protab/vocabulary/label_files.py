"""Labels of a classification read from the code files offices already have (docs/vocabulary.md,
"Labels")::

    [hierarchies.region]                # or [classifications.region] of a programme
    columns = ["region"]
    labels_file = "region.csv"          # columns code, label_en, label_nb, …
    # or { file = "klass_131.csv", language = "nb" }   a one-language code list (KLASS: code;name)
    # or { sdmx = "CL_REGION.xml", codelist = "CL_REGION" }   an SDMX-ML structure message
    # or a list of these

Each file gives the ``{language: {code: label}}`` of inline ``labels``; :func:`resolve_labels`
merges them with the inline ones into the section's ``labels`` (a code labelled differently by
two sources is refused), so that everything downstream reads ``labels`` only, and records
which source labels which codes for :func:`protab.vocabulary.labels.check_labels`. Paths are
relative to the file that names them.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from protab.errors import SpecError, show_values
from protab.vocabulary.labels import LABEL_SOURCES, LANGUAGE, check_text, same_language
from protab.vocabulary.types import Str, Type, fail

#: the keys of a labels_file table: a CSV code list (``file``) or an SDMX structure message (``sdmx``)
_CSV_KEYS = ("file", "language", "code", "label")
_SDMX_KEYS = ("sdmx", "codelist")
#: the column of a one-language code list's labels unless ``label`` names another (KLASS: ``name``)
DEFAULT_LABEL = "name"
#: SDMX's code of the total, read back as the classification's root
_TOTAL = "_T"


class LabelsFile(Type):
    """``labels_file``: a CSV file name, a table ``{ file, language, code, label }`` or ``{ sdmx,
    codelist }``, or a list of these."""

    name = ('a file name, { file = "…", language = "…" }, { sdmx = "…", codelist = "…" } or a list of these')

    def check(self, value: Any, path: str) -> None:
        if isinstance(value, list):
            if not value:
                raise SpecError(f"request: {path} must not be an empty list")
            for k, v in enumerate(value):
                self._one(v, f"{path}[{k}]")
        else:
            self._one(value, path)

    def _one(self, value: Any, path: str) -> None:
        if isinstance(value, str):
            Str().check(value, path)
            return
        if not isinstance(value, dict):
            raise fail(path, self.name, value)
        kind = [k for k in ("file", "sdmx") if k in value]
        if len(kind) != 1:
            raise SpecError(f"request: {path} needs exactly one of file, sdmx (found {', '.join(kind) or 'neither'})")
        keys = _CSV_KEYS if kind[0] == "file" else _SDMX_KEYS
        for key, v in value.items():
            if key not in keys:
                raise SpecError(f"request: unknown key {key!r} in {path} (valid keys with {kind[0]}: {', '.join(keys)})")
            Str().check(v, f"{path}.{key}")
        if "language" in value and not LANGUAGE.fullmatch(value["language"]):
            raise SpecError(f"request: {path}.language: {value['language']!r} is not a language tag (such as 'en')")
        if "label" in value and "language" not in value:
            raise SpecError(f"request: {path} names a label column, so it needs the language of its labels "
                            "(language = \"…\")")


def entries(value: Any) -> list[Any]:
    """The entries of a ``labels_file`` value (one, or a list)."""
    return list(value) if isinstance(value, list) else [value]


def entry_paths(entry: Any) -> list[tuple[Any, str]]:
    """Where an entry holds a path: (the mapping, its key); a plain file name is ``(None, "")``."""
    if isinstance(entry, dict):
        return [(entry, k) for k in ("file", "sdmx") if isinstance(entry.get(k), str)]
    return [(None, "")]


def resolve_labels(section: dict[str, Any], base: Path, file: str, where: str) -> None:
    """Read the ``labels_file`` of ``section`` (paths relative to ``base``) and merge them with its
    inline ``labels`` into ``labels``; every refusal is a SpecError naming ``file``, the
    classification ``where``, the labels file and the codes or columns."""
    if "labels_file" not in section:
        return
    sources: list[tuple[str, dict[str, dict[str, str]], list[str]]] = []
    for lang, by_code in (section.get("labels") or {}).items():
        sources.append((f"labels.{lang}", {lang: by_code}, list(by_code)))
    root = str(section.get("root", "Total"))
    for entry in entries(section["labels_file"]):
        shown = entry if isinstance(entry, str) else entry.get("file", entry.get("sdmx"))
        context = f"{file}: {where} labels_file {shown!r}"
        labels, codes = read_labels_file(entry, base, root, context)
        sources.append((f"labels_file {shown!r}", labels, codes))
    merged = merge_labels(sources, f"{file}: {where}")
    if merged:
        section["labels"] = merged
    section[LABEL_SOURCES] = {name: codes for name, _, codes in sources}


def resolve_sections(cfg: dict[str, Any], key: str, path: Path, file: str) -> None:
    """:func:`resolve_labels` of every entry of the named section ``key`` (``hierarchies``,
    ``classifications``) of the file ``path`` (``file``: how messages name it)."""
    for name, section in (cfg.get(key) or {}).items():
        resolve_labels(section, path.parent, file, f"[{key}.{name}]")


def check_label_columns(cfg: Mapping[str, Any], file: str) -> None:
    """A protect request's ``label_columns`` asks only for languages that the labels of its
    tables' hierarchies have."""
    asked = cfg.get("label_columns") or []
    hs = cfg.get("hierarchies") or {}
    used = dict.fromkeys(d for t in cfg.get("tables", []) for d in t["dims"])
    have = sorted({lang for d in used for lang in (hs.get(d, {}).get("labels") or {})})
    missing = [lang for lang in asked if lang not in have]
    if missing:
        them = "it" if len(missing) == 1 else "them"
        found = f"their labels are in: {', '.join(have)}" if have else "none of them has labels"
        raise SpecError(f"{file}: label_columns asks for {show_values(missing)}, but no hierarchy of its tables "
                        f"has labels in {them} ({found}); label them (labels or labels_file) or drop "
                        f"{show_values(missing)} from label_columns")


def merge_labels(sources: list[tuple[str, dict[str, dict[str, str]], list[str]]], where: str
                 ) -> dict[str, dict[str, str]]:
    """The labels of every source in one ``{language: {code: label}}``; a code labelled
    differently by two sources in one language is refused, naming both."""
    merged: dict[str, dict[str, str]] = {}
    origin: dict[tuple[str, str], str] = {}
    tags: dict[str, tuple[str, str]] = {}  # a language in lower case: as its first source writes it, and that source
    for name, labels, _ in sources:
        for lang, by_code in labels.items():
            tag, first = tags.setdefault(lang.lower(), (lang, name))
            if tag != lang:
                raise SpecError(f"{where}: {name} labels in {lang!r}, {first} in {tag!r}: one language written two "
                                "ways; write it one way")
            into = merged.setdefault(lang, {})
            clash = [c for c, text in by_code.items() if c in into and into[c] != text]
            if clash:
                c = clash[0]
                raise SpecError(f"{where}: {name} labels {show_values(clash)} in {lang!r} differently from "
                                f"{origin[lang, c]} ({by_code[c]!r}, not {into[c]!r}); give each code one label "
                                "per language")
            for c, text in by_code.items():
                into.setdefault(c, text)
                origin.setdefault((lang, c), name)
    return merged


def read_labels_file(entry: Any, base: Path, root: str, context: str
                     ) -> tuple[dict[str, dict[str, str]], list[str]]:
    """The labels ``{language: {code: label}}`` of one ``labels_file`` entry and every code it
    lists; ``context`` starts each error message."""
    if isinstance(entry, dict) and "sdmx" in entry:
        return sdmx_labels(_existing(base / entry["sdmx"], context), entry.get("codelist"), root, context)
    entry = {"file": entry} if isinstance(entry, str) else entry
    header, rows, lines = read_rows(_existing(base / entry["file"], context), context)
    code = _column(header, entry.get("code", "code"), context, "code")
    if "language" in entry:
        columns = {entry["language"]: _column(header, entry.get("label", DEFAULT_LABEL), context, "label")}
    else:
        columns = _language_columns(header, context)
    return table_labels(rows, code, columns, context, lines)


def _existing(path: Path, context: str) -> Path:
    if not path.is_file():
        what = ("is a folder, not a file" if path.is_dir() else
                "is not a regular file" if path.exists() else "does not exist")
        raise SpecError(f"{context}: the file {str(path)!r} {what} (paths are relative to the file that names them)")
    return path


def read_rows(path: Path, context: str) -> tuple[list[str], list[list[str]], list[int]]:
    """The header and the non-empty rows of a UTF-8 CSV file, its delimiter ``,`` or ``;`` (the
    one its header holds more of); cells stripped, short rows padded; and the line each row starts
    on. A quote left open, a column twice in the header and a file of only a header are refused."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{context}: the file is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8"
                        ) from None
    first = text.split("\n", 1)[0]
    delimiter = ";" if first.count(";") > first.count(",") else ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    rows, lines, start = [], [], 1
    try:
        for row in reader:
            rows.append([cell.strip() for cell in row])
            lines.append(start)
            start = reader.line_num + 1
    except csv.Error as exc:
        raise SpecError(f"{context}: cannot read the file as CSV: in the row starting on line {start}: {exc} "
                        "(a cell that starts with a quote must end with one)") from None
    if not rows or not any(rows[0]):
        raise SpecError(f"{context}: the file is empty (it needs a header such as code,label_en)")
    header = rows[0]
    twice = [h for h in dict.fromkeys(header) if h and header.count(h) > 1]
    if twice:
        raise SpecError(f"{context}: the column {twice[0]!r} is in the header twice; keep one")
    kept = [k for k in range(1, len(rows)) if any(rows[k])]
    if not kept:
        # its cells unshown: a file of one line named by mistake may be a seed file
        raise SpecError(f"{context}: the file has only one line (a header?), no codes to label")
    body = [rows[k] + [""] * (len(header) - len(rows[k])) for k in kept]
    return header, body, [lines[k] for k in kept]


def _column(header: list[str], name: str, context: str, role: str) -> int:
    if name not in header:
        hint = f" (labels_file = {{ file = \"…\", {role} = \"…\" }} names another)"
        raise SpecError(f"{context}: no {role} column {name!r}{hint}; its columns: {show_values(header, 12)}")
    return header.index(name)


def _language_columns(header: list[str], context: str) -> dict[str, int]:
    """The columns ``label_<lang>`` of a CSV file by language."""
    found = {h[len("label_"):]: k for k, h in enumerate(header) if h.startswith("label_")}
    if not found:
        raise SpecError(f"{context}: no label column (one label_<lang> per language, e.g. label_en; or "
                        f"{{ file = \"…\", language = \"…\" }} for a one-language code list whose labels are "
                        f"{DEFAULT_LABEL!r}); its columns: {show_values(header, 12)}")
    bad = [f"label_{lang}" for lang in found if not LANGUAGE.fullmatch(lang)]
    if bad:
        raise SpecError(f"{context}: the column{'s' if len(bad) > 1 else ''} {show_values(bad)} name no language "
                        "(label_<lang> with a language tag such as en, nb or en-GB)")
    pair = same_language(found)
    if pair:
        raise SpecError(f"{context}: the columns label_{pair[0]} and label_{pair[1]}: {pair[0]!r} and {pair[1]!r} are "
                        "one language written two ways; keep one column")
    return found


def table_labels(rows: list[list[str]], code: int, columns: Mapping[str, int], context: str,
                 lines: list[int] | None = None) -> tuple[dict[str, dict[str, str]], list[str]]:
    """Labels by language from the rows of a code file (``lines``: the line each starts on): the
    code in column ``code``, the labels of each language in ``columns``. A code without any label,
    a row without a code, a label no output can carry and a code labelled twice differently are
    refused (a code repeated with the same labels is fine)."""
    labels: dict[str, dict[str, str]] = {lang: {} for lang in columns}
    codes: list[str] = []
    empty, twice, nameless = [], [], []
    for k, row in enumerate(rows):
        c = row[code]
        texts = {lang: row[i] for lang, i in columns.items() if row[i]}
        if not c:
            nameless.append(lines[k] if lines else k + 2)
            continue
        codes.append(c)
        if not texts:
            empty.append(c)
        for lang, text in texts.items():
            check_text(text, f"{context}: the label of {c!r} in {lang!r}")
            if labels[lang].setdefault(c, text) != text:
                twice.append(c)
    if nameless:
        raise SpecError(f"{context}: line{'s' if len(nameless) > 1 else ''} {show_values(nameless)} "
                        f"of the file {'have' if len(nameless) > 1 else 'has'} labels but no code")
    if empty:
        empty = list(dict.fromkeys(empty))
        raise SpecError(f"{context}: the code{'s' if len(empty) > 1 else ''} {show_values(empty)} "
                        f"{'have' if len(empty) > 1 else 'has'} an empty label; give each code a label or leave "
                        "its row out")
    if twice:
        twice = list(dict.fromkeys(twice))
        raise SpecError(f"{context}: the code{'s' if len(twice) > 1 else ''} {show_values(twice)} "
                        f"{'are' if len(twice) > 1 else 'is'} labelled twice differently in the file; give each code "
                        "one label per language")
    return {lang: by for lang, by in labels.items() if by}, list(dict.fromkeys(codes))


def sdmx_labels(path: Path, codelist: str | None, root: str, context: str
                ) -> tuple[dict[str, dict[str, str]], list[str]]:
    """The names of the codes of one code list of an SDMX-ML structure message, in every language
    they carry (read by sdmx1); ``_T`` is the classification's ``root``, and a name that is the
    code itself (protab's name for a code without a label) is no label."""
    try:
        import sdmx
    except ImportError:
        raise SpecError(f"{context}: reading an SDMX structure message needs the sdmx1 library: "
                        "pip install \"protab[sdmx]\"") from None
    try:
        msg = sdmx.read_sdmx(path)
    except Exception as exc:  # sdmx1 raises many kinds (XML syntax, unknown elements, not a message)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise SpecError(f"{context}: cannot read the file as an SDMX-ML structure message: {first}") from None
    lists = dict(getattr(msg, "codelist", None) or {})
    if codelist is None and len(lists) != 1:
        raise SpecError(f"{context}: the message holds {len(lists)} code lists, so codelist = \"…\" must name one "
                        f"(its code lists: {show_values(sorted(lists), 12) if lists else 'none'})")
    name = codelist if codelist is not None else next(iter(lists))
    if name not in lists:
        raise SpecError(f"{context}: the message holds no code list {name!r} (its code lists: "
                        f"{show_values(sorted(lists), 12) if lists else 'none'})")
    labels: dict[str, dict[str, str]] = {}
    codes = []
    for item in lists[name]:
        code = root if item.id == _TOTAL else str(item.id)
        codes.append(code)
        for lang, text in dict(item.name.localizations).items():
            if not LANGUAGE.fullmatch(lang):
                raise SpecError(f"{context}: code {item.id!r} of {name!r} is named in {lang!r}, which is no language "
                                "tag (such as 'en', 'nb' or 'en-GB')")
            if text and text.strip() and text not in (item.id, code):
                labels.setdefault(lang, {})[code] = text.strip()
    return labels, codes
