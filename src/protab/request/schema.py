"""Schemas of protab's request files, checked before anything runs.

A request (``protab protect``, ``protab report``) is TOML. Each schema says which keys a table
may hold and the type of each value (the types: :mod:`protab.vocabulary.types`; the sections
every front shares: :mod:`protab.vocabulary.sections`). :func:`check` refuses unknown keys
(naming the closest valid key), values of the wrong type (naming the key and the type
expected), missing required keys and values outside their allowed set, so that a misspelt
``wieght`` or a string ``"false"`` for a boolean never silently publishes a different table.
"""

from __future__ import annotations

from protab.vocabulary.sections import (
    DATABASE,
    FORMATS,
    HIERARCHY,
    LABEL_COLUMNS,
    MAGNITUDE,
    NAMES,
    NULL_CODE,
    NULL_SUMS,
    NUM_PTABLE,
    OUTPUT,
    PTABLE,
    RULES,
    SOURCE,
    SWAP,
    THRESHOLD,
)
from protab.vocabulary.types import AnyOf, Bool, Dict, Int, List, Num, Refused, Str, Table, Type, check, fail

__all__ = ["AnyOf", "Bool", "Dict", "HIERARCHY", "Int", "List", "MAGNITUDE", "NUM_PTABLE", "Num", "PROTECT",
           "PROTECT_TABLE", "PTABLE", "RULES", "Refused", "SWAP", "Str", "Table", "Type", "check", "fail"]

_NAMES = NAMES

PROTECT_TABLE = Table(
    {
        "name": Str(),
        "source": SOURCE,
        "dims": _NAMES,
        "formula": Str(),
        "weight": Str(),
        "drop_empty": Bool(),
        "null_code": NULL_CODE,
        "threshold": THRESHOLD,
        "margins": Bool(),
        "sums": _NAMES,
        "null_sums": NULL_SUMS,
        "method": Str(choices=("ckm", "suppression")),
        "min_frequency": Int(1),
        "protect_zeros": Bool(),
        "freq": Str(),
        "direct_disclosure": AnyOf([Bool(), _NAMES]),
        "coalition": Int(0),
        "k_disclosure": Int(1),
        "suppression_method": Str(choices=("gauss", "optimal", "modular")),
        "suppression_cost": Str(choices=("value", "frequency", "cells")),
        "time_limit": Num(0),
    },
    required=("name", "source", "dims"),
)


PROTECT = Table(
    {
        "database": DATABASE,
        "output": OUTPUT,
        "formats": FORMATS,
        "ptable": PTABLE,
        "magnitude": MAGNITUDE,
        "rules": RULES,
        "hierarchies": Dict(HIERARCHY),
        "label_columns": LABEL_COLUMNS,
        "swap": SWAP,
        "tables": List(PROTECT_TABLE),
    },
    required=("tables",),
)
