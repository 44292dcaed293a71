"""Dimensions that nest in the records but are not declared as levels of one classification.

The differencing rule of custom groups (:mod:`protab.serve.atoms`) judges every level of one
classification together: groups of ``agegroup`` codes are groups of ages. It knows that two
dimensions are levels of one classification only from serve.toml (``hierarchies.age =
["agegroup", "age"]``). When the records say so but the configuration does not — every age has
one age group — the rule would judge groups on ``age`` and on ``agegroup`` apart, and two such
groups could differ by one age with fresh noise (the differencing attack on table builders,
Asghar & Kaafar 2020). So at start-up the service finds, in one query over the dataset's rows,
every pair of dimensions of different classifications where one is a function of the other, and
refuses custom groups on them (failing closed) until the office declares the classification.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from protab.sqltools import quote_ident

if TYPE_CHECKING:  # pragma: no cover
    from protab.session import Session

RULE = "groups.classification"
_NULL = "\x00"  # NULL as a code of its own in the distinct counts (no declared code holds it)


def variables(dims: Sequence[str], hierarchies: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Each dimension's classification: the dimension whose hierarchy lists it as a level, or itself."""
    out = {d: d for d in dims}
    for var, levels in hierarchies.items():
        out.update({c: var for c in levels if c in out})
    return out


def undeclared_nesting(s: Session, table: str, dims: Sequence[str],
                       hierarchies: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Per dimension, the dimensions of other classifications it nests with in ``table``: ``a``
    is a function of ``b`` when the distinct (a, b) pairs are as many as b's codes. One scan."""
    var = variables(dims, hierarchies)
    pairs = [(a, b) for a in dims for b in dims if a != b and var[a] != var[b]]
    if not pairs:
        return {}
    code = {d: f"coalesce(CAST({quote_ident(d)} AS VARCHAR), ?)" for d in dims}
    items, params = [], []
    for d in dims:
        items.append(f"count(DISTINCT {code[d]})")
        params.append(_NULL)
    for a, b in pairs:
        items.append(f"count(DISTINCT ({code[a]}, {code[b]}))")
        params += [_NULL, _NULL]
    row = s.sql(f"SELECT {', '.join(items)} FROM {quote_ident(table)}", params).row(0)
    distinct = dict(zip(dims, row[: len(dims)]))
    out: dict[str, list[str]] = {}
    for (a, b), both in zip(pairs, row[len(dims):]):
        if distinct[b] > 1 and both == distinct[b]:  # a is a function of b
            out.setdefault(a, []).append(b)
            out.setdefault(b, []).append(a)
    return {d: sorted(set(others)) for d, others in out.items()}


def warning(dataset: str, dim: str, others: Sequence[str]) -> str:
    """The office's start-up warning for one dimension (the console only, never an analyst's answer)."""
    return (f"dataset {dataset!r}: in the records {dim!r} nests with {', '.join(map(repr, others))} (one is a "
            f"function of the other), but serve.toml does not declare them as levels of one classification "
            f"(hierarchies.<finest> = [<coarsest>, ..., <finest>]); custom groups on {dim!r} are refused until it "
            "does, since groups on the two would be judged apart by the differencing rule")


def refusal_text(dim: str) -> tuple[str, str]:
    """(why, advice) of the analyst's refusal: names no code and no count."""
    return (f"custom groups of {dim!r} are not offered: the service cannot judge them with the dimensions "
            "it nests with, which the office has not declared as one classification",
            "group another dimension, or ask the office to declare the classification in serve.toml")
