"""A protab Hierarchy from grid codes: Total > 100 km > 10 km > the codes as given."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import polars as pl

from protab.errors import InputError
from protab.grid._codes import as_code_series, check_form, format_codes, parse_codes, single_resolution, sorted_levels
from protab.hierarchy import DEFAULT_ROOT, Hierarchy


def grid_hierarchy(
    codes: Any,
    levels: Iterable[object] | str = ("10km", "100km"),
    *,
    form: str = "short",
    root: str = DEFAULT_ROOT,
    column: str | None = None,
) -> Hierarchy:
    """The hierarchy root > coarsest level > … > the grid codes (INSPIRE, EPSG:3035).

    The leaves are the distinct ``codes`` exactly as given (one resolution, long or short
    form); each coarser level in ``levels`` (labels such as ``"10km"`` or metres, in any order)
    holds the squares that contain them, coded in ``form`` and derived by flooring the corners
    (:func:`coarsen_codes`). Built with :meth:`Hierarchy.from_parent_child` from one frame of
    links, vectorised. Malformed codes, mixed resolutions and levels not coarser than the codes
    raise :class:`~protab.errors.InputError`.
    """
    check_form(form)
    s = as_code_series(codes, column)
    name = s.name
    if s.null_count():
        raise InputError(f"grid codes in column {name!r}: {s.null_count()} null code(s); a hierarchy needs a "
                         f"code in every row (drop or fill the rows without a grid square)")
    leaves = s.unique(maintain_order=True)
    if leaves.len() == 0:
        raise InputError(f"grid codes in column {name!r}: no codes given")
    try:
        parsed = parse_codes(leaves)
    except InputError:
        parse_codes(s)  # the same error, with row counts over all the rows given
        raise
    finest = single_resolution(parsed, name)
    rs = sorted_levels(levels, finest, name)
    if not rs:
        return Hierarchy.flat(leaves, root=root)
    n = parsed["northing"].to_numpy()
    e = parsed["easting"].to_numpy()
    # One column per level, row for row with the leaves; links between adjacent levels.
    cols = [leaves] + [format_codes(n // r * r, e // r * r, r, form=form) for r in rs]
    links = [pl.DataFrame({"parent": cols[1], "child": cols[0]})]  # the leaves are distinct already
    links += [pl.DataFrame({"parent": cols[k + 1], "child": cols[k]}).unique(maintain_order=True)
              for k in range(1, len(rs))]
    frame = pl.concat(links)
    return Hierarchy.from_parent_child(frame, root=root)
