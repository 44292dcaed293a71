"""What several commands share: the default files, the output formats, the database a command
reads, and secret seeds (from an environment variable or a file, never the command line)."""

from __future__ import annotations

import argparse
from pathlib import Path

from protab.errors import InputError
from protab.request.swap_section import read_seed

#: The database file commands use without ``--db`` (the same as ``protab.DEFAULT_DATABASE``).
DEFAULT_DATABASE = "protab.duckdb"
DEFAULT_OUTPUT = "protab_output"
FORMATS = ("csv", "parquet")
#: every format a protect request may ask for (the default is FORMATS), and its file suffix
ALL_FORMATS = {"csv": ".csv", "parquet": ".parquet", "sdmx-csv": ".sdmx.csv", "sdmx-structure": ".structure.xml",
               "json-stat": ".stat.json"}
DB_HELP = f"the DuckDB database file (default {DEFAULT_DATABASE})"


def output_file(table: str, fmt: str) -> str:
    """The file name of table ``table`` in format ``fmt`` (e.g. ``t.sdmx.csv``)."""
    return table + ALL_FORMATS[fmt]


def require_database(db: str, hint: str = "") -> None:
    """Commands that read tables must not create an empty database file by mistake."""
    if db != ":memory:" and not Path(db).exists():
        raise InputError(
            f"the database {db!r} does not exist ({hint}create it with `protab register` or "
            "`protab demo`, or pass --db)"
        )
    if db != ":memory:" and Path(db).is_dir():
        raise InputError(f"the database {db!r} is a folder, not a DuckDB file")


def seed_of(args: argparse.Namespace) -> str:
    """The seed of ``--seed-env`` or ``--seed-file`` (exactly one of them)."""
    if args.seed_env and args.seed_file:
        raise InputError("give the seed once: --seed-env or --seed-file, not both")
    return read_seed(args.seed_env, args.seed_file, "give the secret seed with --seed-env VAR or --seed-file PATH")
