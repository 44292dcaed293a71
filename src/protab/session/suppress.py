"""The Session's cell suppression: primary cells from rules, secondary ones by Gaussian
elimination (:func:`protab.suppression.gauss`, after SSB's GaussSuppression), the attacker's
intervals (:func:`protab.suppression.audit_pattern`), linked tables as one."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import polars as pl

from protab._frames import as_polars, require_columns
from protab.errors import SpecError, show_values
from protab.session.state import SessionState
from protab.session.suppress_disclosure import (
    Disclosure,
    check_disclosure,
    disclosure_cells,
    gauss_extra,
    of_args,
    previous_cells,
    rule_min_frequency,
)
from protab.session.suppress_optimal import check_method
from protab.table import TableSpec, union_spec

if TYPE_CHECKING:  # pragma: no cover
    from protab.magnitude import SensitivityRules
    from protab.suppression import ProtectionLevels


class Suppression(SessionState):
    """Cell suppression (a mixin of :class:`protab.Session`)."""

    # one frame for one TableSpec, one frame per spec for linked tables (a list of TableSpecs)
    @overload
    def suppress(
        self, table: str, spec: TableSpec,
        *, rules: "SensitivityRules | None" = ..., min_frequency: int | None = ..., protect_zeros: bool = ...,
        forced: Any = ..., never: Any = ..., singleton_method: str | None = ..., cost: Any = ..., audit: bool = ...,
        protection_range: float | None = ..., interval_protection: bool | str = ...,
        levels: "ProtectionLevels | None" = ..., linked: str = ..., extend0: bool | None = ...,
        direct_disclosure: Any = ..., coalition: int = ..., k_disclosure: int | None = ..., previous: Any = ...,
        method: str = ..., time_limit: float | None = ...,
    ) -> pl.DataFrame: ...
    @overload
    def suppress(
        self, table: str, spec: Sequence[TableSpec],
        *, rules: "SensitivityRules | None" = ..., min_frequency: int | None = ..., protect_zeros: bool = ...,
        forced: Any = ..., never: Any = ..., singleton_method: str | None = ..., cost: Any = ..., audit: bool = ...,
        protection_range: float | None = ..., interval_protection: bool | str = ...,
        levels: "ProtectionLevels | None" = ..., linked: str = ..., extend0: bool | None = ...,
        direct_disclosure: Any = ..., coalition: int = ..., k_disclosure: int | None = ..., previous: Any = ...,
        method: str = ..., time_limit: float | None = ...,
    ) -> list[pl.DataFrame]: ...
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
        interval_protection: bool | str = False,
        levels: "ProtectionLevels | None" = None,
        linked: str = "global",
        extend0: bool | None = None,
        direct_disclosure: Any = None, coalition: int = 1, k_disclosure: int | None = None, previous: Any = None,
        method: str = "gauss", time_limit: float | None = None,
    ) -> pl.DataFrame | list[pl.DataFrame]:
        """Cell suppression: primary cells from rules, secondary ones by Gaussian elimination
        (docs/methods.md §6.4; :func:`protab.suppression.gauss`).

        Frequency tables (no sums): cells with ``0 < n < min_frequency`` are primary (zeros too
        with ``protect_zeros``: then every listed code counts, extend0 = "all"), as
        GaussSuppression's SuppressSmallCounts with ``maxN = min_frequency - 1``; singletons
        ("anySum") are the inner cells of one record, or the empty ones with ``protect_zeros``.
        Magnitude tables (sums): a cell is primary where ``rules`` mark any sums variable
        sensitive; candidates in decreasing |value| (CandidatesNum), singletons by "numttHTT".
        ``forced`` / ``never``: frames of cells that must / must not be suppressed. ``cost``:
        "frequency", "value" or a number >= 0 per cell (larger = dearer). Returns every published
        cell, null where suppressed, and ``suppressed``: "primary", "secondary" or "no".

        ``audit=True`` adds the attacker's interval (``lo``, ``up``; HiGHS LPs,
        :func:`protab.suppression.intervals`) and ``protected``: no suppressed cell exactly
        disclosed, a primary cell with ``up - lo >= protection_range``, the p% levels of the
        rules and ``levels`` (:class:`protab.ProtectionLevels`: lower, upper and sliding
        protection; implies the audit). ``interval_protection`` adds suppressions ("secondary")
        until every primary cell is protected: True/"lp" by LPs (:func:`protab.suppression.protect`),
        "gauss" in candidate order as GaussSuppression (:func:`protab.suppression.protect_in_order`).

        Linked tables: a list of TableSpecs over the same microdata, by default suppressed as one
        table (the union of their crossings, GaussSuppression's global method): a common cell is
        suppressed in all or none; one frame per spec; ``linked="local"``, "consistent" or
        "super-consistent" protects each from its own inner cells (:mod:`protab.suppression.linked`;
        audit per table or joint: ``interval_system``). Shared dimensions need one hierarchy;
        weight, sums, freq, null_code, total, drop_empty and where must agree. ``extend0=False``:
        empty cells are structural zeros (frequency tables, without ``protect_zeros``).
        ``direct_disclosure``/``coalition``, ``k_disclosure``, ``previous``: attribute disclosure and
        an earlier release's pattern (methods §6.4; :mod:`protab.session.suppress_disclosure`).
        ``method="optimal"``: least cost; ``"modular"``: optimal subtables made consistent (§6.4).
        """
        check_method(method, time_limit, linked, interval_protection)
        args = dict(rules=rules, min_frequency=min_frequency, protect_zeros=protect_zeros, forced=forced,
                    never=never, singleton_method=singleton_method, cost=cost, audit=audit,
                    protection_range=protection_range, interval_protection=interval_protection, levels=levels,
                    extend0=extend0, direct_disclosure=direct_disclosure, coalition=coalition,
                    k_disclosure=k_disclosure, previous=previous, method=method, time_limit=time_limit)
        return self._suppress_checked(table, spec, linked, args)  # type: ignore[no-any-return]  # Any: one or a list

    def _suppress_checked(self, table: str, spec: Any, linked: str, args: dict[str, Any]) -> Any:
        """:meth:`suppress` after its arguments are gathered in ``args``: checked, then one table
        or linked tables."""
        args["min_frequency"] = rule_min_frequency(args)
        if isinstance(spec, (list, tuple)):
            return self._suppress_linked(table, spec, linked, args)
        if linked != "global":
            raise SpecError("suppress: linked= is for a list of TableSpecs (linked tables)")
        _check_extend0(spec, args["protect_zeros"], args["extend0"])
        _check_suppress(spec, args["rules"], args["min_frequency"], args["protect_zeros"], args["audit"],
                        args["interval_protection"], args["protection_range"])
        _check_levels(spec, args["rules"], args["levels"])
        check_disclosure(spec, args)
        return self._suppress_one(table, spec, **args)

    def _suppress_linked(self, table: str, specs: Sequence[TableSpec], linked: str,
                         args: dict[str, Any]) -> list[pl.DataFrame]:
        """:meth:`suppress` of linked tables: as one combined table, then cut per spec (the
        global mode), or each table from its own inner cells (``linked``)."""
        from protab.suppression.linked import LINKED_MODES

        if len({s.where for s in specs if isinstance(s, TableSpec)}) > 1:  # their common cells may disagree
            _check_shared(self, table, specs)
        combined = linked_spec(specs)
        if args["cost"] is not None and not isinstance(args["cost"], str):
            raise SpecError("suppress: linked tables take cost='frequency' or 'value', not one number per cell")
        if linked == "global":
            out = self.suppress(table, combined, **args)
            if args["audit"] or args["interval_protection"] or args["levels"] is not None:
                out = out.with_columns(interval_system=pl.lit("joint"))
            return [cells_of(out, combined, s) for s in specs]
        if linked not in LINKED_MODES:
            raise SpecError(f"suppress: linked must be one of {', '.join(LINKED_MODES)}, not {linked!r}")
        if of_args(args).active:
            raise NotImplementedError(f"suppress: disclosure rules and previous= in the {linked!r} mode of linked "
                                      "tables are not implemented; use linked='global'")
        if args["interval_protection"]:
            raise NotImplementedError("suppress: the interval protection of linked tables in the "
                                      f"{linked!r} mode is not implemented; use linked='global'")
        _check_suppress(combined, args["rules"], args["min_frequency"], args["protect_zeros"], args["audit"],
                        False, args["protection_range"])
        _check_levels(combined, args["rules"], args["levels"])
        _check_extend0(combined, args["protect_zeros"], args["extend0"])
        frames: list[pl.DataFrame] = self._suppress_one(table, combined, **args, linked=(specs, linked))
        return frames

    def _suppress_one(self, table: str, spec: TableSpec, *, rules: Any, min_frequency: int | None,
                      protect_zeros: bool, forced: Any, never: Any, singleton_method: str | None, cost: Any,
                      audit: bool, protection_range: float | None, interval_protection: bool | str,
                      levels: Any, extend0: bool | None, linked: Any = None, direct_disclosure: Any = None,
                      coalition: int = 1, k_disclosure: Any = None, previous: Any = None,
                      method: str = "gauss", time_limit: Any = None) -> Any:
        """:meth:`suppress` of one checked table: primary cells, Gaussian elimination, the audit
        (``linked``: (specs, mode) of linked tables in a mode other than global: their frames)."""
        X, inner, published, facts = self._suppression_inputs(table, spec, rules, protect_zeros,
                                                              diagnostics=levels is not None and levels.rules,
                                                              extend0=extend0)
        primary, order, singleton, sing_method = _primary_cells(spec, rules, min_frequency, protect_zeros, X, inner,
                                                           published, facts)
        rule = Disclosure(direct_disclosure, coalition, k_disclosure, previous)
        primary, order, sing_method, extra = disclosure_cells(spec, rule, X, published, primary, order, sing_method)
        if method != "gauss" and extra is not None and extra.shape[1]:
            raise NotImplementedError(f"suppress: k_disclosure in the {method} mode is not implemented; "
                                      "use method='gauss'")
        order = order if method != "gauss" else _candidate_order(cost, spec, X, published, order)
        dims = list(spec.columns)
        forced_mask = self._cell_mask(published, dims, forced, "forced")
        never_mask = self._cell_mask(published, dims, never, "never")
        primary, forced_mask, never_mask = previous_cells(spec, rule, published, primary, forced_mask, never_mask)
        if linked is not None:
            req = None
            if audit or levels is not None:
                z = published[spec.sums[0] if spec.sums else "n"].fill_null(0).to_numpy().astype(float)
                req = _audit_requirements(spec, rules, facts, z, primary | forced_mask, protection_range, levels)
            return _linked_frames(spec, linked, X, inner, published, primary | forced_mask, order, forced_mask,
                                  never_mask, singleton, singleton_method or sing_method, req)
        if method != "gauss":
            from protab.session.suppress_modular import modular_pattern
            from protab.session.suppress_optimal import optimal_pattern

            solve = optimal_pattern if method == "optimal" else modular_pattern
            suppressed = solve(spec, rules, X, published, facts, primary, forced_mask, never_mask, cost,
                               protection_range, levels, time_limit, _audit_requirements)
        else:
            suppressed = gauss_extra(X, published["n"].to_numpy().astype(float), primary, extra,
                                     inner["n"].to_numpy(), candidates=order, forced=forced_mask, never=never_mask,
                                     singleton=singleton, singleton_method=singleton_method or sing_method)
        audit_cols: list[pl.Series] = []
        if audit or interval_protection or levels is not None or method != "gauss":
            suppressed, audit_cols = self._audit_suppression(
                spec, rules, X, published, facts, suppressed, primary | forced_mask, protection_range,
                interval_protection, levels=levels, order=order, never=never_mask,
            )
        label = np.where(primary | forced_mask, "primary", np.where(suppressed, "secondary", "no"))
        values = ["n"] + (["w"] if spec.weight else []) + list(spec.sums)
        hide = pl.Series(suppressed)
        return published.with_columns(
            [*(pl.when(hide).then(None).otherwise(pl.col(c)).alias(c) for c in values if c in published.columns),
             pl.Series("suppressed", label), *audit_cols]
        )

    def _suppression_inputs(
        self, table: str, spec: TableSpec, rules: Any, protect_zeros: bool, diagnostics: bool = False,
        extend0: bool | None = None,
    ) -> tuple[Any, pl.DataFrame, pl.DataFrame, pl.DataFrame | None]:
        """X, the inner and the published cells, and for a magnitude table the rules' columns of
        every published cell (with the top lists and smallest values the audit needs), from one
        scan. Empty cells are inner cells where zero cells are a rule."""
        if not spec.sums:
            ext: bool | str = "all" if protect_zeros else (True if extend0 is None else extend0)
            X, inner, published = self.model_matrix(table, spec, extend0=ext)
            return X, inner, published, None
        zero_rule = rules is not None and rules.zero
        with self.engine.errors(table), self._run(
            table, spec, extend0="all" if zero_rule else False, top_k=rules.top_k, holding=rules.holding
        ) as run:
            inner = run.inner_frame()
            X = run.matrix()
            facts = run.sensitivity(rules, diagnostics=diagnostics)
        dims = list(spec.columns)
        values = [*dims, *(f"{d}_level" for d in dims), "n", *(["w"] if spec.weight else []), *spec.sums]
        return X, inner, facts.select(values), facts

    @staticmethod
    def _audit_suppression(
        spec: TableSpec, rules: Any, X: Any, published: pl.DataFrame, facts: pl.DataFrame | None,
        suppressed: np.ndarray, primary: np.ndarray, protection_range: float | None, protect: bool | str, *,
        levels: Any = None, order: Any = None, never: Any = None,
    ) -> tuple[np.ndarray, list[pl.Series]]:
        """Attacker intervals of the suppressed cells (and, with ``protect``, more suppressions
        until every primary cell meets its requirement): (suppressed, [lo, up, protected]).
        ``facts``: the rules' columns of a magnitude table (top lists, smallest values)."""
        from protab.suppression import audit_pattern, protect_in_order
        from protab.suppression import protect as add_suppressions

        value_col = spec.sums[0] if spec.sums else "n"
        z = published[value_col].fill_null(0).to_numpy().astype(float)
        req = _audit_requirements(spec, rules, facts, z, primary, protection_range, levels)
        if protect == "gauss":
            suppressed = protect_in_order(X, z, suppressed, primary, candidates=order, never=never, **req)
        elif protect:
            suppressed = add_suppressions(X, z, suppressed, primary, **req)
        frame = audit_pattern(X, z, suppressed, primary=primary, **req)
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
    for flag, value in (("protect_zeros", protect_zeros), ("audit", audit)):
        if not isinstance(value, bool):
            raise SpecError(f"suppress: {flag} must be True or False")
    if not isinstance(interval_protection, bool) and interval_protection not in ("lp", "gauss"):
        raise SpecError("suppress: interval_protection must be True or False, 'lp' (the same as True) or 'gauss'")
    if protection_range is not None and not (audit or interval_protection):
        raise SpecError("suppress: protection_range is a requirement of the audit; pass audit=True "
                        "or interval_protection=True")
    if spec.sums and rules is not None and rules.weights is not None and spec.weight is None:
        raise SpecError("suppress: the rules weigh contributions (weights=...) but the TableSpec has no weight")


def _check_extend0(spec: TableSpec, protect_zeros: bool, extend0: Any) -> None:
    """``extend0`` is None (the default) or False for a frequency table without protect_zeros."""
    if extend0 is None:
        return
    if extend0 is not False:
        raise SpecError("suppress: extend0 is None (empty inner cells added for frequency tables) or False")
    if spec.sums or protect_zeros:
        raise SpecError("suppress: extend0=False is for frequency tables without protect_zeros (a protected "
                        "zero needs its empty inner cells)")


def _linked_frames(spec: TableSpec, linked: Any, X: Any, inner: pl.DataFrame, published: pl.DataFrame,
                   primary: np.ndarray, order: np.ndarray, forced: np.ndarray, never: np.ndarray,
                   singleton: np.ndarray, method: str, req: dict[str, Any] | None = None) -> list[pl.DataFrame]:
    """The frames of linked tables protected in ``linked[1]`` mode (:func:`gauss_linked`):
    every table with its own decisions, cut from the combined table ``spec``; with ``req``
    (the audit's requirements) the intervals of the mode (:func:`linked_intervals`)."""
    from protab.suppression.linked import INTERVAL_SYSTEMS, copies_by_records, gauss_linked, linked_intervals

    specs, mode = linked
    cells = published.with_row_index("_cell")
    members = []
    for s in specs:
        mask = np.zeros(published.height, dtype=bool)
        mask[cells_of(cells, spec, s)["_cell"].to_numpy()] = True
        members.append(mask)
    members = copies_by_records(X, members)
    value = published[spec.sums[0] if spec.sums else "n"].fill_null(0).to_numpy().astype(float)
    freq = None if spec.sums else inner["n"].to_numpy().astype(float)
    supp = gauss_linked(X, value, primary, members, mode=mode, candidates=order, forced=forced, never=never,
                        singleton=singleton, singleton_method=method, inner_freq=freq)
    audit_cols: list[list[pl.Series]] = [[] for _ in specs]
    if req is not None:
        lo, up, ok = linked_intervals(X, value, supp, members, mode=mode, primary=primary, **req)
        audit_cols = [[pl.Series("lo", lo[t]), pl.Series("up", up[t]), pl.Series("protected", ok[t]),
                       pl.Series("interval_system", [INTERVAL_SYSTEMS[mode]] * published.height)]
                      for t in range(len(specs))]
    values = ["n"] + (["w"] if spec.weight else []) + list(spec.sums)
    out = []
    for t, s in enumerate(specs):
        hide = pl.Series(supp[t])
        label = np.where(primary, "primary", np.where(supp[t], "secondary", "no"))
        frame = cells.with_columns(
            [*(pl.when(hide).then(None).otherwise(pl.col(c)).alias(c) for c in values if c in cells.columns),
             pl.Series("suppressed", label), *audit_cols[t]])
        out.append(cells_of(frame, spec, s).drop("_cell"))
    return out


def _check_levels(spec: TableSpec, rules: Any, levels: Any) -> None:
    """SpecError for ``levels`` that are not a ProtectionLevels or ask for rules the table lacks."""
    from protab.suppression import ProtectionLevels

    if levels is None:
        return
    if not isinstance(levels, ProtectionLevels):
        raise SpecError(f"suppress: levels must be a protab.ProtectionLevels, not {type(levels).__name__}")
    if levels.rules and (not spec.sums or not (rules.dominance or rules.p_percent is not None or rules.pq)):
        raise SpecError("suppress: ProtectionLevels(rules=True) needs a table with sums and rules holding "
                        "dominance, p_percent or pq (the rules that imply protection levels)")


def _audit_requirements(spec: TableSpec, rules: Any, facts: pl.DataFrame | None, z: np.ndarray,
                        primary: np.ndarray, protection_range: float | None, levels: Any) -> dict[str, Any]:
    """The audit's keywords: the attacker's bounds (0 or more unless the variable has negative
    values) and the requirements: ``protection_range``, the p% levels of the rules (always, as
    before ``levels`` existed), and ``levels`` (its distances, and with ``rules`` the levels of
    every rule), combined by taking the largest distance of each kind."""
    from protab.suppression import p_percent_protection, rule_levels

    value_col = spec.sums[0] if spec.sums else "n"
    lower: float | None = 0.0
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
    if spec.sums and rules is not None and rules.p_percent is not None and rules.holding is not None \
            and (levels is None or not levels.rules):
        raise NotImplementedError(
            "suppress: the audit of the p% rule over holdings is not implemented (its protection "
            "levels need the holdings' two largest contributions); audit with protection_range, "
            "ProtectionLevels(rules=True) (the rules' shares, holdings included), or without holding"
        )
    pp: dict[str, Any] = {}
    if facts is not None and rules is not None and rules.p_percent is not None and rules.holding is None:
        lists = facts[f"{value_col}_top"]  # the rules' top lists hold two values at least
        pp = dict(p_percent=rules.p_percent, x1=lists.list.get(0, null_on_oob=True).fill_null(0).to_numpy(),
                  x2=lists.list.get(1, null_on_oob=True).fill_null(0).to_numpy())
    if levels is None:
        return {**req, **pp}
    L, U, R = levels.distances(z, primary)
    if pp:
        plev = np.where(primary, p_percent_protection(pp["p_percent"], z, pp["x1"], pp["x2"]), 0.0)
        L, U = np.maximum(L, plev), np.maximum(U, plev)
    if levels.rules:
        assert facts is not None
        shares = {n: facts[f"{value_col}_dominance_{n}"].to_numpy() for n in rules.shares}
        rlev = np.where(primary, rule_levels(rules, z, shares), 0.0)
        L, U = np.maximum(L, rlev), np.maximum(U, rlev)
    R = np.maximum(R, req.pop("protection_range", 0.0))
    return {**req, "protection_lower": L, "protection_upper": U, "protection_range": R}


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
        sensitive = facts.select(pl.any_horizontal([pl.col(f"{v}_sensitive") for v in spec.sums]))
        primary = sensitive.to_series().fill_null(False).to_numpy()
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
                      total=first.total, drop_empty=first.drop_empty, null_sums=first.null_sums, where=first.where)


def _check_shared(session: Any, table: str, specs: Sequence[TableSpec]) -> None:
    """Linked tables with different ``where`` filters: InputError naming two tables and a common
    cell they give different values (:func:`check_shared_cells`), else SpecError (one table of
    cells is built from one set of records)."""
    from protab.suppression.linked import check_shared_cells

    first = specs[0]
    values = ["n"] + (["w"] if first.weight else []) + list(first.sums)
    frames = [session.tabulate(table, s) for s in specs]
    check_shared_cells(frames, [list(s.columns) for s in specs], values,
                       names=[f"table {t + 1} ({' x '.join(s.columns)})" for t, s in enumerate(specs)])
    raise SpecError("suppress: linked tables must have the same where filter (one table of cells is built)")


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
