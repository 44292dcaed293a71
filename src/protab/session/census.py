"""The Session's census tools: hierarchies read from the data (nested columns, INSPIRE grid
codes), targeted record swapping, and the p-table of the ``ckm()`` SQL function."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from protab.errors import InputError, show_values
from protab.session.state import SessionState
from protab.sqltools import code_sql, quote_ident

if TYPE_CHECKING:  # pragma: no cover
    from protab.hierarchy import Hierarchy
    from protab.ptable import PTable
    from protab.swapping import SwapSpec


class Census(SessionState):
    """Hierarchies from data, swapping, the installed p-table (a mixin of :class:`protab.Session`)."""

    def hierarchy_from_columns(self, table: str, columns: Sequence[str], *, root: str = "Total") -> "Hierarchy":
        """A hierarchy from nested columns of the data, coarsest first.

        ``["region", "municipality"]`` makes Total → region → municipality from the distinct
        (region, municipality) pairs; a municipality found in two regions is an error.
        """
        from protab.hierarchy.level_columns import from_level_columns

        columns = list(columns)
        if len(columns) < 1:
            raise InputError("hierarchy_from_columns: name at least one column")
        cols = self._require_columns(table, columns)
        t = quote_ident(table)
        codes = ", ".join(f"CAST({code_sql(c, cols[c])} AS VARCHAR) AS {quote_ident(c)}" for c in columns)
        rows = self._arrow(f"SELECT DISTINCT {codes} FROM {t}", [])  # one scan: each row's codes, NaN as NULL
        if any(rows[c].null_count() for c in columns):
            raise InputError(
                f"hierarchy_from_columns: columns {show_values(columns)} of table {table!r} have "
                "missing (NULL or NaN) codes; fill them in or drop those records"
            )
        return from_level_columns(rows, columns, root=root, source=f"hierarchy_from_columns: table {table!r}")

    def hierarchy_from_grid(
        self,
        table: str,
        column: str,
        levels: Sequence[str] = ("10km", "100km"),
        *,
        form: str = "short",
        root: str = "Total",
    ) -> "Hierarchy":
        """A grid hierarchy (Total > 100 km > 10 km > the column's squares) from the distinct
        INSPIRE codes of ``table.column`` (docs/grid.md); malformed codes are counted in SQL
        and reported with their counts, nothing built."""
        import protab.grid as grid

        self._require_columns(table, [column], "grid column")
        t, q = quote_ident(table), quote_ident(column)
        # one scan: the distinct codes with their records, then the code check on those alone
        found = self._arrow(
            f"SELECT code, n, coalesce({grid.valid_code_sql('code')}, false) AS ok "
            f"FROM (SELECT CAST({q} AS VARCHAR) AS code, count(*) AS n FROM {t} GROUP BY 1) ORDER BY code"
        )
        bad = found.filter(~pl.col("ok")).sort(["n", "code"], descending=[True, False], nulls_last=True)
        if bad.height:
            top = list(bad.select("code", "n").head(5).iter_rows())
            raise grid.malformed_codes_error(column, top, bad.height, int(bad["n"].sum()))
        return grid.grid_hierarchy(found["code"].alias(column), levels, form=form, root=root)

    def swap(
        self, table: str, spec: "SwapSpec", *, seed: str | int, out: str, log: str | None = None,
        replace: bool = False, temporary: bool = False,
    ) -> dict[str, Any]:
        """Targeted record swapping of whole households (docs/swapping.md; after sdcMicro's
        recordSwap): writes the swapped microdata to ``out`` and the swap log (internal) to
        ``log`` in one transaction, and returns the summary (households, risky, swapped,
        achieved swap rate, share of risky households swapped, per-level counts, households
        without a donor). ``out`` keeps the record keys of ``table``, so the swapped data feed
        the cell key method directly (TRS + CKM, the census combination). With
        ``temporary=True`` both are temporary tables of this session (what its tables read
        under those names) until :func:`protab.swapping.persist_swap` keeps them. On Spark
        both are (checkpointed) temporary views of the SparkSession, with the same records as
        DuckDB's swap of the same data, spec and seed."""
        from protab.swapping import swap as _swap

        self._require(table)
        try:
            key: tuple[str, int] | None = self.record_key(table)
        except InputError:
            key = None
        with self.engine.errors(table), self.engine.step("swapping households"):
            summary = _swap(self.engine, table, spec, seed=seed, out=out, log=log, replace=replace,
                            temporary=temporary)
        self._keys.pop(out, None)
        if key is not None and key[0] in self.columns(out):  # the swapped records keep their keys
            self.engine.tag_key_column(out, key[0], key[1])
        return summary

    def install_ptable(self, ptable: "PTable", *, table: str | None = None, modulus: int | None = None) -> None:
        """Install ``ptable`` as the p-table of the SQL macro ``ckm(count(*), sum(rkey))``.

        The key modulus comes from the record keys of ``table`` or is given as ``modulus``
        (2^bits, or 10^d for decimal keys). It replaces any p-table installed before.
        """
        if (table is None) == (modulus is None):
            raise InputError("install_ptable: give the keyed table or the key modulus (one of them)")
        if modulus is not None and (isinstance(modulus, bool) or not isinstance(modulus, numbers.Integral)):
            raise InputError(
                f"install_ptable: modulus must be a whole number (2^bits, or 10^d for decimal keys), "
                f"not {type(modulus).__name__}"
            )
        if table is not None:
            m = self.record_key(table)[1]
        else:
            assert modulus is not None  # checked above: one of them is given
            m = int(modulus)
        if m < 2:
            raise InputError("install_ptable: the key modulus must be at least 2")
        self.engine.install_ptable(ptable, m)
