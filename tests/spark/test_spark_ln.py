"""protab's natural logarithm in plain double arithmetic (Engine.ln_columns) gives on Spark the
double it gives on DuckDB, to the last bit: the keys of a swap sort alike on both, with no
Python on Spark's executors (Spark's own ``ln``, Java's StrictMath.log, differs from DuckDB's)."""

from __future__ import annotations

import numpy as np
import pytest
from ln_cases import EDGE_BITS, UNIFORM, positive_doubles, uniform_bits

import protab as pt


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    from spark_fixtures import spark_fixture

    for spark in spark_fixture(tmp_path_factory, "protab-spark-ln", cores=2):
        sessions = pt.Session(":memory:"), pt.Session.spark(spark)
        for s in sessions:
            s.register("u", uniform_bits(100_000), replace=True)
            s.register("x", positive_doubles(20_000), replace=True)
        yield [s.engine for s in sessions]
        sessions[0].close()


def _bits(engine, sql: str) -> list[bytes]:
    column = engine.arrow(f"SELECT l FROM ({sql}) q ORDER BY i").column("l")
    return [np.float64(v).tobytes() for v in column.to_numpy()]


def test_the_logarithm_of_a_swaps_uniform_numbers_is_duckdbs_on_spark(engines):
    duck, spark = (_bits(e, e.ln_columns(f"SELECT i, {UNIFORM} AS u FROM u", {"l": "u"})) for e in engines)
    assert len(spark) == 100_000 + len(EDGE_BITS)
    assert spark == duck


def test_the_logarithm_of_every_kind_of_positive_double_is_duckdbs_on_spark(engines):
    duck, spark = (_bits(e, e.ln_columns("SELECT i, x FROM x", {"l": "x"})) for e in engines)
    assert len(spark) > 19_000
    assert spark == duck

