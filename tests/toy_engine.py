"""A toy engine for the tests only: DuckDB under another name, registered by one decorator.
It proves that an engine joins the cross-engine matrix of tests/spark (spark_fixtures.py
:func:`engines_under_test`) by registration alone: nothing else in protab or the tests names it."""

from __future__ import annotations

from protab.engines import DuckDBEngine, register_engine


@register_engine
class TwinEngine(DuckDBEngine):
    """DuckDB's engine registered as a separate engine (its options, templates and SQL inherited)."""

    name = "duckdb_twin"
