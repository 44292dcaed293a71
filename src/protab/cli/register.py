"""``protab register``: a Parquet or CSV file, glob or table of the database available as a table."""

from __future__ import annotations

import argparse
from typing import Any

from protab.cli.options import DB_HELP, DEFAULT_DATABASE


def add_parser(sub: Any) -> None:
    """``protab register``."""
    r = sub.add_parser("register", help="register a Parquet/CSV file (or glob) as a table",
                       description="Make a Parquet or CSV file, glob or existing table available as NAME.")
    r.add_argument("name", help="the table name to register")
    r.add_argument("source", help="a .parquet/.csv path or glob, or the name of a table of the database")
    r.add_argument("--db", default=DEFAULT_DATABASE, help=DB_HELP)
    r.add_argument("--materialize", action="store_true",
                   help="copy the rows into the database (default: a view over the files)")
    r.add_argument("--replace", action="store_true", help="replace a table of that name")
    r.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> None:
    from protab.session import Session

    with Session(args.db) as s:
        s.register(args.name, args.source, materialize=args.materialize, replace=args.replace)
    print(f"registered {args.name} in {args.db}")
