"""The declared state of a :class:`~protab.rollup.table_run.TableRun`, shared by its steps.

Each step of a run is a mixin in a module of its own (scan, checks, codes, levels, order,
perturbation, magnitudes, matrix); every mixin derives from :class:`RunState`, which names
every attribute one step sets and another reads (with the step that sets it) and, for the
type checker only, the methods one step calls on another. Nothing here runs: the annotations
make no attributes and the method signatures sit under ``TYPE_CHECKING``, so the mixins'
methods are the only ones at run time (docs/design.md, "Declared state").
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import numpy.typing as npt
    import polars as pl

    from protab.engines import Engine
    from protab.magnitude import MagnitudeCKM, SensitivityRules
    from protab.rollup.partials import Partials
    from protab.table import TableSpec

#: the kept tables of a run and its Session: a hierarchy → (codes, bridge) table names,
#: ("frame", codes) → (its frame,), ("relation", kind, query, ...) → (table name,)
RunCache = dict[Any, tuple[Any, ...]]


class RunState:
    """The attributes of one table run, by the step that sets them."""

    # the request (TableRun.__init__)
    eng: Engine
    table: str
    spec: TableSpec
    types: dict[str, str]  # column -> upper-case DuckDB type
    max_cells: int | None
    check_published: bool
    cache: RunCache
    _own_cache: bool  # no Session keeps the cache: the run drops its kept tables on close
    key: tuple[str, int] | None  # (record key column, modulus)
    modulus: int
    extend0: bool | str
    structural: pl.DataFrame | None
    nd: int  # number of dimensions
    top_k: int | None
    holding: str | None
    sink: str | None  # a path: published tables are written there as Parquet (Relations._emit)
    partials: Partials | None
    values: list[str]  # the internal value columns of the cells
    # the temporary relations (Relations; names added by every step)
    _temps: list[str]
    _views: list[str]
    # scan (Scan): what it reads, the inner cells, the check columns, how sums complete
    source: str
    inner: str
    _checks: list[str]
    _totals: dict[str, str]
    # checks of the inner cells (Checks)
    _n_inner: int
    _leaf_counts: list[int]
    # codes and bridges (Codes)
    codes: list[str]
    bridges: list[str]
    coef: list[bool]  # per dimension: its hierarchy has signs or several parents
    depths: list[int | None]
    _ids: str | None
    # the roll-up (Levels)
    _cells: str | None
    # the model matrix (Matrix)
    pair_coef: npt.NDArray[np.int64]

    if TYPE_CHECKING:  # pragma: no cover
        # the methods one step calls on another, implemented by the mixin named

        @abstractmethod  # Relations
        def _create(self, kind: str, select: str, params: Sequence[Any] | None = None) -> str: ...

        @abstractmethod  # Relations
        def _count(self, query: str) -> int: ...

        @abstractmethod  # Relations
        def arrow(self, query: str, params: Sequence[Any] | None = None) -> pl.DataFrame: ...

        @abstractmethod  # Relations
        def _kept(self, kind: str, select: str, params: Sequence[Any] = (),
                  frame: pl.DataFrame | None = None) -> str: ...

        @abstractmethod  # Relations
        def _emit(self, head: str, items: Sequence[str], tail: str,
                  params: Sequence[Any] | None = None) -> pl.DataFrame | None: ...

        @abstractmethod  # Scan
        def _value_sources(self) -> list[tuple[str, str, str]]: ...

        @abstractmethod  # Scan
        def _raw_codes(self) -> tuple[list[str], list[Any]]: ...

        @abstractmethod  # Scan
        def _wide(self, key: str) -> str: ...

        @abstractmethod  # Checks
        def _too_large(self) -> None: ...

        @abstractmethod  # Checks
        def _check_nonnegative(self, base: str) -> None: ...

        @abstractmethod  # Codes
        def _code_frame(self, codes: str) -> pl.DataFrame: ...

        @abstractmethod  # Codes
        def _ids_select(self, *, with_id: bool) -> str: ...

        @property
        @abstractmethod  # Codes
        def ids(self) -> str: ...

        @property
        @abstractmethod  # Levels
        def cells(self) -> str: ...

        @abstractmethod  # Levels
        def _rollup_ctes(self, source: str | None = None, values: list[str] | None = None,
                         keys: Sequence[str] = ()) -> tuple[str, str, list[Any]]: ...

        @abstractmethod  # Levels
        def _cells_source(self) -> tuple[str, str, list[Any]]: ...

        @abstractmethod  # Levels
        def _rollup(self, source: str | None = None, values: list[str] | None = None) -> str: ...

        @abstractmethod  # Order
        def _decode(self) -> tuple[list[str], str, str]: ...

        @abstractmethod  # Order
        def _in_order(self, frame: pl.DataFrame, codes: list[pl.DataFrame]) -> pl.DataFrame: ...

        @abstractmethod  # Order
        def _decode_frame(self, frame: pl.DataFrame) -> pl.DataFrame: ...

        @abstractmethod  # Order
        def _value_selects(self, values: Sequence[str], alias: str = "c.") -> list[str]: ...

        @abstractmethod  # MagnitudeCells
        def _perturb_magnitudes(self, base: str, cols: list[str], magnitude: MagnitudeCKM | None,
                                rules: SensitivityRules | None, *, original: bool,
                                diagnostics: bool = False) -> pl.DataFrame | None: ...
