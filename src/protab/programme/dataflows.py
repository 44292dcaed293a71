"""A hypercube as one exchange dataset (docs/census.md, docs/exchange.md): its tables' cells
in one frame over all its dimensions, written as one SDMX-CSV 2.0 dataflow (and its SDMX-ML
structure message) or one JSON-stat 2.0 dataset named by the hypercube, as Eurostat's Census
Hub takes them.

A table without one of the hypercube's dimensions publishes that dimension's total, and so
does a table's level-0 code (its classification's root): both become the total code ``_T``.
Cells that several tables publish (a margin table's cells are also cells of the full table)
have one value in a programme, so they are kept once; a cell published with two different
values would be a defect of the programme and stops the writing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from protab.errors import SpecError

if TYPE_CHECKING:
    from protab.programme.definition import Hypercube

#: the programme's exchange formats and the suffix of their one file per hypercube
SUFFIXES = {"sdmx-csv": ".sdmx.csv", "sdmx-structure": ".structure.xml", "json-stat": ".stat.json"}


def file_name(cube: Hypercube, fmt: str) -> str:
    """``<hypercube>.sdmx.csv``, ``<hypercube>.structure.xml`` or ``<hypercube>.stat.json``."""
    return f"{cube.name}{SUFFIXES[fmt]}"


def cube_frame(cube: Hypercube, frames: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The cells of all tables of ``cube`` over all its dimensions (null: the total), each once."""
    names = [d.variable for d in cube.dims]
    parts = []
    for t in cube.tables:
        f = frames[t.name]
        parts.append(f.select(
            *[(pl.when(pl.col(f"{v}_level") == 0).then(None).otherwise(pl.col(v).cast(pl.String)).alias(v)
               if v in t.dims else pl.lit(None, pl.String).alias(v)) for v in names],
            pl.col("n_pert"),
        ))
    cells = pl.concat(parts, how="vertical_relaxed")
    values = cells.group_by(names, maintain_order=True).agg(pl.col("n_pert").n_unique().alias("_k"))
    clash = values.filter(pl.col("_k") > 1)
    if clash.height:
        raise SpecError(f"hypercube {cube.name!r}: {clash.height} cells have two values across its tables "
                        f"(first {clash.row(0)[:len(names)]}); a programme publishes one value per cell")
    return cells.unique(subset=names, keep="first", maintain_order=True)


def cube_labels(cube: Hypercube, classifications: Mapping[str, Any]) -> dict[str, Any]:
    """The ``labels`` and ``names`` of the hypercube's variables, from their classifications."""
    own = {d.variable: classifications.get(d.classification, {}) for d in cube.dims}
    # a hypercube's totals are null codes, named "Total" by the writers: the root's labels are theirs
    labels = {v: {lang: {**by, "Total": by[c.get("root", "Total")]} if c.get("root", "Total") in by else by
                  for lang, by in c["labels"].items()} for v, c in own.items() if "labels" in c}
    return {"labels": labels or None,
            "names": {v: c["name"] for v, c in own.items() if "name" in c} or None}


def table_labels(cube: Hypercube, classifications: Mapping[str, Any]) -> dict[str, Any]:
    """The ``labels`` of the hypercube's variables as its tables code them (their classifications'
    own, root included, as protect's tables take their hierarchies'): for label columns."""
    return {d.variable: classifications[d.classification]["labels"] for d in cube.dims
            if "labels" in classifications.get(d.classification, {})}


def write_dataflow(folder: Path, cube: Hypercube, frames: dict[str, pl.DataFrame], fmt: str,
                   classifications: Mapping[str, Any] | None = None, language: str | None = None) -> str:
    """Write the hypercube as one dataset of format ``fmt`` into ``folder``; its file name. The
    ``labels`` and ``name`` of the classifications name the codes and dimensions (JSON-stat's in
    ``language``, by default each one's first)."""
    from protab.exchange import write_json_stat, write_sdmx_csv, write_sdmx_structure

    frame = cube_frame(cube, frames)
    dims = [d.variable for d in cube.dims]
    name = file_name(cube, fmt)
    named = cube_labels(cube, classifications or {})
    if fmt == "sdmx-csv":
        write_sdmx_csv(frame, folder / name, cube.name, dims=dims, measures=["n_pert"])
    elif fmt == "sdmx-structure":
        write_sdmx_structure(frame, folder / name, cube.name, dims=dims, measures=["n_pert"], **named)
    else:
        write_json_stat(frame, folder / name, cube.name, dims=dims, measures=["n_pert"], language=language, **named)
    return name
