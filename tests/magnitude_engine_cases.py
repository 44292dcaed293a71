"""The p-tables, cell key parameters and sensitivity rules of the cross-engine magnitude tests
(tests/spark/test_spark_magnitude.py, tests/postgres/test_postgres_magnitudes_agree_with_duckdb.py):
one set, so that every engine is held to the same cases, and the records they run on."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl

import protab as pt
from protab.magnitude import MagnitudeCKM, SensitivityRules
from protab.ptable.magnitude_ptable import MagnitudePTable

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    COUNTS = pt.PTable.maximum_entropy(D=3, V=1.0)
# R ptable's pt_ex_nums() tables (the parameters of R cellKey's examples)
ALL = MagnitudePTable.maximum_entropy(10, 3, step=2, icat=[1, 5, 10], optim=[4, 1, 1])
SMALL = MagnitudePTable.maximum_entropy(5, 1, step=5, icat=[1, 3, 5], optim=[4, 1, 1], type="small_cells")

MAGNITUDES = {
    "flex": MagnitudeCKM(ALL, fp=100, p=(0.25, 0.05), q=3, epsilon=[1, 0.5, 0.2]),
    "small": MagnitudeCKM(ALL, fp=50, small_cells=SMALL, epsilon=[1, 0.6]),
    "simple": MagnitudeCKM(ALL, p=0.1),
    "mean": MagnitudeCKM(ALL, fp=100, variant="mean"),
    "range": MagnitudeCKM(ALL, fp=100, variant="range", small_cells=SMALL),
    "sum": MagnitudeCKM(ALL, fp=100, variant="sum", same_key=False, zero_keys=True),
    "evenodd": MagnitudeCKM({"even": ALL.as_type("even"), "odd": ALL.as_type("odd")}, fp=100),
    "mu": MagnitudeCKM(ALL, fp=100, mu_c=3, epsilon=[1, 0.5]),
}

#: "holding" needs a column firm (enterprise groups) in the records
RULES = {
    "gauss": SensitivityRules(min_frequency=3, dominance=[(1, 60), (2, 85)], p_percent=15),
    "argus": SensitivityRules(min_frequency=3, dominance=[(1, 60)], convention="argus", zero=True),
    "pq": SensitivityRules(pq=(10, 50), dominance=[(2, 80)]),
    "holding": SensitivityRules(min_frequency=3, dominance=[(1, 60)], holding="firm"),
    "argus_weights": SensitivityRules(dominance=[(2, 70)], p_percent=10, convention="argus", weights="tauargus"),
}


def magnitude_records(n: int, seed: int, firms: int) -> pl.DataFrame:
    """``n`` records of the cross-engine magnitude tests: municipalities ``muni`` (two levels of
    two digits), ``sex``, ``age`` (0–3), enterprise groups ``firm`` (``firms`` of them), a
    skewed variable ``v`` with negative values, a non-negative ``e`` with zero contributions, a
    weight ``w``, 8-bit keys ``k8`` and 7-digit decimal keys ``kdec`` (R cellKey's), and ``fn``:
    ``e`` missing for every record of municipality 0203 and ``-0.0`` for its zeros."""
    rng = np.random.default_rng(seed)
    v = np.round(rng.pareto(1.2, n) * 100 - 30, 2)
    e = np.round(rng.exponential(50, n), 1)
    e[rng.random(n) < 0.1] = 0.0
    return pl.DataFrame({
        "pid": np.arange(1, n + 1) * 3,
        "muni": rng.choice(["0101", "0102", "0201", "0202", "0203"], n),
        "sex": rng.choice(["f", "m"], n),
        "age": rng.integers(0, 4, n).astype(np.int32),
        "firm": rng.integers(0, firms, n),
        "v": v,
        "e": e,
        "w": np.round(rng.uniform(0.5, 4.0, n), 3),
        "k8": rng.integers(0, 256, n),
        "kdec": np.round(rng.integers(0, 10**7, n) / 10**7, 7),
    }).with_columns(
        fn=pl.when(pl.col("muni") == "0203").then(None).when(pl.col("e") == 0).then(-0.0).otherwise(pl.col("e")))
