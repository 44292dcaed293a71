"""Hand-checked cases shared by the DuckDB tests and the Spark tests of the same behaviour."""

from __future__ import annotations

import polars as pl

import protab as pt
from protab import MagnitudeCKM, MagnitudePTable


def rotation_ptable() -> MagnitudePTable:
    """Row 1: v = +0.5 for keys below 0.12341, −0.5 up to 0.712344, +0.5 above (den 10^7)."""
    return MagnitudePTable(pl.DataFrame({
        "i": [0.0, 1.0, 1.0, 1.0], "v": [0.0, 0.5, -0.5, 0.5],
        "lb_n": [0, 0, 1_234_100, 7_123_440], "ub_n": [10**7, 1_234_100, 7_123_440, 10**7],
    }), den=10**7)


def rotation_cell(s: pt.Session) -> pl.DataFrame:
    """The cell a = x of three records with keys summing to 0.0871234 (x = 100, 50, 20),
    perturbed with simple scaling p = 0.1, ε = 1 and tau-ARGUS keys (same_key=False); its
    ratios are capped at row 1 of :func:`rotation_ptable`. tests/spark/test_spark_magnitude.py runs it on Spark.

    The cell value is 170; the running value after each component in brackets:
    j = 1: key 0.871234, v = +0.5, x_delta = 10 → +5     (175)
    j = 2: key 0.7123408, v = −0.5, x_delta = 5 → −2.5   (172.5)  [key 0.712348 gave +2.5]
    j = 3: key 0.1234087, v = +0.5, x_delta = 2 → +1     (173.5)  [key 0.123487 gave −1]
    """
    s.register("rotation", pl.DataFrame({"a": ["x", "x", "x"], "v": [100.0, 50.0, 20.0],
                                         "kdec": [0.05, 0.03, 0.0071234]}), replace=True)
    s.add_record_keys("rotation", record_key_column="kdec", decimals=7, replace=True)
    m = MagnitudeCKM(rotation_ptable(), p=0.1, top_k=3, epsilon=[1, 1, 1], same_key=False)
    counts = pt.PTable.maximum_entropy(D=3, V=1.0)
    out = s.cell_key("rotation", pt.TableSpec({"a": None}, sums=["v"]), counts, magnitude=m, original=True)
    return out.filter(pl.col("a") == "x")
