"""The shared vocabulary of protab's TOML fronts: the sections and keys that a ``protab protect``
request, a programme, the service's serve.toml and a ``protab report`` request all read the same
way (same key, same type, same default), each front's schema being built from these pieces
(docs/vocabulary.md is their reference).

The pieces: sources (``database``, ``source``, ``output``, ``formats``), classifications
(:data:`HIERARCHY`, and the codes of :class:`Codes`), measures (:data:`MAGNITUDE`, :data:`RULES`)
and protection (:data:`PTABLE`, ``threshold``, :data:`SWAP`, ``null_code``). :data:`SHARED_KEYS`
says which top-level keys each front takes from an included file (protab.vocabulary.include).
"""

from __future__ import annotations

from typing import Any

from protab.errors import SpecError
from protab.vocabulary.label_files import LabelsFile
from protab.vocabulary.labels import Labels, Language, Names
from protab.vocabulary.types import AnyOf, Bool, Dict, Int, List, Num, Str, Table, Type, fail

#: a list of distinct names (columns, dimensions)
NAMES = List(Str(), unique=True)
_NAMES = NAMES

# -- sources ----------------------------------------------------------------------------------
#: the microdata (a DuckDB file, relative to the file that names it; ``protab.duckdb`` beside it by default)
DATABASE = Str()
DEFAULT_DATABASE = "protab.duckdb"
#: the table of records a table (or a programme) is computed from
SOURCE = Str()
#: the output folder
OUTPUT = Str()
#: the output formats (default: csv and parquet)
FORMATS = List(Str(choices=("csv", "parquet", "sdmx-csv", "sdmx-structure", "json-stat")), unique=True)
#: the code of a category's margin (totals); SDMX outputs write it as ``_T``
DEFAULT_TOTAL = "Total"

# -- protection -------------------------------------------------------------------------------
#: blank perturbed counts below this (default 0: none)
THRESHOLD = Num(0)
#: NULL codes of a table's dimensions published as this (declared) code
NULL_CODE = Str()
#: what a sum over NULL values of a measure is: an error (the default), zero, or the record left out
NULL_SUMS = Str(choices=("error", "zero", "omit"))

PTABLE = Table(
    {
        "file": Str(),
        "format": Str(choices=("auto", "ptable", "tauargus", "ons")),
        "maximum_entropy": Table(
            {"D": Int(1), "V": Num(0), "js": Int(0), "pstay": Num(0, 1), "mono": Bool(),
             "optim": Int(1, 4), "infeasible": Str(choices=("error", "warn"))},
            required=("D", "V"),
        ),
    },
    one_of=("file", "maximum_entropy"),
    doc="file = '…' or maximum_entropy = { D = …, V = … }",
)


# -- classifications ---------------------------------------------------------------------------
#: the languages whose label columns the CSV and Parquet tables of protect and a programme, and
#: publish's tables, get (``<dim>_label_<lang>``)
LABEL_COLUMNS = List(Language(), unique=True)
HIERARCHY = Table(
    {
        "columns": _NAMES,
        "code_lengths": List(Int(1)),
        "hrc": Str(),
        "parent_child": Str(),
        "ssb_frame": Str(),
        "grid": List(Str(choices=("100m", "1km", "10km", "100km"))),
        "grid_form": Str(choices=("short", "long")),
        "root": Str(),
        "labels": Labels(),
        "labels_file": LabelsFile(),
        "name": Names(),
    },
    one_of=("columns", "code_lengths", "hrc", "parent_child", "ssb_frame", "grid"),
    doc="columns, code_lengths, hrc, parent_child, ssb_frame or grid",
)



def is_code(x: Any) -> bool:
    """A code as written in a TOML file: a string or a whole number (not a boolean, not a float)."""
    return isinstance(x, str) or (isinstance(x, int) and not isinstance(x, bool))


def code_texts(codes: list[Any]) -> list[str]:
    """The codes of a checked ``codes`` list as text: a whole number is its decimal text."""
    return [str(c) for c in codes]


class Codes(Type):
    """``codes = [...]``: codes as strings or whole numbers, a whole number meaning its text
    (``[1, 2]`` is ``["1", "2"]``) on every front (a programme's classification, a dimension's
    inline list in serve.toml); floats and booleans are refused, since ``1.0`` or ``true`` has no
    one text that the records would hold."""

    name = "a list of codes (strings or whole numbers)"

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, list) or not value or not all(is_code(x) for x in value):
            raise fail(path, self.name, value)
        for k, x in enumerate(value):
            if isinstance(x, str):
                Str().check(x, f"{path}[{k}]")
        texts = code_texts(value)
        twice = next((c for k, c in enumerate(texts) if c in texts[:k]), None)
        if twice is not None:
            raise SpecError(f"request: {path} names {twice!r} more than once (a whole number is its text)")


#: a classification of a programme: a hierarchy as [hierarchies.…] reads it, or a flat list of codes
CLASSIFICATION = Table(
    {**HIERARCHY.keys, "flat": Bool(), "codes": Codes(), "levels": NAMES},
    one_of=(*HIERARCHY.one_of, "flat", "codes"),
    doc="columns, code_lengths, hrc, parent_child, ssb_frame, grid, codes or flat = true; levels names them",
)

# -- measures ---------------------------------------------------------------------------------
NUM_PTABLE = Table(
    {
        "file": Str(),
        "format": Str(choices=("auto", "r", "argus")),
        "type": Str(choices=("all", "even", "odd", "small_cells")),
        "maximum_entropy": Table(
            {"D": Int(1), "V": Num(0), "step": Int(1), "icat": List(Int(1)), "pstay": Num(0, 1),
             "mono": Bool(), "optim": Int(1, 4), "infeasible": Str(choices=("error", "warn"))},
            required=("D", "V", "icat"),
        ),
    },
    one_of=("file", "maximum_entropy"),
    doc="file = '…' or maximum_entropy = { D = …, V = …, step = …, icat = […] }",
)

MAGNITUDE = Table(
    {
        "ptable": NUM_PTABLE,
        "even": NUM_PTABLE,
        "odd": NUM_PTABLE,
        "small_cells": NUM_PTABLE,
        "variant": Str(choices=("top_contr", "mean", "range", "sum")),
        "top_k": Int(1, 6),
        "fp": Num(0),
        "p": AnyOf([Num(0, 1), List(Num(0, 1))]),
        "q": Num(1),
        "epsilon": List(Num(0, 1)),
        "mu_c": Num(0),
        "same_key": Bool(),
        "zero_keys": Bool(),
        "decimals": AnyOf([Int(0, 8), Dict(Int(0, 8))]),
    },
    doc="ptable (or even and odd), small_cells, variant, top_k, fp, p, q, epsilon, mu_c, same_key, zero_keys, "
        "decimals",
)

RULES = Table(
    {
        "min_frequency": Int(1),
        "dominance": List(List(Num(0))),
        "p_percent": Num(0, 100),
        "pq": List(Num(0)),
        "zero": Bool(),
        "convention": Str(choices=("gauss", "argus")),
        "weights": Str(choices=("default", "tauargus")),
        "holding": Str(),
    },
)

SWAP = Table(
    {
        "source": Str(),
        "out": Str(),
        "log": Str(),
        "replace": Bool(),
        "seed_env": Str(),
        "seed_file": Str(),
        "household": Str(),
        "geography": NAMES,
        "risk_variables": NAMES,
        "similar": List(List(Str(), unique=True, nonempty=False)),  # [] (a profile of no column): any household
        "swap_rate": Num(0, 1),
        "max_swap_rate": Num(0, 1),
        "k_anonymity": Int(0),
        "carry_along": NAMES,
    },
    required=("source", "out", "household", "geography", "risk_variables", "swap_rate"),
    one_of=("seed_env", "seed_file"),
    doc="seed_env = 'VAR' or seed_file = 'path' (the swap seed is never in the request itself)",
)



# -- the fronts -------------------------------------------------------------------------------
#: how each front is called in messages
FRONT_NAMES = {"protect": "a protect request", "programme": "a programme", "serve": "serve.toml",
               "report": "a report request"}
#: the top-level keys each front takes from an included file (include = ["shared.toml"])
SHARED_KEYS: dict[str, tuple[str, ...]] = {
    "protect": ("database", "output", "formats", "ptable", "magnitude", "rules", "hierarchies", "swap"),
    "programme": ("database", "output", "formats", "source", "threshold", "ptable", "swap", "classifications"),
    "serve": ("database", "ptable", "threshold"),
    "report": ("database", "output", "hierarchies"),
}
#: sections of named entries, merged entry by entry from several files
NAMED_SECTIONS = ("hierarchies", "classifications")
#: the top-level keys only one front reads (they stay in its own file)
OWN_KEYS: dict[str, tuple[str, ...]] = {
    "protect": ("tables", "label_columns"),
    "programme": ("hypercubes", "max_cells", "label_columns"),
    "serve": ("datasets", "users", "audit_log", "tokens_file", "rules_file"),
    "report": ("original", "protected", "measures", "dims", "total", "title"),
}


def front_of(key: str, exclude: str) -> str | None:
    """A front (other than ``exclude``) that reads the top-level ``key``, or None."""
    for front in FRONT_NAMES:
        if front != exclude and (key in SHARED_KEYS[front] or key in OWN_KEYS[front]):
            return front
    return None
