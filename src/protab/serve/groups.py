"""Custom groups of a table request (``"groups": {dim: {name: [codes]}}``): an analyst's recode
of one dimension's codes into named groups (ages 15-24 and 25-64, a set of municipalities).

A grouped dimension is served as the hierarchy Total → groups → codes, its records restricted
to the grouped codes; the answer shows the groups and their total. A group's cell is the cell
of its records, so its cell key is the sum of their record keys like any cell's: the same group
has the same value in every table, and a group of one code has that code's value.

The differencing rule (``groups.min_difference``, the dataset's rule ``group_min_difference``,
default its minimum population): every group cell (each group, and their total) must differ
from every published cell of the dimension (each code of each level, and the total), from the
request's other group cells and from every group the user asked for before (per dataset and
dimension, kept in the state folder across restarts: :class:`Ledger`) by at least that many records *after perturbation*, in
the whole filtered population and in every cell of its crossing with the table's other
dimensions. Two groups that differ by a few records would otherwise publish their difference
with fresh noise, again and again (the differencing attack; Hundepool et al. 2012, Statistical
Disclosure Control, §5.4, on flexible table generators). Equal sets are not a difference: they
are the same records, with the same value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from protab.errors import show_values
from protab.serve.classifications import MARGIN as MARGIN_NAME
from protab.serve.query import QueryRefused
from protab.serve.rules import Rules
from protab.serve.saved import UserStore
from protab.sqltools import quote_ident

if TYPE_CHECKING:  # pragma: no cover
    from protab.hierarchy import Hierarchy
    from protab.session import Session

MAX_GROUPS = 50  # groups of one request
MAX_NAME = 60  # characters of a group's name
MAX_REMEMBERED = 1000  # groups remembered per user, dataset and dimension
RULE = "groups.min_difference"


def check_groups(raw: Any, dims: Sequence[str], filters: Mapping[str, Any], levels: Mapping[str, Any],
                 codes: Mapping[str, Sequence[str]]) -> dict[str, dict[str, list[str]]]:
    """``groups`` of a table request: one dimension of the table (not filtered, no level) →
    group name → its codes (declared codes of the dimension, sorted); QueryRefused naming the
    key for unknown or shared codes, empty groups and names that are codes."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or len(raw) != 1:
        raise QueryRefused("groups must be an object of one dimension: {dimension: {group name: [codes]}}")
    (dim, groups), = raw.items()
    key = f"groups.{str(dim)[:60]}"
    if dim not in dims:
        raise QueryRefused(f"{key}: {str(dim)[:60]!r} is not one of the table's dims")
    if dim in filters or dim in levels:
        raise QueryRefused(f"{key}: a grouped dimension takes no filter and no level; put the codes in the groups")
    return {dim: check_group_set(groups, dim, codes[dim], key)}


def check_group_set(groups: Any, dim: str, codes: Sequence[str], key: str) -> dict[str, list[str]]:
    """One dimension's groups (group name → codes of ``codes``), checked as a table request's
    (``key``: where they are in the body); QueryRefused naming the key for unknown or shared
    codes, empty groups and names that are codes or the total."""
    if not isinstance(groups, dict) or not 1 <= len(groups) <= MAX_GROUPS:
        raise QueryRefused(f"{key} must be an object of 1 to {MAX_GROUPS} groups: {{name: [codes]}}")
    known, owner, out = set(codes), {}, {}
    for name, members in sorted(groups.items()):
        where = f"{key}.{name[:MAX_NAME]}"
        if not name.strip() or len(name) > MAX_NAME or not name.isprintable() or name == MARGIN_NAME or name in known:
            raise QueryRefused(f"{where}: a group's name is 1 to {MAX_NAME} printable characters, not "
                               f"{MARGIN_NAME!r} and not a code of {dim!r}")
        if not isinstance(members, list) or not members or any(
                isinstance(c, bool) or not isinstance(c, (str, int)) for c in members):
            raise QueryRefused(f"{where}: give a non-empty list of codes of {dim!r} (strings or whole numbers)")
        values = sorted({str(c) for c in members})
        unknown = [v[:60] for v in values if v not in known]
        if unknown:
            raise QueryRefused(f"{where}: {show_values(unknown)} are not codes of {dim!r}")
        shared = [v for v in values if v in owner]
        if shared:
            raise QueryRefused(f"{where}: code {shared[0]!r} is also in group {owner[shared[0]]!r}; groups may "
                               "not overlap")
        owner.update(dict.fromkeys(values, name))
        out[name] = values
    return out


def group_hierarchy(groups: Mapping[str, Sequence[str]]) -> Hierarchy:
    """Total → groups → their codes."""
    from protab.hierarchy import Hierarchy

    pairs = [(MARGIN_NAME, g) for g in groups] + [(g, c) for g, cs in groups.items() for c in cs]
    return Hierarchy.from_parent_child(pairs, root=MARGIN_NAME)


class Ledger(UserStore):
    """The groups each user asked for, per dataset and dimension (at most :data:`MAX_REMEMBERED`
    each), in ``<state folder>/groups_used.json`` (user → dataset → dimension → code lists): a
    restart forgets none, so the differencing rule keeps comparing new groups with them. A
    request's groups are judged against the list outside the lock (the check reads the records),
    then recorded under it, judged first against any group recorded meanwhile (:meth:`judge`),
    so that two concurrent requests of one user cannot each pass against the list before the other."""

    file = "groups_used.json"
    what = "ledger of custom groups"

    def judge(self, key: tuple[str, str, str], sets: Sequence[frozenset[str]],
              check: Callable[[list[frozenset[str]]], None]) -> None:
        """``check`` the groups ``sets`` of ``key`` (user, dataset, dimension) against the user's
        earlier ones, then record them; nothing is recorded when ``check`` refuses."""
        with self._locked():
            before = self._kept(key)
        self._bound(key, before, sets)
        check(before)
        with self._locked():
            now = self._kept(key)
            since = [cs for cs in now if cs not in before]
            if since:  # the user's other request recorded groups meanwhile (rare): judged here
                check(since)
            new = self._bound(key, now, sets)
            if new:
                self._users[key[0]].setdefault(key[1], {}).setdefault(key[2], []).extend(sorted(cs) for cs in new)
                self._save()

    def _kept(self, key: tuple[str, str, str]) -> list[frozenset[str]]:
        user, dataset, dim = key
        return [frozenset(cs) for cs in self._users.setdefault(user, {}).get(dataset, {}).get(dim, [])]

    @staticmethod
    def _bound(key: tuple[str, str, str], kept: list[frozenset[str]],
               sets: Sequence[frozenset[str]]) -> list[frozenset[str]]:
        """The groups of ``sets`` not yet ``kept``; QueryRefused beyond MAX_REMEMBERED."""
        new = [cs for cs in dict.fromkeys(sets) if cs not in kept]
        if len(kept) + len(new) > MAX_REMEMBERED:
            raise QueryRefused(f"you have used {len(kept)} groups of {key[2]!r}; the service compares each new "
                               f"group with them and keeps at most {MAX_REMEMBERED}: reuse groups you defined")
        return new


def _cells(groups: Mapping[str, Sequence[str]], all_codes: Sequence[str]) -> dict[str, frozenset[str]]:
    """The group cells of a request: each group, and their total when it is not the dimension's."""
    cells = {f"group {g!r}": frozenset(cs) for g, cs in groups.items()}
    union = frozenset().union(*cells.values())
    if union != frozenset(all_codes) and len(cells) > 1:
        cells["the groups' total"] = union
    return cells


def _published(code_table: pl.DataFrame, dim: str) -> dict[str, frozenset[str]]:
    """Every published cell of the dimension as its set of codes: each code of each level, the total."""
    out = {f"the total of {dim}": frozenset(code_table[dim].to_list())}
    for col in code_table.columns:
        sets = code_table.group_by(col, maintain_order=True).agg(pl.col(dim).alias("_codes"))
        for code, members in sets.rows():
            out.setdefault(f"{col} {code!r}", frozenset(members))
    return out


def differences(cells: Mapping[str, frozenset[str]], others: Mapping[str, frozenset[str]]
                ) -> list[tuple[str, str, frozenset[str]]]:
    """(group cell, other cell, their symmetric difference) for every pair that overlaps and is
    not equal, and (group cell, "", the cell itself): a group is also compared with nothing."""
    out = [(g, "", s) for g, s in cells.items()]
    for g, s in cells.items():
        for o, t in others.items():
            if o != g and s != t and s & t:
                out.append((g, o, s ^ t))
    return out


def leaf_counts(s: Session, table: str, dim: str, others: Sequence[str],
                filters: Sequence[tuple[str, str, Sequence[str]]], null_code: str | None) -> tuple[pl.DataFrame, int]:
    """Records and key sums (modulo the modulus) per code of ``dim`` and the finest codes of the
    table's ``others``, in the filtered population; secret (never leaves the broker)."""
    key, modulus = s.record_key(table)
    cols = [dim, *others]
    params: list[Any] = []
    select = []
    for k, c in enumerate(cols):
        select.append(f"COALESCE(CAST({quote_ident(c)} AS VARCHAR), ?) AS c{k}")
        params.append(null_code)
    where = []
    for col, op, values in filters:
        marks = ", ".join("?" for _ in values)
        where.append(f"COALESCE(CAST({quote_ident(col)} AS VARCHAR), ?) {'NOT IN' if op == 'not in' else 'IN'} "
                     f"({marks})")
        params += [null_code, *values]
    sql = (f"SELECT {', '.join(select)}, count(*) AS n, "
           f"CAST(sum(CAST({quote_ident(key)} AS HUGEINT)) % {int(modulus)} AS BIGINT) AS k "
           f"FROM {quote_ident(table)}" + (f" WHERE {' AND '.join(where)}" if where else "") + " GROUP BY ALL")
    frame = s.sql(sql, params)
    return frame.rename({f"c{k}": c for k, c in enumerate(cols)}), int(modulus)


def smallest(leaves: pl.DataFrame, modulus: int, ptable: Any, dim: str, others: Sequence[str],
             diffs: Sequence[tuple[str, str, frozenset[str]]]) -> np.ndarray:
    """Per difference, the least perturbed count of its records: in the whole population, and
    for a difference of two cells (not a group alone) also in each cell of its crossing with
    ``others`` (an empty cell counts as 0: a verdict on perturbed values only)."""
    sets = list(dict.fromkeys(d for _, _, d in diffs))
    index = {d: k for k, d in enumerate(sets)}
    members = pl.DataFrame({"set": [index[d] for d in sets for _ in d], dim: [c for d in sets for c in d]},
                           schema={"set": pl.Int64, dim: pl.String})
    joined = members.join(leaves, on=dim, how="left").with_columns(pl.col("n").fill_null(0), pl.col("k").fill_null(0))
    parts = [joined.group_by("set").agg(pl.col("n").sum(), pl.col("k").sum())]
    pairs = [index[d] for _, o, d in diffs if o]
    if others and pairs:
        combos = leaves.select(others).unique()
        full = pl.DataFrame({"set": sorted(set(pairs))}, schema={"set": pl.Int64}).join(combos, how="cross")
        sub = joined.drop_nulls(others).group_by(["set", *others]).agg(pl.col("n").sum(), pl.col("k").sum())
        parts.append(full.join(sub, on=["set", *others], how="left").select("set", "n", "k").fill_null(0))
    cells = pl.concat([p.select("set", "n", "k") for p in parts])
    pert = ptable.lookup(cells["n"].to_numpy(), (cells["k"] % modulus).to_numpy(), modulus)
    least = pl.DataFrame({"set": cells["set"], "p": pert}).group_by("set").agg(pl.col("p").min()).sort("set")
    by_set = dict(zip(least["set"].to_list(), least["p"].to_list()))
    return np.array([by_set[index[d]] for _, _, d in diffs])


def check_differences(s: Session, rules: Rules, least: int, table: str, dim: str, others: Sequence[str],
                      groups: Mapping[str, Sequence[str]], code_table: pl.DataFrame, before: Sequence[frozenset[str]],
                      filters: Sequence[tuple[str, str, Sequence[str]]], ptable: Any, null_code: str | None) -> None:
    """The differencing rule (module doc) on one request's groups; RuleRefused naming the group
    and the cell it is too close to (never a count or the threshold)."""
    cells = _cells(groups, code_table[dim].to_list())
    others_cells = {**_published(code_table, dim), **cells}
    others_cells.update({f"your earlier group {show_values(sorted(b), 5)}": b for b in before})
    diffs = differences(cells, others_cells)
    leaves, modulus = leaf_counts(s, table, dim, others, filters, null_code)
    values = smallest(leaves, modulus, ptable, dim, others, diffs)
    bad = np.flatnonzero(values < least)
    if bad.size:
        g, o, _ = diffs[int(bad[0])]
        what = f"{g} differs from {o} by" if o else f"{g} holds"
        crossed = f", in the filtered population or in a cell of its crossing with {', '.join(others)}" if others else ""
        raise rules.refuse(RULE, f"{what} too few records (after perturbation, below the service's minimum"
                           f"{crossed}): two such cells would publish their difference",
                           "add or remove codes so that each group differs more from every published cell and from "
                           "your other groups, or cross it with fewer or coarser dimensions")


def check_request(s: Session, broker_min: int, ds: Any, user: str, ledger: Ledger, dim: str,
                  groups: Mapping[str, Sequence[str]], others: Sequence[str],
                  filters: Sequence[tuple[str, str, Sequence[str]]], ptable: Any) -> None:
    """The rules on a request's groups (``ds``: the broker's dataset): no withheld area in a
    group, then the differencing rule against the published cells, the request's other group
    cells and the user's earlier groups; the groups are then remembered for the user."""
    ds.withheld.check_members(dim, [c for cs in groups.values() for c in cs])
    rules = ds.withheld.rules
    least = rules.group_min_difference or rules.min_population or broker_min
    ledger.judge((user, ds.name, dim), [frozenset(cs) for cs in groups.values()],
                 lambda before: check_differences(s, rules, least, ds.conf.table, dim, others, groups,
                                                  ds.conf.code_lists[dim].table, before, filters, ptable,
                                                  ds.conf.null_code))
