"""``protab macros``: where this installation's SQL macros (sql/protab.sql) are, for ``.read``
in the duckdb CLI from any folder."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    """``protab macros``."""
    m = sub.add_parser("macros", help="print the path of the SQL macros (ckm, record keys)",
                       description="Print where this installation's sql/protab.sql is, to load it in the "
                                   "duckdb CLI with .read from any folder.")
    m.add_argument("--read", action="store_true", help="print the whole .read line")
    m.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> None:
    print(f".read '{macro_path()}'" if args.read else macro_path())


def macro_path() -> Path:
    """Where the SQL macros (``protab.sql``) of this installation are, for ``.read`` in duckdb."""
    from importlib import resources

    try:
        res = resources.files("protab").joinpath("sql").joinpath("protab.sql")
        if res.is_file():
            return Path(str(res))
    except (FileNotFoundError, ModuleNotFoundError):  # pragma: no cover
        pass
    return Path(__file__).resolve().parents[3] / "sql" / "protab.sql"  # a source checkout
