"""Step 2b of a table request: the roll-up of inner cells to published cells (docs/design.md,
idea 2). One dimension at a time, integers only: level by level through the parents when the
dimension's leaves share one level (flat dimensions, grids), else through the bridge,
dropping rows that no published crossing can hold as soon as they appear."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from protab.rollup.cells import published_filter, value_kind, zero_sql
from protab.rollup.state import RunState


class Levels(RunState):
    """Part of :class:`TableRun`: the roll-up as common table expressions, and the published
    cells (:attr:`cells`) it gives."""

    @property
    def cells(self) -> str:
        """The published cells (rolled up on first use): _o*, _l*, and the values."""
        if self._cells is None:
            self._cells = self._rollup()
        return self._cells

    def _rollup_ctes(
        self, source: str | None = None, values: list[str] | None = None, keys: Sequence[str] = ()
    ) -> tuple[str, str, list[Any]]:
        """The roll-up as common table expressions: (WITH clause, last name, parameters).

        Rolls inner cells (``source``, default the numbered inner cells) up one dimension at
        a time, summing ``values``; ``keys`` are more columns to group by (a holding).

        Step k keeps every row at its leaf code of dimension k as it is (the rows are unique,
        so nothing to add up) and adds the rows of that leaf's proper ancestors, aggregated
        through the bridge (:meth:`_bridge_step`) or level by level (:meth:`_levelwise`);
        rows that no published crossing can hold are dropped as soon as they appear. Counts
        and key sums are integers, so the order of summation does not matter.

        Through the bridge of a hierarchy that is not a tree every value is multiplied by
        the leaf's coefficient (e.g. −1 under EU = Europe − nonEU): counts, weights and sums
        become signed sums, and the cell key the signed sum of record keys taken modulo the
        key modulus as a residue in [0, modulus) (``((x % m) + m) % m``), so a cell gets the
        same key whichever hierarchy, path or table it comes from.
        """
        nd = self.nd
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
            keep, up = self._step_columns(k)
            keep += extra
            up += extra
            levels = {j: f"r._l{j}" for j in range(k)}
            lists = [v for v in values if value_kind(v) in ("list", "list_asc")]
            depth = self.depths[k] if not self.coef[k] else None
            if depth is None:
                pieces = self._bridge_step(k, pieces, keep, up, levels, values, lists, params, steps)
                continue
            pieces = self._levelwise(k, pieces, keep, levels, values, lists, params, depth, steps)
            if not self.eng.union_pieces:
                pieces = [f"SELECT * FROM {self._union(pieces, f'_step{k}', steps, inline=False)}"]
        last = self._union(pieces, f"_step{nd - 1}", steps, inline=False)
        return f"WITH {', '.join(steps)} ", last, params

    def _step_columns(self, k: int) -> tuple[list[str], list[str]]:
        """Select items of roll-up step ``k``: of the rows kept at their leaf code of dimension
        ``k`` (its level from the codes table ``c``), and of the rows of its ancestors (code
        and level from the bridge ``b``); dimensions before ``k`` carry their levels."""
        keep, up = [], []
        for j in range(self.nd):
            if j < k:
                keep += [f"r._o{j}", f"r._l{j}"]
                up += [f"r._o{j}", f"r._l{j}"]
            elif j == k:
                keep += [f"r._o{j}", f"c.level AS _l{j}"]
                up += [f"b.anc AS _o{j}", f"b.level AS _l{j}"]
            else:
                keep.append(f"r._o{j}")
                up.append(f"r._o{j}")
        return keep, up

    def _bridge_step(
        self, k: int, pieces: list[str], keep: list[str], up: list[str], levels: dict[int, str],
        values: list[str], lists: list[str], params: list[Any], steps: list[str],
    ) -> list[str]:
        """Roll-up step ``k`` through the bridge: the CTE ``_step<k>`` (appended to ``steps``)
        of the rows so far at their leaf code and of their ancestors' sums; returned as the
        one piece of the rows after this step."""
        prev = self._union(pieces, f"_in{k}", steps)
        aggs = self._aggregates(values, params, " * b.coef" if self.coef[k] else "")
        keep_where = published_filter(self.spec, {**levels, k: "c.level"})
        up_where = published_filter(self.spec, {**levels, k: "b.level"})
        source = (f"FROM {prev} r JOIN {self.bridges[k]} b ON r._o{k} = b.leaf AND b.anc <> b.leaf "
                  f"WHERE {up_where}")
        if not lists:
            upper = f"SELECT {', '.join(up + aggs)} {source} GROUP BY ALL"
        else:
            upper = self._merged_lists(f"_b{k}", up, aggs, values, lists, source, steps)
        steps.append(
            f"_step{k} AS (SELECT {', '.join(keep + ['r.' + v for v in values])} FROM {prev} r "
            f"JOIN {self.codes[k]} c ON r._o{k} = c.ord WHERE {keep_where} "
            f"UNION ALL {upper})"
        )
        return [f"SELECT * FROM _step{k}"]

    def _merged_lists(self, name: str, group: list[str], aggs: list[str], values: list[str], lists: list[str],
                      rows: str, ctes: list[str]) -> str:
        """A SELECT of the rows grouped by ``group`` over ``rows`` (a FROM … [WHERE …] clause)
        with their top-k lists merged: the k largest of a union are among its parts' k largest,
        so the parts' lists are unnested side by side and the k largest kept (max(x, k)) —
        several times faster than list() + flatten + sort — and joined back to the other
        aggregates (CTEs ``<name>_s``, ``<name>_l`` appended to ``ctes``)."""
        names = [e.rsplit(" AS ", 1)[-1].split(".")[-1] for e in group]
        n = int(self.top_k or 1)
        unnest = ", ".join(f"unnest(r.{v}) AS _e_{v}" for v in lists)
        merged = ", ".join(f"{'min' if value_kind(v) == 'list_asc' else 'max'}(_e_{v}, {n}) AS {v}" for v in lists)
        ctes.append(f"{name}_s AS (SELECT {', '.join(group + aggs)} {rows} GROUP BY ALL)")
        ctes.append(f"{name}_l AS (SELECT {', '.join(names)}, {merged} FROM (SELECT {', '.join(group)}, {unnest} "
                    f"{rows}) GROUP BY ALL)")
        cols = [f"u.{c}" for c in names] + [f"l.{v}" if v in lists else f"u.{v}" for v in values]
        return f"SELECT {', '.join(cols)} FROM {name}_s u LEFT JOIN {name}_l l USING ({', '.join(names)})"

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
        lists: list[str], params: list[Any], depth: int, ctes: list[str],
    ) -> list[str]:
        """Roll-up step ``k`` for a dimension whose leaves all sit at level ``depth`` of a tree:
        the rows of each level are summed from the rows one level below (through the parent
        table, the last step to the root without a join), so every level is one GROUP BY of
        fewer rows instead of a join of the leaves with all their ancestors. Rows that no
        published crossing holds at their level are left out of the union (they may still
        feed a coarser level).

        ``pieces`` are SELECTs whose union are the rows so far; returned are the pieces of
        the rows after this step (each old piece at its leaf, then one per level above), the
        level sums appended to ``ctes``. Top-k ``lists`` of a level are merged from the lists
        one level below (:meth:`_merged_lists`)."""
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
            # the root's code number is 1 (codes are numbered by level first)
            code, rows = ((f"1 AS _o{k}", f"FROM {src} r") if level == 0 else
                          (f"p.parent AS _o{k}", f"FROM {src} r JOIN {self.codes[k]} p ON r._o{k} = p.ord"))
            if lists:  # its lists merged from the lists one level below
                ctes.append(f"{name} AS ({self._merged_lists(name, others + [code], aggs, values, lists, rows, ctes)})")
            else:
                ctes.append(f"{name} AS (SELECT {', '.join(others + [code] + aggs)} {rows} GROUP BY ALL)")
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
        # the scan counted the inner cells (numbering them keeps every one); zero-extended ones are counted
        inner = self._n_inner if not self.extend0 else self._count(f"SELECT 1 FROM {self._ids or self.inner}")
        return inner == int(np.prod(self._leaf_counts))

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
