"""``protab keys``: a record-key column added to a table, a keyed hash of an id column with a
secret seed (from an environment variable or a file, never the command line), or existing keys."""

from __future__ import annotations

import argparse
from typing import Any

from protab.cli.options import DB_HELP, DEFAULT_DATABASE, require_database, seed_of
from protab.errors import InputError


def add_parser(sub: Any) -> None:
    """``protab keys``."""
    k = sub.add_parser("keys", help="add record keys to a table",
                       description="Add a record-key column: a keyed hash of an id column with a secret seed "
                                   "(from an environment variable or a file, never the command line), or "
                                   "existing keys from a column.")
    k.add_argument("table", help="the table to key")
    k.add_argument("--db", default=DEFAULT_DATABASE, help=DB_HELP)
    k.add_argument("--id", dest="id_column", help="identifier column to hash with the seed")
    k.add_argument("--seed-env", help="name of the environment variable holding the secret seed")
    k.add_argument("--seed-file", help="file holding the secret seed (first line, trimmed)")
    k.add_argument("--record-key-column", help="use existing keys from this column instead of hashing")
    k.add_argument("--decimals", type=int, help="existing keys are decimals in [0, 1] with this many digits")
    k.add_argument("--bits", type=int, default=32, help="keys below 2^bits (default 32; ONS style: 8)")
    k.add_argument("--name", default="rkey", help="name of the key column (default rkey)")
    k.add_argument("--replace", action="store_true", help="overwrite an existing record-key column (never data)")
    k.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> None:
    from protab.session import Session

    if args.record_key_column and (args.id_column or args.seed_env or args.seed_file):
        raise InputError("give either --record-key-column (existing keys) or --id with a seed (new keys), "
                         "not both")
    if args.decimals is not None and not args.record_key_column:
        raise InputError("--decimals describes existing keys: use it with --record-key-column")
    seed = None if args.record_key_column else seed_of(args)
    require_database(args.db)
    with Session(args.db) as s:
        if args.record_key_column:
            s.add_record_keys(args.table, record_key_column=args.record_key_column,
                              decimals=args.decimals, bits=args.bits, name=args.name,
                              replace=args.replace)
        else:
            s.add_record_keys(args.table, id_column=args.id_column, seed=seed,
                              bits=args.bits, name=args.name, replace=args.replace)
    print(f"record keys added to {args.table} as column {args.name}")
