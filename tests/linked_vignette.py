"""Shared by the linked-tables tests: GaussSuppression 1.2.3's linked-tables vignette data
(tests/data/gauss_rules/levels) and how its published patterns are read and compared."""

from __future__ import annotations

from pathlib import Path

import polars as pl

LEVELS = Path(__file__).resolve().parent / "data" / "gauss_rules" / "levels"
T1, T2 = ["age", "eu", "year"], ["geo", "year"]


def suppressed_cells(frame: pl.DataFrame, keys: list[str]) -> list[tuple]:
    """The cells protab suppressed (primary or secondary), sorted, as tuples of ``keys``."""
    return sorted(tuple(r) for r in frame.filter(pl.col("suppressed") != "no").select(keys).rows())


def reference_cells(name: str, keys: list[str]) -> list[tuple]:
    """The cells the vignette's table ``name`` suppresses, sorted, as tuples of ``keys``."""
    ref = pl.read_csv(LEVELS / f"{name}.csv", infer_schema_length=None)
    ref = ref.with_columns(pl.col(k).cast(pl.String) for k in keys)
    return sorted(tuple(r) for r in ref.filter(pl.col("suppressed")).select(keys).rows())
