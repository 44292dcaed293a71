"""psql's ``\\d`` on the PostgreSQL front: the catalogue queries psql sends, answered from the
catalogue of the user's rights (the datasets as tables of schema ``public``, a dataset's
dimensions as ``text`` columns and its measures with the type ``sum()`` and ``avg()`` answer
them in, ``double precision``), never from the data.

psql describes relations by querying ``pg_catalog`` (PostgreSQL's ``describe.c``): ``\\d`` and
``\\dt`` list them (``pg_class`` joined to ``pg_namespace``), ``\\d NAME`` looks the name up
(its oid), asks for the relation's kind and flags, for its columns (``pg_attribute``) and then
for its footers (indexes, policies, statistics, publications, inheritance ...). Those queries
are recognised by their text — they are psql's own, not SQL to run — and answered with the
columns psql reads; the footers are answered with no rows (a dataset has none of them). Any
other query of ``pg_catalog`` or ``information_schema`` is refused with a message that says
what is answered (the validator would call it a join). Nothing here runs SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from protab.serve.query import QueryRefused

#: oids of the datasets, as psql sees them: stable, in the order of the configured names
FIRST_OID = 16384
TEXT = 25
_SPACE = re.compile(r"\s+")
_CATALOG = re.compile(r"\b(pg_catalog|information_schema)\s*\.|\bpg_(class|namespace|attribute|type|tables|"
                      r"settings|database|roles|proc|index|constraint)\b", re.I)
_PATTERN = re.compile(r"(c\.relname|n\.nspname) OPERATOR\(pg_catalog\.~\) '((?:[^']|'')*)'")
_RELKIND = re.compile(r"c\.relkind IN \(([^)]*)\)")
_OID = re.compile(r"(?:c\.oid|a\.attrelid|attrelid|inhparent|inhrelid|polrelid|stxrelid|indrelid|conrelid|"
                  r"confrelid|tgrelid|ev_class|prrelid|pr\.prrelid|i\.inhrelid|i\.inhparent|c\.reloftype) = '(\d+)'")
_ALIAS = re.compile(r'\bas "([^"]+)"\s*$', re.I)
#: the footers psql asks for after the columns: a dataset has none, so no rows
_FOOTERS = ("pg_catalog.pg_index", "pg_catalog.pg_constraint", "pg_catalog.pg_policy", "pg_catalog.pg_statistic_ext",
            "pg_catalog.pg_publication", "pg_catalog.pg_inherits", "pg_catalog.pg_trigger", "pg_catalog.pg_rewrite",
            "pg_catalog.pg_partitioned_table", "pg_catalog.pg_foreign_table")
REFUSED = ("catalogue queries (pg_catalog, information_schema) are answered only as psql's \\d, \\dt and "
           "\\d <dataset> ask them")
ADVICE = ("use \\d or \\d <dataset> in psql, or GET /v1/catalog (the datasets, dimensions, codes and measures "
          "you may use); then query a dataset in the allowed form")


@dataclass
class Relation:
    """A dataset as psql sees it: oid, name, description, and (name, type) columns."""

    oid: int
    name: str
    description: str
    columns: list[tuple[str, str]]


@dataclass
class Answer:
    """Column names (all text) and rows of a catalogue query's answer."""

    columns: list[str]
    rows: list[tuple[Any, ...]]


def relations(broker: Any, user: Any) -> list[Relation]:
    """The datasets ``user`` may query, with the dimensions and measures of their rights."""
    rights = broker.user_rights(user)
    out = []
    for k, name in enumerate(sorted(broker.datasets)):
        if name not in rights:
            continue
        ds, r = broker.datasets[name], rights[name]
        cols = [(d, "text") for d in ds.conf.dims if d in r.dims]
        if ds.magnitude is not None:
            cols += [(m, "double precision") for m in ds.conf.measures if m in r.measures]
        out.append(Relation(FIRST_OID + k, name, ds.conf.description, cols))
    return out


def _normal(sql: str) -> str:
    s = _SPACE.sub(" ", sql).strip()
    while s.endswith(";"):
        s = s[:-1].rstrip()
    return s


def _select_list(sql: str) -> list[str]:
    """The items between SELECT and the first FROM at depth 0 (quotes and parentheses respected)."""
    body = sql[len("SELECT "):] if sql.upper().startswith("SELECT ") else sql
    items, depth, quote, start, k = [], 0, "", 0, 0
    while k < len(body):
        ch = body[k]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and ch == ",":
            items.append(body[start:k].strip())
            start = k + 1
        elif depth == 0 and body[k:k + 6].upper() == " FROM ":
            items.append(body[start:k].strip())
            return items
        k += 1
    items.append(body[start:].strip())
    return items


def _matcher(pattern: str) -> re.Pattern[str] | None:
    """psql's POSIX pattern for a name (``^(persons)$``, ``^(pers.*)$``, escaped literals) as a
    Python pattern of literals, ``.`` and ``.*`` only; None for anything else (nothing matches)."""
    text = pattern.replace("''", "'")
    if not (text.startswith("^(") and text.endswith(")$")):
        return None
    text, out, k = text[2:-2], [], 0
    while k < len(text):
        ch = text[k]
        if ch == "\\" and k + 1 < len(text):
            out.append(re.escape(text[k + 1]))
            k += 2
            continue
        if text.startswith(".*", k):
            out.append(".*")
            k += 2
            continue
        if ch == ".":
            out.append(".")
        elif ch in "[](){}|+?^$*":
            return None
        else:
            out.append(re.escape(ch))
        k += 1
    return re.compile("".join(out), re.S)


def _wanted(sql: str, rels: list[Relation]) -> list[Relation]:
    """The relations a query's WHERE keeps: its name and schema patterns, relkinds and oids."""
    kept = rels
    for column, pattern in _PATTERN.findall(sql):
        m = _matcher(pattern)
        if column == "n.nspname":
            kept = kept if m is not None and m.fullmatch("public") else []
        else:
            kept = [r for r in kept if m is not None and m.fullmatch(r.name)]
    kinds = _RELKIND.search(sql)
    if kinds and "'r'" not in kinds.group(1):
        kept = []
    oids = {int(o) for o in _OID.findall(sql)}
    if oids:
        kept = [r for r in kept if r.oid in oids]
    return kept


def _listing(sql: str, rels: list[Relation]) -> Answer:
    """\\d and \\dt (also with +): Schema, Name, Type, Owner (and what \\d+ adds)."""
    values = {"Schema": lambda r: "public", "Name": lambda r: r.name, "Type": lambda r: "table",
              "Owner": lambda r: "protab", "Persistence": lambda r: "permanent", "Access method": lambda r: None,
              "Size": lambda r: None, "Description": lambda r: r.description or None}
    names = [m.group(1) if (m := _ALIAS.search(item)) else item for item in _select_list(sql)]
    rows = [tuple(values.get(n, lambda r: None)(r) for n in names) for r in sorted(_wanted(sql, rels), key=lambda r: r.name)]
    return Answer(names, rows)


def _by_name(sql: str, rels: list[Relation]) -> Answer:
    """\\d NAME, its first query: the relations of that name (oid, schema, name)."""
    return Answer(["oid", "nspname", "relname"],
                  [(str(r.oid), "public", r.name) for r in sorted(_wanted(sql, rels), key=lambda r: r.name)])


#: the flags psql asks of a relation (\\d NAME, its second query), by the item's text
_FLAGS = {"c.relchecks": "0", "c.relkind": "r", "c.relhasindex": "f", "c.relhasrules": "f", "c.relhastriggers": "f",
          "c.relrowsecurity": "f", "c.relforcerowsecurity": "f", "false AS relhasoids": "f", "c.relispartition": "f",
          "c.reltablespace": "0", "c.relpersistence": "p", "c.relreplident": "d", "am.amname": None}


def _flags(sql: str, rels: list[Relation]) -> Answer:
    items = _select_list(sql)
    rows = [tuple(_FLAGS.get(item, "" if "reloptions" in item or "reloftype" in item else None) for item in items)
            for r in _wanted(sql, rels)]
    return Answer([f"c{k}" for k in range(len(items))], rows)


def _columns(sql: str, rels: list[Relation]) -> Answer:
    """\\d NAME, its columns: name and type; no default, collation, identity or generation."""
    items = _select_list(sql)
    rows = []
    for r in _wanted(sql, rels):
        for name, kind in r.columns:
            row: list[str | None] = []
            for item in items:
                if item == "a.attname":
                    row.append(name)
                elif item.startswith("pg_catalog.format_type("):
                    row.append(kind)
                elif item == "a.attnotnull":
                    row.append("f")
                elif item in ("a.attidentity", "a.attgenerated") or item.startswith("a.attcompression"):
                    row.append("")
                elif item == "a.attstorage":
                    row.append("x" if kind == "text" else "p")  # extended text, plain numbers
                else:
                    row.append(None)
            rows.append(tuple(row))
    return Answer([f"c{k}" for k in range(len(items))], rows)


def answer(sql: str, broker: Any, user: Any) -> Answer | None:
    """The answer of a catalogue query psql sends, from the catalogue of ``user``'s rights; None
    for a query that is not a catalogue query (the validator judges it); QueryRefused (rule
    ``catalog``) for any other query of the catalogue."""
    if not _CATALOG.search(sql):
        return None
    s = _normal(sql)
    rels = relations(broker, user)
    if "FROM pg_catalog.pg_class c" in s and 'as "Name"' in s and "c.relkind" in s:
        return _listing(s, rels)
    if s.startswith("SELECT c.oid, n.nspname, c.relname FROM pg_catalog.pg_class c"):
        return _by_name(s, rels)
    if s.startswith("SELECT c.relchecks, c.relkind,") and "FROM pg_catalog.pg_class c" in s:
        return _flags(s, rels)
    if s.startswith("SELECT a.attname,") and "FROM pg_catalog.pg_attribute a" in s:
        return _columns(s, rels)
    if s.startswith("SELECT") and any(f in s for f in _FOOTERS) and _OID.search(s):
        return Answer([f"c{k}" for k in range(len(_select_list(s)))], [])
    raise QueryRefused(f"{REFUSED}: not {s[:80]!r}{'…' if len(s) > 80 else ''}", rule="catalog", advice=ADVICE)
