"""Step 3 of a table request: perturbation as a join of cells with the p-table's integer key
ranges, on row class and key bucket (docs/design.md, idea 3); count tables then leave SQL as
one ordering number per cell (:meth:`Order._in_order`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from protab.rollup.cells import output_names
from protab.rollup.state import RunState

if TYPE_CHECKING:  # pragma: no cover
    from protab.magnitude import MagnitudeCKM, SensitivityRules
    from protab.ptable import PTable


def _keyspace_int64(ks: pl.DataFrame) -> pl.DataFrame:
    """The integer lookup relation (i, v, klo, khi) of a p-table, int64."""
    return ks.select(pl.col(c).cast(pl.Int64) for c in ("i", "v", "klo", "khi"))


def keyspace_arrow(ks: pl.DataFrame) -> pa.Table:
    """The integer lookup relation (i, v, klo, khi) of a p-table as Arrow, int64."""
    return _keyspace_int64(ks).to_arrow()


class Perturb(RunState):
    """Part of :class:`TableRun`: the cell key method for counts (published cells, or inner
    cells with margins as sums); magnitudes go on in :class:`MagnitudeCells`."""

    #: Key buckets per row class of the p-table lookup (the join matches one or two entries).
    BUCKETS = 1024

    def perturb(
        self,
        ptable: PTable,
        *,
        original: bool,
        threshold: int | None,
        magnitude: MagnitudeCKM | None = None,
        rules: SensitivityRules | None = None,
    ) -> pl.DataFrame | None:
        """Cells joined to the p-table's integer key ranges: n_pert (and w_pert); with
        ``magnitude`` every sums column perturbed too (``<s>_pert``, ``<s>_mean_pert``), with
        ``rules`` its sensitivity (``<s>_sensitive``, ``<s>_rule``).

        ``threshold``: an integer; cells with ``n_pert < threshold`` are published as null
        (the Session passes ``ceil(t)`` of a real threshold t, the same rule exactly), and so
        are their weighted counts, sums and means."""
        pt = self._ptable(ptable)
        ctes, cells, params = self._cells_source()
        items = self._perturbed_items(threshold, params)
        counts_only = magnitude is None and rules is None
        codes = self._cell_number(items, params) if counts_only and self.sink is None else None
        select = f"SELECT c.*, {', '.join(items)} {self._ptable_join(ptable, pt, cells, params)}"
        if magnitude is not None:
            select = self._with_holders(select, ptable, pt, params)
        values = self._count_values(original)
        if codes is not None:
            frame = self._in_order(self.arrow(
                f"{ctes}SELECT {', '.join(['c._cell'] + values)} FROM ({select}) c", params), codes)
            return frame.rename(output_names(self.spec, frame.columns))
        if counts_only and self.sink is None:
            # code numbers out, sorted and turned into codes in polars (no joins, no SQL sort)
            nums = [f"c._o{k}" for k in range(self.nd)] + [f"c._l{k}" for k in range(self.nd)]
            frame = self._decode_frame(self.arrow(f"{ctes}SELECT {', '.join(nums + values)} FROM ({select}) c",
                                                  params))
            return frame.rename(output_names(self.spec, frame.columns))
        cols, joins, order = self._decode()
        cols += values
        if counts_only:  # written by the engine: decoded and ordered in SQL
            return self._emit(ctes, cols, f"FROM ({select}) c {joins} ORDER BY {order}", params)
        base = self._create("pcells", f"{ctes}{select}", params)
        return self._perturb_magnitudes(base, cols, magnitude, rules, original=original)

    def _perturbed_items(self, threshold: int | None, params: list[Any]) -> list[str]:
        """Select items ``_np`` (and ``_wp``) of the perturbed counts of cells ``c`` joined to
        the p-table ``p``, blanked below ``threshold`` (its parameters appended to ``params``).

        A negative count (a signed cell of a non-tree hierarchy, e.g. −(Spain + Portugal)) is
        perturbed as its absolute value with the negated key: −S publishes exactly −(S's
        perturbed count), so neither form reveals the other's original."""
        pert = ("CASE WHEN c._n < 0 THEN -(abs(c._n) + coalesce(p.protab_v, 0)) "
                "ELSE c._n + coalesce(p.protab_v, 0) END")
        if threshold is not None:
            pert = f"CASE WHEN abs({pert}) < ? THEN NULL ELSE {pert} END"  # signed cells by size
            params.append(int(threshold))
        items = [f"{pert} AS _np"]
        if self.spec.weight is not None:
            # blanked with n_pert (a zero weight would tell that the blanked count is 0)
            blank = f"WHEN ({pert}) IS NULL THEN NULL " if threshold is not None else ""
            items.append(
                f"CASE {blank}WHEN c._n = 0 THEN 0.0 ELSE ({pert}) * CAST(c._w AS DOUBLE) / c._n END AS _wp"
            )
            if threshold is not None:
                params += [int(threshold)] * 2
        return items

    def _cell_number(self, items: list[str], params: list[Any]) -> list[pl.DataFrame] | None:
        """The codes tables (code, level in code-number order) when the cells' code numbers fit
        one BIGINT in mixed radix: then the item ``_cell``, that number, is appended to
        ``items`` (its parameters to ``params``) for :meth:`_in_order`; else None."""
        codes = [self._code_frame(t) for t in self.codes]
        sizes = [c.height + 1 for c in codes]
        if math.prod(sizes) >= 2**62:
            return None
        number = "CAST(c._o0 AS BIGINT)"
        for k in range(1, self.nd):
            number = f"({number} * ? + c._o{k})"
        items.append(f"{number} AS _cell")
        params += sizes[1:]
        return codes

    def _ptable_join(self, ptable: PTable, pt: str, cells: str, params: list[Any]) -> str:
        """FROM clause of ``cells`` (``c``) joined to the p-table's key ranges ``pt`` (``p``): the
        entry of the cell's row class whose key range holds the cell key, found by a hash join
        on (row class, bucket of the key) and checked against the range."""
        imin = int(ptable.frame["i"].min())  # type: ignore[arg-type]
        key = "(CASE WHEN c._n < 0 THEN (? - c._k) % ? ELSE c._k END)"
        params += [imin, int(ptable.imax), int(ptable.period), *[self.modulus] * 2, self._bucket, *[self.modulus] * 2]
        return (
            f"FROM {cells} c LEFT JOIN {pt} p "
            f"ON p.protab_i = protab_row_class(abs(c._n), ?, ?, ?) AND p.protab_b = {key} // ? "
            f"AND {key} BETWEEN p.protab_klo AND p.protab_khi"
        )

    def _with_holders(self, select: str, ptable: PTable, pt: str, params: list[Any]) -> str:
        """``select`` (of cells ``c`` with their perturbed counts) with, per sums column read with
        ``null_sums='omit'``, the perturbed count ``_npv<k>`` of the records holding a value
        (their count and cell key through the same p-table, as any count: the same records
        give the same value in every table). The mean of such a column divides by it."""
        if self.spec.null_sums != "omit" or self.key is None:
            return select
        imin = int(ptable.frame["i"].min())  # type: ignore[arg-type]
        items, joins = [], []
        for k in range(len(self.spec.sums)):
            items.append(f"c._nv{k} + coalesce(h{k}.protab_v, 0) AS _npv{k}")
            joins.append(f"LEFT JOIN {pt} h{k} ON h{k}.protab_i = protab_row_class(c._nv{k}, ?, ?, ?) "
                         f"AND h{k}.protab_b = c._kv{k} // ? AND c._kv{k} BETWEEN h{k}.protab_klo AND h{k}.protab_khi")
            params += [imin, int(ptable.imax), int(ptable.period), self._bucket]
        return f"SELECT c.*, {', '.join(items)} FROM ({select}) c {' '.join(joins)}"

    def _count_values(self, original: bool) -> list[str]:
        """Select items of the counts (and weighted counts) of perturbed cells ``c``."""
        values = []
        if original:
            values.append("c._n")
            if self.spec.weight is not None:
                values.append("CAST(c._w AS DOUBLE) AS _w")
        values.append("c._np")
        if self.spec.weight is not None:
            values.append("c._wp")
        return values

    def perturb_inner(self, ptable: PTable, *, original: bool) -> pl.DataFrame | None:
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

    @property
    def _bucket(self) -> int:
        """The width of a key bucket: keys k fall in bucket k // width."""
        return max(1, -(-self.modulus // self.BUCKETS))

    def _ptable(self, ptable: PTable) -> str:
        """The p-table's integer key ranges (protab_i, protab_v, protab_klo, protab_khi), one row
        per key bucket (``protab_b``) a range touches, so that a hash join on row class and
        bucket finds a cell's entry among one or two instead of every entry of its class."""
        ks = _keyspace_int64(ptable.keyspace(self.modulus))
        return self._kept(
            "pt",
            "SELECT i AS protab_i, v AS protab_v, klo AS protab_klo, khi AS protab_khi, "
            "unnest(range(klo // ?, khi // ? + 1)) AS protab_b FROM {src}",
            [self._bucket] * 2, ks,
        )
