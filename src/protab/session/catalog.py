"""The Session's catalog: registering microdata, looking up tables and columns, queries of the
user's own, and the guards of ``path=`` outputs — all through the session's engine."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from protab._io import protected_form
from protab.errors import InputError, show_values
from protab.rollup.relations import drop_kept
from protab.session.arguments import as_paths, file_kind, missing_columns
from protab.session.state import SessionState
from protab.sqltools import code_sql, quote_ident

if TYPE_CHECKING:  # pragma: no cover
    import duckdb



class Catalog(SessionState):
    """Registration and look-ups (a mixin of :class:`protab.Session`)."""

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The underlying DuckDB connection (for SQL of your own); a Spark session has none."""
        con: duckdb.DuckDBPyConnection | None = getattr(self.engine, "con", None)
        if con is None:
            raise InputError(f"this Session runs on {self.engine.name}: it has no DuckDB connection; "
                             "use Session.sql for queries of your own")
        return con

    def sql(self, query: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        """Run a query of your own (in the engine's SQL) and return its result as a polars frame."""
        return self.engine.user_query(query, params)

    def _arrow(self, query: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        """A query of protab's own (DuckDB's dialect, rendered for the engine) as a polars frame."""
        return self.engine.frame(query, params)

    # -- look-ups ---------------------------------------------------------------------------------
    def tables(self) -> list[str]:
        """Names of the tables and views of the session (protab's own left out)."""
        return self.engine.tables()

    def exists(self, name: str) -> bool:
        """Whether ``name`` is a table or view of the engine."""
        return isinstance(name, str) and bool(name) and self.engine.kind(name) is not None

    def columns(self, table: str) -> dict[str, str]:
        """Column name → type (DuckDB's type names) of a registered table or view."""
        if not isinstance(table, str):
            self._require(table)
        if table in self._key_sum_columns:  # a key-sum table of this session: made by protab, never altered
            return dict(self._key_sum_columns[table])
        cols = self.engine.columns(table)
        if not cols:
            self._require(table)  # InputError naming the tables there are
        return cols

    def _require(self, table: str) -> None:
        if not isinstance(table, str) or not self.exists(table):
            known = self.tables()
            raise InputError(
                f"no table named {table!r} in {self.database!r}"
                + (f" (tables: {show_values(known, 8)})" if known else "")
                + "; register it first (Session.register, or `protab register NAME SOURCE`)"
            )

    def _require_columns(self, table: str, columns: Sequence[str], what: str = "column") -> dict[str, str]:
        cols = self.columns(table)
        missing_columns(table, cols, columns, what)
        return cols

    def codes(self, table: str, column: str) -> list[str]:
        """The distinct non-missing values of a column (NULL and NaN left out), as strings, sorted."""
        cols = self._require_columns(table, [column])
        rows = self.engine.rows(
            f"SELECT DISTINCT CAST({code_sql(column, cols[column])} AS VARCHAR) FROM {quote_ident(table)} "
            "ORDER BY 1"
        )
        return [r[0] for r in rows if r[0] is not None]

    # -- registering microdata --------------------------------------------------------------------
    def register(self, name: str, source: Any, *, replace: bool = False, materialize: bool = False) -> None:
        """Make ``source`` available as table ``name``, without pulling rows into Python.

        ``source`` may be a Parquet or CSV path, glob or list of paths (registered as a view
        over the files, or copied into the database with ``materialize=True``; Spark reads
        Parquet); a pyarrow Table, a polars or pandas DataFrame (copied through Arrow), a Spark
        DataFrame on Spark; or the name of a table or view already there.
        """
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"register: the table name must be a non-empty string, got {name!r}")
        if self.exists(name) and not replace:
            if isinstance(source, str) and source == name:
                return
            raise InputError(f"register: a table named {name!r} exists already; pass replace=True to replace it")
        paths = as_paths(source)
        with self.engine.transaction():
            if paths is not None:
                self._register_files(name, paths, materialize)
            elif isinstance(source, str):
                if not self.exists(source):
                    raise InputError(
                        f"register: {source!r} is neither an existing file nor a table of {self.database!r}")
                if source != name:
                    self.engine.register_alias(name, source)
            else:
                self.engine.register_data(name, _arrow_data(name, source), self.engine.step)
        self._forget(name)

    def _register_files(self, name: str, paths: list[str], materialize: bool) -> None:
        kinds = {file_kind(p) for p in paths}
        if len(kinds) != 1 or None in kinds:
            raise InputError(
                f"register {name!r}: cannot tell the format of {show_values(paths)}; use files "
                "ending in .parquet or .csv (or .csv.gz, .tsv)"
            )
        self.engine.register_files(name, paths, str(kinds.pop()), materialize, self.engine.step)
        self._read_paths += [protected_form(p) for p in paths if "://" not in p]

    # -- path= outputs ----------------------------------------------------------------------------
    def _check_sink(self, path: str | os.PathLike[str] | None) -> Path | None:
        """Where a ``path=`` output goes, after the checks that it can be written and replaces no
        input (the engine's): run before any work is done."""
        if path is None:
            return None
        from protab._io import output_name

        return self.engine.check_sink(output_name(path), self._refuse_inputs)

    @contextmanager
    def _parquet_sink(self, run: Any, path: str | os.PathLike[str] | None, target: Path | None) -> Iterator[None]:
        if path is None:
            yield
            return
        with self.engine.parquet_sink(run, os.fspath(path), target):
            yield

    def _refuse_inputs(self, target: Path, raw: str) -> None:
        """InputError when writing ``target`` (a real path) would replace or change the
        session's database file (or its .wal) or files (or a folder of files, or a glob's
        files) registered in this session, however either is spelled."""
        from protab._io import real_path, replaces

        t = real_path(target)
        protected = [(p, "files registered in this session") for p in self._read_paths]
        protected += [(p, "the session's database") for p in self.engine.database_files()]
        for pattern, what in protected:
            if replaces(t, pattern):
                raise InputError(f"cannot write the table to {raw!r}: it would replace {what}; name another path")

    def forget_hierarchies(self, keep: int = 0) -> None:
        """Drop the code and bridge tables the session keeps per hierarchy (built on first use)
        and the p-tables' lookup tables when there are more than ``keep`` of them: a long-lived
        session that sees ever new hierarchies (a query service) stays small."""
        # hierarchies and kept p-table lookups count, not the (code, level) frames kept beside them
        if sum(not isinstance(h, tuple) or h[0] == "relation" for h in self._hierarchies) <= keep:
            return
        drop_kept(self.engine, self._hierarchies)


def _arrow_data(name: str, source: Any) -> Any:
    """A frame to register as Arrow (polars converted; pandas, Arrow and Spark frames as they are)."""
    if isinstance(source, pl.LazyFrame):
        source = source.collect()
    if isinstance(source, pl.DataFrame):
        return source.to_arrow()
    module = type(source).__module__.split(".")[0]
    if isinstance(source, (pa.Table, pa.RecordBatchReader)) or module in ("pandas", "pyspark"):
        return source
    raise InputError(
        f"register {name!r}: unsupported source of type {type(source).__name__}; give a "
        "path, a pyarrow Table, a polars or pandas DataFrame, or a table name"
    )
