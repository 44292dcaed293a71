"""The PostgreSQL engine (docs/postgres.md): :class:`PostgresEngine`, registered as "postgres",
and :func:`to_postgres`, its rendering of protab's DuckDB-dialect SQL."""

from protab.engines.postgres.postgres_engine import PostgresEngine
from protab.engines.postgres.postgres_sql import to_postgres

__all__ = ["PostgresEngine", "to_postgres"]
