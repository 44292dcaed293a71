"""Hierarchies of dimension codes, and the ``(leaf, ancestor, level)`` relation margins join to.

A :class:`Hierarchy` is an immutable tree of string codes with one root (the grand total,
``"Total"`` unless named otherwise). Data are coded at its leaves; every other code is a
margin. :meth:`Hierarchy.relation` gives the bridge table with one row per (leaf, ancestor)
pair, the leaf itself and the root included, so that every margin of a table is a join of
inner cells with these relations followed by ``GROUP BY`` (DESIGN.md, idea 2).

Conventions:

* **Levels**: the root is level 0, its children level 1, and so on. Leaves may sit at
  different levels (ragged trees). ``depth`` is the largest level.
* **Order**: codes are kept by level, then in input order: the order of the links that
  introduce them (the row, or ``.hrc`` line, where a code appears as a child; codes that
  are never children by their first appearance as a parent). The root comes first.
* **Codes are strings.** Integer codes (Python, numpy, polars, Arrow) are converted with
  ``str()`` on input and in lookups, so ``101`` becomes ``"101"``: give strings when codes
  have leading zeros (``"0101"``). Floats, booleans and other types are refused.

Readers for the formats of the R and tau-ARGUS tools: parent-child pairs, positional codes
(sdcHierarchies ``hier_compute(method = "len")``), SSBtools to-from frames
(``mapsFrom``/``mapsTo``/``sign``/``level``) and tau-ARGUS ``.hrc`` files.

Everything is vectorised (numpy and polars): hierarchies of national 1 km grids have
10^5-10^6 codes. Python loops run over levels (or ``log2`` of the number of codes), never
over codes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from protab._io import write_text
from protab.errors import HierarchyError, show_values

__all__ = ["Hierarchy"]

DEFAULT_ROOT = "Total"

_FIX_LINKS = "give every code exactly one parent"


# --------------------------------------------------------------------------------------
# input conversion
# --------------------------------------------------------------------------------------


def _fallback_str(values: list[Any], what: str) -> pl.Series:
    """Convert a list of mixed Python values to strings, accepting only str and integers."""
    out: list[str | None] = []
    bad: list[Any] = []
    for v in values:
        if v is None or isinstance(v, str):
            out.append(v)
        elif isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
            out.append(str(v))
        else:
            out.append(None)
            bad.append(v)
    if bad:
        raise HierarchyError(
            f"{what}: codes must be strings (or integers, converted with str()); got "
            f"{show_values(bad)} of type {type(bad[0]).__name__}. Convert them to strings first."
        )
    return pl.Series(what, out, dtype=pl.String)


def _as_codes(values: Any, what: str) -> pl.Series:
    """Return ``values`` as a polars String series (nulls kept), converting integers."""
    if isinstance(values, pl.Series):
        s = values
    elif isinstance(values, (pa.Array, pa.ChunkedArray)):
        s = pl.Series(what, values)
    elif isinstance(values, np.ndarray):
        if values.dtype.kind in "OUS":
            s = _fallback_str(values.tolist(), what)
        else:
            s = pl.Series(what, values)
    elif type(values).__module__.startswith("pandas"):
        converted = pl.from_pandas(values)
        if not isinstance(converted, pl.Series):
            raise HierarchyError(f"{what}: expected a column of codes, got a frame")
        s = converted
    elif isinstance(values, (str, bytes)):
        raise HierarchyError(f"{what}: expected a collection of codes, got the single string {values!r}")
    else:
        lst = list(values)
        try:
            s = pl.Series(what, lst, strict=True)
        except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
            s = _fallback_str(lst, what)
    dt = s.dtype
    if dt == pl.String:
        return s.alias(what)
    if dt == pl.Null or dt.is_integer() or isinstance(dt, (pl.Categorical, pl.Enum)):
        return s.cast(pl.String).alias(what)
    if dt == pl.Object:
        return _fallback_str(s.to_list(), what)
    raise HierarchyError(
        f"{what}: codes must be strings (or integers, converted with str()); got a column of "
        f"type {dt} such as {show_values(s.drop_nulls().head(3).to_list())}. Convert the codes "
        f"to strings first (e.g. '0101', keeping leading zeros)."
    )


def _to_frame(obj: Any) -> pl.DataFrame | None:
    """A polars frame from a polars/pandas/pyarrow frame or a mapping of columns; else None."""
    if isinstance(obj, pl.DataFrame):
        return obj
    if isinstance(obj, pl.LazyFrame):
        return obj.collect()
    if isinstance(obj, (pa.Table, pa.RecordBatch)):
        out = pl.from_arrow(obj)
        assert isinstance(out, pl.DataFrame)
        return out
    if type(obj).__module__.startswith("pandas") and hasattr(obj, "columns"):
        return pl.from_pandas(obj)
    if isinstance(obj, Mapping):
        return pl.DataFrame(dict(obj))
    return None


def _columns(frame: pl.DataFrame, names: Iterable[str], what: str) -> None:
    missing = [c for c in names if c not in frame.columns]
    if missing:
        raise HierarchyError(
            f"{what}: missing column(s) {show_values(missing)}; the frame has columns "
            f"{show_values(frame.columns, limit=10)}. Rename the columns or name them in the call."
        )


def _key(code: object) -> str | None:
    """Lookup key for one code: strings as they are, integers as str(); else None."""
    if isinstance(code, str):
        return code
    if isinstance(code, (int, np.integer)) and not isinstance(code, (bool, np.bool_)):
        return str(code)
    return None


def _listing(values: list[Any]) -> str:
    """The first few values and how many in all — the count is stated even for one value."""
    shown = show_values(values)
    return shown if len(values) > 1 else f"{shown} (1 in all)"


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


# --------------------------------------------------------------------------------------
# the class
# --------------------------------------------------------------------------------------


class Hierarchy:
    """An immutable tree of string codes with one root, and its ``(leaf, ancestor, level)`` relation.

    Build one with :meth:`from_parent_child`, :meth:`from_code_lengths`, :meth:`from_frame`
    (SSBtools), :meth:`read_hrc` (tau-ARGUS) or :meth:`flat`. Every constructor validates
    the tree (no cycles, one parent per code, non-empty codes, one root) and raises
    :class:`~protab.errors.HierarchyError` naming the offending codes.

    >>> h = Hierarchy.from_code_lengths(["DE11", "DE12", "DE21", "FR10"], (2, 1, 1))
    >>> h.root, h.depth, h.parent_of("DE11"), h.level_of("DE1")
    ('Total', 3, 'DE1', 2)
    """

    __slots__ = ("_cache", "_code", "_is_leaf", "_level", "_parent")

    _code: pl.Series
    _parent: np.ndarray
    _level: np.ndarray
    _is_leaf: np.ndarray
    _cache: dict[str, Any]

    # ---- construction ----------------------------------------------------------------

    def __init__(self) -> None:
        raise TypeError(
            "build a Hierarchy with Hierarchy.from_parent_child, .from_code_lengths, .from_frame, .read_hrc or .flat"
        )

    @classmethod
    def _new(cls, code: pl.Series, parent: np.ndarray, level: np.ndarray) -> Hierarchy:
        """Wrap validated, level-sorted arrays (root at id 0)."""
        self = object.__new__(cls)
        n = parent.size
        has_child = np.zeros(n, dtype=bool)
        has_child[parent[parent >= 0]] = True
        arrays: dict[str, np.ndarray] = {
            "_parent": parent.astype(np.int64, copy=False),
            "_level": level.astype(np.int32, copy=False),
            "_is_leaf": ~has_child,
        }
        for name, arr in arrays.items():
            arr.flags.writeable = False
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "_code", code.alias("code"))
        object.__setattr__(self, "_cache", {})
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Hierarchy is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Hierarchy is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Hierarchy._new, (self._code, np.array(self._parent), np.array(self._level)))

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
    ) -> Hierarchy:
        """Validate parent-child links (a null parent marks a top code) and build the tree."""
        if root is not None:
            root_key = _key(root)
            if not root_key:
                raise HierarchyError(f"root must be a non-empty string, got {root!r}")
            root = root_key
        df = pl.DataFrame({"parent": parent.cast(pl.String), "child": child.cast(pl.String)})
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

        # Exact duplicate links are fine; a code with two different parents is not.
        df = df.unique(maintain_order=True)
        multi = (
            df.group_by("child", maintain_order=True).agg(pl.col("parent"), pl.len().alias("n")).filter(pl.col("n") > 1)
        )
        if multi.height:
            examples = []
            for c, ps in zip(multi["child"].head(3).to_list(), multi["parent"].head(3).to_list()):
                shown = ", ".join("none (top code)" if p is None else repr(p) for p in ps)
                examples.append(f"{c!r} (parents {shown})")
            raise HierarchyError(
                f"{source}: codes with more than one parent: {_listing(multi['child'].to_list())}; "
                f"e.g. {'; '.join(examples)}. protab publishes trees only: {_FIX_LINKS} "
                f"(drop the extra links, or give the code a distinct name under each parent)."
            )

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

    @classmethod
    def from_parent_child(
        cls,
        pairs: Iterable[tuple[object, object]] | Any,
        *,
        root: str | None = None,
        parent: str = "parent",
        child: str = "child",
    ) -> Hierarchy:
        """A hierarchy from (parent, child) links: tuples, or a polars/pandas/pyarrow frame.

        With a frame, the columns named by ``parent`` and ``child`` are used. The root is the
        one code that is never a child. If several codes are never children, a total named
        ``root`` (default ``"Total"``) is added above them; if ``root`` is given and does not
        occur in the pairs, it is added above all top codes. A null parent marks its child as
        a top code (so ``h.to_frame()`` round-trips). Integer codes become strings.
        """
        what = "parent-child pairs"
        frame = _to_frame(pairs)
        if frame is not None:
            _columns(frame, (parent, child), what)
            p = _as_codes(frame[parent], f"{what}, column {parent!r}")
            c = _as_codes(frame[child], f"{what}, column {child!r}")
        else:
            if isinstance(pairs, (str, bytes)):
                raise HierarchyError(f"{what}: expected (parent, child) tuples or a frame, got a string")
            rows = list(pairs)
            bad = [i for i, r in enumerate(rows) if not isinstance(r, (tuple, list)) or len(r) != 2]
            if bad:
                raise HierarchyError(
                    f"{what}: rows that are not (parent, child) pairs (counted from 0): {_listing(bad)}, "
                    f"e.g. {rows[bad[0]]!r}. Give each link as a 2-tuple (parent, child)."
                )
            cols = list(zip(*rows)) if rows else [(), ()]
            p = _as_codes(list(cols[0]), f"{what}, parents")
            c = _as_codes(list(cols[1]), f"{what}, children")
        return cls._build(p, c, root=root, source=what)

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
        lens = list(lengths)
        if not lens or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x > 0 for x in lens):
            raise HierarchyError(
                f"lengths must be a non-empty sequence of positive integers (characters per level), got {lens!r}"
            )
        ends = np.cumsum(np.asarray(lens, dtype=np.int64)).tolist()
        what = "positional codes"
        s = _as_codes(codes, what)
        if s.null_count() or (s.str.len_bytes() == 0).any():
            n_bad = int(s.null_count() + (s.str.len_bytes() == 0).sum())
            raise HierarchyError(f"{what}: {n_bad} null or empty code(s); every code must be a non-empty string")
        s = s.unique(maintain_order=True)
        n_chars = s.str.len_chars()
        wrong = s.filter(~n_chars.is_in(ends)).to_list()
        if wrong:
            raise HierarchyError(
                f"{what}: codes whose length is not one of the level lengths {ends} (cumulative "
                f"sums of lengths={tuple(lens)}): {_listing(wrong)}. Fix these codes, or change "
                f"lengths so that every code ends at a level."
            )
        frames = []
        for k, end in enumerate(ends):
            sel = s.filter(n_chars >= end)
            c = sel.str.slice(0, end)
            if k == 0:
                p = pl.repeat(str(root), sel.len(), eager=True, dtype=pl.String)
            else:
                p = sel.str.slice(0, ends[k - 1])
            frames.append(pl.DataFrame({"parent": p, "child": c}))
        df = pl.concat(frames)
        return cls._build(df["parent"], df["child"], root=root, source=what)

    @classmethod
    def from_frame(cls, frame: Any, *, root: str | None = None) -> Hierarchy:
        """A hierarchy from an SSBtools to-from frame (``mapsFrom``, ``mapsTo``, ``sign``, ``level``).

        ``mapsFrom`` is the child code and ``mapsTo`` its parent. ``sign`` (optional) must be
        +1 (or ``"+"``): protab publishes sums only, so -1 rows are refused. ``level`` is
        ignored (it is SSBtools' order of computation; protab computes levels itself). A code
        mapping to two parents is refused: SSBtools allows that, but protab publishes trees.
        Top codes are handled as in :meth:`from_parent_child`.
        """
        what = "hierarchy frame (mapsFrom, mapsTo)"
        df = _to_frame(frame)
        if df is None:
            raise HierarchyError(f"{what}: expected a polars, pandas or pyarrow frame, got {type(frame).__name__}")
        _columns(df, ("mapsFrom", "mapsTo"), what)
        if "sign" in df.columns:
            sign = df["sign"]
            if sign.dtype == pl.String:
                num = sign.str.strip_chars().replace_strict(
                    {"+": 1.0, "-": -1.0, "1": 1.0, "+1": 1.0, "-1": -1.0}, default=None, return_dtype=pl.Float64
                )
            elif sign.dtype.is_numeric():
                num = sign.cast(pl.Float64)
            else:
                num = pl.Series([None] * df.height, dtype=pl.Float64)
            bad_rows = np.flatnonzero(~(num == 1.0).fill_null(False).to_numpy())
            if bad_rows.size:
                sub = df[bad_rows.tolist()]
                ex = [
                    f"{f!r} → {t!r} (sign {g!r})"
                    for f, t, g in zip(
                        sub["mapsFrom"].head(3).to_list(),
                        sub["mapsTo"].head(3).to_list(),
                        sub["sign"].head(3).to_list(),
                    )
                ]
                raise HierarchyError(
                    f"{what}: rows with a sign other than +1 (counted from 0): "
                    f"{_listing(bad_rows.tolist())}, e.g. {'; '.join(ex)}. protab "
                    f"publishes sums only: remove these rows (a difference of margins is not supported)."
                )
        p = _as_codes(df["mapsTo"], f"{what}, column 'mapsTo'")
        c = _as_codes(df["mapsFrom"], f"{what}, column 'mapsFrom'")
        return cls._build(p, c, root=root, source=what)

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
        if not leadstring:
            raise HierarchyError("leadstring must be a non-empty string (tau-ARGUS uses '@')")
        if isinstance(source, str) and ("\n" in source or "\r" in source):
            text, what = source, "hrc text"
        else:
            text, what = Path(source).read_text(encoding=encoding), f"hrc file {os.fspath(source)!r}"
        lines = pl.Series("line", text.splitlines(), dtype=pl.String).str.strip_chars()
        line_no = np.flatnonzero((lines.str.len_bytes() > 0).to_numpy()) + 1
        lines = lines.gather(line_no - 1)
        if lines.len() == 0:
            raise HierarchyError(f"{what}: no codes (the file is empty)")
        lead = re.escape(leadstring)
        n_lead = lines.str.extract(f"^((?:{lead})*)", 1).str.len_chars().to_numpy() // len(leadstring)
        code = lines.str.replace(f"^(?:{lead})*", "").str.strip_chars()
        empty = np.flatnonzero((code.str.len_bytes() == 0).to_numpy())
        if empty.size:
            raise HierarchyError(
                f"{what}: lines with {leadstring!r} but no code: {_listing(line_no[empty].tolist())}. "
                f"Remove them or add the code."
            )
        level = n_lead.astype(np.int64) + 1
        prev = np.concatenate([[0], level[:-1]])
        jumps = np.flatnonzero(level > prev + 1)
        if jumps.size:
            i = int(jumps[0])
            raise HierarchyError(
                f"{what}: lines more than one level deeper than the line before: "
                f"{_listing(line_no[jumps].tolist())}; e.g. line {line_no[i]} "
                f"{lines[i]!r} is at level {level[i]} after a line at level {prev[i]}. Each line "
                f"may have at most one {leadstring!r} more than the line above it (the first line none)."
            )
        parent_pos = np.full(level.size, -1, dtype=np.int64)
        pos = np.arange(level.size)
        for lev in range(2, int(level.max()) + 1):
            up = pos[level == lev - 1]
            here = pos[level == lev]
            parent_pos[here] = up[np.searchsorted(up, here) - 1]
        has_p = parent_pos >= 0
        parent = pl.select(
            pl.when(pl.lit(pl.Series(has_p))).then(code.gather(np.maximum(parent_pos, 0))).otherwise(pl.lit(str(root)))
        ).to_series()
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
        if not leadstring:
            raise HierarchyError("leadstring must be a non-empty string (tau-ARGUS uses '@')")
        order = self._preorder()[1:]  # the root is not written
        if order.size == 0:
            return ""
        lev = self._level[order]
        prefixes = pl.Series([leadstring * k for k in range(self.depth)], dtype=pl.String)
        lines = pl.select(
            pl.concat_str([pl.lit(prefixes.gather(lev - 1)), pl.lit(self._code.gather(order))])
        ).to_series()
        return "\n".join(lines.to_list()) + "\n"

    def write_hrc(self, path: str | os.PathLike[str], *, leadstring: str = "@") -> None:
        """Write the tau-ARGUS ``.hrc`` file atomically (a temporary file, then renamed)."""
        write_text(path, self.to_hrc(leadstring=leadstring))

    def relation(self) -> pa.Table:
        """The bridge ``(leaf, ancestor, level)``: one row per leaf and each of its ancestors.

        Each leaf is paired with itself and with every code above it up to the root;
        ``level`` is the ancestor's level (root 0). Margins are this relation joined to inner
        cells on ``leaf``, grouped by ``ancestor``. Rows are ordered by leaf (in code order),
        then from the leaf itself up to the root. Its length is Σ over leaves (level + 1).
        """
        leaf = np.flatnonzero(self._is_leaf)
        anc = leaf
        leaf_parts, anc_parts, step_parts = [], [], []
        step = 0
        while anc.size:
            leaf_parts.append(leaf)
            anc_parts.append(anc)
            step_parts.append(np.full(anc.size, step, dtype=np.int32))
            p = self._parent[anc]
            keep = p >= 0
            leaf, anc, step = leaf[keep], p[keep], step + 1
        leaf_ids = np.concatenate(leaf_parts)
        anc_ids = np.concatenate(anc_parts)
        order = np.lexsort((np.concatenate(step_parts), leaf_ids))
        leaf_ids, anc_ids = leaf_ids[order], anc_ids[order]
        codes = self._pa_codes()
        return pa.table(
            {
                "leaf": codes.take(pa.array(leaf_ids)),
                "ancestor": codes.take(pa.array(anc_ids)),
                "level": pa.array(self._level[anc_ids], type=pa.int32()),
            }
        )

    def code_levels(self) -> pa.Table:
        """Every code with its ``level`` (int32, root 0), ``parent`` (null for the root) and ``is_leaf``."""
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
        """Columns ``code``, ``parent`` (null for the root), ``level``; from_parent_child reads it back."""
        out = pl.from_arrow(self.code_levels().select(["code", "parent", "level"]))
        assert isinstance(out, pl.DataFrame)
        return out

    def to_ssb_frame(self) -> pl.DataFrame:
        """The SSBtools to-from frame: ``mapsFrom`` (child), ``mapsTo`` (parent), ``sign`` (1), ``level``.

        ``level`` follows SSBtools' AutoLevel: the order of computation, i.e. the height of
        ``mapsTo`` (1 for a parent of leaves only). :meth:`from_frame` reads it back.
        """
        height = self._height()
        ids = np.flatnonzero(self._parent >= 0)
        par = self._parent[ids]
        return pl.DataFrame(
            {
                "mapsFrom": self._code.gather(ids),
                "mapsTo": self._code.gather(par),
                "sign": pl.Series(np.ones(ids.size, dtype=np.int32)),
                "level": pl.Series(height[par].astype(np.int32)),
            }
        )

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
        distinct = s.drop_nulls().unique()
        known = pl.DataFrame({"code": self._code, "is_leaf": self._is_leaf})
        j = pl.DataFrame({"code": distinct}).join(known, on="code", how="left").sort("code")
        unknown = j.filter(pl.col("is_leaf").is_null())["code"].to_list()
        internal = j.filter(pl.col("is_leaf").not_())["code"].to_list()
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
        """The parent of ``code``; None for the root."""
        p = int(self._parent[self._id(code)])
        return None if p < 0 else str(self._code[p])

    def children_of(self, code: object) -> list[str]:
        """The children of ``code`` in code order; empty for a leaf."""
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
        if len(self) != len(other) or self.root != other.root:
            return False
        a = self.to_frame().select("code", "parent").sort("code")
        b = other.to_frame().select("code", "parent").sort("code")
        return a.equals(b)

    def __hash__(self) -> int:
        return hash((self.root, len(self), self.depth, int(self._is_leaf.sum())))

    def __repr__(self) -> str:
        return (
            f"Hierarchy(root={self.root!r}, codes={len(self)}, leaves={int(self._is_leaf.sum())}, depth={self.depth})"
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
        c = self._cache.get("csr")
        if c is None:
            nonroot = np.flatnonzero(self._parent >= 0)
            order = nonroot[np.argsort(self._parent[nonroot], kind="stable")]
            counts = np.bincount(self._parent[nonroot], minlength=len(self))
            offsets = np.concatenate([[0], np.cumsum(counts)])
            c = self._cache["csr"] = (order, offsets)
        return c

    def _height(self) -> np.ndarray:
        """Height of each code: 0 for a leaf, 1 + the largest height of its children."""
        bounds = _level_bounds(self._level, self.depth)
        height = np.zeros(len(self), dtype=np.int64)
        for lev in range(self.depth, 0, -1):
            ids = np.arange(bounds[lev], bounds[lev + 1])
            np.maximum.at(height, self._parent[ids], height[ids] + 1)
        return height

    def _preorder(self) -> np.ndarray:
        """Code ids depth-first (each code before its children, siblings in code order)."""
        n = len(self)
        bounds = _level_bounds(self._level, self.depth)
        size = np.ones(n, dtype=np.int64)
        for lev in range(self.depth, 0, -1):
            ids = np.arange(bounds[lev], bounds[lev + 1])
            size += np.bincount(self._parent[ids], weights=size[ids], minlength=n).astype(np.int64)
        order, offsets = self._children_csr()
        # Offset of each child inside its parent's block: sizes of its earlier siblings.
        s = size[order]
        cs = np.cumsum(s) - s
        group_start = np.repeat(offsets[:-1], np.diff(offsets))
        before = np.empty(n, dtype=np.int64)
        before[order] = cs - cs[group_start] if order.size else cs
        pos = np.zeros(n, dtype=np.int64)
        for lev in range(1, self.depth + 1):
            ids = np.arange(bounds[lev], bounds[lev + 1])
            pos[ids] = pos[self._parent[ids]] + 1 + before[ids]
        out = np.empty(n, dtype=np.int64)
        out[pos] = np.arange(n)
        return out
