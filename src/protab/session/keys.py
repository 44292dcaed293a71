"""The Session's record keys: computed from ids and a secret seed, read from a column, or
declared; and key sums (counts and cell keys aggregated ahead). SQL through the engine."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from protab.errors import InputError, SpecError, show_values
from protab.rollup.partials import Partials, check_measures, partial_aggregates
from protab.session.arguments import INTEGER, NUMERIC, check_bits, check_seed
from protab.session.state import SessionState
from protab.sqltools import FLOAT_TYPES, quote_ident


class Keys(SessionState):
    """Record keys and key sums (a mixin of :class:`protab.Session`)."""

    def _forget(self, name: str) -> None:
        """Forget what the session knew of table ``name`` (its record keys, its key sums): it
        holds other records now."""
        self._keys.pop(name, None)
        self._drop_key_sums_of(name)
        self._key_sum_sources.pop(name, None)
        self._key_sum_partials.pop(name, None)
        self._key_sum_columns.pop(name, None)

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
        cols = self.columns(table)
        self._check_key_name(table, cols, name, replace, record_key_column)
        if (id_column is None) == (record_key_column is None):
            raise InputError(
                "add_record_keys: give either id_column and seed (to compute keys) or "
                "record_key_column (to use existing keys)"
            )
        if id_column is not None:
            seed = check_seed(table, seed)
            bits = check_bits(bits)
            self._require_columns(table, [id_column], "id column")
            self.engine.check_id_column(table, cols, id_column)
            with self.engine.step(f"checking the ids of {table}"):
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
        self.engine.write_key_column(table, name, expr, params, modulus, name in cols)
        self._keys[table] = (name, modulus)
        self._drop_key_sums_of(table)  # their key sums are of the old keys

    def _check_key_name(self, table: str, cols: dict[str, str], name: Any, replace: bool,
                        record_key_column: str | None) -> None:
        """``name`` is a new column, or (with ``replace``) the table's record keys."""
        if not isinstance(name, str) or not name:
            raise InputError("add_record_keys: name must be a non-empty column name")
        if name not in cols or name == record_key_column:
            return
        if not replace:
            raise InputError(
                f"add_record_keys: table {table!r} has a column {name!r} already; pass "
                "replace=True to overwrite it or name= to choose another column"
            )
        try:
            current = self.record_key(table)[0]
        except InputError:
            current = None
        if current != name:
            raise InputError(
                f"add_record_keys: column {name!r} of table {table!r} is data, not record keys; "
                "replace=True replaces record keys only: choose another name= for the keys"
            )

    def _check_ids(self, table: str, id_column: str) -> None:
        q = quote_ident(id_column)
        nulls, total, distinct = self.engine.rows(
            f"SELECT count(*) FILTER (WHERE {q} IS NULL), count(*), count(DISTINCT {q}) "
            f"FROM {quote_ident(table)}"
        )[0]
        if nulls:
            raise InputError(
                f"add_record_keys: {nulls} record(s) of table {table!r} have a missing (NULL) "
                f"{id_column!r}; every record needs an identifier for its key"
            )
        if distinct != total:
            dups = self.engine.rows(
                f"SELECT {q}, count(*) FROM {quote_ident(table)} GROUP BY 1 HAVING count(*) > 1 "
                "ORDER BY 2 DESC, 1 LIMIT 5"
            )
            n_dup = self.engine.rows(
                f"SELECT count(*) FROM (SELECT {q} FROM {quote_ident(table)} GROUP BY 1 "
                "HAVING count(*) > 1)"
            )[0][0]
            shown = ", ".join(f"{v!r} ({c}×)" for v, c in dups)
            raise InputError(
                f"add_record_keys: column {id_column!r} of table {table!r} is not a unique "
                f"identifier: {n_dup} value(s) occur more than once, e.g. {shown}"
            )

    def _existing_keys(
        self, table: str, column: str, dtype: str, bits: int, decimals: int | None
    ) -> tuple[str, list[Any], int]:
        q, t = quote_ident(column), quote_ident(table)
        if not NUMERIC.match(dtype):
            raise InputError(
                f"add_record_keys: record key column {column!r} of table {table!r} has type "
                f"{dtype}; keys must be numbers"
            )
        nulls = self.engine.rows(f"SELECT count(*) FILTER (WHERE {q} IS NULL) FROM {t}")[0][0]
        if nulls:
            raise InputError(
                f"add_record_keys: {nulls} record(s) of table {table!r} have no key in {column!r}"
            )
        if decimals is not None:
            if not isinstance(decimals, int) or not 1 <= decimals <= 15:
                raise InputError("add_record_keys: decimals must be an integer from 1 to 15")
            scale = 10**decimals
            bad = self.engine.rows(
                f"SELECT count(*) FROM {t} WHERE {q} < 0 OR {q} > 1 "
                f"OR abs({q} * ? - round({q} * ?)) > 1e-6",
                [scale, scale],
            )[0][0]
            if bad:
                raise InputError(
                    f"add_record_keys: {bad} key(s) in column {column!r} of table {table!r} are "
                    f"not decimals in [0, 1] with at most {decimals} digits"
                )
            return f"CAST(round({q} * ?) AS BIGINT)", [scale], scale
        bits = check_bits(bits)
        if not INTEGER.match(dtype):
            raise InputError(
                f"add_record_keys: record key column {column!r} of table {table!r} has type "
                f"{dtype}; give decimals= for decimal keys in [0, 1], or use integer keys"
            )
        bad = self.engine.rows(
            f"SELECT count(*) FROM {t} WHERE {q} < 0 OR {q} >= ?", [2**bits]
        )[0][0]
        if bad:
            raise InputError(
                f"add_record_keys: {bad} key(s) in column {column!r} of table {table!r} lie "
                f"outside 0 … 2^{bits} − 1; pass the right bits="
            )
        return f"CAST({q} AS UBIGINT)", [], 2**bits

    def use_record_keys(self, table: str, column: str, modulus: int) -> None:
        """Declare that column ``column`` of ``table`` holds record keys made elsewhere (e.g. by
        a DuckDB Session, written to Parquet with the records): integers in [0, modulus), with
        modulus 2^bits or 10^d. Checked on the data: no missing key, none out of range."""
        cols = self._require_columns(table, [column], "record key column")
        if isinstance(modulus, bool) or not isinstance(modulus, int) or modulus < 2:
            raise InputError(f"use_record_keys: the modulus must be a whole number of 2 or more, not {modulus!r}")
        if not INTEGER.match(cols[column]):
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
        self.engine.tag_key_column(table, column, int(modulus))
        self._keys[table] = (column, int(modulus))
        self._drop_key_sums_of(table)

    #: Columns of a key-sum table (see :meth:`key_sums`)
    KEY_SUM_RECORDS, KEY_SUM_KEY = "protab_records", "protab_key_sum"

    def key_sums(self, table: str, columns: Sequence[str], *, name: str | None = None,
                 sums: Sequence[str] = (), top_k: int = 1, null_sums: str = "error") -> str:
        """Aggregate the records of ``table`` to one row per combination of ``columns`` with
        its number of records and its key sum modulo the key modulus, in a temporary table
        of this session; returns its name.

        A cell key is the sum of its records' keys modulo the modulus (docs/methods.md §1),
        and sums of residues are residues of sums, so :meth:`cell_key`, :meth:`tabulate` and
        :meth:`model_matrix` on this table give every count table of ``columns`` (any
        hierarchies, formula or ``where`` on them) byte for byte as they would on the records,
        from far fewer rows. Without ``sums`` it holds counts only; weights always need the records. The key
        sums are as secret as the keys: the table lives in this session only (TEMP) and is
        never a dimension of a table. It is a snapshot: new record keys (add_record_keys) or a
        new ``table`` (register) drop it; other changes to ``table`` are not seen.
        ``table`` may itself be a key-sum table (its counts and key sums are summed).

        ``sums`` (DuckDB and PostgreSQL): also keep, per sums column, what magnitude tables read of its
        records — the exact DECIMAL sum, the non-zero contributors and their key sum, the
        ``top_k`` (1..6) largest and smallest values, the checks — merged per cell by
        :meth:`cell_key` and :meth:`tabulate` with ``top_k`` up to that many, unweighted, with
        the same ``null_sums`` rule: the same cells as from the records (protab.rollup.partials).
        Values no table could hold (NaN, ±inf, NULL under ``null_sums='error'``, huge sums) are refused."""
        columns = list(columns)
        cols = self._check_kept(table, columns, name)
        key, modulus = self.record_key(table)
        parts = self._partials(table, columns, sums, top_k, null_sums)
        taken = {key, self.KEY_SUM_RECORDS, self.KEY_SUM_KEY} | (parts.columns() if parts else set())
        clash = [c for c in [*columns, *(parts.sums if parts else ())] if c in taken]
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
        more, params = self._partial_sql(table, parts, key)
        # a float column groups by its text too: -0.0 and 0.0 (NaN and -NaN) are one value to
        # GROUP BY but two to a where-filter, which compares the text
        group = [quote_ident(c) for c in columns] + [
            f"CAST({quote_ident(c)} AS VARCHAR)" for c in columns if cols[c].upper() in FLOAT_TYPES]
        records = (f"CAST(sum({self.KEY_SUM_RECORDS}) AS BIGINT)" if table in self._key_sum_sources
                   else "count(*)")
        # keys above 32 bits summed wide (an engine whose BIGINT sums stay BIGINT could overflow)
        k = f"CAST({quote_ident(key)} AS HUGEINT)" if modulus > 2**32 else quote_ident(key)
        self.engine.temp_table(
            name,
            f"SELECT {keep}, {records} AS {self.KEY_SUM_RECORDS}, CAST(sum({k}) % ? AS BIGINT) AS {self.KEY_SUM_KEY}"
            f"{''.join(', ' + a for a in more)} FROM {quote_ident(table)} GROUP BY {', '.join(group)}",
            [modulus, *params],
        )
        self._keys[name] = (self.KEY_SUM_KEY, modulus)
        self._key_sum_columns[name] = self.engine.columns(name)
        self._key_sum_sources[name] = table
        if parts is not None:
            self._key_sum_partials[name] = parts
        return name

    def _check_kept(self, table: str, columns: list[str], name: Any) -> dict[str, str]:
        """The columns of ``table`` (catalog types) after the checks of the kept ``columns`` and the ``name``."""
        if not columns:
            raise SpecError(f"key_sums: name at least one column of table {table!r} to keep")
        if len(set(columns)) < len(columns):
            raise SpecError(f"key_sums: columns {show_values(columns)} name a column twice")
        if name is not None and (not isinstance(name, str) or not name):
            raise SpecError("key_sums: name must be a non-empty table name (or None for a generated one)")
        return self._require_columns(table, columns)

    def _partials(self, table: str, columns: list[str], sums: Sequence[str], top_k: Any,
                  null_sums: Any) -> Partials | None:
        """The sums columns a key-sum table keeps (see :meth:`key_sums`), checked; None for none."""
        from protab.magnitude import MAX_TOP_K

        if isinstance(sums, str):
            raise SpecError(f"key_sums: sums must be a list of column names, not the text {sums!r}")
        sums = tuple(sums)
        if null_sums not in ("error", "zero", "omit"):
            raise SpecError(f"key_sums: null_sums must be 'error', 'zero' or 'omit', not {null_sums!r}")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
            raise SpecError(f"key_sums: top_k must be a whole number from 1 to {MAX_TOP_K}")
        if not sums:
            return None
        if len(set(sums)) < len(sums):
            raise SpecError(f"key_sums: sums {show_values(sums)} name a column twice")
        self.engine.merged_list("x", 1, descending=True)  # refuses on an engine that cannot merge lists
        if table in self._key_sum_sources:
            raise SpecError(f"key_sums: table {table!r} is a key-sum table; sums are kept from the records' table")
        types = self._require_columns(table, list(sums), "sums column")
        both = [c for c in sums if c in columns]
        if both:
            raise SpecError(f"key_sums: column {both[0]!r} of table {table!r} is both kept as a code and summed")
        not_numbers = [c for c in sums if not NUMERIC.match(types[c])]
        if not_numbers:
            raise InputError(f"key_sums: sums column {not_numbers[0]!r} of table {table!r} has type "
                             f"{types[not_numbers[0]]}; sums must be numeric")
        return Partials(sums, tuple(types[c] for c in sums), top_k, null_sums)

    def _partial_sql(self, table: str, parts: Partials | None, key: str) -> tuple[list[str], list[Any]]:
        """The aggregates (and their parameters) keeping ``parts``, after the checks of their values."""
        if parts is None:
            return [], []
        nonneg = check_measures(self.engine, table, parts.sums, parts.null_sums)
        modulus = self.record_key(table)[1]
        return partial_aggregates(self.engine, parts, nonneg, f"CAST({quote_ident(key)} AS BIGINT)", modulus)

    def drop_key_sums(self, name: str) -> None:
        """Drop a key-sum table made by :meth:`key_sums` (it goes with the session anyway)."""
        if name not in self._key_sum_sources:
            raise SpecError(f"drop_key_sums: {name!r} is not a key-sum table of this session")
        self.engine.drop_temp_table(name)
        del self._key_sum_sources[name]
        self._key_sum_partials.pop(name, None)
        self._key_sum_columns.pop(name, None)
        self._keys.pop(name, None)

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
        tag = self.engine.key_tag(table)
        if tag is not None:
            self._keys[table] = tag
            return tag
        raise InputError(
            f"table {table!r} has no record keys; call Session.add_record_keys({table!r}, "
            "id_column=..., seed=...) or add_record_keys(..., record_key_column=...) first"
        )
