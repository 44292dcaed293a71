"""The ``protab`` command: its parser, built from the parser of each command's module, and
:func:`main`, which runs the chosen command and turns protab errors into one line on stderr.

Secrets stay off the command line where it matters: record-key seeds are read from an
environment variable or a file (``--seed-env``, ``--seed-file``), and no command prints a
seed, a record key or a p-table parameter. Heavy libraries are imported only by the command
that needs them, so ``protab --help`` answers at once.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from protab._version import __version__
from protab.cli import (
    audit_command,
    database_tables,
    demo_census,
    macros,
    programme_command,
    protect_request,
    ptable_files,
    record_keys,
    register,
    report_request,
)
from protab.cli.words import cli_words, warn
from protab.errors import ProtabError
from protab.serve import commands as serve_commands  # argparse only: Starlette loads when the server starts


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; each sets ``run``, the function that runs it."""
    p = argparse.ArgumentParser(
        prog="protab", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Protected frequency and magnitude tables from microdata in DuckDB (cell key method, "
                    "cell suppression, record swapping, rounding).",
        epilog="Request formats: `protab protect --help` and `protab report --help`; more in README.md.\n"
               "Progress bars show on a terminal; PROTAB_PROGRESS=0 hides them, =1 forces them.",
    )
    p.add_argument("--version", action="version", version=f"protab {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    for command in (demo_census, database_tables, macros, register, record_keys, ptable_files):
        command.add_parser(sub)
    protect_request.add_parsers(sub)
    report_request.add_parser(sub)
    audit_command.add_parser(sub)
    programme_command.add_parser(sub)
    serve_commands.add_parsers(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``protab ARGS``: 0 when done, 2 for bad input, 1 for a failing disk, 130 when interrupted."""
    import warnings

    args = build_parser().parse_args(argv)
    shown = warnings.showwarning
    warnings.showwarning = warn
    try:
        args.run(args)
    except ProtabError as exc:
        print(f"protab: error: {cli_words(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:  # the disk, not the input: say what and where, without a traceback
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"protab: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("protab: interrupted (nothing half-written is left in the output folder)", file=sys.stderr)
        return 130
    finally:
        warnings.showwarning = shown
    return 0
