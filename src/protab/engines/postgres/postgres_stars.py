"""DuckDB's ``SELECT * EXCLUDE (…)`` for PostgreSQL, which has none (the running value of the
cell key method for magnitudes, protab.rollup.magnitude_ckm): the star becomes the list of its
source's columns but the excluded ones, in the source's order. The source's columns are
PostgreSQL's own answer: the star's SELECT with ``*`` alone, after the common table
expressions before it, planned under ``LIMIT 0`` (``columns``, a callback of the engine)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protab.errors import SpecError


def has_excludes(tree: Any, exp: Any) -> bool:
    """Whether ``tree`` holds a ``* EXCLUDE (…)``."""
    return any(star.args.get("except_") for star in tree.find_all(exp.Star))


def expand_excludes(tree: Any, exp: Any, columns: Callable[[Any], list[str]]) -> None:
    """Every ``* EXCLUDE (…)`` of ``tree`` as its columns (in place), in the order of their
    common table expressions (a later one reads an earlier one's columns)."""
    stars = [s for s in tree.find_all(exp.Star) if s.args.get("except_")]
    for star in sorted(stars, key=lambda s: _place(s, exp)):
        excluded = {c.name.lower() for c in star.args["except_"]}
        names = [exp.column(n, quoted=True) for n in columns(_probe(star, exp)) if n.lower() not in excluded]
        select = star.parent_select
        items = []
        for item in select.expressions:
            items += names if item is star else [item]
        select.set("expressions", items)


def _place(star: Any, exp: Any) -> int:
    """The position of the star's common table expression in its WITH (-1 for none)."""
    cte = star.find_ancestor(exp.CTE)
    return cte.parent.expressions.index(cte) if cte is not None and isinstance(cte.parent, exp.With) else -1


def _probe(star: Any, exp: Any) -> Any:
    """The star's SELECT with ``*`` alone and ``LIMIT 0``, the common table expressions
    before its own that it reads in front."""
    select = star.parent_select
    if select is None or star.parent is not select:
        raise SpecError("a qualified SELECT t.* EXCLUDE (…) is not supported on the PostgreSQL engine")
    probe = select.copy()
    for key in ("with_", "group", "having", "order", "limit", "offset", "distinct", "qualify"):
        probe.set(key, None)
    probe.set("expressions", [exp.Star()])
    cte = select.find_ancestor(exp.CTE)
    if cte is not None and isinstance(cte.parent, exp.With):
        earlier = cte.parent.expressions[:cte.parent.expressions.index(cte)]
        read = _reads(probe, earlier, exp)
        if read:
            probe.set("with_", exp.With(expressions=[c.copy() for c in earlier if c.alias in read]))
    return probe.limit(0)


def _reads(query: Any, ctes: list[Any], exp: Any) -> set[str]:
    """The names of ``ctes`` that ``query`` reads, directly or through one another."""
    by_name = {c.alias: c for c in ctes}
    read: set[str] = set()
    todo = [query]
    while todo:
        for table in todo.pop().find_all(exp.Table):
            if table.name in by_name and table.name not in read:
                read.add(table.name)
                todo.append(by_name[table.name].this)
    return read
