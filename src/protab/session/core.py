"""Session: the DuckDB connection, registered microdata, record keys and the SQL roll-up.

This is the only module that holds a connection. Microdata never cross into Python: tables
are scanned once into *inner cells* (docs/design.md, idea 1), rolled up through the hierarchy
relations (idea 2), and perturbed by a join with the p-table relation (idea 3), all in SQL.
Results cross as Arrow into polars frames. User strings (table and column names, paths,
seeds, codes) are always quoted identifiers or bound parameters, never spliced into SQL.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import numbers
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
from scipy import sparse

from protab import _progress
from protab._frames import as_polars, require_columns
from protab._io import protected_form
from protab._progress import bar
from protab._sql import FLOAT_TYPES, code_sql, quote_ident, sql_text
from protab.errors import InputError, SpecError, show_values
from protab.ptable._install import install_ptable, upgrade_installed
from protab.rollup import TableRun
from protab.table import TableSpec

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:  # pragma: no cover
    from protab.hierarchy import Hierarchy
    from protab.magnitude import MagnitudeCKM, SensitivityRules
    from protab.ptable import PTable
    from protab.swapping import SwapSpec

#: The database file a Session opens when none is named (in the working directory).
DEFAULT_DATABASE = "protab.duckdb"

#: Seconds between two looks at DuckDB's progress of a long step.
_POLL = 0.2

#: A Session refuses table requests estimated to publish more cells than this
#: (``Session(max_cells=...)`` raises or lifts it).
DEFAULT_MAX_CELLS = 100_000_000

_KEY_COMMENT = re.compile(r"^protab record key; modulus=(\d+)$")
#: the relation a query of a plain name reads when a temporary table (e.g. swapped records not yet
#: kept) has the name of a table of the database: the temporary one (DuckDB's search path)
_READ_FIRST = ("database_name = (SELECT database_name FROM duckdb_columns() WHERE table_name = ? "
               "ORDER BY database_name <> 'temp' LIMIT 1)")
_NUMERIC = re.compile(
    r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|"
    r"FLOAT|DOUBLE|REAL|DECIMAL.*)$"
)
_INTEGER = re.compile(r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT)$")


class Session:
    """A DuckDB database holding microdata, and the protab operations on it.

    ``Session()`` opens :data:`DEFAULT_DATABASE` (``protab.duckdb`` in the working
    directory); ``Session(":memory:")`` keeps everything in memory. New database files are
    written in the storage format of ``storage_version`` (DuckDB 1.2 by default), so that
    older duckdb command lines can open them; ``None`` uses the library's newest format.

    Resources:

    ``max_cells``
        Refuse a table request estimated to publish more cells than this (default
        :data:`DEFAULT_MAX_CELLS`, 10^8; ``None``: no limit). The estimate is made after the
        scan of the microdata, before the roll-up, from the number of codes of each
        dimension: the sum over the published crossings of the product of their dimensions'
        code counts (margins included); with ``drop_empty`` at most the number of inner
        cells times the number of level combinations. A crossing of identifiers (person ×
        household × age) is refused at once instead of exhausting memory and disk.
    ``memory_limit``
        DuckDB's memory limit: a size such as ``"4GB"`` or ``"50%"``, or a number of bytes.
        Default: half of the machine's memory (or of the container's limit), so that DuckDB
        spills to disk before the system runs out of memory.
    ``temp_directory``
        Where DuckDB spills: protab makes a private folder
        ``protab-<user>/s-<pid>-<random>`` under this folder (default: the system's
        temporary folder, ``TMPDIR``) and removes it when the session closes — not a
        ``.tmp`` folder next to the database. Folders that a killed process left behind are
        removed by the next Session (on POSIX systems, where each live session holds a lock
        on its folder). Sessions of one process on the same database file share one folder
        (DuckDB opens the file once, with one configuration), removed with the last of them.
    ``progress``
        Progress bars. protab's own (tqdm, via ``protab._progress``) on long steps — checking
        ids and adding record keys, copying files or frames into the database — fed by
        DuckDB's progress of the running query; DuckDB's bar on other long queries.
        ``None`` (default): both shown when stderr is a terminal or ``PROTAB_PROGRESS=1``,
        neither with ``PROTAB_PROGRESS=0``; ``False``: none; ``True``: DuckDB's bar always,
        protab's as for ``None``. Bars show a step name and a percentage, never a seed,
        key or value.
    """

    def __init__(
        self,
        database: str | os.PathLike[str] = DEFAULT_DATABASE,
        *,
        read_only: bool = False,
        threads: int | None = None,
        progress: bool | None = None,
        storage_version: str | None = "v1.2.0",
        max_cells: int | float | None = DEFAULT_MAX_CELLS,
        memory_limit: str | int | None = None,
        temp_directory: str | os.PathLike[str] | None = None,
    ) -> None:
        self.database = str(database)
        self._read_paths: list[str] = []  # files registered in this session (outputs never replace them)
        self._spill: _SpillFolder | None = None
        self.max_cells = _check_max_cells(max_cells)
        config: dict[str, Any] = {"memory_limit": _memory_limit(memory_limit)}
        if threads is not None:
            if isinstance(threads, (bool, np.bool_)) or not isinstance(threads, numbers.Integral) or threads < 1:
                raise InputError(f"Session: threads must be a whole number of 1 or more, not {threads!r}")
            if threads > 16 * (os.cpu_count() or 1):
                raise InputError(
                    f"Session: threads={threads} is far more than this machine's {os.cpu_count()} cores "
                    f"(at most {16 * (os.cpu_count() or 1)})"
                )
            config["threads"] = int(threads)
        if storage_version is not None and not read_only:
            # new database files in a storage format every DuckDB since 1.2 reads, so that an
            # analyst's duckdb CLI (which may lag the Python package) opens them too
            config["storage_compatibility_version"] = storage_version
        self._db_key = _database_key(self.database)
        # the files outputs never replace, fixed now (a later chdir or symlink changes nothing):
        # the database by its real path and, for its .wal, also by the path as given
        self._db_files = [] if self._db_key is None else [
            self._db_key, self._db_key + ".wal", os.path.abspath(os.path.expanduser(self.database)) + ".wal"]
        spill = _acquire_spill(self._db_key, temp_directory)
        config["temp_directory"] = spill.path
        try:
            self._con = duckdb.connect(self.database, read_only=read_only, config=config)
        except duckdb.Error as exc:
            _release_spill(self._db_key, spill)
            raise InputError(f"cannot open the DuckDB database {self.database!r}: {exc}") from None
        self._spill = spill
        show = _progress.enabled() if progress is None else bool(progress)
        self._duckdb_bar = show  # DuckDB's own bar on long queries
        self._bars = progress is not False  # protab's bars on long steps (see _step)
        self._keys: dict[str, tuple[str, int]] = {}
        self._key_sum_sources: dict[str, str] = {}  # key-sum tables (key_sums) → the table they sum
        self._hierarchies: dict[Any, tuple[str, str]] = {}  # code and bridge tables per hierarchy
        try:
            self._con.execute(f"SET enable_progress_bar = {'true' if show else 'false'}")
            self._install_sql(read_only)
        except BaseException:
            self.close()
            raise

    def _install_sql(self, read_only: bool) -> None:
        """protab's SQL macros and p-table relations (temporary ones in a read-only database)."""
        text = sql_text()
        if read_only:
            text = text.replace("CREATE OR REPLACE MACRO", "CREATE OR REPLACE TEMP MACRO")
            stored = self._con.execute(
                "SELECT count(*) FROM duckdb_tables() WHERE NOT temporary AND schema_name = 'main' "
                "AND table_name IN ('protab_ptable', 'protab_ptable_meta', 'protab_ptable_lookup')"
            ).fetchall()[0][0]
            if stored == 3:  # an installed p-table: use it, do not shadow it with empty ones
                text = re.sub(r"CREATE TABLE IF NOT EXISTS[^;]*;", "", text)
            else:
                text = text.replace("CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE IF NOT EXISTS")
        self._con.execute(text)
        if not read_only:
            upgrade_installed(self._con)  # a p-table installed by an older protab: add ckm()'s lookup

    # -- lifecycle ------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection and remove the session's spill folder (idempotent)."""
        try:
            self._con.close()
        finally:
            spill, self._spill = self._spill, None
            if spill is not None:
                _release_spill(self._db_key, spill)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The underlying DuckDB connection (for SQL of your own)."""
        return self._con

    @classmethod
    def spark(cls, spark_session: Any, *, max_cells: int | float | None = DEFAULT_MAX_CELLS) -> "Session":
        """A Session whose tables live in Spark (a ``pyspark.sql.SparkSession``): the same
        methods for count tables (register Parquet paths or Spark tables, add_record_keys,
        tabulate, cell_key, perturb_inner, model_matrix), the same polars frames, cell for
        cell (protab.session.spark, docs/spark.md)."""
        from protab.session.spark import SparkSession

        return SparkSession(spark_session, max_cells=max_cells)

    def sql(self, query: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        """Run a query of your own and return its result as a polars frame."""
        return self._arrow(query, params)

    # -- catalog --------------------------------------------------------------------------
    def tables(self) -> list[str]:
        """Names of the tables and views in the database (protab's own left out)."""
        rows = self._con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE NOT internal "
            "UNION SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1"
        ).fetchall()
        return [r[0] for r in rows if not r[0].startswith(("protab_", "_protab"))]

    def exists(self, name: str) -> bool:
        return self._kind(name) is not None

    def _kind(self, name: str) -> str | None:
        rows = self._con.execute(
            "SELECT 'table' FROM duckdb_tables() WHERE table_name = ? AND NOT internal "
            "UNION ALL SELECT 'view' FROM duckdb_views() WHERE view_name = ? AND NOT internal",
            [name, name],
        ).fetchall()
        return str(rows[0][0]) if rows else None

    def columns(self, table: str) -> dict[str, str]:
        """Column name → DuckDB type of a registered table or view."""
        if not isinstance(table, str):
            self._require(table)
        rows = self._con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? "
            f"AND NOT internal AND {_READ_FIRST} ORDER BY column_index",
            [table, table],
        ).fetchall()
        if not rows:
            self._require(table)  # InputError naming the tables there are
        return {str(n): str(t) for n, t in rows}

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
        _missing_columns(table, cols, columns, what)
        return cols

    # -- registering microdata ------------------------------------------------------------
    def register(
        self,
        name: str,
        source: Any,
        *,
        replace: bool = False,
        materialize: bool = False,
    ) -> None:
        """Make ``source`` available as table ``name``, without pulling rows into Python.

        ``source`` may be a Parquet or CSV path, glob or list of paths (registered as a view
        over the files, or copied into the database with ``materialize=True``); a pyarrow
        Table, a polars or pandas DataFrame (copied into a database table through Arrow); or
        the name of a table or view already in the database.
        """
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"register: the table name must be a non-empty string, got {name!r}")
        if self.exists(name) and not replace:
            if isinstance(source, str) and source == name:
                return
            raise InputError(
                f"register: a table named {name!r} exists already; pass replace=True to replace it"
            )
        paths = _as_paths(source)
        with self._transaction():
            if paths is not None:
                self._register_files(name, paths, materialize)
                self._read_paths += [protected_form(p) for p in paths]
            elif isinstance(source, str):
                if not self.exists(source):
                    raise InputError(
                        f"register: {source!r} is neither an existing file nor a table of "
                        f"{self.database!r}"
                    )
                if source != name:
                    self._drop(name)
                    self._con.execute(
                        f"CREATE VIEW {quote_ident(name)} AS SELECT * FROM {quote_ident(source)}"
                    )
            else:
                self._register_frame(name, source)
        self._forget(name)

    def _forget(self, name: str) -> None:
        """Forget what the session knew of table ``name`` (its record keys, its key sums): it
        holds other records now."""
        self._keys.pop(name, None)
        self._drop_key_sums_of(name)
        self._key_sum_sources.pop(name, None)

    def _register_files(self, name: str, paths: list[str], materialize: bool) -> None:
        kinds = {_file_kind(p) for p in paths}
        if len(kinds) != 1 or None in kinds:
            raise InputError(
                f"register {name!r}: cannot tell the format of {show_values(paths)}; use files "
                "ending in .parquet or .csv (or .csv.gz, .tsv)"
            )
        kind = kinds.pop()
        arg: Any = paths[0] if len(paths) == 1 else paths
        try:
            rel = self._con.read_parquet(arg) if kind == "parquet" else self._con.read_csv(arg)
            self._drop(name)
            if materialize:
                tmp = f"_protab_reg_{uuid.uuid4().hex}"
                self._con.register(tmp, rel)
                try:
                    with self._step(f"copying {name} into the database"):
                        self._con.execute(f"CREATE TABLE {quote_ident(name)} AS SELECT * FROM {tmp}")
                finally:
                    self._con.unregister(tmp)
            else:
                rel.create_view(name, replace=True)
        except duckdb.Error as exc:
            raise InputError(f"register {name!r}: cannot read {show_values(paths)}: {exc}") from None

    def _register_frame(self, name: str, source: Any) -> None:
        if isinstance(source, pl.LazyFrame):
            source = source.collect()
        if isinstance(source, pl.DataFrame):
            source = source.to_arrow()
        type_name = type(source).__module__.split(".")[0]
        if not isinstance(source, (pa.Table, pa.RecordBatchReader)) and type_name != "pandas":
            raise InputError(
                f"register {name!r}: unsupported source of type {type(source).__name__}; give a "
                "path, a pyarrow Table, a polars or pandas DataFrame, or a table name"
            )
        tmp = f"_protab_src_{uuid.uuid4().hex}"
        self._con.register(tmp, source)
        try:
            self._drop(name)
            with self._step(f"copying {name} into the database"):
                self._con.execute(f"CREATE TABLE {quote_ident(name)} AS SELECT * FROM {quote_ident(tmp)}")
        finally:
            self._con.unregister(tmp)

    def _drop(self, name: str) -> None:
        kind = self._kind(name)
        if kind == "view":
            self._con.execute(f"DROP VIEW {quote_ident(name)}")
        elif kind == "table":
            self._con.execute(f"DROP TABLE {quote_ident(name)}")

    @contextmanager
    def _out_of_memory(self, table: str) -> Iterator[None]:
        """DuckDB running out of memory (and of spill space) becomes an InputError that says
        what to do; the request's temporary tables are gone by then (TableRun closes)."""
        try:
            yield
        except duckdb.OutOfMemoryException as exc:
            limit = self._con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
            reason = str(exc).splitlines()[0].rstrip(". ")
            raise InputError(
                f"table {table!r}: DuckDB ran out of memory for this request (memory_limit "
                f"{limit}, spill folder {self._spill.path if self._spill else '?'}): {reason}; "
                "raise Session(memory_limit=...), free disk space for spilling (or pass "
                "temp_directory= a larger disk), or publish fewer cells"
            ) from None

    def _check_sink(self, path: str | os.PathLike[str] | None) -> Path | None:
        """The real file a ``path=`` output goes to (symbolic links followed), after the checks
        that it can be written and replaces no input: run before any work is done."""
        if path is None:
            return None
        from protab._io import check_output_file, output_name, real_path

        raw = output_name(path)
        self._refuse_inputs(Path(real_path(raw)), raw)
        return check_output_file(raw)

    @contextmanager
    def _parquet_sink(self, run: TableRun, path: str | os.PathLike[str] | None, target: Path | None) -> Iterator[None]:
        """With a ``path`` (checked by :meth:`_check_sink`, which gave ``target``): the table
        ``run`` publishes is written there as one Parquet file by DuckDB (through a temporary
        file beside it, renamed into place only when whole)."""
        if target is None:
            yield
            return
        from protab._io import atomic_path

        with atomic_path(target) as tmp:
            run.sink = str(tmp)
            yield

    def _refuse_inputs(self, target: Path, raw: str) -> None:
        """InputError when writing ``target`` (a real path) would replace or change the
        session's database file (or its .wal) or files (or a folder of files, or a glob's
        files) registered in this session, however either is spelled."""
        from protab._io import real_path, replaces

        t = real_path(target)
        protected = [(p, "files registered in this session") for p in self._read_paths]
        protected += [(p, "the session's database") for p in self._db_files]
        for pattern, what in protected:
            if replaces(t, pattern):
                raise InputError(f"cannot write the table to {raw!r}: it would replace {what}; name another path")

    @contextmanager
    def _step(self, desc: str) -> Iterator[None]:
        """A progress bar (``protab._progress.bar``, tqdm on a terminal) fed by DuckDB's
        progress of the queries run inside the block; nothing when bars are off. Shows only
        ``desc`` and a percentage, never a seed or a value."""
        if not (self._bars and _progress.enabled()):
            yield
            return
        con = self._con
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

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """All or nothing: on any error the database is left as it was."""
        self._con.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            self._con.execute("ROLLBACK")
            raise
        else:
            self._con.execute("COMMIT")

    # -- record keys ----------------------------------------------------------------------
    def add_record_keys(
        self,
        table: str,
        id_column: str | None = None,
        seed: str | int | bytes | None = None,
        bits: int = 32,
        *,
        record_key_column: str | None = None,
        decimals: int | None = None,
        name: str = "rkey",
        replace: bool = False,
    ) -> None:
        """Give every record of ``table`` a record key, stored as the integer column ``name``.

        With ``id_column`` and ``seed``: a keyed hash of (seed, id) — the first 32 bits of
        SHA-256, a hash both DuckDB and Spark SQL have (``sql/protab.sql``) — modulo 2^bits.
        With ``record_key_column``: existing keys, either integers below 2^bits (the ONS
        style uses ``bits=8``) or, with ``decimals=d``, decimal keys in [0, 1] with d digits as
        made by R cellKey or tau-ARGUS, held exactly as integers below 10^d.

        The seed is a secret: it is bound as a parameter and never stored or shown. It must be
        a string with at least one non-whitespace character (used exactly as given, spaces
        included), or non-empty ``bytes`` (e.g. from ``os.urandom`` or a key file), which are
        used as their lowercase hex text: ``seed=b"\\x01\\xff"`` gives the same keys as
        ``seed="01ff"``, the text to hand the SQL macro in DuckDB or Spark. Numbers, booleans
        and whitespace-only strings are refused (as by the command line), so that a seed
        cannot silently differ between the API and the CLI (``12345`` against ``"12345"``).
        A view (e.g. over Parquet files) is copied into a database table to hold the keys.
        """
        self._require(table)
        if not isinstance(name, str) or not name:
            raise InputError("add_record_keys: name must be a non-empty column name")
        cols = self.columns(table)
        if name in cols and not replace and name != record_key_column:
            raise InputError(
                f"add_record_keys: table {table!r} has a column {name!r} already; pass "
                "replace=True to overwrite it or name= to choose another column"
            )
        if name in cols and replace and name != record_key_column:
            try:
                current = self.record_key(table)[0]
            except InputError:
                current = None
            if current != name:
                raise InputError(
                    f"add_record_keys: column {name!r} of table {table!r} is data, not record keys; "
                    "replace=True replaces record keys only: choose another name= for the keys"
                )
        if (id_column is None) == (record_key_column is None):
            raise InputError(
                "add_record_keys: give either id_column and seed (to compute keys) or "
                "record_key_column (to use existing keys)"
            )
        if id_column is not None:
            seed = _check_seed(table, seed)
            bits = _check_bits(bits)
            self._require_columns(table, [id_column], "id column")
            with self._step(f"checking the ids of {table}"):
                self._check_ids(table, id_column)
            expr = f"protab_record_key(?, {quote_ident(id_column)}, ?)::UINTEGER"
            params: list[Any] = [str(seed), bits]
            modulus = 2**bits
        else:
            assert record_key_column is not None
            self._require_columns(table, [record_key_column], "record key column")
            expr, params, modulus = self._existing_keys(
                table, record_key_column, cols[record_key_column], bits, decimals
            )
        self._write_key_column(table, name, expr, params, modulus, cols)

    def _check_ids(self, table: str, id_column: str) -> None:
        q = quote_ident(id_column)
        nulls, total, distinct = self._con.execute(
            f"SELECT count(*) FILTER (WHERE {q} IS NULL), count(*), count(DISTINCT {q}) "
            f"FROM {quote_ident(table)}"
        ).fetchall()[0]
        if nulls:
            raise InputError(
                f"add_record_keys: {nulls} record(s) of table {table!r} have a missing (NULL) "
                f"{id_column!r}; every record needs an identifier for its key"
            )
        if distinct != total:
            dups = self._con.execute(
                f"SELECT {q}, count(*) FROM {quote_ident(table)} GROUP BY 1 HAVING count(*) > 1 "
                "ORDER BY 2 DESC, 1 LIMIT 5"
            ).fetchall()
            n_dup = self._con.execute(
                f"SELECT count(*) FROM (SELECT {q} FROM {quote_ident(table)} GROUP BY 1 "
                "HAVING count(*) > 1)"
            ).fetchall()[0][0]
            shown = ", ".join(f"{v!r} ({c}×)" for v, c in dups)
            raise InputError(
                f"add_record_keys: column {id_column!r} of table {table!r} is not a unique "
                f"identifier: {n_dup} value(s) occur more than once, e.g. {shown}"
            )

    def _existing_keys(
        self, table: str, column: str, dtype: str, bits: int, decimals: int | None
    ) -> tuple[str, list[Any], int]:
        q, t = quote_ident(column), quote_ident(table)
        if not _NUMERIC.match(dtype):
            raise InputError(
                f"add_record_keys: record key column {column!r} of table {table!r} has type "
                f"{dtype}; keys must be numbers"
            )
        nulls = self._con.execute(f"SELECT count(*) FILTER (WHERE {q} IS NULL) FROM {t}").fetchall()[0][0]
        if nulls:
            raise InputError(
                f"add_record_keys: {nulls} record(s) of table {table!r} have no key in {column!r}"
            )
        if decimals is not None:
            if not isinstance(decimals, int) or not 1 <= decimals <= 15:
                raise InputError("add_record_keys: decimals must be an integer from 1 to 15")
            scale = 10**decimals
            bad = self._con.execute(
                f"SELECT count(*) FROM {t} WHERE {q} < 0 OR {q} > 1 "
                f"OR abs({q} * ? - round({q} * ?)) > 1e-6",
                [scale, scale],
            ).fetchall()[0][0]
            if bad:
                raise InputError(
                    f"add_record_keys: {bad} key(s) in column {column!r} of table {table!r} are "
                    f"not decimals in [0, 1] with at most {decimals} digits"
                )
            return f"CAST(round({q} * ?) AS BIGINT)", [scale], scale
        bits = _check_bits(bits)
        if not _INTEGER.match(dtype):
            raise InputError(
                f"add_record_keys: record key column {column!r} of table {table!r} has type "
                f"{dtype}; give decimals= for decimal keys in [0, 1], or use integer keys"
            )
        bad = self._con.execute(
            f"SELECT count(*) FROM {t} WHERE {q} < 0 OR {q} >= ?", [2**bits]
        ).fetchall()[0][0]
        if bad:
            raise InputError(
                f"add_record_keys: {bad} key(s) in column {column!r} of table {table!r} lie "
                f"outside 0 … 2^{bits} − 1; pass the right bits="
            )
        return f"CAST({q} AS UBIGINT)", [], 2**bits

    def _write_key_column(
        self, table: str, name: str, expr: str, params: list[Any], modulus: int, cols: dict[str, str]
    ) -> None:
        t, n = quote_ident(table), quote_ident(name)
        tmp = quote_ident(f"_protab_keys_{uuid.uuid4().hex}")
        select = f"* REPLACE ({expr} AS {n})" if name in cols else f"*, {expr} AS {n}"
        try:
            with self._transaction(), self._step(f"record keys for {table}"):
                self._con.execute(f"CREATE TABLE {tmp} AS SELECT {select} FROM {t}", params)
                self._drop(table)
                self._con.execute(f"ALTER TABLE {tmp} RENAME TO {t}")
                self._con.execute(
                    f"COMMENT ON COLUMN {t}.{n} IS 'protab record key; modulus={int(modulus)}'"
                )
        except duckdb.Error as exc:
            raise InputError(f"add_record_keys: could not add keys to table {table!r}: {exc}") from None
        self._keys[table] = (name, modulus)
        self._drop_key_sums_of(table)  # their key sums are of the old keys

    #: Columns of a key-sum table (see :meth:`key_sums`)
    KEY_SUM_RECORDS, KEY_SUM_KEY = "protab_records", "protab_key_sum"

    def key_sums(self, table: str, columns: Sequence[str], *, name: str | None = None) -> str:
        """Aggregate the records of ``table`` to one row per combination of ``columns`` with
        its number of records and its key sum modulo the key modulus, in a temporary table
        of this session; returns its name.

        A cell key is the sum of its records' keys modulo the modulus (docs/methods.md §1),
        and sums of residues are residues of sums, so :meth:`cell_key`, :meth:`tabulate` and
        :meth:`model_matrix` on this table give every count table of ``columns`` (any
        hierarchies, formula or ``where`` on them) byte for byte as they would on the records,
        from far fewer rows. It holds counts only: weights and sums need the records. The key
        sums are as secret as the keys: the table lives in this session only (TEMP) and is
        never a dimension of a table. It is a snapshot: new record keys (add_record_keys) or a
        new ``table`` (register) drop it; other changes to ``table`` are not seen.
        ``table`` may itself be a key-sum table (its counts and key sums are summed)."""
        columns = list(columns)
        if not columns:
            raise SpecError(f"key_sums: name at least one column of table {table!r} to keep")
        if len(set(columns)) < len(columns):
            raise SpecError(f"key_sums: columns {show_values(columns)} name a column twice")
        if name is not None and (not isinstance(name, str) or not name):
            raise SpecError("key_sums: name must be a non-empty table name (or None for a generated one)")
        cols = self._require_columns(table, columns)
        key, modulus = self.record_key(table)
        clash = [c for c in columns if c in (key, self.KEY_SUM_RECORDS, self.KEY_SUM_KEY)]
        if clash:
            raise SpecError(f"key_sums: column {clash[0]!r} of table {table!r} cannot be kept: it is the "
                            "record key or a name the key-sum table uses for itself")
        name = name or f"_protab_key_sums_{uuid.uuid4().hex}"
        if name == table:
            raise SpecError(f"key_sums: the key sums of {table!r} cannot replace {table!r} itself; choose another name")
        if name in self._key_sum_sources:
            self.drop_key_sums(name)
        elif self.exists(name):
            raise SpecError(f"key_sums: a table or view named {name!r} exists already; choose another name")
        keep = ", ".join(quote_ident(c) for c in columns)
        # a float column groups by its text too: -0.0 and 0.0 (NaN and -NaN) are one value to
        # GROUP BY but two to a where-filter, which compares the text
        group = [quote_ident(c) for c in columns] + [
            f"CAST({quote_ident(c)} AS VARCHAR)" for c in columns if cols[c].upper() in FLOAT_TYPES]
        records = (f"CAST(sum({self.KEY_SUM_RECORDS}) AS BIGINT)" if table in self._key_sum_sources
                   else "count(*)")
        # keys above 32 bits summed wide (an engine whose BIGINT sums stay BIGINT could overflow)
        k = f"CAST({quote_ident(key)} AS HUGEINT)" if modulus > 2**32 else quote_ident(key)
        self._temp_table(
            name,
            f"SELECT {keep}, {records} AS {self.KEY_SUM_RECORDS}, CAST(sum({k}) % ? AS BIGINT) AS {self.KEY_SUM_KEY} "
            f"FROM {quote_ident(table)} GROUP BY {', '.join(group)}",
            [modulus],
        )
        self._keys[name] = (self.KEY_SUM_KEY, modulus)
        self._key_sum_sources[name] = table
        return name

    def drop_key_sums(self, name: str) -> None:
        """Drop a key-sum table made by :meth:`key_sums` (it goes with the session anyway)."""
        if name not in self._key_sum_sources:
            raise SpecError(f"drop_key_sums: {name!r} is not a key-sum table of this session")
        self._drop_temp_table(name)
        del self._key_sum_sources[name]
        self._keys.pop(name, None)

    def _temp_table(self, name: str, select: str, params: Sequence[Any]) -> None:
        """A temporary table of this session named ``name`` holding ``select``'s rows."""
        self._con.execute(f"CREATE TEMP TABLE {quote_ident(name)} AS {select}", list(params))

    def _drop_temp_table(self, name: str) -> None:
        self._con.execute(f"DROP TABLE IF EXISTS temp.main.{quote_ident(name)}")

    def _drop_key_sums_of(self, table: str) -> None:
        """Drop the key-sum tables made from ``table`` (and from those): its records or keys changed."""
        for name, source in list(self._key_sum_sources.items()):
            if source == table and name in self._key_sum_sources:
                self.drop_key_sums(name)
                self._drop_key_sums_of(name)

    def record_key(self, table: str) -> tuple[str, int]:
        """(column, modulus) of the record keys of ``table``; InputError if it has none."""
        if table in self._keys:
            return self._keys[table]
        self._require(table)
        rows = self._con.execute(
            "SELECT column_name, comment FROM duckdb_columns() WHERE table_name = ? "
            f"AND comment IS NOT NULL AND {_READ_FIRST}",
            [table, table],
        ).fetchall()
        for col, comment in rows:
            m = _KEY_COMMENT.match(str(comment))
            if m:
                self._keys[table] = (str(col), int(m.group(1)))
                return self._keys[table]
        raise InputError(
            f"table {table!r} has no record keys; call Session.add_record_keys({table!r}, "
            "id_column=..., seed=...) or add_record_keys(..., record_key_column=...) first"
        )

    # -- hierarchies from data ------------------------------------------------------------
    def hierarchy_from_columns(self, table: str, columns: Sequence[str], *, root: str = "Total") -> "Hierarchy":
        """A hierarchy from nested columns of the data, coarsest first.

        ``["region", "municipality"]`` makes Total → region → municipality from the distinct
        (region, municipality) pairs; a municipality found in two regions is an error.
        """
        from protab.hierarchy import Hierarchy

        columns = list(columns)
        if len(columns) < 1:
            raise InputError("hierarchy_from_columns: name at least one column")
        cols = self._require_columns(table, columns)
        t = quote_ident(table)
        code = {c: code_sql(c, cols[c]) for c in columns}  # NaN is missing, as NULL
        parts = [f"SELECT CAST(? AS VARCHAR) AS parent, CAST({code[columns[0]]} AS VARCHAR) AS child FROM {t}"]
        params: list[Any] = [root]
        for coarse, fine in zip(columns, columns[1:]):
            parts.append(
                f"SELECT CAST({code[coarse]} AS VARCHAR), CAST({code[fine]} AS VARCHAR) FROM {t}"
            )
        pairs = self._arrow(f"SELECT DISTINCT * FROM ({' UNION ALL '.join(parts)}) ORDER BY 1, 2", params)
        if pairs["child"].null_count() or pairs["parent"].null_count():
            raise InputError(
                f"hierarchy_from_columns: columns {show_values(columns)} of table {table!r} have "
                "missing (NULL or NaN) codes; fill them in or drop those records"
            )
        return Hierarchy.from_parent_child(pairs, root=root)

    def swap(
        self, table: str, spec: "SwapSpec", *, seed: str | int, out: str, log: str | None = None,
        replace: bool = False, temporary: bool = False,
    ) -> dict[str, Any]:
        """Targeted record swapping of whole households (docs/swapping.md; after sdcMicro's
        recordSwap): writes the swapped microdata to ``out`` and the swap log (internal) to
        ``log`` in one transaction, and returns the summary (households, risky, swapped,
        achieved swap rate, share of risky households swapped, per-level counts, households
        without a donor). ``out`` keeps the record keys of ``table``, so the swapped data feed
        the cell key method directly (TRS + CKM, the census combination). With
        ``temporary=True`` both are temporary tables of this session (what its tables read
        under those names) until :func:`protab.swapping.persist_swap` keeps them."""
        from protab.swapping import swap as _swap

        self._require(table)
        try:
            key: tuple[str, int] | None = self.record_key(table)
        except InputError:
            key = None
        with self._out_of_memory(table), self._step("swapping households"):
            summary = _swap(self._con, table, spec, seed=seed, out=out, log=log, replace=replace,
                            temporary=temporary)
        self._keys.pop(out, None)
        if key is not None and key[0] in self.columns(out):  # the swapped records keep their keys
            self._con.execute(
                f"COMMENT ON COLUMN {quote_ident(out)}.{quote_ident(key[0])} "
                f"IS 'protab record key; modulus={int(key[1])}'"
            )
        return summary

    def hierarchy_from_grid(
        self,
        table: str,
        column: str,
        levels: Sequence[str] = ("10km", "100km"),
        *,
        form: str = "short",
        root: str = "Total",
    ) -> "Hierarchy":
        """A grid hierarchy (Total > 100 km > 10 km > the column's squares) from the distinct
        INSPIRE codes of ``table.column`` (docs/grid.md); malformed codes are counted in SQL
        and reported with their counts, nothing built."""
        from protab import grid

        self._require_columns(table, [column], "grid column")
        t, q = quote_ident(table), quote_ident(column)
        # one scan: the distinct codes with their records, then the code check on those alone
        found = self._arrow(
            f"SELECT code, n, coalesce({grid.valid_code_sql('code')}, false) AS ok "
            f"FROM (SELECT CAST({q} AS VARCHAR) AS code, count(*) AS n FROM {t} GROUP BY 1) ORDER BY code"
        )
        bad = found.filter(~pl.col("ok")).sort(["n", "code"], descending=[True, False], nulls_last=True)
        if bad.height:
            top = list(bad.select("code", "n").head(5).iter_rows())
            raise grid.malformed_codes_error(column, top, bad.height, int(bad["n"].sum()))
        return grid.grid_hierarchy(found["code"].alias(column), levels, form=form, root=root)

    def codes(self, table: str, column: str) -> list[str]:
        """The distinct non-missing values of a column (NULL and NaN left out), as strings, sorted."""
        cols = self._require_columns(table, [column])
        rows = self._con.execute(
            f"SELECT DISTINCT CAST({code_sql(column, cols[column])} AS VARCHAR) FROM {quote_ident(table)} "
            "ORDER BY 1"
        ).fetchall()
        return [r[0] for r in rows if r[0] is not None]

    # -- tabulation -----------------------------------------------------------------------
    def _run(
        self,
        table: str,
        spec: TableSpec,
        *,
        keys: bool = False,
        extend0: bool | str = False,
        structural: pl.DataFrame | None = None,
        rollup: bool = True,
        top_k: int | None = None,
        holding: str | None = None,
    ) -> TableRun:
        """Check a table request against the catalog and prepare its SQL run."""
        cols = self.columns(table)  # one look at the catalog
        if not isinstance(spec, TableSpec):
            raise SpecError(f"expected a protab.TableSpec, not {type(spec).__name__}")
        summed = table in self._key_sum_sources
        if summed:  # counts and key sums per cell (key_sums): the records' counts and cell keys
            if spec.weight is not None or spec.sums or spec.freq is not None or holding is not None:
                raise SpecError(
                    f"table {table!r} holds record counts and key sums per cell (Session.key_sums); "
                    "weights, sums, frequencies and holdings need the records: ask the records' table"
                )
            if self.KEY_SUM_RECORDS in [*spec.columns, *(c for c, _, _ in spec.where)]:
                raise SpecError(f"column {self.KEY_SUM_RECORDS!r} of table {table!r} counts the records of its "
                                "rows: it is neither a dimension nor a filter")
            spec = dataclasses.replace(spec, freq=self.KEY_SUM_RECORDS)
        _missing_columns(table, cols, spec.columns, "dimension column")
        values = ([spec.weight] if spec.weight else []) + list(spec.sums)
        _missing_columns(table, cols, values + ([spec.freq] if spec.freq else []), "value column")
        for v in values:
            if not _NUMERIC.match(cols[v]):
                raise InputError(
                    f"column {v!r} of table {table!r} has type {cols[v]}; weights and sums must "
                    "be numeric"
                )
        if spec.freq is not None and not _INTEGER.match(cols[spec.freq]):
            raise InputError(
                f"frequency column {spec.freq!r} of table {table!r} has type "
                f"{cols[spec.freq]}; frequencies must be integers"
            )
        if holding is not None:
            _missing_columns(table, cols, [holding], "holding column")
        _missing_columns(table, cols, [c for c, _, _ in spec.where], "where column")
        used = [*spec.columns, *values] + ([spec.freq] if spec.freq else []) + ([holding] if holding else [])
        used += [c for c, _, _ in spec.where]
        try:
            secret = self.record_key(table)[0]
        except InputError:
            secret = None
        if secret is not None and secret in used:
            raise SpecError(
                f"column {secret!r} of table {table!r} holds the record keys, which are secret: it "
                "cannot be a dimension, a weight, a sum or a frequency of a table"
            )
        key = None
        if keys:
            if spec.freq is not None and not summed:
                raise SpecError(
                    "the cell key method needs microdata (one row per record with its key); "
                    f"table {table!r} is aggregated (freq={spec.freq!r})"
                )
            key = self.record_key(table)
        if structural is not None:
            structural = as_polars(structural, "structural zeros")
            require_columns(structural, spec.columns, "structural zeros")
        return TableRun(
            self._con, table, spec, key=key, extend0=extend0, structural=structural,
            cache=self._hierarchies, types=cols, max_cells=self.max_cells, rollup=rollup, top_k=top_k,
            holding=holding,
        )

    def tabulate(
        self, table: str, spec: TableSpec, *, cell_keys: bool = False, top_k: int | None = None,
        path: str | os.PathLike[str] | None = None,
    ) -> pl.DataFrame | str:
        """Every published cell of ``spec`` with its original count (and weight sum, sums).

        One scan of the microdata to inner cells, then a roll-up through the hierarchy
        relations, in SQL. Columns: the dimensions (codes, the margin code at each top), one
        ``<dim>_level`` per dimension (0 = total), ``n``, then ``w`` (weighted count) and the
        sums if the spec asks for them, and ``cell_key`` (the integer key sum modulo the key
        modulus) only when ``cell_keys=True``. Unprotected: for trusted use only.

        ``top_k`` (1..6, magnitude tables): per sums column ``s`` also ``s_w`` (weighted sum,
        with a weight), ``s_nonzero`` (non-zero contributors), ``s_top`` (the ``top_k``
        largest contributions, largest |x| first), ``s_max``, ``s_min`` — from the same scan;
        margins merge their children's lists (docs/methods.md §1.8).

        ``path``: write the table there as Parquet instead (see :meth:`cell_key`).
        """
        if top_k is not None:
            from protab.magnitude import MAX_TOP_K

            if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or not 1 <= top_k <= MAX_TOP_K:
                raise SpecError(f"tabulate: top_k must be a whole number from 1 to {MAX_TOP_K}")
            if not spec.sums:
                raise SpecError("tabulate: top_k lists the largest contributions of sums; give the TableSpec sums=[...]")
        target = self._check_sink(path)
        with self._out_of_memory(table), self._run(table, spec, keys=cell_keys, top_k=top_k) as run:
            with self._parquet_sink(run, path, target):
                frame = run.published()
        return frame if path is None else os.fspath(path)

    def sensitivity(
        self, table: str, spec: TableSpec, rules: "SensitivityRules", *, diagnostics: bool = False
    ) -> pl.DataFrame:
        """Every published cell of ``spec`` with its original values and, per sums column
        ``s``, ``s_sensitive`` (True when a rule holds) and ``s_rule`` (the rules that hold,
        comma-separated: frequency, dominance(n), p%, pq, zero). Rules are SQL over the top-k
        lists of the one scan (docs/methods.md §6.2). Unprotected: for trusted use only.

        ``diagnostics=True`` adds what the verdicts read, for the methodologist (never
        published: cell_key and protect do not have them): ``s_dominance_<n>``, the share of
        the n largest contributions in the total X, for every n a dominance rule names and
        n = 1, 2 for the p% and pq rules (GaussSuppression's ``dominant1``, ``dominant2``),
        weighted and of holdings as the rules take them; ``s_contributors``, the contributors
        the frequency rule counts."""
        from protab.magnitude import SensitivityRules

        if not isinstance(rules, SensitivityRules):
            raise SpecError(f"sensitivity: rules must be a protab.SensitivityRules, not {type(rules).__name__}")
        if not spec.sums:
            raise SpecError("sensitivity: the rules judge magnitudes; give the TableSpec sums=[...]")
        if not isinstance(diagnostics, bool):
            raise SpecError("sensitivity: diagnostics must be True or False")
        with self._out_of_memory(table), self._run(
            table, spec, keys=False, top_k=rules.top_k, holding=rules.holding
        ) as run:
            return run.sensitivity(rules, diagnostics)

    def inner_cells(self, table: str, spec: TableSpec, *, extend0: bool = False) -> pl.DataFrame:
        """The inner cells (finest crossing) of ``spec``: dims, n, w, sums.

        Only cells that hold records, unless ``extend0``: then also a zero cell for every
        combination of the codes that occur (SSBtools' Extend0).
        """
        with self._out_of_memory(table), self._run(table, spec, extend0=extend0, rollup=False) as run:
            return run.inner_frame()

    def model_matrix(
        self,
        table: str,
        spec: TableSpec,
        *,
        extend0: bool | str = True,
        structural_zeros: pl.DataFrame | None = None,
    ) -> tuple[sparse.csc_matrix, pl.DataFrame, pl.DataFrame]:
        """The dummy matrix X (inner × published, z = Xᵀy) of a table, from the microdata.

        Returns ``(X, inner, published)``: ``inner`` holds the inner cells (rows of X: dims,
        n …), ``published`` the published cells (columns of X: dims, levels, n …), so that
        ``X.T @ inner["n"] == published["n"]``. X is built from the (inner, published) pairs
        of the SQL roll-up, which cross as Arrow arrays. With ``extend0`` (default) zero inner
        cells are added for every combination of occurring codes, except the combinations in
        ``structural_zeros`` (a frame with the dimension columns); ``extend0="all"`` counts
        every leaf of a hierarchy or code list as occurring (GaussSuppression's "all").
        """
        if extend0 not in (True, False, "all"):
            raise SpecError(f"model_matrix: extend0 must be True, False or 'all', not {extend0!r}")
        with self._out_of_memory(table), self._run(table, spec, extend0=extend0, structural=structural_zeros) as run:
            inner = run.inner_frame()
            published = run.published()
            X = run.matrix()  # coefficients of non-tree hierarchies (−1, 2 …) included
        return X, inner, published

    def cell_key(
        self,
        table: str,
        spec: TableSpec,
        ptable: "PTable",
        *,
        original: bool = False,
        threshold: float | None = None,
        magnitude: "MagnitudeCKM | None" = None,
        rules: "SensitivityRules | None" = None,
        path: str | os.PathLike[str] | None = None,
    ) -> pl.DataFrame | str:
        """Counts (and magnitudes) protected by the cell key method: every published cell.

        The cell key of a cell is the sum of its records' keys modulo the key modulus; its
        perturbed count is n + v from the p-table row of n's row class whose interval holds
        the cell key (a SQL join; the p-table's interval convention decides boundaries).
        Columns: the dimensions, their levels, ``n_pert`` and, with a weight, ``w_pert`` = the
        perturbed count times the cell's mean weight (cellKey and tau-ARGUS). ``n``/``w`` only
        with ``original=True``. The same records give the same value in every table.

        ``threshold`` (the ONS rule): a cell whose perturbed count is *below* it is published
        as null (``n_pert`` and ``w_pert``), i.e. blanked when ``n_pert < threshold``, compared
        exactly for any real threshold: counts are integers, so ``threshold=2.7`` blanks 0, 1
        and 2 (as ``threshold=3`` does) and publishes 3. It must be a finite number of 0 or
        more (``threshold=0`` blanks nothing); booleans, strings, NaN and ±inf are refused.
        A negative (signed) cell of a non-tree hierarchy is judged by its size: blanked when
        ``|n_pert| < threshold``.

        Magnitudes (docs/methods.md §1.8): a spec with ``sums`` needs ``magnitude=`` (a
        :class:`protab.MagnitudeCKM`); every sums column ``s`` then gets ``s_pert`` (the
        perturbed sum, weighted with a weight) and ``s_mean_pert`` (``s_pert`` over the
        perturbed count, or over ``w_pert`` with a weight), both blanked with ``n_pert``;
        ``s`` (or ``s_w``) itself only with ``original=True``. ``rules=`` (a
        :class:`protab.SensitivityRules`) adds ``s_sensitive``/``s_rule``; sensitive cells get
        the extra noise ``mu_c`` of the magnitude parameters.

        ``path``: the table is not returned but written there as Parquet by the engine itself
        (the same columns and rows in the same order; nothing passes through Python, for
        tables too large to hold as a frame) and the path is returned. DuckDB writes one
        file, renamed into place only when whole; on Spark the executors write a folder of
        part files (docs/spark.md).
        """
        from protab.magnitude import MagnitudeCKM, SensitivityRules, check_ptable_kind
        from protab.ptable import PTable

        check_ptable_kind(ptable, "cell_key")
        if not isinstance(ptable, PTable):
            raise InputError(f"cell_key: ptable must be a protab.PTable, not {type(ptable).__name__}")
        if magnitude is not None and not isinstance(magnitude, MagnitudeCKM):
            raise SpecError(f"cell_key: magnitude must be a protab.MagnitudeCKM, not {type(magnitude).__name__}")
        if rules is not None and not isinstance(rules, SensitivityRules):
            raise SpecError(f"cell_key: rules must be a protab.SensitivityRules, not {type(rules).__name__}")
        if spec.sums and magnitude is None:
            raise SpecError(
                f"cell_key: the TableSpec has sums {list(spec.sums)} but no magnitude parameters; pass "
                "magnitude=protab.MagnitudeCKM(...) to perturb them, or leave sums out of the spec "
                "(sums are never published unperturbed)"
            )
        if (magnitude is not None or rules is not None) and not spec.sums:
            raise SpecError("cell_key: magnitude= and rules= perturb and judge sums; give the TableSpec sums=[...]")
        below = _check_threshold(table, threshold)
        top_k = None
        if spec.sums:
            top_k = max(magnitude.top_k if magnitude else 1, rules.top_k if rules else 1)
        target = self._check_sink(path)
        with self._out_of_memory(table), self._run(
            table, spec, keys=True, top_k=top_k, holding=rules.holding if rules else None
        ) as run:
            with self._parquet_sink(run, path, target):
                frame = run.perturb(ptable, original=original, threshold=below, magnitude=magnitude, rules=rules)
        return frame if path is None else os.fspath(path)

    def perturb_inner(
        self, table: str, spec: TableSpec, ptable: "PTable", *, original: bool = False,
        path: str | os.PathLike[str] | None = None,
    ) -> pl.DataFrame | str:
        """Perturb the *inner* cells through ``ptable`` and publish margins as their sums.

        Each inner cell's noise comes from its own cell key, so the same inner cell moves the
        same way in every table; margins are sums of perturbed inner cells, so the table is
        additive (unlike :meth:`cell_key`, whose margins are perturbed on their own). This is
        how Barnardisation, small cell adjustment and other pre-aggregation noise run as a
        p-table join. Columns as :meth:`cell_key`; ``path`` as there.
        """
        from protab.magnitude import check_ptable_kind
        from protab.ptable import PTable

        check_ptable_kind(ptable, "perturb_inner")
        if not isinstance(ptable, PTable):
            raise InputError(f"perturb_inner: ptable must be a protab.PTable, not {type(ptable).__name__}")
        if spec.sums:
            raise SpecError(
                f"perturb_inner perturbs counts; the TableSpec has sums {list(spec.sums)}, which it would "
                "publish unperturbed: protect magnitudes with cell_key(..., magnitude=protab.MagnitudeCKM(...)), "
                "or leave sums out of the spec"
            )
        target = self._check_sink(path)
        with self._out_of_memory(table), self._run(table, spec, keys=True) as run:
            with self._parquet_sink(run, path, target):
                frame = run.perturb_inner(ptable, original=original)
        return frame if path is None else os.fspath(path)

    def suppress(
        self,
        table: str,
        spec: TableSpec | Sequence[TableSpec],
        *,
        rules: "SensitivityRules | None" = None,
        min_frequency: int | None = None,
        protect_zeros: bool = False,
        forced: Any = None,
        never: Any = None,
        singleton_method: str | None = None,
        cost: Any = None,
        audit: bool = False,
        protection_range: float | None = None,
        interval_protection: bool = False,
    ) -> pl.DataFrame:
        """Cell suppression: primary cells from rules, secondary ones by Gaussian elimination
        (docs/methods.md §6.4; :func:`protab.suppression.gauss`).

        Frequency tables (no sums): cells with ``0 < n < min_frequency`` are primary (zero
        cells too with ``protect_zeros``), as GaussSuppression's SuppressSmallCounts with
        ``maxN = min_frequency - 1``: empty inner cells are added (extend0; with
        ``protect_zeros`` also for codes a hierarchy or code list names and the data lack, whose
        cells are zeros to protect: the package's extend0 = "all"), and the singletons
        of ``singleton_method`` "anySum" (default) are the inner cells of one record, or the
        empty ones with ``protect_zeros`` (as the package). Magnitude tables (sums): a cell is
        primary where ``rules`` mark any sums variable sensitive; candidates are tried in
        decreasing |value| of the first sums variable (CandidatesNum); inner cells of one record
        are singletons, handled by "numttHTT" by default (the package's default for magnitude
        tables).
        ``forced`` / ``never``: frames of cells (the dimension columns, codes as published)
        that must be / must not be suppressed. Returns every published cell with its original
        values, null where suppressed, and ``suppressed``: "primary" (forced cells included),
        "secondary" or "no". For trusted use: publish the nulls, not the labels.

        ``cost``: the order in which candidate cells are kept published — "frequency" (the
        default of frequency tables: larger counts first, GaussSuppression's CandidatesDefault),
        "value" (the default with sums: larger |value| first, CandidatesNum), or one number of
        0 or more per published cell (publication order of ``model_matrix``; larger = dearer to
        suppress, weighting the frequency order).

        ``audit=True`` adds, per suppressed cell, the interval an attacker derives from the
        published cells and non-negative inner cells (``lo``, ``up``: two LPs per cell with
        HiGHS, :func:`protab.suppression.intervals`) and ``protected``: a primary cell needs
        ``up - lo >= protection_range`` (if given) and, when the rules hold a p% rule, the
        p% protection levels of tau-ARGUS both ways (from its two largest contributions); no
        suppressed cell may be exactly disclosed. ``interval_protection=True`` then adds
        suppressions (labelled "secondary") until every primary cell is protected
        (:func:`protab.suppression.protect`). The LPs grow with the table: meant for tables of
        up to some thousands of cells.

        Linked tables: given a list of TableSpecs over the same microdata, the tables are
        suppressed together as one table (the union of their dimensions and crossings, as
        GaussSuppression's global method), so a cell common to several tables is suppressed in
        all or in none and no table helps to disclose a primary cell of another; the result is
        a list of frames, one per spec. A dimension shared by the specs must have the same
        hierarchy (or none) in each; weight, sums, freq, null_code, total and drop_empty must agree.
        """
        from protab.magnitude import SensitivityRules
        from protab.suppression import candidates_default, candidates_num, gauss

        if isinstance(spec, (list, tuple)):
            combined = _linked_spec(spec)
            if cost is not None and not isinstance(cost, str):
                raise SpecError("suppress: linked tables take cost='frequency' or 'value', not one number per cell")
            out = self.suppress(table, combined, rules=rules, min_frequency=min_frequency,
                                protect_zeros=protect_zeros, forced=forced, never=never,
                                singleton_method=singleton_method, cost=cost, audit=audit,
                                protection_range=protection_range, interval_protection=interval_protection)
            return [_cells_of(out, combined, s) for s in spec]  # type: ignore[return-value]
        if not isinstance(spec, TableSpec):
            raise SpecError(f"suppress: expected a protab.TableSpec, not {type(spec).__name__}")
        if spec.sums:
            if not isinstance(rules, SensitivityRules):
                raise SpecError("suppress: a table with sums needs rules=protab.SensitivityRules(...)")
            if min_frequency is not None:
                raise SpecError("suppress: min_frequency is for frequency tables; put it in the rules for sums")
        else:
            if rules is not None:
                raise SpecError("suppress: rules judge sums; a frequency table takes min_frequency=")
            if isinstance(min_frequency, bool) or not isinstance(min_frequency, numbers.Integral) \
                    or min_frequency < 1:
                raise SpecError("suppress: a frequency table needs min_frequency, a whole number of 1 or more")
        for flag, value in (("protect_zeros", protect_zeros), ("audit", audit),
                            ("interval_protection", interval_protection)):
            if not isinstance(value, bool):
                raise SpecError(f"suppress: {flag} must be True or False")
        if protection_range is not None and not (audit or interval_protection):
            raise SpecError("suppress: protection_range is a requirement of the audit; pass audit=True "
                            "or interval_protection=True")
        if spec.sums and rules is not None and rules.weights is not None and spec.weight is None:
            raise SpecError("suppress: the rules weigh contributions (weights=...) but the TableSpec has no weight")
        # empty cells are protected only where zero cells are a rule: then they need inner cells
        zero_rule = bool(spec.sums) and rules is not None and rules.zero
        dims = list(spec.columns)
        facts = None  # magnitude tables: the rules' columns of every published cell
        if spec.sums:
            # one scan: X, the inner cells and the rules' verdicts (with the top lists and the
            # smallest values the audit needs) from the same run
            with self._out_of_memory(table), self._run(
                table, spec, extend0="all" if zero_rule else False, top_k=rules.top_k, holding=rules.holding
            ) as run:
                inner = run.inner_frame()
                X = run.matrix()
                facts = run.sensitivity(rules)
            values = [*dims, *(f"{d}_level" for d in dims), "n", *(["w"] if spec.weight else []), *spec.sums]
            published = facts.select(values)
        else:
            X, inner, published = self.model_matrix(table, spec, extend0="all" if protect_zeros else True)
        n = published["n"].to_numpy()
        if facts is not None:
            primary = facts.select(pl.any_horizontal([pl.col(f"{v}_sensitive") for v in spec.sums]))
            primary = primary.to_series().fill_null(False).to_numpy()
            value = published[spec.sums[0]].fill_null(0).to_numpy()
            order = candidates_num(X, value, freq=n)
            singleton = inner["n"].to_numpy() == 1
            singleton_method = singleton_method or "numttHTT"
        else:
            primary = (n > 0) & (n < int(min_frequency))  # type: ignore[arg-type]
            if protect_zeros:
                primary |= n == 0
            order = candidates_default(X, n)
            singleton = inner["n"].to_numpy() == (0 if protect_zeros else 1)
            singleton_method = singleton_method or "anySum"
        if cost is not None:
            if isinstance(cost, str):
                if cost not in ("frequency", "value"):
                    raise SpecError(f"suppress: cost must be 'frequency', 'value' or one number per cell, not {cost!r}")
                if cost == "value" and not spec.sums:
                    raise SpecError("suppress: cost='value' needs sums; a frequency table orders by frequency")
                order = candidates_default(X, n) if cost == "frequency" else order
            else:
                try:
                    weights = np.asarray(cost, dtype=float)
                except (TypeError, ValueError):
                    raise SpecError("suppress: cost must be 'frequency', 'value' or one number per cell") from None
                if weights.shape != (published.height,):
                    raise SpecError(f"suppress: cost needs one number per published cell ({published.height}), "
                                    f"got shape {weights.shape}")
                if not np.isfinite(weights).all() or (weights < 0).any():
                    bad = np.flatnonzero(~np.isfinite(weights) | (weights < 0))
                    raise SpecError(f"suppress: cost must be finite and 0 or more; not at cells {show_values(bad.tolist())}")
                order = candidates_default(X, n, weights)
        forced_mask = self._cell_mask(published, dims, forced, "forced")
        never_mask = self._cell_mask(published, dims, never, "never")
        suppressed = gauss(X, published["n"].to_numpy().astype(float), primary, candidates=order,
                           forced=forced_mask, never=never_mask, singleton=singleton,
                           singleton_method=singleton_method)
        audit_cols: list[pl.Series] = []
        if audit or interval_protection:
            suppressed, audit_cols = self._audit_suppression(
                spec, rules, X, published, facts, suppressed, primary | forced_mask, protection_range,
                interval_protection,
            )
        label = np.where(primary | forced_mask, "primary", np.where(suppressed, "secondary", "no"))
        values = ["n"] + (["w"] if spec.weight else []) + list(spec.sums)
        hide = pl.Series(suppressed)
        return published.with_columns(
            [pl.when(hide).then(None).otherwise(pl.col(c)).alias(c) for c in values if c in published.columns]
            + [pl.Series("suppressed", label)] + audit_cols
        )

    @staticmethod
    def _audit_suppression(
        spec: TableSpec, rules: Any, X: Any, published: pl.DataFrame, facts: pl.DataFrame | None,
        suppressed: np.ndarray, primary: np.ndarray, protection_range: float | None, protect: bool,
    ) -> tuple[np.ndarray, list[pl.Series]]:
        """Attacker intervals of the suppressed cells (and, with ``protect``, more suppressions
        until every primary cell meets its requirement): (suppressed, [lo, up, protected]).
        ``facts``: the rules' columns of a magnitude table (top lists, smallest values)."""
        from protab.suppression import audit
        from protab.suppression import protect as add_suppressions

        value_col = spec.sums[0] if spec.sums else "n"
        z = published[value_col].fill_null(0).to_numpy().astype(float)
        # the attacker's a priori bounds of the inner cells: 0 or more for counts and for
        # non-negative variables; none where the variable has negative values
        lower = 0.0
        if facts is not None:
            low = facts[f"{value_col}_min"].min()
            if low is not None and low < 0:  # type: ignore[operator]
                lower = None
        req: dict[str, Any] = {"lower": lower}
        if protection_range is not None:
            if isinstance(protection_range, bool) or not isinstance(protection_range, numbers.Real) \
                    or not math.isfinite(protection_range) or protection_range < 0:
                raise SpecError("suppress: protection_range must be a finite number of 0 or more")
            req["protection_range"] = float(protection_range)
        if spec.sums and rules is not None and rules.p_percent is not None and rules.holding is not None:
            raise NotImplementedError(
                "suppress: the audit of the p% rule over holdings is not implemented (its protection "
                "levels need the holdings' two largest contributions); audit with protection_range, "
                "or without holding"
            )
        if facts is not None and rules is not None and rules.p_percent is not None:
            lists = facts[f"{value_col}_top"]  # the rules' top lists hold two values at least
            req.update(p_percent=rules.p_percent, x1=lists.list.get(0, null_on_oob=True).fill_null(0).to_numpy(),
                       x2=lists.list.get(1, null_on_oob=True).fill_null(0).to_numpy())
        if protect:
            suppressed = add_suppressions(X, z, suppressed, primary, **req)
        frame = audit(X, z, suppressed, primary=primary, **req)
        cells = frame["cell"].to_numpy()
        lo = np.full(published.height, np.nan)
        up = np.full(published.height, np.nan)
        ok = np.ones(published.height, dtype=bool)
        lo[cells], up[cells], ok[cells] = frame["lo"].to_numpy(), frame["up"].to_numpy(), frame["protected"].to_numpy()
        return suppressed, [pl.Series("lo", lo), pl.Series("up", up), pl.Series("protected", ok)]

    @staticmethod
    def _cell_mask(published: pl.DataFrame, dims: list[str], cells: Any, what: str) -> np.ndarray:
        """Boolean mask of the published cells listed in ``cells`` (a frame with the dimension
        columns); SpecError naming cells that the table does not publish."""
        if cells is None:
            return np.zeros(published.height, dtype=bool)
        frame = as_polars(cells, f"suppress: {what}")
        require_columns(frame, dims, f"suppress: {what}")
        frame = frame.select([pl.col(d).cast(pl.String) for d in dims]).unique().with_columns(_hit=pl.lit(True))
        hit = published.select(dims).join(frame, on=dims, how="left", maintain_order="left")["_hit"]
        missing = frame.join(published.select(dims), on=dims, how="anti")
        if missing.height:
            raise SpecError(
                f"suppress: {what} names cells the table does not publish: "
                f"{show_values([tuple(r) for r in missing.select(dims).rows()])}"
            )
        return hit.fill_null(False).to_numpy()

    def install_ptable(self, ptable: "PTable", *, table: str | None = None, modulus: int | None = None) -> None:
        """Install ``ptable`` as the p-table of the SQL macro ``ckm(count(*), sum(rkey))``.

        The key modulus comes from the record keys of ``table`` or is given as ``modulus``
        (2^bits, or 10^d for decimal keys). It replaces any p-table installed before.
        """
        if (table is None) == (modulus is None):
            raise InputError("install_ptable: give the keyed table or the key modulus (one of them)")
        if modulus is not None and (isinstance(modulus, bool) or not isinstance(modulus, numbers.Integral)):
            raise InputError(
                f"install_ptable: modulus must be a whole number (2^bits, or 10^d for decimal keys), "
                f"not {type(modulus).__name__}"
            )
        m = self.record_key(table)[1] if table is not None else int(modulus)  # type: ignore[arg-type]
        if m < 2:
            raise InputError("install_ptable: the key modulus must be at least 2")
        install_ptable(self._con, ptable, m)

    def forget_hierarchies(self, keep: int = 0) -> None:
        """Drop the code and bridge tables the session keeps per hierarchy (built on first
        use) when there are more than ``keep``: a long-lived session that sees ever new
        hierarchies (a query service) stays small."""
        if len(self._hierarchies) <= keep:
            return
        for tables in self._hierarchies.values():
            for t in tables:
                self._con.execute(f"DROP TABLE IF EXISTS {t}")
        self._hierarchies.clear()

    def _arrow(self, query: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        rel = self._con.sql(query, params=list(params) if params else None)
        return pl.from_arrow(rel.to_arrow_table())  # type: ignore[return-value]


def model_matrix(
    inner: pl.DataFrame | pa.Table | Any,
    spec: TableSpec,
    *,
    freq: str | None = None,
    extend0: bool = True,
    structural_zeros: pl.DataFrame | None = None,
) -> tuple[sparse.csc_matrix, pl.DataFrame, pl.DataFrame]:
    """The dummy matrix X (inner × published, z = Xᵀy) of a table of inner cells.

    ``inner`` is a frame with the dimension columns and a frequency column (``freq``, or the
    spec's ``freq``, or ``n``). Runs the same SQL roll-up as :meth:`Session.model_matrix` in
    an in-memory database; see there for what is returned.

    The in-memory database is private to protab and reused by every call of the process
    (one call at a time: calls from several threads wait for each other), with the frame
    registered as a view, not copied; a forked child makes its own.
    """
    if not isinstance(spec, TableSpec):
        raise SpecError(f"model_matrix: expected a protab.TableSpec, not {type(spec).__name__}")
    frame = as_polars(inner, "model_matrix: inner cells")
    col = freq or spec.freq or "n"
    if col not in frame.columns:
        raise InputError(
            f"model_matrix: the inner frame has no frequency column {col!r}; pass freq= "
            f"(columns: {show_values(frame.columns, 10)})"
        )
    spec = dataclasses.replace(spec, freq=col)
    data = frame.to_arrow()
    with _FRAMES.lock:
        s = _FRAMES.session()
        s._con.register("inner", data)
        try:
            return s.model_matrix("inner", spec, extend0=extend0, structural_zeros=structural_zeros)
        finally:
            s._con.unregister("inner")
            s.forget_hierarchies(_FRAMES.max_hierarchies)


class _FrameSession:
    """The private in-memory Session of :func:`model_matrix`: made on first use, remade in
    a forked child (a DuckDB connection must not cross a fork), guarded by a lock."""

    max_hierarchies = 32  # code and bridge tables kept for this many hierarchies

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._session: Session | None = None
        self._pid = -1

    def session(self) -> Session:
        if self._session is None or self._pid != os.getpid():
            self._session = Session(":memory:", progress=False)
            self._pid = os.getpid()
        return self._session


_FRAMES = _FrameSession()


# -- helpers ------------------------------------------------------------------------------
def _linked_spec(specs: Sequence[TableSpec]) -> TableSpec:
    """One TableSpec publishing every cell of the linked tables ``specs`` (each cell once)."""
    if not specs or not all(isinstance(x, TableSpec) for x in specs):
        raise SpecError("suppress: linked tables are a non-empty list of protab.TableSpec")
    first = specs[0]
    for other in specs[1:]:
        for attr in ("weight", "sums", "freq", "null_code", "total", "drop_empty", "null_sums"):
            if getattr(other, attr) != getattr(first, attr):
                raise SpecError(f"suppress: linked tables must agree on {attr} (one table of cells is built)")
    dims: dict[str, Any] = {}
    for x in specs:
        if not x.margins:
            raise SpecError("suppress: linked tables need margins (margins=False is a table of its own)")
        for d in x.dimensions:
            if d.column in dims and dims[d.column] != d.hierarchy:
                raise SpecError(
                    f"suppress: dimension {d.column!r} has different hierarchies in the linked tables; a "
                    "common cell must mean the same in every table"
                )
            dims.setdefault(d.column, d.hierarchy)
    terms = {t for x in specs for t in x.terms}
    return TableSpec(dims, crossings=[sorted(t, key=list(dims).index) for t in terms], weight=first.weight,
                     sums=first.sums, freq=first.freq, null_code=first.null_code, total=first.total,
                     drop_empty=first.drop_empty, null_sums=first.null_sums)


def _cells_of(frame: pl.DataFrame, combined: TableSpec, spec: TableSpec) -> pl.DataFrame:
    """The cells of ``spec`` among the cells of the combined linked table: dimensions outside
    ``spec`` at their total, the others within one of its crossings."""
    own = set(spec.columns)
    keep = pl.lit(True)
    for d in combined.columns:
        if d not in own:
            keep = keep & (pl.col(f"{d}_level") == 0)
    inside = pl.lit(False)
    for term in spec.terms:
        ok = pl.lit(True)
        for d in spec.columns:
            if d not in term:
                ok = ok & (pl.col(f"{d}_level") == 0)
        inside = inside | ok
    drop = [c for d in combined.columns if d not in own for c in (d, f"{d}_level")]
    return frame.filter(keep & inside).drop(drop)


def _missing_columns(table: str, cols: dict[str, str], columns: Sequence[str], what: str) -> None:
    """InputError naming the ``columns`` that table ``table`` (columns ``cols``) lacks."""
    missing = [c for c in columns if c not in cols]
    if missing:
        raise InputError(
            f"table {table!r} has no {what} {show_values(missing)}; its columns are "
            f"{show_values(list(cols), 12)}"
        )


def _check_seed(table: str, seed: object) -> str:
    """The seed as the text that is hashed; InputError (never showing the seed) unless it
    is a string with non-whitespace content or non-empty bytes."""
    if isinstance(seed, (bytes, bytearray)):
        if not seed:
            raise InputError(
                f"add_record_keys (table {table!r}): the seed is empty bytes; give a non-empty "
                "secret seed"
            )
        return bytes(seed).hex()
    if not isinstance(seed, str):
        raise InputError(
            f"add_record_keys (table {table!r}): the seed must be a string (or bytes), not "
            f"{type(seed).__name__}; pass the secret as text, e.g. seed=str(...) — the command "
            "line reads it as text too"
        )
    if not seed.strip():
        raise InputError(
            f"add_record_keys (table {table!r}): the seed is empty or only whitespace; give a "
            "secret seed with at least one visible character"
        )
    return seed


def _check_threshold(table: str, threshold: object) -> int | None:
    """The smallest integer count that is published under ``threshold`` (None: no rule).

    A perturbed count is blanked when ``n_pert < threshold``; counts are integers, so for a
    real threshold t that is ``n_pert < ceil(t)``: exact for any real t (2.7 blanks 0, 1, 2).
    """
    if threshold is None:
        return None
    if isinstance(threshold, (bool, np.bool_)) or not isinstance(threshold, (numbers.Real, decimal.Decimal)):
        raise InputError(
            f"cell_key (table {table!r}): threshold must be a number (counts below it are "
            f"published as null) or None, not {threshold!r} ({type(threshold).__name__})"
        )
    try:
        finite = math.isfinite(threshold)
    except OverflowError:  # an integer beyond any float: no count reaches it
        finite = threshold > 0
        if finite:
            return 2**62
    if not finite or threshold < 0:
        raise InputError(
            f"cell_key (table {table!r}): threshold must be a finite number of 0 or more, not "
            f"{threshold!r}"
        )
    return min(int(math.ceil(threshold)), 2**62)  # no count reaches 2^62: the same rule


def _check_max_cells(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not (
        math.isfinite(value) and value >= 1
    ):
        raise InputError(
            f"Session: max_cells must be a number of cells (1 or more) or None for no limit, "
            f"not {value!r}"
        )
    return int(value)


def _total_memory() -> int | None:
    """Bytes of memory this process may use: the machine's, or its container's limit."""
    total = None
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:
            total = int(text) if total is None else min(total, int(text))
    return total


def _memory_limit(value: object) -> str:
    """DuckDB's memory_limit setting: ``value`` checked, or half of the available memory."""
    if value is None:
        total = _total_memory()
        return f"{max(total // 2, 256 * 2**20)}b" if total else "50%"
    if isinstance(value, (bool, np.bool_)):
        pass
    elif isinstance(value, numbers.Integral) and int(value) >= 2**20:
        return f"{int(value)}b"
    elif isinstance(value, str) and _SIZE.match(value.strip()) and _size_ok(value.strip()):
        return value.strip()
    raise InputError(
        f"Session: memory_limit must be a size such as '4GB', '512MB' or '50%', or a number of "
        f"bytes (at least 1 MiB), not {value!r}"
    )


_SIZE = re.compile(r"^\d+(\.\d+)?\s*(%|b|bytes?|[kmgt]i?b)$", re.IGNORECASE)
_UNIT = {"b": 1, "byte": 1, "bytes": 1, "kb": 1e3, "kib": 2**10, "mb": 1e6, "mib": 2**20, "gb": 1e9,
         "gib": 2**30, "tb": 1e12, "tib": 2**40}


def _size_ok(text: str) -> bool:
    """A size string names at least 1 MiB (a percentage: more than 0 and at most 100)."""
    m = re.match(r"^(\d+(?:\.\d+)?)\s*(.*)$", text)
    assert m is not None  # _SIZE matched
    number, unit = float(m.group(1)), m.group(2).lower()
    if unit == "%":
        return 0 < number <= 100
    return number * _UNIT[unit] >= 2**20


class _SpillFolder:
    """A private folder for DuckDB's spill files, removed on close or at exit.

    ``<base>/protab-<user>/s-<pid>-<random>``; on POSIX a live session holds an exclusive
    lock on ``.lock`` inside it, so that a later Session can tell the folders of killed
    processes (lock free) from live ones and remove them.
    """

    def __init__(self, base: str | os.PathLike[str] | None) -> None:
        root = Path(base) if base is not None else Path(tempfile.gettempdir())
        user = os.getuid() if hasattr(os, "getuid") else "user"
        self.root = root / f"protab-{user}"
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            if hasattr(os, "getuid") and (self.root.is_symlink() or self.root.stat().st_uid != os.getuid()):
                raise InputError(
                    f"Session: the temporary folder {str(self.root)!r} belongs to another user; "
                    "pass temp_directory= a folder of your own"
                )
            _remove_stale(self.root)
            self.path = tempfile.mkdtemp(prefix=f"s-{os.getpid()}-", dir=self.root)
        except OSError as exc:
            raise InputError(
                f"Session: cannot make a temporary folder under {str(root)!r} ({exc.strerror}); "
                "pass temp_directory= a writable folder"
            ) from None
        self._fd: int | None = None
        if fcntl is not None:
            self._fd = os.open(os.path.join(self.path, ".lock"), os.O_CREAT | os.O_RDWR, 0o600)
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._finalizer = weakref.finalize(self, _remove_folder, self.path, self._fd, os.getpid())

    def remove(self) -> None:
        self._finalizer()


# Sessions of one process on the same database file share one DuckDB instance, whose
# configuration must be the same: they share the spill folder (removed with the last).
_SHARED_SPILL: dict[str, tuple[_SpillFolder, int]] = {}
_SHARED_LOCK = threading.Lock()


def _database_key(database: str) -> str | None:
    """The real path of a database file (None for an in-memory database)."""
    if database in ("", ":memory:") or database.startswith(":memory:"):
        return None
    return os.path.realpath(os.path.expanduser(database))


def _acquire_spill(key: str | None, base: str | os.PathLike[str] | None) -> _SpillFolder:
    if key is None:
        return _SpillFolder(base)
    with _SHARED_LOCK:
        if key in _SHARED_SPILL:
            folder, users = _SHARED_SPILL[key]
            _SHARED_SPILL[key] = (folder, users + 1)
            return folder
        folder = _SpillFolder(base)
        _SHARED_SPILL[key] = (folder, 1)
        return folder


def _release_spill(key: str | None, folder: _SpillFolder) -> None:
    if key is None:
        folder.remove()
        return
    with _SHARED_LOCK:
        _, users = _SHARED_SPILL.get(key, (folder, 1))
        if users > 1:
            _SHARED_SPILL[key] = (folder, users - 1)
            return
        _SHARED_SPILL.pop(key, None)
    folder.remove()


def _remove_folder(path: str, fd: int | None, owner: int) -> None:
    if os.getpid() != owner:  # a forked child leaves its parent's folder alone
        return
    shutil.rmtree(path, ignore_errors=True)
    if fd is not None:
        os.close(fd)  # releases the lock


def _remove_stale(root: Path, min_age: float = 60.0) -> None:
    """Remove the spill folders under ``root`` of sessions that are gone (POSIX only):
    their lock is free, or they have no lock file and are older than ``min_age`` seconds."""
    if fcntl is None:  # pragma: no cover - Windows: files in use cannot be told apart safely
        return
    for entry in root.glob("s-*"):
        if not entry.is_dir():
            continue
        lock = entry / ".lock"
        try:
            fd = os.open(lock, os.O_RDWR)
        except FileNotFoundError:
            try:
                if time.time() - entry.stat().st_mtime > min_age:
                    shutil.rmtree(entry, ignore_errors=True)
            except OSError:
                pass
            continue
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)  # held by a live session
            continue
        try:
            shutil.rmtree(entry, ignore_errors=True)
        finally:
            os.close(fd)


def _check_bits(bits: int) -> int:
    if not isinstance(bits, int) or isinstance(bits, bool) or not 1 <= bits <= 32:
        raise InputError("bits must be an integer from 1 to 32 (record keys are below 2^bits)")
    return bits


def _file_kind(path: str) -> str | None:
    p = path.lower()
    if p.endswith((".parquet", ".pq")):
        return "parquet"
    if p.endswith((".csv", ".csv.gz", ".tsv", ".txt", ".tsv.gz")):
        return "csv"
    return None


def _as_paths(source: Any) -> list[str] | None:
    """The file paths of ``source`` if it names files (path, glob or list), else None."""
    if isinstance(source, os.PathLike):
        return [os.fspath(source)]
    if isinstance(source, str):
        if os.path.exists(source) or any(ch in source for ch in "*?[") or _file_kind(source):
            return [source]
        return None
    if isinstance(source, (list, tuple)) and source and all(isinstance(s, (str, os.PathLike)) for s in source):
        return [os.fspath(s) for s in source]
    return None


__all__ = ["DEFAULT_DATABASE", "DEFAULT_MAX_CELLS", "Session", "model_matrix", "quote_ident", "sql_text"]
