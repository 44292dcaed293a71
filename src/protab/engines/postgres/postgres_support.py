"""What the PostgreSQL engine needs around PostgreSQL itself: psycopg (a clear error when it is
missing), protab's SQL functions as pg_temp functions of the connection, the types of Arrow,
PostgreSQL and DuckDB, results as Arrow tables and Arrow tables copied in."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from protab.errors import InputError

#: protab's SQL functions on PostgreSQL (the twins of sql/protab.sql's macros), made per
#: connection in its pg_temp schema (called as ``pg_temp.name``: postgres_sql renders them so):
#:
#: - ``protab_record_key``: the first 32 bits of SHA-256(seed || U+001F || id) modulo 2^bits;
#: - ``protab_row_class``: the row of a count in a p-table with rows imin..imax and a period;
#: - ``protab_round``: DuckDB's ``round`` of a double (half away from zero, exactly: PostgreSQL's
#:   rounds half to even) and of a numeric (PostgreSQL's own, half away from zero);
#: - ``protab_units``: a double as the whole number of 10^-8 DuckDB's cast to DECIMAL(38, 8) gives
#:   (x·10^8 rounded half away from zero in binary, that double's exact value), NULL for NaN,
#:   ±inf and |x| ≥ 1e30; ``protab_exact`` writes an integral double exactly as a NUMERIC in
#:   three limbs (2^64, 2^32, 1), each an exact operation (PostgreSQL's own cast keeps 15 digits);
#: - ``protab_awx``, ``protab_ax``: the composite types of protab's structs ``{'a', 'w', 'x'}``
#:   and ``{'a', 'x'}`` of top-k lists (postgres_lists.STRUCT_TYPES), ordered field by field as
#:   DuckDB orders structs; ``protab_concat``: the lists of a group one after the other
#:   (DuckDB's ``flatten(list(l))``);
#: - ``protab_largest``, ``protab_dominance_ratio``, ``protab_weighted_largest``,
#:   ``protab_frequency_rule``: the sensitivity rules' macros of sql/protab.sql, their sums
#:   added one element after the other in the list's order, NULLs skipped (DuckDB's list_sum).
PG_FUNCTIONS = (
    "CREATE TYPE pg_temp.protab_awx AS (a double precision, w double precision, x double precision)",
    "CREATE TYPE pg_temp.protab_ax AS (a double precision, x double precision)",
    """CREATE OR REPLACE AGGREGATE pg_temp.protab_concat(double precision[])
       (SFUNC = array_cat, STYPE = double precision[])""",
    """CREATE OR REPLACE FUNCTION pg_temp.protab_largest(top double precision[], n bigint) RETURNS double precision
       LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
       SELECT coalesce((SELECT sum(top[i] ORDER BY i) FROM generate_subscripts(top, 1) AS i WHERE i <= n), 0) $$""",
    """CREATE OR REPLACE FUNCTION pg_temp.protab_dominance_ratio(top double precision[], total double precision,
       n bigint) RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
       SELECT CASE WHEN total = 0 THEN 0.0 ELSE pg_temp.protab_largest(top, n) / total END $$""",
    """CREATE OR REPLACE FUNCTION pg_temp.protab_weighted_largest(xs double precision[], ws double precision[],
       n bigint) RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
       SELECT coalesce((SELECT sum(xs[i] * greatest(0, least(ws[i], n - coalesce(
                  (SELECT sum(ws[j] ORDER BY j) FROM generate_subscripts(ws, 1) AS j WHERE j <= i - 1), 0)))
                  ORDER BY i) FROM generate_subscripts(xs, 1) AS i WHERE i <= n), 0) $$""",
    """CREATE OR REPLACE FUNCTION pg_temp.protab_frequency_rule(contributors bigint, n bigint) RETURNS boolean
       LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT contributors > 0 AND contributors < n $$""",
    """CREATE OR REPLACE FUNCTION pg_temp.protab_record_key(seed text, id text, bits integer) RETURNS bigint
       LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
       SELECT (('x' || substr(encode(sha256(convert_to(seed || chr(31) || id, 'UTF8')), 'hex'), 1, 8))::bit(32)::bigint)
              % (CAST(1 AS bigint) << bits) $$""",
    """CREATE OR REPLACE FUNCTION pg_temp.protab_row_class(n bigint, imin bigint, imax bigint, period bigint)
       RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
       SELECT CASE WHEN n < imin THEN NULL WHEN n <= imax THEN n
                   ELSE imax - period + 1 + ((n - (imax - period + 1)) % period) END $$""",
    """CREATE OR REPLACE FUNCTION pg_temp.protab_round(x double precision) RETURNS double precision
       LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
       SELECT trunc(x) + CASE WHEN abs(x - trunc(x)) >= 0.5 THEN sign(x) ELSE 0 END $$""",
    """CREATE OR REPLACE FUNCTION pg_temp.protab_round(x numeric) RETURNS numeric
       LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT round(x) $$""",
    """CREATE OR REPLACE FUNCTION pg_temp.protab_low(r double precision) RETURNS numeric
       LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
       SELECT CAST(floor(r / 4294967296.0::float8) AS bigint)::numeric * 4294967296
              + CAST(r - floor(r / 4294967296.0::float8) * 4294967296.0::float8 AS bigint) $$""",
    """CREATE OR REPLACE FUNCTION pg_temp.protab_exact(u double precision) RETURNS numeric
       LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
       SELECT sign(u)::numeric * (CAST(floor(abs(u) / 18446744073709551616.0::float8) AS bigint)::numeric
              * 18446744073709551616 + pg_temp.protab_low(abs(u) - floor(abs(u) / 18446744073709551616.0::float8)
              * 18446744073709551616.0::float8)) $$""",
    """CREATE OR REPLACE FUNCTION pg_temp.protab_units(x double precision) RETURNS numeric
       LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
       SELECT CASE WHEN abs(x) < 1e30 THEN pg_temp.protab_exact(pg_temp.protab_round(x * 100000000.0::float8)) END $$""",
)


def require_psycopg() -> Any:
    """Import psycopg 3, or an InputError that names what to install."""
    try:
        import psycopg
    except ImportError:
        raise InputError("the PostgreSQL engine needs psycopg 3: pip install 'protab[postgres]' "
                         "(or 'psycopg[binary]>=3.2')") from None
    return psycopg


def where_dsn(dsn: str) -> str:
    """Host, port and database of a DSN (a ``key=value`` string or a URI) for messages: never
    its password or other settings."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:
        return "a DSN that is not a valid connection string"
    host = parts.get("host") or parts.get("hostaddr") or "the default host (local socket)"
    return f"host {host}, port {parts.get('port') or 5432}, database {parts.get('dbname') or '(the user name)'}"


# -- types ---------------------------------------------------------------------------------------
#: PostgreSQL's type names (format_type) → DuckDB's, which protab's checks read
_DUCKDB_NAMES = {
    "smallint": "SMALLINT", "integer": "INTEGER", "bigint": "BIGINT", "real": "FLOAT",
    "double precision": "DOUBLE", "text": "VARCHAR", "boolean": "BOOLEAN", "date": "DATE",
    "timestamp without time zone": "TIMESTAMP", "timestamp with time zone": "TIMESTAMP WITH TIME ZONE",
    "bytea": "BLOB", "numeric": "DECIMAL(38,8)",
}


def duckdb_type(pg_type: str) -> str:
    """The DuckDB name of a PostgreSQL column type (``numeric(p,s)`` → ``DECIMAL(p,s)``)."""
    t = pg_type.lower()
    if t.endswith("[]"):
        return duckdb_type(t[:-2]) + "[]"
    if t.startswith("numeric("):
        return "DECIMAL" + t[len("numeric"):].replace(" ", "")
    if t.startswith(("character varying", "character", "varchar")):
        return "VARCHAR"
    return _DUCKDB_NAMES.get(t, t.upper())


def pg_column_type(t: pa.DataType) -> str | None:
    """The PostgreSQL type that holds every value of an Arrow type exactly (text collated "C",
    as DuckDB compares it), or None for a type the engine does not copy."""
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return 'text COLLATE "C"'
    if pa.types.is_dictionary(t):
        return pg_column_type(t.value_type)
    simple = {pa.int8(): "smallint", pa.int16(): "smallint", pa.int32(): "integer", pa.int64(): "bigint",
              pa.uint8(): "smallint", pa.uint16(): "integer", pa.uint32(): "bigint", pa.uint64(): "numeric(20, 0)",
              pa.float32(): "real", pa.float64(): "double precision", pa.bool_(): "boolean", pa.date32(): "date"}
    if t in simple:
        return simple[t]
    if pa.types.is_decimal(t):
        return f"numeric({t.precision}, {t.scale})"
    if pa.types.is_timestamp(t):
        return "timestamp with time zone" if t.tz else "timestamp"
    return None


#: result type OIDs (pg_type) → Arrow types; numeric is read with the column's precision and scale
_ARROW_OF_OID = {16: pa.bool_(), 20: pa.int64(), 21: pa.int16(), 23: pa.int32(), 26: pa.int64(), 25: pa.string(),
                 1043: pa.string(), 1042: pa.string(), 705: pa.string(), 19: pa.string(), 700: pa.float32(),
                 701: pa.float64(), 1082: pa.date32(), 1114: pa.timestamp("us"), 1184: pa.timestamp("us", tz="UTC"),
                 1022: pa.list_(pa.float64()), 1016: pa.list_(pa.int64()), 1007: pa.list_(pa.int32())}


def arrow_result(description: Sequence[Any], rows: list[tuple[Any, ...]]) -> pa.Table:
    """The rows of a query (as psycopg fetched them) as an Arrow table, each column of the
    declared type of its result column (a NUMERIC without precision as the narrowest
    DECIMAL(38, s) that holds its values)."""
    columns = list(zip(*rows)) if rows else [()] * len(description)
    arrays, names = [], []
    for col, values in zip(description, columns):
        names.append(col.name)
        oid = col.type_code
        if oid == 1700:  # numeric
            if col.precision is not None and col.scale is not None:
                arrays.append(pa.array(values, pa.decimal128(col.precision, col.scale)))
            else:
                arr = pa.array(values, pa.decimal128(38, 8)) if not values else pa.array(values)
                if pa.types.is_decimal(arr.type) and arr.type.precision < 38:
                    arr = arr.cast(pa.decimal128(38, arr.type.scale))
                arrays.append(arr)
        elif oid in _ARROW_OF_OID:
            arrays.append(pa.array(values, _ARROW_OF_OID[oid]))
        else:
            raise InputError(f"the PostgreSQL engine reads no result column of type oid {oid} "
                             f"(column {col.name!r}) yet")
    return pa.Table.from_arrays(arrays, names=names)


#: result OIDs whose CSV text (COPY ... TO STDOUT) Arrow's CSV reader parses as the type itself
_CSV_SAFE = {16, 20, 21, 23, 25, 1043, 1042, 705, 700, 701, 1082}


def csv_readable(description: Sequence[Any]) -> bool:
    """Whether every result column can be read from COPY's CSV text by Arrow (numbers, text,
    booleans, dates; NUMERIC with a precision and scale)."""
    return all(c.type_code in _CSV_SAFE or (c.type_code == 1700 and c.precision is not None and c.scale is not None)
               for c in description)


def arrow_from_csv(description: Sequence[Any], data: bytes) -> pa.Table:
    """The CSV text of ``COPY (query) TO STDOUT (FORMAT csv)`` as an Arrow table of the result's
    declared types, parsed by Arrow's CSV reader (vectorised): NULL is an unquoted empty field,
    an empty string a quoted one; booleans t/f; doubles in their shortest exact text."""
    import pyarrow.csv as pacsv

    names = [f"c{i}" for i in range(len(description))]
    types = {n: (pa.decimal128(c.precision, c.scale) if c.type_code == 1700 else _ARROW_OF_OID[c.type_code])
             for n, c in zip(names, description)}
    if not data:
        return pa.Table.from_arrays([pa.array([], types[n]) for n in names], names=[c.name for c in description])
    table = pacsv.read_csv(
        io.BytesIO(data), read_options=pacsv.ReadOptions(column_names=names),
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(column_types=types, strings_can_be_null=True, quoted_strings_can_be_null=False,
                                             null_values=[""], true_values=["t"], false_values=["f"]))
    return table.rename_columns([c.name for c in description])


def csv_batches(data: pa.Table) -> Any:
    """The rows of ``data`` as CSV (no header; NULL unquoted empty, text quoted), one chunk of
    bytes per record batch, for ``COPY ... FROM STDIN (FORMAT csv)``: written by Arrow's CSV
    writer, floating-point numbers in their shortest exact text."""
    import pyarrow.csv as pacsv

    for batch in data.to_batches(max_chunksize=65536):
        buf = io.BytesIO()
        pacsv.write_csv(pa.Table.from_batches([batch]), buf, pacsv.WriteOptions(include_header=False,
                                                                               quoting_style="needed"))
        yield buf.getvalue()


def plain_arrow(data: Any) -> pa.Table:
    """An Arrow table (or pandas or polars frame, or a record batch reader) as an Arrow table
    whose dictionary columns are decoded."""
    if type(data).__module__.split(".")[0] == "pandas":
        data = pa.Table.from_pandas(data, preserve_index=False)
    elif type(data).__module__.split(".")[0] == "polars":
        data = data.to_arrow()
    if isinstance(data, pa.RecordBatchReader):
        data = data.read_all()
    if not isinstance(data, pa.Table):
        raise InputError(f"the PostgreSQL engine copies Arrow tables and pandas or polars frames, not {type(data).__name__}")
    fields = [pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type) for f in data.schema]
    return data.cast(pa.schema(fields)) if any(pa.types.is_dictionary(f.type) for f in data.schema) else data
