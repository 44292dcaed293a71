"""The swap specs and population of the cross-engine swap tests (tests/spark/test_spark_swap.py,
tests/postgres/test_postgres_swap_is_duckdbs.py): one set, so that every engine swaps the same
households of the same records."""

from __future__ import annotations

import numpy as np
import polars as pl

import protab as pt

SEED = "spark-swap-tests"
SPECS = {
    "risk_and_rate": pt.SwapSpec(household="hid", geography=["region", "muni", "grid"], risk_variables=["sex", "age"],
                                 similar=[["hsize"], []], swap_rate=0.1, k_anonymity=3),
    "carry_along_capped": pt.SwapSpec(household="hid", geography=["region", "muni"], risk_variables=["age"],
                                      similar=[["hsize", "tenure"], ["hsize"]], carry_along=["tenure"],
                                      swap_rate=0.05, k_anonymity=4, max_swap_rate=0.2),
}


def swap_population() -> pl.DataFrame:
    """900 households of 1-4 persons in region > municipality > grid square."""
    rng = np.random.default_rng(5)
    size = rng.integers(1, 5, 900)
    hid = np.repeat(np.arange(900) * 13 + 7, size)
    grid = np.repeat(rng.integers(0, 36, 900), size)
    return pl.DataFrame({
        "pid": np.arange(len(hid)), "hid": hid,
        "region": (grid // 12).astype(str), "muni": (grid // 4).astype(str), "grid": grid.astype(str),
        "hsize": np.repeat(size, size), "tenure": np.repeat(rng.integers(0, 2, 900), size),
        "sex": rng.choice(["f", "m"], len(hid)), "age": rng.integers(0, 5, len(hid)),
    })
