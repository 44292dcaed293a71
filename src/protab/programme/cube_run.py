"""One hypercube of a programme protected: each of its tables by the cell key method on the
programme's records (``Session.cell_key``), cut to the levels asked, with its summary row."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from protab.measures import hellinger_utility, share_changed

if TYPE_CHECKING:  # pragma: no cover
    from protab.hierarchy import Hierarchy
    from protab.programme.definition import Hypercube
    from protab.ptable import PTable
    from protab.session import Session

#: the columns of summary.csv, one row per hypercube
SUMMARY_COLUMNS = ("hypercube", "tables", "cells", "blanked", "changed", "hellinger_utility", "seconds")


def protect_cube(
    s: Session, table: str, cube: Hypercube, depth: dict[str, int], hierarchies: dict[str, Hierarchy],
    ptable: PTable, threshold: float | None,
) -> tuple[dict[str, pl.DataFrame], dict[str, Any]]:
    """The published frames of ``cube`` (by table name; original counts dropped) and its summary
    row. A dimension asked at a coarser level is tabulated with its whole classification and cut
    to the levels asked: a margin's value depends only on its records, so the cells kept are
    those a coarser classification would give."""
    from protab.table import TableSpec

    start = time.perf_counter()
    classified = {d.variable: hierarchies[d.classification] for d in cube.dims}
    frames, originals, published = {}, [], []
    for t in cube.tables:
        o = t.options
        spec = TableSpec({v: classified[v] for v in t.dims}, formula=o.get("formula"), weight=o.get("weight"),
                         drop_empty=o.get("drop_empty", False), null_code=o.get("null_code"))
        frame = s.cell_key(table, spec, ptable, original=True, threshold=threshold)
        cut = [pl.col(f"{v}_level") <= depth[v] for v in t.dims if depth[v] < classified[v].depth]
        if cut:
            frame = frame.filter(pl.all_horizontal(cut))
        originals.append(frame["n"])
        published.append(frame["n_pert"])
        frames[t.name] = frame.drop([c for c in ("n", "w") if c in frame.columns])
    row = summary_row(cube.name, len(cube.tables), pl.concat(originals), pl.concat(published))
    row["seconds"] = round(time.perf_counter() - start, 3)
    return frames, row


def summary_row(name: str, tables: int, n: pl.Series, n_pert: pl.Series) -> dict[str, Any]:
    """Cells, the share blanked (below the threshold), the share changed (a blanked cell counts
    as changed unless it was 0) and the Hellinger utility (blanked cells as 0) of a hypercube's
    tables together (Langsrud & Heldal 2018; ``protab.measures``)."""
    orig = n.cast(float).to_numpy()
    pert = n_pert.cast(float).fill_null(0).to_numpy()
    return {
        "hypercube": name,
        "tables": tables,
        "cells": len(n),
        "blanked": float(n_pert.is_null().mean()) if len(n) else None,
        "changed": share_changed(orig, pert) if len(n) else None,
        "hellinger_utility": hellinger_utility(orig, pert) if orig.sum() > 0 else None,
    }


def file_names(cube: Hypercube, formats: list[str]) -> list[str]:
    """The output files of a hypercube: ``<hypercube>.<table>.<format>``."""
    return [f"{cube.name}.{t.name}.{fmt}" for t in cube.tables for fmt in formats]


def write_cube(folder: Path, cube: Hypercube, frames: dict[str, pl.DataFrame], formats: list[str]) -> list[str]:
    """The frames of a finished hypercube written into the staging folder (each file atomically)."""
    from protab._io import write_frame

    folder.mkdir(parents=True, exist_ok=True)
    for t in cube.tables:
        for fmt in formats:
            write_frame(frames[t.name], folder / f"{cube.name}.{t.name}.{fmt}")
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
