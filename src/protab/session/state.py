"""The declared state of a :class:`protab.Session`, shared by its mixins.

A Session is assembled from mixins (catalog, keys, tables, suppress, census), each in a module
of its own; every mixin derives from :class:`SessionState`, which names every attribute the
Session sets (in ``Session.__init__``) and the mixins read and, for the type checker only, the
methods one mixin calls on another. Nothing here runs: the annotations make no attributes and
the method signatures sit under ``TYPE_CHECKING`` (docs/design.md, "Declared state").
"""

from __future__ import annotations

import os
from abc import abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from protab.rollup.state import RunCache

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from protab.engines import Engine
    from protab.rollup import TableRun
    from protab.rollup.partials import Partials
    from protab.table import TableSpec


class SessionState:
    """The attributes of a Session (set by ``Session.__init__``)."""

    #: columns of a key-sum table (Session.key_sums)
    KEY_SUM_RECORDS: ClassVar[str]
    KEY_SUM_KEY: ClassVar[str]

    engine: Engine
    database: str  # the engine's label, named in errors
    max_cells: int | None
    _read_paths: list[str]  # files registered in this session (outputs never replace them)
    _keys: dict[str, tuple[str, int]]  # table -> (record key column, modulus)
    _key_sum_sources: dict[str, str]  # key-sum table -> the table it sums
    _key_sum_partials: dict[str, Partials]  # key-sum table -> the sums it keeps
    _key_sum_columns: dict[str, dict[str, str]]  # key-sum table -> its columns (types)
    _hierarchies: RunCache  # the code and bridge tables kept per hierarchy (TableRun's cache)

    if TYPE_CHECKING:  # pragma: no cover
        # the methods one mixin calls on another, implemented by the mixin named

        @abstractmethod  # Catalog
        def _arrow(self, query: str, params: Sequence[Any] | None = None) -> pl.DataFrame: ...

        @abstractmethod  # Catalog
        def exists(self, name: str) -> bool: ...

        @abstractmethod  # Catalog
        def columns(self, table: str) -> dict[str, str]: ...

        @abstractmethod  # Catalog
        def _require(self, table: str) -> None: ...

        @abstractmethod  # Catalog
        def _require_columns(self, table: str, columns: Sequence[str], what: str = "column") -> dict[str, str]: ...

        @abstractmethod  # Catalog
        def _check_sink(self, path: str | os.PathLike[str] | None) -> Path | None: ...

        @abstractmethod  # Catalog
        def _parquet_sink(self, run: Any, path: str | os.PathLike[str] | None,
                          target: Path | None) -> AbstractContextManager[None]: ...

        @abstractmethod  # Catalog
        def forget_hierarchies(self, keep: int = 0) -> None: ...

        @abstractmethod  # Keys
        def _forget(self, name: str) -> None: ...

        @abstractmethod  # Keys
        def record_key(self, table: str) -> tuple[str, int]: ...

        @abstractmethod  # Tables
        def _run(self, table: str, spec: TableSpec, *, keys: bool = False, extend0: bool | str = False,
                 structural: pl.DataFrame | None = None, rollup: bool = True, top_k: int | None = None,
                 holding: str | None = None) -> TableRun: ...

        @abstractmethod  # Tables
        def model_matrix(self, table: str, spec: TableSpec, *, extend0: bool | str = True,
                         structural_zeros: pl.DataFrame | None = None,
                         nested: bool = False) -> tuple[Any, pl.DataFrame, pl.DataFrame]: ...
