"""protab's natural logarithm in plain IEEE double arithmetic (Engine.ln_columns, the keys of a
swap): within 1 ulp of the C library's ``log`` on DuckDB, and rendered for Spark and PostgreSQL
with every operation and type kept (tests/spark and tests/postgres run it there and compare)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sqlglot
from ln_cases import EDGE_BITS, UNIFORM, positive_doubles, uniform_bits
from sqlglot import exp

import protab as pt
from protab.engines import DuckDBEngine
from protab.engines.postgres.postgres_sql import to_postgres
from protab.engines.spark_sql import to_spark


@pytest.fixture(scope="module")
def duck():
    with pt.Session(":memory:") as s:
        s.register("u", uniform_bits(100_000))
        s.register("x", positive_doubles(20_000))
        yield s.engine


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return np.abs(got - want) / np.spacing(np.abs(want))


def test_the_logarithm_of_a_swaps_uniform_numbers_is_within_one_ulp_of_the_c_library(duck):
    """Measured on these 100,154 numbers: at most 1 ulp from math.log, 2.4 % not equal to it."""
    sql = duck.ln_columns(f"SELECT i, {UNIFORM} AS u FROM u", {"l": "u"})
    rows = duck.rows(f"SELECT u, l FROM ({sql}) q ORDER BY i")
    u, got = np.array(rows).T
    want = np.array([math.log(v) for v in u])
    assert len(rows) == 100_000 + len(EDGE_BITS)
    assert _ulps(got, want).max() == 1.0
    assert 0.01 < (got != want).mean() < 0.03


def test_the_logarithm_of_every_kind_of_positive_double_is_within_one_ulp(duck):
    """Subnormals, the largest double, powers of two: the exponent is found exactly."""
    sql = duck.ln_columns("SELECT i, x FROM x", {"l": "x"})
    rows = duck.rows(f"SELECT x, l FROM ({sql}) q ORDER BY i")
    x, got = np.array(rows).T
    want = np.array([math.log(v) for v in x])
    assert x.min() == 5e-324 and x.max() == 1.7976931348623157e308
    assert _ulps(got, want).max() <= 1.0
    exact = duck.ln_columns("SELECT CAST(1 AS DOUBLE) AS one, CAST(0.5 AS DOUBLE) AS half", {"l1": "one", "l2": "half"})
    assert duck.rows(f"SELECT l1, l2 FROM ({exact}) q") == [(0.0, -math.log(2))]


def test_the_logarithm_of_null_is_null(duck):
    sql = duck.ln_columns("SELECT CAST(NULL AS DOUBLE) AS x", {"l": "x"})
    assert duck.rows(f"SELECT l FROM ({sql}) q") == [(None,)]


def _operations(tree: exp.Expression) -> dict[str, int]:
    kinds = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg, exp.LT, exp.Case, exp.Floor, exp.Pow, exp.Ln)
    found = {k.__name__: len(list(tree.find_all(k))) for k in kinds}
    found["to DOUBLE"] = sum(c.to.this == exp.DataType.Type.DOUBLE for c in tree.find_all(exp.Cast))
    found["DOUBLE constants"] = sorted(c.this.name for c in tree.find_all(exp.Cast) if c.this.is_string)
    return found


def test_spark_and_postgres_get_every_operation_and_double_of_the_logarithm():
    """sqlglot's rendering keeps each operation, in its place (parentheses), and each constant
    a cast of its digits to DOUBLE (PostgreSQL's adds a cast of a DOUBLE to DOUBLE, before /)."""
    sql = DuckDBEngine.ln_columns(DuckDBEngine, "SELECT x FROM x", {"l": "x"})
    duck = sqlglot.parse_one(sql, read="duckdb")
    spark = sqlglot.parse_one(to_spark(sql)[0], read="spark")
    postgres = sqlglot.parse_one(to_postgres(sql)[0], read="postgres")
    want = _operations(duck)
    assert (want["Add"], want["Sub"], want["Div"], want["Ln"], len(want["DOUBLE constants"])) == (17, 9, 1, 1, 32)
    assert _operations(spark) == want
    assert _operations(postgres) == {**want, "to DOUBLE": want["to DOUBLE"] + 1}
    for rendered in (spark, postgres):
        assert _parenthesised(rendered) == _parenthesised(duck)


def _parenthesised(tree: exp.Expression) -> list[str]:
    """What each pair of parentheses holds (sqlglot reads Spark's CAST as a TRY_CAST: the same here)."""
    tree = tree.transform(lambda n: exp.Cast(this=n.this, to=n.to) if isinstance(n, exp.TryCast) else n)
    return sorted(p.this.sql() for p in tree.find_all(exp.Paren))
