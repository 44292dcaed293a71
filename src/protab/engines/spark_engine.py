"""The Spark engine: protab's DuckDB-dialect statements rendered for Spark SQL by sqlglot
(:func:`to_spark`), temporary tables as checkpointed temporary views."""

from __future__ import annotations

import functools
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from protab.engines.base import Engine, _plain
from protab.errors import InputError

#: Spark SQL of protab's macros (record key, row class): sql/spark/protab.sql in the source tree
SPARK_SQL = Path(__file__).resolve().parents[1] / "sql" / "spark" / "protab.sql"


def spark_sql_text() -> str:
    """The statements of sql/spark/protab.sql (shipped in the wheel or read from the source tree)."""
    for path in (SPARK_SQL, Path(__file__).resolve().parents[3] / "sql" / "spark" / "protab.sql"):
        if path.exists():
            return path.read_text()
    raise FileNotFoundError("sql/spark/protab.sql is missing from the protab installation")


def require_spark() -> Any:
    """Import pyspark, or an InputError that names what to install (pyspark and a Java runtime)."""
    try:
        import pyspark  # noqa: F401
        from pyspark.sql import SparkSession
    except ImportError:
        raise InputError(
            "the Spark engine needs pyspark 4 or later: pip install 'pyspark>=4.0' (or protab[dev]), "
            "and a Java runtime 17 or later"
        ) from None
    return SparkSession


def require_java() -> None:
    """InputError when no Java runtime is on PATH (nor under JAVA_HOME): Spark cannot start."""
    import os

    home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (home and (Path(home) / "bin" / "java").exists()):
        raise InputError(
            "the Spark engine needs a Java runtime (17 or later) and none was found on PATH or in "
            "JAVA_HOME; install one (e.g. apt-get install openjdk-17-jre-headless, or `make java`)"
        )


@functools.lru_cache(maxsize=4096)
def to_spark(sql: str) -> tuple[str, int]:
    """A DuckDB statement of protab as Spark SQL, and how many ``?`` it had (they become
    named parameters ``:p0``, ``:p1``, … in text order)."""
    tree, count = spark_tree(sql)
    return tree.sql(dialect="spark"), count


@functools.lru_cache(maxsize=4096)
def spark_tree(sql: str) -> tuple[Any, int]:
    """The syntax tree of :func:`to_spark` (shared: copy it before changing it). Spark SQL
    text is not parsed back: sqlglot would read ``max_by(x, x, n)`` as ``max_by(x, x)``."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.tokens import TokenType

    # number the ? in text order ($1, $2, …), then name them p0, p1, … for Spark
    tokens = sqlglot.Dialect.get_or_raise("duckdb").tokenize(sql)
    marks = [t.start for t in tokens if t.token_type == TokenType.PLACEHOLDER]
    parts, last = [], 0
    for k, pos in enumerate(marks):
        parts += [sql[last:pos], f"${k + 1}"]
        last = pos + 1
    tree = sqlglot.parse_one("".join(parts) + sql[last:], read=_duckdb_as_written())
    count = len(marks)
    for node in list(tree.find_all(exp.Placeholder)):
        node.replace(exp.Placeholder(this=f"p{int(str(node.this)) - 1}"))
    for cte in tree.find_all(exp.CTE):
        cte.set("materialized", None)
    for node in list(tree.find_all(exp.DataType)):  # unsigned and 128-bit integers: Spark has neither
        if node.this in (exp.DataType.Type.UINT, exp.DataType.Type.UBIGINT, exp.DataType.Type.USMALLINT,
                         exp.DataType.Type.UTINYINT):
            node.replace(exp.DataType.build("BIGINT"))
        elif node.this in (exp.DataType.Type.INT128, exp.DataType.Type.UINT128):
            node.replace(exp.DataType.build("DECIMAL(38, 0)"))
    for node in list(tree.find_all(exp.Anonymous)):
        name = str(node.this).lower()
        if name == "protab_record_key" and len(node.expressions) == 3:  # the key of an id is the key of its text
            ident = node.expressions[1]
            ident.replace(exp.cast(ident.copy(), "STRING"))
        elif name == "isfinite" and len(node.expressions) == 1:  # neither NaN nor ±infinity
            x = node.expressions[0]
            node.replace(exp.paren(exp.and_(
                exp.Not(this=exp.Anonymous(this="isnan", expressions=[x.copy()])),
                exp.NEQ(this=exp.Abs(this=x.copy()), expression=exp.cast(exp.Literal.string("Infinity"), "DOUBLE")))))
    for node in list(tree.find_all(exp.IsInf)):
        x = node.this
        node.replace(exp.paren(exp.EQ(this=exp.Abs(this=x.copy()),
                                      expression=exp.cast(exp.Literal.string("Infinity"), "DOUBLE"))))
    _spark_lists(tree)
    return tree, count


@functools.lru_cache(maxsize=1)
def _duckdb_as_written() -> Any:
    """sqlglot's DuckDB dialect, except that list indices stay as written (1-based): the
    stock dialect shifts some indices to 0-based (literals, expressions it knows are
    integers) and not others (plain columns), which :func:`_spark_lists` could not tell apart."""
    from sqlglot.dialects.duckdb import DuckDB

    class DuckDBAsWritten(DuckDB):
        INDEX_OFFSET = 0

    return DuckDBAsWritten


def _spark_lists(tree: Any) -> None:
    """DuckDB's list pieces of protab's magnitude SQL, rewritten for Spark on the syntax tree:

    - ``max(x, n)`` / ``min(x, n)`` (the n largest / smallest values of a group, in order)
      → ``max_by(x, x, n)`` / ``min_by(x, x, n)`` (the same list; NULL for no value);
    - ``l[i]`` (NULL past the end in DuckDB; an error in Spark's ANSI mode) →
      ``try_element_at(l, i)`` (1-based, as DuckDB; a literal index below 1, which counts
      from the end in DuckDB, is refused);
    - ``list_slice(l, a, b)`` (elements a..b) → ``slice(l, a, b - a + 1)``;
    - several ``unnest`` in one SELECT (unnested side by side, the shorter padded with NULL)
      → one ``inline(arrays_zip(coalesce(l, array()), ...)) AS (names)``, which pads alike
      (Spark allows one generator per SELECT; a NULL list, which DuckDB pads as an empty
      one, would make ``arrays_zip`` NULL);
    - ``regexp_full_match(x, 'p')`` → ``x RLIKE '\\A(?:p)\\z'`` (the whole text, as RE2's)."""
    from sqlglot import exp

    for node in list(tree.find_all(exp.Max, exp.Min)):
        n = node.args.get("count")
        if n is not None:
            fn = "max_by" if isinstance(node, exp.Max) else "min_by"
            node.replace(exp.Anonymous(this=fn, expressions=[node.this.copy(), node.this.copy(), n.copy()]))
    for node in list(tree.find_all(exp.Bracket)):
        if len(node.expressions) == 1:
            idx = node.expressions[0]
            if isinstance(idx, exp.Neg) or (isinstance(idx, exp.Literal) and not idx.is_string and int(idx.this) < 1):
                raise ValueError(f"to_spark: list index {idx.sql()} counts from the end in DuckDB; not rendered")
            node.replace(exp.Anonymous(this="try_element_at", expressions=[node.this.copy(), idx.copy()]))
    for node in list(tree.find_all(exp.RegexpFullMatch)):
        # RE2's whole-string match as a Java regex: \A and \z (Java's $ also matches before a
        # final newline)
        pattern = node.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise ValueError("to_spark: regexp_full_match needs a literal pattern")
        node.replace(exp.RegexpLike(this=node.this.copy(), expression=exp.Literal.string(f"\\A(?:{pattern.this})\\z")))
    for node in list(tree.find_all(exp.Anonymous)):
        if str(node.this).lower() == "list_slice" and len(node.expressions) == 3:
            lst, a, b = (e.copy() for e in node.expressions)
            if not (isinstance(a, exp.Literal) and not a.is_string and int(a.this) >= 1):
                raise ValueError(f"to_spark: list_slice from {a.sql()}: only a literal start of 1 or more is rendered")
            length = exp.Add(this=exp.Sub(this=exp.paren(b), expression=exp.paren(a.copy())),
                             expression=exp.Literal.number(1))
            node.replace(exp.Anonymous(this="slice", expressions=[lst, a, length]))
    for select in list(tree.find_all(exp.Select)):
        gens = [e for e in select.expressions if isinstance(e, exp.Alias) and isinstance(e.this, exp.Explode)]
        if len(gens) < 2:
            continue
        if gens != select.expressions[-len(gens):]:
            raise ValueError("to_spark: unnest columns must come last in their SELECT")
        zipped = exp.Anonymous(this="arrays_zip", expressions=[
            exp.Coalesce(this=g.this.this.copy(), expressions=[exp.Array(expressions=[])]) for g in gens])
        inline = exp.Aliases(this=exp.Anonymous(this="inline", expressions=[zipped]),
                             expressions=[exp.to_identifier(g.alias) for g in gens])
        for g in gens[1:]:
            g.pop()
        gens[0].replace(inline)


class SparkEngine(Engine):
    """protab's SQL on a SparkSession: rendered by :func:`to_spark`, temporary tables as
    checkpointed temporary views (computed once, then read like a table)."""

    name = "spark"
    union_pieces = False

    def decimal8(self, expr: str, floating: bool) -> str:
        """Spark casts a double to a decimal through its shortest text, rounded half up
        (1.5e-08 → 0.00000002, where DuckDB gives 0.00000001): a floating-point value is
        rounded as x·10^8 in binary (Spark's round of a double is half up, as DuckDB's cast)
        and the whole number of 10^-8 is written back exactly as text."""
        if not floating:
            return super().decimal8(expr, floating)
        units = f"TRY_CAST(round({expr} * 100000000.0) AS DECIMAL(38, 0))"
        return f"TRY_CAST(CAST({units} AS VARCHAR) || 'E-8' AS DECIMAL(38, 8))"

    def overflow_errors(self) -> tuple[type[BaseException], ...]:
        """Spark's ANSI mode raises an ArithmeticException (e.g. a DECIMAL sum past 38 digits)."""
        from pyspark.errors.exceptions.captured import ArithmeticException

        return (ArithmeticException,)

    def decimal_times(self, value: str, coef: str) -> str:
        """Spark types DECIMAL(38, 8) × BIGINT as DECIMAL(38, 6) (two decimals lost);
        DECIMAL(29, 8) × DECIMAL(8, 0) stays DECIMAL(38, 8) (values below 1e21 in absolute value)."""
        return f"CAST({value} AS DECIMAL(29, 8)) * CAST({coef} AS DECIMAL(8, 0))"

    def __init__(self, spark: Any) -> None:
        if str(spark.conf.get("spark.sql.ansi.enabled", "true")).lower() != "true":
            # without ANSI mode an overflowing integer sum wraps around silently
            raise InputError(
                "the Spark engine needs ANSI mode (spark.sql.ansi.enabled=true, the default of Spark 4), "
                "so that an overflowing sum fails instead of giving a wrong count or cell key"
            )
        self.spark = spark
        self._frames: dict[str, Any] = {}
        self.install()

    def install(self) -> None:
        """The Spark twins of protab's macros (protab_record_key, protab_row_class)."""
        import re

        text = "\n".join(line for line in spark_sql_text().splitlines() if not line.startswith("--"))
        for statement in re.split(r";\s*\n", text):
            if statement.strip():
                self.spark.sql(statement)

    def df(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """The statement as a Spark DataFrame (lazy)."""
        count = spark_tree(sql)[1]
        params = list(params or [])
        if count != len(params):
            raise ValueError(f"statement has {count} parameters, {len(params)} given")
        args = {f"p{k}": _plain(v) for k, v in enumerate(params)}
        text, views = self._shared_ctes(sql, args)
        try:
            return self._sql(text, args)
        finally:
            for view in views:  # the plan holds the checkpointed rows, not the names
                self.spark.catalog.dropTempView(view)

    def _sql(self, text: str, args: dict[str, Any]) -> Any:
        import re

        used = {k: v for k, v in args.items() if re.search(rf":{k}\b", text)}
        return self.spark.sql(text, args=used) if used else self.spark.sql(text)

    def _shared_ctes(self, sql: str, args: dict[str, Any]) -> tuple[str, list[str]]:
        """Common table expressions that the statement reads more than once computed first, as
        checkpointed views: DuckDB computes such a CTE once, Spark would inline it at every
        reference (the level-by-level roll-up reads each level twice: once to publish it, once
        to sum the next level from it)."""
        from sqlglot import exp

        tree = spark_tree(sql)[0]
        with_ = tree.args.get("with") or tree.args.get("with_")
        if with_ is None:
            return to_spark(sql)[0], []
        tree = tree.copy()  # the cached tree stays as it was
        with_ = tree.args.get("with") or tree.args.get("with_")
        views: list[str] = []
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
        return tree.sql(dialect="spark"), views

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        self.df(sql, params).collect()

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.df(sql, params).collect()]

    def arrow(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
        return self.df(sql, params).toArrow()

    def write_parquet(self, sql: str, params: Sequence[Any] | None, path: str) -> None:
        """A folder of Parquet part files (zstd) written by Spark's executors, nothing collected
        to the driver. An ORDER BY query is range-partitioned: the part files, read in the order
        of their names, hold the rows in the query's order. Spark's commit protocol makes the
        files appear only when every task has succeeded."""
        self.df(sql, params).write.mode("errorifexists").option("compression", "zstd").parquet(path)

    def _keep(self, name: str, frame: Any) -> None:
        frame = frame.localCheckpoint(eager=True)  # computed once, lineage cut
        frame.createOrReplaceTempView(name)
        self._frames[name] = frame

    def create_table(self, name: str, select: str, params: Sequence[Any] | None = None) -> None:
        self._keep(name, self.df(select, params))

    def create_view(self, name: str, select: str, params: Sequence[Any] | None = None) -> None:
        self.df(select, params).createOrReplaceTempView(name)

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

    def temp_name(self, kind: str) -> str:
        return f"_protab_{kind}_{uuid.uuid4().hex}"


def spark_arrow(data: pa.Table) -> pa.Table:
    """An Arrow table as Spark takes it: unsigned integers (which Spark has not) as the signed
    type that holds every value (uint8 → int16 … uint32 → int64, uint64 → decimal(20, 0))."""
    wider = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(), pa.uint64(): pa.decimal128(20, 0)}
    fields = [pa.field(f.name, wider.get(f.type, f.type), f.nullable) for f in data.schema]
    if all(f.type == g.type for f, g in zip(fields, data.schema)):
        return data
    return data.cast(pa.schema(fields))


def _spark_schema(schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


#: Spark type names → the DuckDB type names protab's checks read (numeric, integer, float)
_SPARK_TYPES = {
    "tinyint": "TINYINT", "smallint": "SMALLINT", "int": "INTEGER", "bigint": "BIGINT",
    "float": "FLOAT", "double": "DOUBLE", "string": "VARCHAR", "boolean": "BOOLEAN",
    "date": "DATE", "timestamp": "TIMESTAMP WITH TIME ZONE", "timestamp_ntz": "TIMESTAMP", "binary": "BLOB",
}


def duckdb_type(spark_type: str) -> str:
    """The DuckDB name of a Spark column type (``decimal(p,s)`` → ``DECIMAL(p,s)``)."""
    t = spark_type.lower()
    if t.startswith("decimal"):
        return t.upper()
    if t.startswith(("varchar", "char")):
        return "VARCHAR"
    return _SPARK_TYPES.get(t, t.upper())
