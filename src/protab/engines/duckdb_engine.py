"""The DuckDB engine: protab's SQL on a DuckDB connection, exactly as written; the catalog is
DuckDB's, record keys are tagged in a column comment, a private spill folder per database."""

from __future__ import annotations

import os
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from protab import _progress
from protab._progress import bar
from protab.engines import duckdb_relations as swap_tables
from protab.engines import duckdb_resources as res
from protab.engines.base import Engine, Refuse
from protab.engines.registry import register_engine
from protab.errors import InputError, show_values
from protab.sqltools import quote_ident, sql_text

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from protab.ptable import PTable

#: Seconds between two looks at DuckDB's progress of a long step.
_POLL = 0.2
#: how a record-key column is tagged (a column comment: later sessions find it)
_KEY_COMMENT = re.compile(r"^protab record key; modulus=(\d+)$")
#: the relation a query of a plain name reads when a temporary table (e.g. swapped records not yet
#: kept) has the name of a table of the database: the temporary one (DuckDB's search path)
_READ_FIRST = ("database_name = (SELECT database_name FROM duckdb_columns() WHERE table_name = ? "
               "ORDER BY database_name <> 'temp' LIMIT 1)")


#: The database ``Session()`` opens: ``protab.duckdb`` in the working directory
DEFAULT_DATABASE = "protab.duckdb"

#: DuckDB's SQL pieces (:data:`protab.engines.base.SQL_PIECES`): protab's statements are DuckDB's
_TEMPLATES = {
    "decimal8": "TRY_CAST({expr} AS DECIMAL(38, 8))",
    "decimal8_float": "TRY_CAST({expr} AS DECIMAL(38, 8))",
    "decimal8_sum": "sum({decimal8})",
    "decimal8_sum_finish": "{{}}",
    "decimal8_sum_float": "sum({decimal8})",
    "decimal8_sum_float_finish": "{{}}",
    "decimal_times": "{value} * {coef}",
    "merged_list": ("list_slice(list_sort(flatten(list({lists}) FILTER (WHERE {lists} IS NOT NULL)), '{order}'), "
                    "1, {n})"),
    "hex_integer": "CAST('0x' || {digits} AS UBIGINT)",
}


@register_engine
class DuckDBEngine(Engine):
    """protab's SQL on a DuckDB connection, exactly as written."""

    name = "duckdb"
    dialect = "duckdb"
    union_pieces = True
    templates = _TEMPLATES
    options = {
        "database": "a database file, or ':memory:' (default protab.duckdb in the working directory)",
        "read_only": "open the database read-only",
        "threads": "DuckDB's threads",
        "progress": "progress bars (None: on a terminal)",
        "storage_version": "the storage format of new database files (default v1.2.0)",
        "memory_limit": "DuckDB's memory limit (default half of the machine's)",
        "temp_directory": "the folder under which the private spill folder is made",
    }

    def __init__(self, con: duckdb.DuckDBPyConnection, *, label: str = ":memory:", bars: bool = False,
                 duckdb_bar: bool = False) -> None:
        self.con = con
        self.label = label
        self._bars = bars  # protab's bars on long steps (see step)
        self._duckdb_bar = duckdb_bar  # DuckDB's own bar on long queries
        self._db_key: str | None = None
        self._spill: res.SpillFolder | None = None

    @classmethod
    def open(cls, database: str, *, read_only: bool = False, threads: int | None = None,
             progress: bool | None = None, storage_version: str | None = "v1.2.0",
             memory_limit: str | int | None = None, temp_directory: str | os.PathLike[str] | None = None,
             ) -> DuckDBEngine:
        """Connect to ``database`` (a file, or ":memory:") with a memory limit, a private spill
        folder and protab's SQL macros (docs of :class:`protab.Session`)."""
        config: dict[str, Any] = {"memory_limit": res.memory_limit(memory_limit)}
        threads = res.check_threads(threads)
        if threads is not None:
            config["threads"] = threads
        if storage_version is not None and not read_only:
            # new database files in a storage format every DuckDB since 1.2 reads, so that an
            # analyst's duckdb CLI (which may lag the Python package) opens them too
            config["storage_compatibility_version"] = storage_version
        key = res.database_key(database)
        spill = res.acquire_spill(key, temp_directory)
        config["temp_directory"] = spill.path
        try:
            con = duckdb.connect(database, read_only=read_only, config=config)
        except duckdb.Error as exc:
            res.release_spill(key, spill)
            raise InputError(f"cannot open the DuckDB database {database!r}: {exc}") from None
        show = _progress.enabled() if progress is None else bool(progress)
        engine = cls(con, label=database, bars=progress is not False, duckdb_bar=show)
        engine._db_key, engine._spill = key, spill
        try:
            con.execute(f"SET enable_progress_bar = {'true' if show else 'false'}")
            engine._install_sql(read_only)
        except BaseException:
            engine.close()
            raise
        return engine

    @classmethod
    def connect(cls, target: Any = None, **options: Any) -> DuckDBEngine:
        """:meth:`open` on ``database`` (or ``target``; default :data:`DEFAULT_DATABASE`)."""
        database = options.pop("database", DEFAULT_DATABASE) if target is None else target
        return cls.open(str(os.fspath(database)), **options)

    def _install_sql(self, read_only: bool) -> None:
        """protab's SQL macros (sql/protab.sql: temporary ones, which a read-only database takes;
        kept in a read-write database, as the analyst's CLI finds them) and the p-table tables
        of ckm() (temporary empty ones in a read-only database without them)."""
        from protab.engines.duckdb_ptable import _CREATE, upgrade_installed

        text = sql_text()
        if read_only:
            stored = self.con.execute(
                "SELECT count(*) FROM duckdb_tables() WHERE NOT temporary AND schema_name = 'main' "
                "AND table_name IN ('protab_ptable', 'protab_ptable_meta', 'protab_ptable_lookup')"
            ).fetchall()[0][0]
            if stored != 3:  # no installed p-table: empty ones, so that ckm() says so (never shadow one)
                text = _CREATE.replace("CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE IF NOT EXISTS") + text
        else:
            text = _CREATE + text.replace("CREATE OR REPLACE TEMP MACRO", "CREATE OR REPLACE MACRO")
        self.con.execute(text)
        if not read_only:
            upgrade_installed(self.con)  # a p-table installed by an older protab: add ckm()'s lookup

    def close(self) -> None:
        """Close the connection and remove the session's spill folder (idempotent)."""
        try:
            self.con.close()
        finally:
            spill, self._spill = self._spill, None
            if spill is not None:
                res.release_spill(self._db_key, spill)

    # -- statements ---------------------------------------------------------------------------
    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        self.con.execute(sql, list(params) if params else [])

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        return self.con.execute(sql, list(params) if params else []).fetchall()

    def arrow(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
        return self.con.sql(sql, params=list(params) if params else None).to_arrow_table()

    def user_query(self, sql: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        return self.frame(sql, params)

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

    def create_where_view(self, name: str, table: str, where: Sequence[tuple[str, str, Sequence[Any]]]) -> None:
        """DuckDB's views take no bound parameters: the condition is built with DuckDB's
        expression API, which writes the values as escaped constants."""
        cond = None
        for column, op, values in where:
            hit = duckdb.FunctionExpression(
                "list_contains",
                duckdb.ConstantExpression(list(values)),
                duckdb.ColumnExpression(column).cast(duckdb.sqltypes.VARCHAR),
            )
            c = duckdb.CoalesceOperator(hit if op == "in" else ~hit, duckdb.ConstantExpression(False))
            cond = c if cond is None else (cond & c)
        self.create_view(name, self.con.table(table).filter(cond).sql_query())

    def drop_table(self, name: str) -> None:
        self.con.execute(f"DROP TABLE IF EXISTS {name}")

    def drop_view(self, name: str) -> None:
        self.con.execute(f"DROP VIEW IF EXISTS {name}")

    def insert(self, name: str, select: str, params: Sequence[Any] | None = None) -> None:
        self.con.execute(f"INSERT INTO {name} {select}", list(params) if params else [])

    # -- relations written for the user: tables in one transaction, or temporary tables ------------
    def write_relations(self, outputs: Sequence[tuple[str, str, Sequence[Any]]], *, temporary: bool) -> None:
        """Tables in one transaction, or temporary tables of the connection (DuckDB's ``temp``
        catalog, found before a table of the database under the same name)."""
        swap_tables.write_relations(self.con, outputs, temporary=temporary)

    def keep_relations(self, names: Sequence[str], *, replace: bool, what: str) -> None:
        """The temporary tables copied into the database with their column comments, in one
        transaction."""
        swap_tables.keep_relations(self.con, names, replace=replace, what=what)

    def discard_relations(self, names: Sequence[str]) -> None:
        swap_tables.discard_relations(self.con, names)

    def row_order(self, name: str) -> str | None:
        """``rowid`` of a table (its rows in their stored order), None for a view."""
        return swap_tables.row_order(self.con, name)

    def overflow_errors(self) -> tuple[type[BaseException], ...]:
        return (duckdb.OutOfRangeException, duckdb.ConversionException)

    # -- the catalog ----------------------------------------------------------------------------
    def tables(self) -> list[str]:
        rows = self.rows(
            "SELECT table_name FROM duckdb_tables() WHERE NOT internal "
            "UNION SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1"
        )
        return [r[0] for r in rows if not r[0].startswith(("protab_", "_protab"))]

    def kind(self, name: str) -> str | None:
        rows = self.rows(
            "SELECT 'table' FROM duckdb_tables() WHERE table_name = ? AND NOT internal "
            "UNION ALL SELECT 'view' FROM duckdb_views() WHERE view_name = ? AND NOT internal",
            [name, name],
        )
        return str(rows[0][0]) if rows else None

    def columns(self, name: str) -> dict[str, str]:
        rows = self.rows(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? "
            f"AND NOT internal AND {_READ_FIRST} ORDER BY column_index",
            [name, name],
        )
        return {str(n): str(t) for n, t in rows}

    def register_files(self, name: str, paths: list[str], kind: str, materialize: bool,
                       step: Callable[[str], Any]) -> None:
        arg: Any = paths[0] if len(paths) == 1 else paths
        try:
            rel = self.con.read_parquet(arg) if kind == "parquet" else self.con.read_csv(arg)
            self.drop_relation(name)
            if materialize:
                tmp = f"_protab_reg_{uuid.uuid4().hex}"
                self.con.register(tmp, rel)
                try:
                    with step(f"copying {name} into the database"):
                        self.con.execute(f"CREATE TABLE {quote_ident(name)} AS SELECT * FROM {tmp}")
                finally:
                    self.con.unregister(tmp)
            else:
                rel.create_view(name, replace=True)
        except duckdb.Error as exc:
            raise InputError(f"register {name!r}: cannot read {show_values(paths)}: {exc}") from None

    def register_data(self, name: str, data: Any, step: Callable[[str], Any]) -> None:
        tmp = f"_protab_src_{uuid.uuid4().hex}"
        self.con.register(tmp, data)
        try:
            self.drop_relation(name)
            with step(f"copying {name} into the database"):
                self.con.execute(f"CREATE TABLE {quote_ident(name)} AS SELECT * FROM {quote_ident(tmp)}")
        finally:
            self.con.unregister(tmp)

    def register_alias(self, name: str, source: str) -> None:
        self.drop_relation(name)
        self.con.execute(f"CREATE VIEW {quote_ident(name)} AS SELECT * FROM {quote_ident(source)}")

    def drop_relation(self, name: str) -> None:
        kind = self.kind(name)
        if kind == "view":
            self.con.execute(f"DROP VIEW {quote_ident(name)}")
        elif kind == "table":
            self.con.execute(f"DROP TABLE {quote_ident(name)}")

    # -- record keys: a column comment -----------------------------------------------------------
    def key_tag(self, table: str) -> tuple[str, int] | None:
        rows = self.rows(
            "SELECT column_name, comment FROM duckdb_columns() WHERE table_name = ? "
            f"AND comment IS NOT NULL AND {_READ_FIRST}",
            [table, table],
        )
        for col, comment in rows:
            m = _KEY_COMMENT.match(str(comment))
            if m:
                return str(col), int(m.group(1))
        return None

    def write_key_column(self, table: str, name: str, expr: str, params: list[Any], modulus: int,
                         replace_column: bool) -> None:
        """The table rewritten with the key column (one CREATE TABLE AS, renamed over the old
        table and tagged, in one transaction)."""
        t, n = quote_ident(table), quote_ident(name)
        tmp = quote_ident(f"_protab_keys_{uuid.uuid4().hex}")
        select = f"* REPLACE ({expr} AS {n})" if replace_column else f"*, {expr} AS {n}"
        try:
            with self.transaction(), self.step(f"record keys for {table}"):
                self.con.execute(f"CREATE TABLE {tmp} AS SELECT {select} FROM {t}", params)
                self.drop_relation(table)
                self.con.execute(f"ALTER TABLE {tmp} RENAME TO {t}")
                self.tag_key_column(table, name, modulus)
        except duckdb.Error as exc:
            raise InputError(f"add_record_keys: could not add keys to table {table!r}: {exc}") from None

    def tag_key_column(self, table: str, column: str, modulus: int) -> None:
        self.con.execute(f"COMMENT ON COLUMN {quote_ident(table)}.{quote_ident(column)} "
                         f"IS 'protab record key; modulus={int(modulus)}'")

    # -- session relations, transactions, resources -------------------------------------------
    def temp_table(self, name: str, select: str, params: Sequence[Any]) -> None:
        self.con.execute(f"CREATE TEMP TABLE {quote_ident(name)} AS {select}", list(params))

    def drop_temp_table(self, name: str) -> None:
        self.con.execute(f"DROP TABLE IF EXISTS temp.main.{quote_ident(name)}")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All or nothing: on any error the database is left as it was."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        else:
            self.con.execute("COMMIT")

    @contextmanager
    def errors(self, table: str) -> Iterator[None]:
        """DuckDB running out of memory (and of spill space) becomes an InputError that says
        what to do; the request's temporary tables are gone by then (TableRun closes)."""
        try:
            yield
        except duckdb.OutOfMemoryException as exc:
            limit = self.con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
            reason = str(exc).splitlines()[0].rstrip(". ")
            raise InputError(
                f"table {table!r}: DuckDB ran out of memory for this request (memory_limit "
                f"{limit}, spill folder {self._spill.path if self._spill else '?'}): {reason}; "
                "raise Session(memory_limit=...), free disk space for spilling (or pass "
                "temp_directory= a larger disk), or publish fewer cells"
            ) from None

    @contextmanager
    def step(self, desc: str) -> Iterator[None]:
        """A progress bar (``protab._progress.bar``, tqdm on a terminal) fed by DuckDB's
        progress of the queries run inside the block; nothing when bars are off. Shows only
        ``desc`` and a percentage, never a seed or a value."""
        if not (self._bars and _progress.enabled()):
            yield
            return
        con = self.con
        con.execute("SET enable_progress_bar = true")
        con.execute("SET enable_progress_bar_print = false")
        stop = threading.Event()
        with bar(desc, total=100, unit="%") as b:

            def poll() -> None:
                shown = 0
                while not stop.wait(_POLL):
                    done = int(con.query_progress())  # -1 between queries
                    if done > shown:
                        b.update(done - shown)
                        shown = done

            watcher = threading.Thread(target=poll, name="protab-progress", daemon=True)
            watcher.start()
            try:
                yield
            finally:
                stop.set()
                watcher.join()
                con.execute("SET enable_progress_bar_print = true")
                con.execute(f"SET enable_progress_bar = {'true' if self._duckdb_bar else 'false'}")

    # -- outputs --------------------------------------------------------------------------------
    def database_files(self) -> list[str]:
        """The database by its real path and, for its .wal, also by the path as given (fixed
        when opened: a later chdir or symlink changes nothing)."""
        if self._db_key is None:
            return []
        return [self._db_key, self._db_key + ".wal", os.path.abspath(os.path.expanduser(self.label)) + ".wal"]

    def check_sink(self, raw: str, refuse: Refuse) -> Path | None:
        """The real file a ``path=`` output goes to (symbolic links followed), after the checks
        that it can be written and replaces no input: run before any work is done."""
        from protab._io import check_output_file, real_path

        refuse(Path(real_path(raw)), raw)
        return check_output_file(raw)

    @contextmanager
    def parquet_sink(self, run: Any, raw: str, target: Path | None) -> Iterator[None]:
        """The table ``run`` publishes is written at ``target`` as one Parquet file by DuckDB
        (through a temporary file beside it, renamed into place only when whole)."""
        from protab._io import atomic_path

        assert target is not None
        with atomic_path(target) as tmp:
            run.sink = str(tmp)
            yield

    def install_ptable(self, ptable: PTable, modulus: int) -> None:
        from protab.engines.duckdb_ptable import install_ptable

        install_ptable(self.con, ptable, modulus)
