"""Hierarchy formats: positional codes, SSBtools to-from frames and tau-ARGUS ``.hrc`` text."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from protab.errors import HierarchyError, InputError
from protab.hierarchy._common import _as_codes, _columns, _listing, _to_frame

if TYPE_CHECKING:  # pragma: no cover
    from protab.hierarchy.core import Hierarchy


def from_code_lengths(
    cls: type[Hierarchy], codes: Iterable[object] | Any, lengths: Iterable[int], *, root: str
) -> Hierarchy:
    """What :meth:`Hierarchy.from_code_lengths` does (see its docstring)."""
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


def parse_signs(sign: pl.Series, parent: pl.Series, child: pl.Series, what: str) -> pl.Series:
    """Signs as an Int8 series of +1/−1 from numbers or ``"+"``/``"-"`` text; else an error."""
    if sign.dtype == pl.String:
        num = sign.str.strip_chars().replace_strict(
            {"+": 1.0, "-": -1.0, "1": 1.0, "+1": 1.0, "-1": -1.0}, default=None, return_dtype=pl.Float64
        )
    elif sign.dtype.is_numeric():
        num = sign.cast(pl.Float64)
    else:
        num = pl.Series([None] * sign.len(), dtype=pl.Float64)
    ok = ((num == 1.0) | (num == -1.0)).fill_null(False).to_numpy()
    bad_rows = np.flatnonzero(~ok)
    if bad_rows.size:
        idx = bad_rows[:3].tolist()
        ex = [
            f"{f!r} → {t!r} (sign {g!r})"
            for f, t, g in zip(child.gather(idx).to_list(), parent.gather(idx).to_list(), sign.gather(idx).to_list())
        ]
        raise HierarchyError(
            f"{what}: rows with a sign other than +1 or -1 (counted from 0): "
            f"{_listing(bad_rows.tolist())}, e.g. {'; '.join(ex)}. Give each link the sign 1 "
            f"(add the child) or -1 (subtract it), or '+' / '-'."
        )
    return num.cast(pl.Int8).alias("sign")


def from_frame(cls: type[Hierarchy], frame: Any, *, root: str | None) -> Hierarchy:
    """What :meth:`Hierarchy.from_frame` does (see its docstring)."""
    what = "hierarchy frame (mapsFrom, mapsTo)"
    df = _to_frame(frame)
    if df is None:
        raise HierarchyError(f"{what}: expected a polars, pandas or pyarrow frame, got {type(frame).__name__}")
    _columns(df, ("mapsFrom", "mapsTo"), what)
    p = _as_codes(df["mapsTo"], f"{what}, column 'mapsTo'")
    c = _as_codes(df["mapsFrom"], f"{what}, column 'mapsFrom'")
    sign = parse_signs(df["sign"], p, c, f"{what}, column 'sign'") if "sign" in df.columns else None
    return cls._build(p, c, root=root, source=what, sign=sign, several_parents=True)


def read_hrc(
    cls: type[Hierarchy],
    source: str | os.PathLike[str],
    *,
    root: str,
    leadstring: str,
    encoding: str,
) -> Hierarchy:
    """What :meth:`Hierarchy.read_hrc` does (see its docstring)."""
    if not leadstring:
        raise HierarchyError("leadstring must be a non-empty string (tau-ARGUS uses '@')")
    if isinstance(source, str) and ("\n" in source or "\r" in source):
        text, what = source, "hrc text"
    else:
        what = f"hrc file {os.fspath(source)!r}"
        text = _read_text(Path(source), what, encoding)
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


def _read_text(path: Path, what: str, encoding: str) -> str:
    """The text of a hierarchy file; InputError naming the file when it cannot be read."""
    try:
        return path.read_bytes().decode(encoding)
    except FileNotFoundError:
        raise InputError(f"{what} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{what} is a folder, not a file") from None
    except PermissionError:
        raise InputError(f"{what} cannot be read (permission denied)") from None
    except UnicodeDecodeError as exc:
        name = "UTF-8" if encoding.lower().replace("_", "-") in ("utf-8", "utf-8-sig", "utf8") else encoding
        raise InputError(
            f"{what} is not {name} text ({exc.reason} at byte {exc.start}); save it as UTF-8 "
            "or pass encoding= (e.g. 'latin-1')"
        ) from None
    except LookupError:
        raise InputError(f"{what}: unknown encoding {encoding!r}") from None
    except OSError as exc:
        raise InputError(f"{what} cannot be read ({exc.strerror or exc})") from None


def to_hrc(h: Hierarchy, *, leadstring: str) -> str:
    """What :meth:`Hierarchy.to_hrc` does (see its docstring)."""
    if not leadstring:
        raise HierarchyError("leadstring must be a non-empty string (tau-ARGUS uses '@')")
    order = h._preorder()[1:]  # the root is not written
    if order.size == 0:
        return ""
    lev = h._level[order]
    prefixes = pl.Series([leadstring * k for k in range(h.depth)], dtype=pl.String)
    lines = pl.select(
        pl.concat_str([pl.lit(prefixes.gather(lev - 1)), pl.lit(h._code.gather(order))])
    ).to_series()
    return "\n".join(lines.to_list()) + "\n"


def _graph_links(h: Hierarchy) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The links of a non-tree ordered by child id, then parent id."""
    assert h._links is not None
    child, parent, sign = h._links
    order = np.lexsort((parent, child))
    return child[order], parent[order], sign[order]


def to_frame_graph(h: Hierarchy) -> pl.DataFrame:
    """What :meth:`Hierarchy.to_frame` does for a hierarchy that is not a tree."""
    child, parent, sign = _graph_links(h)
    tops = np.flatnonzero(h._parent == 0)
    tops = tops[~np.isin(tops, child)]
    if (parent == 0).any():  # the root is a code of the input: a top code itself
        tops = np.concatenate([[0], tops])
    ids = np.concatenate([tops, child])
    has_p = np.concatenate([np.zeros(tops.size, dtype=bool), np.ones(child.size, dtype=bool)])
    pids = np.concatenate([np.zeros(tops.size, dtype=np.int64), parent])
    return pl.DataFrame(
        {
            "code": h._code.gather(ids),
            "parent": pl.select(
                pl.when(pl.lit(pl.Series(has_p))).then(pl.lit(h._code.gather(pids)))
            ).to_series(),
            "sign": pl.Series(np.concatenate([np.ones(tops.size, dtype=np.int8), sign])),
            "level": pl.Series(h._level[ids].astype(np.int32)),
        }
    )


def to_ssb_frame(h: Hierarchy) -> pl.DataFrame:
    """What :meth:`Hierarchy.to_ssb_frame` does (see its docstring)."""
    height = h._height()
    if h._links is not None:
        child, parent, sign = _graph_links(h)
        return pl.DataFrame(
            {
                "mapsFrom": h._code.gather(child),
                "mapsTo": h._code.gather(parent),
                "sign": pl.Series(sign.astype(np.int32)),
                "level": pl.Series(height[parent].astype(np.int32)),
            }
        )
    ids = np.flatnonzero(h._parent >= 0)
    par = h._parent[ids]
    return pl.DataFrame(
        {
            "mapsFrom": h._code.gather(ids),
            "mapsTo": h._code.gather(par),
            "sign": pl.Series(np.ones(ids.size, dtype=np.int32)),
            "level": pl.Series(height[par].astype(np.int32)),
        }
    )
