"""The Hierarchy class: an immutable tree of codes, its constructors, relation and lookups."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from protab._io import write_text
from protab.errors import HierarchyError
from protab.hierarchy._build import build
from protab.hierarchy._graph import graph_children, graph_height, leaf_coefficients
from protab.hierarchy._input import DEFAULT_ROOT, _as_codes, _key, _listing
from protab.hierarchy._readers import (
    PAIRS,
    POSITIONAL,
    SSB_FRAME,
    check_leadstring,
    code_length_links,
    hrc_links,
    pair_links,
    ssb_links,
)
from protab.hierarchy._tree import preorder, tree_children, tree_height, tree_relation
from protab.hierarchy._writers import graph_frame, hrc_text, ssb_frame

__all__ = ["Hierarchy"]


class Hierarchy:
    """An immutable tree of string codes with one root, and its ``(leaf, ancestor, level)`` relation.

    Build one with :meth:`from_parent_child`, :meth:`from_code_lengths`, :meth:`from_frame`
    (SSBtools), :meth:`read_hrc` (tau-ARGUS) or :meth:`flat`. Every constructor validates
    the tree (no cycles, one parent per code, non-empty codes, one root) and raises
    :class:`~protab.errors.HierarchyError` naming the offending codes.

    :meth:`from_frame`, and :meth:`from_parent_child` when asked, also accept signed links
    and codes with several parents; such a hierarchy is not a tree (:attr:`is_tree` is
    false) and its :meth:`relation` has a coefficient per (leaf, ancestor), see
    :mod:`protab.hierarchy._graph`.

    >>> h = Hierarchy.from_code_lengths(["DE11", "DE12", "DE21", "FR10"], (2, 1, 1))
    >>> h.root, h.depth, h.parent_of("DE11"), h.level_of("DE1")
    ('Total', 3, 'DE1', 2)
    """

    __slots__ = ("_cache", "_code", "_is_leaf", "_level", "_links", "_parent")

    _code: pl.Series
    _parent: np.ndarray
    _level: np.ndarray
    _is_leaf: np.ndarray
    _links: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    _cache: dict[str, Any]

    # ---- construction ----------------------------------------------------------------

    def __init__(self) -> None:
        raise TypeError(
            "build a Hierarchy with Hierarchy.from_parent_child, .from_code_lengths, .from_frame, .read_hrc or .flat"
        )

    @classmethod
    def _new(
        cls,
        code: pl.Series,
        parent: np.ndarray,
        level: np.ndarray,
        links: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> Hierarchy:
        """Wrap validated, level-sorted arrays (root at id 0).

        ``links`` (child ids, parent ids, signs) only for hierarchies that are not trees;
        then ``parent`` holds each code's first parent (the root for top codes), and the
        root is a code without child links when it was added as the total of all leaves.
        """
        self = object.__new__(cls)
        n = parent.size
        has_child = np.zeros(n, dtype=bool)
        if links is None:
            has_child[parent[parent >= 0]] = True
        else:
            has_child[links[1]] = True
            has_child[0] = True  # the root: a total, never a leaf
        arrays: dict[str, np.ndarray] = {
            "_parent": parent.astype(np.int64, copy=False),
            "_level": level.astype(np.int32, copy=False),
            "_is_leaf": ~has_child,
        }
        for name, arr in arrays.items():
            arr.flags.writeable = False
            object.__setattr__(self, name, arr)
        if links is not None:
            links = (
                links[0].astype(np.int64, copy=False),
                links[1].astype(np.int64, copy=False),
                links[2].astype(np.int8, copy=False),
            )
            for arr in links:
                arr.flags.writeable = False
        object.__setattr__(self, "_links", links)
        object.__setattr__(self, "_code", code.alias("code"))
        object.__setattr__(self, "_cache", {})
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Hierarchy is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Hierarchy is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        links = None if self._links is None else tuple(np.array(a) for a in self._links)
        return (Hierarchy._new, (self._code, np.array(self._parent), np.array(self._level), links))

    def __copy__(self) -> Hierarchy:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Hierarchy:
        return self

    @classmethod
    def _build(
        cls,
        parent: pl.Series,
        child: pl.Series,
        *,
        root: object | None,
        source: str,
        default_root: str = DEFAULT_ROOT,
        sign: pl.Series | None = None,
        several_parents: bool = False,
    ) -> Hierarchy:
        """Validate parent-child links (a null parent marks a top code) and build the hierarchy."""
        parts = build(
            parent, child, root=root, source=source, default_root=default_root,
            sign=sign, several_parents=several_parents,
        )
        return cls._new(*parts)

    @classmethod
    def from_parent_child(
        cls,
        pairs: Iterable[tuple[object, object]] | Any,
        *,
        root: str | None = None,
        parent: str = "parent",
        child: str = "child",
        sign: str | None = None,
        several_parents: bool = False,
    ) -> Hierarchy:
        """A hierarchy from (parent, child) links: tuples, or a polars/pandas/pyarrow frame.

        With a frame, the columns named by ``parent`` and ``child`` are used. The root is the
        one code that is never a child. If several codes are never children, a total named
        ``root`` (default ``"Total"``) is added above them; if ``root`` is given and does not
        occur in the pairs, it is added above all top codes. A null parent marks its child as
        a top code (so ``h.to_frame()`` round-trips). Integer codes become strings.

        Hierarchies that are not trees (see :meth:`from_frame` for their meaning):

        * ``sign``: the name of a frame column of +1/−1 (or ``"+"``/``"-"``) per link; with
          tuples, give 3-tuples ``(parent, child, sign)`` instead (2-tuples among them add
          the child, sign +1), and leave ``sign`` None.
          A link with sign −1 subtracts the child from the parent.
        * ``several_parents``: let a code belong to more than one parent (overlapping
          groups). Off by default, so that a stray link in a tree is reported as an error.
        """
        p, c, g = pair_links(pairs, parent, child, sign)
        return cls._build(p, c, root=root, source=PAIRS, sign=g, several_parents=several_parents)

    @classmethod
    def from_code_lengths(
        cls, codes: Iterable[object] | Any, lengths: Iterable[int], *, root: str = DEFAULT_ROOT
    ) -> Hierarchy:
        """A hierarchy from positional codes whose prefixes are their ancestors (e.g. NUTS).

        Like sdcHierarchies' ``hier_compute(method = "len")``: ``lengths`` gives the number of
        characters each level adds, so ``(2, 1, 1)`` makes ``"DE" → "DE1" → "DE11"`` (the
        level-k ancestor of a code is its first ``sum(lengths[:k])`` characters). ``codes``
        are usually the finest codes; shorter codes are placed at their own level, and
        intermediate codes are created as needed. ``root`` names the total above level 1.
        """
        p, c = code_length_links(codes, lengths, root)
        return cls._build(p, c, root=root, source=POSITIONAL)

    @classmethod
    def from_frame(cls, frame: Any, *, root: str | None = None) -> Hierarchy:
        """A hierarchy from an SSBtools to-from frame (``mapsFrom``, ``mapsTo``, ``sign``, ``level``).

        ``mapsFrom`` is the child code and ``mapsTo`` its parent. ``sign`` (optional, default
        +1) is +1 or −1 (or ``"+"``/``"-"``): a −1 row subtracts the child, so
        ``Europe → EU (+1)`` and ``nonEU → EU (−1)`` make EU = Europe − nonEU. A code may map
        to several parents (overlapping groups). ``level`` is ignored: it is SSBtools' order
        of computation, and protab computes levels itself.

        A frame that forms a tree (one parent per code, all signs +1) gives the same tree as
        :meth:`from_parent_child`. Otherwise (see :mod:`protab.hierarchy._graph`): each code
        publishes Σ coefficient × leaf, the coefficient of a leaf being the sum over its
        paths up to the code of the product of the signs (so a leaf reached twice counts
        twice, and one that cancels out is left out); the links must not form a cycle; the
        root is the total of all leaves: the one code without parent that is exactly that,
        else a total named ``root`` (default ``"Total"``) counting every leaf once; the other
        codes without parent are at level 1 below it. Levels are longest paths from the root.
        Leaves are the codes that are never ``mapsTo``; data are coded at them, and tables
        publish every code, the leaves included (SSBtools' ``inputInOutput = TRUE``). For a
        tree, top codes are handled as in :meth:`from_parent_child`.
        """
        p, c, sign = ssb_links(frame)
        return cls._build(p, c, root=root, source=SSB_FRAME, sign=sign, several_parents=True)

    @classmethod
    def read_hrc(
        cls,
        source: str | os.PathLike[str],
        *,
        root: str = DEFAULT_ROOT,
        leadstring: str = "@",
        encoding: str = "utf-8-sig",
    ) -> Hierarchy:
        """A hierarchy from a tau-ARGUS ``.hrc`` file (a path, or the text itself).

        One code per line, prefixed by ``leadstring`` once per level below level 1: no prefix
        is level 1 (children of the total ``root``, which the file does not list), ``@`` level
        2, ``@@`` level 3. Each code's parent is the nearest line above it one level up. A
        ``str`` containing a newline is taken as the text; any other ``str`` or path is read.
        Blank lines are skipped; surrounding whitespace is stripped.
        """
        parent, code, what = hrc_links(source, root=root, leadstring=leadstring, encoding=encoding)
        return cls._build(parent, code, root=root, source=what)

    @classmethod
    def flat(cls, codes: Iterable[object] | Any, *, root: str = DEFAULT_ROOT) -> Hierarchy:
        """A one-level hierarchy: every code a child of ``root`` (sdcHierarchies ``hier_create``)."""
        s = _as_codes(codes, "codes")
        p = pl.repeat(str(root), s.len(), eager=True, dtype=pl.String)
        return cls._build(p, s, root=root, source="flat codes")

    # ---- output formats ----------------------------------------------------------------

    def to_hrc(self, *, leadstring: str = "@") -> str:
        """The tau-ARGUS ``.hrc`` text: codes depth-first, ``leadstring`` × (level − 1) before each."""
        if self._links is not None:
            raise HierarchyError(
                "a tau-ARGUS .hrc file holds a tree; this hierarchy has signs or codes with "
                "several parents: write it with to_ssb_frame() instead"
            )
        check_leadstring(leadstring)
        return hrc_text(self._code, self._level, self.depth, self._preorder()[1:], leadstring)

    def write_hrc(self, path: str | os.PathLike[str], *, leadstring: str = "@") -> None:
        """Write the tau-ARGUS ``.hrc`` file atomically (a temporary file, then renamed)."""
        write_text(path, self.to_hrc(leadstring=leadstring))

    def relation(self) -> pa.Table:
        """The bridge ``(leaf, ancestor, level)``: one row per leaf and each of its ancestors.

        Each leaf is paired with itself and with every code above it up to the root;
        ``level`` is the ancestor's level (root 0). Margins are this relation joined to inner
        cells on ``leaf``, grouped by ``ancestor``. Rows are ordered by leaf (in code order),
        then from the leaf itself up to the root. Its length is Σ over leaves (level + 1).

        For a hierarchy that is not a tree (:attr:`is_tree` false) a fourth column ``coef``
        (int64) holds the coefficient of the leaf in the ancestor: margins are then
        Σ coef × value. Pairs whose coefficient is 0 are left out; the root has coefficient
        1 for every leaf. Rows are ordered by leaf, then by level from the leaf up (codes of
        one level in code order).
        """
        if self._links is not None:
            return self._signed_relation()
        leaf_ids, anc_ids = tree_relation(self._parent, self._is_leaf)
        codes = self._pa_codes()
        return pa.table(
            {
                "leaf": codes.take(pa.array(leaf_ids)),
                "ancestor": codes.take(pa.array(anc_ids)),
                "level": pa.array(self._level[anc_ids], type=pa.int32()),
            }
        )

    def _coef(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(leaf id, code id, coefficient) of every non-zero pair of a non-tree, root included."""
        c = self._cache.get("coef")
        if c is None:
            assert self._links is not None
            c = self._cache["coef"] = leaf_coefficients(self._is_leaf, self._level, self._links)
        return c

    def _signed_relation(self) -> pa.Table:
        li, ci, co = self._coef()
        codes = self._pa_codes()
        return pa.table(
            {
                "leaf": codes.take(pa.array(li)),
                "ancestor": codes.take(pa.array(ci)),
                "level": pa.array(self._level[ci], type=pa.int32()),
                "coef": pa.array(co, type=pa.int64()),
            }
        )

    @property
    def is_tree(self) -> bool:
        """False for hierarchies with signs −1 or codes with several parents (see :meth:`from_frame`)."""
        return self._links is None

    def _codes_without_leaves(self) -> list[str]:
        """Codes whose every leaf coefficient is 0 (no row in :meth:`relation`); none in a tree."""
        if self._links is None:
            return []
        present = np.zeros(len(self), dtype=bool)
        present[self._coef()[1]] = True
        return self._code.filter(pl.Series(~present)).to_list()

    def code_levels(self) -> pa.Table:
        """Every code with its ``level`` (int32, root 0), ``parent`` (null for the root) and ``is_leaf``.

        In a hierarchy that is not a tree, ``parent`` is a code's first parent in input order
        (the root for top codes); :meth:`to_frame` and :meth:`to_ssb_frame` give every link.
        """
        codes = self._pa_codes()
        root = self._parent < 0
        pidx = pa.array(np.where(root, 0, self._parent), mask=root)
        return pa.table(
            {
                "code": codes,
                "level": pa.array(self._level, type=pa.int32()),
                "parent": codes.take(pidx),
                "is_leaf": pa.array(self._is_leaf, type=pa.bool_()),
            }
        )

    def to_frame(self) -> pl.DataFrame:
        """Columns ``code``, ``parent`` (null for the root), ``level``; from_parent_child reads it back.

        For a hierarchy that is not a tree: one row per link, with a column ``sign`` after
        ``parent``, and a row with a null parent for each top code (the root, when it is a
        code of the input, and the codes without parent); read it back with
        ``from_parent_child(f, child="code", sign="sign", several_parents=True)`` (with
        ``root=`` when the root was added and is not named ``"Total"``).
        """
        if self._links is not None:
            return graph_frame(self._code, self._parent, self._level, self._links)
        out = pl.from_arrow(self.code_levels().select(["code", "parent", "level"]))
        assert isinstance(out, pl.DataFrame)
        return out

    def to_ssb_frame(self) -> pl.DataFrame:
        """The SSBtools to-from frame: ``mapsFrom`` (child), ``mapsTo`` (parent), ``sign`` (1), ``level``.

        ``level`` follows SSBtools' AutoLevel: the order of computation, i.e. the height of
        ``mapsTo`` (1 for a parent of leaves only). :meth:`from_frame` reads it back.
        """
        return ssb_frame(self._code, self._parent, self._height(), self._links)

    # ---- validation of data against the hierarchy ---------------------------------------

    def check_codes(
        self, codes: Iterable[object] | Any, *, table: str | None = None, column: str | None = None
    ) -> None:
        """Raise :class:`HierarchyError` unless every code found in the data is a leaf.

        ``codes`` are the (distinct) codes of a data column. Unknown codes and codes that are
        internal nodes (margins) are listed separately, as are NULLs: data must be coded at
        the leaves. Returns None when all codes are leaves.
        """
        where = (
            f"column {column!r} of table {table!r}"
            if table and column
            else f"column {column!r}"
            if column
            else f"table {table!r}"
            if table
            else "the data"
        )
        s = _as_codes(codes, where)
        n_null = s.null_count()
        # the codes that are not leaves, found by an anti-join with the leaves (only they are
        # made distinct and sorted: a million valid codes cost one hash probe each)
        leaf = pl.Series(self._is_leaf)
        bad = s.drop_nulls().to_frame("code").join(
            self._code.filter(leaf).to_frame("code"), on="code", how="anti")["code"].unique().sort()
        is_internal = bad.is_in(self._code.filter(~leaf).implode())
        unknown = bad.filter(~is_internal).to_list()
        internal = bad.filter(is_internal).to_list()
        if not unknown and not internal and not n_null:
            return
        parts = []
        if unknown:
            parts.append(
                f"codes unknown to the hierarchy: {_listing(unknown)}; add them to the "
                f"hierarchy, or recode these records to codes it has"
            )
        if internal:
            parts.append(
                f"codes that are internal nodes (margins), not leaves: {_listing(internal)}; "
                f"data must be coded at the leaves, so recode these records to leaf codes, or "
                f"drop these codes' children from the hierarchy so that they become leaves"
            )
        if n_null:
            parts.append(f"NULL values ({n_null} in all): fill them in with a leaf code or drop those records")
        raise HierarchyError(
            f"{where} holds codes that are not leaves of the hierarchy with root {self.root!r}. "
            + ". ".join(p[0].upper() + p[1:] for p in parts)
            + "."
        )

    # ---- properties and lookups ---------------------------------------------------------

    @property
    def root(self) -> str:
        """The root code (the grand total)."""
        return str(self._code[0])

    @property
    def codes(self) -> list[str]:
        """All codes, root first, by level then input order (see the module docstring)."""
        return self._code.to_list()

    @property
    def leaves(self) -> list[str]:
        """The codes without children (the codes data are coded in), in code order."""
        return self._code.filter(pl.Series(self._is_leaf)).to_list()

    @property
    def depth(self) -> int:
        """The largest level (0 for a root alone, 1 for a flat hierarchy)."""
        return int(self._level[-1])

    def level_of(self, code: object) -> int:
        """The level of ``code`` (root 0)."""
        return int(self._level[self._id(code)])

    def parent_of(self, code: object) -> str | None:
        """The parent of ``code``; None for the root.

        Raises :class:`HierarchyError` for a code with several parents (see :meth:`parents_of`).
        """
        i = self._id(code)
        if self._links is not None:
            ps = self.parents_of(code)
            if len(ps) > 1:
                raise HierarchyError(f"{code!r} has several parents: {ps!r}; use parents_of")
        p = int(self._parent[i])
        return None if p < 0 else str(self._code[p])

    def parents_of(self, code: object) -> list[str]:
        """The parents of ``code`` in code order: none for the root, one in a tree.

        A top code of a hierarchy that is not a tree has the root as its parent.
        """
        i = self._id(code)
        if self._links is None or i == 0:
            p = int(self._parent[i])
            return [] if p < 0 else [str(self._code[p])]
        child, parent, _ = self._links
        ps = np.unique(parent[child == i])
        return self._code.gather(ps).to_list() if ps.size else [self.root]

    def children_of(self, code: object) -> list[str]:
        """The children of ``code`` in code order; empty for a leaf.

        In a hierarchy that is not a tree these are the codes linked to ``code`` whatever
        their sign (plus the top codes, for the root).
        """
        i = self._id(code)
        order, offsets = self._children_csr()
        return self._code.gather(order[offsets[i] : offsets[i + 1]]).to_list()

    def __len__(self) -> int:
        return int(self._parent.size)

    def __contains__(self, code: object) -> bool:
        k = _key(code)
        return k is not None and k in self._index()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Hierarchy):
            return NotImplemented
        if self is other:
            return True
        if len(self) != len(other) or self.root != other.root or hash(self) != hash(other):
            return False
        if (self._links is None) != (other._links is None):
            return False
        return self._canonical().equals(other._canonical()) and (
            self._links is None or set(self.codes) == set(other.codes))

    def __hash__(self) -> int:
        """A hash of the content, computed once: sessions keep tables per hierarchy in dicts, and
        requests bring ever new hierarchies of equal size. For a tree, the sum of one hash per
        (code, parent) pair (in any order, vectorised); otherwise of the sorted links."""
        h = self._cache.get("hash")
        if h is None:
            if self._links is None:
                codes = self._code.hash(seed=0).to_numpy()
                parents = np.where(self._parent >= 0, codes[np.maximum(self._parent, 0)], np.uint64(0))
                pairs = codes * np.uint64(0x9E3779B97F4A7C15) ^ parents
                content: object = int(pairs.sum(dtype=np.uint64))
            else:
                content = self._canonical().hash_rows(seed=0).to_numpy().tobytes()
            h = self._cache["hash"] = hash((self.root, len(self), content))
        return int(h)

    def _canonical(self) -> pl.DataFrame:
        """The links (code, parent[, sign]) sorted: equal hierarchies have equal frames."""
        c = self._cache.get("canonical")
        if c is None:
            cols = ["code", "parent"] if self._links is None else ["code", "parent", "sign"]
            c = self._cache["canonical"] = self.to_frame().select(cols).sort(cols, nulls_last=True)
        return c

    def __repr__(self) -> str:
        tree = "" if self._links is None else ", tree=False"
        return (
            f"Hierarchy(root={self.root!r}, codes={len(self)}, leaves={int(self._is_leaf.sum())}, "
            f"depth={self.depth}{tree})"
        )

    # ---- internals ------------------------------------------------------------------------

    def _pa_codes(self) -> pa.Array:
        c = self._cache.get("pa")
        if c is None:
            arr = self._code.to_arrow()
            if isinstance(arr, pa.ChunkedArray):
                arr = arr.combine_chunks()
            c = self._cache["pa"] = arr.cast(pa.string())
        return c

    def _index(self) -> dict[str, int]:
        d = self._cache.get("index")
        if d is None:
            d = self._cache["index"] = dict(zip(self._code.to_list(), range(len(self))))
        return d

    def _id(self, code: object) -> int:
        k = _key(code)
        i = None if k is None else self._index().get(k)
        if i is None:
            raise HierarchyError(f"{code!r} is not a code of the hierarchy with root {self.root!r}")
        return i

    def _children_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """Children by parent: (children by parent then id, offsets of length n + 1)."""
        c = self._cache.get("csr")
        if c is None:
            if self._links is not None:
                c = graph_children(self._parent, self._links)
            else:
                c = tree_children(self._parent)
            self._cache["csr"] = c
        return c

    def _height(self) -> np.ndarray:
        """Height of each code: 0 for a leaf, 1 + the largest height of its children."""
        if self._links is not None:
            return graph_height(self._level, self._links)
        return tree_height(self._parent, self._level, self.depth)

    def _preorder(self) -> np.ndarray:
        """Code ids depth-first (each code before its children, siblings in code order)."""
        return preorder(self._parent, self._level, self.depth, self._children_csr())
