"""Session: the DuckDB connection, registered microdata, record keys and the SQL roll-up.

This is the only module that holds a connection. Microdata never cross into Python: tables
are scanned once into *inner cells* (DESIGN.md, idea 1), rolled up through the hierarchy
relations (idea 2), and perturbed by a join with the p-table relation (idea 3), all in SQL.
Results cross as Arrow into polars frames. User strings (table and column names, paths,
seeds, codes) are always quoted identifiers or bound parameters, never spliced into SQL.
"""

from __future__ import annotations

import os
import re
import sys
import uuid
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import duckdb
import polars as pl
import pyarrow as pa

from protab.errors import InputError, ProtabError, SpecError, show_values
from protab.table import TableSpec

if TYPE_CHECKING:  # pragma: no cover
    from protab.hierarchy import Hierarchy
    from protab.ptable import PTable

#: The database file a Session opens when none is named (in the working directory).
DEFAULT_DATABASE = "protab.duckdb"

_KEY_COMMENT = re.compile(r"^protab record key; modulus=(\d+)$")
_NUMERIC = re.compile(
    r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|"
    r"FLOAT|DOUBLE|REAL|DECIMAL.*)$"
)
_INTEGER = re.compile(r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT)$")


def quote_ident(name: str) -> str:
    """Quote an SQL identifier (double quotes, inner quotes doubled)."""
    return '"' + str(name).replace('"', '""') + '"'


def sql_text(name: str = "protab.sql") -> str:
    """The text of a file of protab's ``sql/`` folder (inside the wheel, or the source tree)."""
    try:
        res = resources.files("protab").joinpath("sql", name)
        if res.is_file():
            return res.read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError):  # pragma: no cover
        pass
    here = Path(__file__).resolve().parents[2] / "sql" / name
    return here.read_text(encoding="utf-8")


class Session:
    """A DuckDB database holding microdata, and the protab operations on it.

    ``Session()`` opens :data:`DEFAULT_DATABASE` (``protab.duckdb`` in the working
    directory); ``Session(":memory:")`` keeps everything in memory.
    """

    def __init__(
        self,
        database: str | os.PathLike[str] = DEFAULT_DATABASE,
        *,
        read_only: bool = False,
        threads: int | None = None,
        progress: bool | None = None,
    ) -> None:
        self.database = str(database)
        config: dict[str, Any] = {}
        if threads is not None:
            config["threads"] = int(threads)
        try:
            self._con = duckdb.connect(self.database, read_only=read_only, config=config)
        except duckdb.Error as exc:
            raise InputError(f"cannot open the DuckDB database {self.database!r}: {exc}") from None
        show = sys.stderr.isatty() if progress is None else bool(progress)
        self._con.execute(f"SET enable_progress_bar = {'true' if show else 'false'}")
        self._keys: dict[str, tuple[str, int]] = {}
        text = sql_text()
        if read_only:
            text = text.replace("CREATE OR REPLACE MACRO", "CREATE OR REPLACE TEMP MACRO")
            text = text.replace("CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE IF NOT EXISTS")
        self._con.execute(text)

    # -- lifecycle ------------------------------------------------------------------------
    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The underlying DuckDB connection (for SQL of your own)."""
        return self._con

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
        self._require(table)
        rows = self._con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? "
            "ORDER BY column_index",
            [table],
        ).fetchall()
        return {str(n): str(t) for n, t in rows}

    def _require(self, table: str) -> None:
        if not isinstance(table, str) or not self.exists(table):
            known = self.tables()
            raise InputError(
                f"no table named {table!r} in {self.database!r}"
                + (f" (tables: {show_values(known, 8)})" if known else "")
                + "; register it first with Session.register(name, source)"
            )

    def _require_columns(self, table: str, columns: Sequence[str], what: str = "column") -> dict[str, str]:
        cols = self.columns(table)
        missing = [c for c in columns if c not in cols]
        if missing:
            raise InputError(
                f"table {table!r} has no {what} {show_values(missing)}; its columns are "
                f"{show_values(list(cols), 12)}"
            )
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
        self._keys.pop(name, None)

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
                rel.create(name)
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

        The seed is a secret: it is bound as a parameter and never stored or shown. A view
        (e.g. over Parquet files) is copied into a database table to hold the keys.
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
        if (id_column is None) == (record_key_column is None):
            raise InputError(
                "add_record_keys: give either id_column and seed (to compute keys) or "
                "record_key_column (to use existing keys)"
            )
        if id_column is not None:
            if seed is None or (isinstance(seed, (str, bytes)) and len(seed) == 0):
                raise InputError("add_record_keys: a non-empty secret seed is needed with id_column")
            if isinstance(seed, bytes):
                seed = seed.hex()
            bits = _check_bits(bits)
            self._require_columns(table, [id_column], "id column")
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
            with self._transaction():
                self._con.execute(f"CREATE TABLE {tmp} AS SELECT {select} FROM {t}", params)
                self._drop(table)
                self._con.execute(f"ALTER TABLE {tmp} RENAME TO {t}")
                self._con.execute(
                    f"COMMENT ON COLUMN {t}.{n} IS 'protab record key; modulus={int(modulus)}'"
                )
        except duckdb.Error as exc:
            raise InputError(f"add_record_keys: could not add keys to table {table!r}: {exc}") from None
        self._keys[table] = (name, modulus)

    def record_key(self, table: str) -> tuple[str, int]:
        """(column, modulus) of the record keys of ``table``; InputError if it has none."""
        if table in self._keys:
            return self._keys[table]
        self._require(table)
        rows = self._con.execute(
            "SELECT column_name, comment FROM duckdb_columns() WHERE table_name = ? "
            "AND comment IS NOT NULL",
            [table],
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
        self._require_columns(table, columns)
        t = quote_ident(table)
        parts = [f"SELECT CAST(? AS VARCHAR) AS parent, CAST({quote_ident(columns[0])} AS VARCHAR) AS child FROM {t}"]
        params: list[Any] = [root]
        for coarse, fine in zip(columns, columns[1:]):
            parts.append(
                f"SELECT CAST({quote_ident(coarse)} AS VARCHAR), CAST({quote_ident(fine)} AS VARCHAR) FROM {t}"
            )
        pairs = self._arrow(f"SELECT DISTINCT * FROM ({' UNION ALL '.join(parts)}) ORDER BY 1, 2", params)
        if pairs["child"].null_count() or pairs["parent"].null_count():
            raise InputError(
                f"hierarchy_from_columns: columns {show_values(columns)} of table {table!r} have "
                "missing (NULL) codes"
            )
        return Hierarchy.from_parent_child(pairs, root=root)

    def codes(self, table: str, column: str) -> list[str]:
        """The distinct non-null values of a column, as strings, sorted."""
        self._require_columns(table, [column])
        rows = self._con.execute(
            f"SELECT DISTINCT CAST({quote_ident(column)} AS VARCHAR) FROM {quote_ident(table)} "
            "ORDER BY 1"
        ).fetchall()
        return [r[0] for r in rows if r[0] is not None]

    # -- tabulation -----------------------------------------------------------------------
    def tabulate(self, table: str, spec: TableSpec, *, cell_keys: bool = False) -> pl.DataFrame:
        """Every published cell of ``spec`` with its original count (and weight sum, sums).

        One scan of the microdata to inner cells, then a roll-up through the hierarchy
        relations, in SQL. Columns: the dimensions (codes, the margin code at each top), one
        ``<dim>_level`` per dimension (0 = total), ``n``, then ``w`` (weighted count) and the
        sums if the spec asks for them, and ``cell_key`` (the integer key sum modulo the key
        modulus) only when ``cell_keys=True``. Unprotected: for trusted use only.
        """
        with self._cells(table, spec, keys=cell_keys) as (cells, codes, _):
            out = self._select_cells(cells, codes, spec, keys=cell_keys)
        return out

    def inner_cells(self, table: str, spec: TableSpec) -> pl.DataFrame:
        """The inner cells (finest crossing) of ``spec`` that hold records: dims, n, w, sums."""
        with self._inner(table, spec, keys=False) as (inner, _):
            cols = self._value_columns(spec, keys=False)
            q = ", ".join(
                [f"_d{k}" for k in range(len(spec.dimensions))]
                + [src if src == "_n" else f"CAST({src} AS DOUBLE) AS {src}" for src, _ in cols]
            )
            order = ", ".join(f"_d{k}" for k in range(len(spec.dimensions)))
            frame = self._arrow(f"SELECT {q} FROM {inner} ORDER BY {order}")
        return frame.rename(self._names(spec, frame.columns, levels=False))

    def cell_key(
        self,
        table: str,
        spec: TableSpec,
        ptable: "PTable",
        *,
        original: bool = False,
        threshold: int | None = None,
    ) -> pl.DataFrame:
        """Counts protected by the cell key method: every published cell of ``spec``.

        The cell key of a cell is the sum of its records' keys modulo the key modulus; its
        perturbed count is n + v from the p-table row of n's row class whose interval holds
        the cell key (a SQL join; the p-table's interval convention decides boundaries).
        Columns: the dimensions, their levels, ``n_pert`` and, with a weight, ``w_pert`` = the
        perturbed count times the cell's mean weight (cellKey and tau-ARGUS). ``n``/``w`` only
        with ``original=True``. ``threshold``: perturbed counts below it are published as
        null (the ONS rule). The same records give the same value in every table.
        """
        from protab.ptable import PTable

        if not isinstance(ptable, PTable):
            raise InputError(f"cell_key: ptable must be a protab.PTable, not {type(ptable).__name__}")
        self.record_key(table)
        with self._cells(table, spec, keys=True) as (cells, codes, modulus):
            pt = self._ptable_relation(ptable, modulus)
            try:
                out = self._perturb(cells, codes, spec, ptable, pt, original, threshold)
            finally:
                self._con.execute(f"DROP TABLE IF EXISTS {pt}")
        return out

    def install_ptable(self, ptable: "PTable", *, table: str | None = None, modulus: int | None = None) -> None:
        """Install ``ptable`` as the p-table of the SQL macro ``ckm(count(*), sum(rkey))``.

        The key modulus comes from the record keys of ``table`` or is given as ``modulus``
        (2^bits, or 10^d for decimal keys). It replaces any p-table installed before.
        """
        if (table is None) == (modulus is None):
            raise InputError("install_ptable: give the keyed table or the key modulus (one of them)")
        m = self.record_key(table)[1] if table is not None else int(modulus)  # type: ignore[arg-type]
        if m < 2:
            raise InputError("install_ptable: the key modulus must be at least 2")
        ks = ptable.keyspace(m)
        imin = int(ks["i"].min())  # type: ignore[arg-type]
        with self._transaction():
            self._con.execute("DELETE FROM protab_ptable")
            self._con.execute("DELETE FROM protab_ptable_meta")
            tmp = f"_protab_pt_{uuid.uuid4().hex}"
            self._con.register(tmp, _keyspace_arrow(ks))
            try:
                self._con.execute(
                    f"INSERT INTO protab_ptable SELECT i, v, klo, khi FROM {quote_ident(tmp)}"
                )
            finally:
                self._con.unregister(tmp)
            self._con.execute(
                "INSERT INTO protab_ptable_meta VALUES (?, ?, ?, ?)",
                [imin, int(ptable.imax), int(ptable.period), m],
            )

    # -- internals of the roll-up ---------------------------------------------------------
    def _arrow(self, query: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        rel = self._con.sql(query, params=list(params) if params else None)
        return pl.from_arrow(rel.to_arrow_table())  # type: ignore[return-value]

    def _value_columns(self, spec: TableSpec, *, keys: bool) -> list[tuple[str, str]]:
        """(internal column, output name) of the values carried per cell."""
        cols = [("_n", "n")]
        if spec.weight is not None:
            cols.append(("_w", "w"))
        cols += [(f"_s{k}", s) for k, s in enumerate(spec.sums)]
        if keys:
            cols.append(("_k", "cell_key"))
        return cols

    def _names(self, spec: TableSpec, columns: Sequence[str], *, levels: bool) -> dict[str, str]:
        """Map internal column names to output names, refusing clashes."""
        mapping: dict[str, str] = {}
        for k, d in enumerate(spec.dimensions):
            mapping[f"_d{k}"] = d.column
            mapping[f"_l{k}"] = f"{d.column}_level"
        mapping.update(dict(self._value_columns(spec, keys=True)))
        mapping.update({"_np": "n_pert", "_wp": "w_pert"})
        out = {c: mapping[c] for c in columns if c in mapping}
        names = list(out.values())
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise SpecError(
                f"the output would have two columns named {show_values(dup)}; rename the "
                "dimension or value column"
            )
        return out

    @contextmanager
    def _inner(self, table: str, spec: TableSpec, *, keys: bool) -> Iterator[tuple[str, int]]:
        """One scan of the microdata into a temporary table of inner cells."""
        self._require(table)
        if not isinstance(spec, TableSpec):
            raise SpecError(f"expected a protab.TableSpec, not {type(spec).__name__}")
        dims = spec.columns
        cols = self._require_columns(table, dims, "dimension column")
        values = ([spec.weight] if spec.weight else []) + list(spec.sums)
        self._require_columns(table, values + ([spec.freq] if spec.freq else []), "value column")
        if spec.freq is not None and not _INTEGER.match(cols[spec.freq]):
            raise InputError(
                f"frequency column {spec.freq!r} of table {table!r} has type "
                f"{cols[spec.freq]}; frequencies must be integers"
            )
        for v in values:
            if not _NUMERIC.match(cols[v]):
                raise InputError(
                    f"column {v!r} of table {table!r} has type {cols[v]}; weights and sums must "
                    "be numeric"
                )
        modulus = 0
        key_col = None
        if keys:
            if spec.freq is not None:
                raise SpecError(
                    "the cell key method needs microdata (one row per record with its key); "
                    f"table {table!r} is aggregated (freq={spec.freq!r})"
                )
            key_col, modulus = self.record_key(table)
        raw = [f"{quote_ident(c)} AS _r{k}" for k, c in enumerate(dims)]
        aggs = [
            "count(*) AS _n" if spec.freq is None
            else f"CAST(coalesce(sum({quote_ident(spec.freq)}), 0) AS BIGINT) AS _n"
        ]
        if spec.weight is not None:
            aggs.append(f"sum(CAST({quote_ident(spec.weight)} AS DECIMAL(38, 8))) AS _w")
        aggs += [f"sum(CAST({quote_ident(s)} AS DECIMAL(38, 8))) AS _s{k}" for k, s in enumerate(spec.sums)]
        params: list[Any] = []
        if key_col is not None:
            aggs.append(f"CAST(sum({quote_ident(key_col)}) % ? AS BIGINT) AS _k")
            params.append(modulus)
        if spec.null_code is not None:
            outer = [f"coalesce(CAST(_r{k} AS VARCHAR), ?) AS _d{k}" for k in range(len(dims))]
            # parameters bind in text order: the outer select's null codes come first
            params = [spec.null_code] * len(dims) + params
        else:
            outer = [f"CAST(_r{k} AS VARCHAR) AS _d{k}" for k in range(len(dims))]
        rest = ", ".join(c for c, _ in self._value_columns(spec, keys=key_col is not None))
        name = f"_protab_inner_{uuid.uuid4().hex}"
        self._con.execute(
            f"CREATE TEMP TABLE {name} AS SELECT {', '.join(outer)}, {rest} FROM ("
            f"SELECT {', '.join(raw)}, {', '.join(aggs)} FROM {quote_ident(table)} GROUP BY ALL)",
            params,
        )
        try:
            self._check_inner(name, table, spec)
            yield name, modulus
        finally:
            self._con.execute(f"DROP TABLE IF EXISTS {name}")

    def _check_inner(self, inner: str, table: str, spec: TableSpec) -> None:
        """NULL codes, codes missing from hierarchies, codes equal to a margin code."""
        for k, d in enumerate(spec.dimensions):
            if spec.null_code is None:
                nulls = self._con.execute(
                    f"SELECT coalesce(sum(_n), 0) FROM {inner} WHERE _d{k} IS NULL"
                ).fetchall()[0][0]
                if nulls:
                    raise InputError(
                        f"column {d.column!r} of table {table!r} is missing (NULL) in {nulls} "
                        "record(s); remove them, or publish them as a category with "
                        "TableSpec(..., null_code='Unknown')"
                    )
            codes = [r[0] for r in self._con.execute(f"SELECT DISTINCT _d{k} FROM {inner}").fetchall()]
            if d.hierarchy is not None:
                d.hierarchy.check_codes(codes, table=table, column=d.column)
            elif d.root in codes:
                raise SpecError(
                    f"column {d.column!r} of table {table!r} has the code {d.root!r}, which is "
                    "also the name of its margin; pass TableSpec(..., total='...') with "
                    "another margin name"
                )

    def _bridges(self, inner: str, spec: TableSpec) -> list[tuple[str, str]]:
        """Per dimension two temporary relations over integer code numbers.

        ``codes(ord, code, level)`` numbers the codes in publication order (by level, then
        numeric codes numerically and other codes as text); ``bridge(leaf, anc, level)`` links
        each leaf to itself, its ancestors and the total. The roll-up groups integers only.
        """
        out = []
        for k, d in enumerate(spec.dimensions):
            raw, codes, bridge = (f"_protab_{w}_{uuid.uuid4().hex}" for w in ("braw", "codes", "bridge"))
            if d.hierarchy is not None:
                tmp = f"_protab_h_{uuid.uuid4().hex}"
                self._con.register(tmp, d.hierarchy.relation())
                try:
                    self._con.execute(
                        f"CREATE TEMP TABLE {raw} AS SELECT CAST(leaf AS VARCHAR) AS leaf, "
                        f"CAST(ancestor AS VARCHAR) AS ancestor, CAST(level AS INTEGER) AS level "
                        f"FROM {quote_ident(tmp)}"
                    )
                finally:
                    self._con.unregister(tmp)
            else:
                self._con.execute(
                    f"CREATE TEMP TABLE {raw} AS "
                    f"SELECT DISTINCT _d{k} AS leaf, _d{k} AS ancestor, 1 AS level FROM {inner} "
                    f"UNION ALL SELECT DISTINCT _d{k}, CAST(? AS VARCHAR), 0 FROM {inner}",
                    [d.root],
                )
            try:
                self._con.execute(
                    f"CREATE TEMP TABLE {codes} AS SELECT CAST(row_number() OVER (ORDER BY level, "
                    f"TRY_CAST(ancestor AS DOUBLE) NULLS LAST, ancestor) AS INTEGER) AS ord, "
                    f"ancestor AS code, level FROM (SELECT DISTINCT ancestor, level FROM {raw})"
                )
                self._con.execute(
                    f"CREATE TEMP TABLE {bridge} AS SELECT l.ord AS leaf, a.ord AS anc, b.level "
                    f"FROM {raw} b JOIN {codes} l ON b.leaf = l.code JOIN {codes} a ON b.ancestor = a.code"
                )
            finally:
                self._con.execute(f"DROP TABLE IF EXISTS {raw}")
            out.append((codes, bridge))
        return out

    @staticmethod
    def _published_filter(spec: TableSpec, level: dict[int, str] | None = None) -> str:
        """SQL condition keeping the cells that some published crossing holds.

        ``level`` maps dimension positions to their level expressions (default ``_l<k>`` for
        every dimension); with only some dimensions given, it keeps the partial cells that
        can still become published ones, so the roll-up prunes early.
        """
        if level is None:
            level = {k: f"_l{k}" for k in range(len(spec.dimensions))}
        cols = spec.columns
        ors = []
        for term in spec.terms:
            ands = [f"{expr} = 0" for k, expr in level.items() if cols[k] not in term]
            if not ands:
                return "TRUE"
            ors.append("(" + " AND ".join(ands) + ")")
        return " OR ".join(ors)

    @contextmanager
    def _cells(
        self, table: str, spec: TableSpec, *, keys: bool
    ) -> Iterator[tuple[str, list[str], int]]:
        """Every published cell in a temporary table: _o*, _l*, _n, _w, _s*, (_k).

        Yields (cells, code tables, key modulus); ``_o<k>`` is the code number of dimension k
        in its code table (see _bridges).
        """
        with self._inner(table, spec, keys=keys) as (inner, modulus):
            bridges = self._bridges(inner, spec)
            names = [f"_protab_agg_{uuid.uuid4().hex}", f"_protab_cells_{uuid.uuid4().hex}"]
            try:
                cells = self._rollup(inner, bridges, spec, names, keys, modulus)
                yield cells, [c for c, _ in bridges], modulus
            finally:
                for t in [t for pair in bridges for t in pair] + names:
                    self._con.execute(f"DROP TABLE IF EXISTS {t}")

    def _rollup(
        self,
        inner: str,
        bridges: list[tuple[str, str]],
        spec: TableSpec,
        names: list[str],
        keys: bool,
        modulus: int,
    ) -> str:
        """Roll inner cells up one dimension at a time through its bridge (leaf → ancestor).

        Codes become integers first; each step multiplies the rows by that dimension's depth
        + 1 only, and rows that no published crossing can hold are dropped as soon as they
        appear. Counts and key sums are integers, so the order of summation does not matter.
        """
        nd = len(spec.dimensions)
        values = [c for c, _ in self._value_columns(spec, keys=keys)]
        ids = ", ".join(f"c{k}.ord AS _o{k}" for k in range(nd))
        joins = " ".join(f"JOIN {codes} c{k} ON i._d{k} = c{k}.code" for k, (codes, _) in enumerate(bridges))
        steps = [f"_step AS (SELECT {ids}, {', '.join('i.' + v for v in values)} FROM {inner} i {joins})"]
        params: list[Any] = []
        prev = "_step"
        for k in range(nd):
            dims = []
            for j in range(nd):
                if j < k:
                    dims += [f"r._o{j}", f"r._l{j}"]
                elif j == k:
                    dims += [f"b.anc AS _o{j}", f"b.level AS _l{j}"]
                else:
                    dims.append(f"r._o{j}")
            aggs = []
            for v in values:
                if v == "_k":
                    aggs.append("CAST(sum(r._k) % ? AS BIGINT) AS _k")
                    params.append(modulus)
                elif v == "_n":
                    aggs.append("CAST(sum(r._n) AS BIGINT) AS _n")
                else:
                    aggs.append(f"sum(r.{v}) AS {v}")
            where = self._published_filter(
                spec, {j: (f"r._l{j}" if j < k else "b.level") for j in range(k + 1)}
            )
            steps.append(
                f"_step{k} AS (SELECT {', '.join(dims + aggs)} FROM {prev} r "
                f"JOIN {bridges[k][1]} b ON r._o{k} = b.leaf WHERE {where} GROUP BY ALL)"
            )
            prev = f"_step{k}"
        agg, cells = names
        self._con.execute(f"CREATE TEMP TABLE {agg} AS WITH {', '.join(steps)} SELECT * FROM {prev}", params)
        if spec.drop_empty:
            return agg
        # every combination of codes is published: add the empty cells, if any are missing
        codes = ", ".join(
            f"(SELECT ord AS _o{k}, level AS _l{k} FROM {c})" for k, (c, _) in enumerate(bridges)
        )
        frame = f"SELECT * FROM {codes} WHERE {self._published_filter(spec)}"
        have = self._con.execute(f"SELECT count(*) FROM {agg}").fetchall()[0][0]
        want = self._con.execute(f"SELECT count(*) FROM ({frame})").fetchall()[0][0]
        if have == want:
            return agg
        zero = [f"coalesce(a.{v}, 0) AS {v}" for v in values]
        using = ", ".join(f"_o{k}" for k in range(nd))
        self._con.execute(
            f"CREATE TEMP TABLE {cells} AS SELECT f.*, {', '.join(zero)} FROM ({frame}) f "
            f"LEFT JOIN (SELECT {using}, {', '.join(values)} FROM {agg}) a USING ({using})"
        )
        return cells

    @staticmethod
    def _decode(spec: TableSpec, codes: list[str]) -> tuple[list[str], str, str]:
        """Select items, joins and ORDER BY that turn code numbers of cells ``c`` into codes."""
        nd = len(spec.dimensions)
        cols = [f"k{k}.code AS _d{k}" for k in range(nd)] + [f"c._l{k}" for k in range(nd)]
        joins = " ".join(f"JOIN {t} k{k} ON c._o{k} = k{k}.ord" for k, t in enumerate(codes))
        order = ", ".join(f"c._o{k}" for k in range(nd))
        return cols, joins, order

    def _select_cells(self, cells: str, codes: list[str], spec: TableSpec, *, keys: bool) -> pl.DataFrame:
        cols, joins, order = self._decode(spec, codes)
        for src, _ in self._value_columns(spec, keys=keys):
            cols.append(f"CAST(c.{src} AS DOUBLE) AS {src}" if src == "_w" or src.startswith("_s") else f"c.{src}")
        frame = self._arrow(f"SELECT {', '.join(cols)} FROM {cells} c {joins} ORDER BY {order}")
        return frame.rename(self._names(spec, frame.columns, levels=True))

    def _ptable_relation(self, ptable: "PTable", modulus: int) -> str:
        name = f"_protab_pt_{uuid.uuid4().hex}"
        tmp = f"_protab_ks_{uuid.uuid4().hex}"
        self._con.register(tmp, _keyspace_arrow(ptable.keyspace(modulus)))
        try:
            self._con.execute(
                f"CREATE TEMP TABLE {name} AS SELECT i AS protab_i, v AS protab_v, "
                f"klo AS protab_klo, khi AS protab_khi FROM {quote_ident(tmp)}"
            )
        finally:
            self._con.unregister(tmp)
        return name

    def _perturb(
        self,
        cells: str,
        codes: list[str],
        spec: TableSpec,
        ptable: "PTable",
        pt: str,
        original: bool,
        threshold: int | None,
    ) -> pl.DataFrame:
        imin = int(ptable.frame["i"].min())  # type: ignore[arg-type]
        cols, joins, order = self._decode(spec, codes)
        if original:
            cols.append("c._n")
            if spec.weight is not None:
                cols.append("CAST(c._w AS DOUBLE) AS _w")
        pert = "c._n + coalesce(p.protab_v, 0)"
        params: list[Any] = []
        if threshold is not None:
            pert = f"CASE WHEN {pert} < ? THEN NULL ELSE {pert} END"
            params.append(int(threshold))
        cols.append(f"{pert} AS _np")
        if spec.weight is not None:
            wp = f"CASE WHEN c._n = 0 THEN 0.0 ELSE ({pert}) * CAST(c._w AS DOUBLE) / c._n END"
            if threshold is not None:
                params.append(int(threshold))
            cols.append(f"{wp} AS _wp")
        params += [imin, int(ptable.imax), int(ptable.period)]
        frame = self._arrow(
            f"SELECT {', '.join(cols)} FROM {cells} c {joins} LEFT JOIN {pt} p "
            f"ON p.protab_i = protab_row_class(c._n, ?, ?, ?) "
            f"AND c._k BETWEEN p.protab_klo AND p.protab_khi ORDER BY {order}",
            params,
        )
        return frame.rename(self._names(spec, frame.columns, levels=True))


# -- helpers ------------------------------------------------------------------------------
def _check_bits(bits: int) -> int:
    if not isinstance(bits, int) or isinstance(bits, bool) or not 1 <= bits <= 32:
        raise InputError("bits must be an integer from 1 to 32 (record keys are below 2^bits)")
    return bits


def _keyspace_arrow(ks: pl.DataFrame) -> pa.Table:
    return ks.select(
        pl.col("i").cast(pl.Int64), pl.col("v").cast(pl.Int64),
        pl.col("klo").cast(pl.Int64), pl.col("khi").cast(pl.Int64),
    ).to_arrow()


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


__all__ = ["DEFAULT_DATABASE", "Session", "quote_ident", "sql_text", "ProtabError"]
