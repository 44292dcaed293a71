"""Step 2a of a table request: codes become integers (docs/design.md, idea 2). Per dimension
a ``codes`` table numbers its codes in publication order (with each code's parent in a tree)
and a ``bridge(leaf, anc, level)`` relation holds every (leaf, ancestor) pair, the leaf
itself and the total included. Hierarchies' tables outlive the run (the Session's cache)."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from protab.rollup.cells import temp_name
from protab.rollup.state import RunState

#: a code's number for ordering codes (numbers by value, then text): only codes written as a
#: plain decimal number count as numbers, so that every engine orders alike (DuckDB also reads
#: '1_000' and 'nan' as numbers, Spark '1d' and '0x1p3')
NUMERIC_CODE = ("CASE WHEN regexp_matches(trim(ancestor), '^[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?$') "
                "THEN TRY_CAST(ancestor AS DOUBLE) END")


class Codes(RunState):
    """Part of :class:`TableRun`: the ``codes`` and ``bridge`` tables of its dimensions
    (``self.codes``, ``self.bridges``) and the inner cells with integer codes (:attr:`ids`)."""

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
                codes, bridge = self._hierarchy_tables(d.hierarchy, self.coef[k])
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

    def _code_frame(self, codes: str) -> pl.DataFrame:
        """(code, level) of a codes table in code-number order; of a hierarchy's codes table,
        which the session keeps, read once and kept beside it (``forget_hierarchies`` drops both)."""
        kept = codes in {v[0] for key, v in self.cache.items() if not isinstance(key, tuple)}
        if kept and ("frame", codes) in self.cache:
            found: pl.DataFrame = self.cache[("frame", codes)][0]
            return found
        frame = self.arrow(f"SELECT code, level FROM {codes} ORDER BY ord")
        if kept:
            self.cache[("frame", codes)] = (frame,)
        return frame

    def _hierarchy_tables(self, h: Any, signed: bool) -> tuple[str, str]:
        """``codes`` and ``bridge`` of hierarchy ``h`` from its relation (with ``signed``, a
        hierarchy that is not a tree, the coefficients too), kept beyond the run."""
        reg = temp_name("h")
        rel = h.relation()
        coef = ""
        if signed:
            coef = ", coef"
            empty = h._codes_without_leaves()
            if empty:  # no (leaf, code) pair: a row without a leaf keeps the code
                rel = pa.concat_tables([rel, pa.table({
                    "leaf": pa.nulls(len(empty), pa.string()),
                    "ancestor": pa.array(empty, pa.string()),
                    "level": pa.array([h.level_of(c) for c in empty], pa.int32()),
                    "coef": pa.array([0] * len(empty), pa.int64()),
                })])
        self.eng.register(reg, rel)
        up = None
        if h.is_tree:  # each code's parent, for the levelwise roll-up
            up = temp_name("hp")
            self.eng.register(up, h.code_levels().select(["code", "parent"]))
        try:
            return self._code_tables(
                f"SELECT CAST(leaf AS VARCHAR) AS leaf, CAST(ancestor AS VARCHAR) AS ancestor, "
                f"CAST(level AS INTEGER) AS level{coef} FROM {reg}", [], keep=True, coef=bool(coef),
                parents=up,
            )
        finally:
            self.eng.unregister(reg)
            if up is not None:
                self.eng.unregister(up)

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
        names: list[str] = []
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
                name = temp_name(kind)
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
