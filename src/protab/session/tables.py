"""The Session's tables: one request checked against the catalog, then run by
:class:`protab.rollup.TableRun` on the session's engine — counts, sums, the cell key method,
sensitivity rules, inner cells and the model matrix."""

from __future__ import annotations

import dataclasses
import numbers
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

import polars as pl
from scipy import sparse

from protab._frames import as_polars, require_columns
from protab.errors import InputError, SpecError
from protab.rollup import TableRun
from protab.session.arguments import INTEGER, NUMERIC, check_threshold, missing_columns
from protab.session.state import SessionState
from protab.table import TableSpec

if TYPE_CHECKING:  # pragma: no cover
    from protab.magnitude import MagnitudeCKM, SensitivityRules
    from protab.ptable import PTable


class Tables(SessionState):
    """Table requests (a mixin of :class:`protab.Session`)."""

    def _run(
        self,
        table: str,
        spec: TableSpec,
        *,
        keys: bool = False,
        extend0: bool | str = False,
        structural: pl.DataFrame | None = None,
        rollup: bool = True,
        top_k: int | None = None,
        holding: str | None = None,
    ) -> TableRun:
        """Check a table request against the catalog and prepare its SQL run."""
        cols = self.columns(table)  # one look at the catalog
        if not isinstance(spec, TableSpec):
            raise SpecError(f"expected a protab.TableSpec, not {type(spec).__name__}")
        summed = table in self._key_sum_sources
        partials = self._key_sum_partials.get(table)
        if summed:  # counts and key sums per cell (key_sums): the records' counts and cell keys
            spec = self._key_sum_spec(table, spec, holding, top_k)
            if partials is not None:  # the sums columns it keeps, typed as in the records' table
                cols = {**cols, **dict(zip(partials.sums, partials.types))}
        self._check_columns(table, cols, spec, holding)
        key = None
        if keys:
            if spec.freq is not None and not summed:
                raise SpecError(
                    "the cell key method needs microdata (one row per record with its key); "
                    f"table {table!r} is aggregated (freq={spec.freq!r})"
                )
            key = self.record_key(table)
        if structural is not None:
            structural = as_polars(structural, "structural zeros")
            require_columns(structural, spec.columns, "structural zeros")
        self.engine.check_request(table, cols, [*spec.columns, *(c for c, _, _ in spec.where)],
                                  top_k=top_k, holding=holding)
        return TableRun(
            self.engine, table, spec, key=key, extend0=extend0, structural=structural,
            cache=self._hierarchies, types=cols, max_cells=self.max_cells, rollup=rollup, top_k=top_k,
            holding=holding, partials=partials if spec.sums else None,
        )

    def _key_sum_spec(self, table: str, spec: TableSpec, holding: str | None, top_k: int | None) -> TableSpec:
        """The request on a key-sum table (Session.key_sums): its record counts as frequencies,
        its sums merged from the parts the table keeps (protab.rollup.partials)."""
        partials = self._key_sum_partials.get(table)
        if spec.weight is not None or spec.freq is not None or holding is not None or (spec.sums and not partials):
            raise SpecError(
                f"table {table!r} holds record counts and key sums per cell (Session.key_sums); "
                "weights, frequencies, holdings and sums it was not made with need the records: ask the "
                "records' table"
            )
        if self.KEY_SUM_RECORDS in [*spec.columns, *(c for c, _, _ in spec.where)]:
            raise SpecError(f"column {self.KEY_SUM_RECORDS!r} of table {table!r} counts the records of its "
                            "rows: it is neither a dimension nor a filter")
        if partials is not None:
            partials.check_request(table, tuple(spec.sums), spec.null_sums, top_k)
            named = [*spec.columns, *(c for c, _, _ in spec.where)]
            parts = [c for c in named if c in partials.columns()]  # secret (key sums) or not codes
            if parts:
                raise SpecError(f"column {parts[0]!r} of table {table!r} holds parts of sums per row (Session.key_sums): "
                                "it is neither a dimension nor a filter")
            values = [c for c in named if c in partials.sums]
            if values:
                raise SpecError(f"table {table!r} keeps sums of {values[0]!r}, not its values: a dimension or where "
                                "condition on it needs the records' table")
        return dataclasses.replace(spec, freq=self.KEY_SUM_RECORDS)

    def _check_columns(self, table: str, cols: dict[str, str], spec: TableSpec, holding: str | None) -> None:
        """Every column the request names exists with a fitting type; none holds the record keys."""
        missing_columns(table, cols, spec.columns, "dimension column")
        values = ([spec.weight] if spec.weight else []) + list(spec.sums)
        missing_columns(table, cols, values + ([spec.freq] if spec.freq else []), "value column")
        for v in values:
            if not NUMERIC.match(cols[v]):
                raise InputError(
                    f"column {v!r} of table {table!r} has type {cols[v]}; weights and sums must "
                    "be numeric"
                )
        if spec.freq is not None and not INTEGER.match(cols[spec.freq]):
            raise InputError(
                f"frequency column {spec.freq!r} of table {table!r} has type "
                f"{cols[spec.freq]}; frequencies must be integers"
            )
        if holding is not None:
            missing_columns(table, cols, [holding], "holding column")
        missing_columns(table, cols, [c for c, _, _ in spec.where], "where column")
        used = [*spec.columns, *values] + ([spec.freq] if spec.freq else []) + ([holding] if holding else [])
        used += [c for c, _, _ in spec.where]
        try:
            secret = self.record_key(table)[0]
        except InputError:
            secret = None
        if secret is not None and secret in used:
            raise SpecError(
                f"column {secret!r} of table {table!r} holds the record keys, which are secret: it "
                "cannot be a dimension, a weight, a sum or a frequency of a table"
            )

    # the result's type follows ``path``: the frame without one, the path written with one
    @overload
    def tabulate(
        self, table: str, spec: TableSpec, *, cell_keys: bool = ..., top_k: int | None = ..., path: None = None,
    ) -> pl.DataFrame: ...
    @overload
    def tabulate(
        self, table: str, spec: TableSpec, *, cell_keys: bool = ..., top_k: int | None = ...,
        path: str | os.PathLike[str],
    ) -> str: ...
    @overload
    def tabulate(
        self, table: str, spec: TableSpec, *, cell_keys: bool = ..., top_k: int | None = ...,
        path: str | os.PathLike[str] | None = ...,
    ) -> pl.DataFrame | str: ...
    def tabulate(
        self, table: str, spec: TableSpec, *, cell_keys: bool = False, top_k: int | None = None,
        path: str | os.PathLike[str] | None = None,
    ) -> pl.DataFrame | str:
        """Every published cell of ``spec`` with its original count (and weight sum, sums).

        One scan of the microdata to inner cells, then a roll-up through the hierarchy
        relations, in SQL. Columns: the dimensions (codes, the margin code at each top), one
        ``<dim>_level`` per dimension (0 = total), ``n``, then ``w`` (weighted count) and the
        sums if the spec asks for them, and ``cell_key`` (the integer key sum modulo the key
        modulus) only when ``cell_keys=True``. Unprotected: for trusted use only.

        ``top_k`` (1..6, magnitude tables): per sums column ``s`` also ``s_w`` (weighted sum,
        with a weight), ``s_nonzero`` (non-zero contributors), ``s_top`` (the ``top_k``
        largest contributions, largest |x| first), ``s_max``, ``s_min`` — from the same scan;
        margins merge their children's lists (docs/methods.md §1.8).

        ``path``: write the table there as Parquet instead (see :meth:`cell_key`).
        """
        if top_k is not None:
            from protab.magnitude import MAX_TOP_K

            if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or not 1 <= top_k <= MAX_TOP_K:
                raise SpecError(f"tabulate: top_k must be a whole number from 1 to {MAX_TOP_K}")
            if not spec.sums:
                raise SpecError("tabulate: top_k lists the largest contributions of sums; give the TableSpec sums=[...]")
        target = self._check_sink(path)
        with self.engine.errors(table), self._run(table, spec, keys=cell_keys, top_k=top_k) as run:
            with self._parquet_sink(run, path, target):
                frame = run.published()
        return _frame_or_path(frame, path)

    def sensitivity(
        self, table: str, spec: TableSpec, rules: "SensitivityRules", *, diagnostics: bool = False
    ) -> pl.DataFrame:
        """Every published cell of ``spec`` with its original values and, per sums column
        ``s``, ``s_sensitive`` (True when a rule holds) and ``s_rule`` (the rules that hold,
        comma-separated: frequency, dominance(n), p%, pq, zero). Rules are SQL over the top-k
        lists of the one scan (docs/methods.md §6.2). Unprotected: for trusted use only.

        ``diagnostics=True`` adds what the verdicts read, for the methodologist (never
        published: cell_key and protect do not have them): ``s_dominance_<n>``, the share of
        the n largest contributions in the total X, for every n a dominance rule names and
        n = 1, 2 for the p% and pq rules (GaussSuppression's ``dominant1``, ``dominant2``),
        weighted and of holdings as the rules take them; ``s_contributors``, the contributors
        the frequency rule counts."""
        from protab.magnitude import SensitivityRules

        if not isinstance(rules, SensitivityRules):
            raise SpecError(f"sensitivity: rules must be a protab.SensitivityRules, not {type(rules).__name__}")
        if not spec.sums:
            raise SpecError("sensitivity: the rules judge magnitudes; give the TableSpec sums=[...]")
        if not isinstance(diagnostics, bool):
            raise SpecError("sensitivity: diagnostics must be True or False")
        with self.engine.errors(table), self._run(
            table, spec, keys=False, top_k=rules.top_k, holding=rules.holding
        ) as run:
            return run.sensitivity(rules, diagnostics)

    def inner_cells(self, table: str, spec: TableSpec, *, extend0: bool = False) -> pl.DataFrame:
        """The inner cells (finest crossing) of ``spec``: dims, n, w, sums.

        Only cells that hold records, unless ``extend0``: then also a zero cell for every
        combination of the codes that occur (SSBtools' Extend0).
        """
        with self.engine.errors(table), self._run(table, spec, extend0=extend0, rollup=False) as run:
            return run.inner_frame()

    def model_matrix(
        self,
        table: str,
        spec: TableSpec,
        *,
        extend0: bool | str = True,
        structural_zeros: pl.DataFrame | None = None,
        nested: bool = False,
    ) -> tuple[sparse.csc_matrix, pl.DataFrame, pl.DataFrame]:
        """The dummy matrix X (inner × published, z = Xᵀy) of a table, from the microdata.

        Returns ``(X, inner, published)``: ``inner`` holds the inner cells (rows of X: dims,
        n …), ``published`` the published cells (columns of X: dims, levels, n …), so that
        ``X.T @ inner["n"] == published["n"]``. X is built from the (inner, published) pairs
        of the SQL roll-up, which cross as Arrow arrays. With ``extend0`` (default) zero inner
        cells are added for every combination of occurring codes, except the combinations in
        ``structural_zeros`` (a frame with the dimension columns); ``extend0="all"`` counts
        every leaf of a hierarchy or code list as occurring (GaussSuppression's "all").
        ``nested=True``: dimensions that nest in the records (every municipality in one county)
        and that no crossing of ``spec`` holds together are not crossed as if independent: the
        inner cells no record can hold are left out (linked tables' audit, docs/audit.md).
        """
        if extend0 not in (True, False, "all"):
            raise SpecError(f"model_matrix: extend0 must be True, False or 'all', not {extend0!r}")
        with self.engine.errors(table), self._run(table, spec, extend0=extend0, structural=structural_zeros) as run:
            inner = run.inner_frame()
            published = run.published()
            assert published is not None  # a run without a sink returns its cells
            X = run.matrix()  # coefficients of non-tree hierarchies (−1, 2 …) included
        if nested:
            from protab.session.nested_dims import without_impossible

            return without_impossible(self, table, spec, X, inner, published)
        return X, inner, published

    @overload
    def cell_key(
        self, table: str, spec: TableSpec, ptable: "PTable", *, original: bool = ..., threshold: float | None = ...,
        magnitude: "MagnitudeCKM | None" = ..., rules: "SensitivityRules | None" = ..., path: None = None,
    ) -> pl.DataFrame: ...
    @overload
    def cell_key(
        self, table: str, spec: TableSpec, ptable: "PTable", *, original: bool = ..., threshold: float | None = ...,
        magnitude: "MagnitudeCKM | None" = ..., rules: "SensitivityRules | None" = ...,
        path: str | os.PathLike[str],
    ) -> str: ...
    @overload
    def cell_key(
        self, table: str, spec: TableSpec, ptable: "PTable", *, original: bool = ..., threshold: float | None = ...,
        magnitude: "MagnitudeCKM | None" = ..., rules: "SensitivityRules | None" = ...,
        path: str | os.PathLike[str] | None = ...,
    ) -> pl.DataFrame | str: ...
    def cell_key(
        self,
        table: str,
        spec: TableSpec,
        ptable: "PTable",
        *,
        original: bool = False,
        threshold: float | None = None,
        magnitude: "MagnitudeCKM | None" = None,
        rules: "SensitivityRules | None" = None,
        path: str | os.PathLike[str] | None = None,
    ) -> pl.DataFrame | str:
        """Counts (and magnitudes) protected by the cell key method: every published cell.

        The cell key of a cell is the sum of its records' keys modulo the key modulus; its
        perturbed count is n + v from the p-table row of n's row class whose interval holds
        the cell key (a SQL join; the p-table's interval convention decides boundaries).
        Columns: the dimensions, their levels, ``n_pert`` and, with a weight, ``w_pert`` = the
        perturbed count times the cell's mean weight (cellKey and tau-ARGUS). ``n``/``w`` only
        with ``original=True``. The same records give the same value in every table.

        ``threshold`` (the ONS rule): a cell whose perturbed count is *below* it is published
        as null (``n_pert`` and ``w_pert``), i.e. blanked when ``n_pert < threshold``, compared
        exactly for any real threshold: counts are integers, so ``threshold=2.7`` blanks 0, 1
        and 2 (as ``threshold=3`` does) and publishes 3. It must be a finite number of 0 or
        more (``threshold=0`` blanks nothing); booleans, strings, NaN and ±inf are refused.
        A negative (signed) cell of a non-tree hierarchy is judged by its size: blanked when
        ``|n_pert| < threshold``.

        Magnitudes (docs/methods.md §1.8): a spec with ``sums`` needs ``magnitude=`` (a
        :class:`protab.MagnitudeCKM`); every sums column ``s`` then gets ``s_pert`` (the
        perturbed sum, weighted with a weight) and ``s_mean_pert`` (``s_pert`` over the
        perturbed count, or over ``w_pert`` with a weight), both blanked with ``n_pert``;
        ``s`` (or ``s_w``) itself only with ``original=True``. ``rules=`` (a
        :class:`protab.SensitivityRules`) adds ``s_sensitive``/``s_rule``; sensitive cells get
        the extra noise ``mu_c`` of the magnitude parameters.

        ``path``: the table is not returned but written there as Parquet by the engine itself
        (the same columns and rows in the same order; nothing passes through Python, for
        tables too large to hold as a frame) and the path is returned. DuckDB writes one
        file, renamed into place only when whole; on Spark the executors write a folder of
        part files (docs/spark.md).
        """
        top_k = _magnitude_top_k(spec, ptable, magnitude, rules)
        below = check_threshold(table, threshold)
        target = self._check_sink(path)
        with self.engine.errors(table), self._run(
            table, spec, keys=True, top_k=top_k, holding=rules.holding if rules else None
        ) as run:
            with self._parquet_sink(run, path, target):
                frame = run.perturb(ptable, original=original, threshold=below, magnitude=magnitude, rules=rules)
        return _frame_or_path(frame, path)

    def cell_key_groups(
        self, table: str, spec: TableSpec, dim: str, groups: Mapping[str, Sequence[str]], ptable: "PTable", *,
        original: bool = False, threshold: float | None = None,
    ) -> pl.DataFrame:
        """:meth:`cell_key` of ``spec`` with dimension ``dim`` recoded into ``groups`` (group
        name → codes of ``dim``; groups may share codes): ``dim`` is published as Total →
        groups → codes (:mod:`protab.session.groupings`), through the same roll-up, checks and
        p-table join as every table, so a group's cell is the cell of its records (its key the
        sum of their keys) and has the same value as under any hierarchy that defines it. A
        record whose code is in no group is refused as a code missing from a hierarchy: keep
        them out with ``spec.where``."""
        from protab.session.groupings import grouped_spec

        return self.cell_key(table, grouped_spec(spec, dim, groups), ptable, original=original, threshold=threshold)

    @overload
    def perturb_inner(
        self, table: str, spec: TableSpec, ptable: "PTable", *, original: bool = ..., path: None = None,
    ) -> pl.DataFrame: ...
    @overload
    def perturb_inner(
        self, table: str, spec: TableSpec, ptable: "PTable", *, original: bool = ..., path: str | os.PathLike[str],
    ) -> str: ...
    @overload
    def perturb_inner(
        self, table: str, spec: TableSpec, ptable: "PTable", *, original: bool = ...,
        path: str | os.PathLike[str] | None = ...,
    ) -> pl.DataFrame | str: ...
    def perturb_inner(
        self, table: str, spec: TableSpec, ptable: "PTable", *, original: bool = False,
        path: str | os.PathLike[str] | None = None,
    ) -> pl.DataFrame | str:
        """Perturb the *inner* cells through ``ptable`` and publish margins as their sums.

        Each inner cell's noise comes from its own cell key, so the same inner cell moves the
        same way in every table; margins are sums of perturbed inner cells, so the table is
        additive (unlike :meth:`cell_key`, whose margins are perturbed on their own). This is
        how Barnardisation, small cell adjustment and other pre-aggregation noise run as a
        p-table join. Columns as :meth:`cell_key`; ``path`` as there.
        """
        from protab.magnitude import check_ptable_kind
        from protab.ptable import PTable

        check_ptable_kind(ptable, "perturb_inner")
        if not isinstance(ptable, PTable):
            raise InputError(f"perturb_inner: ptable must be a protab.PTable, not {type(ptable).__name__}")
        if spec.sums:
            raise SpecError(
                f"perturb_inner perturbs counts; the TableSpec has sums {list(spec.sums)}, which it would "
                "publish unperturbed: protect magnitudes with cell_key(..., magnitude=protab.MagnitudeCKM(...)), "
                "or leave sums out of the spec"
            )
        target = self._check_sink(path)
        with self.engine.errors(table), self._run(table, spec, keys=True) as run:
            with self._parquet_sink(run, path, target):
                frame = run.perturb_inner(ptable, original=original)
        return _frame_or_path(frame, path)


def _magnitude_top_k(spec: TableSpec, ptable: Any, magnitude: Any, rules: Any) -> int | None:
    """The arguments of ``cell_key`` checked; the length of the top lists its sums need."""
    from protab.magnitude import MagnitudeCKM, SensitivityRules, check_ptable_kind
    from protab.ptable import PTable

    check_ptable_kind(ptable, "cell_key")
    if not isinstance(ptable, PTable):
        raise InputError(f"cell_key: ptable must be a protab.PTable, not {type(ptable).__name__}")
    if magnitude is not None and not isinstance(magnitude, MagnitudeCKM):
        raise SpecError(f"cell_key: magnitude must be a protab.MagnitudeCKM, not {type(magnitude).__name__}")
    if rules is not None and not isinstance(rules, SensitivityRules):
        raise SpecError(f"cell_key: rules must be a protab.SensitivityRules, not {type(rules).__name__}")
    if spec.sums and magnitude is None:
        raise SpecError(
            f"cell_key: the TableSpec has sums {list(spec.sums)} but no magnitude parameters; pass "
            "magnitude=protab.MagnitudeCKM(...) to perturb them, or leave sums out of the spec "
            "(sums are never published unperturbed)"
        )
    if (magnitude is not None or rules is not None) and not spec.sums:
        raise SpecError("cell_key: magnitude= and rules= perturb and judge sums; give the TableSpec sums=[...]")
    if not spec.sums:
        return None
    return max(magnitude.top_k if magnitude else 1, rules.top_k if rules else 1)


def _frame_or_path(frame: pl.DataFrame | None, path: str | os.PathLike[str] | None) -> pl.DataFrame | str:
    """The published cells, or the path they were written to (the run then returned no frame)."""
    if path is not None:
        return os.fspath(path)
    assert frame is not None  # a run without a sink returns its cells
    return frame
