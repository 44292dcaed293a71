"""The work relations of one swap: temporary tables on the engine, named after the swap, written
and read through the engine's methods only (so that the same statements run on DuckDB, Spark and PostgreSQL),
dropped at the end. The base of the swap's steps (:mod:`protab.swapping.households`,
:mod:`protab.swapping.matching`, :mod:`protab.swapping.results`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from protab.sqltools import quote_ident as q
from protab.swapping.spec import SwapSpec

if TYPE_CHECKING:  # pragma: no cover
    from protab.engines import Engine


class Work:
    """One swap's state: the engine, the input and spec, the names of its work tables."""

    def __init__(self, eng: Engine, table: str, spec: SwapSpec, seed: str) -> None:
        self.eng, self.table, self.spec, self.seed = eng, table, spec, seed
        self.prefix = f"_protab_swap_{uuid.uuid4().hex}"
        self.tmp: list[str] = []
        self.rounds = 0
        self.round_limit_hit = False
        self.cols: dict[str, str] = {}  # the input's columns and types
        self.columns: list[str] = []
        self.const: list[str] = []  # similarity and carry-along columns, household-level
        self.props_params: list[Any] = []
        self.target = self.n_hh = 0
        self.cap: int | None = None  # the most households swapped (SwapSpec.max_swap_rate)

    def name(self, key: str) -> str:
        """The name of the work table ``key`` (a plain identifier: no quoting needed)."""
        full = f"{self.prefix}_{key}"
        if full not in self.tmp:
            self.tmp.append(full)
        return full

    def t(self, key: str) -> str:
        """The work table ``key`` quoted, for SQL text."""
        return q(self.name(key))

    def x(self, sql: str, params: Sequence[Any] | None = None) -> None:
        self.eng.execute(sql, list(params) if params is not None else None)

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        return self.eng.rows(sql, list(params) if params is not None else None)

    def one(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        return self.rows(sql, params)[0][0]

    def create(self, key: str, select: str, params: Sequence[Any] | None = None) -> None:
        """The work table ``key`` holding ``select`` (computed once)."""
        self.eng.create_table(self.name(key), select, list(params) if params is not None else None)

    def replace(self, key: str, select: str, params: Sequence[Any] | None = None) -> None:
        """The work table ``key`` holding ``select`` now (any earlier one dropped)."""
        self.eng.drop_table(self.name(key))
        self.create(key, select, params)

    def insert(self, key: str, select: str, params: Sequence[Any] | None = None) -> None:
        """The rows of ``select`` appended to the work table ``key``."""
        self.eng.insert(self.name(key), select, list(params) if params is not None else None)

    def empty(self, key: str, columns: Sequence[tuple[str, str]]) -> None:
        """An empty work table ``key`` with ``columns`` (name, DuckDB type)."""
        cols = ", ".join(f"CAST(NULL AS {kind}) AS {col}" for col, kind in columns)
        self.create(key, f"SELECT {cols} WHERE false")

    def close(self) -> None:
        for name in reversed(self.tmp):
            try:
                self.eng.drop_table(name)
            except Exception:  # pragma: no cover - the connection is gone
                pass

    @property
    def hid_type(self) -> str:
        return self.cols[self.spec.household]
