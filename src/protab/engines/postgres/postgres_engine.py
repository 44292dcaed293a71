"""The PostgreSQL engine: protab's DuckDB-dialect statements rendered for PostgreSQL
(:func:`~protab.engines.postgres.postgres_sql.to_postgres`) and run through psycopg 3 on one
connection of a DSN; the catalog is the database's, record keys are remembered by the engine
(as on Spark), temporary relations are TEMP tables, results come back as Arrow tables
(docs/postgres.md). Count tables and magnitude tables with top-k lists (sensitivity rules, the
cell key method for magnitudes, ``tabulate(top_k=)``, key sums with sums: the lists rendered by
:mod:`~protab.engines.postgres.postgres_lists`) are answered as DuckDB answers them, and
``install_ptable`` makes the ``ckm()`` SQL function of DuckDB's macro (postgres_ptable); the record
swap writes its records and log as tables of the database (TEMP tables until kept); what is
not supported yet (float, decimal and time dimensions) is refused before any
work."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from protab.engines.base import Engine, Refuse, Refused, _plain
from protab.engines.postgres.postgres_ptable import ckm_refusal, install_ptable
from protab.engines.postgres.postgres_sql import needs_columns, to_postgres, to_postgres_with_columns
from protab.engines.postgres.postgres_support import (
    PG_FUNCTIONS,
    arrow_from_csv,
    arrow_result,
    csv_batches,
    csv_readable,
    duckdb_type,
    pg_column_type,
    plain_arrow,
    require_psycopg,
    where_dsn,
)
from protab.engines.registry import register_engine
from protab.errors import InputError, SpecError, show_values
from protab.sqltools import quote_ident

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from protab.ptable import PTable

#: Column types whose values PostgreSQL and DuckDB write as the same text (codes, ids)
_SAME_TEXT = {"VARCHAR", "SMALLINT", "INTEGER", "BIGINT", "BOOLEAN", "DATE"}

#: A double as the whole number of 10^-8 DuckDB's cast gives (a NUMERIC: pg_temp.protab_units)
_UNITS = "protab_units(CAST({expr} AS DOUBLE))"
#: a whole number of 10^-8 as that DECIMAL(38, 8), exactly
_UNITS_AS_DECIMAL8 = "CAST({units} * 0.00000001 AS DECIMAL(38, 8))"

#: PostgreSQL's SQL pieces (:data:`protab.engines.base.SQL_PIECES`), in protab's dialect that
#: :func:`to_postgres` renders (``round`` becomes pg_temp.protab_round: half away from zero):
#:
#: - ``decimal8``: a cast to NUMERIC(38, 8) (rounded half away from zero, as DuckDB), NULL
#:   from 1e30 on (PostgreSQL would raise);
#: - ``decimal8_float``: the double rounded as x·10^8 in binary and that whole number written
#:   exactly as a NUMERIC (pg_temp.protab_units); the sum of those whole numbers is made a
#:   decimal once per group;
#: - ``decimal8_sum_finish``: PostgreSQL's sum of NUMERIC(38, 8) is an unbounded NUMERIC: cast
#:   back to DECIMAL(38, 8), which overflows where DuckDB's sum does (past 38 digits);
#: - ``merged_list``: DuckDB's own text, rendered by postgres_lists (``flatten(list(l))`` as the
#:   pg_temp aggregate protab_concat, the sort and slice over the array's positions);
#: - ``hex_integer``: the digits as a bit string, read as a BIGINT (15 digits fit).
_TEMPLATES: dict[str, str | Refused] = {
    "decimal8": "CAST(CASE WHEN abs({expr}) < 1e30 THEN {expr} END AS DECIMAL(38, 8))",
    "decimal8_float": _UNITS_AS_DECIMAL8.format(units=_UNITS),
    "decimal8_sum": "CAST(sum({decimal8}) AS DECIMAL(38, 8))",
    "decimal8_sum_finish": "{{}}",
    "decimal8_sum_float": "sum(" + _UNITS + ")",
    "decimal8_sum_float_finish": _UNITS_AS_DECIMAL8.format(units="{{}}"),
    "decimal_times": "CAST({value} * {coef} AS DECIMAL(38, 8))",
    "merged_list": ("list_slice(list_sort(flatten(list({lists}) FILTER (WHERE {lists} IS NOT NULL)), '{order}'), "
                    "1, {n})"),
    "hex_integer": "CAST(CAST('x' || lpad({digits}, 16, '0') AS BIT(64)) AS BIGINT)",
}


@register_engine
class PostgresEngine(Engine):
    """protab's SQL on a PostgreSQL database (psycopg 3, one connection): rendered by
    :func:`to_postgres`, values bound by psycopg on the client (quoted by libpq)."""

    name = "postgres"
    dialect = "postgres"
    union_pieces = True
    templates = _TEMPLATES
    options = {"dsn": "the PostgreSQL connection string (key=value pairs or a postgresql:// URI)"}
    label = "postgres"

    def __init__(self, con: Any, where: str) -> None:
        self.con = con
        self.label = f"postgres ({where})"
        self._where = where
        self._keys: dict[str, tuple[str, int]] = {}  # record-key columns of tables, remembered here
        # JIT off for this connection: protab's statements over a table's cells are long expressions
        # (top-k lists, the cell key method's lookups) that LLVM took seconds to compile for every
        # statement, even for the LIMIT 0 that learns a result's columns (benchmarks/postgres_scale.py)
        self.con.execute("SET jit = off")
        for statement in PG_FUNCTIONS:
            self.con.execute(statement)

    @classmethod
    def connect(cls, target: Any = None, **options: Any) -> PostgresEngine:
        """A connection to the DSN ``dsn`` (or ``target``); an InputError naming the host, port and
        database (never the password) and what to check when it fails."""
        dsn = options.get("dsn") if target is None else target
        if not isinstance(dsn, str) or not dsn.strip():
            raise InputError("the postgres engine needs a DSN: Session.postgres('host=... dbname=... user=...')")
        psycopg = require_psycopg()
        where = where_dsn(dsn)
        try:
            con = psycopg.connect(dsn, autocommit=True, cursor_factory=psycopg.ClientCursor)
        except psycopg.Error as exc:
            raise InputError(
                f"cannot connect to PostgreSQL at {where}: {_hide(_first(exc), dsn)}; check that the server runs "
                "and listens there, that the database exists, and the user name and password (or pg_hba.conf)"
            ) from None
        try:
            return cls(con, where)
        except psycopg.Error as exc:
            con.close()
            raise InputError(f"PostgreSQL at {where}: cannot make protab's functions in the session's temporary "
                             f"schema ({_first(exc)}); the user needs the TEMPORARY privilege on the database") from None

    @classmethod
    def missing_runtime(cls) -> str | None:
        """psycopg missing (the message of :func:`require_psycopg`)."""
        try:
            require_psycopg()
        except InputError as exc:
            return str(exc)
        return None

    # -- statements ---------------------------------------------------------------------------
    def _bind(self, sql: str, params: Sequence[Any] | None, render: bool) -> tuple[str, Any]:
        """``sql`` (protab's dialect, rendered; PostgreSQL's own with ``render`` false) and its
        parameters as psycopg takes them."""
        args = [_plain(v) for v in (params or [])]
        if not render:
            return sql, (args or None)
        if needs_columns(sql):
            text, order = to_postgres_with_columns(sql, lambda probe, used: self._columns_of(probe, used, args))
        else:
            text, order = to_postgres(sql)
        if len(set(order)) != len(args) or (order and max(order) >= len(args)):
            raise ValueError(f"statement has {len(set(order))} parameters, {len(args)} given")
        if not args:  # no placeholder: the text as it is (psycopg's copy() undoubles no % without parameters)
            return text.replace("%%", "%"), None
        return _doubles(text, args), {f"p{k}": v for k, v in enumerate(args)}

    def _columns_of(self, text: str, order: tuple[int, ...], args: list[Any]) -> list[str]:
        """The names of the result columns of the rendered query ``text`` (planned, not run:
        it has ``LIMIT 0``), its parameters those of the statement being bound."""
        with self._refusals():
            desc = self.con.execute(_doubles(text, args), {f"p{k}": args[k] for k in set(order)}).description
        return [str(c.name) for c in desc]

    @contextmanager
    def _refusals(self) -> Iterator[None]:
        """PostgreSQL's refusals as protab errors (overflows as they are: the caller's to name)."""
        import psycopg
        from psycopg import errors

        try:
            yield
        except self.overflow_errors():
            raise
        except (errors.OutOfMemory, errors.DiskFull, errors.QueryCanceled, errors.ConfigurationLimitExceeded) as exc:
            raise InputError(f"PostgreSQL at {self._where} could not finish this request ({_first(exc)}): raise the "
                             "server's limits (work_mem, temp_file_limit, statement_timeout, disk space) or publish "
                             "fewer cells") from None
        except psycopg.OperationalError as exc:
            raise InputError(f"the connection to PostgreSQL at {self._where} failed: {_first(exc)}") from None
        except psycopg.Error as exc:
            refusal = ckm_refusal(exc)  # ckm() without a p-table: DuckDB's macro's words
            if refusal is not None:
                raise InputError(refusal) from None
            raise SpecError(f"PostgreSQL refused a statement of this request ({_first(exc)}); the PostgreSQL "
                            "engine may not support it yet") from None

    def _run(self, sql: str, params: Sequence[Any] | None = None, *, render: bool = True) -> Any:
        """A cursor that ran ``sql`` with ``params`` (:meth:`_bind`, :meth:`_refusals`)."""
        text, bound = self._bind(sql, params, render)
        with self._refusals():
            return self.con.execute(text, bound)

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        self._run(sql, params)

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        return list(self._run(sql, params).fetchall())

    def arrow(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
        """The result's columns and types first (the query under LIMIT 0: planned, not run),
        then its rows as CSV from ``COPY (query) TO STDOUT``, parsed by Arrow; a result with a
        column Arrow cannot read from text (times, NUMERIC without a scale) is fetched as rows."""
        text, bound = self._bind(sql, params, True)
        with self._refusals():
            desc = self.con.execute(f"SELECT * FROM ({text}) _protab_d LIMIT 0", bound).description
            if not csv_readable(desc):
                cur = self.con.execute(text, bound)
                return arrow_result(cur.description, cur.fetchall())
            buf = bytearray()
            with self.con.cursor().copy(f"COPY ({text}) TO STDOUT (FORMAT csv)", bound) as copy:
                for chunk in copy:
                    buf += chunk
        return arrow_from_csv(desc, bytes(buf))

    def user_query(self, sql: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        """A query of the user's own, in PostgreSQL's SQL with psycopg's ``%s`` parameters."""
        import polars as pl

        cur = self._run(sql, params, render=False)
        return pl.from_arrow(arrow_result(cur.description, cur.fetchall()))  # type: ignore[return-value]

    def write_parquet(self, sql: str, params: Sequence[Any] | None, path: str) -> None:
        """One Parquet file (zstd) of the rows as fetched (they pass through the client)."""
        import pyarrow.parquet as pq

        pq.write_table(self.arrow(sql, params), path, compression="zstd")

    # -- relations of one request: TEMP tables and views ------------------------------------------
    def create_table(self, name: str, select: str, params: Sequence[Any] | None = None) -> None:
        """A TEMP table, analyzed (autovacuum never reads TEMP tables: without statistics the
        planner guesses their sizes, by orders of magnitude wrong in the roll-up)."""
        self._run(f"CREATE TEMP TABLE {name} AS {select}", params)
        self._run(f"ANALYZE {name}", render=False)

    def create_view(self, name: str, select: str, params: Sequence[Any] | None = None) -> None:
        self._run(f"CREATE TEMP VIEW {name} AS {select}", params)

    def create_where_view(self, name: str, table: str, where: Sequence[tuple[str, str, Sequence[Any]]]) -> None:
        """The conditions with bound values (quoted by libpq into the view), the column as text."""
        conds: list[str] = []
        params: list[Any] = []
        for column, op, values in where:
            marks = ", ".join("?" for _ in values)
            hit = f"CAST({quote_ident(column)} AS VARCHAR) IN ({marks})" if values else "FALSE"
            conds.append(f"coalesce({hit if op == 'in' else f'NOT ({hit})'}, FALSE)")
            params += [str(v) for v in values]
        self.create_view(name, f"SELECT * FROM {table} WHERE {' AND '.join(conds)}", params)

    def register(self, name: str, data: pa.Table) -> None:
        self._copy_in(name, plain_arrow(data), temporary=True)
        self._run(f"ANALYZE {name}", render=False)

    def unregister(self, name: str) -> None:
        self.drop_table(name)

    def drop_table(self, name: str) -> None:
        self._run(f"DROP TABLE IF EXISTS {name}", render=False)

    def drop_view(self, name: str) -> None:
        self._run(f"DROP VIEW IF EXISTS {name}", render=False)

    def insert(self, name: str, select: str, params: Sequence[Any] | None = None) -> None:
        self._run(f"INSERT INTO {name} {select}", params)
        self._run(f"ANALYZE {name}", render=False)

    def _copy_in(self, name: str, data: pa.Table, *, temporary: bool) -> None:
        """A table ``name`` (a quoted or internal name) of ``data``'s columns and rows, copied
        in as CSV (``COPY FROM STDIN``) in one transaction."""
        cols = []
        for f in data.schema:
            t = pg_column_type(f.type)
            if t is None:
                raise InputError(f"the PostgreSQL engine cannot copy column {f.name!r} of type {f.type} "
                                 "(cast it to a string, number, boolean or date)")
            cols.append(f"{quote_ident(f.name)} {t}")
        with self.transaction():
            self._run(f"CREATE {'TEMP ' if temporary else ''}TABLE {name} ({', '.join(cols)})", render=False)
            try:
                with self.con.cursor().copy(f"COPY {name} FROM STDIN (FORMAT csv)") as copy:
                    for chunk in csv_batches(data):
                        copy.write(chunk)
            except require_psycopg().Error as exc:
                raise InputError(f"could not copy the rows of {name} into PostgreSQL: {_first(exc)}") from None

    # -- the catalog: the database's tables and views ------------------------------------------
    def _relkind(self, name: str) -> tuple[str, str, bool] | None:
        """(relkind, schema, temporary) of the relation ``name`` found first on the search path."""
        rows = self._run(
            "SELECT c.relkind, n.nspname, n.oid = pg_my_temp_schema() FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE c.relname = %s AND c.relkind IN ('r', 'v', 'm', 'p', 'f') "
            "AND pg_table_is_visible(c.oid)", [name], render=False).fetchall()
        return (str(rows[0][0]), str(rows[0][1]), bool(rows[0][2])) if rows else None

    def tables(self) -> list[str]:
        rows = self._run(
            "SELECT DISTINCT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f') AND pg_table_is_visible(c.oid) "
            "AND n.nspname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1", render=False).fetchall()
        return [str(r[0]) for r in rows if not str(r[0]).startswith(("protab_", "_protab"))]

    def kind(self, name: str) -> str | None:
        if not isinstance(name, str) or not name:
            return None
        found = self._relkind(name)
        if found is None:
            return None
        return "view" if found[0] in ("v", "m") else "table"

    def columns(self, name: str) -> dict[str, str]:
        """Column name → type in DuckDB's type names (as the checks of a table request read them)."""
        if self.kind(name) is None:
            return {}
        rows = self._run(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
            "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            [quote_ident(name)], render=False).fetchall()
        return {str(n): duckdb_type(str(t)) for n, t in rows}

    def register_files(self, name: str, paths: list[str], kind: str, materialize: bool,
                       step: Callable[[str], Any]) -> None:
        """The files read by an in-process DuckDB (the same types as the DuckDB engine reads),
        copied into a table ``name`` of the database."""
        import duckdb

        arg: Any = paths[0] if len(paths) == 1 else paths
        try:
            with duckdb.connect() as reader:
                rel = reader.read_parquet(arg) if kind == "parquet" else reader.read_csv(arg)
                data = rel.to_arrow_table()
        except duckdb.Error as exc:
            raise InputError(f"register {name!r}: cannot read {show_values(paths)}: {exc}") from None
        self.register_data(name, data, step)

    def register_data(self, name: str, data: Any, step: Callable[[str], Any]) -> None:
        data = plain_arrow(data)
        with self.transaction(), step(f"copying {name} into the database"):
            self.drop_relation(name)
            self._copy_in(quote_ident(name), data, temporary=False)

    def register_alias(self, name: str, source: str) -> None:
        with self.transaction():
            self.drop_relation(name)
            self._run(f"CREATE VIEW {quote_ident(name)} AS SELECT * FROM {quote_ident(source)}", render=False)
        self._keys.pop(name, None)

    def drop_relation(self, name: str) -> None:
        found = self._relkind(name)
        if found is not None:
            what = "VIEW" if found[0] == "v" else "MATERIALIZED VIEW" if found[0] == "m" else "TABLE"
            self._run(f"DROP {what} {quote_ident(found[1])}.{quote_ident(name)}", render=False)
        self._keys.pop(name, None)

    # -- record keys: a column of the table, remembered here -----------------------------------
    def key_tag(self, table: str) -> tuple[str, int] | None:
        return self._keys.get(table)

    def write_key_column(self, table: str, name: str, expr: str, params: list[Any], modulus: int,
                         replace_column: bool) -> None:
        """The table rewritten with the key column (CREATE TABLE AS, renamed over the old one, in
        one transaction; a TEMP table stays one), and the key column remembered."""
        found = self._relkind(table)
        cols = self.columns(table)
        n = quote_ident(name)
        select = [f"{expr} AS {n}" if c == name else quote_ident(c) for c in cols]
        if not replace_column:
            select.append(f"{expr} AS {n}")
        args = list(params)
        tmp = f"_protab_keys_{uuid.uuid4().hex}"
        temporary = bool(found and found[2])
        with self.transaction(), self.step(f"record keys for {table}"):
            self._run(f"CREATE {'TEMP ' if temporary else ''}TABLE {tmp} AS SELECT {', '.join(select)} "
                      f"FROM {quote_ident(table)}", args)
            self.drop_relation(table)
            self._run(f"ALTER TABLE {tmp} RENAME TO {quote_ident(table)}", render=False)
        self._keys[table] = (name, int(modulus))

    def tag_key_column(self, table: str, column: str, modulus: int) -> None:
        self._keys[table] = (column, int(modulus))

    def temp_table(self, name: str, select: str, params: Sequence[Any]) -> None:
        self._run(f"CREATE TEMP TABLE {quote_ident(name)} AS {select}", params)
        self._run(f"ANALYZE {quote_ident(name)}", render=False)

    def drop_temp_table(self, name: str) -> None:
        self._run(f"DROP TABLE IF EXISTS pg_temp.{quote_ident(name)}", render=False)

    # -- relations written for the user: the swap's records and log -----------------------------
    def write_relations(self, outputs: Sequence[tuple[str, str, Sequence[Any]]], *, temporary: bool) -> None:
        """Tables of the current schema in one transaction, replacing relations of those names
        there; with ``temporary`` TEMP tables of the connection (found before a table of the schema
        under the same name, which stays until :meth:`keep_relations`), replacing TEMP ones only."""
        schema = self._schema()
        with self.transaction():
            for name, _, _ in outputs:
                if temporary:
                    self._run(f"DROP TABLE IF EXISTS pg_temp.{quote_ident(name)}", render=False)
                else:
                    self._drop_in_schema(name, schema)
            for name, select, params in outputs:
                target = quote_ident(name) if temporary else f"{quote_ident(schema)}.{quote_ident(name)}"
                self._run(f"CREATE {'TEMP ' if temporary else ''}TABLE {target} AS {select}", params)

    def keep_relations(self, names: Sequence[str], *, replace: bool, what: str) -> None:
        """The TEMP tables ``names`` copied under the same names into the current schema and
        dropped, all in one transaction; a relation of that name there is replaced only with
        ``replace``."""
        schema = self._schema()
        for name in names:
            found = self._relkind(name)
            if found is None or not found[2]:
                raise InputError(f"{what}: this connection has no temporary table named {name!r}; write it first "
                                 "with swap(..., temporary=True) on the same connection (temporary tables end with it)")
            if self._in_schema(name, schema) and not replace:
                raise InputError(f"{what}: a relation named {name!r} exists already; pass replace=True or keep it")
        with self.transaction():
            for name in names:
                self._drop_in_schema(name, schema)
                target = f"{quote_ident(schema)}.{quote_ident(name)}"
                self._run(f"CREATE TABLE {target} AS SELECT * FROM pg_temp.{quote_ident(name)}", render=False)
                self._run(f"DROP TABLE pg_temp.{quote_ident(name)}", render=False)

    def _schema(self) -> str:
        """The schema the session creates its tables in (``current_schema()``)."""
        found = self._run("SELECT current_schema()", render=False).fetchall()[0][0]
        if found is None:
            raise InputError(f"PostgreSQL at {self._where}: no schema of the search_path exists to write the swap's "
                             "tables in; create one or set search_path")
        return str(found)

    def _drop_in_schema(self, name: str, schema: str) -> None:
        """Drop the relation ``name`` of ``schema``, if any (a TEMP one of that name stays)."""
        kind = self._in_schema(name, schema)
        if kind is not None:
            what = "VIEW" if kind == "v" else "MATERIALIZED VIEW" if kind == "m" else "TABLE"
            self._run(f"DROP {what} {quote_ident(schema)}.{quote_ident(name)}", render=False)

    def _in_schema(self, name: str, schema: str) -> str | None:
        """The relkind of relation ``name`` in ``schema``, or None."""
        rows = self._run("SELECT c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                         "WHERE c.relname = %s AND n.nspname = %s AND c.relkind IN ('r', 'v', 'm', 'p', 'f')",
                         [name, schema], render=False).fetchall()
        return str(rows[0][0]) if rows else None

    def discard_relations(self, names: Sequence[str]) -> None:
        """Drop the TEMP tables ``names``, if any; tables of the schema under those names stay."""
        for name in names:
            self._run(f"DROP TABLE IF EXISTS pg_temp.{quote_ident(name)}", render=False)

    # -- checks ---------------------------------------------------------------------------------
    def check_request(self, table: str, cols: dict[str, str], columns: Sequence[str], *,
                      top_k: int | None, holding: str | None) -> None:
        self._text_alike(table, cols, columns, "dimension or where column")
        if holding is not None:  # hashed and grouped by its text, as DuckDB does
            self._text_alike(table, cols, [holding], "holding column")

    def check_id_column(self, table: str, cols: dict[str, str], column: str) -> None:
        self._text_alike(table, cols, [column], "id column")

    def check_swap(self, table: str, cols: dict[str, str], household: str) -> None:
        """The household column hashed as DuckDB hashes it (its text): no float, decimal or time."""
        self._text_alike(table, cols, [household], "household column")

    @staticmethod
    def _text_alike(table: str, cols: dict[str, str], columns: Sequence[str], what: str) -> None:
        """SpecError for columns whose text PostgreSQL writes otherwise than DuckDB (floats, decimals, times)."""
        odd = [c for c in columns if c in cols and cols[c] not in _SAME_TEXT]
        if odd:
            raise SpecError(
                f"table {table!r}: {what} {show_values(odd)} of type {cols[odd[0]]} is not supported on the "
                "PostgreSQL engine yet (PostgreSQL writes such values as text otherwise than DuckDB, so codes and "
                "keys would differ); cast it to a text or integer column first"
            )

    def overflow_errors(self) -> tuple[type[BaseException], ...]:
        """A NUMERIC or BIGINT past its range (a sum beyond DECIMAL(38, 8) or 2^63)."""
        from psycopg import errors

        return (errors.NumericValueOutOfRange,)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All or nothing (psycopg's transaction block; nested blocks are savepoints)."""
        with self.con.transaction():
            yield

    # -- outputs: one Parquet file ---------------------------------------------------------------
    def check_sink(self, raw: str, refuse: Refuse) -> Path | None:
        from protab._io import check_output_file, real_path

        refuse(Path(real_path(raw)), raw)
        return check_output_file(raw)

    @contextmanager
    def parquet_sink(self, run: Any, raw: str, target: Path | None) -> Iterator[None]:
        """Written at ``target`` through a temporary file beside it, renamed into place when whole."""
        from protab._io import atomic_path

        assert target is not None
        with atomic_path(target) as tmp:
            run.sink = str(tmp)
            yield

    def install_ptable(self, ptable: PTable, modulus: int) -> None:
        """The p-table's tables and the functions ``ckm``/``ckm_weighted`` in the session's
        schema, for every session of the database (postgres_ptable)."""
        install_ptable(self.con, self._where, ptable, modulus)

    def close(self) -> None:
        """Close the connection (its TEMP tables and functions go with it). Idempotent."""
        self.con.close()


def _doubles(text: str, args: Sequence[Any]) -> str:
    """``text`` with each float parameter cast to a double (a bare literal would be NUMERIC)."""
    for k, v in enumerate(args):
        if isinstance(v, float):
            text = text.replace(f"%(p{k})s", f"CAST(%(p{k})s AS DOUBLE PRECISION)")
    return text


def _first(exc: BaseException) -> str:
    """The first line of an error's message."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _hide(reason: str, dsn: str) -> str:
    """``reason`` without the DSN's password (libpq's messages do not hold it; this makes sure)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        password = conninfo_to_dict(dsn).get("password")
    except Exception:
        return reason
    return reason.replace(str(password), "***") if password else reason
