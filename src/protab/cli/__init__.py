"""The ``protab`` command (:func:`main`, parser :func:`build_parser` in :mod:`.entry`), each
command in its own module: demo (:mod:`.demo_census`), tables (:mod:`.database_tables`), macros,
register, keys (:mod:`.record_keys`), ptable (:mod:`.ptable_files`), protect and publish
(:mod:`.protect_request`), report (:mod:`.report_request`); serve and serve-token come from
:mod:`protab.serve.commands`."""

from protab.cli.database_tables import list_tables
from protab.cli.demo_census import DEMO_TABLES, demo
from protab.cli.entry import build_parser, main
from protab.cli.macros import macro_path
from protab.cli.options import DEFAULT_DATABASE, DEFAULT_OUTPUT, FORMATS
from protab.cli.protect_request import protect, publish
from protab.cli.ptable_files import read_ptable, show_ptable

__all__ = ["DEFAULT_DATABASE", "DEFAULT_OUTPUT", "DEMO_TABLES", "build_parser", "FORMATS", "demo", "list_tables",
           "macro_path", "main", "protect", "publish", "read_ptable", "show_ptable"]
