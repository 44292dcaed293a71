"""The checks of a protect (or publish) request that need no table built: its schema, table
names, methods and linked suppression, the database and the sources it names, the p-table,
magnitude and rules it loads, and the files no output may replace."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protab.cli.options import DEFAULT_DATABASE, require_database
from protab.errors import InputError, SpecError
from protab.request import schema
from protab.request.loaders import check_decimals, load_magnitude, load_ptable, load_rules
from protab.vocabulary.include import read_with_includes
from protab.vocabulary.label_files import check_label_columns, resolve_sections

if TYPE_CHECKING:  # pragma: no cover
    from protab.session import Session

#: what the suppressed tables of one source must share (their cells are built as one table,
#: protab.session.suppress.linked_spec), the kind of value first (a sums table takes its primary
#: cells from [rules], a count table from min_frequency: that is the conflict)
LINKED_KEYS = ("sums", "weight", "freq", "null_sums", "null_code", "drop_empty", "min_frequency", "protect_zeros",
               "direct_disclosure", "coalition", "k_disclosure", "suppression_method", "suppression_cost",
               "time_limit")
#: the keys of the attribute-disclosure rules (methods §6.4), for counts suppressed
DISCLOSURE_KEYS = ("direct_disclosure", "coalition", "k_disclosure")
#: the keys whose values a refusal shows (the thresholds are not shown)
_SHOWN = ("sums", "weight", "freq", "null_sums", "null_code", "drop_empty")
OWN_FOLDER = ("outputs are swapped in as a whole folder, so give them a folder of their own "
              "(e.g. output = \"protab_output\")")
_PUBLISH_RESERVED = ("protab_published", "protab_catalog", "protab_run")
_FILE_KEYS = ("file", "hrc", "parent_child", "ssb_frame", "seed_file", "labels_file", "sdmx")
_VIEW_FILE = re.compile(r"'((?:[^']|'')+)'")
_FILE_SUFFIX = re.compile(r"(\.(parquet|csv|tsv|json|ndjson|txt)(\.gz|\.zst)?|[*?\[].*)$", re.IGNORECASE)


def read_request(path: Path) -> dict[str, Any]:
    """A protect request file, read and checked against its schema."""
    if path.is_dir():
        raise SpecError(f"the request {str(path)!r} is a folder, not a TOML file")
    cfg = read_with_includes(path, "protect")
    schema.check(cfg, schema.PROTECT)
    resolve_sections(cfg, "hierarchies", path, f"request {str(path)!r}")
    check_label_columns(cfg, f"request {str(path)!r}")
    return cfg


def database_path(path: Path, cfg: dict[str, Any], database: str | None) -> str:
    """The microdata database of a request: ``--db``, else its ``database`` (relative to the
    request file), else the default file beside it."""
    if database is not None:
        return database
    db = cfg.get("database", DEFAULT_DATABASE)
    return db if os.path.isabs(db) or db == ":memory:" else str(path.parent / db)


def check_names(names: list[str]) -> None:
    """Table names are output file names: plain and distinct."""
    for n in names:
        if "/" in n or "\\" in n or n.startswith("."):
            raise SpecError(f"request: table name {n!r} is used as the output file name; use a plain name "
                            "(no path separators, not starting with a dot)")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SpecError(f"request: the table names {dup} appear more than once (they name the output files)")


def check_publish_names(names: list[str]) -> None:
    """Table names of a published database: plain file names (as for protect), none of the names
    publish gives its own catalogue, and distinct without regard to case (DuckDB's names are not
    case-sensitive)."""
    check_names(names)
    for n in names:
        if n.lower() in _PUBLISH_RESERVED:
            raise SpecError(f"request: table name {n!r} is taken: a published database names its catalogue "
                            f"{', '.join(_PUBLISH_RESERVED)}; rename the table")
    lowered = [n.lower() for n in names]
    clash = sorted({n for n in names if lowered.count(n.lower()) > 1})
    if clash:
        raise SpecError(f"request: the table names {clash} differ only in case; a DuckDB database takes them as "
                        "one name, so rename one of them")


def request_inputs(path: Path, cfg: dict[str, Any], db: str) -> list[tuple[str, str]]:
    """What no output of a request may replace, as (protected form, label): the microdata database
    and its write-ahead log, the request file, every file the request names (p-tables,
    hierarchies, seeds) and the files the database's views read (``protab register``)."""
    from protab._io import database_files, protected_form

    found = [(p, f"the microdata database {db!r}") for p in database_files(db)]
    found.append((protected_form(str(path)), f"the request file {str(path)!r}"))

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k in _FILE_KEYS and isinstance(v, str):
                    found.append((protected_form(str(path.parent / v)), f"the file of {where}{k} ({v!r})"))
                else:
                    walk(v, f"{where}{k}.")
        elif isinstance(node, list):
            for k, v in enumerate(node):
                if where.endswith("labels_file.") and isinstance(v, str):  # labels_file = ["a.csv", …]
                    found.append((protected_form(str(path.parent / v)), f"the file of {where[:-1]}[{k}] ({v!r})"))
                walk(v, f"{where[:-1]}[{k}].")

    walk(cfg, "")
    return found + [(protected_form(f), f"the file {f!r} that a view of {db!r} reads") for f in view_files(db)]


def view_files(db: str) -> list[str]:
    """The files the views of a database read (``protab register`` makes views over files): every
    quoted name in a view's SQL that looks like a data file or a glob."""
    import duckdb

    from protab.engines import DuckDBEngine

    if db == ":memory:" or not Path(db).is_file():
        return []
    try:
        eng = DuckDBEngine(duckdb.connect(db, read_only=True))
    except duckdb.Error:  # open elsewhere, or not a database: the run itself will say so
        return []
    try:
        texts = [r[0] for r in eng.rows("SELECT sql FROM duckdb_views() WHERE NOT internal AND NOT temporary")]
    finally:
        eng.close()
    names = {m.replace("''", "'") for t in texts for m in _VIEW_FILE.findall(t or "")}
    return sorted(n for n in names if _FILE_SUFFIX.search(n))


def check_request(path: Path, cfg: dict[str, Any], db: str, engine: dict[str, Any] | None) -> dict[str, Any]:
    """Every check of a request that needs no table built; the p-table, magnitude and rules.
    ``engine``: the Spark or PostgreSQL options (with ``keys`` given, no DuckDB database is needed)."""
    base, tables = path.parent, cfg["tables"]
    unused = sorted(set(cfg.get("hierarchies", {})) - {d for t in tables for d in t["dims"]})
    if unused:
        raise SpecError(f"request: [hierarchies.{unused[0]}] is not a dimension of any table (dims of the "
                        "[[tables]] entries); remove it or fix the name")
    if engine is None or engine["keys"] is None:
        require_database(db, "paths in a request file are relative to the file; ")
    check_methods(tables, cfg)
    ckm = [t for t in tables if t.get("method", "ckm") == "ckm"]
    with_sums = [t["name"] for t in ckm if t.get("sums")]
    if with_sums and "magnitude" not in cfg:
        raise SpecError(
            f"request: table {with_sums[0]!r} has sums, which are published only perturbed: add a "
            "[magnitude] section (the cell key method for magnitudes), or remove sums"
        )
    if "magnitude" in cfg and not with_sums:
        raise SpecError("request: [magnitude] applies to cell-key tables with sums; no such table")
    if "rules" in cfg and not any(t.get("sums") for t in tables):
        raise SpecError("request: [rules] apply to tables with sums; no table has sums")
    if with_sums:
        check_decimals(cfg["magnitude"], [c for t in ckm for c in t.get("sums", ())], "request: [magnitude] decimals")
    return {"ptable": load_ptable(cfg["ptable"], base) if ckm else None,
            "magnitude": load_magnitude(cfg["magnitude"], base) if with_sums else None,
            "rules": load_rules(cfg["rules"]) if "rules" in cfg else None}


def check_methods(tables: list[dict[str, Any]], cfg: dict[str, Any]) -> None:
    """The keys of each table fit its method (cell key method or cell suppression); the tables
    of one source share one method, and the suppressed ones agree on what is suppressed."""
    for t in tables:
        _check_method_keys(t, cfg)
    by_source: dict[str, set[str]] = {}
    for t in tables:
        by_source.setdefault(t["source"], set()).add(t.get("method", "ckm"))
    mixed = sorted(src for src, methods in by_source.items() if len(methods) > 1)
    if mixed:
        raise SpecError(
            f"request: source {mixed[0]!r} has tables protected by the cell key method and tables "
            "suppressed: the suppressed ones publish exact values of cells the others perturb, which "
            "gives their noise away; protect all tables of one source by the same method"
        )
    for src in by_source:
        _check_linked([t for t in tables if t["source"] == src and t.get("method", "ckm") == "suppression"])
    if "ptable" not in cfg and any(t.get("method", "ckm") == "ckm" for t in tables):
        raise SpecError("request: needs a [ptable] section for the cell key method (tables without "
                        "method = \"suppression\")")


def _check_method_keys(t: dict[str, Any], cfg: dict[str, Any]) -> None:
    """The keys of one table fit its method."""
    name = t["name"]
    if t.get("method", "ckm") != "suppression":
        for key in ("min_frequency", "protect_zeros", "freq", *DISCLOSURE_KEYS, "suppression_method",
                    "suppression_cost", "time_limit"):
            if key in t:
                raise SpecError(f"request: table {name!r}: {key} belongs to method = \"suppression\"")
        return
    if "threshold" in t:
        raise SpecError(f"request: table {name!r}: threshold blanks perturbed counts; with "
                        "method = \"suppression\" use min_frequency")
    if t.get("sums") and any(k in t for k in DISCLOSURE_KEYS):
        raise SpecError(f"request: table {name!r}: {', '.join(k for k in DISCLOSURE_KEYS if k in t)} "
                        "judge counts; a table with sums takes its primary cells from [rules]")
    if t.get("sums"):
        if "rules" not in cfg:
            raise SpecError(f"request: table {name!r} suppresses cells of sums: add a [rules] section")
        if "min_frequency" in t:
            raise SpecError(f"request: table {name!r}: with sums the primary cells come from [rules] "
                            "(min_frequency goes there)")
    elif "min_frequency" not in t and not t.get("direct_disclosure") and "k_disclosure" not in t:
        raise SpecError(f"request: table {name!r} (method = \"suppression\") needs min_frequency (counts "
                        "from 1 to min_frequency - 1 are suppressed), direct_disclosure or k_disclosure")


def _check_linked(group: list[dict[str, Any]]) -> None:
    """The suppressed tables of one source are suppressed together (linked: a common cell gets one
    decision), so they must agree on what is suppressed and how: name the first key they differ on."""
    if not group:
        return
    defaults = {"sums": [], "null_sums": "error", "protect_zeros": False, "drop_empty": False, "coalition": 1,
                "direct_disclosure": False}
    for key in LINKED_KEYS:
        def value(t: dict[str, Any], key: str = key) -> str:
            return repr(t.get(key, defaults.get(key)))

        a = group[0]
        b = next((t for t in group if value(t) != value(a)), None)
        if b is not None:
            what = (" (a table of counts and a table of sums cannot be suppressed together: put them in "
                    "separate requests, or give both the same sums)" if key == "sums" else "")
            shown = (f": table {a['name']!r} has {_shown(a.get(key, defaults.get(key)))}, "
                     f"table {b['name']!r} has {_shown(b.get(key, defaults.get(key)))}"
                     if key in _SHOWN else  # thresholds are not shown
                     f" (tables {a['name']!r} and {b['name']!r} differ)")
            raise SpecError(
                f"request: the suppressed tables of source {a['source']!r} are suppressed together (linked: a "
                f"common cell gets one decision), so they must agree on {key}{shown}{what}"
            )


def _shown(value: Any) -> str:
    """A key's value as the request writes it (a boolean as TOML's true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "none" if value is None or value == [] else repr(value)


def check_sources(s: Session, tables: list[dict[str, Any]], db: str) -> None:
    """Every table's source and columns exist (a catalog look-up, before any table is built)."""
    known = s.tables()
    for t in tables:
        if t["source"] not in known:
            raise InputError(
                f"request: table {t['name']!r}: the database {db!r} has no table {t['source']!r} "
                f"(tables: {', '.join(known) or 'none'}); register it with `protab register`"
            )
        cols = s.columns(t["source"])
        wanted = [("dims", d) for d in t["dims"]] + ([("weight", t["weight"])] if "weight" in t else []) + [
            ("sums", v) for v in t.get("sums", [])] + ([("freq", t["freq"])] if "freq" in t else [])
        for key, c in wanted:
            if c not in cols:
                raise InputError(
                    f"request: table {t['name']!r}: {key} names {c!r}, which is not a column of "
                    f"{t['source']!r} (columns: {', '.join(cols)})"
                )
