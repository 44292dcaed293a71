"""The Spark engine: protab's DuckDB-dialect statements rendered for Spark SQL
(:func:`~protab.engines.spark_sql.to_spark`), temporary tables as checkpointed temporary views;
the catalog is Spark's, record keys are remembered by the engine, outputs are folders of
Parquet part files written by the executors (docs/spark.md)."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from protab.engines.base import Engine, Refuse, Refused, _plain
from protab.engines.registry import register_engine
from protab.engines.spark_sql import spark_tree, to_spark
from protab.engines.spark_support import (
    CHECKPOINT_MODES,
    _spark_schema,
    checkpoint_mode,
    duckdb_type,
    is_connect,
    local_defaults,
    local_master,
    lost_checkpoint,
    require_java,
    require_spark,
    spark_arrow,
    spark_name,
    spark_sql_text,
)
from protab.errors import InputError, show_values
from protab.sqltools import quote_ident

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from protab.ptable import PTable

#: Column types whose values Spark and DuckDB write as the same text (codes, ids)
_SAME_TEXT = {"VARCHAR", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "BOOLEAN", "DATE"}
#: What Spark writes into an output folder: a folder holding anything else is not replaced
_SPARK_OUTPUT = ("part-", "_SUCCESS", "._SUCCESS.crc", ".part-", "_committed_", "_started_")


#: A double as the whole number of 10^-8 it rounds to (DECIMAL(38, 0), NULL for NaN, ±inf and
#: |x| ≥ 1e30): Spark's round of a double is half up in binary, as DuckDB's cast
_UNITS = "TRY_CAST(round({expr} * 100000000.0) AS DECIMAL(38, 0))"
#: A whole number of 10^-8 as that DECIMAL(38, 8), exactly (through its digits)
_UNITS_AS_DECIMAL8 = "TRY_CAST(CAST({units} AS VARCHAR) || 'E-8' AS DECIMAL(38, 8))"

#: Spark's SQL pieces (:data:`protab.engines.base.SQL_PIECES`), written in protab's dialect
#: (DuckDB's) that :func:`to_spark` renders:
#:
#: - ``decimal8_float``: Spark casts a double to a decimal through its shortest text, rounded
#:   half up (1.5e-08 → 0.00000002, where DuckDB gives 0.00000001): the double is rounded as
#:   x·10^8 in binary and the whole number of 10^-8 is written back exactly as text;
#: - ``decimal8_sum_float``: the sum of those whole numbers, made a decimal once per group (the
#:   same DECIMAL(38, 8) as summing ``decimal8_float`` per record, overflowing at the same 10^38
#:   units), without writing and reading every record's value as text;
#: - ``decimal_times``: Spark types DECIMAL(38, 8) × BIGINT as DECIMAL(38, 6) (two decimals
#:   lost); DECIMAL(29, 8) × DECIMAL(8, 0) stays DECIMAL(38, 8) (values below 1e21);
#: - ``hex_integer``: ``conv`` to base 10 (no hexadecimal literal cast); 15 digits fit a BIGINT.
#:
#: The logarithms of a swap's keys are no piece of an engine: Spark's ``ln`` (Java's
#: StrictMath.log) differs from DuckDB's (the C library's ``log``) in the last bit for some 7 % of
#: the uniform numbers, which could reorder near-equal keys, so every engine computes them in
#: the same plain double arithmetic (:meth:`Engine.ln_columns`): no Python runs on the executors.
_TEMPLATES: dict[str, str | Refused] = {
    "decimal8": "TRY_CAST({expr} AS DECIMAL(38, 8))",
    "decimal8_float": _UNITS_AS_DECIMAL8.format(units=_UNITS),
    "decimal8_sum": "sum({decimal8})",
    "decimal8_sum_finish": "{{}}",
    "decimal8_sum_float": "sum(" + _UNITS + ")",
    "decimal8_sum_float_finish": _UNITS_AS_DECIMAL8.format(units="{{}}"),
    "decimal_times": "CAST({value} AS DECIMAL(29, 8)) * CAST({coef} AS DECIMAL(8, 0))",
    "merged_list": Refused("key sums with sums (Session.key_sums(..., sums=...)) are made on DuckDB and PostgreSQL only; "
                           "on Spark ask the records' table for magnitudes"),
    "hex_integer": "CAST(conv({digits}, 16, 10) AS BIGINT)",
}


@register_engine
class SparkEngine(Engine):
    """protab's SQL on a SparkSession: rendered by :func:`to_spark`, temporary tables as
    checkpointed temporary views (computed once, then read like a table)."""

    name = "spark"
    dialect = "spark"
    union_pieces = False
    templates = _TEMPLATES
    options = {
        "spark_session": "the pyspark SparkSession the tables live in (the caller's: never stopped)",
        "checkpoint": "how temporary relations are kept: " + ", ".join(map(repr, CHECKPOINT_MODES))
                      + " (default: 'reliable' with spark.checkpoint.dir set, else 'local' on a local master, "
                        "'replicated' on a cluster's)",
    }

    def overflow_errors(self) -> tuple[type[BaseException], ...]:
        """Spark's ANSI mode raises an ArithmeticException (e.g. a DECIMAL sum past 38 digits); the
        base class of the JVM's (classic pyspark) and the server's (Spark Connect)."""
        from pyspark.errors import ArithmeticException

        return (ArithmeticException,)

    label = "spark"

    def __init__(self, spark: Any, checkpoint: str | None = None) -> None:
        if str(spark.conf.get("spark.sql.ansi.enabled", "true")).lower() != "true":
            # without ANSI mode an overflowing integer sum wraps around silently
            raise InputError(
                "the Spark engine needs ANSI mode (spark.sql.ansi.enabled=true, the default of Spark 4), "
                "so that an overflowing sum fails instead of giving a wrong count or cell key"
            )
        self.spark = spark
        #: how :meth:`checkpoint` keeps a relation (:func:`~protab.engines.spark_support.checkpoint_mode`)
        self.checkpoint_mode = checkpoint_mode(spark, checkpoint)
        self._frames: dict[str, Any] = {}
        self._keys: dict[str, tuple[str, int]] = {}  # record-key columns of the views
        # temporary outputs (write_relations) not yet kept: the view and record keys they replaced
        self._pending: dict[str, tuple[str | None, tuple[str, int] | None]] = {}  # (hidden view, keys)
        self.install()

    @classmethod
    def connect(cls, target: Any = None, **options: Any) -> SparkEngine:
        """:meth:`for_session` of ``spark_session`` (or ``target``), which must be a pyspark
        SparkSession, with the ``checkpoint`` mode (None: the default)."""
        spark = options.get("spark_session") if target is None else target
        if not cls.wraps(spark):
            raise InputError(f"the spark engine needs a pyspark SparkSession, not {type(spark).__name__}")
        return cls.for_session(spark, checkpoint=options.get("checkpoint"))

    @classmethod
    def wraps(cls, obj: Any) -> bool:
        """A ``pyspark.sql.SparkSession``, classic or Spark Connect's (known without importing pyspark)."""
        return type(obj).__module__.startswith("pyspark") and type(obj).__name__ == "SparkSession"

    @classmethod
    def missing_runtime(cls) -> str | None:
        """pyspark or a Java runtime missing (the message of :func:`require_spark` or :func:`require_java`)."""
        try:
            require_spark()
            require_java()
        except InputError as exc:
            return str(exc)
        return None

    @classmethod
    def for_session(cls, spark: Any, checkpoint: str | None = None) -> SparkEngine:
        """The engine of a ``pyspark.sql.SparkSession`` (pyspark and Java checked first, Java not
        for a Spark Connect client; on a local master, :func:`local_defaults` for what the user
        left unset); ``checkpoint`` as :func:`~protab.engines.spark_support.checkpoint_mode`."""
        require_spark()
        if not is_connect(spark):
            require_java()
        local_defaults(spark)
        return cls(spark, checkpoint)

    def install(self) -> None:
        """The Spark twins of protab's macros (protab_record_key, protab_row_class)."""
        text = "\n".join(line for line in spark_sql_text().splitlines() if not line.startswith("--"))
        for statement in re.split(r";\s*\n", text):
            if statement.strip():
                self.spark.sql(statement)

    @contextmanager
    def df(self, sql: str, params: Sequence[Any] | None = None) -> Iterator[Any]:
        """The statement as a Spark DataFrame (lazy), to be used inside the ``with``: the views of
        its shared common table expressions are dropped after it. Spark Connect resolves a
        plan's names on the server when the plan is run (classic pyspark when it is made), so
        the views must live until then."""
        count = spark_tree(sql)[1]
        params = list(params or [])
        if count != len(params):
            raise ValueError(f"statement has {count} parameters, {len(params)} given")
        args = {f"p{k}": _plain(v) for k, v in enumerate(params)}
        views: list[str] = []
        try:
            with self._lost_executor():
                text = self._shared_ctes(sql, args, views)
                yield self._sql(text, args)
        finally:
            for view in views:  # what was made of the frame holds the checkpointed rows, not the names
                self.spark.catalog.dropTempView(view)

    @contextmanager
    def _lost_executor(self) -> Iterator[None]:
        """A Spark error saying a block of a checkpoint is gone (its executor was lost) raised as
        the protab error of :func:`~protab.engines.spark_support.lost_checkpoint`."""
        try:
            yield
        except Exception as exc:
            lost = lost_checkpoint(exc, self.checkpoint_mode)
            if lost is None:
                raise
            raise lost from None

    def _sql(self, text: str, args: dict[str, Any]) -> Any:
        used = {k: v for k, v in args.items() if re.search(rf":{k}\b", text)}
        return self.spark.sql(text, args=used) if used else self.spark.sql(text)

    def _shared_ctes(self, sql: str, args: dict[str, Any], views: list[str]) -> str:
        """Common table expressions that the statement reads more than once computed first, as
        checkpointed views: DuckDB computes such a CTE once, Spark would inline it at every
        reference (the level-by-level roll-up reads each level twice: once to publish it, once
        to sum the next level from it). The views made are appended to ``views``."""
        from sqlglot import exp

        tree = spark_tree(sql)[0]
        with_ = tree.args.get("with") or tree.args.get("with_")
        if with_ is None:
            return to_spark(sql)[0]
        tree = tree.copy()  # the cached tree stays as it was
        with_ = tree.args.get("with") or tree.args.get("with_")
        for cte in list(with_.expressions):
            name = cte.alias
            refs = [t for t in tree.find_all(exp.Table) if t.name == name and not t.db]
            if len(refs) < 2:
                continue
            view = f"_protab_cte_{uuid.uuid4().hex}"
            earlier = with_.expressions[: with_.expressions.index(cte)]  # those read once, kept as CTEs
            body = cte.this.sql(dialect="spark")
            if earlier:
                body = f"WITH {', '.join(c.sql(dialect='spark') for c in earlier)} {body}"
            self._keep(view, self._sql(body, args))
            self._frames.pop(view, None)
            views.append(view)
            cte.pop()
            for t in refs:
                if not t.alias:  # columns may be qualified by the CTE's name
                    t.set("alias", exp.TableAlias(this=exp.to_identifier(name)))
                t.set("this", exp.to_identifier(view))
        if not with_.expressions:
            with_.pop()
        return str(tree.sql(dialect="spark"))

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        with self.df(sql, params) as df:
            df.collect()

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        with self.df(sql, params) as df:
            return [tuple(r) for r in df.collect()]

    def arrow(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
        with self.df(sql, params) as df:
            return df.toArrow()

    def write_parquet(self, sql: str, params: Sequence[Any] | None, path: str) -> None:
        """A folder of Parquet part files (zstd) written by Spark's executors, nothing collected
        to the driver. An ORDER BY query is range-partitioned: the part files, read in the order
        of their names, hold the rows in the query's order. Spark's commit protocol makes the
        files appear only when every task has succeeded."""
        with self.df(sql, params) as df:
            df.write.mode("errorifexists").option("compression", "zstd").parquet(path)

    def checkpoint(self, frame: Any) -> Any:
        """``frame`` computed once, its lineage cut, kept as :attr:`checkpoint_mode` says: "local"
        in the memory of the executors that computed it (Spark's localCheckpoint), "replicated"
        in memory and on disk of two executors (localCheckpoint, MEMORY_AND_DISK_2), "reliable" as
        files under ``spark.checkpoint.dir`` (Spark's checkpoint), which outlive an executor."""
        if self.checkpoint_mode == "reliable":
            return frame.checkpoint(eager=True)
        if self.checkpoint_mode == "replicated":
            from pyspark import StorageLevel

            return frame.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK_2)
        return frame.localCheckpoint(eager=True)

    def _keep(self, name: str, frame: Any) -> None:
        frame = self.checkpoint(frame)  # computed once, lineage cut
        frame.createOrReplaceTempView(name)
        self._frames[name] = frame

    def create_table(self, name: str, select: str, params: Sequence[Any] | None = None) -> None:
        with self.df(select, params) as df:
            self._keep(name, df)

    def create_view(self, name: str, select: str, params: Sequence[Any] | None = None) -> None:
        with self.df(select, params) as df:  # the view holds the resolved plan
            df.createOrReplaceTempView(name)

    def create_where_view(self, name: str, table: str, where: Sequence[tuple[str, str, Sequence[Any]]]) -> None:
        """The conditions as SQL with bound parameters, the column cast to text."""
        conds: list[str] = []
        params: list[Any] = []
        for column, op, values in where:
            marks = ", ".join("?" for _ in values)
            hit = f"CAST({quote_ident(column)} AS VARCHAR) IN ({marks})" if values else "FALSE"
            conds.append(f"coalesce({hit if op == 'in' else f'NOT ({hit})'}, FALSE)")
            params += [str(v) for v in values]
        self.create_view(name, f"SELECT * FROM {table} WHERE {' AND '.join(conds)}", params)

    def register(self, name: str, data: pa.Table) -> None:
        data = spark_arrow(data)
        if data.num_rows == 0:  # Spark infers no schema from an empty Arrow table
            frame = self.spark.createDataFrame([], schema=_spark_schema(data.schema))
        else:
            frame = self.spark.createDataFrame(data)
        frame.createOrReplaceTempView(name)

    def unregister(self, name: str) -> None:
        self.spark.catalog.dropTempView(name)

    def drop_table(self, name: str) -> None:
        frame = self._frames.pop(name, None)
        self.spark.catalog.dropTempView(name)
        if frame is not None:
            frame.unpersist()

    def drop_view(self, name: str) -> None:
        self.spark.catalog.dropTempView(name)

    def insert(self, name: str, select: str, params: Sequence[Any] | None = None) -> None:
        """The relation ``name`` of :meth:`create_table` and the rows of ``select`` (cast to its
        column types, by position, as DuckDB's INSERT), checkpointed again."""
        old = self._frames[name]
        with self.df(select, params) as new:
            new = new.toDF(*[f"_c{i}" for i in range(len(new.columns))])
            new = new.select([new[f"_c{i}"].cast(f.dataType).alias(f.name) for i, f in enumerate(old.schema.fields)])
            self._keep(name, old.unionAll(new))
        old.unpersist()

    # -- relations written for the user: checkpointed temporary views ---------------------------
    def write_relations(self, outputs: Sequence[tuple[str, str, Sequence[Any]]], *, temporary: bool) -> None:
        """Checkpointed temporary views, every one computed before any name is replaced (all or
        nothing). With ``temporary`` the view a name had (and its record keys) is remembered
        and comes back on :meth:`discard_relations`."""
        frames = []
        for name, select, params in outputs:
            with self.df(select, params) as df:
                frames.append((name, self.checkpoint(df)))
        for name, frame in frames:
            if not temporary:
                self._set_aside_dropped(self._pending.pop(name, (None, None))[0])
            elif name not in self._pending:
                self._pending[name] = (self._set_aside(name), self._keys.get(name))
            self._view(name, frame)

    def _set_aside(self, name: str) -> str | None:
        """The view ``name`` as it is now, kept under a hidden name (None if there is none): a view
        holds its resolved plan, where a ``spark.table`` frame of Spark Connect would read the
        name again when run."""
        if not self.kind(name):
            return None
        hidden = self.temp_name("before")
        self.spark.table(spark_name(name)).createOrReplaceTempView(hidden)
        return hidden

    def _set_aside_dropped(self, hidden: str | None) -> None:
        if hidden is not None:
            self.spark.catalog.dropTempView(hidden)

    def keep_relations(self, names: Sequence[str], *, replace: bool, what: str) -> None:
        """The views stay as they are; the ones they replaced are given up (only with ``replace``)."""
        for name in names:
            if name not in self._pending:
                raise InputError(
                    f"{what}: this Spark session has no temporary swap output named {name!r}; write it first "
                    "with swap(..., temporary=True) on the same session"
                )
            if self._pending[name][0] is not None and not replace:
                raise InputError(f"{what}: a view named {name!r} exists already; pass replace=True or keep it")
        for name in names:
            self._set_aside_dropped(self._pending.pop(name)[0])

    def discard_relations(self, names: Sequence[str]) -> None:
        """The views dropped, the ones they replaced (with their record keys) back."""
        for name in names:
            if name not in self._pending:
                continue
            before, key = self._pending.pop(name)
            if before is None:
                self.drop_relation(name)
                continue
            self._view(name, self.spark.table(before))
            self._set_aside_dropped(before)
            if key is not None:
                self._keys[name] = key

    def temp_name(self, kind: str) -> str:
        return f"_protab_{kind}_{uuid.uuid4().hex}"

    def user_query(self, sql: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        """A query of the user's own (Spark SQL, ``?`` parameters) as a polars frame."""
        import polars as pl

        with self._lost_executor():
            df = self.spark.sql(sql, args=list(params)) if params else self.spark.sql(sql)
            return pl.from_arrow(df.toArrow())  # type: ignore[return-value]

    # -- the catalog: Spark's temporary views and tables ---------------------------------------
    def tables(self) -> list[str]:
        names = [t.name for t in self.spark.catalog.listTables()]
        return sorted(n for n in names if not n.startswith(("protab_", "_protab")))

    def kind(self, name: str) -> str | None:
        exists = isinstance(name, str) and bool(name) and bool(self.spark.catalog.tableExists(spark_name(name)))
        return "view" if exists else None

    def columns(self, name: str) -> dict[str, str]:
        """Column name → type in DuckDB's type names (as the checks of a table request read them)."""
        if self.kind(name) is None:
            return {}
        fields = self.spark.table(spark_name(name)).schema.fields
        return {f.name: duckdb_type(f.dataType.simpleString()) for f in fields}

    def register_files(self, name: str, paths: list[str], kind: str, materialize: bool,
                       step: Callable[[str], Any]) -> None:
        if kind != "parquet":
            raise InputError(
                f"register {name!r}: the Spark engine reads Parquet files; cannot read {show_values(paths)} "
                "(convert them to .parquet)"
            )
        try:
            df = self.spark.read.parquet(*paths)
        except Exception as exc:  # Spark's AnalysisException: missing path, bad file
            raise InputError(f"register {name!r}: cannot read {show_values(paths)}: "
                             f"{str(exc).splitlines()[0]}") from None
        self._view(name, df.cache() if materialize else df)

    def register_data(self, name: str, data: Any, step: Callable[[str], Any]) -> None:
        if type(data).__name__ == "DataFrame" and type(data).__module__.startswith("pyspark"):
            self._view(name, data)
            return
        if type(data).__module__.split(".")[0] == "pandas":
            data = pa.Table.from_pandas(data, preserve_index=False)
        if isinstance(data, pa.RecordBatchReader):
            data = data.read_all()
        self._view(name, self.spark.createDataFrame(spark_arrow(data)))

    def register_alias(self, name: str, source: str) -> None:
        self._view(name, self.spark.table(spark_name(source)))

    def _view(self, name: str, df: Any) -> None:
        df.createOrReplaceTempView(spark_name(name))
        self._keys.pop(name, None)  # other records now

    def drop_relation(self, name: str) -> None:
        self.spark.catalog.dropTempView(name)
        self._keys.pop(name, None)

    # -- record keys: a column of the view, remembered here --------------------------------------
    def key_tag(self, table: str) -> tuple[str, int] | None:
        return self._keys.get(table)

    def write_key_column(self, table: str, name: str, expr: str, params: list[Any], modulus: int,
                         replace_column: bool) -> None:
        """The keys as column ``name`` of the view ``table`` (computed once: checkpointed)."""
        tmp = f"_protab_newkey_{uuid.uuid4().hex}"
        with self.df(f"SELECT *, {expr} AS {quote_ident(tmp)} FROM {quote_ident(table)}", params) as df:
            if replace_column:
                df = df.drop(name)
            df = self.checkpoint(df.withColumnRenamed(tmp, name))
        df.createOrReplaceTempView(spark_name(table))
        self._keys[table] = (name, int(modulus))

    def tag_key_column(self, table: str, column: str, modulus: int) -> None:
        self._keys[table] = (column, int(modulus))

    def temp_table(self, name: str, select: str, params: Sequence[Any]) -> None:
        """A checkpointed temporary view named ``name`` (computed once, as DuckDB's TEMP table)."""
        self.create_table(spark_name(name), select, params)

    def drop_temp_table(self, name: str) -> None:
        frame = self._frames.pop(spark_name(name), None)  # made under its quoted name
        self.spark.catalog.dropTempView(name)  # which takes the name itself
        if frame is not None:
            frame.unpersist()

    # -- checks ---------------------------------------------------------------------------------
    def check_request(self, table: str, cols: dict[str, str], columns: Sequence[str], *,
                      top_k: int | None, holding: str | None) -> None:
        if top_k is not None:
            self._require_version((4, 2), "top-k lists of magnitude tables (rules, the cell key method for sums)")
        self._text_alike(table, cols, columns, "dimension or where column")
        if holding is not None:
            self._text_alike(table, cols, [holding], "holding column")

    def check_id_column(self, table: str, cols: dict[str, str], column: str) -> None:
        self._text_alike(table, cols, [column], "id column")

    def check_swap(self, table: str, cols: dict[str, str], household: str) -> None:
        """The swap's candidate donors are a top-k list (max_by with k, Spark 4.2); its random
        keys hash the household id as text, which must be DuckDB's text."""
        self._require_version((4, 2), "record swapping (the best donors of a class)")
        self._text_alike(table, cols, [household], "household id column")

    def _require_version(self, least: tuple[int, int], what: str) -> None:
        """NotImplementedError when the Spark version is older than ``least`` (major, minor)."""
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

    # -- outputs: folders of part files ---------------------------------------------------------
    def check_sink(self, raw: str, refuse: Refuse) -> Path | None:
        """The local folder a ``path=`` output goes to (None for a URI or a cluster's file
        system), after the checks, before any work is done: it is no input of this session,
        nor inside one or above one (symbolic links followed), not a symbolic link itself, not
        a file, not the working folder, the home folder or above them, and if it exists it
        holds only what Spark writes (an older output), never other files."""
        from protab._io import real_path

        if "://" in raw or is_connect(self.spark) or not local_master(self.spark):
            return None  # Spark Connect: the server's file system, which need not be this machine's
        target = Path(real_path(raw))
        refuse(target, raw)
        if os.path.islink(os.path.abspath(os.path.expanduser(raw)).rstrip(os.sep)):
            raise InputError(f"cannot write the table to {raw!r}: it is a symbolic link; name the folder itself")
        if target.exists() and not target.is_dir():
            raise InputError(f"cannot write the table to {raw!r}: a file of that name exists (Spark writes a folder)")
        cwd, home = Path.cwd().resolve(), Path.home().resolve()
        if target == target.parent or target in (cwd, home) or target in cwd.parents or target in home.parents:
            raise InputError(f"cannot write the table to {raw!r}: it is the working or home folder or above "
                             "them; give the table a folder of its own")
        if target.is_dir():
            other = sorted(f for f in os.listdir(target) if not f.startswith(_SPARK_OUTPUT))
            if other:
                raise InputError(f"cannot write the table to {raw!r}: the folder holds files protab did not "
                                 f"write ({show_values(other)}); remove them or name another folder")
        return target

    @contextmanager
    def parquet_sink(self, run: Any, raw: str, target: Path | None) -> Iterator[None]:
        """The published table is written at ``raw`` by Spark's executors as a folder of Parquet
        part files, nothing collected to the driver. On ``local`` masters the folder is written
        beside the target first and swapped in when whole (protab._io.replace_folder: a kill at
        any point leaves the old folder or the new one); elsewhere (a cluster's file system, a
        URI) Spark's commit protocol makes the files appear only when the job succeeds, and an
        existing path is refused."""
        if target is None:  # a URI or a cluster's file system
            run.sink = raw
            try:
                yield
            except Exception as exc:
                if "PATH_ALREADY_EXISTS" in str(exc) or "already exists" in str(exc):
                    raise InputError(f"cannot write the table to {raw!r}: it exists; remove it or name another") from None
                raise
            return
        from protab._io import replacing_folder

        target.parent.mkdir(parents=True, exist_ok=True)
        with replacing_folder(target) as partial:
            run.sink = str(partial)
            yield

    def install_ptable(self, ptable: PTable, modulus: int) -> None:
        """The p-table's temporary views and the temporary SQL functions ``ckm``/``ckm_weighted``
        of the SparkSession (spark_ptable)."""
        from protab.engines.spark_ptable import install_ptable

        install_ptable(self.spark, ptable, modulus)

    def close(self) -> None:
        """Nothing of the caller's SparkSession is stopped (its views stay until it ends)."""
