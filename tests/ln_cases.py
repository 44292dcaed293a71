"""The doubles on which protab's logarithm in plain double arithmetic (Engine.ln_columns) is
checked, on DuckDB (tests/engines) and against DuckDB on the other engines (tests/spark,
tests/postgres): the uniform numbers of a swap's keys, (bits + ½)·2^-52 for 52-bit integers
bits, and positive doubles of every magnitude."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

#: 52-bit integers at the edges: 0, 1, 2^52 − 1, and every power of two with its neighbours
EDGE_BITS = sorted({0, 1, 2**52 - 1} | {2**j + d for j in range(1, 52) for d in (-1, 0, 1)})
#: positive doubles at the edges: subnormals, the smallest normal, the largest, around 1 and powers of two
EDGE_DOUBLES = [5e-324, 1e-320, 2.0**-1022 * (1 - 2.0**-52), 2.0**-1022, 1.7976931348623157e308, 1.0,
                float(np.nextafter(1.0, 0.0)), float(np.nextafter(1.0, 2.0)), 2.0**0.5, 0.5**0.5, np.e] + [
                2.0**j for j in range(-1074, 1024, 37)]
#: the uniform numbers of a swap, as it makes them (households.Households.uniform)
UNIFORM = "(CAST(bits AS DOUBLE) + 0.5) * CAST('2.220446049250313e-16' AS DOUBLE)"


def uniform_bits(n: int, seed: int = 39) -> pa.Table:
    """``n`` random 52-bit integers and :data:`EDGE_BITS`, numbered (columns i, bits)."""
    bits = np.concatenate([np.random.default_rng(seed).integers(0, 2**52, n, dtype=np.int64),
                           np.array(EDGE_BITS, dtype=np.int64)])
    return pa.table({"i": np.arange(len(bits), dtype=np.int64), "bits": bits})


def positive_doubles(n: int, seed: int = 39) -> pa.Table:
    """``n`` random positive doubles of every magnitude (subnormals to 1e308) and :data:`EDGE_DOUBLES`."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(1.0, 10.0, n) * 10.0 ** rng.integers(-324, 308, n).astype(np.float64)
    x = np.concatenate([x[(x > 0) & np.isfinite(x)], EDGE_DOUBLES])
    return pa.table({"i": np.arange(len(x), dtype=np.int64), "x": x})
