"""Install a count p-table in a DuckDB database for the SQL macro ``ckm(count(*), sum(rkey))``.

The macro (sql/protab.sql) reaches the p-table by direct index into lists, not by a search
over intervals (docs/design.md, ideas 3 and 4). The key range 0..M-1 is cut at every interval
start of every row class into *segments*: inside one segment every row class has one noise.
``protab_ptable_lookup`` holds, in one row:

- ``noise``: the noise of segment s (0-based) and row class i at ``noise[s * classes + i - imin + 1]``;
- ``ends``: the last key of each segment, ascending (the last one M - 1);
- ``lo``, ``hi``: for bucket b of ``width`` keys (keys b*width .. (b+1)*width - 1), the number
  of segments that start at or before b*width, and before (b+1)*width. The segment of key k in
  bucket b is ``lo[b+1] - 1`` plus the segments starting inside the bucket at or before k, i.e.
  those whose previous segment ends before k, ``ends[lo[b+1] : hi[b+1] - 1]`` (none in most
  buckets, else usually one: 2^12 to 2^14 buckets, 256 per segment between).

For a modulus up to the number of buckets (8-bit ONS keys) a bucket is one key and ``lo`` the
segment of each key. DuckDB copies these lists into every chunk of 2048 cells, so they are
kept short; the noise list has segments × row classes entries (192,000 for an ONS p-table of
750 rows and 8-bit keys, a few hundred for a maximum-entropy one). The interval relations ``protab_ptable(protab_i, protab_v, protab_klo, protab_khi)`` and
``protab_ptable_meta(imin, imax, period, modulus)`` are written as before, for readers of the
intervals (the Spark SQL lookup, ``protab tables``).
"""

from __future__ import annotations

import numbers
import uuid
from typing import TYPE_CHECKING, Any

import numpy as np

from protab.errors import InputError, ProtabError
from protab.ptable.count_ptable import PTable
from protab.ptable.keyspace import noise_at

if TYPE_CHECKING:
    import duckdb

#: fewest and most buckets for larger moduli (DuckDB copies the lists into every chunk of
#: 2048 cells: they must stay short)
MIN_BUCKETS = 2**12
MAX_BUCKETS = 2**14
#: most entries (segments × row classes) of the noise list
MAX_ENTRIES = 2**26

_TABLES = ("protab_ptable", "protab_ptable_meta", "protab_ptable_lookup")


def lookup_layout(ptable: PTable, modulus: int) -> dict[str, Any]:
    """The one row of ``protab_ptable_lookup`` for ``ptable`` and key modulus ``modulus``
    (see the module docstring), as Python values; numbers computed with NumPy, no loop over keys."""
    ks = ptable.keyspace(modulus).sort(["i", "klo"])
    imin = int(ks["i"].min())  # type: ignore[arg-type]
    classes = int(ptable.imax) - imin + 1
    ri = ks["i"].to_numpy() - imin
    rk = ks["klo"].to_numpy()
    rv = ks["v"].to_numpy()
    starts = np.unique(rk)  # every row class starts at key 0, so starts[0] = 0
    if starts.size * classes > MAX_ENTRIES:
        raise InputError(
            "install_ptable: the p-table has too many distinct key intervals for the lookup of the "
            "SQL macro ckm() with this key modulus (use Session.cell_key, or fewer key bits)"
        )
    seg = np.repeat(starts, classes)
    cls = np.tile(np.arange(classes, dtype=np.int64), starts.size)
    noise = noise_at(ri, rk, rv, cls, seg, classes, modulus)
    if noise.size and (noise.min() < -(2**31) or noise.max() >= 2**31):
        raise InputError("install_ptable: the p-table's noise does not fit a 32-bit integer")
    target = min(MAX_BUCKETS, max(MIN_BUCKETS, 256 * starts.size))
    width = -(-modulus // target)  # 1 (a bucket per key) for moduli up to the target
    buckets = -(-modulus // width)
    # bucket edges b * width for b = 0..buckets: below 2**64 (buckets * width < modulus + width)
    edges = np.arange(buckets + 1, dtype=np.uint64) * np.uint64(width)
    ustarts = starts.astype(np.uint64)
    lo = np.searchsorted(ustarts, edges[:-1], side="right")
    hi = np.searchsorted(ustarts, edges[1:], side="left")
    return {
        "imin": imin,
        "imax": int(ptable.imax),
        "period": int(ptable.period),
        "modulus": int(modulus),
        "width": int(width),
        "classes": classes,
        "lo": lo.astype(np.int32),
        "hi": hi.astype(np.int32),
        "ends": np.append(starts[1:] - 1, modulus - 1).astype(np.int64),
        "noise": noise.astype(np.int32),
        "intervals": ks,
    }


def check_install_arguments(ptable: Any, modulus: Any) -> None:
    """InputError unless ``ptable`` is a count p-table and ``modulus`` a whole number from 2 to
    2^63 - 1 (the checks of every engine's ``install_ptable``, before any work)."""
    if not isinstance(ptable, PTable):
        raise InputError(f"install_ptable: a count p-table (protab.PTable) is needed, not {type(ptable).__name__}")
    if isinstance(modulus, bool) or not isinstance(modulus, numbers.Integral):
        raise InputError(
            "install_ptable: modulus must be a whole number (2^bits, or 10^d for decimal keys), "
            f"not {type(modulus).__name__}"
        )
    if not 2 <= int(modulus) < 2**63:
        raise InputError("install_ptable: the key modulus must be at least 2 and below 2^63")


def install_ptable(con: "duckdb.DuckDBPyConnection", ptable: PTable, modulus: int) -> None:
    """Install ``ptable`` as the p-table of ``ckm()``/``ckm_weighted()`` in the database of
    ``con`` for record keys below ``modulus`` (2^bits, or 10^d for decimal keys), replacing
    any installed before, in one transaction. The tables are created when missing (a
    database that never ran sql/protab.sql, or one written before the lookup existed)."""
    check_install_arguments(ptable, modulus)
    row = lookup_layout(ptable, int(modulus))
    import pyarrow as pa

    lookup = pa.table({
        "imin": pa.array([row["imin"]], pa.int64()),
        "imax": pa.array([row["imax"]], pa.int64()),
        "period": pa.array([row["period"]], pa.int64()),
        "width": pa.array([row["width"]], pa.int64()),
        "classes": pa.array([row["classes"]], pa.int64()),
        "lo": pa.array([row["lo"]], pa.large_list(pa.int32())),
        "hi": pa.array([row["hi"]], pa.large_list(pa.int32())),
        "ends": pa.array([row["ends"]], pa.large_list(pa.int64())),
        "noise": pa.array([row["noise"]], pa.large_list(pa.int32())),
    })
    ks = row["intervals"]
    intervals = ks.select("i", "v", "klo", "khi").to_arrow()
    tag = uuid.uuid4().hex
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(_CREATE)
        for t in _TABLES:
            con.execute(f"DELETE FROM {t}")
        con.register(f"_protab_install_intervals_{tag}", intervals)
        con.register(f"_protab_install_lookup_{tag}", lookup)
        try:
            con.execute(f"INSERT INTO protab_ptable SELECT i, v, klo, khi FROM _protab_install_intervals_{tag}")
            con.execute(
                "INSERT INTO protab_ptable_meta VALUES (?, ?, ?, ?)",
                [row["imin"], row["imax"], row["period"], row["modulus"]],
            )
            con.execute(
                "INSERT INTO protab_ptable_lookup SELECT imin, imax, period, ?, width, "
                f"classes, lo, hi, ends, noise FROM _protab_install_lookup_{tag}",
                [row["modulus"]],
            )
        finally:
            con.unregister(f"_protab_install_intervals_{tag}")
            con.unregister(f"_protab_install_lookup_{tag}")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def upgrade_installed(con: "duckdb.DuckDBPyConnection") -> bool:
    """Write ``protab_ptable_lookup`` from the interval tables when they hold a p-table and the
    lookup does not (a database whose p-table an older protab installed, or rows inserted by
    hand); True when it did. The intervals over den = M give the same keyspace exactly."""
    import polars as pl

    tables = {r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' AND table_name IN (?, ?, ?)",
        list(_TABLES)).fetchall()}
    if tables != set(_TABLES):
        return False
    if con.execute("SELECT count(*) FROM protab_ptable_lookup").fetchall()[0][0] != 0:
        return False
    meta = con.execute("SELECT period, TRY_CAST(modulus AS BIGINT) FROM protab_ptable_meta").fetchall()
    if len(meta) != 1 or None in meta[0]:
        return False
    period, modulus = int(meta[0][0]), int(meta[0][1])
    frame = pl.from_arrow(con.sql(
        "SELECT protab_i AS i, protab_v AS v, TRY_CAST(protab_klo AS BIGINT) AS lb_n, "
        "TRY_CAST(protab_khi + 1 AS BIGINT) AS ub_n FROM protab_ptable"
    ).to_arrow_table())
    if frame.null_count().sum_horizontal().item():  # type: ignore[union-attr]  # a table: a DataFrame
        return False
    try:
        ptable = PTable(frame, den=modulus, period=period)
        install_ptable(con, ptable, modulus)
    except ProtabError:  # not a valid p-table: left as it is (ckm() refuses to run)
        return False
    return True


# the table definitions of sql/protab.sql (kept in step by tests/cli/test_macros_fast.py)
_CREATE = """
CREATE TABLE IF NOT EXISTS protab_ptable (
    protab_i BIGINT, protab_v BIGINT, protab_klo HUGEINT, protab_khi HUGEINT);
CREATE TABLE IF NOT EXISTS protab_ptable_meta (
    imin BIGINT, imax BIGINT, period BIGINT, modulus HUGEINT);
CREATE TABLE IF NOT EXISTS protab_ptable_lookup (
    imin BIGINT, imax BIGINT, period BIGINT, modulus BIGINT, width BIGINT, classes BIGINT,
    lo INTEGER[], hi INTEGER[], ends BIGINT[], noise INTEGER[]);
"""
