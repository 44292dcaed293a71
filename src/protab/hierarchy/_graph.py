"""Hierarchies that are not trees: signed links and codes with several parents.

An SSBtools hierarchy frame describes each output code as a signed sum of other codes
(``EU = Europe − nonEU``), and a code may feed several output codes (overlapping age
groups). Read as a graph with an edge from every child to its parent, such a hierarchy
must be acyclic; what a margin publishes is then fixed by the *coefficients*: the
coefficient of leaf ``l`` in code ``a`` is the sum, over every path from ``l`` up to
``a``, of the product of the signs along the path. A tree has coefficient 1 on every
(leaf, ancestor) pair; ``EU = Europe − nonEU`` gives 1 to EU members and 0 (no entry) to
the others; a leaf reached twice with sign +1 counts twice (coefficient 2), as in SSBtools.

The root of such a hierarchy is always the plain total of all leaves (coefficient 1 for
every leaf): the one code without parent that is exactly that (or the one named as the
default root, ``"Total"``, when several are), else a total added with coefficient 1 on
every leaf (*not* the sum of the codes without parent, which may overlap or subtract).
The other codes without parent sit right below the root, at level 1. Levels are longest
paths from the root, so a parent always sits above each of its children.

In tables (``protab.rollup``) every value of an inner cell enters a published cell
multiplied by the product over dimensions of its leaves' coefficients: counts, weights and
sums become signed sums (a count may be negative, e.g. nonEU − Europe), and the model
matrix X holds these coefficients, so ``X.T @ y`` is still the published count. The cell
key of such a cell is the same signed sum of its records' keys, taken modulo the key
modulus as a residue in [0, modulus): it depends only on which records the cell holds and
with which coefficients, so a cell gets the same key (and perturbation) in every table
and under every hierarchy that defines it, e.g. EU as Europe − nonEU or as the sum of its
members; the key of −S is the modulus minus the key of S (mod the modulus).

Everything is vectorised: Python loops run over levels (rounds of a topological sort, and
powers of the signed adjacency matrix), never over codes.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy import sparse

from protab.errors import HierarchyError, show_values
from protab.hierarchy._input import _listing
from protab.hierarchy._tree import Parts, level_sorted


def _children_lists(n: int, child: np.ndarray, parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR of children by parent: (children ordered by parent, offsets of length n + 1)."""
    order = np.argsort(parent, kind="stable")
    counts = np.bincount(parent, minlength=n)
    return child[order], np.concatenate([[0], np.cumsum(counts)])


def _gather(kids: np.ndarray, offsets: np.ndarray, of: np.ndarray) -> np.ndarray:
    """The children of the codes ``of`` (concatenated)."""
    starts, ends = offsets[of], offsets[of + 1]
    cnt = ends - starts
    total = int(cnt.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.repeat(starts - (np.cumsum(cnt) - cnt), cnt)
    return kids[first + np.arange(total)]


def longest_levels(n: int, child: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Level of each code as the longest path from a code without parents (those are 0).

    A topological sort by rounds: a code is placed once all its parents are. Codes never
    placed (level -1) sit on a cycle or below one. ``child``/``parent`` are unique links.
    """
    level = np.full(n, -1, dtype=np.int64)
    remaining = np.bincount(child, minlength=n)
    kids, offsets = _children_lists(n, child, parent)
    frontier = np.flatnonzero(remaining == 0)
    mark = np.zeros(n, dtype=bool)
    lev = 0
    while frontier.size:
        level[frontier] = lev
        ch = _gather(kids, offsets, frontier)
        if ch.size == 0:
            break
        remaining -= np.bincount(ch, minlength=n)
        mark[ch[remaining[ch] == 0]] = True  # a mask, not np.unique: O(n) per level
        frontier = np.flatnonzero(mark)
        mark[frontier] = False
        lev += 1
    return level


def cycle_error(codes: pl.Series, child: np.ndarray, parent: np.ndarray, unplaced: np.ndarray) -> HierarchyError:
    """The error for links with a cycle: one cycle spelled out, the codes on cycles listed."""
    n = codes.len()
    on = np.zeros(n, dtype=bool)
    on[unplaced] = True
    # Peel codes with no child left among the unplaced ones: what remains lies on cycles
    # (or between two of them). Error path only, so a loop per peeled layer is fine.
    while True:
        inside = on[child] & on[parent]
        has_child = np.zeros(n, dtype=bool)
        has_child[parent[inside]] = True
        peel = on & ~has_child
        if not peel.any():
            break
        on &= ~peel
    names_ids = np.flatnonzero(on)
    inside = on[child] & on[parent]
    first_parent = np.full(n, -1, dtype=np.int64)
    c_in, p_in = child[inside], parent[inside]
    first_parent[c_in[::-1]] = p_in[::-1]  # the first link of each code wins
    path = [int(names_ids[0])]
    while len(path) < 9 and path.count(path[-1]) < 2:
        path.append(int(first_parent[path[-1]]))
    if path.count(path[-1]) == 2:
        path = path[path.index(path[-1]) :]
    shown = " → ".join(repr(codes[i]) for i in path)
    if path[-1] != path[0]:
        shown += " → …"
    below = unplaced.size - names_ids.size
    extra = f"; {below} more code(s) lie below them" if below > 0 else ""
    return HierarchyError(
        f"the parent links form a cycle (a code would be its own ancestor), e.g. {shown} "
        f"(each code followed by one of its parents). Codes on cycles: "
        f"{_listing(codes.gather(names_ids).to_list())}{extra}. Remove one link of each cycle."
    )


def coefficients(n: int, leaves: np.ndarray, child: np.ndarray, parent: np.ndarray, sign: np.ndarray) -> sparse.csr_matrix:
    """The (leaf × code) matrix of coefficients: Σ over paths of the product of signs.

    Row ``i`` belongs to ``leaves[i]``; the leaf itself has coefficient 1. Zeros (paths
    that cancel) are removed. The links must be acyclic.
    """
    a = sparse.csr_matrix((sign.astype(np.int64), (child, parent)), shape=(n, n))
    m = sparse.csr_matrix(
        (np.ones(leaves.size, dtype=np.int64), (np.arange(leaves.size), leaves)), shape=(leaves.size, n)
    )
    total = m.copy()
    while True:
        m = m @ a
        m.eliminate_zeros()
        if m.nnz == 0:
            break
        total = total + m
    total.eliminate_zeros()
    total.sort_indices()
    return total


def _plain_totals(coef: sparse.csc_matrix) -> np.ndarray:
    """Per code: does it count every leaf exactly once (coefficient 1 for all leaves)?"""
    cols = np.repeat(np.arange(coef.shape[1]), np.diff(coef.indptr))
    ones = np.bincount(cols[coef.data == 1], minlength=coef.shape[1])
    return (ones == coef.shape[0]) & (np.diff(coef.indptr) == coef.shape[0])


def graph_parts(df: pl.DataFrame, *, root: str | None, source: str, default_root: str) -> Parts:
    """The parts of a hierarchy from unique links ``parent, child[, sign]`` that do not form a tree.

    Null parents mark top codes. See the module docstring for the root and the levels.
    """
    if "sign" not in df.columns:
        df = df.with_columns(pl.lit(1, dtype=pl.Int8).alias("sign"))
    linked = df.filter(pl.col("parent").is_not_null())
    codes, added = _graph_codes(df, linked, root=root, source=source)
    c, p, s = _link_ids(linked, codes)
    n = codes.len()
    unplaced = np.flatnonzero(longest_levels(n, c, p) < 0)
    if unplaced.size:
        raise cycle_error(codes, c, p, unplaced)
    is_leaf = np.ones(n, dtype=bool)
    is_leaf[p] = False
    has_parent = np.zeros(n, dtype=bool)
    has_parent[c] = True
    if added:
        is_leaf[0] = False  # the added root, a total of all leaves
    leaves = np.flatnonzero(is_leaf)
    coef = coefficients(n, leaves, c, p, s).tocsc()
    tops = np.flatnonzero(~has_parent)
    if root is not None:
        rid = 0 if added else _given_root(codes, linked, coef, leaves, has_parent, root=root, source=source)
    else:
        rid = _found_root(codes, coef, leaves, has_parent, tops, source=source, default_root=default_root)
        if rid < 0:  # a total of all leaves added as the root, id 0
            codes = pl.concat([pl.Series("code", [default_root], dtype=pl.String), codes])
            c, p, tops, rid = c + 1, p + 1, tops + 1, 0
    return _graph_levels(codes, c, p, s, tops, rid)


def _graph_codes(
    df: pl.DataFrame, linked: pl.DataFrame, *, root: str | None, source: str
) -> tuple[pl.Series, bool]:
    """All codes (those that are only parents, then the children, by first appearance; a
    given ``root`` that is not among them first) and whether that root was added."""
    declared_tops = df.filter(pl.col("parent").is_null())["child"]
    both = declared_tops.filter(declared_tops.is_in(linked["child"].implode())).unique(maintain_order=True)
    if both.len():
        raise HierarchyError(
            f"{source}: codes given both as top codes (no parent) and with a parent: "
            f"{_listing(both.to_list())}. Drop the rows without a parent for these codes."
        )
    parents = linked["parent"].unique(maintain_order=True)
    children = df["child"].unique(maintain_order=True)
    only_parents = parents.filter(~parents.is_in(children.implode()))
    codes = pl.concat([only_parents, children]).alias("code")
    if root is not None and not codes.is_in([root]).any():
        return pl.concat([pl.Series("code", [root], dtype=pl.String), codes]), True
    return codes, False


def _link_ids(linked: pl.DataFrame, codes: pl.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The links as (child id, parent id, sign), ids being rows of ``codes``, in link order."""
    ids = pl.DataFrame({"code": codes}).with_row_index("id")
    j = linked.join(ids.rename({"code": "child", "id": "cid"}), on="child", maintain_order="left").join(
        ids.rename({"code": "parent", "id": "pid"}), on="parent", maintain_order="left"
    )
    c = j["cid"].to_numpy().astype(np.int64)
    p = j["pid"].to_numpy().astype(np.int64)
    s = j["sign"].to_numpy().astype(np.int64)
    return c, p, s


def _code_id(codes: pl.Series, code: str) -> int:
    return int(np.flatnonzero((codes == code).to_numpy())[0])


def _given_root(
    codes: pl.Series,
    linked: pl.DataFrame,
    coef: sparse.csc_matrix,
    leaves: np.ndarray,
    has_parent: np.ndarray,
    *,
    root: str,
    source: str,
) -> int:
    """The id of the given ``root``, a code of the links: it must have no parent and be the
    total of all leaves."""
    rid = _code_id(codes, root)
    if has_parent[rid]:
        ps = linked.filter(pl.col("child") == root)["parent"].to_list()
        raise HierarchyError(
            f"{source}: the root {root!r} also appears as a child (of {show_values(ps)}). "
            f"The root must have no parent: remove that link, or name another root."
        )
    if not _plain_totals(coef)[rid]:
        raise HierarchyError(_not_total(source, root, codes, coef, rid, leaves))
    return rid


def _found_root(
    codes: pl.Series,
    coef: sparse.csc_matrix,
    leaves: np.ndarray,
    has_parent: np.ndarray,
    tops: np.ndarray,
    *,
    source: str,
    default_root: str,
) -> int:
    """The id of the one top code that is the total of all leaves (or of the one named
    ``default_root`` when several are); -1 when a total named ``default_root`` is to be added."""
    plain = _plain_totals(coef)
    plain_tops = [int(t) for t in tops[plain[tops]]]
    named = [t for t in plain_tops if codes[t] == default_root]
    if len(plain_tops) == 1:
        return plain_tops[0]
    if named:
        return named[0]
    if codes.is_in([default_root]).any():
        did = _code_id(codes, default_root)
        raise HierarchyError(
            f"{source}: no single top code is the total of all leaves, so protab would add a "
            f"total {default_root!r}, but {default_root!r} is already a code. "
            + (_not_total(source, default_root, codes, coef, did, leaves, lead=False) + " " if not has_parent[did] else "")
            + "Pass root= with an unused name for the grand total."
        )
    return -1


def _graph_levels(
    codes: pl.Series, c: np.ndarray, p: np.ndarray, s: np.ndarray, tops: np.ndarray, rid: int
) -> Parts:
    """Levels as longest paths from the root ``rid``, the other top codes hanging right below
    it; each code's first parent in input order; the parts sorted by level."""
    n = codes.len()
    others = tops[tops != rid]
    vc = np.concatenate([c, others])
    vp = np.concatenate([p, np.full(others.size, rid, dtype=np.int64)])
    level = longest_levels(n, vc, vp)
    first = np.full(n, -1, dtype=np.int64)
    first[vc[::-1]] = vp[::-1]  # the first link of each code in input order
    return level_sorted(codes, first, level, links=(c, p, s))


def _not_total(
    source: str, root: str, codes: pl.Series, coef: sparse.csc_matrix, rid: int, leaves: np.ndarray, *, lead: bool = True
) -> str:
    col = np.zeros(coef.shape[0], dtype=np.int64)
    sub = coef[:, rid]
    col[sub.indices] = sub.data
    off = np.flatnonzero(col != 1)
    ex = [f"{codes[int(leaves[i])]!r}: {int(col[i])}" for i in off[:3]]
    head = f"{source}: the root {root!r} is not the total of all leaves" if lead else f"{root!r} is not the total of all leaves"
    return (
        f"{head} (a grand total counts every leaf once); its coefficients differ from 1 for "
        f"{_listing(codes.gather(leaves[off]).to_list())}, e.g. {'; '.join(ex)}."
        + (" Name another root, or leave out root= to add a total of all leaves." if lead else "")
    )


# --------------------------------------------------------------------------------------
# walks over a hierarchy that is not a tree (level-sorted ids, root at id 0)
# --------------------------------------------------------------------------------------


def leaf_coefficients(
    is_leaf: np.ndarray, level: np.ndarray, links: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(leaf id, code id, coefficient) of every non-zero pair, the root included (every leaf
    once), by leaf, then from the deepest code up, then by code id."""
    child, parent, sign = links
    leaves = np.flatnonzero(is_leaf)
    m = coefficients(is_leaf.size, leaves, child, parent, sign).tocoo()
    keep = m.col != 0  # the root's column is set below: every leaf once
    li = np.concatenate([leaves[m.row[keep]], leaves])
    ci = np.concatenate([m.col[keep].astype(np.int64), np.zeros(leaves.size, dtype=np.int64)])
    co = np.concatenate([m.data[keep].astype(np.int64), np.ones(leaves.size, dtype=np.int64)])
    order = np.lexsort((ci, -level[ci].astype(np.int64), li))
    return li[order], ci[order], co[order]


def graph_children(
    parent: np.ndarray, links: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """CSR of children by parent: every code linked below a code whatever the sign, and the
    top codes below the root; (children by parent then id, offsets of length n + 1)."""
    n = parent.size
    child, par, _ = links
    tops = np.flatnonzero(parent == 0)
    tops = tops[~np.isin(tops, child)]
    ch = np.concatenate([child, tops])
    pa_ = np.concatenate([par, np.zeros(tops.size, dtype=np.int64)])
    key = np.unique(pa_ * n + ch)  # unique links, by parent then child id
    pa_, ch = key // n, key % n
    counts = np.bincount(pa_, minlength=n)
    return ch, np.concatenate([[0], np.cumsum(counts)])


def graph_height(level: np.ndarray, links: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    """Height of each code: 0 for a leaf, 1 + the largest height of the codes linked below it."""
    # a child's level is above its parents' (longest paths): deepest children first
    child, parent, _ = links
    height = np.zeros(level.size, dtype=np.int64)
    child_level = level[child]
    for lev in np.unique(child_level)[::-1]:
        sel = child_level == lev
        np.maximum.at(height, parent[sel], height[child[sel]] + 1)
    return height
