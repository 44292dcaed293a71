"""Building a hierarchy from parent-child links: the checks every input goes through, then a
tree (:mod:`._tree`) or, for signed links and codes with several parents, a graph (:mod:`._graph`)."""

from __future__ import annotations

import polars as pl

from protab.errors import HierarchyError
from protab.hierarchy._graph import graph_parts
from protab.hierarchy._input import _FIX_LINKS, _key, _listing
from protab.hierarchy._tree import Parts, tree_parts


def build(
    parent: pl.Series,
    child: pl.Series,
    *,
    root: object | None,
    source: str,
    default_root: str,
    sign: pl.Series | None = None,
    several_parents: bool = False,
) -> Parts:
    """The parts of the hierarchy of parent-child links (a null parent marks a top code).

    ``sign``: +1/−1 per link (already checked), or None for all +1. ``several_parents``:
    a code may have more than one parent. Links that form a tree (one parent per code, all
    signs +1) always give a tree; anything else goes to :mod:`._graph`.
    """
    root_key = _root_key(root)
    df = pl.DataFrame({"parent": parent.cast(pl.String), "child": child.cast(pl.String)})
    if sign is not None and (sign != 1).any():
        df = df.with_columns(sign.cast(pl.Int8).alias("sign"))
    if df.height == 0:
        raise HierarchyError(f"{source}: no codes given; a hierarchy needs at least one code below its root")
    _refuse_empty_codes(df, source)
    _refuse_own_parents(df, source)
    # Exact duplicate links are fine; a code with two different parents is not (unless
    # several_parents), nor one link with both signs.
    df = df.unique(maintain_order=True)
    signed = "sign" in df.columns
    if signed:
        _refuse_both_signs(df, source)
    multi = (
        df.group_by("child", maintain_order=True).agg(pl.col("parent"), pl.len().alias("n")).filter(pl.col("n") > 1)
    )
    if multi.height and not several_parents:
        raise _several_parents_error(multi, source)
    if multi.height or signed:
        return graph_parts(df, root=root_key, source=source, default_root=default_root)
    return tree_parts(df, root=root_key, source=source, default_root=default_root)


def _root_key(root: object | None) -> str | None:
    """The root's name as a string (integers converted), None when not given."""
    if root is None:
        return None
    root_key = _key(root)
    if not root_key:
        raise HierarchyError(f"root must be a non-empty string, got {root!r}")
    return root_key


def _refuse_empty_codes(df: pl.DataFrame, source: str) -> None:
    """HierarchyError naming the rows with a null or empty code (a null parent is a top code)."""
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


def _refuse_own_parents(df: pl.DataFrame, source: str) -> None:
    """HierarchyError naming the codes listed as their own parent."""
    selfp = df.filter(pl.col("parent") == pl.col("child"))["child"].unique(maintain_order=True).to_list()
    if selfp:
        raise HierarchyError(
            f"{source}: codes listed as their own parent: {_listing(selfp)}. Remove these "
            f"links (a code cannot contain itself)."
        )


def _refuse_both_signs(df: pl.DataFrame, source: str) -> None:
    """HierarchyError naming the links given with sign +1 and with sign -1."""
    both = df.group_by("parent", "child", maintain_order=True).len().filter(pl.col("len") > 1)
    if both.height:
        ex = [f"{c!r} → {p!r}" for p, c in zip(both["parent"].head(3), both["child"].head(3))]
        raise HierarchyError(
            f"{source}: links given with both signs, +1 and -1: {_listing(ex)}. Keep one "
            f"sign per link (a code cannot be added to and subtracted from the same code)."
        )


def _several_parents_error(multi: pl.DataFrame, source: str) -> HierarchyError:
    """The error for codes with more than one parent when several_parents is off."""
    examples = []
    for c, ps in zip(multi["child"].head(3).to_list(), multi["parent"].head(3).to_list()):
        shown = ", ".join("none (top code)" if p is None else repr(p) for p in ps)
        examples.append(f"{c!r} (parents {shown})")
    return HierarchyError(
        f"{source}: codes with more than one parent: {_listing(multi['child'].to_list())}; "
        f"e.g. {'; '.join(examples)}. Either {_FIX_LINKS} (drop the extra links, or give "
        f"the code a distinct name under each parent), or, if the code belongs to several "
        f"groups on purpose (overlapping groups), pass several_parents=True."
    )
