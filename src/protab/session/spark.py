"""protab's Session on Spark: the same table requests, run by Spark SQL, the same frames out.

``protab.Session.spark(spark)`` gives a :class:`SparkSession`: a :class:`protab.Session`
whose catalog is Spark's (temporary views and tables), whose record keys are Spark columns,
and whose table requests run the statements of ``protab.rollup`` rendered for Spark SQL
(``protab.engines.SparkEngine``). Counts and key sums are integers, so every cell, cell key
and perturbed count equals the DuckDB engine's bit for bit (docs/spark.md).

On Spark today: registering Parquet paths, Spark tables and frames, ``add_record_keys``,
``tabulate`` and ``inner_cells`` of counts, weighted counts and sums (with top-k lists),
``cell_key`` (counts and magnitudes), ``perturb_inner``, ``model_matrix``, ``sensitivity``
and ``suppress`` (hierarchies, non-tree hierarchies, formulas, ``drop_empty``, ``where``,
holdings), ``hierarchy_from_grid``, ``key_sums``. Swapping and ``install_ptable`` raise
NotImplementedError.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from protab._io import protected_form
from protab._sql import quote_ident
from protab.engines import SparkEngine, duckdb_type, require_java, require_spark, spark_arrow
from protab.errors import InputError, show_values
from protab.rollup import TableRun
from protab.session.core import _INTEGER, DEFAULT_MAX_CELLS, Session, _as_paths, _check_max_cells, _file_kind
from protab.table import TableSpec

#: Column types whose values Spark and DuckDB write as the same text (codes, ids)
_SAME_TEXT = {"VARCHAR", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "BOOLEAN", "DATE"}


class _SparkConnection(SparkEngine):
    """The Spark engine, also answering ``execute(sql, params).fetchall()`` as a DuckDB
    connection does, so that the Session's own checks (ids, existing keys) run unchanged."""

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> "_Rows":  # type: ignore[override]
        return _Rows(self, sql, params)


class _Rows:
    def __init__(self, engine: SparkEngine, sql: str, params: Sequence[Any] | None) -> None:
        self._rows = engine.rows(sql, params)

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows


def _spark_name(name: str) -> str:
    """A table name as Spark's catalog functions parse it: one quoted part (spaces, dots allowed)."""
    return "`" + name.replace("`", "``") + "`"


def _not_on_spark(what: str) -> NotImplementedError:
    return NotImplementedError(
        f"{what} does not run on the Spark engine yet (count and magnitude tables, rules and suppression "
        "do); run it with a DuckDB protab.Session"
    )


class SparkSession(Session):
    """A :class:`protab.Session` over a ``pyspark.sql.SparkSession`` (see the module's doc).

    Tables are Spark temporary views or catalog tables; ``register`` makes a view of Parquet
    paths, a Spark table or a frame. Record keys live in a column of the view; the session
    remembers which column holds them. The SparkSession itself belongs to the caller:
    :meth:`close` drops protab's views, not Spark.
    """

    def __init__(self, spark: Any, *, max_cells: int | float | None = DEFAULT_MAX_CELLS) -> None:
        require_spark()
        require_java()
        self.database = "spark"
        self._spill = None
        self._db_key = None
        self.max_cells = _check_max_cells(max_cells)
        self._duckdb_bar = self._bars = False
        self._keys: dict[str, tuple[str, int]] = {}
        self._read_paths: list[str] = []
        self._db_files: list[str] = []  # no database file: Spark's catalog
        self._key_sum_sources: dict[str, str] = {}
        self._hierarchies: dict[Any, tuple[str, str]] = {}
        self.spark = spark
        self._con = _SparkConnection(spark)  # type: ignore[assignment]

    # -- lifecycle ------------------------------------------------------------------------
    def close(self) -> None:
        """Drop the hierarchy views this session made (the SparkSession stays open)."""
        for tables in self._hierarchies.values():
            for t in tables:
                self._con.drop_table(t)  # type: ignore[attr-defined]
        self._hierarchies.clear()

    def forget_hierarchies(self, keep: int = 0) -> None:
        if len(self._hierarchies) > keep:
            self.close()

    @property
    def engine(self) -> SparkEngine:
        return self._con  # type: ignore[return-value]

    def sql(self, query: str, params: Sequence[Any] | None = None) -> Any:
        """Run a query of your own (Spark SQL, ``?`` parameters) and return a polars frame."""
        import polars as pl

        df = self.spark.sql(query, args=list(params)) if params else self.spark.sql(query)
        return pl.from_arrow(df.toArrow())

    # -- catalog --------------------------------------------------------------------------
    def tables(self) -> list[str]:
        names = [t.name for t in self.spark.catalog.listTables()]
        return sorted(n for n in names if not n.startswith(("protab_", "_protab")))

    def exists(self, name: str) -> bool:
        return isinstance(name, str) and bool(name) and bool(self.spark.catalog.tableExists(_spark_name(name)))

    def _kind(self, name: str) -> str | None:
        return "view" if self.exists(name) else None

    def columns(self, table: str) -> dict[str, str]:
        """Column name → type of a Spark table or view, in DuckDB's type names (as the checks
        of a table request read them)."""
        self._require(table)
        fields = self.spark.table(_spark_name(table)).schema.fields
        return {f.name: duckdb_type(f.dataType.simpleString()) for f in fields}

    def _drop(self, name: str) -> None:
        self.spark.catalog.dropTempView(name)

    def register(self, name: str, source: Any, *, replace: bool = False, materialize: bool = False) -> None:
        """Make ``source`` the temporary view ``name``: Parquet path(s) or glob, a Spark table
        or view name, a Spark DataFrame, or a pyarrow/polars/pandas frame. ``materialize``
        caches the rows in Spark."""
        import polars as pl
        import pyarrow as pa

        if not isinstance(name, str) or not name.strip():
            raise InputError(f"register: the table name must be a non-empty string, got {name!r}")
        if self.exists(name) and not replace:
            if isinstance(source, str) and source == name:
                return
            raise InputError(f"register: a table named {name!r} exists already; pass replace=True to replace it")
        paths = _as_paths(source)
        if paths is not None:
            kinds = {_file_kind(p) for p in paths}
            if kinds != {"parquet"}:
                raise InputError(
                    f"register {name!r}: the Spark engine reads Parquet files; cannot read {show_values(paths)} "
                    "(convert them to .parquet)"
                )
            self._read_paths += [protected_form(p) for p in paths if "://" not in p]
            try:
                df = self.spark.read.parquet(*paths)
            except Exception as exc:  # Spark's AnalysisException: missing path, bad file
                raise InputError(f"register {name!r}: cannot read {show_values(paths)}: "
                                 f"{str(exc).splitlines()[0]}") from None
        elif isinstance(source, str):
            if not self.exists(source):
                raise InputError(f"register: {source!r} is neither an existing file nor a table of 'spark'")
            df = self.spark.table(_spark_name(source))
        elif type(source).__name__ == "DataFrame" and type(source).__module__.startswith("pyspark"):
            df = source
        else:
            if isinstance(source, pl.LazyFrame):
                source = source.collect()
            if isinstance(source, pl.DataFrame):
                source = source.to_arrow()
            if type(source).__module__.split(".")[0] == "pandas":
                source = pa.Table.from_pandas(source, preserve_index=False)
            if not isinstance(source, pa.Table):
                raise InputError(
                    f"register {name!r}: unsupported source of type {type(source).__name__}; give a "
                    "Parquet path, a Spark table or DataFrame, or a pyarrow, polars or pandas frame"
                )
            df = self.spark.createDataFrame(spark_arrow(source))
        if materialize:
            df = df.cache()
        df.createOrReplaceTempView(_spark_name(name))
        self._forget(name)

    # -- record keys ----------------------------------------------------------------------
    def _write_key_column(
        self, table: str, name: str, expr: str, params: list[Any], modulus: int, cols: dict[str, str]
    ) -> None:
        """The keys as column ``name`` of the view ``table`` (computed once: checkpointed)."""
        tmp = f"_protab_newkey_{id(self)}"
        df = self.engine.df(f"SELECT *, {expr} AS {quote_ident(tmp)} FROM {quote_ident(table)}", params)
        if name in cols:
            df = df.drop(name)
        df = df.withColumnRenamed(tmp, name).localCheckpoint(eager=True)
        df.createOrReplaceTempView(_spark_name(table))
        self._keys[table] = (name, modulus)
        self._drop_key_sums_of(table)  # their key sums are of the old keys

    def use_record_keys(self, table: str, column: str, modulus: int) -> None:
        """Declare that column ``column`` of ``table`` holds record keys made elsewhere (e.g. by
        a DuckDB Session, written to Parquet with the records): integers in [0, modulus), with
        modulus 2^bits or 10^d. Checked on the data: no missing key, none out of range."""
        cols = self._require_columns(table, [column], "record key column")
        if isinstance(modulus, bool) or not isinstance(modulus, int) or modulus < 2:
            raise InputError(f"use_record_keys: the modulus must be a whole number of 2 or more, not {modulus!r}")
        if not _INTEGER.match(cols[column]):
            raise InputError(
                f"use_record_keys: record key column {column!r} of table {table!r} has type {cols[column]}; "
                "keys must be integers"
            )
        q = quote_ident(column)
        bad = self.engine.rows(
            f"SELECT count(*) FROM {quote_ident(table)} WHERE {q} IS NULL OR {q} < 0 OR {q} >= ?", [modulus]
        )[0][0]
        if bad:
            raise InputError(
                f"use_record_keys: {bad} record(s) of table {table!r} have no key in {column!r} or one outside "
                f"0 … {modulus - 1}; give the modulus the keys were made with"
            )
        self._keys[table] = (column, int(modulus))
        self._drop_key_sums_of(table)

    def record_key(self, table: str) -> tuple[str, int]:
        if table in self._keys:
            return self._keys[table]
        self._require(table)
        raise InputError(
            f"table {table!r} has no record keys; call Session.add_record_keys({table!r}, "
            "id_column=..., seed=...) or add_record_keys(..., record_key_column=...) first"
        )

    # -- table requests -------------------------------------------------------------------
    def _run(self, table: str, spec: TableSpec, **kw: Any) -> TableRun:
        if kw.get("top_k") is not None:
            self._require_version((4, 2), "top-k lists of magnitude tables (rules, the cell key method for sums)")
        if isinstance(spec, TableSpec) and self.exists(table):
            cols = self.columns(table)
            self._text_alike(table, cols, [*spec.columns, *(c for c, _, _ in spec.where)], "dimension or where column")
            if kw.get("holding") is not None:
                self._text_alike(table, cols, [kw["holding"]], "holding column")
        return super()._run(table, spec, **kw)

    def _require_version(self, least: tuple[int, int], what: str) -> None:
        """NotImplementedError when the Spark version is older than ``least`` (major, minor)."""
        import re

        found = tuple(int(x) for x in re.findall(r"\d+", str(self.spark.version))[:2])
        if found < least:
            raise NotImplementedError(
                f"{what} need Spark {least[0]}.{least[1]} or later (max_by with k); this is Spark "
                f"{self.spark.version}: pip install 'pyspark>={least[0]}.{least[1]}'"
            )

    @staticmethod
    def _text_alike(table: str, cols: dict[str, str], columns: Sequence[str], what: str) -> None:
        """NotImplementedError for columns whose text (a code, an id) Spark writes otherwise than
        DuckDB: floating-point numbers (1.23456789E8 against 123456789.0), decimals, times."""
        odd = [c for c in columns if c in cols and cols[c] not in _SAME_TEXT]
        if odd:
            raise NotImplementedError(
                f"table {table!r}: {what} {show_values(odd)} of type {cols[odd[0]]} is not read on the Spark "
                "engine yet (Spark writes such values as text otherwise than DuckDB, so codes and keys would "
                "differ); cast it to a string or integer column first"
            )

    def add_record_keys(self, table: str, id_column: str | None = None, *args: Any, **kw: Any) -> None:
        if id_column is not None and self.exists(table):
            self._text_alike(table, self.columns(table), [id_column], "id column")
        super().add_record_keys(table, id_column, *args, **kw)

    #: What Spark writes into an output folder: a folder holding anything else is not replaced
    _SPARK_OUTPUT = ("part-", "_SUCCESS", "._SUCCESS.crc", ".part-", "_committed_", "_started_")

    def _check_sink(self, path: str | os.PathLike[str] | None) -> Path | None:
        """The local folder a ``path=`` output goes to (None for a URI or a cluster's file
        system), after the checks, before any work is done: it is no input of this session,
        nor inside one or above one (symbolic links followed), not a symbolic link itself, not
        a file, not the working folder, the home folder or above them, and if it exists it
        holds only what Spark writes (an older output), never other files."""
        if path is None:
            return None
        from protab._io import output_name, real_path

        raw = output_name(path, "output folder")
        if "://" in raw or not str(self.spark.sparkContext.master).startswith("local"):
            return None
        target = Path(real_path(raw))
        self._refuse_inputs(target, raw)
        if os.path.islink(os.path.abspath(os.path.expanduser(raw)).rstrip(os.sep)):
            raise InputError(f"cannot write the table to {raw!r}: it is a symbolic link; name the folder itself")
        if target.exists() and not target.is_dir():
            raise InputError(f"cannot write the table to {raw!r}: a file of that name exists (Spark writes a folder)")
        cwd, home = Path.cwd().resolve(), Path.home().resolve()
        if target == target.parent or target in (cwd, home) or target in cwd.parents or target in home.parents:
            raise InputError(f"cannot write the table to {raw!r}: it is the working or home folder or above "
                             "them; give the table a folder of its own")
        if target.is_dir():
            other = sorted(f for f in os.listdir(target) if not f.startswith(self._SPARK_OUTPUT))
            if other:
                raise InputError(f"cannot write the table to {raw!r}: the folder holds files protab did not "
                                 f"write ({show_values(other)}); remove them or name another folder")
        return target

    @contextmanager
    def _parquet_sink(self, run: TableRun, path: str | os.PathLike[str] | None, target: Path | None) -> Iterator[None]:
        """With a ``path``: the published table is written there by Spark's executors as a
        folder of Parquet part files, nothing collected to the driver. On ``local`` masters a
        plain path is written beside the target first and renamed into place when whole
        (replacing an older folder); elsewhere (a cluster's file system, a URI) Spark's
        commit protocol makes the files appear only when the job succeeds, and an existing
        path is refused. ``target``: what :meth:`_check_sink` gave."""
        if path is None:
            yield
            return
        raw = os.fspath(path)
        if target is None:  # a URI or a cluster's file system
            run.sink = raw
            try:
                yield
            except Exception as exc:
                if "PATH_ALREADY_EXISTS" in str(exc) or "already exists" in str(exc):
                    raise InputError(f"cannot write the table to {raw!r}: it exists; remove it or name another") from None
                raise
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
        old = target.parent / f".{target.name}.{uuid.uuid4().hex}.old"
        run.sink = str(tmp)
        try:
            yield
            if target.exists():
                os.replace(target, old)
            os.replace(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(old, ignore_errors=True)

    def swap(self, *args: Any, **kw: Any) -> Any:
        raise _not_on_spark("swap (record swapping)")

    def _temp_table(self, name: str, select: str, params: Sequence[Any]) -> None:
        """A checkpointed temporary view named ``name`` (computed once, as DuckDB's TEMP table)."""
        self.engine.create_table(_spark_name(name), select, params)

    def _drop_temp_table(self, name: str) -> None:
        frame = self.engine._frames.pop(_spark_name(name), None)  # made under its quoted name
        self.spark.catalog.dropTempView(name)  # which takes the name itself
        if frame is not None:
            frame.unpersist()

    def install_ptable(self, *args: Any, **kw: Any) -> None:
        raise _not_on_spark("install_ptable (the ckm() SQL macro)")

    def _arrow(self, query: str, params: Sequence[Any] | None = None) -> Any:
        """A DuckDB-dialect query of the Session's own (rendered for Spark) as a polars frame."""
        return self.engine.frame(query, params)
