"""``protab tables``: what a database holds (tables and views, rows, columns, record keys,
whether a p-table is installed for ckm())."""

from __future__ import annotations

import argparse
from typing import Any

from protab.cli.options import DB_HELP, DEFAULT_DATABASE, require_database
from protab.errors import ProtabError


def add_parser(sub: Any) -> None:
    """``protab tables``."""
    t = sub.add_parser("tables", help="list what a database holds",
                       description="List the tables and views of a database: rows, columns, record-key "
                                   "column, and whether a p-table is installed for ckm().")
    t.add_argument("--db", default=DEFAULT_DATABASE, help=DB_HELP)
    t.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> None:
    print(list_tables(args.db))


def list_tables(database: str) -> str:
    """What a database holds: tables and views, rows, columns, record keys, installed p-table."""
    from protab.session import Session
    from protab.sqltools import quote_ident

    require_database(database)
    lines = [f"{'name':<32}{'kind':<7}{'rows':>14}{'columns':>9}  record key"]
    with Session(database, read_only=True, progress=False) as s:
        for name in s.tables():
            kind = s.engine.kind(name) or ""
            try:
                rows = s.engine.rows(f"SELECT count(*) FROM {quote_ident(name)}")[0][0]
                shown = f"{rows:,}"
            except Exception:  # a view over files that are gone
                shown = "unreadable"
            try:
                key = s.record_key(name)[0]
            except ProtabError:
                key = "-"
            lines.append(f"{name:<32}{kind:<7}{shown:>14}{len(s.columns(name)):>9}  {key}")
        installed = s.engine.rows("SELECT count(*) FROM protab_ptable")[0][0]
    if len(lines) == 1:
        lines.append("(no tables: add some with `protab register NAME SOURCE` or `protab demo`)")
    lines.append("p-table for ckm(): " + ("installed" if installed else "none (protab ptable install)"))
    return "\n".join(lines)
