"""Trees on parent-id arrays: levels and cycles by pointer jumping, the tree built from checked
links, and the walks a Hierarchy makes over it (relation, heights, depth-first order).

Everything is vectorised: Python loops run over levels (or ``log2`` of the number of codes),
never over codes.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import polars as pl

from protab.errors import HierarchyError, show_values
from protab.hierarchy._input import _listing


class Parts(NamedTuple):
    """What a Hierarchy is made of: codes sorted by level (root at id 0), each code's parent id
    (-1 for the root), its level, and for a hierarchy that is not a tree its links (child ids,
    parent ids, signs)."""

    code: pl.Series
    parent: np.ndarray
    level: np.ndarray
    links: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None


# --------------------------------------------------------------------------------------
# levels and cycles (pointer jumping)
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


def level_bounds(level: np.ndarray, depth: int) -> np.ndarray:
    """Start offsets of each level in the (level-sorted) code arrays, plus the end."""
    return np.searchsorted(level, np.arange(depth + 2), side="left")


def level_sorted(
    codes: pl.Series,
    parent_id: np.ndarray,
    level: np.ndarray,
    links: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> Parts:
    """The parts with codes sorted by level, stably (level order, then insertion order; the
    root, id 0, stays first); parent ids and links renumbered to the new order."""
    n = codes.len()
    order = np.argsort(level, kind="stable")
    new_id = np.empty(n, dtype=np.int64)
    new_id[order] = np.arange(n, dtype=np.int64)
    p = parent_id[order]
    p = np.where(p >= 0, new_id[np.maximum(p, 0)], -1)
    if links is not None:
        links = (new_id[links[0]], new_id[links[1]], links[2].astype(np.int8))
    return Parts(codes.gather(order), p, level[order], links)


# --------------------------------------------------------------------------------------
# a tree from checked links (unique, one parent per code, signs +1)
# --------------------------------------------------------------------------------------


def tree_parts(df: pl.DataFrame, *, root: str | None, source: str, default_root: str) -> Parts:
    """The tree of unique links ``parent, child`` (each child once; a null parent marks a top
    code), with ``root`` or the one top code as root, or a total above several top codes."""
    linked = df.filter(pl.col("parent").is_not_null())
    codes, tops = _tree_codes(df, linked)
    add_root = _added_root(codes, tops, linked, root=root, source=source, default_root=default_root)
    if add_root is not None:
        codes = pl.concat([pl.Series("code", [add_root], dtype=pl.String), codes])
        linked = pl.concat(
            [
                linked,
                pl.DataFrame(
                    {"parent": pl.repeat(add_root, tops.len(), eager=True, dtype=pl.String), "child": tops}
                ),
            ]
        )
    parent_id = _parent_ids(codes, linked)
    level, on_cycle, n_bad = _depths(parent_id)
    if on_cycle.size:
        raise _cycle_error(codes, parent_id, on_cycle, n_bad)
    return level_sorted(codes, parent_id, level)


def _tree_codes(df: pl.DataFrame, linked: pl.DataFrame) -> tuple[pl.Series, pl.Series]:
    """All codes: those that are never children (by first appearance as a parent), then the
    children in the order of their links (each child has exactly one row); and the top codes."""
    parents = linked["parent"].unique(maintain_order=True)
    only_parents = parents.filter(~parents.is_in(df["child"].implode()))
    declared_tops = df.filter(pl.col("parent").is_null())["child"]
    tops = pl.concat([only_parents, declared_tops]).alias("code")
    codes = pl.concat([only_parents, df["child"]]).alias("code")
    return codes, tops


def _added_root(
    codes: pl.Series, tops: pl.Series, linked: pl.DataFrame, *, root: str | None, source: str, default_root: str
) -> str | None:
    """The total to add above the top codes, or None when the root is a code of the links."""
    if root is not None:
        if not codes.is_in([root]).any():
            return root
        if linked["child"].is_in([root]).any():
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
        return None
    if tops.len() <= 1:  # one top code, the root; none: every code has a parent (a cycle, found later)
        return None
    if codes.is_in([default_root]).any():
        raise HierarchyError(
            f"{source}: several codes have no parent: {_listing(tops.to_list())}, so protab "
            f"would add a total {default_root!r} above them, but {default_root!r} is "
            f"already a code. Pass root= with an unused name, or give these codes a parent."
        )
    return default_root


def _parent_ids(codes: pl.Series, linked: pl.DataFrame) -> np.ndarray:
    """Each code's parent id (its row in ``codes``), -1 for codes without a parent link."""
    ids = pl.DataFrame({"code": codes}).with_row_index("id")
    j = linked.join(ids.rename({"code": "child", "id": "cid"}), on="child").join(
        ids.rename({"code": "parent", "id": "pid"}), on="parent"
    )
    parent_id = np.full(codes.len(), -1, dtype=np.int64)
    parent_id[j["cid"].to_numpy().astype(np.int64)] = j["pid"].to_numpy().astype(np.int64)
    return parent_id


# --------------------------------------------------------------------------------------
# walks over a tree (level-sorted parent ids, root at id 0)
# --------------------------------------------------------------------------------------


def tree_relation(parent: np.ndarray, is_leaf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(leaf id, ancestor id) of every leaf and each of its ancestors, itself and the root
    included, by leaf then from the leaf upward."""
    leaf = np.flatnonzero(is_leaf)
    anc = leaf
    leaf_parts, anc_parts, step_parts = [], [], []
    step = 0
    while anc.size:
        leaf_parts.append(leaf)
        anc_parts.append(anc)
        step_parts.append(np.full(anc.size, step, dtype=np.int32))
        p = parent[anc]
        keep = p >= 0
        leaf, anc, step = leaf[keep], p[keep], step + 1
    leaf_ids = np.concatenate(leaf_parts)
    anc_ids = np.concatenate(anc_parts)
    order = np.lexsort((np.concatenate(step_parts), leaf_ids))
    return leaf_ids[order], anc_ids[order]


def tree_children(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR of children by parent: (children ordered by parent then id, offsets of length n + 1)."""
    nonroot = np.flatnonzero(parent >= 0)
    order = nonroot[np.argsort(parent[nonroot], kind="stable")]
    counts = np.bincount(parent[nonroot], minlength=parent.size)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return order, offsets


def tree_height(parent: np.ndarray, level: np.ndarray, depth: int) -> np.ndarray:
    """Height of each code: 0 for a leaf, 1 + the largest height of its children."""
    bounds = level_bounds(level, depth)
    height = np.zeros(parent.size, dtype=np.int64)
    for lev in range(depth, 0, -1):
        ids = np.arange(bounds[lev], bounds[lev + 1])
        np.maximum.at(height, parent[ids], height[ids] + 1)
    return height


def preorder(
    parent: np.ndarray, level: np.ndarray, depth: int, children: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """Code ids depth-first (each code before its children, siblings in code order);
    ``children`` is :func:`tree_children`."""
    n = parent.size
    bounds = level_bounds(level, depth)
    size = np.ones(n, dtype=np.int64)
    for lev in range(depth, 0, -1):
        ids = np.arange(bounds[lev], bounds[lev + 1])
        size += np.bincount(parent[ids], weights=size[ids], minlength=n).astype(np.int64)
    order, offsets = children
    # Offset of each child inside its parent's block: sizes of its earlier siblings.
    s = size[order]
    cs = np.cumsum(s) - s
    group_start = np.repeat(offsets[:-1], np.diff(offsets))
    before = np.empty(n, dtype=np.int64)
    before[order] = cs - cs[group_start] if order.size else cs
    pos = np.zeros(n, dtype=np.int64)
    for lev in range(1, depth + 1):
        ids = np.arange(bounds[lev], bounds[lev + 1])
        pos[ids] = pos[parent[ids]] + 1 + before[ids]
    out = np.empty(n, dtype=np.int64)
    out[pos] = np.arange(n)
    return out
