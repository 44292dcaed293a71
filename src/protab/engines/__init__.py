"""Where protab's SQL runs: one :class:`Engine` interface, a DuckDB and a Spark implementation."""

from protab.engines.base import Engine
from protab.engines.duckdb_engine import DuckDBEngine
from protab.engines.spark_engine import SparkEngine
from protab.engines.spark_sql import spark_tree, to_spark
from protab.engines.spark_support import (
    SPARK_SQL,
    duckdb_type,
    local_defaults,
    require_java,
    require_spark,
    spark_arrow,
    spark_sql_text,
)

__all__ = ["SPARK_SQL", "DuckDBEngine", "Engine", "SparkEngine", "duckdb_type", "local_defaults", "require_java", "require_spark",
           "spark_arrow", "spark_sql_text", "spark_tree", "to_spark"]
