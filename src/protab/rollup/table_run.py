"""The SQL of one table request: inner cells, code numbers, roll-up, perturbation, pairs.

A :class:`TableRun` owns the temporary relations of one request on the engine the Session
hands it, and drops them when it closes. Its steps (docs/design.md, ideas 1–4; the pairs
of step 4 are the model matrix of idea 2), each in a module of its own:

1. one scan of the microdata to *inner cells* (count, weight sum, sums as exact decimals,
   record-key sum modulo the key modulus) — :mod:`~protab.rollup.scan`, checked by
   :mod:`~protab.rollup.cell_checks`;
2. codes become integers (``codes`` tables, in publication order, with each code's parent
   in a tree) and every hierarchy a ``bridge(leaf, anc, level)`` relation, the leaf itself
   and the total included (:mod:`~protab.rollup.codes`); the roll-up takes one dimension at
   a time and groups integers only: level by level through the parents when the
   dimension's leaves share one level (flat dimensions, grids), else through the bridge,
   dropping rows that no published crossing can hold as soon as they appear
   (:mod:`~protab.rollup.levels`); codes come back in publication order
   (:mod:`~protab.rollup.order`);
3. perturbation is a join of cells with the p-table's integer key ranges (on row class and
   key bucket); count tables then leave SQL as one ordering number per cell
   (:mod:`~protab.rollup.perturb`); magnitudes and sensitivity rules go on from there
   (:mod:`~protab.rollup.magnitude_cells`, with the SQL of
   :mod:`~protab.rollup.magnitude_ckm` and :mod:`~protab.rollup.magnitude_rules`);
4. the (inner, published) pairs of the same joins are the sparse model matrix X
   (:mod:`~protab.rollup.matrix`).

Identifiers are internal (``_d0``, ``_o0``, …) or quoted; every value is a bound parameter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import duckdb
import polars as pl

from protab.errors import SpecError, show_values
from protab.rollup.cell_checks import Checks
from protab.rollup.cells import value_columns
from protab.rollup.codes import Codes
from protab.rollup.levels import Levels
from protab.rollup.magnitude_cells import MagnitudeCells
from protab.rollup.matrix import Matrix
from protab.rollup.order import Order
from protab.rollup.partials import Partials
from protab.rollup.perturb import Perturb
from protab.rollup.relations import Relations
from protab.rollup.scan import Scan
from protab.rollup.state import RunCache
from protab.sqltools import quote_ident
from protab.table import TableSpec

if TYPE_CHECKING:  # pragma: no cover
    from protab.engines import Engine


class TableRun(Relations, Scan, Checks, Codes, Levels, Order, Perturb, MagnitudeCells, Matrix):
    """The temporary relations of one table request (use as a context manager).

    ``eng``: the engine the statements run on (a :class:`protab.engines.Engine`). ``key``:
    (record key column, modulus) to carry cell keys, or None. ``extend0``: add a zero inner
    cell for every combination of the codes that occur (SSBtools' Extend0), except the
    combinations in ``structural`` (a frame of dimension codes).
    """

    def __init__(
        self,
        eng: Engine,
        table: str,
        spec: TableSpec,
        *,
        key: tuple[str, int] | None = None,
        extend0: bool | str = False,
        structural: pl.DataFrame | None = None,
        cache: RunCache | None = None,
        types: dict[str, str] | None = None,
        max_cells: int | None = None,
        rollup: bool = True,
        top_k: int | None = None,
        holding: str | None = None,
        partials: Partials | None = None,
    ) -> None:
        """``types``: column → DuckDB type of the table (NaN codes of floating-point
        dimensions become NULL); ``max_cells``: refuse requests estimated to publish (or,
        with ``extend0``, to hold as inner cells) more cells than this; ``rollup=False``:
        only inner cells are wanted, so the estimate of published cells is skipped;
        ``top_k``: carry the magnitude columns of :func:`value_columns` with lists of the
        ``top_k`` largest contributions (1..6); ``partials``: the table is a key-sum table
        keeping these parts of the sums columns, merged by the scan (its ``freq`` counts records)."""
        if isinstance(eng, duckdb.DuckDBPyConnection):
            raise TypeError("TableRun takes an engine (protab.engines.DuckDBEngine(con)), not a DuckDB connection")
        self.eng = eng
        self.table, self.spec = table, spec
        self.types = {k: str(v).upper() for k, v in (types or {}).items()}
        self.max_cells, self.check_published = max_cells, rollup
        self._n_inner = 0  # inner cells found by the scan (set by _check_inner)
        # code and bridge tables of hierarchies depend on nothing else: a Session keeps them
        # for its lifetime (temporary tables, gone with the connection)
        self.cache = cache if cache is not None else {}
        self._own_cache = cache is None  # no session keeps them: the run drops its kept tables on close
        self._leaf_counts: list[int] = []
        self.key = key
        self.modulus = key[1] if key else 0
        self.extend0, self.structural = extend0, structural
        self.nd = len(spec.dimensions)
        self.top_k = top_k
        self.holding = holding
        #: a path: published tables are written there as Parquet by the engine (see _emit)
        self.sink: str | None = None
        self.partials = partials
        if top_k is not None and spec.sums and spec.freq is not None and partials is None:
            raise SpecError(
                f"table {table!r}: magnitude tables need one row per contributor; the rows are "
                f"aggregated (freq={spec.freq!r}), so contributions and their largest values are unknown"
            )
        self.values = [c for c, _ in value_columns(spec, keys=key is not None, top_k=top_k)]
        self._temps: list[str] = []
        self._views: list[str] = []
        self._cells: str | None = None
        self._ids: str | None = None
        self._checks: list[str] = []
        self.source = quote_ident(table)  # what the scans read: the table, or its where-filtered view

    def __enter__(self) -> TableRun:
        try:
            self._filter()
            self.inner = self._scan()
            self._check_inner()
            if self.extend0:
                self.inner = self._extend0()
            self.codes, self.bridges = self._bridges()
            if self.top_k is not None and self.spec.sums and any(self.coef):
                signed = [d.column for d, c in zip(self.spec.dimensions, self.coef) if c]
                raise SpecError(
                    f"table {self.table!r}: the hierarchy of {show_values(signed)} is not a tree (signs "
                    "-1 or codes with several parents); the largest contributions of such a cell are "
                    "not defined, so magnitude rules and perturbation need tree hierarchies"
                )
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
