"""The cases of the ckm() SQL function tests of every engine (tests/postgres/test_postgres_ckm_function.py,
tests/spark/test_spark_ckm_function.py): one set, so that each engine's function is held to the same."""

from __future__ import annotations

import numpy as np
import polars as pl

import protab as pt

#: the key modulus of the crowded p-table
CROWDED_MODULUS = 2**40


def crowded_ptable() -> tuple[pt.PTable, np.ndarray, np.ndarray, np.ndarray]:
    """A p-table whose intervals are one p-table unit wide beside wide ones (over 150 segment
    starts at a 40-bit modulus), with counts and keys at, before and after every start: (p-table,
    counts, keys, segment starts)."""
    rng = np.random.default_rng(13)
    rows = []
    for i in range(6):
        cuts = np.unique(np.concatenate([rng.integers(1, 400, 25), rng.integers(1, 10**8, 15), [5 * 10**7]]))
        bounds = np.concatenate([[0], cuts, [10**8]])
        rows += [(i, int(rng.integers(-min(i, 2), 3)), int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:])]
    p = pt.PTable(pl.DataFrame(rows, schema=["i", "v", "lb_n", "ub_n"], orient="row"), den=10**8, period=2)
    m = CROWDED_MODULUS
    starts = p.keyspace(m)["klo"].unique().to_numpy()
    keys = np.unique(np.concatenate([starts, starts - 1, starts + 1, rng.integers(0, m, 300), [m - 1]]))
    keys = keys[(keys >= 0) & (keys < m)]
    return p, rng.integers(0, 12, keys.size), keys, starts
