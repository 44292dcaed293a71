"""The temporary relations of one table request on the engine it is handed: made, read,
written out as the published table, and dropped when the run closes (see :class:`TableRun`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import polars as pl

from protab.rollup.cells import output_names, temp_name
from protab.rollup.state import RunState
from protab.sqltools import quote_ident


def drop_kept(eng: Any, cache: dict[Any, tuple[Any, ...]]) -> None:
    """Drop the tables kept beyond a run (hierarchies' codes and bridges, p-table lookups) and
    empty ``cache``; the (code, level) frames kept beside them are not tables."""
    for tables in cache.values():
        for t in tables:
            if isinstance(t, str):
                eng.drop_table(t)
    cache.clear()


class Relations(RunState):
    """Part of :class:`TableRun`: its temporary tables and views (``_temps``, ``_views``) on
    its engine ``eng``, each dropped by :meth:`close`."""

    def close(self) -> None:
        """Drop every temporary table and view the run made."""
        for t in reversed(self._temps):
            self.eng.drop_table(t)
        self._temps.clear()
        for v in self._views:
            self.eng.drop_view(v)
        self._views.clear()
        if getattr(self, "_own_cache", False):  # tables meant to outlive the run, with no session to keep them
            drop_kept(self.eng, self.cache)

    def _create(self, kind: str, select: str, params: Sequence[Any] | None = None) -> str:
        name = temp_name(kind)
        self._temps.append(name)
        self.eng.create_table(name, select, params)
        return name

    def _count(self, query: str) -> int:
        return int(self.eng.rows(f"SELECT count(*) FROM ({query})")[0][0])

    def arrow(self, query: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        return self.eng.frame(query, params)

    def _kept(self, kind: str, select: str, params: Sequence[Any] = (), frame: pl.DataFrame | None = None) -> str:
        """A small table that depends only on its query and ``frame`` (a p-table's lookup
        relation, read as ``{src}``), made once and kept in the cache beside the hierarchies'
        tables (dropped with them): found again by the query, its parameters and the frame's
        exact content (its Arrow IPC bytes), so every request with the same p-table reuses it."""
        key = ("relation", kind, select, tuple(params), None if frame is None else frame.write_ipc(None).getvalue())
        hit = self.cache.get(key)
        if hit is not None:
            return str(hit[0])
        reg = temp_name(kind + "_src")
        if frame is not None:
            self.eng.register(reg, frame.to_arrow())
        try:
            name = temp_name(kind)
            self.eng.create_table(name, select if frame is None else select.format(src=reg), params)
        finally:
            if frame is not None:
                self.eng.unregister(reg)
        self.cache[key] = (name,)
        return name

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
