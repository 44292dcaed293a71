"""Step 1 of a table request: one scan of the microdata to *inner cells* (docs/design.md,
idea 1) — count, weight sum, sums as exact decimals, record-key sum modulo the key modulus,
the top-k columns of magnitude tables, and the cheap aggregates the checks read — and the
zero cells of ``extend0`` (SSBtools' Extend0)."""

from __future__ import annotations

from typing import Any

import polars as pl
import pyarrow as pa

from protab.errors import InputError
from protab.rollup.cells import temp_name, wide_key, zero_sql
from protab.rollup.partials import contribution, merged_magnitudes, merged_values
from protab.rollup.state import RunState
from protab.sqltools import FLOAT_TYPES, code_sql, quote_ident


class Scan(RunState):
    """Part of :class:`TableRun`: the scan to inner cells (``self.inner``) from the table or
    its where-filtered view (``self.source``); the checks of :class:`Checks` read them."""

    def _filter(self) -> None:
        """``spec.where`` as a temporary view of the table, made by the engine
        (:meth:`protab.engines.Engine.create_where_view`): protab pastes no value of the
        user's into SQL."""
        if not self.spec.where:
            return
        name = temp_name("where")
        self.eng.create_where_view(name, quote_ident(self.table), self.spec.where)
        self._views.append(name)
        self.source = name

    def _code_expr(self, column: str) -> str:
        """A dimension column as read by the scan (see :func:`code_sql`)."""
        return code_sql(column, self.types.get(column, ""))

    def _value_sources(self) -> list[tuple[str, str, str]]:
        """(internal column, microdata column, what) of the weight and the sums."""
        spec = self.spec
        out = [("_w", spec.weight, "weight column")] if spec.weight is not None else []
        return out + [(f"_s{k}", c, "sums column") for k, c in enumerate(spec.sums)]

    def _raw_codes(self) -> tuple[list[str], list[Any]]:
        """The dimension columns as the scan reads them (``_r<k>``), with their parameters."""
        spec = self.spec
        if spec.null_code is not None:
            raw = [f"coalesce(CAST({self._code_expr(c)} AS VARCHAR), ?) AS _r{k}" for k, c in enumerate(spec.columns)]
            return raw, [spec.null_code] * self.nd
        return [f"{self._code_expr(c)} AS _r{k}" for k, c in enumerate(spec.columns)], []

    def _wide(self, key: str) -> str:
        """A key column as summed (see :func:`protab.rollup.cells.wide_key`)."""
        return wide_key(key, self.modulus)

    def _scan(self) -> str:
        """One GROUP BY of the microdata to inner cells; codes become text after grouping
        (cheaper than casting every record), except that ``null_code`` replaces NULL before
        grouping (a column that holds the code and NULL as well is refused by
        :meth:`_check_inner`, from flags of the inner cells).

        Weights and sums are summed as DECIMAL(38, 8) (exact, the same for any number of
        threads; on Spark as whole numbers of 10^-8 made decimal once per cell,
        :meth:`Engine.decimal8_sum`); values that cannot be (NaN, ±inf, |x| ≥ 1e30) are left
        out by TRY_CAST.
        Cheap per-cell aggregates (min, max, count) ride along so that :meth:`_check_inner`
        can tell whether any value is missing, not finite, negative or too large to sum; in
        magnitude tables the min and max of a sums column are read off its top lists
        (:meth:`_ends_of_lists`)."""
        raw, params = self._raw_codes()  # parameters bind in text order
        self._totals: dict[str, str] = {}  # value column -> the SQL that completes its sum
        aggs, checks = self._scan_aggregates(params)
        if self.top_k is not None:
            more, more_params, more_checks = self._magnitude_aggregates()
            aggs += more
            params += more_params
            checks += more_checks
        self._checks = [c.rsplit(" AS ", 1)[-1] for c in checks]  # the check columns' names
        outer = [f"CAST(_r{k} AS VARCHAR) AS _d{k}" for k in range(self.nd)]
        try:
            return self._create(
                "inner",
                f"SELECT {', '.join(outer + self._finished_values() + checks)} FROM ("
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

    def _finished_values(self) -> list[str]:
        """The value columns of the inner cells as the scan's outer SELECT gives them: an exact
        sum that the engine completes after the GROUP BY (:meth:`Engine.decimal8_sum`) is."""
        return [f"{self._totals[v].replace('{}', v)} AS {v}" if v in self._totals else v for v in self.values]

    def _scan_aggregates(self, params: list[Any]) -> tuple[list[str], list[str]]:
        """(aggregates, check columns) of the scan: the count, the value sums, the key sum
        (its parameter appended to ``params``) and the checks that ride along in the same
        scan (read by :meth:`_check_inner`)."""
        spec = self.spec
        aggs = [
            "count(*) AS _n" if spec.freq is None
            else f"CAST(coalesce(sum({quote_ident(spec.freq)}), 0) AS BIGINT) AS _n"
        ]
        checks: list[str] = []
        if self.partials is not None:  # a key-sum table: its parts of the sums, merged
            more, checks = merged_values(self.partials, tuple(spec.sums), quote_ident(str(spec.freq)))
            aggs += more
        for internal, col, _ in self._value_sources() if self.partials is None else ():
            q = quote_ident(col)
            total, finish = self.eng.decimal8_sum(q, self.types.get(col, "") in FLOAT_TYPES)
            if finish != "{}":
                self._totals[internal] = finish
            aggs += [f"{total} AS {internal}", f"count({q}) AS _chk_n{internal}"]
            ends = self._ends_of_lists(internal)
            if ends is None:
                aggs += [f"min({q}) AS _chk_lo{internal}", f"max({q}) AS _chk_hi{internal}"]
                checks += [f"_chk_lo{internal}", f"_chk_hi{internal}"]
            else:
                checks += [f"{ends[0]} AS _chk_lo{internal}", f"{ends[1]} AS _chk_hi{internal}"]
            checks.append(f"_chk_n{internal}")
        if self.key is not None:
            aggs.append(f"CAST(sum({self._wide(quote_ident(self.key[0]))}) % ? AS BIGINT) AS _k")
            params.append(self.modulus)
        if spec.weight is not None:
            aggs.append(f"count(*) - count({quote_ident(spec.weight)}) AS _chk_w")
            checks.append("_chk_w")
        if spec.freq is not None:
            aggs.append(f"count(*) FILTER (WHERE {quote_ident(spec.freq)} < 0) AS _chk_f")
            checks.append("_chk_f")
        if spec.sums and spec.null_sums == "error" and self.partials is None:
            for k, col in enumerate(spec.sums):
                aggs.append(f"count(*) - count({quote_ident(col)}) AS _chk_null{k}")
                checks.append(f"_chk_null{k}")
        if spec.null_code is not None:
            aggs += [f"{f}(CASE WHEN {self._code_expr(c)} IS NULL THEN 1 ELSE 0 END) AS _chk_{m}{k}"
                     for k, c in enumerate(spec.columns) for f, m in (("max", "nx"), ("min", "nn"))]
            checks += [f"_chk_{m}{k}" for k in range(self.nd) for m in ("nx", "nn")]
        return aggs, checks

    def _ends_of_lists(self, internal: str) -> tuple[str, str] | None:
        """(smallest, largest) contribution of a sums column as the magnitude columns of the
        same scan already hold them — the heads of the lists of smallest and largest values,
        or min and max with a weight — so that the checks need no min and max of their own
        (fewer aggregates per record; NaN and ±inf reach the heads as they reach min and
        max). With ``null_sums='zero'`` a missing value contributes 0, which can only add a 0
        to the range: the checks (not finite, the bound on Σ|x|) read the same. None for the
        weight and for tables without top lists."""
        if self.top_k is None or not internal.startswith("_s"):
            return None
        k = internal[2:]
        return (f"_mn{k}", f"_mx{k}") if self.spec.weight is not None else (f"_tn{k}[1]", f"_tp{k}[1]")

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
        spec, aggs, params, checks = self.spec, list[str](), list[Any](), list[str]()
        w = f"CAST({quote_ident(spec.weight)} AS DOUBLE)" if spec.weight is not None else "1.0"
        nonneg: set[int] = set()
        if spec.weight is None and spec.sums:
            low = [quote_ident(c) if self.partials is None else self.partials.part(c, "lo") for c in spec.sums]
            lows = self.eng.rows("SELECT " + ", ".join(f"min(CAST({c} AS DOUBLE)) >= 0" for c in low)
                                 + f" FROM {self.source}")[0]
            nonneg = {k for k, low in enumerate(lows) if low is None or low}
        if self.partials is not None:
            aggs, params = merged_magnitudes(self.eng, self.partials, tuple(spec.sums), int(self.top_k or 1), nonneg,
                                             self.key is not None, self.modulus)
            return aggs, params, checks
        r = f"CAST({quote_ident(self.key[0])} AS BIGINT)" if self.key is not None else "0"  # non-zero key sum
        for k, col in enumerate(spec.sums):
            x, present = contribution(col, spec.null_sums)
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
                least = f"min({x}) FILTER (WHERE {present})"
                smallest = (f"CASE WHEN {least} IS NULL THEN NULL ELSE [{least}] END" if k in nonneg
                            else f"min({x}, {n}) FILTER (WHERE {present})")
                aggs += [f"max({x}, {n}) FILTER (WHERE {present}) AS _tp{k}", f"{smallest} AS _tn{k}"]
            if self.key is not None:
                aggs.append(f"CAST(coalesce(sum({r}) FILTER (WHERE {x} <> 0), 0) % ? AS BIGINT) AS _kz{k}")
                params.append(self.modulus)
            if spec.null_sums == "omit":
                more, more_params = self._holders(k, col)
                aggs += more
                params += more_params
        return aggs, params, checks

    def _holders(self, k: int, col: str) -> tuple[list[str], list[Any]]:
        """Aggregates of the records holding a value of sums column ``k`` (``null_sums='omit'``):
        their number ``_nv``, weight sum ``_wv`` (exact, as the weight's) and cell key ``_kv``
        (their key sum modulo the modulus): the perturbed mean divides by their perturbed count."""
        q = quote_ident(col)
        aggs: list[str] = [f"count({q}) AS _nv{k}"]
        params: list[Any] = []
        weight = self.spec.weight
        if weight is not None:
            exact = self.eng.decimal8(quote_ident(weight), self.types.get(weight, "") in FLOAT_TYPES)
            aggs.append(f"sum(CASE WHEN {q} IS NULL THEN NULL ELSE {exact} END) AS _wv{k}")
        if self.key is not None:
            aggs.append(f"CAST(coalesce(sum({self._wide(quote_ident(self.key[0]))}) FILTER (WHERE {q} IS NOT NULL), 0)"
                        f" % ? AS BIGINT) AS _kv{k}")
            params.append(self.modulus)
        return aggs, params

    # -- the zero cells of extend0 ------------------------------------------------------------
    def _extend0(self) -> str:
        """Inner cells plus a zero cell for every missing combination of occurring codes;
        with ``extend0="all"`` the leaves of each hierarchy (or code list) count as occurring
        (GaussSuppression's extend0 = "all")."""
        listed = {k: temp_name("leaves") for k, d in enumerate(self.spec.dimensions)
                  if self.extend0 == "all" and d.hierarchy is not None}
        for k, reg in listed.items():
            h = self.spec.dimensions[k].hierarchy
            assert h is not None  # listed: the dimensions with a hierarchy
            self.eng.register(reg, pa.table({"_d": pa.array(h.leaves, pa.string())}))
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
        reg = temp_name("structural")
        self.eng.register(reg, frame)
        match = " AND ".join(f"z._d{k} = g._d{k}" for k in range(self.nd))
        try:
            return self._create(
                "inner0",
                f"{select} WHERE i._n IS NOT NULL OR NOT EXISTS (SELECT 1 FROM {reg} z WHERE {match})",
            )
        finally:
            self.eng.unregister(reg)
