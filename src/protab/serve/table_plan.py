"""A table request (``POST /v1/table``) judged before any scan: its form and the user's rights
(:func:`~protab.serve.table_request.check_table_request`), the filters of several values, each
dimension's hierarchy, the TableSpec, the disclosure rules (:func:`~protab.serve.rules.check_table`)
and the cells of its answer, estimated from the declared code lists and refused above
``max_cells``. Nothing here reads data or records anything, so a saved table is judged by the
same plan when it is saved as when it is run.

The estimate counts what the answer shows, cell for cell: per published set of dimensions below
their total (``TableSpec.published_subsets``), the product of the codes each of them shows below
its total — a dimension shown at a chosen level (``levels``) the codes of that level, a
dimension with a filter of several values the codes the filter picks (at the finest level, its
total left out), a grouped dimension its groups, any other dimension every code of its
hierarchy — with every other dimension at its total. Areas the rules withhold only take cells
away, so the estimate is never below the answer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protab.errors import SpecError
from protab.serve.query import SET_FILTER_ADVICE, SET_FILTER_RULE, QueryRefused
from protab.serve.rules import check_table
from protab.serve.table_request import check_table_request

if TYPE_CHECKING:  # pragma: no cover
    from protab.hierarchy import Hierarchy
    from protab.serve.config import UserConfig


@dataclass
class TablePlan:
    """A table request judged before any scan: the checked request, its dataset (the broker's),
    each dimension's hierarchy, its filters (with the groups' codes: ``where``), the grouped
    dimension and its groups, the codes picked by filters of several values, the TableSpec, the
    areas to drop and the withheld note, and its cells (what max_cells and job_cells judge)."""

    req: dict[str, Any]
    ds: Any
    dims: dict[str, Any]
    filters: list[tuple[str, str, tuple[str, ...]]]
    where: list[tuple[str, str, tuple[str, ...]]]
    grouped: tuple[str, Any] | None
    picked: dict[str, list[str]]
    spec: Any
    area: dict[str, int | None]
    note: dict[str, list[str]]
    cells: int


def table_cells(subsets: Sequence[frozenset[str]], shown: Mapping[str, tuple[int, bool]]) -> int:
    """The cells of a table's answer: per published set of dimensions below their total, the
    product of the codes each shows below its total, when every other one shows its total
    (``shown``: dimension → (codes below the total, whether the total is shown))."""
    return sum(math.prod(shown[d][0] if d in sub else int(shown[d][1]) for d in shown) for sub in subsets)


def shown_codes(ds: Any, dims: Mapping[str, Hierarchy], levels: Mapping[str, int],
                picked: Mapping[str, Sequence[str]], grouped: tuple[str, Any] | None) -> dict[str, tuple[int, bool]]:
    """Per dimension of a table request (``ds``: the broker's dataset), the codes its answer
    shows below the total and whether it shows the total (see the module doc)."""
    out = {}
    for d, h in dims.items():
        if grouped and d == grouped[0]:
            out[d] = (len(grouped[1]), True)
        elif d in levels:
            out[d] = (ds.level_sizes[d].get(levels[d], 0), True)
        elif d in picked:
            whole = h is ds.hierarchies.get(d)
            out[d] = (len(ds.finest[d].intersection(picked[d])) if whole else len(h) - 1, False)
        else:
            out[d] = (len(h) - 1, True)
    return out


def plan_table(broker: Any, body: Any, user: UserConfig) -> TablePlan:
    """The plan of ``user``'s table request ``body`` over ``broker``'s datasets, or the refusal
    (QueryRefused, QueryForbidden, RuleRefused) of the first check it fails."""
    from protab.table import TableSpec

    req = check_table_request(body, broker.datasets, broker.user_rights(user))
    ds = broker.datasets[req["dataset"]]
    rights = broker.user_rights(user)[ds.name]
    grouped = next(iter(req["groups"].items()), None)  # a dimension with custom groups, or None
    filters = [(d, "in", tuple(v)) for d, v in req["filters"].items()]
    several = broker._set_filters(filters)  # shown at their finest level only
    loose = [c for c in several if c not in req["dims"] or c in req["levels"]]
    if loose:
        raise QueryRefused(
            f"a filter with several values may only be on a dimension of the table, shown at its finest "
            f"level (the answer then holds that level only); on other dimensions filter with one value "
            f"(filter on {loose[0]!r})", rule=SET_FILTER_RULE, advice=SET_FILTER_ADVICE
        )
    dims = broker._table_dims(ds, req, rights, grouped, filters)
    where = filters + ([(grouped[0], "in", tuple(c for cs in grouped[1].values() for c in cs))] if grouped else [])
    try:
        spec = TableSpec(dims, formula=req["formula"], sums=[req["measure"]] if req["measure"] else (),
                         null_sums=ds.conf.null_sums, null_code=ds.conf.null_code,
                         where=[(d, op, list(v)) for d, op, v in where])
    except SpecError as exc:
        raise QueryRefused(str(exc)) from None
    area, note = check_table(ds, spec.terms, dims, req["levels"], filters, grouped, broker._codes)  # the rules
    picked = {d: v for d, v in req["filters"].items() if d in several}
    cells = table_cells(spec.published_subsets(), shown_codes(ds, dims, req["levels"], picked, grouped))
    broker._check_cells(cells, None, ds)
    return TablePlan(req, ds, dims, filters, where, grouped, picked, spec, area, note, cells)
