"""Where protab's SQL runs: one interface, a DuckDB and a Spark implementation (after Ibis's
backends: one statement, one class per engine, no engine pretending to be another).

protab writes every statement once, in DuckDB's SQL dialect with ``?`` parameters
(``protab.rollup``, ``protab.session``). :class:`~protab.engines.DuckDBEngine` runs it as
written; :class:`~protab.engines.SparkEngine` renders it for Spark SQL with sqlglot and binds
the same values. The :class:`protab.Session` holds one engine and runs all its SQL through it;
what differs between engines — the catalog, registering files and frames, where record keys
are remembered, temporary relations, transactions, output files, errors — lives here, behind
the methods below, and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from protab.sqltools import quote_ident

if TYPE_CHECKING:  # pragma: no cover
    from protab.ptable import PTable

#: ``refuse(real_path, raw)``: raises when an output at ``real_path`` would replace an input
Refuse = Callable[[Path, str], None]


def _plain(value: Any) -> Any:
    """A parameter as a plain Python value (numpy integers and floats included)."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value


class Engine:
    """What protab needs of an SQL engine. Statements are DuckDB SQL with ``?`` parameters;
    names of relations are passed quoted where they come from users."""

    name = "engine"
    #: the roll-up may read the rows so far as a union of several SELECTs (each read more
    #: than once) instead of one CTE; Spark's optimizer fails on those nested unions
    #: (NoSuchElementException in Union.rewriteConstraints, Spark 4.3), so it gets one CTE
    #: per step as before
    union_pieces = True
    #: what messages call the place the tables live (a database file, "spark")
    label = "engine"

    # -- statements ---------------------------------------------------------------------------
    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:  # pragma: no cover
        raise NotImplementedError

    def arrow(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:  # pragma: no cover
        raise NotImplementedError

    def frame(self, sql: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        return pl.from_arrow(self.arrow(sql, params))  # type: ignore[return-value]

    def user_query(self, sql: str, params: Sequence[Any] | None = None) -> pl.DataFrame:  # pragma: no cover
        """A query of the user's own, in the engine's own dialect, as a polars frame."""
        raise NotImplementedError

    def write_parquet(self, sql: str, params: Sequence[Any] | None, path: str) -> None:  # pragma: no cover
        """Write the result of a query as Parquet at ``path`` by the engine itself (rows in
        the query's order; nothing passes through Python)."""
        raise NotImplementedError

    # -- relations of one request (internal names) --------------------------------------------
    def create_table(self, name: str, select: str, params: Sequence[Any] | None = None) -> None:  # pragma: no cover
        raise NotImplementedError

    def create_view(self, name: str, select: str, params: Sequence[Any] | None = None) -> None:  # pragma: no cover
        raise NotImplementedError

    def create_where_view(self, name: str, table: str, where: Sequence[tuple[str, str, Sequence[Any]]]) -> None:
        """A temporary view ``name`` of the records of ``table`` (a quoted name) that pass every
        ``(column, 'in' | 'not in', values)`` of a TableSpec's ``where``, the column compared
        as text, NULL never passing; the values bound as parameters."""
        conds: list[str] = []
        params: list[Any] = []
        for column, op, values in where:
            marks = ", ".join("?" for _ in values)
            hit = f"CAST({quote_ident(column)} AS VARCHAR) IN ({marks})" if values else "FALSE"
            conds.append(f"coalesce({hit if op == 'in' else f'NOT ({hit})'}, FALSE)")
            params += [str(v) for v in values]
        self.create_view(name, f"SELECT * FROM {table} WHERE {' AND '.join(conds)}", params)

    def register(self, name: str, data: pa.Table) -> None:  # pragma: no cover
        raise NotImplementedError

    def unregister(self, name: str) -> None:  # pragma: no cover
        raise NotImplementedError

    def drop_table(self, name: str) -> None:  # pragma: no cover
        raise NotImplementedError

    def drop_view(self, name: str) -> None:  # pragma: no cover
        raise NotImplementedError

    def insert(self, name: str, select: str, params: Sequence[Any] | None = None) -> None:  # pragma: no cover
        """Append the rows of ``select`` to the relation ``name`` of :meth:`create_table`, each
        column cast to the relation's type (as ``INSERT INTO name SELECT``)."""
        raise NotImplementedError

    # -- the catalog: the user's tables ---------------------------------------------------------
    def tables(self) -> list[str]:  # pragma: no cover - interface
        """Names of the user's tables and views (protab's own left out), sorted."""
        raise NotImplementedError

    def kind(self, name: str) -> str | None:  # pragma: no cover
        """"table", "view" or None when there is no such relation."""
        raise NotImplementedError

    def columns(self, name: str) -> dict[str, str]:  # pragma: no cover
        """Column name → type (DuckDB's type names) of a relation; empty when there is none."""
        raise NotImplementedError

    def register_files(self, name: str, paths: list[str], kind: str, materialize: bool,
                       step: Callable[[str], Any]) -> None:  # pragma: no cover
        """Make the files ``paths`` (``kind`` "parquet" or "csv") the relation ``name``."""
        raise NotImplementedError

    def register_data(self, name: str, data: Any, step: Callable[[str], Any]) -> None:  # pragma: no cover
        """Copy an Arrow table (or pandas frame) into the relation ``name``."""
        raise NotImplementedError

    def register_alias(self, name: str, source: str) -> None:  # pragma: no cover
        """The relation ``name`` reads the existing relation ``source``."""
        raise NotImplementedError

    def drop_relation(self, name: str) -> None:  # pragma: no cover
        """Drop the user's table or view ``name`` if there is one."""
        raise NotImplementedError

    # -- record keys ----------------------------------------------------------------------------
    def key_tag(self, table: str) -> tuple[str, int] | None:  # pragma: no cover
        """(column, modulus) of the record keys the engine remembers for ``table``, or None."""
        raise NotImplementedError

    def write_key_column(self, table: str, name: str, expr: str, params: list[Any], modulus: int,
                         replace_column: bool) -> None:  # pragma: no cover
        """Add (or replace) the column ``name`` = ``expr`` to ``table`` and remember it as the
        table's record keys below ``modulus``; all or nothing."""
        raise NotImplementedError

    def tag_key_column(self, table: str, column: str, modulus: int) -> None:  # pragma: no cover
        """Remember that ``column`` of ``table`` holds record keys below ``modulus``."""
        raise NotImplementedError

    # -- relations that live as long as the session -------------------------------------------
    def temp_table(self, name: str, select: str, params: Sequence[Any]) -> None:  # pragma: no cover
        """A relation of the session named ``name`` (a user-visible name) holding ``select``."""
        raise NotImplementedError

    def drop_temp_table(self, name: str) -> None:  # pragma: no cover
        raise NotImplementedError

    # -- relations written for the user (the swapped records and their log) ---------------------
    def write_relations(self, outputs: Sequence[tuple[str, str, Sequence[Any]]], *,
                        temporary: bool) -> None:  # pragma: no cover
        """Write each ``(name, select, params)`` as the user's relation ``name``, replacing one of
        that name, all or nothing. With ``temporary`` they last until :meth:`keep_relations` or
        :meth:`discard_relations` (a relation they replace comes back on discard)."""
        raise NotImplementedError

    def keep_relations(self, names: Sequence[str], *, replace: bool, what: str) -> None:  # pragma: no cover
        """Keep the temporary relations ``names`` of :meth:`write_relations` under their names, all
        or nothing; one they replaced is given up only with ``replace`` (``what`` names the caller
        in errors)."""
        raise NotImplementedError

    def discard_relations(self, names: Sequence[str]) -> None:  # pragma: no cover
        """Drop the temporary relations ``names`` of :meth:`write_relations`, if any."""
        raise NotImplementedError

    def row_order(self, name: str) -> str | None:
        """The column that holds the rows of relation ``name`` in their stored order (DuckDB's
        ``rowid`` of a table), or None where the rows have no order of their own."""
        return None

    # -- checks and guards ----------------------------------------------------------------------
    def check_request(self, table: str, cols: dict[str, str], columns: Sequence[str], *,
                      top_k: int | None, holding: str | None) -> None:
        """Refuse, before any work, a table request the engine cannot answer as DuckDB would."""

    def check_id_column(self, table: str, cols: dict[str, str], column: str) -> None:
        """Refuse an id column whose values the engine hashes otherwise than DuckDB."""

    def check_swap(self, table: str, cols: dict[str, str], household: str) -> None:
        """Refuse, before any work, a record swap the engine cannot run as DuckDB would."""

    def database_files(self) -> list[str]:
        """The files of the engine's database that no output may replace (real paths)."""
        return []

    def check_sink(self, raw: str, refuse: Refuse) -> Path | None:  # pragma: no cover
        """Where a ``path=`` output goes, checked before any work (``refuse`` guards the inputs)."""
        raise NotImplementedError

    @contextmanager
    def parquet_sink(self, run: Any, raw: str, target: Path | None) -> Iterator[None]:  # pragma: no cover
        """Point ``run`` at ``raw`` (checked as ``target``) so that it writes its table there."""
        raise NotImplementedError
        yield

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All or nothing where the engine has transactions (nothing to undo otherwise)."""
        yield

    @contextmanager
    def errors(self, table: str) -> Iterator[None]:
        """The engine's resource errors (out of memory) as protab errors that say what to do."""
        yield

    @contextmanager
    def step(self, desc: str) -> Iterator[None]:
        """A progress bar over the queries of the block, where the engine reports progress."""
        yield

    def overflow_errors(self) -> tuple[type[BaseException], ...]:
        """The exceptions the engine raises when a sum overflows its type."""
        return ()

    # -- SQL pieces that differ ------------------------------------------------------------------
    def decimal8(self, expr: str, floating: bool) -> str:
        """SQL of ``expr`` as an exact DECIMAL(38, 8), NULL where it cannot be (NaN, ±inf,
        |x| ≥ 1e30). DuckDB's cast of a floating-point value rounds x·10^8 half away from
        zero in binary; every engine must give that same decimal."""
        return f"TRY_CAST({expr} AS DECIMAL(38, 8))"

    def decimal8_sum(self, expr: str, floating: bool) -> tuple[str, str]:
        """(aggregate, finish) that sum ``expr`` exactly as :meth:`decimal8` gives each value:
        the aggregate of the GROUP BY, and a template of the SQL that turns its result (the
        aggregate's column, where the template says ``{}``) into the DECIMAL(38, 8) sum; a
        finish of just ``"{}"`` means the aggregate is that sum already, as here."""
        return f"sum({self.decimal8(expr, floating)})", "{}"

    def decimal_times(self, value: str, coef: str) -> str:
        """SQL of a DECIMAL(38, 8) ``value`` times an integer coefficient, keeping 8 decimals."""
        return f"{value} * {coef}"

    def merged_list(self, lists: str, n: int, *, descending: bool) -> str:
        """SQL of an aggregate merging sorted lists (column ``lists``) to the ``n`` largest
        (``descending``) or smallest of all their values, in that order; NULL when every list
        is NULL (the top lists of key sums, protab.rollup.partials)."""
        order = "'DESC'" if descending else "'ASC'"
        return (f"list_slice(list_sort(flatten(list({lists}) FILTER (WHERE {lists} IS NOT NULL)), {order}), "
                f"1, {int(n)})")

    def hex_integer(self, digits: str) -> str:
        """SQL of up to 15 hexadecimal digits (text) as the whole number they write."""
        return f"CAST('0x' || {digits} AS UBIGINT)"

    def ln(self, expr: str) -> str:
        """SQL of the natural logarithm of a DOUBLE, rounded as DuckDB's ``ln`` (the C library's
        ``log``), to the last bit: keys that are sorted must sort alike on every engine."""
        return f"ln({expr})"

    # -- the ckm() SQL function, lifecycle -----------------------------------------------------
    def install_ptable(self, ptable: PTable, modulus: int) -> None:  # pragma: no cover
        """Install ``ptable`` for the engine's ``ckm()`` SQL function."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the engine holds for the session (not a SparkSession the caller owns)."""
