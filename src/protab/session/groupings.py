"""Custom groupings of a dimension (an analyst's own grouping of a classification's codes, the
query service's custom groups: :mod:`protab.serve.groups`) as a hierarchy: Total → groups →
their codes. Groups that share codes make a hierarchy that is not a tree (codes with several
parents, :mod:`protab.hierarchy._graph`), whose total is the plain total of its codes; either
way a group's cell holds its codes' records, so its cell key is the sum of their record keys
and it gets the same value as under any hierarchy that defines it
(:meth:`protab.Session.cell_key_groups`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from protab.errors import SpecError

if TYPE_CHECKING:  # pragma: no cover
    from protab.hierarchy import Hierarchy
    from protab.table import TableSpec


def grouping_hierarchy(groups: Mapping[str, Sequence[str]], *, root: str = "Total") -> Hierarchy:
    """Total (``root``) → the groups → their codes; a code may be in several groups."""
    from protab.hierarchy import Hierarchy

    if not groups or any(not codes for codes in groups.values()):
        raise SpecError("a grouping needs at least one group, each of at least one code")
    codes = {str(c) for cs in groups.values() for c in cs}
    clash = sorted(codes.intersection(groups)) + ([root] if root in codes or root in groups else [])
    if clash:
        raise SpecError(f"a grouping's group names and its total must not be codes of it: {clash[0]!r}")
    links = [(g, str(c)) for g, cs in groups.items() for c in cs]
    if sum(len(cs) for cs in groups.values()) > len(codes):  # shared codes: the total is added, of every code once
        return Hierarchy.from_parent_child(links, root=root, several_parents=True)
    return Hierarchy.from_parent_child([(root, g) for g in groups] + links, root=root)


def grouped_spec(spec: TableSpec, dim: str, groups: Mapping[str, Sequence[str]]) -> TableSpec:
    """``spec`` with dimension ``dim`` recoded into ``groups`` (its hierarchy replaced by
    :func:`grouping_hierarchy`, the total named as ``dim``'s was)."""
    root = spec.dimension(dim).root
    dims = {d.column: (grouping_hierarchy(groups, root=root) if d.column == dim else d.hierarchy)
            for d in spec.dimensions}
    return dataclasses.replace(spec, dims=dims)
