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
from protab.sqltools import quote_ident

if TYPE_CHECKING:  # pragma: no cover
    from protab.ptable import PTable

#: The SQL pieces every engine gives in :attr:`Engine.templates` (``str.format`` templates;
#: ``{{}}`` writes the ``{}`` of a finish template of :meth:`Engine.decimal8_sum`)
SQL_PIECES = ("decimal8", "decimal8_float", "decimal8_sum", "decimal8_sum_float", "decimal8_sum_finish",
              "decimal8_sum_float_finish", "decimal_times", "merged_list", "hex_integer")



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


def _double(value: float) -> str:
    """A DOUBLE constant every engine reads as the same double: a cast of its 17 significant
    digits (read correctly rounded everywhere), not a literal (DuckDB types 0.5 as DECIMAL)."""
    return f"CAST('{value:.17g}' AS DOUBLE)"


#: ln 2 as two doubles: 42 significant bits (k·hi is exact for every exponent k of a double) and
#: the rest, rounded (0x1.62e42fefa38p-1 + 0x1.ef35793c7673p-45, 2e-31 from ln 2)
_LN2_HI, _LN2_LO = float.fromhex("0x1.62e42fefa38p-1"), float.fromhex("0x1.ef35793c7673p-45")
#: √½ rounded: the mantissa m is taken in [c, 2c), so |s| = |m − 1|/(m + 1) ≤ 0.172
_C = float.fromhex("0x1.6a09e667f3bcdp-1")
#: the terms 2/3, 2/5, … 2/23 of ln((1 + s)/(1 − s)) = 2s + s·(2s²/3 + 2s⁴/5 + …): the next
#: one is below 2^-60 of the sum
_SERIES = tuple(2.0 / (2 * j + 1) for j in range(1, 12))


def ln_steps(x: str, name: str) -> list[list[tuple[str, str]]]:
    """The natural logarithm of the DOUBLE ``x`` (positive, finite) in plain IEEE double
    arithmetic, as the columns (quoted name, SQL) of successive SELECTs, each reading the columns
    of the ones before: the last is ``name``, the others ``name__*``. The textbook reduction (as
    fdlibm's ``log``, with the Taylor series): x = 2^k·m with m in [√½, √2), found from the
    engine's ``ln`` but made exact by comparisons; then ln x = k·ln 2 + ln m with f = m − 1,
    s = f/(m + 1), ln m = f − f²/2 + s·(f²/2 + R(s²)), and k·ln2_hi + f summed exactly
    (Knuth's two-sum). Within 1 ulp of the C library's ``log`` (tests/engines)."""
    def c(part: str) -> str:
        return quote_ident(f"{name}__{part}")

    one, two, half = _double(1.0), _double(2.0), _double(0.5)
    # an exponent k0 that may be 1 off (the engine's ln), and m0 = x·2^-k0 exactly, in [0.5, 4)
    # (in two factors: 2^-k0 alone overflows for a subnormal x; pow of 2 to a whole number is
    # exact where the result is a double: Java's specification, the C libraries)
    k0, m0 = c("k0"), c("m0")
    e1, e2 = f"floor({half} * -{k0})", f"-{k0} - floor({half} * -{k0})"
    below = [f"{m0} < {_double(_C * 2.0**j)}" for j in range(3)]
    shift = "CASE " + " ".join(f"WHEN {w} THEN {d}" for w, d in zip(below, (-1, 0, 1))) + " ELSE 2 END"
    scale = "CASE " + " ".join(f"WHEN {w} THEN {_double(2.0**-d)}" for w, d in zip(below, (-1, 0, 1)))
    k, m, f, s, a, hf, r, t, b = (c(p) for p in ("k", "m", "f", "s", "a", "h", "r", "t", "b"))
    # f = m − 1 is exact (Sterbenz), k·ln2_hi too; t + (the error of t) = k·ln2_hi + f exactly
    z = f"({s} * {s})"
    series = _double(_SERIES[-1])
    for coef in reversed(_SERIES[:-1]):
        series = f"({_double(coef)} + {z} * {series})"
    return [
        [(c("x"), f"({x})"), (k0, f"CAST(floor(ln({x}) * {_double(1 / _LN2_HI)}) AS DOUBLE)")],  # ≈ log2 x
        [(m0, f"({c('x')} * power({two}, {e1})) * power({two}, {e2})")],
        [(k, f"{k0} + {shift}"), (m, f"{m0} * {scale} ELSE {_double(0.25)} END")],
        [(f, f"{m} - {one}"), (s, f"({m} - {one}) / ({m} + {one})"), (a, f"{k} * {_double(_LN2_HI)}")],
        [(t, f"{a} + {f}"), (hf, f"({half} * {f}) * {f}"), (r, f"{z} * {series}")],
        [(b, f"{t} - {a}")],
        [(quote_ident(name), f"{t} + ((({a} - ({t} - {b})) + ({f} - {b})) "
                             f"+ ({k} * {_double(_LN2_LO)} - ({hf} - {s} * ({hf} + {r}))))")],
    ]




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

    def ln_columns(self, source: str, logs: Mapping[str, str]) -> str:
        """A query of every column of the query ``source`` and, under each name of ``logs``, the
        natural logarithm of its DOUBLE expression (a positive finite double; over ``source``'s
        columns), in plain IEEE double arithmetic (:func:`ln_steps`): the same operations on
        every engine give the same double to the last bit, where engines' own ``ln`` differ
        (the C library's and Java's StrictMath.log), and no engine runs a user-defined function.
        Keys that are sorted (a swap's) sort alike on every engine."""
        sql = source
        for depth, step in enumerate(zip(*(ln_steps(expr, name) for name, expr in logs.items()))):
            items = ", ".join(f"{expr} AS {col}" for part in step for col, expr in part)
            sql = f"SELECT *, {items} FROM ({sql}) AS protab_ln{depth}"
        return sql

    # -- the ckm() SQL function, lifecycle -----------------------------------------------------
    @abc.abstractmethod
    def install_ptable(self, ptable: PTable, modulus: int) -> None:
        """Install ``ptable`` for the engine's ``ckm()`` SQL function (or refuse: a SpecError)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release what the engine holds for the session (not a session the caller owns)."""
