"""The Session's cell suppression: primary cells from rules, secondary ones by Gaussian
elimination (:func:`protab.suppression.gauss`, after SSB's GaussSuppression), the attacker's
intervals (:func:`protab.suppression.audit`), linked tables as one."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from protab._frames import as_polars, require_columns
from protab.errors import SpecError, show_values
from protab.table import TableSpec, union_spec

if TYPE_CHECKING:  # pragma: no cover
    from protab.engines import Engine
    from protab.magnitude import SensitivityRules


class Suppression:
    """Cell suppression (a mixin of :class:`protab.Session`)."""

    engine: Engine

    def suppress(
        self,
        table: str,
        spec: TableSpec | Sequence[TableSpec],
        *,
        rules: "SensitivityRules | None" = None,
        min_frequency: int | None = None,
        protect_zeros: bool = False,
        forced: Any = None,
        never: Any = None,
        singleton_method: str | None = None,
        cost: Any = None,
        audit: bool = False,
        protection_range: float | None = None,
        interval_protection: bool = False,
    ) -> pl.DataFrame:
        """Cell suppression: primary cells from rules, secondary ones by Gaussian elimination
        (docs/methods.md §6.4; :func:`protab.suppression.gauss`).

        Frequency tables (no sums): cells with ``0 < n < min_frequency`` are primary (zero
        cells too with ``protect_zeros``), as GaussSuppression's SuppressSmallCounts with
        ``maxN = min_frequency - 1``: empty inner cells are added (extend0; with
        ``protect_zeros`` also for codes a hierarchy or code list names and the data lack, whose
        cells are zeros to protect: the package's extend0 = "all"), and the singletons
        of ``singleton_method`` "anySum" (default) are the inner cells of one record, or the
        empty ones with ``protect_zeros`` (as the package). Magnitude tables (sums): a cell is
        primary where ``rules`` mark any sums variable sensitive; candidates are tried in
        decreasing |value| of the first sums variable (CandidatesNum); inner cells of one record
        are singletons, handled by "numttHTT" by default (the package's default for magnitude
        tables).
        ``forced`` / ``never``: frames of cells (the dimension columns, codes as published)
        that must be / must not be suppressed. Returns every published cell, null where
        suppressed, and ``suppressed``: "primary", "secondary" or "no" (internal: publish nulls).

        ``cost``: the order in which candidates are kept published — "frequency" (larger counts
        first, CandidatesDefault; frequency tables), "value" (larger |value| first,
        CandidatesNum; with sums), or a number >= 0 per published cell (larger = dearer).

        ``audit=True`` adds, per suppressed cell, the interval an attacker derives from the
        published cells and non-negative inner cells (``lo``, ``up``: two LPs per cell with
        HiGHS, :func:`protab.suppression.intervals`) and ``protected``: a primary cell needs
        ``up - lo >= protection_range`` (if given) and, when the rules hold a p% rule, the
        p% protection levels of tau-ARGUS both ways (from its two largest contributions); no
        suppressed cell may be exactly disclosed. ``interval_protection=True`` then adds
        suppressions (labelled "secondary") until every primary cell is protected
        (:func:`protab.suppression.protect`). The LPs grow with the table: meant for tables of
        up to some thousands of cells.

        Linked tables: a list of TableSpecs over the same microdata is suppressed as one table
        (the union of their crossings, GaussSuppression's global method): a common cell is
        suppressed in all or none; one frame per spec. Shared dimensions need the same hierarchy
        (or none); weight, sums, freq, null_code, total and drop_empty must agree.
        """
        args = dict(rules=rules, min_frequency=min_frequency, protect_zeros=protect_zeros, forced=forced,
                    never=never, singleton_method=singleton_method, cost=cost, audit=audit,
                    protection_range=protection_range, interval_protection=interval_protection)
        if isinstance(spec, (list, tuple)):
            return self._suppress_linked(table, spec, args)  # type: ignore[return-value]
        _check_suppress(spec, rules, min_frequency, protect_zeros, audit, interval_protection, protection_range)
        return self._suppress_one(table, spec, **args)

    def _suppress_linked(self, table: str, specs: Sequence[TableSpec], args: dict[str, Any]) -> list[pl.DataFrame]:
        """:meth:`suppress` of linked tables: as one combined table, then cut per spec."""
        combined = linked_spec(specs)
        if args["cost"] is not None and not isinstance(args["cost"], str):
            raise SpecError("suppress: linked tables take cost='frequency' or 'value', not one number per cell")
        out = self.suppress(table, combined, **args)
        return [cells_of(out, combined, s) for s in specs]

    def _suppress_one(self, table: str, spec: TableSpec, *, rules: Any, min_frequency: int | None,
                      protect_zeros: bool, forced: Any, never: Any, singleton_method: str | None, cost: Any,
                      audit: bool, protection_range: float | None, interval_protection: bool) -> pl.DataFrame:
        """:meth:`suppress` of one checked table: primary cells, Gaussian elimination, the audit."""
        from protab.suppression import gauss

        X, inner, published, facts = self._suppression_inputs(table, spec, rules, protect_zeros)
        primary, order, singleton, method = _primary_cells(spec, rules, min_frequency, protect_zeros, X, inner,
                                                           published, facts)
        order = _candidate_order(cost, spec, X, published, order)
        dims = list(spec.columns)
        forced_mask = self._cell_mask(published, dims, forced, "forced")
        never_mask = self._cell_mask(published, dims, never, "never")
        suppressed = gauss(X, published["n"].to_numpy().astype(float), primary, candidates=order,
                           forced=forced_mask, never=never_mask, singleton=singleton,
                           singleton_method=singleton_method or method)
        audit_cols: list[pl.Series] = []
        if audit or interval_protection:
            suppressed, audit_cols = self._audit_suppression(
                spec, rules, X, published, facts, suppressed, primary | forced_mask, protection_range,
                interval_protection,
            )
        label = np.where(primary | forced_mask, "primary", np.where(suppressed, "secondary", "no"))
        values = ["n"] + (["w"] if spec.weight else []) + list(spec.sums)
        hide = pl.Series(suppressed)
        return published.with_columns(
            [pl.when(hide).then(None).otherwise(pl.col(c)).alias(c) for c in values if c in published.columns]
            + [pl.Series("suppressed", label)] + audit_cols
        )

    def _suppression_inputs(
        self, table: str, spec: TableSpec, rules: Any, protect_zeros: bool
    ) -> tuple[Any, pl.DataFrame, pl.DataFrame, pl.DataFrame | None]:
        """X, the inner and the published cells, and for a magnitude table the rules' columns of
        every published cell (with the top lists and smallest values the audit needs), from one
        scan. Empty cells are inner cells where zero cells are a rule."""
        if not spec.sums:
            X, inner, published = self.model_matrix(table, spec, extend0="all" if protect_zeros else True)
            return X, inner, published, None
        zero_rule = rules is not None and rules.zero
        with self.engine.errors(table), self._run(
            table, spec, extend0="all" if zero_rule else False, top_k=rules.top_k, holding=rules.holding
        ) as run:
            inner = run.inner_frame()
            X = run.matrix()
            facts = run.sensitivity(rules)
        dims = list(spec.columns)
        values = [*dims, *(f"{d}_level" for d in dims), "n", *(["w"] if spec.weight else []), *spec.sums]
        return X, inner, facts.select(values), facts

    @staticmethod
    def _audit_suppression(
        spec: TableSpec, rules: Any, X: Any, published: pl.DataFrame, facts: pl.DataFrame | None,
        suppressed: np.ndarray, primary: np.ndarray, protection_range: float | None, protect: bool,
    ) -> tuple[np.ndarray, list[pl.Series]]:
        """Attacker intervals of the suppressed cells (and, with ``protect``, more suppressions
        until every primary cell meets its requirement): (suppressed, [lo, up, protected]).
        ``facts``: the rules' columns of a magnitude table (top lists, smallest values)."""
        from protab.suppression import audit
        from protab.suppression import protect as add_suppressions

        value_col = spec.sums[0] if spec.sums else "n"
        z = published[value_col].fill_null(0).to_numpy().astype(float)
        # the attacker's a priori bounds of the inner cells: 0 or more for counts and for
        # non-negative variables; none where the variable has negative values
        lower = 0.0
        if facts is not None:
            low = facts[f"{value_col}_min"].min()
            if low is not None and low < 0:  # type: ignore[operator]
                lower = None
        req: dict[str, Any] = {"lower": lower}
        if protection_range is not None:
            if isinstance(protection_range, bool) or not isinstance(protection_range, numbers.Real) \
                    or not math.isfinite(protection_range) or protection_range < 0:
                raise SpecError("suppress: protection_range must be a finite number of 0 or more")
            req["protection_range"] = float(protection_range)
        if spec.sums and rules is not None and rules.p_percent is not None and rules.holding is not None:
            raise NotImplementedError(
                "suppress: the audit of the p% rule over holdings is not implemented (its protection "
                "levels need the holdings' two largest contributions); audit with protection_range, "
                "or without holding"
            )
        if facts is not None and rules is not None and rules.p_percent is not None:
            lists = facts[f"{value_col}_top"]  # the rules' top lists hold two values at least
            req.update(p_percent=rules.p_percent, x1=lists.list.get(0, null_on_oob=True).fill_null(0).to_numpy(),
                       x2=lists.list.get(1, null_on_oob=True).fill_null(0).to_numpy())
        if protect:
            suppressed = add_suppressions(X, z, suppressed, primary, **req)
        frame = audit(X, z, suppressed, primary=primary, **req)
        cells = frame["cell"].to_numpy()
        lo = np.full(published.height, np.nan)
        up = np.full(published.height, np.nan)
        ok = np.ones(published.height, dtype=bool)
        lo[cells], up[cells], ok[cells] = frame["lo"].to_numpy(), frame["up"].to_numpy(), frame["protected"].to_numpy()
        return suppressed, [pl.Series("lo", lo), pl.Series("up", up), pl.Series("protected", ok)]

    @staticmethod
    def _cell_mask(published: pl.DataFrame, dims: list[str], cells: Any, what: str) -> np.ndarray:
        """Boolean mask of the published cells listed in ``cells`` (a frame with the dimension
        columns); SpecError naming cells that the table does not publish."""
        if cells is None:
            return np.zeros(published.height, dtype=bool)
        frame = as_polars(cells, f"suppress: {what}")
        require_columns(frame, dims, f"suppress: {what}")
        frame = frame.select([pl.col(d).cast(pl.String) for d in dims]).unique().with_columns(_hit=pl.lit(True))
        hit = published.select(dims).join(frame, on=dims, how="left", maintain_order="left")["_hit"]
        missing = frame.join(published.select(dims), on=dims, how="anti")
        if missing.height:
            raise SpecError(
                f"suppress: {what} names cells the table does not publish: "
                f"{show_values([tuple(r) for r in missing.select(dims).rows()])}"
            )
        return hit.fill_null(False).to_numpy()


def _check_suppress(spec: Any, rules: Any, min_frequency: Any, protect_zeros: Any, audit: Any,
                    interval_protection: Any, protection_range: Any) -> None:
    """SpecError for arguments of :meth:`Suppression.suppress` that do not fit together."""
    from protab.magnitude import SensitivityRules

    if not isinstance(spec, TableSpec):
        raise SpecError(f"suppress: expected a protab.TableSpec, not {type(spec).__name__}")
    if spec.sums:
        if not isinstance(rules, SensitivityRules):
            raise SpecError("suppress: a table with sums needs rules=protab.SensitivityRules(...)")
        if min_frequency is not None:
            raise SpecError("suppress: min_frequency is for frequency tables; put it in the rules for sums")
    else:
        if rules is not None:
            raise SpecError("suppress: rules judge sums; a frequency table takes min_frequency=")
        if isinstance(min_frequency, bool) or not isinstance(min_frequency, numbers.Integral) \
                or min_frequency < 1:
            raise SpecError("suppress: a frequency table needs min_frequency, a whole number of 1 or more")
    for flag, value in (("protect_zeros", protect_zeros), ("audit", audit),
                        ("interval_protection", interval_protection)):
        if not isinstance(value, bool):
            raise SpecError(f"suppress: {flag} must be True or False")
    if protection_range is not None and not (audit or interval_protection):
        raise SpecError("suppress: protection_range is a requirement of the audit; pass audit=True "
                        "or interval_protection=True")
    if spec.sums and rules is not None and rules.weights is not None and spec.weight is None:
        raise SpecError("suppress: the rules weigh contributions (weights=...) but the TableSpec has no weight")


def _primary_cells(
    spec: TableSpec, rules: Any, min_frequency: Any, protect_zeros: bool, X: Any, inner: pl.DataFrame,
    published: pl.DataFrame, facts: pl.DataFrame | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """The primary cells, the candidates' order, the singleton inner cells and the default
    singleton method: for sums from the rules (CandidatesNum, "numttHTT"), for counts from
    ``min_frequency`` (CandidatesDefault, "anySum"), as GaussSuppression."""
    from protab.suppression import candidates_default, candidates_num

    n = published["n"].to_numpy()
    if facts is not None:
        primary = facts.select(pl.any_horizontal([pl.col(f"{v}_sensitive") for v in spec.sums]))
        primary = primary.to_series().fill_null(False).to_numpy()
        value = published[spec.sums[0]].fill_null(0).to_numpy()
        return primary, candidates_num(X, value, freq=n), inner["n"].to_numpy() == 1, "numttHTT"
    primary = (n > 0) & (n < int(min_frequency))
    if protect_zeros:
        primary |= n == 0
    singleton = inner["n"].to_numpy() == (0 if protect_zeros else 1)
    return primary, candidates_default(X, n), singleton, "anySum"


def _candidate_order(cost: Any, spec: TableSpec, X: Any, published: pl.DataFrame, order: np.ndarray) -> np.ndarray:
    """The order in which candidates are kept published: the method's default, or ``cost``
    ("frequency", "value", or one number of 0 or more per published cell)."""
    from protab.suppression import candidates_default

    if cost is None:
        return order
    n = published["n"].to_numpy()
    if isinstance(cost, str):
        if cost not in ("frequency", "value"):
            raise SpecError(f"suppress: cost must be 'frequency', 'value' or one number per cell, not {cost!r}")
        if cost == "value" and not spec.sums:
            raise SpecError("suppress: cost='value' needs sums; a frequency table orders by frequency")
        return candidates_default(X, n) if cost == "frequency" else order
    try:
        weights = np.asarray(cost, dtype=float)
    except (TypeError, ValueError):
        raise SpecError("suppress: cost must be 'frequency', 'value' or one number per cell") from None
    if weights.shape != (published.height,):
        raise SpecError(f"suppress: cost needs one number per published cell ({published.height}), "
                        f"got shape {weights.shape}")
    if not np.isfinite(weights).all() or (weights < 0).any():
        bad = np.flatnonzero(~np.isfinite(weights) | (weights < 0))
        raise SpecError(f"suppress: cost must be finite and 0 or more; not at cells {show_values(bad.tolist())}")
    return candidates_default(X, n, weights)


def linked_spec(specs: Sequence[TableSpec]) -> TableSpec:
    """One TableSpec publishing every cell of the linked tables ``specs`` (each cell once)."""
    if not specs or not all(isinstance(x, TableSpec) for x in specs):
        raise SpecError("suppress: linked tables are a non-empty list of protab.TableSpec")
    first = specs[0]
    for other in specs[1:]:
        for attr in ("weight", "sums", "freq", "null_code", "total", "drop_empty", "null_sums"):
            if getattr(other, attr) != getattr(first, attr):
                raise SpecError(f"suppress: linked tables must agree on {attr} (one table of cells is built)")
    dims: dict[str, Any] = {}
    for x in specs:
        if not x.margins:
            raise SpecError("suppress: linked tables need margins (margins=False is a table of its own)")
        for d in x.dimensions:
            if d.column in dims and dims[d.column] != d.hierarchy:
                raise SpecError(
                    f"suppress: dimension {d.column!r} has different hierarchies in the linked tables; a "
                    "common cell must mean the same in every table"
                )
            dims.setdefault(d.column, d.hierarchy)
    return union_spec(specs, weight=first.weight, sums=first.sums, freq=first.freq, null_code=first.null_code,
                      total=first.total, drop_empty=first.drop_empty, null_sums=first.null_sums)


def cells_of(frame: pl.DataFrame, combined: TableSpec, spec: TableSpec) -> pl.DataFrame:
    """The cells of ``spec`` among the cells of the combined linked table: dimensions outside
    ``spec`` at their total, the others within one of its crossings."""
    own = set(spec.columns)
    keep = pl.lit(True)
    for d in combined.columns:
        if d not in own:
            keep = keep & (pl.col(f"{d}_level") == 0)
    inside = pl.lit(False)
    for term in spec.terms:
        ok = pl.lit(True)
        for d in spec.columns:
            if d not in term:
                ok = ok & (pl.col(f"{d}_level") == 0)
        inside = inside | ok
    drop = [c for d in combined.columns if d not in own for c in (d, f"{d}_level")]
    return frame.filter(keep & inside).drop(drop)
