"""Hierarchies written out: tau-ARGUS ``.hrc`` text, the links of a hierarchy that is not a
tree as a frame, and SSBtools to-from frames; from the arrays of a Hierarchy (codes sorted by
level, parent ids, levels, links)."""

from __future__ import annotations

import numpy as np
import polars as pl

Links = tuple[np.ndarray, np.ndarray, np.ndarray]


def hrc_text(code: pl.Series, level: np.ndarray, depth: int, order: np.ndarray, leadstring: str) -> str:
    """The ``.hrc`` lines of the codes in ``order`` (depth first, root left out), each after
    ``leadstring`` × (level − 1)."""
    if order.size == 0:
        return ""
    lev = level[order]
    prefixes = pl.Series([leadstring * k for k in range(depth)], dtype=pl.String)
    lines = pl.select(pl.concat_str([pl.lit(prefixes.gather(lev - 1)), pl.lit(code.gather(order))])).to_series()
    return "\n".join(lines.to_list()) + "\n"


def _sorted_links(links: Links) -> Links:
    """The links of a non-tree ordered by child id, then parent id."""
    child, parent, sign = links
    order = np.lexsort((parent, child))
    return child[order], parent[order], sign[order]


def graph_frame(code: pl.Series, parent_id: np.ndarray, level: np.ndarray, links: Links) -> pl.DataFrame:
    """What :meth:`Hierarchy.to_frame` gives for a hierarchy that is not a tree: a row per
    top code (null parent), then one per link (code, parent, sign, level)."""
    child, parent, sign = _sorted_links(links)
    tops = np.flatnonzero(parent_id == 0)
    tops = tops[~np.isin(tops, child)]
    if (parent == 0).any():  # the root is a code of the input: a top code itself
        tops = np.concatenate([[0], tops])
    ids = np.concatenate([tops, child])
    has_p = np.concatenate([np.zeros(tops.size, dtype=bool), np.ones(child.size, dtype=bool)])
    pids = np.concatenate([np.zeros(tops.size, dtype=np.int64), parent])
    return pl.DataFrame(
        {
            "code": code.gather(ids),
            "parent": pl.select(pl.when(pl.lit(pl.Series(has_p))).then(pl.lit(code.gather(pids)))).to_series(),
            "sign": pl.Series(np.concatenate([np.ones(tops.size, dtype=np.int8), sign])),
            "level": pl.Series(level[ids].astype(np.int32)),
        }
    )


def ssb_frame(code: pl.Series, parent_id: np.ndarray, height: np.ndarray, links: Links | None) -> pl.DataFrame:
    """What :meth:`Hierarchy.to_ssb_frame` gives: mapsFrom, mapsTo, sign and SSBtools' level
    (the height of mapsTo), one row per link."""
    if links is not None:
        child, parent, sign = _sorted_links(links)
        return pl.DataFrame(
            {
                "mapsFrom": code.gather(child),
                "mapsTo": code.gather(parent),
                "sign": pl.Series(sign.astype(np.int32)),
                "level": pl.Series(height[parent].astype(np.int32)),
            }
        )
    ids = np.flatnonzero(parent_id >= 0)
    par = parent_id[ids]
    return pl.DataFrame(
        {
            "mapsFrom": code.gather(ids),
            "mapsTo": code.gather(par),
            "sign": pl.Series(np.ones(ids.size, dtype=np.int32)),
            "level": pl.Series(height[par].astype(np.int32)),
        }
    )
