"""Where protab's SQL runs: one small interface, a DuckDB and a Spark implementation.

A table request (``protab.rollup.TableRun``) writes every statement once, in DuckDB's SQL
dialect with ``?`` parameters. :class:`DuckDBEngine` runs it as written; :class:`SparkEngine`
renders it for Spark SQL with sqlglot (parsed as DuckDB, written as Spark, with the few
DuckDB-only pieces rewritten on the syntax tree: ``?`` become named parameters, so that a
rewrite that repeats an expression repeats its parameter too; ``isinf``; ``MATERIALIZED``
common table expressions; the list pieces of magnitude tables, :func:`_spark_lists`) and binds the same values as parameters. Temporary tables become
checkpointed temporary views of Spark, so a relation is computed once, as in DuckDB.

Nothing here knows about tables, hierarchies or keys: those stay in ``_rollup.py``, in one copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa


def _plain(value: Any) -> Any:
    """A parameter as a plain Python value (numpy integers and floats included)."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value


class Engine:
    """What a table request needs of an SQL engine; statements are DuckDB SQL with ``?``."""

    name = "engine"
    #: the roll-up may read the rows so far as a union of several SELECTs (each read more
    #: than once) instead of one CTE; Spark's optimizer fails on those nested unions
    #: (NoSuchElementException in Union.rewriteConstraints, Spark 4.3), so it gets one CTE
    #: per step as before
    union_pieces = True

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:  # pragma: no cover
        raise NotImplementedError

    def arrow(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:  # pragma: no cover
        raise NotImplementedError

    def create_table(self, name: str, select: str, params: Sequence[Any] | None = None) -> None:  # pragma: no cover
        raise NotImplementedError

    def create_view(self, name: str, select: str, params: Sequence[Any] | None = None) -> None:  # pragma: no cover
        raise NotImplementedError

    def register(self, name: str, data: pa.Table) -> None:  # pragma: no cover
        raise NotImplementedError

    def unregister(self, name: str) -> None:  # pragma: no cover
        raise NotImplementedError

    def drop_table(self, name: str) -> None:  # pragma: no cover
        raise NotImplementedError

    def drop_view(self, name: str) -> None:  # pragma: no cover
        raise NotImplementedError

    def frame(self, sql: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        return pl.from_arrow(self.arrow(sql, params))  # type: ignore[return-value]

    def write_parquet(self, sql: str, params: Sequence[Any] | None, path: str) -> None:  # pragma: no cover
        """Write the result of a query as Parquet at ``path`` by the engine itself (rows in
        the query's order; nothing passes through Python)."""
        raise NotImplementedError

    def overflow_errors(self) -> tuple[type[BaseException], ...]:
        """The exceptions the engine raises when a sum overflows its type."""
        return (duckdb.OutOfRangeException, duckdb.ConversionException)

    def decimal8(self, expr: str, floating: bool) -> str:
        """SQL of ``expr`` as an exact DECIMAL(38, 8), NULL where it cannot be (NaN, ±inf,
        |x| ≥ 1e30). DuckDB's cast of a floating-point value rounds x·10^8 half away from
        zero in binary; every engine must give that same decimal."""
        return f"TRY_CAST({expr} AS DECIMAL(38, 8))"

    def decimal_times(self, value: str, coef: str) -> str:
        """SQL of a DECIMAL(38, 8) ``value`` times an integer coefficient, keeping 8 decimals."""
        return f"{value} * {coef}"
