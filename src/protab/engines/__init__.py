"""Where protab's SQL runs: one abstract :class:`Engine`, a DuckDB, a Spark and a PostgreSQL
implementation, each registered by name with its options (:mod:`protab.engines.registry`).
Importing an engine's module registers it; the ones below are imported here, so they are
always registered."""

from protab.engines.base import SQL_PIECES, Engine, Refused
from protab.engines.duckdb_engine import DEFAULT_DATABASE, DuckDBEngine
from protab.engines.postgres import PostgresEngine
from protab.engines.registry import (
    check_options,
    engine_class,
    engines,
    open_engine,
    register_engine,
    unregister_engine,
)
from protab.engines.spark_engine import SparkEngine
from protab.engines.spark_sql import spark_tree, to_spark
from protab.engines.spark_support import (
    SPARK_SQL,
    duckdb_type,
    local_defaults,
    recommended_settings,
    remote_session,
    require_java,
    require_spark,
    spark_arrow,
    spark_refusal,
    spark_sql_text,
)

__all__ = ["DEFAULT_DATABASE", "SPARK_SQL", "SQL_PIECES", "DuckDBEngine", "Engine", "PostgresEngine", "Refused", "SparkEngine",
           "check_options", "duckdb_type", "engine_class", "engines", "local_defaults", "open_engine", "register_engine",
           "recommended_settings", "remote_session", "require_java", "require_spark",
           "spark_arrow", "spark_refusal", "spark_sql_text", "spark_tree", "to_spark", "unregister_engine"]
