"""Building a tree from parent-child links: validation, root, vectorised levels and cycles."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from protab.errors import HierarchyError, show_values
from protab.hierarchy._common import _FIX_LINKS, _key, _listing
from protab.hierarchy._graph import build_graph

if TYPE_CHECKING:  # pragma: no cover
    from protab.hierarchy.core import Hierarchy

# --------------------------------------------------------------------------------------
# tree algorithms on parent-id arrays (vectorised)
# --------------------------------------------------------------------------------------


def _depths(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Levels by pointer jumping; the codes on cycles and how many codes never reach a root.

    ``parent`` is an int64 array with -1 at the root(s). After ``k`` rounds every code's
    jump pointer is its ``2**k``-th ancestor, so ``ceil(log2(n)) + 1`` rounds reach the
    root from any code that has one. Codes still pointing somewhere after that sit on a
    cycle or below one; their final jump targets are exactly the codes on cycles.
    """
    n = parent.size
    jump = parent.copy()
    dist = (parent >= 0).astype(np.int64)
    active = np.flatnonzero(jump >= 0)
    rounds = int(np.ceil(np.log2(max(n, 2)))) + 2
    for _ in range(rounds):
        if active.size == 0:
            break
        j = jump[active]
        dist[active] += dist[j]  # right-hand sides are copies: a synchronous step
        jump[active] = jump[j]
        active = active[jump[active] >= 0]
    unresolved = np.flatnonzero(jump >= 0)
    on_cycle = np.unique(jump[unresolved]) if unresolved.size else unresolved
    return dist, on_cycle, int(unresolved.size)


def _cycle_error(codes: pl.Series, parent: np.ndarray, on_cycle: np.ndarray, n_bad: int) -> HierarchyError:
    names = codes.gather(on_cycle).to_list()
    # One cycle spelled out: follow parents from its first code (at most a few steps).
    path = [int(on_cycle[0])]
    while len(path) < 8:
        nxt = int(parent[path[-1]])
        path.append(nxt)
        if nxt == path[0]:
            break
    shown = " → ".join(repr(codes[i]) for i in path)
    if path[-1] != path[0]:
        shown += " → …"
    below = n_bad - len(names)
    extra = f"; {below} more code(s) below them cannot reach the root either" if below > 0 else ""
    return HierarchyError(
        f"the parent links form a cycle (a code would be its own ancestor), e.g. {shown} "
        f"(each code followed by its parent). Codes on cycles: {_listing(names)}{extra}. Remove "
        f"one parent link of each cycle so that every code leads up to the root."
    )


def _level_bounds(level: np.ndarray, depth: int) -> np.ndarray:
    """Start offsets of each level in the (level-sorted) code arrays, plus the end."""
    return np.searchsorted(level, np.arange(depth + 2), side="left")


def build(
    cls: type[Hierarchy],
    parent: pl.Series,
    child: pl.Series,
    *,
    root: object | None,
    source: str,
    default_root: str,
    sign: pl.Series | None = None,
    several_parents: bool = False,
) -> Hierarchy:
    """What :meth:`Hierarchy._build` does (see its docstring).

    ``sign``: +1/−1 per link (already checked), or None for all +1. ``several_parents``:
    a code may have more than one parent. Links that form a tree (one parent per code, all
    signs +1) always give the tree built here; anything else goes to :mod:`._graph`.
    """
    if root is not None:
        root_key = _key(root)
        if not root_key:
            raise HierarchyError(f"root must be a non-empty string, got {root!r}")
        root = root_key
    df = pl.DataFrame({"parent": parent.cast(pl.String), "child": child.cast(pl.String)})
    if sign is not None and (sign != 1).any():
        df = df.with_columns(sign.cast(pl.Int8).alias("sign"))
    if df.height == 0:
        raise HierarchyError(f"{source}: no codes given; a hierarchy needs at least one code below its root")

    # Null or empty codes.
    bad = (
        df.with_row_index("row")
        .filter(
            pl.col("child").is_null()
            | (pl.col("child").str.len_bytes() == 0)
            | (pl.col("parent").str.len_bytes() == 0)
        )["row"]
        .to_list()
    )
    if bad:
        raise HierarchyError(
            f"{source}: rows with a null or empty code (counted from 0): {_listing(bad)}. Every "
            f"code must be a non-empty string: fill in or drop these rows."
        )

    # A code that is its own parent.
    selfp = df.filter(pl.col("parent") == pl.col("child"))["child"].unique(maintain_order=True).to_list()
    if selfp:
        raise HierarchyError(
            f"{source}: codes listed as their own parent: {_listing(selfp)}. Remove these "
            f"links (a code cannot contain itself)."
        )

    # Exact duplicate links are fine; a code with two different parents is not (unless
    # several_parents), nor one link with both signs.
    df = df.unique(maintain_order=True)
    signed = "sign" in df.columns
    if signed:
        both = df.group_by("parent", "child", maintain_order=True).len().filter(pl.col("len") > 1)
        if both.height:
            ex = [f"{c!r} → {p!r}" for p, c in zip(both["parent"].head(3), both["child"].head(3))]
            raise HierarchyError(
                f"{source}: links given with both signs, +1 and -1: {_listing(ex)}. Keep one "
                f"sign per link (a code cannot be added to and subtracted from the same code)."
            )
    multi = (
        df.group_by("child", maintain_order=True).agg(pl.col("parent"), pl.len().alias("n")).filter(pl.col("n") > 1)
    )
    if multi.height and not several_parents:
        examples = []
        for c, ps in zip(multi["child"].head(3).to_list(), multi["parent"].head(3).to_list()):
            shown = ", ".join("none (top code)" if p is None else repr(p) for p in ps)
            examples.append(f"{c!r} (parents {shown})")
        raise HierarchyError(
            f"{source}: codes with more than one parent: {_listing(multi['child'].to_list())}; "
            f"e.g. {'; '.join(examples)}. Either {_FIX_LINKS} (drop the extra links, or give "
            f"the code a distinct name under each parent), or, if the code belongs to several "
            f"groups on purpose (overlapping groups), pass several_parents=True."
        )
    if multi.height or signed:
        return build_graph(cls, df, root=root, source=source, default_root=default_root)

    # All codes: those that are never children (by first appearance as a parent), then
    # the children in the order of their links (each child has exactly one row now).
    linked = df.filter(pl.col("parent").is_not_null())
    has_parent = linked["child"]
    parents = linked["parent"].unique(maintain_order=True)
    only_parents = parents.filter(~parents.is_in(df["child"].implode()))
    declared_tops = df.filter(pl.col("parent").is_null())["child"]
    tops = pl.concat([only_parents, declared_tops]).alias("code")
    codes = pl.concat([only_parents, df["child"]]).alias("code")

    add_root: str | None = None
    if root is not None:
        if codes.is_in([root]).any():
            if has_parent.is_in([root]).any():
                ps = linked.filter(pl.col("child") == root)["parent"].to_list()
                raise HierarchyError(
                    f"{source}: the root {root!r} also appears as a child (of {show_values(ps)}). "
                    f"The root must have no parent: remove that link, or name another root."
                )
            others = tops.filter(tops != root).to_list()
            if others:
                raise HierarchyError(
                    f"{source}: the root was given as {root!r}, but other codes have no parent "
                    f"either: {_listing(others)}. Link them to a parent, or leave out root= to put "
                    f"all top codes under a new total {default_root!r}."
                )
        else:
            add_root = root
    else:
        if tops.len() == 1:
            root = tops[0]
        elif tops.len() > 1:
            if codes.is_in([default_root]).any():
                raise HierarchyError(
                    f"{source}: several codes have no parent: {_listing(tops.to_list())}, so protab "
                    f"would add a total {default_root!r} above them, but {default_root!r} is "
                    f"already a code. Pass root= with an unused name, or give these codes a parent."
                )
            add_root = default_root
        # no top code at all: every code has a parent, so there is a cycle (found below)

    if add_root is not None:
        root = add_root
        codes = pl.concat([pl.Series("code", [add_root], dtype=pl.String), codes])
        linked = pl.concat(
            [
                linked,
                pl.DataFrame(
                    {"parent": pl.repeat(add_root, tops.len(), eager=True, dtype=pl.String), "child": tops}
                ),
            ]
        )

    # Integer ids and the parent-id array.
    n = codes.len()
    ids = pl.DataFrame({"code": codes}).with_row_index("id")
    j = linked.join(ids.rename({"code": "child", "id": "cid"}), on="child").join(
        ids.rename({"code": "parent", "id": "pid"}), on="parent"
    )
    parent_id = np.full(n, -1, dtype=np.int64)
    parent_id[j["cid"].to_numpy().astype(np.int64)] = j["pid"].to_numpy().astype(np.int64)

    level, on_cycle, n_bad = _depths(parent_id)
    if on_cycle.size:
        raise _cycle_error(codes, parent_id, on_cycle, n_bad)

    # Sort by level, stably: level order then insertion order; root (id 0) stays first.
    order = np.argsort(level, kind="stable")
    new_id = np.empty(n, dtype=np.int64)
    new_id[order] = np.arange(n, dtype=np.int64)
    p = parent_id[order]
    p = np.where(p >= 0, new_id[np.maximum(p, 0)], -1)
    return cls._new(codes.gather(order), p, level[order])
