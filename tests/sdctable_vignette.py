"""sdcTable's vignette table (tests/data/sdctable_vignette.csv): 168 published cells of V1
(a hierarchy: Tot > A, B > Ba, Bb, Bc, C, D) × V2 × V3, 15 of them primary (Freq ≤ 10)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

import protab as pt

DATA = Path(__file__).resolve().parent / "data" / "sdctable_vignette.csv"
LEAVES = ["A", "Ba", "Bb", "Bc", "C", "D"]


def vignette_inputs() -> tuple[pl.DataFrame, pl.DataFrame, pt.TableSpec]:
    """(the whole published table, its inner cells, the TableSpec that publishes them)."""
    table = pl.read_csv(DATA, comment_prefix="#")
    inner = table.filter(pl.col("V1").is_in(LEAVES) & pl.col("V2").is_in(["m", "w"])
                         & pl.col("V3").is_in(list("abcdef")))
    v1 = pt.Hierarchy.from_parent_child([("Tot", "A"), ("Tot", "B"), ("B", "Ba"), ("B", "Bb"), ("B", "Bc"),
                                         ("Tot", "C"), ("Tot", "D")])
    spec = pt.TableSpec({"V1": v1, "V2": None, "V3": None}, freq="Freq")
    return table, inner.select("V1", "V2", "V3", "Freq"), spec
