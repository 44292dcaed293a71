"""Where protab's SQL runs: one interface, a DuckDB and a Spark implementation (after Ibis's
backends: one statement, one class per engine, no engine pretending to be another).

protab writes every statement once, in one dialect (DuckDB's, with ``?`` parameters:
``protab.rollup``, ``protab.session``). :class:`Engine` is the abstract contract (an
:class:`abc.ABC` after Ibis's ``BaseBackend``): the methods marked abstract are what every
engine provides; the few SQL pieces that differ between engines are data of each engine
(:attr:`Engine.templates`, filled in by :meth:`Engine.piece`), and no engine's SQL lives
here. Each engine registers itself once with its options (:mod:`protab.engines.registry`).
:class:`~protab.engines.DuckDBEngine` runs the statements as written;
:class:`~protab.engines.SparkEngine` renders them for Spark SQL with sqlglot and binds the
same values. The :class:`protab.Session` holds one engine and runs all its SQL through it;
what differs between engines — the catalog, registering files and frames, where record keys
are remembered, temporary relations, transactions, output files, errors — lives here, behind
the methods below, and nowhere else.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import polars as pl
import pyarrow as pa

from protab.errors import SpecError

if TYPE_CHECKING:  # pragma: no cover
    from protab.ptable import PTable

#: The SQL pieces every engine gives in :attr:`Engine.templates` (``str.format`` templates;
#: ``{{}}`` writes the ``{}`` of a finish template of :meth:`Engine.decimal8_sum`)
SQL_PIECES = ("decimal8", "decimal8_float", "decimal8_sum", "decimal8_sum_float", "decimal8_sum_finish",
              "decimal8_sum_float_finish", "decimal_times", "merged_list", "hex_integer", "ln")



@dataclass(frozen=True)
class Refused:
    """A template an engine does not have: :meth:`Engine.piece` raises a SpecError with ``message``."""

    message: str


#: ``refuse(real_path, raw)``: raises when an output at ``real_path`` would replace an input
Refuse = Callable[[Path, str], None]


def _plain(value: Any) -> Any:
    """A parameter as a plain Python value (numpy integers and floats included)."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value




class Engine(abc.ABC):
    """What protab needs of an SQL engine (after Ibis's ``BaseBackend``): the abstract methods
    below, and as data of the engine's class its :attr:`name`, :attr:`dialect`,
    :attr:`options` and :attr:`templates`. Statements are protab's SQL (DuckDB's dialect, ``?``
    parameters); names of relations are passed quoted where they come from users."""

    #: the name the engine is registered under (``Session.from_engine(name)``)
    name: ClassVar[str]
    #: the sqlglot dialect the engine's SQL is written in
    dialect: ClassVar[str]
    #: the options its :meth:`connect` takes, each with a short description (the option
    #: schema of the registry: an option of another engine is refused by name)
    options: ClassVar[Mapping[str, str]]
    #: the SQL pieces that differ between engines (:data:`SQL_PIECES`), as templates
    templates: ClassVar[Mapping[str, str | Refused]]
    #: the roll-up may read the rows so far as a union of several SELECTs (each read more
    #: than once) instead of one CTE; Spark's optimizer fails on those nested unions
    #: (NoSuchElementException in Union.rewriteConstraints, Spark 4.3), so it gets one CTE
    #: per step
    union_pieces: ClassVar[bool]
    #: what messages call the place the tables live (a database file, "spark")
    label: str = "engine"

    # -- making one -----------------------------------------------------------------------------
    @classmethod
    @abc.abstractmethod
    def connect(cls, target: Any = None, **options: Any) -> Engine:
        """The engine on ``target`` (a database, a session of the engine's own) with ``options``
        (names of :attr:`options` only: the registry checks them first)."""

    @classmethod
    def wraps(cls, obj: Any) -> bool:
        """Whether ``obj`` is a session of the engine's own that :meth:`connect` takes as its
        target (``Session(engine=obj)``); none by default."""
        return False

    @classmethod
    def missing_runtime(cls) -> str | None:
        """Why the engine cannot run on this machine (a package, a runtime missing), or None."""
        return None

    # -- statements ---------------------------------------------------------------------------
    @abc.abstractmethod
    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        """Run a statement."""

    @abc.abstractmethod
    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        """The rows of a query as tuples."""

    @abc.abstractmethod
    def arrow(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
        """The result of a query as an Arrow table."""

    def frame(self, sql: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        """The result of a query as a polars frame (through :meth:`arrow`)."""
        return pl.from_arrow(self.arrow(sql, params))  # type: ignore[return-value]

    @abc.abstractmethod
    def user_query(self, sql: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        """A query of the user's own, in the engine's own dialect, as a polars frame."""

    @abc.abstractmethod
    def write_parquet(self, sql: str, params: Sequence[Any] | None, path: str) -> None:
        """Write the result of a query as Parquet at ``path`` by the engine itself (rows in
        the query's order; nothing passes through Python)."""

    # -- relations of one request (internal names) --------------------------------------------
    @abc.abstractmethod
    def create_table(self, name: str, select: str, params: Sequence[Any] | None = None) -> None:
        """A temporary relation ``name`` holding the rows of ``select`` (computed once)."""

    @abc.abstractmethod
    def create_view(self, name: str, select: str, params: Sequence[Any] | None = None) -> None:
        """A temporary view ``name`` of ``select``."""

    @abc.abstractmethod
    def create_where_view(self, name: str, table: str, where: Sequence[tuple[str, str, Sequence[Any]]]) -> None:
        """A temporary view ``name`` of the records of ``table`` (a quoted name) that pass every
        ``(column, 'in' | 'not in', values)`` of a TableSpec's ``where``, the column compared
        as text, NULL never passing; no value pasted into the SQL."""

    @abc.abstractmethod
    def register(self, name: str, data: pa.Table) -> None:
        """An Arrow table readable as the relation ``name``."""

    @abc.abstractmethod
    def unregister(self, name: str) -> None:
        """Undo :meth:`register`."""

    @abc.abstractmethod
    def drop_table(self, name: str) -> None:
        """Drop a relation of :meth:`create_table` if it exists."""

    @abc.abstractmethod
    def drop_view(self, name: str) -> None:
        """Drop a view of :meth:`create_view` if it exists."""

    @abc.abstractmethod
    def insert(self, name: str, select: str, params: Sequence[Any] | None = None) -> None:
        """Append the rows of ``select`` to the relation ``name`` of :meth:`create_table`, each
        column cast to the relation's type (as ``INSERT INTO name SELECT``)."""

    # -- the catalog: the user's tables ---------------------------------------------------------
    @abc.abstractmethod
    def tables(self) -> list[str]:
        """Names of the user's tables and views (protab's own left out), sorted."""

    @abc.abstractmethod
    def kind(self, name: str) -> str | None:
        """"table", "view" or None when there is no such relation."""

    @abc.abstractmethod
    def columns(self, name: str) -> dict[str, str]:
        """Column name → type (DuckDB's type names) of a relation; empty when there is none."""

    @abc.abstractmethod
    def register_files(self, name: str, paths: list[str], kind: str, materialize: bool,
                       step: Callable[[str], Any]) -> None:
        """Make the files ``paths`` (``kind`` "parquet" or "csv") the relation ``name``."""

    @abc.abstractmethod
    def register_data(self, name: str, data: Any, step: Callable[[str], Any]) -> None:
        """Copy an Arrow table (or pandas frame) into the relation ``name``."""

    @abc.abstractmethod
    def register_alias(self, name: str, source: str) -> None:
        """The relation ``name`` reads the existing relation ``source``."""

    @abc.abstractmethod
    def drop_relation(self, name: str) -> None:
        """Drop the user's table or view ``name`` if there is one."""

    # -- record keys ----------------------------------------------------------------------------
    @abc.abstractmethod
    def key_tag(self, table: str) -> tuple[str, int] | None:
        """(column, modulus) of the record keys the engine remembers for ``table``, or None."""

    @abc.abstractmethod
    def write_key_column(self, table: str, name: str, expr: str, params: list[Any], modulus: int,
                         replace_column: bool) -> None:
        """Add (or replace) the column ``name`` = ``expr`` to ``table`` and remember it as the
        table's record keys below ``modulus``; all or nothing."""

    @abc.abstractmethod
    def tag_key_column(self, table: str, column: str, modulus: int) -> None:
        """Remember that ``column`` of ``table`` holds record keys below ``modulus``."""

    # -- relations that live as long as the session -------------------------------------------
    @abc.abstractmethod
    def temp_table(self, name: str, select: str, params: Sequence[Any]) -> None:
        """A relation of the session named ``name`` (a user-visible name) holding ``select``."""

    @abc.abstractmethod
    def drop_temp_table(self, name: str) -> None:
        """Drop a relation of :meth:`temp_table` if it exists."""

    # -- relations written for the user (the swapped records and their log) ---------------------
    @abc.abstractmethod
    def write_relations(self, outputs: Sequence[tuple[str, str, Sequence[Any]]], *, temporary: bool) -> None:
        """Write each ``(name, select, params)`` as the user's relation ``name``, replacing one of
        that name, all or nothing. With ``temporary`` they last until :meth:`keep_relations` or
        :meth:`discard_relations` (a relation they replace comes back on discard)."""

    @abc.abstractmethod
    def keep_relations(self, names: Sequence[str], *, replace: bool, what: str) -> None:
        """Keep the temporary relations ``names`` of :meth:`write_relations` under their names, all
        or nothing; one they replaced is given up only with ``replace`` (``what`` names the caller
        in errors)."""

    @abc.abstractmethod
    def discard_relations(self, names: Sequence[str]) -> None:
        """Drop the temporary relations ``names`` of :meth:`write_relations`, if any."""

    def row_order(self, name: str) -> str | None:
        """The column that holds the rows of relation ``name`` in their stored order, or None
        where the rows have no order of their own (the default)."""
        return None

    # -- checks and guards (optional: nothing to refuse, undo or report by default) -------------
    def check_request(self, table: str, cols: dict[str, str], columns: Sequence[str], *,
                      top_k: int | None, holding: str | None) -> None:
        """Refuse, before any work, a table request the engine cannot answer as DuckDB would."""
        return None  # nothing to refuse

    def check_id_column(self, table: str, cols: dict[str, str], column: str) -> None:
        """Refuse an id column whose values the engine hashes otherwise than DuckDB."""
        return None  # nothing to refuse

    def check_swap(self, table: str, cols: dict[str, str], household: str) -> None:
        """Refuse, before any work, a record swap the engine cannot run as DuckDB would."""
        return None  # nothing to refuse

    def database_files(self) -> list[str]:
        """The files of the engine's database that no output may replace (real paths)."""
        return []

    @abc.abstractmethod
    def check_sink(self, raw: str, refuse: Refuse) -> Path | None:
        """Where a ``path=`` output goes, checked before any work (``refuse`` guards the inputs)."""

    @abc.abstractmethod
    def parquet_sink(self, run: Any, raw: str, target: Path | None) -> contextlib.AbstractContextManager[None]:
        """Point ``run`` at ``raw`` (checked as ``target``) so that it writes its table there
        (a context manager: the file or folder is in place when the block ends without error)."""

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

    # -- SQL pieces that differ: the engine's templates ------------------------------------------
    def piece(self, key: str, **values: Any) -> str:
        """The engine's template ``key`` (:attr:`templates`) filled with ``values``; a
        :class:`Refused` one raises its SpecError."""
        template = self.templates[key]
        if isinstance(template, Refused):
            raise SpecError(template.message)
        return template.format(**values)

    def decimal8(self, expr: str, floating: bool) -> str:
        """SQL of ``expr`` as an exact DECIMAL(38, 8), NULL where it cannot be (NaN, ±inf,
        |x| ≥ 1e30). DuckDB's cast of a floating-point value rounds x·10^8 half away from
        zero in binary; every engine must give that same decimal."""
        return self.piece("decimal8_float" if floating else "decimal8", expr=expr)

    def decimal8_sum(self, expr: str, floating: bool) -> tuple[str, str]:
        """(aggregate, finish) that sum ``expr`` exactly as :meth:`decimal8` gives each value:
        the aggregate of the GROUP BY, and a template of the SQL that turns its result (the
        aggregate's column, where the template says ``{}``) into the DECIMAL(38, 8) sum; a
        finish of just ``"{}"`` means the aggregate is that sum already."""
        key = "decimal8_sum_float" if floating else "decimal8_sum"
        return (self.piece(key, expr=expr, decimal8=self.decimal8(expr, floating)),
                self.piece(key + "_finish"))

    def decimal_times(self, value: str, coef: str) -> str:
        """SQL of a DECIMAL(38, 8) ``value`` times an integer coefficient, keeping 8 decimals."""
        return self.piece("decimal_times", value=value, coef=coef)

    def merged_list(self, lists: str, n: int, *, descending: bool) -> str:
        """SQL of an aggregate merging sorted lists (column ``lists``) to the ``n`` largest
        (``descending``) or smallest of all their values, in that order; NULL when every list
        is NULL (the top lists of key sums, protab.rollup.partials). ``{order}`` is DESC or ASC."""
        return self.piece("merged_list", lists=lists, n=int(n), order="DESC" if descending else "ASC")

    def hex_integer(self, digits: str) -> str:
        """SQL of up to 15 hexadecimal digits (text) as the whole number they write."""
        return self.piece("hex_integer", digits=digits)

    def ln(self, expr: str) -> str:
        """SQL of the natural logarithm of a DOUBLE, rounded as DuckDB's ``ln`` (the C library's
        ``log``), to the last bit: keys that are sorted must sort alike on every engine."""
        return self.piece("ln", expr=expr)

    # -- the ckm() SQL function, lifecycle -----------------------------------------------------
    @abc.abstractmethod
    def install_ptable(self, ptable: PTable, modulus: int) -> None:
        """Install ``ptable`` for the engine's ``ckm()`` SQL function (or refuse: a SpecError)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release what the engine holds for the session (not a session the caller owns)."""
