"""The checks of a table request, read from the inner cells of its one scan (the flags and
bounds that ride along, :meth:`Scan._scan_aggregates`, and in magnitude tables the heads of
the top lists of :meth:`Scan._magnitude_aggregates`): codes, weights, sums and frequencies
the method cannot take, and the size of the request (``max_cells``). A second look at the
microdata is made only on the error path, to name the records at fault."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from protab.errors import InputError, NoRecordsError, SpecError, show_values
from protab.rollup.state import RunState
from protab.sqltools import FLOAT_TYPES, quote_ident


class Checks(RunState):
    """Part of :class:`TableRun`: refuse, with a clear error, what the tables cannot hold."""

    #: Weights and sums are summed exactly as DECIMAL(38, 8) (|x| < 1e30); a column is
    #: accepted when the sum of its absolute values over the table is below this bound, so
    #: that no cell and no margin can overflow.
    SUM_LIMIT = 1e29

    def _check_inner(self) -> None:
        """NULL (and NaN) codes, codes missing from hierarchies, codes equal to a margin code,
        NULL, NaN, infinite or negative weights, NaN or infinite sums, sums too large to add
        up exactly, negative frequencies; then the size of the request (``max_cells``)."""
        per_dim, row = self._inner_summary()
        if self._checks:
            self._check_values(row)
        self._check_sums()
        if not self._n_inner:
            cond = " that pass the where conditions" if self.spec.where else ""
            raise NoRecordsError(f"table {self.table!r} has no records{cond}, so there is no table to publish")
        n_codes = self._check_codes(per_dim)
        if self.max_cells is not None:
            self._check_size(n_codes)

    def _inner_summary(self) -> tuple[list[tuple[Any, ...]], list[Any]]:
        """One query over the inner cells: their number (``self._n_inner``); per dimension
        the number of its codes (flat; a hierarchy's codes are read by :meth:`_check_codes`,
        as Arrow, to check them against it), how many records and cells have none, and (flat)
        whether the margin code occurs; then the checks of the values, returned as a row. Codes
        of flat dimensions stay in the database: an identifier column has millions."""
        spec = self.spec
        items, params = ["count(*)"], list[Any]()
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
        for i, _, _ in self._value_sources():
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
        return per_dim, row

    def _check_values(self, row: list[Any]) -> None:
        """InputError for NaN or infinite weights and sums, missing or negative weights,
        sums too large to add up exactly, negative frequencies (``row``: the value checks of
        :meth:`_inner_summary`)."""
        nulls = row.pop(0) if "_chk_w" in self._checks else 0
        negative_f = row.pop(0) if "_chk_f" in self._checks else 0
        bound = 0.0
        for internal, col, what in self._value_sources():
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
                f"frequency column {self.spec.freq!r} of table {self.table!r} is negative in "
                f"{negative_f} row(s); frequencies must be counts (0 or more)"
            )

    def _check_codes(self, per_dim: list[tuple[Any, ...]]) -> list[int]:
        """The number of codes found per dimension (``per_dim``: of :meth:`_inner_summary`);
        InputError for missing codes, HierarchyError for codes a hierarchy lacks, SpecError
        for a flat dimension's code equal to its margin's name."""
        n_codes: list[int] = []
        found = self._hierarchy_codes()
        for k, (d, (n_distinct, nulls, null_cells, codes)) in enumerate(zip(self.spec.dimensions, per_dim)):
            if null_cells:  # only without null_code
                nan = " or NaN" if self.types.get(d.column) in FLOAT_TYPES else ""
                raise InputError(
                    f"column {d.column!r} of table {self.table!r} is missing (NULL{nan}) in {nulls} "
                    "record(s); remove them, or publish them as a category with "
                    "TableSpec(..., null_code='Unknown')"
                )
            if d.hierarchy is not None:
                codes = found.filter(pl.col("k") == k)["code"]
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
        return n_codes

    def _hierarchy_codes(self) -> pl.DataFrame:
        """(k, code): the distinct codes of every dimension k with a hierarchy, in one query."""
        parts = [f"SELECT DISTINCT {k} AS k, _d{k} AS code FROM {self.inner} WHERE _d{k} IS NOT NULL"
                 for k, d in enumerate(self.spec.dimensions) if d.hierarchy is not None]
        if not parts:
            return pl.DataFrame({"k": [], "code": []}, schema={"k": pl.Int32, "code": pl.String})
        return self.arrow(" UNION ALL ".join(parts))

    def _too_large(self) -> None:
        """InputError for the first weight/sums column whose |values| add up to SUM_LIMIT or
        more over the table (an exact second look at the microdata, made only when the
        cheap bound of the scan does not rule it out)."""
        sources = self._value_sources()
        if not sources or self.partials is not None:  # key sums: their whole table was checked when made
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

    def _bad_values(self, column: str, where: str) -> tuple[int | str, str]:
        """How many records of a microdata column are bad, and the first few distinct bad
        values (error path only)."""
        if self.partials is not None:  # key sums keep no record's value: the records' table has them
            return "some", "the key sums keep no record's value: look in the records' table"
        q = quote_ident(column)
        cond = where.format(q=q)
        t = self.source
        n = self.eng.rows(f"SELECT count(*) FROM {t} WHERE {cond}")[0][0]
        rows = self.eng.rows(f"SELECT DISTINCT {q} FROM {t} WHERE {cond} ORDER BY 1 LIMIT 5")
        return int(n), show_values([r[0] for r in rows])

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
                    "say what a missing value means: null_sums 'zero' (a contributor with value 0) "
                    "or 'omit' (not a contributor, left out of the sum and of a mean's count) — "
                    "TableSpec(null_sums=...) in Python, null_sums = \"zero\" in a request's [[tables]] "
                    "or a served dataset"
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

    def _check_nonnegative(self, base: str) -> None:
        """InputError when a sums column has negative values (dominance and p% need x >= 0)."""
        for k, col in enumerate(self.spec.sums):
            smallest = f"_mn{k}" if self.spec.weight is not None else f"_tn{k}[1]"
            low = self.eng.rows(f"SELECT min({smallest}) FROM {base}")[0][0]
            if low is not None and low < 0:
                n = self.eng.rows(
                    f"SELECT count(*) FROM {self.source} WHERE {quote_ident(col)} < 0"
                )[0][0] if self.partials is None else "some"
                raise InputError(
                    f"sums column {col!r} of table {self.table!r} has negative values in {n} record(s); "
                    "the dominance and p% rules are defined for values of 0 or more (use min_frequency "
                    "alone, or protect a non-negative variable)"
                )
