"""The Session: protab's one public door — microdata registered in an engine (DuckDB or Spark),
record keys, tables, suppression, swapping — assembled from one mixin per concern:
:mod:`.catalog` (registration, look-ups, outputs), :mod:`.keys` (record keys, key sums),
:mod:`.tables` (table requests), :mod:`.suppress` (cell suppression), :mod:`.census`
(hierarchies from data, swapping, the installed p-table). Every statement goes through the
engine (:mod:`protab.engines`); nothing here knows which engine it is.
"""

from __future__ import annotations

import os
from typing import Any

from protab.engines import Engine, check_options, engine_class, engines
from protab.errors import InputError
from protab.rollup.partials import Partials
from protab.session.arguments import DEFAULT_DATABASE, DEFAULT_MAX_CELLS, check_max_cells
from protab.session.catalog import Catalog
from protab.session.census import Census
from protab.session.keys import Keys
from protab.session.suppress import Suppression
from protab.session.tables import Tables


class Session(Catalog, Keys, Tables, Suppression, Census):
    """Microdata in an engine — a DuckDB database (default), a Spark session or a PostgreSQL
    database (:meth:`postgres`, count tables; docs/postgres.md) — and the
    protab operations on them. Every statement runs through the session's :attr:`engine`
    (:mod:`protab.engines`); the methods are the same on both engines, and so are the results.

    ``Session()`` opens :data:`DEFAULT_DATABASE` (``protab.duckdb`` in the working
    directory); ``Session(":memory:")`` keeps everything in memory; ``Session(engine=spark)``
    (a ``pyspark.sql.SparkSession``, or :meth:`Session.spark`) runs on Spark (docs/spark.md);
    ``engine`` may also name a registered engine or be an open :class:`~protab.engines.Engine`
    (:meth:`from_engine`). The DuckDB options below are DuckDB's: given (other than their
    defaults) with another engine they are an InputError naming the option and the engine.
    :meth:`duckdb`, :meth:`spark` and :meth:`from_engine` take only their engine's options. New database files are
    written in the storage format of ``storage_version`` (DuckDB 1.2 by default), so that
    older duckdb command lines can open them; ``None`` uses the library's newest format.

    Resources:

    - ``max_cells``: Refuse a table request estimated to publish more cells than this (default
      :data:`DEFAULT_MAX_CELLS`, 10^8; ``None``: no limit). The estimate is made after the
      scan of the microdata, before the roll-up, from the number of codes of each
      dimension: the sum over the published crossings of the product of their dimensions'
      code counts (margins included); with ``drop_empty`` at most the number of inner
      cells times the number of level combinations. A crossing of identifiers (person ×
      household × age) is refused at once instead of exhausting memory and disk.
    - ``memory_limit``: DuckDB's memory limit: a size such as ``"4GB"`` or ``"50%"``, or a number of bytes.
      Default: half of the machine's memory (or of the container's limit), so that DuckDB
      spills to disk before the system runs out of memory.
    - ``temp_directory``: Where DuckDB spills: protab makes a private folder
      ``protab-<user>/s-<pid>-<random>`` under this folder (default: the system's
      temporary folder, ``TMPDIR``) and removes it when the session closes — not a
      ``.tmp`` folder next to the database. Folders that a killed process left behind are
      removed by the next Session (on POSIX systems, where each live session holds a lock
      on its folder). Sessions of one process on the same database file share one folder
      (DuckDB opens the file once, with one configuration), removed with the last of them.
    - ``progress``: Progress bars. protab's own (tqdm, via ``protab._progress``) on long steps — checking
      ids and adding record keys, copying files or frames into the database — fed by
      DuckDB's progress of the running query; DuckDB's bar on other long queries.
      ``None`` (default): both shown when stderr is a terminal or ``PROTAB_PROGRESS=1``,
      neither with ``PROTAB_PROGRESS=0``; ``False``: none; ``True``: DuckDB's bar always,
      protab's as for ``None``. Bars show a step name and a percentage, never a seed,
      key or value.
    """

    #: Columns of a key-sum table (see :meth:`key_sums`)
    KEY_SUM_RECORDS, KEY_SUM_KEY = "protab_records", "protab_key_sum"

    def __init__(
        self,
        database: str | os.PathLike[str] = DEFAULT_DATABASE,
        *,
        engine: Any = None,
        read_only: bool = False,
        threads: int | None = None,
        progress: bool | None = None,
        storage_version: str | None = "v1.2.0",
        max_cells: int | float | None = DEFAULT_MAX_CELLS,
        memory_limit: str | int | None = None,
        temp_directory: str | os.PathLike[str] | None = None,
    ) -> None:
        self.max_cells = check_max_cells(max_cells)
        self.engine: Engine = _engine(engine, dict(
            database=database, read_only=read_only, threads=threads, progress=progress,
            storage_version=storage_version, memory_limit=memory_limit, temp_directory=temp_directory))
        self.database = self.engine.label
        self._read_paths: list[str] = []  # files registered in this session (outputs never replace them)
        self._keys: dict[str, tuple[str, int]] = {}
        self._key_sum_sources: dict[str, str] = {}  # key-sum tables (key_sums) → the table they sum
        self._key_sum_partials: dict[str, Partials] = {}  # key-sum tables → the sums they keep
        self._key_sum_columns: dict[str, dict[str, str]] = {}  # key-sum tables → their columns (types)
        self._hierarchies: dict[Any, tuple[str, str]] = {}  # code and bridge tables per hierarchy

    @classmethod
    def duckdb(cls, database: str | os.PathLike[str] = DEFAULT_DATABASE, *, read_only: bool = False,
               threads: int | None = None, progress: bool | None = None, storage_version: str | None = "v1.2.0",
               max_cells: int | float | None = DEFAULT_MAX_CELLS, memory_limit: str | int | None = None,
               temp_directory: str | os.PathLike[str] | None = None, **options: Any) -> Session:
        """A Session on a DuckDB database (as ``Session(database, ...)``); an option of another
        engine is an InputError naming it."""
        return cls.from_engine("duckdb", database=database, read_only=read_only, threads=threads, progress=progress,
                               storage_version=storage_version, max_cells=max_cells, memory_limit=memory_limit,
                               temp_directory=temp_directory, **options)

    @classmethod
    def spark(cls, spark_session: Any, *, max_cells: int | float | None = DEFAULT_MAX_CELLS, **options: Any) -> Session:
        """A Session whose tables live in Spark (a ``pyspark.sql.SparkSession``, classic or a
        Spark Connect client's, docs/spark.md "Through Spark Connect"): the same
        methods and the same frames, cell for cell (docs/spark.md). The SparkSession stays the
        caller's: closing the Session drops protab's views, not Spark. A DuckDB option (or any
        other) is an InputError naming it."""
        return cls.from_engine("spark", spark_session=spark_session, max_cells=max_cells, **options)

    @classmethod
    def postgres(cls, dsn: str, *, max_cells: int | float | None = DEFAULT_MAX_CELLS, **options: Any) -> Session:
        """A Session whose tables live in a PostgreSQL database (``dsn``: a libpq connection
        string or a ``postgresql://`` URI; docs/postgres.md): count tables are the same frames as
        DuckDB's, cell for cell; what the engine does not support yet is refused. Any other
        option is an InputError naming it."""
        return cls.from_engine("postgres", dsn=dsn, max_cells=max_cells, **options)

    @classmethod
    def from_engine(cls, engine: str | type[Engine] | Engine | Any, *,
                    max_cells: int | float | None = DEFAULT_MAX_CELLS, **options: Any) -> Session:
        """A Session on ``engine``: the name of a registered engine (``protab.engines.engines()``),
        an engine class, an open :class:`~protab.engines.Engine` (no options), or a session of
        an engine's own (a ``pyspark.sql.SparkSession``). ``options`` are that engine's only
        (its :attr:`~protab.engines.Engine.options`); any other is an InputError naming the
        option, the engine and the options it accepts."""
        check_max_cells(max_cells)
        if isinstance(engine, Engine):
            _no_options(engine, options)
            return cls(engine=engine, max_cells=max_cells)
        klass, target = _engine_class(engine)
        check_options(klass, options, "Session.from_engine")
        return cls(engine=klass.connect(target, **options), max_cells=max_cells)

    def close(self) -> None:
        """Release the engine (DuckDB: the connection and the spill folder; Spark: protab's
        hierarchy views only). Idempotent."""
        try:
            self.forget_hierarchies()  # temporary relations; Spark keeps views until its session ends
        finally:
            self.engine.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: The DuckDB options of ``Session(...)`` and their defaults (given otherwise: given)
_DUCKDB_DEFAULTS: dict[str, Any] = {"database": DEFAULT_DATABASE, "read_only": False, "threads": None, "progress": None,
                                    "storage_version": "v1.2.0", "memory_limit": None, "temp_directory": None}


def _engine(engine: Any, options: dict[str, Any]) -> Engine:
    """The engine of ``Session(...)``: DuckDB on ``database`` (default), an open :class:`Engine`,
    a registered engine by name or class, or the engine whose own session ``engine`` is (a
    ``pyspark.sql.SparkSession``); DuckDB's options given to another engine are refused."""
    given = {k: v for k, v in options.items() if not _is_default(v, _DUCKDB_DEFAULTS[k])}
    if isinstance(engine, Engine):
        _no_options(engine, given)
        return engine
    klass, target = _engine_class(engine)
    check_options(klass, given)
    if target is None:  # opened here: the options it takes, defaults included
        return klass.connect(**{k: v for k, v in options.items() if k in klass.options})
    return klass.connect(target, **given)


def _is_default(value: Any, default: Any) -> bool:
    return value is default or (type(value) is type(default) and value == default)


def _engine_class(engine: Any) -> tuple[type[Engine], Any]:
    """(class, target) of ``engine``: a registered name (DuckDB for None), a class, or an object
    a registered engine wraps (:meth:`Engine.wraps`), which becomes the target."""
    if engine is None or isinstance(engine, str):
        return engine_class(engine or "duckdb"), None
    if isinstance(engine, type) and issubclass(engine, Engine):
        return engine, None
    for klass in engines().values():
        if klass.wraps(engine):
            return klass, engine
    raise InputError(f"Session: engine must be the name of a registered engine ({', '.join(engines())}), "
                     f"an Engine or a pyspark SparkSession, not {type(engine).__name__}")


def _no_options(engine: Engine, options: dict[str, Any]) -> None:
    """An open engine takes no options: they are given when it is opened."""
    if options:
        first = next(iter(options))
        raise InputError(f"Session: the {engine.name} engine given is open already; the option {first!r} is "
                         f"given when an engine is opened (Session.from_engine({engine.name!r}, {first}=...))")
