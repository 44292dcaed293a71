"""Links from the inputs of the hierarchy formats: parent-child pairs, positional codes
(sdcHierarchies), SSBtools to-from frames and tau-ARGUS ``.hrc`` text, as (parent, child)
code series for :func:`protab.hierarchy._build.build`."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from protab.errors import HierarchyError, InputError
from protab.hierarchy._input import _as_codes, _columns, _listing, _to_frame

#: The ``source`` each reader names in its messages.
PAIRS = "parent-child pairs"
POSITIONAL = "positional codes"
SSB_FRAME = "hierarchy frame (mapsFrom, mapsTo)"

Links = tuple[pl.Series, pl.Series, pl.Series | None]


def pair_links(pairs: Any, parent: str, child: str, sign: str | None) -> Links:
    """(parents, children, signs or None) of :meth:`Hierarchy.from_parent_child`'s input:
    a frame with the columns ``parent``, ``child`` (and ``sign``), or 2- and 3-tuples."""
    frame = _to_frame(pairs)
    if frame is not None:
        _columns(frame, (parent, child) + ((sign,) if sign is not None else ()), PAIRS)
        p = _as_codes(frame[parent], f"{PAIRS}, column {parent!r}")
        c = _as_codes(frame[child], f"{PAIRS}, column {child!r}")
        g = parse_signs(frame[sign], p, c, f"{PAIRS}, column {sign!r}") if sign is not None else None
        return p, c, g
    if isinstance(pairs, (str, bytes)):
        raise HierarchyError(f"{PAIRS}: expected (parent, child) tuples or a frame, got a string")
    if sign is not None:
        raise HierarchyError(f"{PAIRS}: sign= names a column of a frame; with tuples, give (parent, child, sign)")
    return _tuple_links(list(pairs))


def _tuple_links(rows: list[Any]) -> Links:
    """(parents, children, signs or None) of (parent, child) and (parent, child, sign) tuples."""
    bad = [i for i, r in enumerate(rows) if not isinstance(r, (tuple, list)) or len(r) not in (2, 3)]
    if bad:
        raise HierarchyError(
            f"{PAIRS}: rows that are not (parent, child) pairs (counted from 0): {_listing(bad)}, "
            f"e.g. {rows[bad[0]]!r}. Give each link as a 2-tuple (parent, child), or as a "
            f"3-tuple (parent, child, sign)."
        )
    signed = any(len(r) == 3 for r in rows)
    cols = list(zip(*(tuple(r) + (1,) * (3 - len(r)) if signed else r for r in rows))) if rows else [(), ()]
    p = _as_codes(list(cols[0]), f"{PAIRS}, parents")
    c = _as_codes(list(cols[1]), f"{PAIRS}, children")
    g = parse_signs(pl.Series("sign", list(cols[2]), strict=False), p, c, f"{PAIRS}, signs") if signed else None
    return p, c, g


def code_length_links(codes: Iterable[object] | Any, lengths: Iterable[int], root: str) -> tuple[pl.Series, pl.Series]:
    """(parents, children) of :meth:`Hierarchy.from_code_lengths`: each code's prefixes."""
    lens = list(lengths)
    if not lens or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x > 0 for x in lens):
        raise HierarchyError(
            f"lengths must be a non-empty sequence of positive integers (characters per level), got {lens!r}"
        )
    ends = np.cumsum(np.asarray(lens, dtype=np.int64)).tolist()
    s = _as_codes(codes, POSITIONAL)
    if s.null_count() or (s.str.len_bytes() == 0).any():
        n_bad = int(s.null_count() + (s.str.len_bytes() == 0).sum())
        raise HierarchyError(f"{POSITIONAL}: {n_bad} null or empty code(s); every code must be a non-empty string")
    s = s.unique(maintain_order=True)
    n_chars = s.str.len_chars()
    wrong = s.filter(~n_chars.is_in(ends)).to_list()
    if wrong:
        raise HierarchyError(
            f"{POSITIONAL}: codes whose length is not one of the level lengths {ends} (cumulative "
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
    return df["parent"], df["child"]


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


def ssb_links(frame: Any) -> Links:
    """(parents, children, signs or None) of an SSBtools to-from frame (mapsTo, mapsFrom, sign)."""
    df = _to_frame(frame)
    if df is None:
        raise HierarchyError(f"{SSB_FRAME}: expected a polars, pandas or pyarrow frame, got {type(frame).__name__}")
    _columns(df, ("mapsFrom", "mapsTo"), SSB_FRAME)
    p = _as_codes(df["mapsTo"], f"{SSB_FRAME}, column 'mapsTo'")
    c = _as_codes(df["mapsFrom"], f"{SSB_FRAME}, column 'mapsFrom'")
    sign = parse_signs(df["sign"], p, c, f"{SSB_FRAME}, column 'sign'") if "sign" in df.columns else None
    return p, c, sign


def check_leadstring(leadstring: str) -> None:
    """HierarchyError for an empty ``leadstring`` (the level prefix of ``.hrc`` lines)."""
    if not leadstring:
        raise HierarchyError("leadstring must be a non-empty string (tau-ARGUS uses '@')")


def hrc_links(
    source: str | os.PathLike[str], *, root: str, leadstring: str, encoding: str
) -> tuple[pl.Series, pl.Series, str]:
    """(parents, codes, what the source is called) of a tau-ARGUS ``.hrc`` file or text
    (see :meth:`Hierarchy.read_hrc`)."""
    check_leadstring(leadstring)
    if isinstance(source, str) and ("\n" in source or "\r" in source):
        text, what = source, "hrc text"
    else:
        what = f"hrc file {os.fspath(source)!r}"
        text = _read_text(Path(source), what, encoding)
    code, level = _hrc_levels(text, leadstring, what)
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
    return parent, code, what


def _hrc_levels(text: str, leadstring: str, what: str) -> tuple[pl.Series, np.ndarray]:
    """The codes of the non-blank lines of ``.hrc`` text and their levels (1 without prefix),
    checked: a code on every line, no line more than one level below the line before."""
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
    return code, level


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
