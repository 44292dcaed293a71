"""Disclosure rules of the query service, per dataset (serve.toml ``[datasets.<name>.rules]``
or a rules file named by ``rules_file``): parsed and checked when the config is loaded, then
applied by the broker to every request of every front (``/v1/table``, ``/v1/query``, the web
builder, the PostgreSQL front) before any scan.

The rules (Hundepool et al. 2012, Statistical Disclosure Control, ch. 4 and 5: table design
rules and minimum frequencies, here on perturbed values):

- ``max_cells``, ``max_dims``: cells and dimensions (grouped and filtered) of one crossing;
- ``min_population``: the filtered population's perturbed total (the service's old rule);
- ``blocked``: combinations of variables at levels that no crossing may hold together
  (``["occupation", "municipality"]``: the finest occupation with municipalities);
- ``area``: a geography with a minimum perturbed population per level, applied per area
  (the areas below it are withheld from every answer and named), and the classification
  levels allowed with each of its levels (``detail``).

A request's *uses* are, per crossing, each variable (a hierarchy's dimension, or a flat
dimension) with the finest level it is used at; a rule looks at uses only, never at data. A
refusal (:class:`RuleRefused`) names the rule and what would pass. Thresholds are secrets:
no message shows one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from protab.errors import SpecError, show_values
from protab.request import schema
from protab.serve.query import QueryRefused

if TYPE_CHECKING:  # pragma: no cover
    from protab.session import Session

AREA = schema.Table(
    {"dim": schema.Str(), "min_population": schema.Dict(schema.Int(1)), "detail": schema.Dict(schema.Dict(schema.Str()))},
    required=("dim",),
)
RULES = schema.Table(
    {
        "max_cells": schema.Int(1, 100_000_000),
        "max_dims": schema.Int(1, 64),
        "min_population": schema.Int(1),
        "group_min_difference": schema.Int(1),
        "group_zero_atoms": schema.Str(choices=("refuse", "allow")),
        "blocked": schema.List(schema.List(schema.Str(), unique=True), nonempty=False),
        "area": AREA,
    }
)
RULES_FILE = schema.Dict(RULES)
WITHHELD_RULE = "area.min_population"


class RuleRefused(QueryRefused):
    """HTTP 400 (SQLSTATE 42000): a request a disclosure rule refuses; ``rule`` names the rule
    (``blocked``, ``max_dims``, ``area.detail``, ...), ``advice`` what would pass."""

    def __init__(self, dataset: str, rule: str, why: str, advice: str) -> None:
        super().__init__(f"refused by the disclosure rule {rule} of dataset {dataset!r}: {why}; {advice}",
                         rule=rule, advice=advice)


@dataclass(frozen=True)
class Rules:
    """The checked rules of one dataset. ``variables``: each variable's level columns, coarsest
    first; ``column_level``: a column → (its variable, its level number, 1 = coarsest).
    ``max_cells`` and ``min_population`` None: the service's top-level values."""

    dataset: str
    variables: Mapping[str, tuple[str, ...]]
    column_level: Mapping[str, tuple[str, int]]
    max_cells: int | None = None
    max_dims: int | None = None
    min_population: int | None = field(default=None, repr=False)
    group_min_difference: int | None = field(default=None, repr=False)
    #: custom groups: a part with no records in a crossed cell is refused or allowed (protab.serve.atoms)
    group_zero_atoms: str = "refuse"
    blocked: tuple[tuple[str, ...], ...] = ()
    area: str | None = None
    area_min_population: Mapping[str, int] = field(default_factory=dict, repr=False)
    area_detail: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    # -- uses of a request ---------------------------------------------------------------------
    def uses(self, columns: Iterable[str] = (), levels: Mapping[str, int] | None = None) -> dict[str, int]:
        """The variables a crossing uses with their finest level: ``columns`` are dataset
        columns (SQL dims and filters, flat-served dims), ``levels`` variables shown at a level."""
        out: dict[str, int] = {}
        for c in columns:
            var, k = self.column_level[c]
            out[var] = max(out.get(var, 0), k)
        for var, k in (levels or {}).items():
            out[var] = max(out.get(var, 0), k)
        return out

    def name(self, var: str, level: int) -> str:
        return self.variables[var][level - 1]

    # -- the checks before a scan --------------------------------------------------------------
    def check(self, crossings: Sequence[Mapping[str, int]], table: bool) -> None:
        """Every rule on every crossing's uses; ``table``: advice worded for a table request."""
        for uses in crossings:
            self._max_dims(uses)
            self._blocked(uses, table)
            self._detail(uses, table)

    def refuse(self, rule: str, why: str, advice: str) -> RuleRefused:
        return RuleRefused(self.dataset, rule, why, advice)

    def _max_dims(self, uses: Mapping[str, int]) -> None:
        if self.max_dims is not None and len(uses) > self.max_dims:
            shown = ", ".join(self.name(v, k) for v, k in uses.items())
            raise self.refuse("max_dims", f"a crossing uses {len(uses)} dimensions, grouped and filtered "
                              f"({shown}); the dataset allows {self.max_dims}",
                              f"drop {len(uses) - self.max_dims} of them (a filter counts as a dimension)")

    def _coarser(self, var: str, level: int, table: bool) -> str | None:
        """Advice to use ``var`` one level coarser than ``level``, or None at its coarsest."""
        if level <= 1:
            return None
        coarse, fine = self.name(var, level - 1), self.name(var, level)
        return f"use {var} at level {coarse!r}" if table else f"use {coarse} instead of {fine}"

    def _blocked(self, uses: Mapping[str, int], table: bool) -> None:
        for k, combo in enumerate(self.blocked):
            items = [self.column_level[c] for c in combo]
            if all(uses.get(var, 0) >= level for var, level in items):
                ways = [a for var, level in items if (a := self._coarser(var, level, table)) is not None]
                ways.append(f"drop {' or '.join(var for var, _ in items)}")
                raise self.refuse(f"blocked[{k}]", f"{' × '.join(combo)} may not be tabulated together "
                                  "(nor at finer levels)", ", or ".join(ways))

    def _detail(self, uses: Mapping[str, int], table: bool) -> None:
        if self.area is None or self.area not in uses:
            return
        levels = self.variables[self.area]
        for area_level, allowed in self.area_detail.items():
            if uses[self.area] < levels.index(area_level) + 1:
                continue
            for var, most in allowed.items():
                k = self.column_level[most][1]
                if uses.get(var, 0) > k:
                    fine = self.name(var, uses[var])
                    advice = f"use {var} at level {most!r}" if table else f"use {most} instead of {fine}"
                    coarse = self._coarser(self.area, levels.index(area_level) + 1, table)
                    raise self.refuse(f"area.detail.{area_level}", f"with {area_level} (or finer), {var} may be "
                                      f"used at level {most} at most, not {fine}",
                                      advice + (f", or {coarse}" if coarse else ""))


# -- withheld areas --------------------------------------------------------------------------
@dataclass(frozen=True)
class Withheld:
    """The areas of a dataset's ``area`` withheld by ``area.min_population``: per level number,
    the codes (an area below its level's minimum, and every area inside one)."""

    rules: Rules
    codes: Mapping[int, frozenset[str]]

    def __bool__(self) -> bool:
        return any(self.codes.values())

    def level_of(self, column: str) -> int | None:
        """The area level of a dataset column, or None if it is not a level of the area."""
        var, k = self.rules.column_level.get(column, (None, 0))
        return k if var is not None and var == self.rules.area else None

    def check_filters(self, filters: Sequence[tuple[str, str, Sequence[str]]], table: bool) -> None:
        """A filter that selects withheld areas only is refused: its population is one of them."""
        for col, op, values in filters:
            k = self.level_of(col)
            if k is None or op != "in" or not values:
                continue
            gone = self.codes.get(k, frozenset())
            if all(v in gone for v in values):
                raise self.rules.refuse(WITHHELD_RULE, f"the filter on {col} selects withheld areas only "
                                        f"({show_values(sorted(values))}: an area below the minimum population "
                                        "of its level, or inside one)", "filter on an area that answers do not "
                                        "withhold (they name the withheld ones), or drop the filter")

    def check_members(self, col: str, values: Iterable[str]) -> None:
        """A custom group of area codes holding a withheld area is refused: a group of it alone
        would publish it."""
        k = self.level_of(col)
        gone = sorted(set(values) & self.codes.get(k, frozenset())) if k is not None else []
        if gone:
            raise self.rules.refuse(WITHHELD_RULE, f"a group holds withheld areas ({show_values(gone)}: below the "
                                    "minimum population of their level, or inside one)",
                                    "leave the withheld areas out of the groups")

    def note(self, shown: Mapping[str, Mapping[int, Iterable[str]]]) -> dict[str, list[str]]:
        """Withheld codes among those an answer would show: ``shown`` maps a column to the codes
        it shows per area level; the result maps a level column to its withheld codes."""
        out: dict[str, set[str]] = {}
        for levels in shown.values():
            for k, codes in levels.items():
                hit = self.codes.get(k, frozenset()).intersection(codes)
                if hit:
                    out.setdefault(self.rules.name(self.rules.area or "", k), set()).update(hit)
        return {c: sorted(v) for c, v in out.items()}

    def drop(self, frame: pl.DataFrame, columns: Mapping[str, int | None]) -> pl.DataFrame:
        """``frame`` without the rows of withheld areas: ``columns`` maps a column to its area
        level (None: the level is the row's ``<column>_level``, a hierarchy served whole)."""
        keep = []
        for col, k in columns.items():
            if k is not None:
                keep.append(~pl.col(col).cast(pl.String).is_in(sorted(self.codes.get(k, ()))).fill_null(False))
                continue
            for j, codes in self.codes.items():
                keep.append(~((pl.col(f"{col}_level") == j) & pl.col(col).cast(pl.String).is_in(sorted(codes))))
        return frame.filter(pl.all_horizontal(keep)) if keep else frame


def notice(dataset: str, withheld: Mapping[str, Sequence[str]]) -> str:
    """The human text of an answer's withheld areas (the PostgreSQL front's NOTICE)."""
    parts = "; ".join(f"{col} {', '.join(codes)}" for col, codes in withheld.items())
    return (f"withheld by the disclosure rule {WITHHELD_RULE} of dataset {dataset!r} (areas below the minimum "
            f"population of their level): {parts}")


def withheld_areas(s: Session, ds: Any, ptable: Any) -> Withheld:
    """The areas of the broker's dataset ``ds`` below their level's minimum, from the
    *perturbed* totals of its unfiltered table of the area (``Session.cell_key``, the values any
    answer publishes; no threshold), computed once at start-up; an area inside a withheld one is
    withheld too."""
    from protab.hierarchy import Hierarchy
    from protab.table import TableSpec

    rules = ds.conf.rules or parse(ds.name, None, ds.conf.dims, ds.conf.hierarchies, "")
    if rules.area is None or not rules.area_min_population:
        return Withheld(rules, {})
    area, levels = rules.area, rules.variables[rules.area]
    h = ds.hierarchies.get(area) or Hierarchy.flat(list(ds.codes[area]))
    frame = s.cell_key(ds.counts_table or ds.conf.table, TableSpec({area: h}, null_code=ds.conf.null_code), ptable)
    low: dict[int, set[str]] = {}
    for col, least in rules.area_min_population.items():
        k = levels.index(col) + 1
        small = frame.filter((pl.col(f"{area}_level") == k) & (pl.col("n_pert").fill_null(0) < least))
        low[k] = set(small[area].cast(pl.String).to_list())
    code_table = ds.conf.code_lists[area].table
    codes: dict[int, frozenset[str]] = {}
    for k, col in enumerate(levels, start=1):
        inside = pl.any_horizontal([pl.col(levels[j - 1]).is_in(sorted(low.get(j, ()))) for j in range(1, k + 1)])
        codes[k] = frozenset(code_table.filter(inside)[col].to_list())
    return Withheld(rules, codes)


# -- parsing at config load -------------------------------------------------------------------
def variables_of(dims: Sequence[str], hierarchies: Mapping[str, Sequence[str]]) -> tuple[dict[str, tuple[str, ...]],
                                                                                          dict[str, tuple[str, int]]]:
    """Each variable's level columns and each column's (variable, level): a hierarchy's
    dimension is a variable with its levels; a dimension in no hierarchy is one of one level."""
    variables: dict[str, tuple[str, ...]] = {d: tuple(cs) for d, cs in hierarchies.items()}
    column_level: dict[str, tuple[str, int]] = {}
    for var, cols in variables.items():
        for k, c in enumerate(cols, start=1):
            column_level.setdefault(c, (var, k))
    for d in dims:
        if d not in column_level:
            variables[d] = (d,)
            column_level[d] = (d, 1)
    return variables, column_level


def parse(name: str, raw: Mapping[str, Any] | None, dims: Sequence[str], hierarchies: Mapping[str, Sequence[str]],
          where: str) -> Rules:
    """The rules of dataset ``name`` (``raw``: its checked rules table, or None), with the
    names checked against its dims and hierarchies; SpecError naming the key at fault."""
    variables, column_level = variables_of(dims, hierarchies)
    rules = Rules(name, variables, column_level)
    if not raw:
        return rules
    key = f"{where}: datasets.{name}.rules"
    blocked = tuple(tuple(c) for c in raw.get("blocked", ()))
    for k, combo in enumerate(blocked):
        _check_combo(combo, column_level, f"{key}.blocked[{k}]")
    rules = replace(rules, max_cells=raw.get("max_cells"), max_dims=raw.get("max_dims"),
                    min_population=raw.get("min_population"), group_min_difference=raw.get("group_min_difference"),
                    group_zero_atoms=raw.get("group_zero_atoms", "refuse"), blocked=blocked)
    if "area" in raw:
        rules = _area(rules, raw["area"], f"{key}.area")
    return rules


def _level_name(col: str, column_level: Mapping[str, tuple[str, int]], key: str) -> tuple[str, int]:
    if col not in column_level:
        raise SpecError(f"{key} names {col!r}, which is not a dimension or a level of one "
                        f"({show_values(sorted(column_level), 20)})")
    return column_level[col]


def _check_combo(combo: Sequence[str], column_level: Mapping[str, tuple[str, int]], key: str) -> None:
    items = [_level_name(c, column_level, key) for c in combo]
    if len(items) < 2:
        raise SpecError(f"{key}: a blocked combination names at least two variables (to keep one from every "
                        "answer, take it out of the dataset's dims)")
    variables = [v for v, _ in items]
    twice = sorted({v for v in variables if variables.count(v) > 1})
    if twice:
        raise SpecError(f"{key}: names two levels of the same variable {twice[0]!r}; a combination is of "
                        "different variables, each at one level")


def _area(rules: Rules, raw: Mapping[str, Any], key: str) -> Rules:
    """``area``: its dimension, the minimum per level and the detail allowed per level."""
    dim = raw["dim"]
    if dim not in rules.variables:
        known = sorted(rules.variables)
        hint = f" (it is a level of {rules.column_level[dim][0]!r}: name that)" if dim in rules.column_level else ""
        raise SpecError(f"{key}.dim names {dim!r}, which is not a dimension of the dataset{hint}; "
                        f"variables: {', '.join(known)}")
    levels = rules.variables[dim]
    for what in ("min_population", "detail"):
        bad = [lv for lv in raw.get(what, {}) if lv not in levels]
        if bad:
            raise SpecError(f"{key}.{what}.{bad[0]}: {bad[0]!r} is not a level of {dim!r} "
                            f"(levels: {', '.join(levels)})")
    detail: dict[str, dict[str, str]] = {}
    for lv in sorted(raw.get("detail", {}), key=levels.index):
        detail[lv] = dict(raw["detail"][lv])
        for var, most in detail[lv].items():
            _check_detail(rules, dim, var, most, f"{key}.detail.{lv}.{var}")
    _check_monotone(rules, detail, key)
    return replace(rules, area=dim, area_min_population=dict(raw.get("min_population", {})), area_detail=detail)


def _check_detail(rules: Rules, area: str, var: str, most: str, key: str) -> None:
    if var not in rules.variables:
        raise SpecError(f"{key}: {var!r} is not a variable of the dataset ({', '.join(sorted(rules.variables))})")
    if var == area:
        raise SpecError(f"{key}: the area's own levels are not limited by detail; name another variable")
    if most not in rules.variables[var]:
        raise SpecError(f"{key} = {most!r} is not a level of {var!r} (levels: {', '.join(rules.variables[var])})")


def _check_monotone(rules: Rules, detail: Mapping[str, Mapping[str, str]], key: str) -> None:
    """A finer area level may not allow more detail than a coarser one (the coarser rule holds
    for it too): contradictory rules are refused."""
    seen: dict[str, tuple[str, int]] = {}
    for lv, allowed in detail.items():
        for var, most in allowed.items():
            k = rules.column_level[most][1]
            if var in seen and k > seen[var][1]:
                raise SpecError(f"{key}.detail.{lv}.{var} = {most!r} contradicts detail.{seen[var][0]}.{var}: "
                                f"{lv} is finer than {seen[var][0]}, so it may not allow a finer level of {var}")
            if var not in seen or k < seen[var][1]:
                seen[var] = (lv, k)


def read_rules_file(path: Path, datasets: Iterable[str], where: str) -> dict[str, Mapping[str, Any]]:
    """The rules file named by ``rules_file``: one table per dataset (``[persons]``), each as
    ``[datasets.<name>.rules]``. Its thresholds are secrets: errors name the key, not the value."""
    from protab.request.loaders import read_toml

    raw = read_toml(path, SpecError)
    try:
        schema.check(raw, schema.Table({name: RULES for name in datasets}))
    except SpecError as exc:
        msg = str(exc).replace("request: ", "", 1).replace("the request", "the file")
        msg = re.sub(r" \([^()]*\)$", "", re.sub(r", not [^,]*$", "", msg))
        raise SpecError(f"{where}: rules_file {str(path)!r}: {msg}") from None
    return raw


def attach(datasets: Mapping[str, Any], cfg: Mapping[str, Any], base: Path, where: str) -> dict[str, Any]:
    """The datasets (``DatasetConfig``) with their rules (``rules``), from their
    ``[datasets.<name>.rules]`` and the ``rules_file``; a dataset's rules in both is refused."""
    from_file: Mapping[str, Mapping[str, Any]] = {}
    if cfg.get("rules_file"):
        from_file = read_rules_file(base / cfg["rules_file"], datasets, where)
    out = {}
    for name, ds in datasets.items():
        inline = cfg["datasets"][name].get("rules")
        if inline is not None and name in from_file:
            raise SpecError(f"{where}: datasets.{name}.rules and the rules_file both give rules for {name!r}; "
                            "keep one")
        raw = inline if inline is not None else from_file.get(name)
        out[name] = replace(ds, rules=parse(name, raw, ds.dims, ds.hierarchies, where))
    return out


# -- a request's checks, for the broker ----------------------------------------------------------
def check_query(withheld: Withheld, grouping_sets: Sequence[Sequence[str]], dims: Sequence[str],
                filters: Sequence[tuple[str, str, Sequence[str]]], codes: Mapping[str, Sequence[str]]
                ) -> tuple[dict[str, int | None], dict[str, list[str]]]:
    """The rules on an SQL query (each grouping set with the filtered columns is a crossing);
    returns the area columns to drop withheld rows from and the answer's withheld note."""
    rules, fcols = withheld.rules, [c for c, _, _ in filters]
    rules.check([rules.uses([*g, *fcols]) for g in grouping_sets] or [rules.uses(fcols)], table=False)
    withheld.check_filters(filters, table=False)
    area: dict[str, int | None] = {d: k for d in dims if (k := withheld.level_of(d)) is not None}
    return area, withheld.note({d: {k: codes[d]} for d, k in area.items() if k is not None})


def check_table(ds: Any, terms: Iterable[Iterable[str]], dims: Mapping[str, Any], levels: Mapping[str, int],
                filters: Sequence[tuple[str, str, Sequence[str]]], grouped: tuple[str, Any] | None,
                codes_of: Callable[[Any, str, Any], Sequence[str]]) -> tuple[dict[str, int | None], dict[str, list[str]]]:
    """The rules on a table request of the broker's dataset ``ds``: ``terms`` its crossings,
    ``dims`` each dim's hierarchy (the configured one: served whole, else flat or custom groups),
    ``levels`` the levels asked for, ``codes_of`` the codes a flat dim shows; returns as
    :func:`check_query`."""
    withheld = ds.withheld
    served = {d: h is ds.hierarchies.get(d) for d, h in dims.items()}
    flat_codes = {d: [] if grouped and d == grouped[0] else codes_of(ds, d, filters) for d in dims if not served[d]}
    area_dim = withheld.rules.area
    code_table = ds.conf.code_lists[area_dim].table if area_dim else None
    rules, fcols = withheld.rules, [c for c, _, _ in filters]
    finest = {d: len(rules.variables[d]) for d in served if served[d]}
    rules.check([rules.uses([d for d in t if not served[d]] + fcols,
                            {d: levels.get(d, finest[d]) for d in t if served[d]}) for t in terms], table=True)
    withheld.check_filters(filters, table=True)
    area: dict[str, int | None] = {}
    shown: dict[str, dict[int, Sequence[str]]] = {}
    for d, whole in served.items():
        if whole and d == rules.area and code_table is not None:
            area[d] = None
            several = any(c == d and len(vs) > 1 for c, _, vs in filters)  # shown at its finest level only
            ks = [levels[d]] if d in levels else [finest[d]] if several else range(1, finest[d] + 1)
            shown[d] = {k: code_table[rules.name(d, k)].to_list() for k in ks}
        elif not whole and (k := withheld.level_of(d)) is not None:
            area[d], shown[d] = k, {k: flat_codes[d]}
    return area, withheld.note(shown)
