"""``protab report``: a risk-utility report of protected tables from a TOML request file
(the format is the docstring of :mod:`protab.report`)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    """``protab report``."""
    rp = sub.add_parser("report", help="risk-utility report of protected tables (TOML request file)",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        description="Compare protected tables with the originals (trusted use): measures, "
                                    "an R-U map and noise plots as HTML/Markdown.",
                        epilog="The request format, with an example, is the docstring of protab.report:\n"
                               "  python -m pydoc protab.report")
    rp.add_argument("request", help="the TOML request file")
    rp.add_argument("--out", help="report folder (overrides the request's output)")
    rp.add_argument("--db", help="DuckDB file of the microdata (overrides the request's [original] database; "
                                 "only when [original] names a table)")
    rp.add_argument("--wait", action="store_true",
                    help="wait for another run writing the same report folder (default: refuse at once)")
    rp.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> None:
    from protab.report import run_request

    run_request(args.request, args.out, database=args.db, wait=args.wait)
