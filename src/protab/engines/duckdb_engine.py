"""The DuckDB engine: protab's SQL on a DuckDB connection, exactly as written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa

from protab.engines.base import Engine


class DuckDBEngine(Engine):
    """protab's SQL on a DuckDB connection, exactly as written."""

    name = "duckdb"

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        self.con.execute(sql, list(params) if params else [])

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        return self.con.execute(sql, list(params) if params else []).fetchall()

    def arrow(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
        return self.con.sql(sql, params=list(params) if params else None).to_arrow_table()

    def write_parquet(self, sql: str, params: Sequence[Any] | None, path: str) -> None:
        """One Parquet file (zstd), written by DuckDB; rows in the query's order."""
        self.con.sql(sql, params=list(params) if params else None).to_parquet(path, compression="zstd")

    def create_table(self, name: str, select: str, params: Sequence[Any] | None = None) -> None:
        self.con.execute(f"CREATE TEMP TABLE {name} AS {select}", list(params) if params else [])

    def create_view(self, name: str, select: str, params: Sequence[Any] | None = None) -> None:
        self.con.execute(f"CREATE TEMP VIEW {name} AS {select}", list(params) if params else [])

    def register(self, name: str, data: pa.Table) -> None:
        self.con.register(name, data)

    def unregister(self, name: str) -> None:
        self.con.unregister(name)

    def drop_table(self, name: str) -> None:
        self.con.execute(f"DROP TABLE IF EXISTS {name}")

    def drop_view(self, name: str) -> None:
        self.con.execute(f"DROP VIEW IF EXISTS {name}")
