"""The programme file of ``protab programme`` (TOML): its schema and the checks that need no
data. A programme is one source of records (optionally swapped first), one p-table, shared
classifications with named levels, and hypercubes: dimensions each at a classification and
level, a cell limit, and the tables published from them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protab.errors import SpecError
from protab.request import schema
from protab.request.schema import Dict, Int, List, Str, Table
from protab.vocabulary.include import read_with_includes
from protab.vocabulary.label_files import check_label_columns, resolve_sections
from protab.vocabulary.sections import (
    CLASSIFICATION,
    DATABASE,
    FORMATS,
    LABEL_COLUMNS,
    OUTPUT,
    SOURCE,
    THRESHOLD,
)

#: an SDMX identifier (IDType): hypercube and table names, which also name the output files
SDMX_ID = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
#: the default cell limit of a hypercube (the upper bound of the cells its tables publish)
DEFAULT_MAX_CELLS = 10_000_000

_NAMES = List(Str(), unique=True)

HYPERCUBE_TABLE = Table(
    {k: schema.PROTECT_TABLE.keys[k] for k in ("name", "dims", "formula", "weight", "drop_empty", "null_code")},
    required=("name",),
)

HYPERCUBE = Table(
    {"name": Str(), "dims": Dict(Str()), "max_cells": Int(1), "tables": List(HYPERCUBE_TABLE)},
    required=("name", "dims"),
)

PROGRAMME = Table(
    {
        "database": DATABASE,
        "output": OUTPUT,
        "formats": FORMATS,
        "label_columns": LABEL_COLUMNS,
        "source": SOURCE,
        "threshold": THRESHOLD,
        "max_cells": Int(1),
        "ptable": schema.PTABLE,
        "swap": schema.SWAP,
        "classifications": Dict(CLASSIFICATION),
        "hypercubes": List(HYPERCUBE),
    },
    required=("ptable", "classifications", "hypercubes"),
)


@dataclass(frozen=True)
class Dim:
    """A dimension of a hypercube: the records' column, its classification and the level asked
    (a level name or number as written; None: the finest level)."""

    variable: str
    classification: str
    level: str | None


@dataclass(frozen=True)
class CubeTable:
    """A table of a hypercube: some of its dimensions, and TableSpec options."""

    name: str
    dims: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Hypercube:
    """A hypercube: its dimensions, cell limit, tables, and its entry as written (for its hash)."""

    name: str
    dims: tuple[Dim, ...]
    max_cells: int
    tables: tuple[CubeTable, ...]
    entry: dict[str, Any]


def read_programme(path: Path) -> dict[str, Any]:
    """A programme file, read and checked against :data:`PROGRAMME`."""
    if path.is_dir():
        raise SpecError(f"the programme {str(path)!r} is a folder, not a TOML file")
    cfg = read_with_includes(path, "programme")
    try:
        schema.check(cfg, PROGRAMME)
    except SpecError as exc:
        raise SpecError(str(exc).replace("request: ", "programme: ", 1).replace("the request", "the programme")) from None
    resolve_sections(cfg, "classifications", path, f"programme {str(path)!r}")
    return cfg


def hypercubes(cfg: dict[str, Any]) -> list[Hypercube]:
    """The hypercubes of a checked programme, with every check that needs no data: ids, the
    classifications named, one classification per variable, the tables' dimensions."""
    out: list[Hypercube] = []
    seen: dict[str, tuple[str, str]] = {}  # variable -> (classification, hypercube)
    limit = cfg.get("max_cells", DEFAULT_MAX_CELLS)
    for k, entry in enumerate(cfg["hypercubes"]):
        name = entry["name"]
        _check_id(name, f"hypercubes[{k}].name")
        if any(h.name == name for h in out):
            raise SpecError(f"programme: two hypercubes are named {name!r}; names must be distinct")
        dims = tuple(_dim(cfg, name, var, text) for var, text in entry["dims"].items())
        if not dims:
            raise SpecError(f"programme: hypercube {name!r}: dims must name at least one variable")
        for d in dims:
            first = seen.setdefault(d.variable, (d.classification, name))
            if first[0] != d.classification:
                raise SpecError(
                    f"programme: hypercube {name!r}: variable {d.variable!r} is classified by "
                    f"{d.classification!r}, but hypercube {first[1]!r} classifies it by {first[0]!r}; "
                    "a variable has one classification in a programme (use a level to publish it coarser)"
                )
        tables = _tables(name, entry, [d.variable for d in dims])
        out.append(Hypercube(name, dims, entry.get("max_cells", limit), tables, entry))
    return out


def check_programme_label_columns(cfg: dict[str, Any], cubes: list[Hypercube], path: Path) -> None:
    """``label_columns`` asks only for languages that the labels of the classifications of its
    hypercubes have: protect's check (protab.vocabulary.label_files.check_label_columns), on the
    classifications as its hierarchies and the hypercubes' dimensions as its tables."""
    view = {"label_columns": cfg.get("label_columns"), "hierarchies": cfg["classifications"],
            "tables": [{"dims": [d.classification for d in c.dims]} for c in cubes]}
    try:
        check_label_columns(view, f"programme {str(path)!r}")
    except SpecError as exc:
        raise SpecError(str(exc).replace("no hierarchy of its tables", "no classification of its hypercubes", 1)
                        ) from None


def _check_id(name: str, key: str) -> None:
    if not SDMX_ID.fullmatch(name):
        raise SpecError(f"programme: {key} = {name!r} is not a valid id: use a letter followed by letters, "
                        "digits or underscores (SDMX ids; it names the output files)")


def _dim(cfg: dict[str, Any], cube: str, variable: str, text: str) -> Dim:
    """``"class"`` or ``"class:level"`` of a hypercube's dimension."""
    cls, _, level = text.partition(":")
    known = cfg["classifications"]
    if cls not in known:
        raise SpecError(
            f"programme: hypercube {cube!r}: dims.{variable} = {text!r} names the classification {cls!r}, "
            f"which is not declared (classifications: {', '.join(sorted(known)) or 'none'}); add "
            f"[classifications.{cls}] or fix the name"
        )
    if ":" in text and not level.strip():
        raise SpecError(f"programme: hypercube {cube!r}: dims.{variable} = {text!r} has an empty level; "
                        f"write {cls!r} for the finest level")
    columns = known[cls].get("columns")
    if columns and columns[-1] != variable:
        raise SpecError(
            f"programme: hypercube {cube!r}: dims.{variable} uses classification {cls!r}, whose finest "
            f"codes are the column {columns[-1]!r}: write {columns[-1]} = \"{text}\" (the level chooses "
            "how coarse it is published)"
        )
    return Dim(variable, cls, level or None)


def _tables(cube: str, entry: dict[str, Any], variables: list[str]) -> tuple[CubeTable, ...]:
    """The tables of a hypercube; without [[hypercubes.tables]] one table: the whole hypercube."""
    raw = entry.get("tables") or [{"name": cube}]
    out: list[CubeTable] = []
    for k, t in enumerate(raw):
        _check_id(t["name"], f"hypercube {cube!r}: tables[{k}].name")
        if any(u.name == t["name"] for u in out):
            raise SpecError(f"programme: hypercube {cube!r} has two tables named {t['name']!r}")
        dims = tuple(t.get("dims", variables))
        unknown = [d for d in dims if d not in variables]
        if unknown:
            raise SpecError(
                f"programme: hypercube {cube!r}: table {t['name']!r}: dims names {unknown[0]!r}, which is not a "
                f"dimension of the hypercube (dims: {', '.join(variables)})"
            )
        out.append(CubeTable(t["name"], dims, {k: v for k, v in t.items() if k not in ("name", "dims")}))
    return tuple(out)


def check_sources(cfg: dict[str, Any]) -> tuple[str, str]:
    """(the records the classifications are read from, the records the hypercubes read): the
    programme's source, or with [swap] its source and the swapped copy."""
    swap = cfg.get("swap")
    source = cfg.get("source")
    if swap is None:
        if source is None:
            raise SpecError("programme: needs source = \"TABLE\" (the records), or a [swap] section")
        return source, source
    if source is not None and source != swap["source"]:
        raise SpecError(f"programme: source = {source!r} but [swap] source = {swap['source']!r}: one programme "
                        "protects one copy of the records; give the same table (or leave source out)")
    return swap["source"], swap["out"]
