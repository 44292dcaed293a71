"""Magnitudes aggregated ahead: the partial aggregates a key-sum table keeps per sums column
(``Session.key_sums(..., sums=...)``), and the SQL that merges them in the scan of a table
request, so that a magnitude table over the key sums reads one row per combination of codes
instead of one per record and gives the same cells byte for byte.

Every aggregate of the magnitude scan (:meth:`protab.rollup.scan.Scan._magnitude_aggregates`)
merges exactly: DECIMAL sums and counts add, minima and maxima take their minimum and maximum,
key sums add modulo the modulus, and the k largest (smallest) values of a union of groups are
the k largest (smallest) of the groups' own k largest (smallest) lists (docs/design.md, idea 1).
Weighted contributions (lists of structs) are not kept: they need the records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protab.errors import InputError, SpecError, show_values
from protab.sqltools import FLOAT_TYPES, quote_ident

if TYPE_CHECKING:  # pragma: no cover
    from protab.engines import Engine

#: The parts kept per sums column ``k``: column ``protab_m<k>_<part>`` of the key-sum table
PARTS = ("sum", "lo", "hi", "n", "nz", "top", "low", "kz", "kn")

#: Σ|x| over a table beyond which its sums are not kept exactly (Checks.SUM_LIMIT)
SUM_LIMIT = 1e29


@dataclass(frozen=True)
class Partials:
    """What a key-sum table keeps of its sums columns: the columns (``sums``, in the order of
    their parts), their types in the records' table, the length of the kept top lists, and the
    ``null_sums`` rule their contributions were read with."""

    sums: tuple[str, ...]
    types: tuple[str, ...]
    top_k: int
    null_sums: str

    def part(self, column: str, part: str) -> str:
        """The key-sum column holding ``part`` of sums column ``column``."""
        return f"protab_m{self.sums.index(column)}_{part}"

    def columns(self) -> set[str]:
        """The names of the key-sum columns holding the parts."""
        return {f"protab_m{k}_{p}" for k in range(len(self.sums)) for p in PARTS}

    def check_request(self, table: str, sums: tuple[str, ...], null_sums: str, top_k: int | None) -> None:
        """SpecError unless a request's sums can be merged from these parts."""
        missing = [c for c in sums if c not in self.sums]
        if missing:
            raise SpecError(f"table {table!r} keeps the sums of {show_values(self.sums)} only (Session.key_sums); "
                            f"{show_values(missing)} need the records: ask the records' table")
        if sums and null_sums != self.null_sums:  # a count table reads no sums: any rule
            raise SpecError(f"table {table!r} kept its sums with null_sums={self.null_sums!r}; the request says "
                            f"null_sums={null_sums!r}: ask the records' table, or make the key sums with that rule")
        if top_k is not None and top_k > self.top_k:
            raise SpecError(f"table {table!r} keeps the {self.top_k} largest contributions per row (Session.key_sums"
                            f"(top_k={self.top_k})); the request needs {top_k}: make the key sums with top_k={top_k}")


def contribution(column: str, null_sums: str) -> tuple[str, str]:
    """(SQL of a record's contribution x, SQL of whether the record contributes) for a sums
    column read with ``null_sums``: NULL counts as 0 with 'zero'; + 0.0 turns -0.0 into 0.0
    (DuckDB's top lists hold 0.0 for it, Spark's max_by -0.0)."""
    q = quote_ident(column)
    if null_sums == "zero":
        return f"(CAST(coalesce({q}, 0) AS DOUBLE) + 0.0)", "TRUE"
    return f"(CAST({q} AS DOUBLE) + 0.0)", f"{q} IS NOT NULL"


def check_measures(eng: Engine, table: str, sums: tuple[str, ...], null_sums: str) -> set[int]:
    """InputError for what no table of these sums could hold (so that no request on the key
    sums meets it): NaN or infinite values, NULLs under ``null_sums='error'``, |values| adding
    up to SUM_LIMIT or more. Returns the indices of the columns with no negative value."""
    items = []
    for col in sums:
        q = quote_ident(col)
        d = f"CAST({q} AS DOUBLE)"
        items += [f"count(*) FILTER (WHERE NOT isfinite({d}))", f"count(*) - count({q})",
                  f"coalesce(sum(abs({d})) FILTER (WHERE isfinite({d})), 0)", f"coalesce(min({d}) >= 0, TRUE)"]
    row = eng.rows(f"SELECT {', '.join(items)} FROM {quote_ident(table)}")[0]
    nonneg = set()
    for k, col in enumerate(sums):
        bad, nulls, total, positive = row[4 * k: 4 * k + 4]
        where = f"sums column {col!r} of table {table!r}"
        if bad:
            raise InputError(f"key_sums: {where} is NaN or infinite in {bad} record(s); replace them with numbers "
                             "(NULL is left out of the sum)")
        if nulls and null_sums == "error":
            raise InputError(f"key_sums: {where} is missing (NULL) in {nulls} record(s); say what a missing value "
                             "means with null_sums='zero' (a contributor with value 0) or null_sums='omit'")
        if float(total) >= SUM_LIMIT:
            raise InputError(f"key_sums: {where}: its values add up to about {float(total):.3g} in absolute value, "
                             f"beyond what protab sums exactly (below {SUM_LIMIT:.0e}); express it in a larger unit")
        if positive:
            nonneg.add(k)
    return nonneg


def partial_aggregates(eng: Engine, parts: Partials, nonneg: set[int], key: str, modulus: int) -> tuple[list[str], list[Any]]:
    """(aggregates, parameters) of the key-sum GROUP BY that keep the parts of every sums
    column (``key``: SQL of a record's key as BIGINT). A column with no negative value keeps
    its smallest value only as its list of smallest values (all any request reads of it)."""
    aggs: list[str] = []
    params: list[Any] = []
    n = int(parts.top_k)
    for k, (col, dtype) in enumerate(zip(parts.sums, parts.types)):
        q = quote_ident(col)
        x, present = contribution(col, parts.null_sums)
        low = (f"CASE WHEN min({x}) FILTER (WHERE {present}) IS NULL THEN NULL "
               f"ELSE [min({x}) FILTER (WHERE {present})] END" if k in nonneg
               else f"min({x}, {n}) FILTER (WHERE {present})")
        aggs += [
            f"sum({eng.decimal8(q, dtype.upper() in FLOAT_TYPES)}) AS protab_m{k}_sum",
            f"min({q}) AS protab_m{k}_lo", f"max({q}) AS protab_m{k}_hi", f"count({q}) AS protab_m{k}_n",
            f"count(*) FILTER (WHERE {x} <> 0) AS protab_m{k}_nz",
            f"max({x}, {n}) FILTER (WHERE {present}) AS protab_m{k}_top", f"{low} AS protab_m{k}_low",
            f"CAST(coalesce(sum({key}) FILTER (WHERE {x} <> 0), 0) % ? AS BIGINT) AS protab_m{k}_kz",
            f"CAST(coalesce(sum({key}) FILTER (WHERE {q} IS NOT NULL), 0) % ? AS BIGINT) AS protab_m{k}_kn",
        ]
        params += [modulus, modulus]
    return aggs, params


def merged_values(parts: Partials, sums: tuple[str, ...], records: str) -> tuple[list[str], list[str]]:
    """(aggregates, check columns) of a scan over key sums for the sums columns of the request
    (``_s<k>`` and the checks :meth:`Scan._scan_aggregates` would read from the records;
    ``records``: the column counting each row's records)."""
    aggs, checks = [], []
    for k, col in enumerate(sums):
        p = parts.part(col, "")
        i = f"_s{k}"
        aggs += [f"sum({p}sum) AS {i}", f"min({p}lo) AS _chk_lo{i}", f"max({p}hi) AS _chk_hi{i}",
                 f"CAST(sum({p}n) AS BIGINT) AS _chk_n{i}"]
        checks += [f"_chk_lo{i}", f"_chk_hi{i}", f"_chk_n{i}"]
        if parts.null_sums == "error":
            aggs.append(f"CAST(sum({records}) - sum({p}n) AS BIGINT) AS _chk_null{k}")
            checks.append(f"_chk_null{k}")
    return aggs, checks


def merged_magnitudes(eng: Engine, parts: Partials, sums: tuple[str, ...], top_k: int, nonneg: set[int],
                      keys: bool, modulus: int) -> tuple[list[str], list[Any]]:
    """(aggregates, parameters) of a scan over key sums for the magnitude columns of the
    request (``_z``, ``_tp``, ``_tn``, ``_kz`` as the records' scan makes them): the top lists
    merged by :meth:`Engine.merged_list`; ``nonneg``: the request's columns with no negative
    value, whose list of smallest values is their smallest value alone."""
    aggs: list[str] = []
    params: list[Any] = []
    for k, col in enumerate(sums):
        p = parts.part(col, "")
        low = (f"CASE WHEN min({p}low[1]) IS NULL THEN NULL ELSE [min({p}low[1])] END" if k in nonneg
               else eng.merged_list(f"{p}low", top_k, descending=False))
        aggs += [f"CAST(sum({p}nz) AS BIGINT) AS _z{k}",
                 f"{eng.merged_list(f'{p}top', top_k, descending=True)} AS _tp{k}", f"{low} AS _tn{k}"]
        if keys:
            aggs.append(f"CAST(sum({p}kz) % ? AS BIGINT) AS _kz{k}")
            params.append(modulus)
        if parts.null_sums == "omit":  # the records holding a value (Scan._holders)
            aggs.append(f"CAST(sum({p}n) AS BIGINT) AS _nv{k}")
            if keys:
                aggs.append(f"CAST(sum({p}kn) % ? AS BIGINT) AS _kv{k}")
                params.append(modulus)
    return aggs, params
