"""The SQL pieces that differ between engines (protab.engines.base.SQL_PIECES) give on
PostgreSQL what they give on DuckDB, to the last bit: a double as an exact DECIMAL(38, 8)
(rounded half away from zero in binary, NULL past 1e30, NaN and ±inf), their exact sums; and
protab's natural logarithm in plain double arithmetic (Engine.ln_columns, the same SQL on every
engine: the keys of a swap are sorted by it) the same double."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ln_cases import EDGE_BITS, UNIFORM, uniform_bits

import protab as pt

_rng = np.random.default_rng(5150)
#: doubles at the edges of the decimal8 contract, and random ones of every magnitude
EDGES = [0.0, -0.0, 1.5e-8, 2.5e-8, -1.5e-8, 0.5e-8, 0.49999999999999994e-8, 1.0000000049999999, 123456789.123456785,
         1e23, -1e23, 9.999999999999999e29, 1e30, -1e30, 2.0**63 / 1e8, 2.0**64 / 1e8, 2.0**100 / 1e8,
         float("nan"), float("inf"), float("-inf")]
RANDOM = list(_rng.uniform(-1, 1, 2000) * 10.0 ** _rng.integers(-9, 30, 2000))


@pytest.fixture(scope="module")
def engines(pg_dsn):
    duck, pg = pt.Session(":memory:"), pt.Session.postgres(pg_dsn)
    data = pa.table({"i": pa.array(range(len(EDGES) + len(RANDOM)), pa.int64()),
                     "x": pa.array(EDGES + RANDOM, pa.float64())})
    try:
        for s in (duck, pg):
            s.register("v", data)
            s.register("u", uniform_bits(2000))
        yield duck.engine, pg.engine
    finally:
        pg.close()
        duck.close()


def test_a_double_as_decimal8_is_duckdbs(engines):
    duck, pg = (e.rows(f"SELECT i, {e.decimal8('x', True)} FROM v ORDER BY i") for e in engines)
    assert pg == duck


def test_the_exact_sum_of_doubles_is_duckdbs(engines):
    """Sums per group of 10 records, past 2^53 units (where a sum of doubles would round)."""
    def sums(e):
        agg, finish = e.decimal8_sum("x", True)
        inner = f"SELECT i // 10 AS g, {agg} AS s FROM v WHERE abs(x) < 1e20 GROUP BY i // 10"
        return e.rows(f"SELECT g, {finish.format('s')} FROM ({inner}) q ORDER BY g")

    duck, pg = (sums(e) for e in engines)
    assert pg == duck


def _ln(engine, source: str, params=None) -> list[bytes]:
    sql = engine.ln_columns(source, {"l": "x"})
    return [np.float64(r[0]).tobytes() for r in engine.rows(f"SELECT l FROM ({sql}) q ORDER BY i", params)]


def test_the_logarithm_is_duckdbs(engines):
    duck, pg = (_ln(e, "SELECT i, x FROM v WHERE x > 0 AND x < CAST('Infinity' AS DOUBLE)") for e in engines)
    assert len(pg) > 900
    assert pg == duck


def test_the_logarithm_of_a_swaps_uniform_numbers_is_duckdbs(engines):
    """The uniform numbers of a swap's keys, (bits + ½)·2^-52, with the 52-bit edges."""
    duck, pg = (_ln(e, f"SELECT i, {UNIFORM} AS x FROM u") for e in engines)
    assert len(pg) == 2000 + len(EDGE_BITS)
    assert pg == duck


def test_hex_integer_is_duckdbs(engines):
    duck, pg = (e.rows(f"SELECT {e.hex_integer(repr('7fffffffffffffe'))}, {e.hex_integer(repr('00a'))}")
                for e in engines)
    assert pg == duck


@settings(max_examples=300)
@given(st.floats(allow_nan=True, allow_infinity=True) | st.floats(-1e-6, 1e-6) | st.floats(-1e12, 1e12))
def test_every_double_is_duckdbs_decimal8(engines, x):
    duck, pg = (e.rows(f"SELECT {e.decimal8('CAST(? AS DOUBLE)', True)}", [x]) for e in engines)
    assert pg == duck


@settings(max_examples=300)
@given(st.floats(min_value=5e-324, allow_infinity=False))
def test_every_positive_double_has_duckdbs_logarithm(engines, x):
    duck, pg = (_ln(e, "SELECT 0 AS i, CAST(? AS DOUBLE) AS x", [x]) for e in engines)
    assert pg == duck
