"""The SQL of one table request: inner cells, code numbers, roll-up, perturbation, pairs.

A :class:`TableRun` owns the temporary relations of one request on a connection the
Session lends it, and drops them when it closes. Its steps (docs/design.md, ideas 1–4;
the pairs of step 4 are the model matrix of idea 2):

1. one scan of the microdata to *inner cells* (count, weight sum, sums as exact decimals,
   record-key sum modulo the key modulus);
2. codes become integers (``codes`` tables, in publication order, with each code's parent
   in a tree) and every hierarchy a ``bridge(leaf, anc, level)`` relation, the leaf itself
   and the total included; the roll-up takes one dimension at a time and groups integers
   only: level by level through the parents when the dimension's leaves share one level
   (flat dimensions, grids), else through the bridge, dropping rows that no published
   crossing can hold as soon as they appear;
3. perturbation is a join of cells with the p-table's integer key ranges (on row class and
   key bucket); count tables then leave SQL as one ordering number per cell;
4. the (inner, published) pairs of the same joins are the sparse model matrix X.

Identifiers are internal (``_d0``, ``_o0``, …) or quoted; every value is a bound parameter.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa

from protab._sql import FLOAT_TYPES, code_sql, quote_ident
from protab.engines import DuckDBEngine, Engine
from protab.errors import InputError, NoRecordsError, SpecError, show_values
from protab.table import TableSpec

if TYPE_CHECKING:  # pragma: no cover
    from protab.magnitude import MagnitudeCKM, SensitivityRules
    from protab.ptable import PTable


#: a code's number for ordering codes (numbers by value, then text): only codes written as a
#: plain decimal number count as numbers, so that every engine orders alike (DuckDB also reads
#: '1_000' and 'nan' as numbers, Spark '1d' and '0x1p3')
NUMERIC_CODE = ("CASE WHEN regexp_matches(trim(ancestor), '^[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?$') "
                "THEN TRY_CAST(ancestor AS DOUBLE) END")


def _tmp(kind: str) -> str:
    return f"_protab_{kind}_{uuid.uuid4().hex}"


def value_columns(spec: TableSpec, *, keys: bool, top_k: int | None = None) -> list[tuple[str, str]]:
    """(internal column, output name) of the values carried per cell.

    With ``top_k`` (magnitude tables, docs/methods.md §1.8) every sums column ``s`` brings
    more columns of the same scan: the weighted sum ``s_w`` (with a weight), the number of
    non-zero contributors ``s_nonzero``, the ``top_k`` largest contributions ``s_top`` (a
    list of structs: |x|, weight, x, in descending order), the largest and
    smallest value, and with keys the cell key of the non-zero contributors."""
    cols = [("_n", "n")]
    if spec.weight is not None:
        cols.append(("_w", "w"))
    for k, s in enumerate(spec.sums):
        cols.append((f"_s{k}", s))
        if top_k is not None:
            if spec.weight is not None:
                cols.append((f"_sw{k}", f"{s}_w"))
            cols.append((f"_z{k}", f"{s}_nonzero"))
            if spec.weight is not None:
                cols += [(f"_t{k}", f"{s}_top"), (f"_mx{k}", f"{s}_max"), (f"_mn{k}", f"{s}_min")]
            else:  # the k largest and the k smallest values (plain lists, cheap to keep; their
                # first elements are the largest and smallest value)
                cols += [(f"_tp{k}", f"{s}_top"), (f"_tn{k}", f"{s}_top_negative")]
            if keys:
                cols.append((f"_kz{k}", f"{s}_cell_key"))
    if keys:
        cols.append(("_k", "cell_key"))
    return cols


def value_kind(internal: str) -> str:
    """The kind of an internal value column: 'n' (integer count), 'key' (key sum modulo the
    modulus), 'list' (top-k list, largest first), 'list_asc' (smallest first), 'max', 'min'
    or 'sum' (decimal)."""
    for prefix, kind in (("_kz", "key"), ("_k", "key"), ("_tn", "list_asc"), ("_t", "list"), ("_mx", "max"),
                         ("_mn", "min"), ("_z", "n"), ("_np", "n"), ("_n", "n")):
        if internal.startswith(prefix):
            return kind
    return "sum"


def top_list(k: int, top_k: int, weighted: bool) -> str:
    """SQL of the top-k list of sums variable ``k`` as structs (a = |x|, w, x), largest |x|
    first (ties: larger weight, then larger x). Weighted tables carry that list; unweighted
    ones carry the k largest and the k smallest values (``_tp``/``_tn``: lists of numbers
    compare and merge several times faster than lists of structs), and the k values of
    largest |x| are among the non-negative ones of the first and the negative ones of the
    second. A cell whose smallest value is 0 or more (most cells of most variables) takes
    the list of largest values as it is, already in that order: no sort."""
    if weighted:
        return f"_t{k}"
    as_struct = "lambda v: {'a': abs(v), 'w': 1.0, 'x': v}"
    signed = (f"list_slice(list_sort(list_concat("
              f"list_transform(list_filter(coalesce(_tp{k}, []), lambda v: v >= 0), {as_struct}), "
              f"list_transform(list_filter(coalesce(_tn{k}, []), lambda v: v < 0), {as_struct})), 'DESC'), "
              f"1, {int(top_k)})")
    plain = f"list_slice(list_transform(coalesce(_tp{k}, []), {as_struct}), 1, {int(top_k)})"
    return f"CASE WHEN coalesce(_tn{k}[1] >= 0, TRUE) THEN {plain} ELSE {signed} END"


def zero_sql(internal: str, alias: str) -> str:
    """The value of an empty cell: 0 for counts, keys and sums; NULL for lists, max, min."""
    if value_kind(internal) in ("list", "list_asc", "max", "min"):
        return f"{alias}.{internal} AS {internal}"
    return f"coalesce({alias}.{internal}, 0) AS {internal}"


def output_names(spec: TableSpec, columns: Sequence[str]) -> dict[str, str]:
    """Map internal column names to output names, refusing clashes."""
    mapping: dict[str, str] = {}
    for k, d in enumerate(spec.dimensions):
        mapping[f"_d{k}"] = d.column
        mapping[f"_l{k}"] = f"{d.column}_level"
    mapping.update(dict(value_columns(spec, keys=True, top_k=1)))
    mapping.update({f"_mx{k}": f"{s}_max" for k, s in enumerate(spec.sums)})
    mapping.update({f"_mn{k}": f"{s}_min" for k, s in enumerate(spec.sums)})
    mapping.update({"_np": "n_pert", "_wp": "w_pert"})
    for k, s in enumerate(spec.sums):
        mapping.update({f"_sp{k}": f"{s}_pert", f"_spm{k}": f"{s}_mean_pert", f"_sens{k}": f"{s}_sensitive",
                        f"_rule{k}": f"{s}_rule", f"_sw{k}": f"{s}_w" if spec.weight else s,
                        f"_fc{k}": f"{s}_contributors"})
        mapping.update({f"_dg{k}_{n}": f"{s}_dominance_{n}" for n in range(1, 7)})  # n <= MAX_TOP_K
    out = {c: mapping[c] for c in columns if c in mapping}
    names = list(out.values())
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SpecError(
            f"the output would have two columns named {show_values(dup)}; rename the "
            "dimension or value column"
        )
    return out


def published_filter(spec: TableSpec, level: dict[int, str] | None = None) -> str:
    """SQL condition keeping the cells that some published crossing holds.

    ``level`` maps dimension positions to their level expressions (default ``_l<k>`` for
    every dimension); given only some dimensions, it keeps the partial cells that can still
    become published ones, so the roll-up prunes early.
    """
    if level is None:
        level = {k: f"_l{k}" for k in range(len(spec.dimensions))}
    if not spec.margins:  # the crossing of all (flat) dimensions alone: every code a leaf
        return " AND ".join(f"{expr} = 1" for expr in level.values()) or "TRUE"
    cols = spec.columns
    ors = []
    for term in spec.terms:
        ands = [f"{expr} = 0" for k, expr in level.items() if cols[k] not in term]
        if not ands:
            return "TRUE"
        ors.append("(" + " AND ".join(ands) + ")")
    return " OR ".join(ors)


class TableRun:
    """The temporary relations of one table request (use as a context manager).

    ``key``: (record key column, modulus) to carry cell keys, or None. ``extend0``: add a
    zero inner cell for every combination of the codes that occur (SSBtools' Extend0),
    except the combinations in ``structural`` (a frame of dimension codes).
    """

    #: Weights and sums are summed exactly as DECIMAL(38, 8) (|x| < 1e30); a column is
    #: accepted when the sum of its absolute values over the table is below this bound, so
    #: that no cell and no margin can overflow.
    SUM_LIMIT = 1e29

    def __init__(
        self,
        con: "duckdb.DuckDBPyConnection | Engine",
        table: str,
        spec: TableSpec,
        *,
        key: tuple[str, int] | None = None,
        extend0: bool | str = False,
        structural: pl.DataFrame | None = None,
        cache: dict[Any, tuple[str, str]] | None = None,
        types: dict[str, str] | None = None,
        max_cells: int | None = None,
        rollup: bool = True,
        top_k: int | None = None,
        holding: str | None = None,
    ) -> None:
        """``types``: column → DuckDB type of the table (NaN codes of floating-point
        dimensions become NULL); ``max_cells``: refuse requests estimated to publish (or,
        with ``extend0``, to hold as inner cells) more cells than this; ``rollup=False``:
        only inner cells are wanted, so the estimate of published cells is skipped;
        ``top_k``: carry the magnitude columns of :func:`value_columns` with lists of the
        ``top_k`` largest contributions (1..6)."""
        self.eng = con if isinstance(con, Engine) else DuckDBEngine(con)
        self.con = self.eng.con if isinstance(self.eng, DuckDBEngine) else None  # DuckDB's own, for magnitudes
        self.table, self.spec = table, spec
        self.types = {k: str(v).upper() for k, v in (types or {}).items()}
        self.max_cells, self.check_published = max_cells, rollup
        self._n_inner = 0  # inner cells found by the scan (set by _check_inner)
        # code and bridge tables of hierarchies depend on nothing else: a Session keeps them
        # for its lifetime (temporary tables, gone with the connection)
        self.cache = cache if cache is not None else {}
        self._leaf_counts: list[int] = []
        self.key = key
        self.modulus = key[1] if key else 0
        self.extend0, self.structural = extend0, structural
        self.nd = len(spec.dimensions)
        self.top_k = top_k
        self.holding = holding
        #: a path: published tables are written there as Parquet by the engine (see _emit)
        self.sink: str | None = None
        if top_k is not None and spec.sums and spec.freq is not None:
            raise SpecError(
                f"table {table!r}: magnitude tables need one row per contributor; the rows are "
                f"aggregated (freq={spec.freq!r}), so contributions and their largest values are unknown"
            )
        self.values = [c for c, _ in value_columns(spec, keys=key is not None, top_k=top_k)]
        self._temps: list[str] = []
        self._views: list[str] = []
        self._cells: str | None = None
        self._ids: str | None = None
        self._checks: list[str] = []
        self.source = quote_ident(table)  # what the scans read: the table, or its where-filtered view

    def _filter(self) -> None:
        """``spec.where`` as a temporary view of the table. The condition is built with DuckDB's
        expression API, which writes the values as escaped constants: protab pastes no value
        of the user's into SQL."""
        if not self.spec.where:
            return
        name = _tmp("where")
        if self.con is None:  # another engine: the same condition with the values as parameters
            conds, params = [], []
            for column, op, values in self.spec.where:
                marks = ", ".join("?" for _ in values)
                hit = f"CAST({quote_ident(column)} AS VARCHAR) IN ({marks})" if values else "FALSE"
                conds.append(f"coalesce({hit if op == 'in' else f'NOT ({hit})'}, FALSE)")
                params += [str(v) for v in values]
            self.eng.create_view(name, f"SELECT * FROM {quote_ident(self.table)} WHERE {' AND '.join(conds)}", params)
            self._views.append(name)
            self.source = name
            return
        cond = None
        for column, op, values in self.spec.where:
            hit = duckdb.FunctionExpression(
                "list_contains",
                duckdb.ConstantExpression(list(values)),
                duckdb.ColumnExpression(column).cast(duckdb.sqltypes.VARCHAR),
            )
            c = hit if op == "in" else ~hit
            c = duckdb.CoalesceOperator(c, duckdb.ConstantExpression(False))
            cond = c if cond is None else (cond & c)
        # the relation's SQL, written by DuckDB with the values as escaped constants
        query = self.con.table(quote_ident(self.table)).filter(cond).sql_query()
        self.eng.create_view(name, query)
        self._views.append(name)
        self.source = name

    # -- lifecycle --------------------------------------------------------------------------
    def __enter__(self) -> "TableRun":
        try:
            self._filter()
            self.inner = self._scan()
            self._check_inner()
            if self.extend0:
                self.inner = self._extend0()
            self.codes, self.bridges = self._bridges()
            if self.top_k is not None and self.spec.sums and any(self.coef):
                signed = [d.column for d, c in zip(self.spec.dimensions, self.coef) if c]
                raise SpecError(
                    f"table {self.table!r}: the hierarchy of {show_values(signed)} is not a tree (signs "
                    "-1 or codes with several parents); the largest contributions of such a cell are "
                    "not defined, so magnitude rules and perturbation need tree hierarchies"
                )
        except BaseException:
            self.close()
            raise
        return self

    @property
    def cells(self) -> str:
        """The published cells (rolled up on first use): _o*, _l*, and the values."""
        if self._cells is None:
            self._cells = self._rollup()
        return self._cells

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for t in reversed(self._temps):
            self.eng.drop_table(t)
        self._temps.clear()
        for v in self._views:
            self.eng.drop_view(v)
        self._views.clear()

    def _create(self, kind: str, select: str, params: Sequence[Any] | None = None) -> str:
        name = _tmp(kind)
        self._temps.append(name)
        self.eng.create_table(name, select, params)
        return name

    def _count(self, query: str) -> int:
        return int(self.eng.rows(f"SELECT count(*) FROM ({query})")[0][0])

    def arrow(self, query: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        return self.eng.frame(query, params)

    def _emit(self, head: str, items: Sequence[str], tail: str, params: Sequence[Any] | None = None) -> pl.DataFrame | None:
        """The published table ``{head}SELECT {items} {tail}`` under its output names: a frame,
        or with :attr:`sink` written as Parquet by the engine (None returned) — the columns
        renamed in SQL, so the file holds what the frame would."""
        if self.sink is None:
            frame = self.arrow(f"{head}SELECT {', '.join(items)} {tail}", params)
            return frame.rename(output_names(self.spec, frame.columns))
        exprs, names = [], []
        for item in items:  # "expr AS name" or "c.name"
            expr, _, name = item.rpartition(" AS ") if " AS " in item else (item, "", item.rpartition(".")[2])
            if not re.fullmatch(r"_[a-z]+[0-9]*", name):
                raise AssertionError(f"protab: cannot name the output column of {item!r}")  # internal SQL only
            exprs.append(expr)
            names.append(name)
        mapping = output_names(self.spec, names)
        named = [f"{e} AS {quote_ident(mapping.get(n, n))}" for e, n in zip(exprs, names)]
        self.eng.write_parquet(f"{head}SELECT {', '.join(named)} {tail}", params, self.sink)
        return None

    # -- 1. one scan to inner cells ---------------------------------------------------------
    def _code_expr(self, column: str) -> str:
        """A dimension column as read by the scan (see :func:`code_sql`)."""
        return code_sql(column, self.types.get(column, ""))

    def _value_sources(self) -> list[tuple[str, str, str]]:
        """(internal column, microdata column, what) of the weight and the sums."""
        spec = self.spec
        out = [("_w", spec.weight, "weight column")] if spec.weight is not None else []
        return out + [(f"_s{k}", c, "sums column") for k, c in enumerate(spec.sums)]

    def _scan(self) -> str:
        """One GROUP BY of the microdata to inner cells; codes become text after grouping
        (cheaper than casting every record), except that ``null_code`` replaces NULL before
        grouping (a column that holds the code and NULL as well is refused by
        :meth:`_check_inner`, from flags of the inner cells).

        Weights and sums are summed as DECIMAL(38, 8) (exact, the same for any number of
        threads); values that cannot be (NaN, ±inf, |x| ≥ 1e30) are left out by TRY_CAST.
        Cheap per-cell aggregates (min, max, count) ride along so that :meth:`_check_inner`
        can tell whether any value is missing, not finite, negative or too large to sum."""
        spec = self.spec
        raw, params = self._raw_codes()  # parameters bind in text order
        aggs = [
            "count(*) AS _n" if spec.freq is None
            else f"CAST(coalesce(sum({quote_ident(spec.freq)}), 0) AS BIGINT) AS _n"
        ]
        # checks that ride along in the same scan (read by _check_inner)
        checks = []
        for internal, col, _ in self._value_sources():
            q = quote_ident(col)
            aggs += [
                f"sum({self.eng.decimal8(q, self.types.get(col, '') in FLOAT_TYPES)}) AS {internal}",
                f"min({q}) AS _chk_lo{internal}",
                f"max({q}) AS _chk_hi{internal}",
                f"count({q}) AS _chk_n{internal}",
            ]
            checks += [f"_chk_lo{internal}", f"_chk_hi{internal}", f"_chk_n{internal}"]
        if self.key is not None:
            aggs.append(f"CAST(sum({self._wide(quote_ident(self.key[0]))}) % ? AS BIGINT) AS _k")
            params.append(self.modulus)
        if spec.weight is not None:
            aggs.append(f"count(*) - count({quote_ident(spec.weight)}) AS _chk_w")
            checks.append("_chk_w")
        if spec.freq is not None:
            aggs.append(f"count(*) FILTER (WHERE {quote_ident(spec.freq)} < 0) AS _chk_f")
            checks.append("_chk_f")
        if spec.sums and spec.null_sums == "error":
            for k, col in enumerate(spec.sums):
                aggs.append(f"count(*) - count({quote_ident(col)}) AS _chk_null{k}")
                checks.append(f"_chk_null{k}")
        if spec.null_code is not None:
            aggs += [f"{f}(CASE WHEN {self._code_expr(c)} IS NULL THEN 1 ELSE 0 END) AS _chk_{m}{k}"
                     for k, c in enumerate(spec.columns) for f, m in (("max", "nx"), ("min", "nn"))]
            checks += [f"_chk_{m}{k}" for k in range(self.nd) for m in ("nx", "nn")]
        if self.top_k is not None:
            more, more_params, more_checks = self._magnitude_aggregates()
            aggs += more
            params += more_params
            checks += more_checks
        self._checks = checks
        outer = [f"CAST(_r{k} AS VARCHAR) AS _d{k}" for k in range(self.nd)]
        try:
            return self._create(
                "inner",
                f"SELECT {', '.join(outer + self.values + checks)} FROM ("
                f"SELECT {', '.join(raw)}, {', '.join(aggs)} FROM {self.source} GROUP BY ALL)",
                params,
            )
        except self.eng.overflow_errors() as exc:
            # a sum overflowed in some cell: the sum of |values| is beyond SUM_LIMIT
            self._too_large()
            reason = str(exc).splitlines()[0]
            raise InputError(
                f"table {self.table!r}: a sum over its records overflowed ({reason}); look for "
                "huge values in the frequency, weight and sums columns of the request"
            ) from None

    def _magnitude_aggregates(self) -> tuple[list[str], list[Any], list[str]]:
        """Aggregates of the scan per sums column for magnitude tables (aggregates, their
        parameters, the check columns): weighted sum, non-zero contributors, the top lists,
        and the non-zero key sum.

        A contribution is the record's value (NULL → 0 with ``null_sums='zero'``; with
        'omit' a NULL record is no contributor). Weighted tables keep structs (a = |x|, w, x)
        sorted descending — by |x|, then weight (R cellKey's order), then x, so that ties
        resolve to the same values on every run — and max and min; unweighted tables keep
        the k largest and the k smallest values (see :func:`top_list`). No record keys: nothing
        downstream needs them. Weighted products are rounded to DECIMAL(38, 8) per record, then
        summed exactly. A column with no negative value in the table (one cheap look first)
        keeps only its smallest value as the list of smallest values: its k largest |x| are
        its k largest values, and every use of that list reads its first element or its
        negative values — half the top-k work of the scan."""
        spec, aggs, params, checks = self.spec, [], [], []
        w = f"CAST({quote_ident(spec.weight)} AS DOUBLE)" if spec.weight is not None else "1.0"
        nonneg: set[int] = set()
        if spec.weight is None and spec.sums:
            lows = self.eng.rows("SELECT " + ", ".join(f"min(CAST({quote_ident(c)} AS DOUBLE)) >= 0"
                                                       for c in spec.sums) + f" FROM {self.source}")[0]
            nonneg = {k for k, low in enumerate(lows) if low is None or low}
        r = f"CAST({quote_ident(self.key[0])} AS BIGINT)" if self.key is not None else "0"  # non-zero key sum
        for k, col in enumerate(spec.sums):
            q = quote_ident(col)
            # + 0.0 turns -0.0 into 0.0: DuckDB's top lists hold 0.0 for it, Spark's max_by -0.0
            x = (f"(CAST(coalesce({q}, 0) AS DOUBLE) + 0.0)" if spec.null_sums == "zero"
                 else f"(CAST({q} AS DOUBLE) + 0.0)")
            present = "TRUE" if spec.null_sums == "zero" else f"{q} IS NOT NULL"
            if spec.weight is not None:
                prod = f"TRY_CAST({x} * {w} AS DECIMAL(38, 8))"
                aggs += [f"sum({prod}) AS _sw{k}",
                         f"count(*) FILTER (WHERE {x} IS NOT NULL AND {prod} IS NULL) AS _chk_sw{k}"]
                checks.append(f"_chk_sw{k}")
            aggs.append(f"count(*) FILTER (WHERE {x} <> 0) AS _z{k}")
            n = int(self.top_k or 1)
            if spec.weight is not None:
                aggs += [f"max({{'a': abs({x}), 'w': {w}, 'x': {x}}}, {n}) FILTER (WHERE {present}) AS _t{k}",
                         f"max({x}) AS _mx{k}", f"min({x}) AS _mn{k}"]
            else:
                low = f"min({x}) FILTER (WHERE {present})"
                smallest = (f"CASE WHEN {low} IS NULL THEN NULL ELSE [{low}] END" if k in nonneg
                            else f"min({x}, {n}) FILTER (WHERE {present})")
                aggs += [f"max({x}, {n}) FILTER (WHERE {present}) AS _tp{k}", f"{smallest} AS _tn{k}"]
            if self.key is not None:
                aggs.append(f"CAST(coalesce(sum({r}) FILTER (WHERE {x} <> 0), 0) % ? AS BIGINT) AS _kz{k}")
                params.append(self.modulus)
        return aggs, params, checks

    def _too_large(self) -> None:
        """InputError for the first weight/sums column whose |values| add up to SUM_LIMIT or
        more over the table (an exact second look at the microdata, made only when the
        cheap bound of the scan does not rule it out)."""
        sources = self._value_sources()
        if not sources:
            return
        items = [
            f"coalesce(sum(abs(CAST({quote_ident(c)} AS DOUBLE))) "
            f"FILTER (WHERE isfinite(CAST({quote_ident(c)} AS DOUBLE))), 0)"
            for _, c, _ in sources
        ]
        row = self.eng.rows(f"SELECT {', '.join(items)} FROM {self.source}")[0]
        for (_, col, what), total in zip(sources, row):
            if float(total) >= self.SUM_LIMIT:
                raise InputError(
                    f"{what} {col!r} of table {self.table!r}: its values add up to about "
                    f"{float(total):.3g} in absolute value, beyond what protab sums exactly (below "
                    f"{self.SUM_LIMIT:.0e}: decimals with 8 places, DECIMAL(38, 8)); express the "
                    "column in a larger unit (e.g. thousands or millions) and register it again"
                )

    def _bad_values(self, column: str, where: str) -> tuple[int, str]:
        """How many records of a microdata column are bad, and the first few distinct bad
        values (error path only)."""
        q = quote_ident(column)
        cond = where.format(q=q)
        t = self.source
        n = self.eng.rows(f"SELECT count(*) FROM {t} WHERE {cond}")[0][0]
        rows = self.eng.rows(f"SELECT DISTINCT {q} FROM {t} WHERE {cond} ORDER BY 1 LIMIT 5")
        return int(n), show_values([r[0] for r in rows])

    def _check_inner(self) -> None:
        """NULL (and NaN) codes, codes missing from hierarchies, codes equal to a margin code,
        NULL, NaN, infinite or negative weights, NaN or infinite sums, sums too large to add
        up exactly, negative frequencies; then the size of the request (``max_cells``)."""
        spec = self.spec
        sources = self._value_sources()
        # one query: the number of inner cells; per dimension the number of its codes (flat;
        # a hierarchy's codes are read below, as Arrow, to check them against it), how many
        # records have none, and (flat) whether the margin code occurs; then the checks of the
        # values. Codes of flat dimensions stay in the database: an identifier column has millions.
        items, params = ["count(*)"], []
        for k, d in enumerate(spec.dimensions):
            items += [
                f"count(DISTINCT _d{k})" if d.hierarchy is None else "NULL",
                f"coalesce(sum(_n) FILTER (WHERE _d{k} IS NULL), 0)",
                f"count(*) FILTER (WHERE _d{k} IS NULL)",
            ]
            if d.hierarchy is not None:
                items.append("NULL")
            else:
                items.append(f"coalesce(bool_or(_d{k} = ?), false)")
                params.append(d.root)
        items += [f"coalesce(sum({c}), 0)" for c in ("_chk_w", "_chk_f") if c in self._checks]
        for i, _, _ in sources:
            lo, hi = f"CAST(_chk_lo{i} AS DOUBLE)", f"CAST(_chk_hi{i} AS DOUBLE)"
            items += [
                f"coalesce(bool_or(isnan({hi}) OR isinf({hi}) OR isinf({lo})), false)",  # NaN sorts last
                f"coalesce(min({lo}), 0)",
                f"coalesce(sum(_chk_n{i} * greatest(abs({lo}), abs({hi}))), 0)",  # ≥ Σ|x|
            ]
        clash = self._null_code_flags()
        params += [spec.null_code] * len(clash)
        row = list(self.eng.rows(f"SELECT {', '.join(items + clash)} FROM {self.inner}", params)[0])
        self._refuse_null_code_clash(row[len(row) - len(clash):])
        del row[len(row) - len(clash):]
        self._n_inner = int(row.pop(0))
        per_dim = [tuple(row[4 * k: 4 * k + 4]) for k in range(self.nd)]
        del row[: 4 * self.nd]
        if self._checks:
            nulls = row.pop(0) if "_chk_w" in self._checks else 0
            negative_f = row.pop(0) if "_chk_f" in self._checks else 0
            bound = 0.0
            for internal, col, what in sources:
                not_finite, low, b = row[:3]
                del row[:3]
                if not_finite:
                    n, shown = self._bad_values(col, "NOT isfinite(CAST({q} AS DOUBLE))")
                    raise InputError(
                        f"{what} {col!r} of table {self.table!r} is NaN or infinite in {n} "
                        f"record(s) ({shown}); "
                        + ("give every record a finite weight" if internal == "_w" else
                           "replace them with numbers (NULL is left out of the sum)")
                    )
                if internal == "_w" and nulls:
                    raise InputError(
                        f"weight column {col!r} of table {self.table!r} is missing (NULL) in "
                        f"{nulls} record(s); give every record a weight"
                    )
                if internal == "_w" and low < 0:
                    n, shown = self._bad_values(col, "{q} < 0")
                    raise InputError(
                        f"weight column {col!r} of table {self.table!r} is negative in {n} "
                        f"record(s) ({shown}); weights must be 0 or more: correct or drop those "
                        "records"
                    )
                bound = max(bound, float(b))
            if bound >= self.SUM_LIMIT / 2:  # near the limit: look exactly (a second scan)
                self._too_large()
            if negative_f:
                raise InputError(
                    f"frequency column {spec.freq!r} of table {self.table!r} is negative in "
                    f"{negative_f} row(s); frequencies must be counts (0 or more)"
                )
        self._check_sums()
        n_codes: list[int] = []
        if not self._n_inner:
            cond = " that pass the where conditions" if self.spec.where else ""
            raise NoRecordsError(f"table {self.table!r} has no records{cond}, so there is no table to publish")
        for k, (d, (n_distinct, nulls, null_cells, codes)) in enumerate(zip(self.spec.dimensions, per_dim)):
            if null_cells:  # only without null_code
                nan = " or NaN" if self.types.get(d.column) in FLOAT_TYPES else ""
                raise InputError(
                    f"column {d.column!r} of table {self.table!r} is missing (NULL{nan}) in {nulls} "
                    "record(s); remove them, or publish them as a category with "
                    "TableSpec(..., null_code='Unknown')"
                )
            if d.hierarchy is not None:
                codes = self.arrow(f"SELECT DISTINCT _d{k} AS code FROM {self.inner} WHERE _d{k} IS NOT NULL")["code"]
                n_distinct = codes.len()
            self._leaf_counts.append(int(d.hierarchy._is_leaf.sum()) if d.hierarchy is not None else int(n_distinct))
            n_codes.append(int(n_distinct))
            if d.hierarchy is not None:
                d.hierarchy.check_codes(codes, table=self.table, column=d.column)
            elif codes:  # the margin's name occurs as a code
                raise SpecError(
                    f"column {d.column!r} of table {self.table!r} has the code {d.root!r}, which is "
                    "also the name of its margin; pass TableSpec(..., total='...') with another "
                    "margin name"
                )
        if self.max_cells is not None:
            self._check_size(n_codes)

    def _null_code_flags(self) -> list[str]:
        """With ``null_code``, per dimension over the inner cells of that code (each binding
        it): whether a record's code is missing (1), and the least such flag (0: some record
        holds the code itself), from the flags the scan put on every inner cell."""
        if self.spec.null_code is None:
            return []
        return [f"coalesce({f}(_chk_{m}{k}) FILTER (WHERE _d{k} = ?), {d})" for k in range(self.nd)
                for f, m, d in (("max", "nx", 0), ("min", "nn", 1))]

    def _refuse_null_code_clash(self, flags: list[Any]) -> None:
        """SpecError when a dimension holds both missing codes and ``null_code`` itself
        (``flags``: the values of :meth:`_null_code_flags`)."""
        for k in range(len(flags) // 2):
            if flags[2 * k] == 1 and flags[2 * k + 1] == 0:
                raise SpecError(
                    f"null_code {self.spec.null_code!r} is also a code of column {self.spec.columns[k]!r} "
                    f"of table {self.table!r}, which has missing (NULL) values too: both would be "
                    "published as one category; choose a null_code the column does not hold"
                )

    def _check_sums(self) -> None:
        """NULL values of sums columns (``null_sums='error'``) and weighted contributions too
        large to hold as DECIMAL(38, 8)."""
        extra = [c for c in self._checks if c.startswith(("_chk_null", "_chk_sw"))]
        if not extra:
            return
        row = self.eng.rows(f"SELECT {', '.join(f'coalesce(sum({c}), 0)' for c in extra)} FROM {self.inner}")[0]
        for c, n in zip(extra, row):
            if not n:
                continue
            col = self.spec.sums[int(c[len("_chk_null"):] if c.startswith("_chk_null") else c[len("_chk_sw"):])]
            if c.startswith("_chk_null"):
                raise InputError(
                    f"sums column {col!r} of table {self.table!r} is missing (NULL) in {int(n)} record(s); "
                    "say what a missing value means with TableSpec(null_sums='zero') (a contributor "
                    "with value 0) or null_sums='omit' (not a contributor, left out of the sum)"
                )
            raise InputError(
                f"sums column {col!r} of table {self.table!r} times the weight {self.spec.weight!r} is "
                f"1e30 or more in absolute value in {int(n)} record(s); express the column or the "
                "weight in a larger unit"
            )

    def _check_size(self, n_codes: list[int]) -> None:
        """SpecError when the request is estimated to publish more than ``max_cells`` cells.

        Estimate (cheap, from the code counts): Σ over published crossings of the product of
        their dimensions' code counts (every level, margins included); with ``drop_empty``
        at most (inner cells) × Σ over crossings of the product of their numbers of levels.
        With ``extend0`` the inner cells are the product of the occurring codes' counts.
        """
        spec, limit = self.spec, int(self.max_cells or 0)
        dims = spec.dimensions
        size = [len(d.hierarchy) if d.hierarchy is not None else n + 1 for d, n in zip(dims, n_codes)]
        levels = [d.hierarchy.depth + 1 if d.hierarchy is not None else 2 for d in dims]
        col = {d.column: k for k, d in enumerate(dims)}
        grid = [math.prod(size[col[c]] for c in t) for t in spec.terms]
        estimate = float(sum(grid))
        inner = math.prod(self._leaf_counts if self.extend0 == "all" else n_codes) if self.extend0 else None
        if spec.drop_empty:
            n_inner = inner if inner is not None else self._n_inner
            estimate = min(estimate, float(n_inner) * sum(math.prod(levels[col[c]] for c in t) for t in spec.terms))
        how = (
            "publish fewer or coarser dimensions (a formula such as 'a*b + c', hierarchies "
            "with fewer codes)"
            + ("" if spec.drop_empty else ", leave out empty cells with TableSpec(drop_empty=True)")
            + f", or raise the limit with Session(max_cells=...) (now {limit:,})"
        )
        if inner is not None and inner > limit:
            counts = " × ".join(f"{d.column} {n:,}" for d, n in zip(dims, n_codes))
            raise SpecError(
                f"table {self.table!r}: the zero-extended inner cells (every combination of the "
                f"codes found: {counts}) would be about {float(inner):.3g} cells, more than the "
                f"limit of {limit:,}; pass extend0=False, use fewer or coarser dimensions, or "
                f"raise the limit with Session(max_cells=...)"
            )
        if estimate > limit and self.check_published:
            term = spec.terms[int(np.argmax(grid))]
            counts = " × ".join(f"{d.column} {size[k]:,} codes" for k, d in enumerate(dims) if d.column in term)
            raise SpecError(
                f"table {self.table!r} would publish about {estimate:.3g} cells (the largest "
                f"crossing: {counts or 'the grand total'}), more than the limit of {limit:,}; {how}"
            )

    def _extend0(self) -> str:
        """Inner cells plus a zero cell for every missing combination of occurring codes;
        with ``extend0="all"`` the leaves of each hierarchy (or code list) count as occurring
        (GaussSuppression's extend0 = "all")."""
        listed = {k: _tmp("leaves") for k, d in enumerate(self.spec.dimensions)
                  if self.extend0 == "all" and d.hierarchy is not None}
        for k, reg in listed.items():
            self.eng.register(reg, pa.table({"_d": pa.array(self.spec.dimensions[k].hierarchy.leaves, pa.string())}))
        try:
            return self._extend0_cells(listed)
        finally:
            for reg in listed.values():
                self.eng.unregister(reg)

    def _extend0_cells(self, listed: dict[int, str]) -> str:
        dims = ", ".join(f"_d{k}" for k in range(self.nd))
        grid = ", ".join(f"(SELECT _d AS _d{k} FROM {listed[k]})" if k in listed
                         else f"(SELECT DISTINCT _d{k} FROM {self.inner})" for k in range(self.nd))
        zeros = ", ".join(zero_sql(v, "i") for v in self.values)
        select = f"SELECT g.*, {zeros} FROM (SELECT * FROM {grid}) g LEFT JOIN {self.inner} i USING ({dims})"
        if self.structural is None:
            return self._create("inner0", select)
        frame = self.structural.select(
            [pl.col(c).cast(pl.String).alias(f"_d{k}") for k, c in enumerate(self.spec.columns)]
        ).to_arrow()
        reg = _tmp("structural")
        self.eng.register(reg, frame)
        match = " AND ".join(f"z._d{k} = g._d{k}" for k in range(self.nd))
        try:
            return self._create(
                "inner0",
                f"{select} WHERE i._n IS NOT NULL OR NOT EXISTS (SELECT 1 FROM {reg} z WHERE {match})",
            )
        finally:
            self.eng.unregister(reg)

    # -- 2. integer codes, bridges, roll-up -------------------------------------------------
    def _bridges(self) -> tuple[list[str], list[str]]:
        """Per dimension ``codes(ord, code, level)`` and ``bridge(leaf, anc, level)``.

        ``ord`` numbers the codes in publication order: by level, then numeric codes
        numerically and other codes as text.

        A hierarchy that is not a tree (signs −1, codes with several parents) adds the
        column ``coef`` to its bridge: the leaf's coefficient in the ancestor (see
        :meth:`protab.hierarchy.Hierarchy.relation`); its codes table holds every code, also
        one whose coefficients all cancel (published as 0). ``self.coef[k]`` tells which
        dimensions carry coefficients.
        """
        codes_out, bridges_out = [], []
        self.coef = [d.hierarchy is not None and not d.hierarchy.is_tree for d in self.spec.dimensions]
        # levelwise roll-up (see _levelwise): the depth of a tree whose leaves all sit at one
        # level (flat dimensions: 1), else None; the codes tables of trees hold each code's parent
        self.depths: list[int | None] = []
        for k, d in enumerate(self.spec.dimensions):
            if d.hierarchy is not None and d.hierarchy in self.cache:
                codes, bridge = self.cache[d.hierarchy]
            elif d.hierarchy is not None:
                reg = _tmp("h")
                rel = d.hierarchy.relation()
                coef = ""
                if self.coef[k]:
                    coef = ", coef"
                    empty = d.hierarchy._codes_without_leaves()
                    if empty:  # no (leaf, code) pair: a row without a leaf keeps the code
                        rel = pa.concat_tables([rel, pa.table({
                            "leaf": pa.nulls(len(empty), pa.string()),
                            "ancestor": pa.array(empty, pa.string()),
                            "level": pa.array([d.hierarchy.level_of(c) for c in empty], pa.int32()),
                            "coef": pa.array([0] * len(empty), pa.int64()),
                        })])
                self.eng.register(reg, rel)
                up = None
                if d.hierarchy.is_tree:  # each code's parent, for the levelwise roll-up
                    up = _tmp("hp")
                    self.eng.register(up, d.hierarchy.code_levels().select(["code", "parent"]))
                try:
                    codes, bridge = self._code_tables(
                        f"SELECT CAST(leaf AS VARCHAR) AS leaf, CAST(ancestor AS VARCHAR) AS ancestor, "
                        f"CAST(level AS INTEGER) AS level{coef} FROM {reg}", [], keep=True, coef=bool(coef),
                        parents=up,
                    )
                finally:
                    self.eng.unregister(reg)
                    if up is not None:
                        self.eng.unregister(up)
                self.cache[d.hierarchy] = (codes, bridge)
            else:
                codes, bridge = self._code_tables(  # the distinct codes found once, used twice
                    f"WITH c AS MATERIALIZED (SELECT DISTINCT _d{k} AS leaf FROM {self.inner}) "
                    f"SELECT leaf, leaf AS ancestor, 1 AS level FROM c "
                    f"UNION ALL SELECT leaf, CAST(? AS VARCHAR), 0 FROM c",
                    [d.root], keep=False,
                )
            codes_out.append(codes)
            bridges_out.append(bridge)
            self.depths.append(self._depth(d.hierarchy))
        return codes_out, bridges_out

    @staticmethod
    def _depth(h: Any) -> int | None:
        """The depth of a dimension for the levelwise roll-up: 1 when flat, a tree's depth
        when all its leaves sit at its deepest level, else None (the bridge roll-up)."""
        if h is None:
            return 1
        if not h.is_tree or not bool(np.all(h._level[h._is_leaf] == h.depth)):
            return None
        return int(h.depth)

    def _code_tables(
        self, relation: str, params: list[Any], *, keep: bool, coef: bool = False, parents: str | None = None
    ) -> tuple[str, str]:
        """``codes`` and ``bridge`` from a (leaf, ancestor, level[, coef]) query; ``keep``:
        outlive this run (for the Session's cache of hierarchies); ``coef``: the query has
        the coefficient column, which the bridge keeps; ``parents``: a relation (code, parent)
        of a tree, whose parents the codes table then holds as code numbers (``parent``)."""
        raw = self._create("braw", relation, params)
        names = []
        numbered = (f"SELECT CAST(row_number() OVER (ORDER BY level, {NUMERIC_CODE} "
                    f"NULLS LAST, ancestor) AS INTEGER) AS ord, ancestor AS code, level "
                    f"FROM (SELECT DISTINCT ancestor, level FROM {raw})")
        if parents is not None:
            numbered = (f"WITH o AS ({numbered}) SELECT o.*, p.ord AS parent FROM o "
                        f"LEFT JOIN {parents} h ON o.code = CAST(h.code AS VARCHAR) "
                        f"LEFT JOIN o p ON p.code = CAST(h.parent AS VARCHAR)")
        for kind, select in (
            ("codes", numbered),
            ("bridge", "SELECT l.ord AS leaf, a.ord AS anc, b.level" + (", b.coef" if coef else "") + " FROM {raw} b "
                       "JOIN {codes} l ON b.leaf = l.code JOIN {codes} a ON b.ancestor = a.code"),
        ):
            select = select.format(raw=raw, codes=names[0] if names else "")
            if keep:
                name = _tmp(kind)
                self.eng.create_table(name, select)
            else:
                name = self._create(kind, select)
            names.append(name)
        return names[0], names[1]

    def _ids_select(self, *, with_id: bool) -> str:
        """Inner cells with integer codes ``_o<k>`` (and a row number ``_id`` in code order)."""
        ids = ", ".join(f"c{k}.ord AS _o{k}" for k in range(self.nd))
        joins = " ".join(f"JOIN {c} c{k} ON i._d{k} = c{k}.code" for k, c in enumerate(self.codes))
        order = ", ".join(f"c{k}.ord" for k in range(self.nd))
        number = f"CAST(row_number() OVER (ORDER BY {order}) - 1 AS BIGINT) AS _id, " if with_id else ""
        return f"SELECT {number}{ids}, {', '.join('i.' + v for v in self.values)} FROM {self.inner} i {joins}"

    @property
    def ids(self) -> str:
        """The numbered inner cells, materialised on first use (rows of the model matrix)."""
        if self._ids is None:
            self._ids = self._create("ids", self._ids_select(with_id=True))
        return self._ids

    def _rollup_ctes(
        self, source: str | None = None, values: list[str] | None = None, keys: Sequence[str] = ()
    ) -> tuple[str, str, list[Any]]:
        """The roll-up as common table expressions: (WITH clause, last name, parameters).

        Rolls inner cells (``source``, default the numbered inner cells) up one dimension at
        a time, summing ``values``; ``keys`` are more columns to group by (a holding).

        Step k keeps every row at its leaf code of dimension k as it is (the rows are unique,
        so nothing to add up) and adds the rows of that leaf's proper ancestors, aggregated
        through the bridge; rows that no published crossing can hold are dropped as soon as
        they appear. Counts and key sums are integers, so the order of summation does not
        matter.

        Through the bridge of a hierarchy that is not a tree every value is multiplied by
        the leaf's coefficient (e.g. −1 under EU = Europe − nonEU): counts, weights and sums
        become signed sums, and the cell key the signed sum of record keys taken modulo the
        key modulus as a residue in [0, modulus) (``((x % m) + m) % m``), so a cell gets the
        same key whichever hierarchy, path or table it comes from.
        """
        spec, nd = self.spec, self.nd
        if source is None:
            source = self._ids or self._create("codes_inner", self._ids_select(with_id=False))
        values = values or self.values
        params: list[Any] = []
        steps: list[str] = []
        extra = [f"r.{x}" for x in keys]
        # the rows so far as SELECTs whose UNION ALL they are: a level-by-level step reads them
        # where they lie instead of from a union written out first (a CTE read twice is
        # materialised: at 5·10^6 inner cells that write was a third of the roll-up)
        pieces = [f"SELECT {', '.join([f'_o{k}' for k in range(nd)] + list(keys))}, {', '.join(values)} FROM {source}"]
        for k in range(nd):
            keep, up = [], []
            for j in range(nd):
                if j < k:
                    keep += [f"r._o{j}", f"r._l{j}"]
                    up += [f"r._o{j}", f"r._l{j}"]
                elif j == k:
                    keep += [f"r._o{j}", f"c.level AS _l{j}"]
                    up += [f"b.anc AS _o{j}", f"b.level AS _l{j}"]
                else:
                    keep.append(f"r._o{j}")
                    up.append(f"r._o{j}")
            keep += extra
            up += extra
            levels = {j: f"r._l{j}" for j in range(k)}
            lists = [v for v in values if value_kind(v) in ("list", "list_asc")]
            depth = self.depths[k] if not lists and not self.coef[k] else None
            if depth is not None:
                pieces = self._levelwise(k, pieces, keep, levels, values, params, depth, steps)
                if not self.eng.union_pieces:
                    pieces = [f"SELECT * FROM {self._union(pieces, f'_step{k}', steps, inline=False)}"]
                continue
            prev = self._union(pieces, f"_in{k}", steps)
            aggs = self._aggregates(values, params, " * b.coef" if self.coef[k] else "")
            keep_where = published_filter(spec, {**levels, k: "c.level"})
            up_where = published_filter(spec, {**levels, k: "b.level"})
            source = (f"FROM {prev} r JOIN {self.bridges[k]} b ON r._o{k} = b.leaf AND b.anc <> b.leaf "
                      f"WHERE {up_where}")
            if not lists:
                upper = f"SELECT {', '.join(up + aggs)} {source} GROUP BY ALL"
            else:
                # the k largest of a union are among its parts' k largest: the parts' lists are
                # unnested side by side and the k largest kept (max(x, k)) — several times
                # faster than list() + flatten + sort; joined back to the other aggregates
                names = [e.rsplit(" AS ", 1)[-1].split(".")[-1] for e in up]
                n = int(self.top_k or 1)
                unnest = ", ".join(f"unnest(r.{v}) AS _e_{v}" for v in lists)
                merged = ", ".join(
                    f"{'min' if value_kind(v) == 'list_asc' else 'max'}(_e_{v}, {n}) AS {v}" for v in lists)
                steps.append(f"_up{k} AS (SELECT {', '.join(up + aggs)} {source} GROUP BY ALL)")
                steps.append(f"_ul{k} AS (SELECT {', '.join(names)}, {merged} FROM (SELECT {', '.join(up)}, {unnest} "
                             f"{source}) GROUP BY ALL)")
                cols = [f"u.{c}" for c in names] + [f"l.{v}" if v in lists else f"u.{v}" for v in values]
                upper = f"SELECT {', '.join(cols)} FROM _up{k} u LEFT JOIN _ul{k} l USING ({', '.join(names)})"
            steps.append(
                f"_step{k} AS (SELECT {', '.join(keep + ['r.' + v for v in values])} FROM {prev} r "
                f"JOIN {self.codes[k]} c ON r._o{k} = c.ord WHERE {keep_where} "
                f"UNION ALL {upper})"
            )
            pieces = [f"SELECT * FROM _step{k}"]
        last = self._union(pieces, f"_step{nd - 1}", steps, inline=False)
        return f"WITH {', '.join(steps)} ", last, params

    @staticmethod
    def _union(pieces: list[str], name: str, steps: list[str], *, inline: bool = True) -> str:
        """A relation (for FROM) holding the UNION ALL of ``pieces``: the CTE that is the one
        piece, or (``inline``) the one piece as a subquery, else a new CTE ``name`` appended
        to ``steps``."""
        if len(pieces) == 1:
            whole = pieces[0].removeprefix("SELECT * FROM ")
            if whole != pieces[0] and " " not in whole:
                return whole
            if inline:
                return f"({pieces[0]})"
        steps.append(f"{name} AS ({' UNION ALL '.join(pieces)})")
        return name

    def _wide(self, key: str) -> str:
        """A key column as summed: keys of more than 32 bits (decimal keys with 10 to 15 digits)
        as HUGEINT, so that a sum over many records cannot overflow on an engine whose BIGINT
        sums stay BIGINT (Spark; DuckDB sums BIGINT into HUGEINT anyway: the same numbers)."""
        return f"CAST({key} AS HUGEINT)" if self.modulus > 2**32 else key

    def _aggregates(self, values: list[str], params: list[Any], times: str = "") -> list[str]:
        """Aggregates of rows ``r`` for the roll-up (lists are merged apart); ``times``
        multiplies by the bridge coefficient. Parameters are appended to ``params``."""
        aggs = []
        for v in values:
            kind = value_kind(v)
            if kind == "key" and times:
                aggs.append(f"CAST(((sum({self._wide(f'r.{v}')} * b.coef) % ?) + ?) % ? AS BIGINT) AS {v}")
                params += [self.modulus] * 3
            elif kind == "key":
                aggs.append(f"CAST(sum({self._wide(f'r.{v}')}) % ? AS BIGINT) AS {v}")
                params.append(self.modulus)
            elif kind == "n":
                aggs.append(f"CAST(sum(r.{v}{times}) AS BIGINT) AS {v}")
            elif kind in ("list", "list_asc"):
                continue
            elif kind in ("max", "min"):
                aggs.append(f"{kind}(r.{v}) AS {v}")
            elif times:
                aggs.append(f"sum({self.eng.decimal_times(f'r.{v}', 'b.coef')}) AS {v}")
            else:
                aggs.append(f"sum(r.{v}) AS {v}")
        return aggs

    def _levelwise(
        self, k: int, pieces: list[str], keep: list[str], levels: dict[int, str], values: list[str],
        params: list[Any], depth: int, ctes: list[str],
    ) -> list[str]:
        """Roll-up step ``k`` for a dimension whose leaves all sit at level ``depth`` of a tree:
        the rows of each level are summed from the rows one level below (through the parent
        table, the last step to the root without a join), so every level is one GROUP BY of
        fewer rows instead of a join of the leaves with all their ancestors. Rows that no
        published crossing holds at their level are left out of the union (they may still
        feed a coarser level).

        ``pieces`` are SELECTs whose union are the rows so far; returned are the pieces of
        the rows after this step (each old piece at its leaf, then one per level above), the
        level sums appended to ``ctes``."""
        names = [e.rsplit(" AS ", 1)[-1].split(".")[-1] for e in keep]
        parts = []
        where = published_filter(self.spec, {**levels, k: str(depth)})
        leaf = f"{', '.join(e if e.startswith('r.') else f'{depth} AS _l{k}' for e in keep)}, " + ", ".join(
            "r." + v for v in values)
        parts += [f"SELECT {leaf} FROM ({p}) r WHERE {where}" for p in pieces]
        src = f"({' UNION ALL '.join(pieces)})"  # read once: never materialised
        for level in range(depth - 1, -1, -1) if self.spec.margins else ():  # no margins: leaves only
            name = f"_u{k}_{level}"
            others = [e for e in keep if e != f"r._o{k}" and not e.startswith("c.level")]
            aggs = self._aggregates(values, params)
            if level == 0:  # the root's code number is 1 (codes are numbered by level first)
                ctes.append(f"{name} AS (SELECT {', '.join(others + ['1 AS _o' + str(k)] + aggs)} "
                            f"FROM {src} r GROUP BY ALL)")
            else:
                ctes.append(f"{name} AS (SELECT {', '.join(others + [f'p.parent AS _o{k}'] + aggs)} "
                            f"FROM {src} r JOIN {self.codes[k]} p ON r._o{k} = p.ord GROUP BY ALL)")
            where = published_filter(self.spec, {**levels, k: str(level)})
            cols = [f"{level} AS _l{k}" if c == f"_l{k}" else c for c in names]
            parts.append(f"SELECT {', '.join(cols + values)} FROM {name} r WHERE {where}")
            src = name
        return parts

    def _complete(self) -> bool:
        """True when the roll-up gives every published cell by itself: empty cells are left
        out (drop_empty), or every combination of leaf codes is an inner cell (and no code
        of a hierarchy has coefficients that all cancel)."""
        if self.spec.drop_empty:
            return True
        if any(d.hierarchy is not None and d.hierarchy._codes_without_leaves() for d in self.spec.dimensions):
            return False
        return self._count(f"SELECT 1 FROM {self._ids or self.inner}") == int(np.prod(self._leaf_counts))

    def _cells_source(self) -> tuple[str, str, list[Any]]:
        """(WITH clause, relation, parameters) that give the published cells in one query,
        without a temporary table: the roll-up, joined to the grid of every published
        combination of codes when the roll-up alone misses empty cells. The materialised
        cells instead, once :attr:`cells` exists."""
        if self._cells is not None:
            return "", self._cells, []
        ctes, last, params = self._rollup_ctes()
        if self._complete():
            return ctes, last, params
        return f"{ctes}, _protab_all AS ({self._fill_empty(last, self.values)}) ", "_protab_all", params

    def _fill_empty(self, agg: str, values: list[str]) -> str:
        """Every published combination of codes (the grid of the code tables that some
        crossing publishes) with the values of ``agg``, 0 where ``agg`` has no row."""
        grid = ", ".join(f"(SELECT ord AS _o{k}, level AS _l{k} FROM {c})" for k, c in enumerate(self.codes))
        zeros = ", ".join(zero_sql(v, "a") for v in values)
        using = ", ".join(f"_o{k}" for k in range(self.nd))
        return (
            f"SELECT f.*, {zeros} FROM (SELECT * FROM {grid} WHERE {published_filter(self.spec)}) f "
            f"LEFT JOIN (SELECT {using}, {', '.join(values)} FROM {agg}) a USING ({using})"
        )

    def _rollup(self, source: str | None = None, values: list[str] | None = None) -> str:
        """The published cells in a temporary table: the roll-up of :meth:`_rollup_ctes`,
        plus the empty cells (every combination of codes is published) unless drop_empty."""
        values = values or self.values
        ctes, last, params = self._rollup_ctes(source, values)
        if self.spec.drop_empty:
            return self._create("agg", f"{ctes}SELECT * FROM {last}", params)
        return self._create("cells", f"{ctes}{self._fill_empty(last, values)}", params)

    # -- results ----------------------------------------------------------------------------
    def _decode(self) -> tuple[list[str], str, str]:
        """Select items, joins and ORDER BY that turn the code numbers of cells ``c`` into codes."""
        cols = [f"k{k}.code AS _d{k}" for k in range(self.nd)] + [f"c._l{k}" for k in range(self.nd)]
        joins = " ".join(f"JOIN {t} k{k} ON c._o{k} = k{k}.ord" for k, t in enumerate(self.codes))
        return cols, joins, ", ".join(f"c._o{k}" for k in range(self.nd))

    def _in_order(self, frame: pl.DataFrame, codes: list[pl.DataFrame]) -> pl.DataFrame:
        """Cells given by their number ``_cell`` (the code numbers of the dimensions in mixed
        radix: unique, and in publication order) as published: in that order, with each
        dimension's code and level (``_d*``, ``_l*``, read by position from its codes table
        ``codes[k]``: code, level in code-number order 1..n) before the values.

        When the numbers span few more slots than there are cells, each row is put at its
        number in an array of slots whose filled ones are the rows in order (linear, no
        comparison sort); else the numbers are sorted. Frames arrive from the engine in
        chunks of ~10^5 rows; they are merged first (a gather across chunks is ~3x slower)."""
        codes = [c.rechunk() for c in codes]
        sizes = [c.height + 1 for c in codes]
        number = frame["_cell"].to_numpy()
        rest = frame.drop("_cell").rechunk()
        del frame  # the caller holds no other reference: the chunks go now
        span = math.prod(sizes)
        if span <= 8 * max(rest.height, 1 << 20):
            slots = np.full(span, -1, dtype=np.int32 if rest.height < 2**31 else np.int64)
            slots[number] = np.arange(rest.height, dtype=slots.dtype)
            ordered = np.flatnonzero(slots >= 0)
            order = slots[ordered]
            del slots
        else:
            order = np.argsort(number)
            ordered = number[order]
        del number
        out = rest[order]
        del rest, order
        dims, levels = [], []
        if span < 2**31:  # 32-bit division is about twice as fast (0.7 s → 0.24 s at 10^7 cells)
            ordered = ordered.astype(np.int32)
        for k in reversed(range(self.nd)):
            ordered, rem = np.divmod(ordered, sizes[k])
            pos = pl.Series(rem - 1)
            dims.insert(0, codes[k]["code"].gather(pos).alias(f"_d{k}"))
            levels.insert(0, codes[k]["level"].gather(pos).alias(f"_l{k}"))
        return pl.DataFrame(dims + levels).hstack(out)

    def _decode_frame(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Cells with code numbers ``_o*`` in publication order with their codes ``_d*`` (as
        :meth:`_decode` gives them): sorted by the code numbers, which become codes by position
        in each codes table (numbers 1..n)."""
        nd = self.nd
        codes = [self.arrow(f"SELECT code FROM {t} ORDER BY ord")["code"] for t in self.codes]
        frame = frame.sort([f"_o{k}" for k in range(nd)])
        decoded = [c.gather(frame[f"_o{k}"] - 1).alias(f"_d{k}") for k, c in enumerate(codes)]
        rest = [c for c in frame.columns if not c.startswith(("_o", "_l"))]
        return frame.with_columns(decoded).select(
            [f"_d{k}" for k in range(nd)] + [f"_l{k}" for k in range(nd)] + rest)

    def _value_select(self, src: str, alias: str = "c.") -> list[str]:
        """A value column as published to a trusted user: decimals as DOUBLE; of a top-k list
        the values (for the list of smallest values: the largest and the smallest value)."""
        if src.startswith("_tn"):  # the largest and smallest values
            return [f"{alias}_tp{src[3:]}[1] AS _mx{src[3:]}", f"{alias}{src}[1] AS _mn{src[3:]}"]
        return [self._one_value(src, alias)]

    def _one_value(self, src: str, alias: str) -> str:
        if src == "_w" or src.startswith("_s"):
            return f"CAST({alias}{src} AS DOUBLE) AS {src}"
        if src.startswith("_tp"):
            top = top_list(int(src[3:]), int(self.top_k or 1), False).replace("_tp", f"{alias}_tp").replace(
                "_tn", f"{alias}_tn")
            return f"list_transform({top}, lambda e: e.x) AS {src}"
        if value_kind(src) == "list":
            return f"coalesce(list_transform({alias}{src}, lambda e: e.x), []) AS {src}"
        return f"{alias}{src}"

    def _value_selects(self, values: Sequence[str], alias: str = "c.") -> list[str]:
        return [item for v in values for item in self._value_select(v, alias)]

    def published(self) -> pl.DataFrame | None:
        """Every published cell: dims, levels, n (w, sums, cell_key), in publication order."""
        cols, joins, order = self._decode()
        cols += self._value_selects(self.values)
        ctes, cells, params = self._cells_source()
        return self._emit(ctes, cols, f"FROM {cells} c {joins} ORDER BY {order}", params)

    def inner_frame(self) -> pl.DataFrame:
        """The inner cells (with the zeros of extend0) in the order of their ``_id``."""
        cols = [f"k{k}.code AS _d{k}" for k in range(self.nd)]
        joins = " ".join(f"JOIN {t} k{k} ON c._o{k} = k{k}.ord" for k, t in enumerate(self.codes))
        cols += self._value_selects([v for v in self.values if v != "_k"])
        frame = self.arrow(f"SELECT {', '.join(cols)} FROM {self.ids} c {joins} ORDER BY c._id")
        return frame.rename(output_names(self.spec, frame.columns))

    def pairs(self, *, coefficients: bool = False) -> tuple[np.ndarray, np.ndarray, int, int]:
        """(inner id, published id) of every inner cell under every published cell.

        Published ids number the cells in publication order (as :meth:`published`).

        Under a hierarchy that is not a tree an inner cell enters a published cell with a
        coefficient: the product over dimensions of the leaf's coefficient in the code
        (−1 for a country of nonEU in EU = Europe − nonEU; 2 for a leaf counted twice).
        These are the values of X, left in ``self.pair_coef`` (int64, one per pair; all 1
        for trees) when ``coefficients=True``; :meth:`matrix` builds X with them. Without
        ``coefficients=True`` a coefficient other than 1 raises SpecError, as the caller
        would build a 0/1 matrix.
        """
        nd = self.nd
        pub = self._create(
            "pub",
            f"SELECT CAST(row_number() OVER (ORDER BY {', '.join(f'_o{k}' for k in range(nd))}) - 1 "
            f"AS BIGINT) AS _pid, {', '.join(f'_o{k}' for k in range(nd))} FROM {self.cells}",
        )
        joins = " ".join(f"JOIN {b} b{k} ON i._o{k} = b{k}.leaf" for k, b in enumerate(self.bridges))
        match = " AND ".join(f"p._o{k} = b{k}.anc" for k in range(nd))
        where = published_filter(self.spec, {k: f"b{k}.level" for k in range(nd)})
        signed = [k for k in range(nd) if self.coef[k]]
        coef = (", " + " * ".join(f"b{k}.coef" for k in signed) + " AS _c") if signed else ""
        tab = self.eng.arrow(
            f"SELECT i._id, p._pid{coef} FROM {self.ids} i {joins} JOIN {pub} p ON {match} WHERE {where}"
        )
        n_inner = self._count(f"SELECT 1 FROM {self.ids}")
        n_pub = self._count(f"SELECT 1 FROM {pub}")
        self.pair_coef = tab.column("_c").to_numpy().astype(np.int64) if signed else np.ones(tab.num_rows, np.int64)
        if not coefficients and signed and bool((self.pair_coef != 1).any()):
            dims = [self.spec.dimensions[k].column for k in signed]
            raise SpecError(
                f"the hierarchy of {show_values(dims)} has coefficients other than 1 (signs -1, "
                "or a leaf counted more than once), which a 0/1 model matrix cannot hold; build "
                "X with TableRun.matrix() (or pairs(coefficients=True))"
            )
        return (
            tab.column("_id").to_numpy(),
            tab.column("_pid").to_numpy(),
            n_inner,
            n_pub,
        )

    def matrix(self) -> Any:
        """The model matrix X (scipy csc, inner × published, float64) with the coefficients
        of :meth:`pairs`, so that ``X.T @ inner n == published n`` for any hierarchy."""
        from scipy import sparse

        rows, cols, n_inner, n_pub = self.pairs(coefficients=True)
        return sparse.csc_matrix((self.pair_coef.astype(np.float64), (rows, cols)), shape=(n_inner, n_pub))

    def perturb(
        self,
        ptable: "PTable",
        *,
        original: bool,
        threshold: int | None,
        magnitude: "MagnitudeCKM | None" = None,
        rules: "SensitivityRules | None" = None,
    ) -> pl.DataFrame | None:
        """Cells joined to the p-table's integer key ranges: n_pert (and w_pert); with
        ``magnitude`` every sums column perturbed too (``<s>_pert``, ``<s>_mean_pert``), with
        ``rules`` its sensitivity (``<s>_sensitive``, ``<s>_rule``).

        ``threshold``: an integer; cells with ``n_pert < threshold`` are published as null
        (the Session passes ``ceil(t)`` of a real threshold t, the same rule exactly), and so
        are their weighted counts, sums and means."""
        pt = self._ptable(ptable)
        imin = int(ptable.frame["i"].min())  # type: ignore[arg-type]
        # a negative count (a signed cell of a non-tree hierarchy, e.g. −(Spain + Portugal)) is
        # perturbed as its absolute value with the negated key: −S publishes exactly −(S's
        # perturbed count), so neither form reveals the other's original
        pert = ("CASE WHEN c._n < 0 THEN -(abs(c._n) + coalesce(p.protab_v, 0)) "
                "ELSE c._n + coalesce(p.protab_v, 0) END")
        ctes, cells, params = self._cells_source()
        items = []
        if threshold is not None:
            pert = f"CASE WHEN abs({pert}) < ? THEN NULL ELSE {pert} END"  # signed cells by size
            params.append(int(threshold))
        items.append(f"{pert} AS _np")
        if self.spec.weight is not None:
            # blanked with n_pert (a zero weight would tell that the blanked count is 0)
            blank = f"WHEN ({pert}) IS NULL THEN NULL " if threshold is not None else ""
            items.append(
                f"CASE {blank}WHEN c._n = 0 THEN 0.0 ELSE ({pert}) * CAST(c._w AS DOUBLE) / c._n END AS _wp"
            )
            if threshold is not None:
                params += [int(threshold)] * 2
        codes = None
        counts_only = magnitude is None and rules is None
        if counts_only and self.sink is None:
            # count tables leave SQL as one number per cell that orders them (see _in_order)
            codes = [self.arrow(f"SELECT code, level FROM {t} ORDER BY ord") for t in self.codes]
            sizes = [c.height + 1 for c in codes]
            if math.prod(sizes) < 2**62:
                number = "CAST(c._o0 AS BIGINT)"
                for k in range(1, self.nd):
                    number = f"({number} * ? + c._o{k})"
                items.append(f"{number} AS _cell")
                params += sizes[1:]
            else:
                codes = None
        # the entry of the cell's row class whose key range holds the cell key, found by a hash
        # join on (row class, bucket of the key) and checked against the range
        key = "(CASE WHEN c._n < 0 THEN (? - c._k) % ? ELSE c._k END)"
        params += [imin, int(ptable.imax), int(ptable.period), *[self.modulus] * 2, self._bucket, *[self.modulus] * 2]
        join = (
            f"FROM {cells} c LEFT JOIN {pt} p "
            f"ON p.protab_i = protab_row_class(abs(c._n), ?, ?, ?) AND p.protab_b = {key} // ? "
            f"AND {key} BETWEEN p.protab_klo AND p.protab_khi"
        )
        cols, joins, order = self._decode()
        values = []
        if original:
            values.append("c._n")
            if self.spec.weight is not None:
                values.append("CAST(c._w AS DOUBLE) AS _w")
        values.append("c._np")
        if self.spec.weight is not None:
            values.append("c._wp")
        if codes is not None:
            frame = self._in_order(self.arrow(
                f"{ctes}SELECT {', '.join(['c._cell'] + values)} FROM (SELECT c.*, {', '.join(items)} {join}) c",
                params), codes)
            return frame.rename(output_names(self.spec, frame.columns))
        if counts_only and self.sink is None:
            # code numbers out, sorted and turned into codes in polars (no joins, no SQL sort)
            nums = [f"c._o{k}" for k in range(self.nd)] + [f"c._l{k}" for k in range(self.nd)]
            frame = self.arrow(f"{ctes}SELECT {', '.join(nums + values)} FROM (SELECT c.*, {', '.join(items)} {join}) c",
                               params)
            frame = self._decode_frame(frame)
            return frame.rename(output_names(self.spec, frame.columns))
        cols += values
        if counts_only:  # written by the engine: decoded and ordered in SQL
            return self._emit(ctes, cols, f"FROM (SELECT c.*, {', '.join(items)} {join}) c {joins} ORDER BY {order}",
                              params)
        base = self._create("pcells", f"{ctes}SELECT c.*, {', '.join(items)} {join}", params)
        return self._perturb_magnitudes(base, cols, magnitude, rules, original=original)

    def _perturb_magnitudes(
        self,
        base: str,
        cols: list[str],
        magnitude: "MagnitudeCKM | None",
        rules: "SensitivityRules | None",
        *,
        original: bool,
        diagnostics: bool = False,
    ) -> pl.DataFrame | None:
        """Rules and the magnitude perturbation over the count-perturbed cells ``base``
        (``diagnostics``: with the shares the rules read, for :meth:`sensitivity` only)."""
        from protab import magnitude as mg

        spec, weighted = self.spec, self.spec.weight is not None
        if not spec.sums:
            raise SpecError("magnitude perturbation and sensitivity rules need sums=[...] in the TableSpec")
        if rules is not None and rules.needs_nonnegative:
            self._check_nonnegative(base)
        ctes: list[str] = []
        params: list[Any] = []
        prev = base
        if self.holding is not None:
            hold = self._holdings(weights=rules.weights if rules is not None else None)
            using = ", ".join(f"_o{j}" for j in range(self.nd))
            prev = self._create("hcells", f"SELECT * FROM {base} LEFT JOIN {hold} USING ({using})")
        # each variable's top-k list as structs, built once for the rules and the perturbation
        n = int(self.top_k or 1)
        tops = ", ".join(f"{top_list(k, n, weighted)} AS _tl{k}" for k in range(len(spec.sums)))
        ctes.append(f"_tops AS (SELECT *, {tops} FROM {prev})")
        prev = "_tops"
        if rules is not None:
            stages: list[list[str]] = [[], []]
            items = []
            for k in range(len(spec.sums)):
                more, sens, names, ps = rules.sql(k, weighted=weighted, holdings=self.holding is not None,
                                                  top=f"_tl{k}")
                for stage, extra in zip(stages, more, strict=True):
                    stage += extra
                items += [f"{sens} AS _sens{k}", f"{names} AS _rule{k}"] + (rules.diagnostics_sql(
                    k, weighted=weighted, holdings=self.holding is not None, top=f"_tl{k}") if diagnostics else [])
                params += ps
            for j, stage in enumerate(s for s in stages if s):
                ctes.append(f"_rlists{j} AS (SELECT *, {', '.join(stage)} FROM {prev})")
                prev = f"_rlists{j}"
            ctes.append(f"_rules AS (SELECT *, {', '.join(items)} FROM {prev})")
            prev = "_rules"
        if magnitude is not None:
            seg = self._register_frame("numseg", magnitude.lookup_frames(self.modulus))
            select, values = mg.ckm_parameters(magnitude)
            par = self._create("numpar", select, values)
            ctes.append(f"_mp AS (SELECT * FROM {prev} CROSS JOIN {par})")
            using = ", ".join(f"_o{j}" for j in range(self.nd))
            outs = []
            for k in range(len(spec.sums)):
                more, last = mg.ckm_ctes(
                    magnitude, k, "_mp", modulus=self.modulus, weighted=weighted,
                    sensitive=f"_sens{k}" if rules is not None else None, segments=seg,
                    dims=self.nd, top=f"_tl{k}",
                )
                ctes += more
                outs.append(last)
            ctes.append(f"_mall AS (SELECT * FROM {prev} " + " ".join(f"JOIN {o} USING ({using})" for o in outs) + ")")
            prev = "_mall"
        out = list(cols)
        for k in range(len(spec.sums)):
            total = f"_sw{k}" if weighted else f"_s{k}"
            if original:
                out.append(f"CAST(c.{total} AS DOUBLE) AS {total}")
            if magnitude is not None:
                # blanked with n_pert; the mean is the perturbed sum over the perturbed count
                sp = f"CASE WHEN c._np IS NULL THEN NULL ELSE c._sp{k} END"
                den = "c._wp" if weighted else "c._np"
                out += [f"{sp} AS _sp{k}", f"{sp} / nullif({den}, 0) AS _spm{k}"]
            if rules is not None:
                out += [f"c._sens{k}", f"c._rule{k}"]
                if diagnostics:
                    out += [f"c._dg{k}_{n}" for n in rules.shares] + ([f"c._fc{k}"] if rules.min_frequency else [])
        dec, joins, order = self._decode()
        del dec
        return self._emit(f"WITH {', '.join(ctes)} ", out, f"FROM {prev} c {joins} ORDER BY {order}", params)

    def sensitivity(self, rules: "SensitivityRules", diagnostics: bool = False) -> pl.DataFrame:
        """The published cells with their original values and the rules' verdicts (and with
        ``diagnostics`` the shares behind them)."""
        ctes, cells, params = self._cells_source()
        base = self._create("scells", f"{ctes}SELECT * FROM {cells}", params)
        cols, _, _ = self._decode()
        cols += self._value_selects(self.values)
        return self._perturb_magnitudes(base, cols, None, rules, original=False, diagnostics=diagnostics)

    def _holdings(self, *, weights: str | None) -> str:
        """Per published cell the contributions of holdings (docs/methods.md §6.2): each
        holding's values summed over the records under the cell (margins included, by the
        roll-up with the holding as one more grouping column), then per cell ``_hn``
        (holdings), and per sums column ``_hz`` (non-zero holdings), ``_hsa`` (Σ|holding
        sum|), ``_ht`` (the top-k list of holding sums) and with weights ``_hswa``
        (Σ|holding weighted sum|)."""
        spec, h = self.spec, quote_ident(self.holding or "")
        t = self.source
        nulls = self.eng.rows(f"SELECT count(*) FROM {t} WHERE {h} IS NULL")[0][0]
        if nulls:
            raise InputError(
                f"holding column {self.holding!r} of table {self.table!r} is missing (NULL) in {nulls} "
                "record(s); give every record its contributor group (a record that is its own group "
                "can take its own id)"
            )
        raw, params = self._raw_codes()
        sums, vals = [], []
        wx = f"CAST({quote_ident(spec.weight)} AS DOUBLE)" if spec.weight is not None else "1.0"
        for k, col in enumerate(spec.sums):
            x = f"CAST(coalesce({quote_ident(col)}, 0) AS DOUBLE)" if spec.null_sums == "zero" \
                else f"CAST({quote_ident(col)} AS DOUBLE)"
            sums.append(f"sum(TRY_CAST({x} AS DECIMAL(38, 8))) AS _hx{k}")
            vals.append(f"_hx{k}")
            if weights is not None:
                sums.append(f"sum(TRY_CAST({x} * {wx} AS DECIMAL(38, 8))) AS _hwx{k}")
                vals.append(f"_hwx{k}")
        rows = (f"SELECT {', '.join(f'CAST(_r{j} AS VARCHAR) AS _d{j}' for j in range(self.nd))}, _h, "
                f"{', '.join(vals)} FROM (SELECT {', '.join(raw)}, CAST({h} AS VARCHAR) AS _h, {', '.join(sums)} "
                f"FROM {t} GROUP BY ALL)")
        ids = ", ".join(f"c{j}.ord AS _o{j}" for j in range(self.nd))
        joins = " ".join(f"JOIN {c} c{j} ON i._d{j} = c{j}.code" for j, c in enumerate(self.codes))
        inner = self._create("hinner", f"SELECT {ids}, i._h, {', '.join('i.' + v for v in vals)} FROM ({rows}) i {joins}",
                             params)
        ctes, last, rparams = self._rollup_ctes(inner, vals, keys=["_h"])
        aggs = ["count(*) AS _hn"]
        for k in range(len(spec.sums)):
            x = f"CAST(_hx{k} AS DOUBLE)"
            aggs += [
                f"count(*) FILTER (WHERE {x} <> 0) AS _hz{k}",
                f"CAST(sum(abs(_hx{k})) AS DOUBLE) AS _hsa{k}",  # exact: the same in any order
                f"max({{'a': abs({x}), 'w': 1.0, 'x': {x}}}, {int(self.top_k or 1)}) AS _ht{k}",
            ]
            if weights is not None:
                aggs.append(f"CAST(sum(abs(_hwx{k})) AS DOUBLE) AS _hswa{k}")
        group = ", ".join(f"_o{j}" for j in range(self.nd))
        return self._create("hold", f"{ctes}SELECT {group}, {', '.join(aggs)} FROM {last} GROUP BY {group}", rparams)

    def _raw_codes(self) -> tuple[list[str], list[Any]]:
        """The dimension columns as the scan reads them (``_r<k>``), with their parameters."""
        spec = self.spec
        if spec.null_code is not None:
            raw = [f"coalesce(CAST({self._code_expr(c)} AS VARCHAR), ?) AS _r{k}" for k, c in enumerate(spec.columns)]
            return raw, [spec.null_code] * self.nd
        return [f"{self._code_expr(c)} AS _r{k}" for k, c in enumerate(spec.columns)], []

    def _check_nonnegative(self, base: str) -> None:
        """SpecError when a sums column has negative values (dominance and p% need x >= 0)."""
        for k, col in enumerate(self.spec.sums):
            smallest = f"_mn{k}" if self.spec.weight is not None else f"_tn{k}[1]"
            low = self.eng.rows(f"SELECT min({smallest}) FROM {base}")[0][0]
            if low is not None and low < 0:
                n = self.eng.rows(
                    f"SELECT count(*) FROM {self.source} WHERE {quote_ident(col)} < 0"
                )[0][0]
                raise InputError(
                    f"sums column {col!r} of table {self.table!r} has negative values in {n} record(s); "
                    "the dominance and p% rules are defined for values of 0 or more (use min_frequency "
                    "alone, or protect a non-negative variable)"
                )

    def _register_frame(self, kind: str, frame: pl.DataFrame) -> str:
        reg = _tmp(kind + "_src")
        self.eng.register(reg, frame.to_arrow())
        try:
            return self._create(kind, f"SELECT * FROM {reg}")
        finally:
            self.eng.unregister(reg)

    def perturb_inner(self, ptable: "PTable", *, original: bool) -> pl.DataFrame | None:
        """Inner cells perturbed through the p-table by their own cell keys, margins as sums.

        Additive by construction (every published cell is a sum of perturbed inner cells), as
        for Barnardisation and small cell adjustment; consistent across tables only for
        cells at the finest level. Weighted inner counts move with the inner mean weight.
        """
        pt = self._ptable(ptable)
        imin = int(ptable.frame["i"].min())  # type: ignore[arg-type]
        wp = ", CASE WHEN i._n = 0 THEN 0.0 ELSE _np * CAST(i._w AS DOUBLE) / i._n END AS _wp" if self.spec.weight else ""
        src = self._create(
            "pinner",
            f"SELECT *{wp} FROM (SELECT i.*, i._n + coalesce(p.protab_v, 0) AS _np FROM {self.ids} i "
            f"LEFT JOIN {pt} p ON p.protab_i = protab_row_class(i._n, ?, ?, ?) "
            f"AND p.protab_b = i._k // ? AND i._k BETWEEN p.protab_klo AND p.protab_khi) i",
            [imin, int(ptable.imax), int(ptable.period), self._bucket],
        )
        values = ["_n", "_np"] + (["_w", "_wp"] if self.spec.weight else [])
        cells = self._rollup(src, values)
        cols, joins, order = self._decode()
        if original:
            cols += self._value_selects([v for v in values if v in ("_n", "_w")])
        cols += [f"c.{v}" for v in values if v in ("_np", "_wp")]
        return self._emit("", cols, f"FROM {cells} c {joins} ORDER BY {order}")

    #: Key buckets per row class of the p-table lookup (the join matches one or two entries).
    BUCKETS = 1024

    @property
    def _bucket(self) -> int:
        """The width of a key bucket: keys k fall in bucket k // width."""
        return max(1, -(-self.modulus // self.BUCKETS))

    def _ptable(self, ptable: "PTable") -> str:
        """The p-table's integer key ranges (protab_i, protab_v, protab_klo, protab_khi), one row
        per key bucket (``protab_b``) a range touches, so that a hash join on row class and
        bucket finds a cell's entry among one or two instead of every entry of its class."""
        reg = _tmp("ks")
        self.eng.register(reg, keyspace_arrow(ptable.keyspace(self.modulus)))
        try:
            return self._create(
                "pt",
                f"SELECT i AS protab_i, v AS protab_v, klo AS protab_klo, khi AS protab_khi, "
                f"unnest(range(klo // ?, khi // ? + 1)) AS protab_b FROM {reg}",
                [self._bucket] * 2,
            )
        finally:
            self.eng.unregister(reg)


def keyspace_arrow(ks: pl.DataFrame) -> pa.Table:
    """The integer lookup relation (i, v, klo, khi) of a p-table as Arrow, int64."""
    return ks.select(
        pl.col("i").cast(pl.Int64), pl.col("v").cast(pl.Int64),
        pl.col("klo").cast(pl.Int64), pl.col("khi").cast(pl.Int64),
    ).to_arrow()
