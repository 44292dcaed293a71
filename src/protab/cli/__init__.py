"""The ``protab`` command (:func:`main`); each command's work in its own module."""

from protab.cli.commands import (
    DEFAULT_DATABASE,
    DEFAULT_OUTPUT,
    build_parser,
    list_tables,
    macro_path,
    main,
    protect,
    publish,
    read_ptable,
    show_ptable,
)
from protab.cli.demo import DEMO_TABLES, FORMATS, demo

__all__ = ["DEFAULT_DATABASE", "DEFAULT_OUTPUT", "DEMO_TABLES", "build_parser", "FORMATS", "demo", "list_tables", "macro_path",
           "main", "protect", "publish", "read_ptable", "show_ptable"]
