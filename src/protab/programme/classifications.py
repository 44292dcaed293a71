"""The classifications of a programme built as hierarchies (once each, shared by name), the
level of every hypercube dimension resolved against them, and each hypercube's cell limit
checked from the code counts, before any table is built."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from protab.errors import ProtabError, SpecError
from protab.programme.definition import code_texts
from protab.request.loaders import hierarchy

if TYPE_CHECKING:  # pragma: no cover
    from protab.hierarchy import Hierarchy
    from protab.programme.definition import Hypercube
    from protab.session import Session

_OWN_KEYS = ("flat", "codes", "levels")


def build(s: Session, cfg: dict[str, Any], cubes: list[Hypercube], source: str, base: Path) -> dict[str, Hierarchy]:
    """Every classification a hypercube uses, as a Hierarchy read from ``source`` (codes from
    data are read from the first variable that uses the classification)."""
    from protab.hierarchy import Hierarchy

    first: dict[str, str] = {}
    for cube in cubes:
        for d in cube.dims:
            first.setdefault(d.classification, d.variable)
    out: dict[str, Hierarchy] = {}
    for name, variable in first.items():
        c = cfg["classifications"][name]
        root = c.get("root", "Total")
        try:
            if "codes" in c:
                h = Hierarchy.flat(code_texts(c["codes"]), root=root)
            elif c.get("flat"):
                h = Hierarchy.flat(s.codes(source, variable), root=root)
            else:
                loader = {k: v for k, v in c.items() if k not in _OWN_KEYS}
                h = hierarchy(s, loader, source, variable, base)
        except ProtabError as exc:
            msg = str(exc).replace(f"[hierarchies.{variable}] of the request", f"[classifications.{name}]")
            raise type(exc)(msg.replace(f"hierarchies.{variable}.", f"classifications.{name}.")) from None
        names = level_names(name, c)
        if names is not None and len(names) != h.depth:
            raise SpecError(f"programme: [classifications.{name}] levels names {len(names)} levels "
                            f"({', '.join(names)}), but the classification has {h.depth}")
        out[name] = h
    return out


def level_names(name: str, c: dict[str, Any]) -> list[str] | None:
    """The names of levels 1 … depth: ``levels``, else the columns of a ``columns``
    classification, else the classification's name for a flat one; None: numbers only."""
    if "levels" in c:
        return list(c["levels"])
    if "columns" in c:
        return list(c["columns"])
    if "codes" in c or c.get("flat"):
        return [name]
    return None


def levels(cfg: dict[str, Any], cube: Hypercube, hierarchies: dict[str, Hierarchy]) -> dict[str, int]:
    """The level (1 … depth) each dimension of ``cube`` is published down to."""
    out = {}
    for d in cube.dims:
        depth = hierarchies[d.classification].depth
        names = level_names(d.classification, cfg["classifications"][d.classification])
        if d.level is None:
            out[d.variable] = depth
        elif names is not None and d.level in names:
            out[d.variable] = names.index(d.level) + 1
        elif d.level.isdigit() and 1 <= int(d.level) <= depth:
            out[d.variable] = int(d.level)
        else:
            known = ", ".join(names) if names else f"1 to {depth}"
            raise SpecError(
                f"programme: hypercube {cube.name!r}: dims.{d.variable} asks for level {d.level!r} of "
                f"classification {d.classification!r}, which has no such level (levels: {known})"
            )
    return out


def check_cells(cube: Hypercube, depth: dict[str, int], hierarchies: dict[str, Hierarchy]) -> int:
    """The most cells the tables of ``cube`` publish (per table the product of its dimensions'
    codes down to their level, totals included), refused above the hypercube's ``max_cells``."""
    import numpy as np

    counts = {}
    for d in cube.dims:
        lv = np.asarray(hierarchies[d.classification].code_levels().column("level"))
        counts[d.variable] = int((lv <= depth[d.variable]).sum())
    total = 0
    for t in cube.tables:
        total += int(np.prod([counts[v] for v in t.dims], dtype=object))
    if total > cube.max_cells:
        raise SpecError(
            f"programme: hypercube {cube.name!r} publishes up to {total:,} cells, over its limit max_cells = "
            f"{cube.max_cells:,}; publish some dimensions at a coarser level, split it, or raise max_cells"
        )
    return total
