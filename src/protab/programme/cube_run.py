"""One hypercube of a programme protected: each of its tables by the cell key method on the
programme's records (``Session.cell_key``), cut to the levels asked, with its summary row."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import polars as pl

from protab.hierarchy import Hierarchy
from protab.measures import hellinger_utility, share_changed
from protab.programme.dataflows import SUFFIXES, file_name, table_labels, write_dataflow

if TYPE_CHECKING:  # pragma: no cover
    from protab.programme.definition import CubeTable, Hypercube
    from protab.ptable import PTable
    from protab.session import Session

#: the columns of summary.csv, one row per hypercube
SUMMARY_COLUMNS = ("hypercube", "tables", "cells", "blanked", "changed", "hellinger_utility", "seconds")


def protect_cube(
    s: Session, table: str, cube: Hypercube, depth: dict[str, int], hierarchies: dict[str, Hierarchy],
    ptable: PTable, threshold: float | None, columns: dict[str, list[str]] | None = None,
    cut_cache: dict[tuple[str, int], Hierarchy] | None = None,
) -> tuple[dict[str, pl.DataFrame], dict[str, Any]]:
    """The published frames of ``cube`` (by table name; original counts dropped) and its summary
    row. A margin's value depends only on its records, so a dimension asked at a coarser level
    publishes the cells a coarser classification would give: when its classification is made of
    columns of the records (``columns``: classification -> its columns, coarsest first), the
    table reads the column of that level with the classification cut there (``cut_cache`` keeps
    the cut ones); otherwise it is tabulated with its whole classification and cut. A hypercube
    of several count tables reads the records once: their key sums over the columns its tables
    use (``Session.key_sums``, byte for byte the tables of the records)."""
    start = time.perf_counter()
    plans = {t.name: plan_table(cube, t, depth, hierarchies, columns or {}, cut_cache if cut_cache is not None else {})
             for t in cube.tables}
    full = next((t for t in cube.tables if len(t.dims) == len(cube.dims) and _plain(t)), None)
    derived = {t.name for t in cube.tables if full is not None and t is not full and _within(t, full)}
    direct = [t for t in cube.tables if t.name not in derived]
    source, sums = table, None
    if len(direct) > 1 and not any("weight" in t.options for t in direct):
        used = list(dict.fromkeys(c for t in direct for c, _, _ in plans[t.name].values()))
        sums = source = s.key_sums(table, used)
    try:
        counted = {t.name: _table(s, source, t, plans[t.name], ptable, threshold) for t in direct}
    finally:
        if sums is not None:
            s.drop_key_sums(sums)
    for name in derived:
        counted[name] = _margin(counted[full.name], next(t for t in cube.tables if t.name == name))  # type: ignore[union-attr]
    frames = {t.name: counted[t.name].drop([c for c in ("n", "w") if c in counted[t.name].columns])
              for t in cube.tables}
    row = summary_row(cube.name, len(cube.tables), pl.concat([counted[t.name]["n"] for t in cube.tables]),
                      pl.concat([counted[t.name]["n_pert"] for t in cube.tables]))
    row["seconds"] = round(time.perf_counter() - start, 3)
    return frames, row


def _plain(t: CubeTable) -> bool:
    """A table of all crossings with their margins, of counts only, keeping empty cells."""
    o = t.options
    return not o.get("formula") and "weight" not in o and not o.get("drop_empty", False) and "null_code" not in o


def _within(t: CubeTable, full: CubeTable) -> bool:
    """``t`` is a margin of the table ``full``: plain, its dimensions in the same order."""
    return _plain(t) and list(t.dims) == [v for v in full.dims if v in t.dims]


def _margin(full: pl.DataFrame, t: CubeTable) -> pl.DataFrame:
    """The cells of table ``t`` cut from the hypercube's full table: the other dimensions at
    their total. A cell's value depends only on its records, so they are the cells ``t`` would
    get by itself, in its order (the full table's, with the other dimensions fixed)."""
    others = [c for c in full.columns if c.endswith("_level") and c[: -len("_level")] not in t.dims]
    drop = set(others) | {c[: -len("_level")] for c in others}
    return full.filter(pl.all_horizontal([pl.col(c) == 0 for c in others])).select(
        [c for c in full.columns if c not in drop])


def plan_table(cube: Hypercube, t: CubeTable, depth: dict[str, int], hierarchies: dict[str, Hierarchy],
          columns: dict[str, list[str]], cut_cache: dict[tuple[str, int], Hierarchy]
          ) -> dict[str, tuple[str, Hierarchy, int | None]]:
    """Per dimension of table ``t``: (the column read, its classification, the level to cut the
    output at or None). A coarser level of a columns classification reads that level's column
    (not in a table with a formula, whose terms name the variables)."""
    out: dict[str, tuple[str, Hierarchy, int | None]] = {}
    for d in cube.dims:
        if d.variable not in t.dims:
            continue
        h, level = hierarchies[d.classification], depth[d.variable]
        cols = columns.get(d.classification)
        if level >= h.depth:
            out[d.variable] = (d.variable, h, None)
        elif cols and len(cols) == h.depth and "formula" not in t.options:
            key = (d.classification, level)
            if key not in cut_cache:
                frame = h.to_frame().filter(pl.col("level") <= level)
                cut_cache[key] = Hierarchy.from_parent_child(frame, child="code", root=h.root)
            out[d.variable] = (cols[level - 1], cut_cache[key], None)
        else:
            out[d.variable] = (d.variable, h, level)
    return {v: out[v] for v in t.dims}


def _table(s: Session, source: str, t: CubeTable, plan: dict[str, tuple[str, Hierarchy, int | None]],
           ptable: PTable, threshold: float | None) -> pl.DataFrame:
    """One table by the cell key method on ``source`` as planned, its columns named by the
    hypercube's variables and cut to the levels asked."""
    from protab.table import TableSpec

    o = t.options
    spec = TableSpec({col: h for col, h, _ in plan.values()}, formula=o.get("formula"), weight=o.get("weight"),
                     drop_empty=o.get("drop_empty", False), null_code=o.get("null_code"))
    frame = s.cell_key(source, spec, ptable, original=True, threshold=threshold)
    cut = [pl.col(f"{col}_level") <= level for col, _, level in plan.values() if level is not None]
    if cut:
        frame = frame.filter(pl.all_horizontal(cut))
    names = {}
    for v, (col, _, _) in plan.items():
        if col != v:
            names.update({col: v, f"{col}_level": f"{v}_level"})
    return frame.rename(names) if names else frame


def summary_row(name: str, tables: int, n: pl.Series, n_pert: pl.Series) -> dict[str, Any]:
    """Cells, the share blanked (below the threshold), the share changed (a blanked cell counts
    as changed unless it was 0) and the Hellinger utility (blanked cells as 0) of a hypercube's
    tables together (Langsrud & Heldal 2018; ``protab.measures``)."""
    orig = n.cast(float).to_numpy()
    pert = n_pert.cast(float).fill_null(0).to_numpy()
    # the mean of a boolean column: a float (polars types it as any value)
    return {
        "hypercube": name,
        "tables": tables,
        "cells": len(n),
        "blanked": float(cast(float, n_pert.is_null().mean())) if len(n) else None,
        "changed": share_changed(orig, pert) if len(n) else None,
        "hellinger_utility": hellinger_utility(orig, pert) if orig.sum() > 0 else None,
    }


def file_names(cube: Hypercube, formats: list[str]) -> list[str]:
    """The output files of a hypercube: ``<hypercube>.<table>.<csv|parquet>`` per table, and one
    ``<hypercube>.sdmx.csv`` / ``<hypercube>.stat.json`` for the whole hypercube."""
    tables = [f"{cube.name}.{t.name}.{fmt}" for t in cube.tables for fmt in formats if fmt not in SUFFIXES]
    return tables + [file_name(cube, fmt) for fmt in formats if fmt in SUFFIXES]


def write_cube(folder: Path, cube: Hypercube, frames: dict[str, pl.DataFrame], formats: list[str],
               classifications: dict[str, Any] | None = None, label_columns: Sequence[str] = ()) -> list[str]:
    """The frames of a finished hypercube written into the staging folder (each file atomically);
    the ``labels`` and ``name`` of ``classifications`` name the codes of its exchange files, and
    its CSV and Parquet tables get a column ``<dim>_label_<lang>`` per language of
    ``label_columns`` as protect's do (protab.exchange.with_label_columns); JSON-stat's labels
    are in the first of them."""
    from protab._io import write_frame
    from protab.exchange import with_label_columns

    folder.mkdir(parents=True, exist_ok=True)
    labels = table_labels(cube, classifications or {})
    for t in cube.tables:
        tabular = [fmt for fmt in formats if fmt not in SUFFIXES]
        frame = with_label_columns(frames[t.name], labels, label_columns) if tabular else frames[t.name]
        for fmt in tabular:
            write_frame(frame, folder / f"{cube.name}.{t.name}.{fmt}")
    for fmt in formats:
        if fmt in SUFFIXES:
            write_dataflow(folder, cube, frames, fmt, classifications, language=next(iter(label_columns), None))
    return file_names(cube, formats)


def summary_text(rows: list[dict[str, Any]]) -> str:
    """The summary as a table of text, one line per hypercube."""
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.1%}"

    lines = [f"{'hypercube':<28}{'tables':>7}{'cells':>12}{'blanked':>9}{'changed':>9}{'Hellinger':>11}"
             f"{'seconds':>9}"]
    for r in rows:
        h = r["hellinger_utility"]
        lines.append(f"{r['hypercube']:<28}{r['tables']:>7}{r['cells']:>12,}{pct(r['blanked']):>9}"
                     f"{pct(r['changed']):>9}{'-' if h is None else f'{h:.6f}':>11}{r['seconds']:>9.2f}")
    return "\n".join(lines)
