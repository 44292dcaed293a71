"""The magnitude p-table lookup relation (``MagnitudeCKM.lookup_frames``): per segment of rows
and key bucket, the noise of the entry holding the bucket's first key and of the entries
starting inside it. Looking a (ratio, key) up the way the SQL does (the segment holding the
ratio, the key's bucket, the last entry bound at or below the key, linear interpolation
between the segment's rows) must give the noise of the NumPy reference
``MagnitudePTable.lookup`` for every key."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import protab as pt

NUM = pt.MagnitudePTable.maximum_entropy(10, 3, step=2, icat=[1, 5, 10], optim=[4, 1, 1])
# many small-probability entries (a wide D, small V): bounds crowd the tails of the key range
CROWDED = pt.MagnitudePTable.maximum_entropy(40, 1, step=1, icat=[1, 20, 40])


def _sql_like(m: pt.MagnitudeCKM, a: np.ndarray, keys: np.ndarray, modulus: int) -> np.ndarray:
    """The SQL's lookup of table 'all' (tab 0), in polars: join on segment and bucket, then
    the CASE over the entry bounds, then the interpolation of ckm_ctes."""
    frame = m.lookup_frames(modulus).filter(pl.col("tab") == 0)
    width, depth = m.lookup_shape(modulus)
    cells = pl.DataFrame({"id": np.arange(len(a)), "a": a, "key": keys}).with_columns(b=pl.col("key") // width)
    joined = cells.join(frame, on="b").filter((pl.col("a") >= pl.col("lo")) & (pl.col("a") < pl.col("hx")))
    assert joined.height == len(a)  # exactly one segment and bucket per cell

    def noise(side: str) -> pl.Expr:
        expr = pl.col(f"{side}_v0")
        for d in range(1, depth + 1):
            expr = pl.when(pl.col("key") >= pl.col(f"{side}_k{d}")).then(pl.col(f"{side}_v{d}")).otherwise(expr)
        return expr

    lam = (pl.col("a") - pl.col("lo")) / (pl.col("hi") - pl.col("lo"))
    v = pl.when((pl.col("hi") == pl.col("lo")) | (pl.col("a") == pl.col("lo"))).then(noise("lo")).otherwise(
        (1 - lam) * noise("lo") + lam * noise("hi"))
    return joined.sort("id").select(v.alias("v"))["v"].to_numpy()


@pytest.mark.parametrize("modulus", [2**32, 10**7, 2**8])
@pytest.mark.parametrize("table", [NUM, CROWDED], ids=["num", "crowded"])
def test_every_entry_bound_is_found(table, modulus):
    """Keys at, just below and just above every entry bound, at every row of the table."""
    m = pt.MagnitudeCKM(table, fp=100, p=(0.3, 0.03), q=3, epsilon=[1])
    ks = table.keyspace(modulus)
    bounds = ks["klo"].to_numpy()
    keys = np.unique(np.clip(np.concatenate([bounds - 1, bounds, bounds + 1, [0, modulus - 1]]), 0, modulus - 1))
    rows = np.unique(table.frame["i"].to_numpy()).astype(float)
    a = np.repeat(rows, len(keys))
    k = np.tile(keys, len(rows))
    np.testing.assert_array_equal(_sql_like(m, a, k, modulus), table.lookup(a, k, modulus))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 45, allow_nan=False), st.integers(0, 2**32 - 1)), min_size=1, max_size=200))
def test_random_ratios_and_keys_match_the_reference(cells):
    m = pt.MagnitudeCKM(CROWDED, fp=100, p=(0.3, 0.03), q=3, epsilon=[1])
    a = np.array([c[0] for c in cells])
    k = np.array([c[1] for c in cells], dtype=np.int64)
    np.testing.assert_allclose(_sql_like(m, a, k, 2**32), CROWDED.lookup(a, k, 2**32), rtol=1e-12, atol=1e-12)


def test_the_relation_stays_small_and_shallow():
    m = pt.MagnitudeCKM(CROWDED, fp=100, p=(0.3, 0.03), q=3, epsilon=[1])
    width, depth = m.lookup_shape(2**32)
    frame = m.lookup_frames(2**32)
    segments = frame.select("tab", "lo").unique().height
    assert frame.height == segments * m.BUCKETS  # one row per segment and bucket
    assert width * m.BUCKETS >= 2**32 > width * (m.BUCKETS - 1)  # the buckets cover every key
    assert 0 < depth < CROWDED.keyspace(2**32).height  # a CASE shorter than a row's entries
