"""Mass-preserving re-distribution of small grid counts to their nearest safe squares
(Lee, Choi & O'Keefe 2012), with measures of change and risk."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from protab._frames import as_polars, require_columns
from protab.errors import InputError, ProtabError, show_values
from protab.grid._codes import _LABEL, as_code_series, check_unique, parse_codes, resolution_metres, single_resolution

_OUT = ("published", "moved_to", "distance")
_K = 8  # neighbours asked of the k-d tree at first; rows whose K candidates all tie are asked again


def redistribute(
    frame: Any,
    code_column: str,
    count_column: str,
    threshold: int = 3,
    max_distance: float | None = None,
    *,
    coarse_level: str | None = None,
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Move the counts of sensitive grid squares to their nearest safe square (Lee, Choi & O'Keefe 2012).

    The algorithm, exactly:

    1. A square is *sensitive* when its count n is in 1 … threshold − 1, *safe* when
       n ≥ threshold; squares with 0 take no part. Distances are between square centres
       (EPSG:3035, metres).
    2. Each sensitive square sends its whole count to the nearest safe square; among safe
       squares at the same distance, the one with the smallest northing, then easting.
       Safe squares have no capacity limit, so this assignment minimises the total distance
       moved Σ n·d over all ways of moving every sensitive count to safe squares (the
       transport problem decomposes per sensitive square). Sensitive squares do not receive,
       so nothing is merged into a new small count.
    3. A sensitive square with no safe square within ``max_distance`` metres (inclusive; or
       no safe square at all) is an isolated outlier: it is *suppressed* (published null), and
       its count is neither moved nor published.
    4. Published counts: 0 for moved squares, null for suppressed ones, n plus everything
       received for safe squares, n for empty ones. So no published count lies in
       1 … threshold − 1, and published + suppressed mass = the original mass (checked).

    Returns the frame (the input rows in order: ``code_column``, ``count_column`` as given,
    ``published``, and for moved squares ``moved_to`` and ``distance`` in metres — these two
    are internal, they say which squares were small: drop them before publishing) and a dict
    of measures: masses before/after/moved/suppressed, cell counts, ``share_changed`` (of the
    populated squares), ``distance_total`` (Σ n·d, metres), ``distance_mean`` (per unit
    moved), ``distance_max``, the absolute and relative change of the ``coarse_level``
    squares (default 10 km, or 100 km for 10 km codes), ``remaining_sensitive`` (0) and
    ``small_unchanged`` (risk: share of the original small squares published with their
    original value; 0 by construction when there are any).
    """
    df = as_polars(frame, "redistribute frame")
    _check_arguments(df, code_column, count_column, threshold, max_distance)
    s = as_code_series(df[code_column], code_column)
    n = _counts(df[count_column], count_column)
    r, big, ix, iy = _grid(s, code_column, coarse_level)
    src, dst, dist, suppressed = _moves(n, ix, iy, r, threshold, max_distance)
    published = n.copy()
    published[src] = 0
    np.add.at(published, dst, n[src])  # unbuffered: several sources may share a receiver
    pub_valid = np.ones(n.size, dtype=bool)
    pub_valid[suppressed] = False
    out = _output(df.select(code_column, count_column), s, published, pub_valid, src, dst, dist)
    measures = _measures(n, published, pub_valid, src, dist, suppressed, threshold, ix, iy, r, big)
    return out, measures


def _check_arguments(
    df: pl.DataFrame, code_column: str, count_column: str, threshold: Any, max_distance: Any
) -> None:
    """InputError for missing columns, a bad threshold or max_distance, output names taken, no rows."""
    require_columns(df, [code_column, count_column], "redistribute frame")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, np.integer)) or threshold < 1:
        raise InputError(f"redistribute: threshold must be a whole number ≥ 1, got {threshold!r}")
    if code_column in _OUT or count_column in _OUT:
        raise InputError(f"redistribute: the output adds columns {', '.join(_OUT)}; rename the input column "
                         f"{code_column if code_column in _OUT else count_column!r}")
    if max_distance is not None and not (
        isinstance(max_distance, (int, float, np.integer, np.floating)) and not isinstance(max_distance, bool)
        and math.isfinite(max_distance) and max_distance > 0
    ):
        raise InputError(f"redistribute: max_distance must be a positive number of metres or None, "
                         f"got {max_distance!r}")
    if df.height == 0:
        raise InputError(f"redistribute: the frame has no rows (columns {code_column!r}, {count_column!r})")


def _grid(
    s: pl.Series, code_column: str, coarse_level: str | None
) -> tuple[int, int | None, np.ndarray, np.ndarray]:
    """The resolution r of the (unique) codes, the side of the coarse squares of the measures,
    and each square's column and row (easting and northing in units of r)."""
    parsed = parse_codes(s)
    check_unique(s)
    r = single_resolution(parsed, code_column)
    big = resolution_metres(coarse_level, "coarse_level") if coarse_level is not None else (
        10_000 if r < 10_000 else 100_000 if r < 100_000 else None)
    if big is not None and big < r:
        raise InputError(f"redistribute: coarse_level {coarse_level!r} is finer than the {_LABEL[r]} codes")
    ix = parsed["easting"].to_numpy() // r
    iy = parsed["northing"].to_numpy() // r
    return r, big, ix, iy


def _moves(
    n: np.ndarray, ix: np.ndarray, iy: np.ndarray, r: int, threshold: int, max_distance: float | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The moves (source rows, receiving rows, distances in metres) of the sensitive squares
    with a safe square in reach, and the rows of the sensitive squares without (suppressed)."""
    sens = np.flatnonzero((n >= 1) & (n < threshold))
    safe = np.flatnonzero(n >= threshold)
    safe = safe[np.lexsort((ix[safe], iy[safe]))]  # rank = (northing, easting) order: the tie rule
    target = _nearest(ix, iy, sens, safe, None if max_distance is None else max_distance / r)
    moved = target >= 0
    src, dst = sens[moved], safe[target[moved]]
    dist = r * np.hypot((ix[src] - ix[dst]).astype(float), (iy[src] - iy[dst]).astype(float))
    return src, dst, dist, sens[~moved]


def _output(
    given: pl.DataFrame,
    s: pl.Series,
    published: np.ndarray,
    pub_valid: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    dist: np.ndarray,
) -> pl.DataFrame:
    """The columns given, then ``published`` (null where suppressed), ``moved_to`` and ``distance``."""
    dst_full = np.full(published.size, -1, dtype=np.int64)
    dst_full[src] = dst
    distance = np.full(published.size, np.nan)
    distance[src] = dist
    aux = pl.DataFrame({"p": published, "ok": pub_valid, "to": dst_full, "d": distance}).select(
        pl.when("ok").then("p").alias("published"),
        pl.when(pl.col("to") >= 0).then("to").alias("to"),
        pl.when(pl.col("to") >= 0).then("d").alias("distance"),
    )
    return pl.concat(
        [given, aux.select("published", s.gather(aux["to"]).alias("moved_to"), "distance")],
        how="horizontal",
    )


def _counts(values: pl.Series, name: str) -> np.ndarray:
    if values.null_count():
        raise InputError(f"redistribute: column {name!r} has {values.null_count()} null count(s); give a count "
                         f"(0 for an empty square) in every row")
    v: np.ndarray
    if values.dtype.is_integer():
        v = values.cast(pl.Int64).to_numpy()
    elif values.dtype.is_float():
        f = values.to_numpy()
        bad = ~np.isfinite(f) | (f != np.round(f))
        if bad.any():
            raise InputError(f"redistribute: column {name!r} must hold whole counts; got "
                             f"{show_values(np.unique(f[bad]).tolist())}")
        v = f.astype(np.int64)
    else:
        raise InputError(f"redistribute: column {name!r} must hold counts (integers), got {values.dtype}")
    if (v < 0).any():
        raise InputError(f"redistribute: column {name!r} has negative counts: "
                         f"{show_values(np.unique(v[v < 0]).tolist())}")
    return v


def _nearest(ix: np.ndarray, iy: np.ndarray, sens: np.ndarray, safe: np.ndarray,
             bound: float | None) -> np.ndarray:
    """For each sensitive square, the rank (in ``safe``) of its nearest safe square, the
    lowest rank among ties; −1 when none lies within ``bound`` (grid units, inclusive)."""
    out = np.full(sens.size, -1, dtype=np.int64)
    if sens.size == 0 or safe.size == 0:
        return out
    from scipy.spatial import cKDTree

    pts = np.column_stack((ix[safe], iy[safe])).astype(float)
    tree = cKDTree(pts)
    todo = np.arange(sens.size)
    k = _K
    ub = np.inf if bound is None else bound * (1 + 1e-9) + 1e-9
    while todo.size:  # rounds (rarely more than one), not squares
        kk = min(k, safe.size)
        q = np.column_stack((ix[sens[todo]], iy[sens[todo]])).astype(float)
        _, idx = tree.query(q, k=kk, distance_upper_bound=ub)
        idx = idx.reshape(todo.size, kk)
        found = idx < safe.size
        j = np.where(found, idx, 0)
        dx = ix[safe[j]] - ix[sens[todo]][:, None]
        dy = iy[safe[j]] - iy[sens[todo]][:, None]
        d2 = np.where(found, dx * dx + dy * dy, np.iinfo(np.int64).max)  # exact integer distances
        if bound is not None:
            d2 = np.where(d2 <= bound * bound * (1 + 1e-12), d2, np.iinfo(np.int64).max)
        best = d2.min(axis=1)
        tie = (d2 == best[:, None]) & (best[:, None] < np.iinfo(np.int64).max)
        rank = np.where(tie, j, np.iinfo(np.int64).max).min(axis=1)
        done = ~tie.all(axis=1) | (kk == safe.size)
        has = best < np.iinfo(np.int64).max
        out[todo[done & has]] = rank[done & has]
        todo = todo[~done]
        k *= 4
    return out


def _measures(n: np.ndarray, published: np.ndarray, valid: np.ndarray, src: np.ndarray, dist: np.ndarray,
              suppressed: np.ndarray, threshold: int, ix: np.ndarray, iy: np.ndarray, r: int,
              big: int | None) -> dict[str, Any]:
    pub = np.where(valid, published, 0)
    before, after, lost = int(n.sum()), int(pub.sum()), int(n[suppressed].sum())
    if after + lost != before:
        raise ProtabError(f"redistribute: mass not preserved ({after} published + {lost} suppressed ≠ {before}); "
                          "this is a bug, please report it")
    small = (n >= 1) & (n < threshold)
    remaining = int((valid & (published >= 1) & (published < threshold)).sum())
    if remaining:
        raise ProtabError(f"redistribute: {remaining} published count(s) still below {threshold}; this is a bug")
    changed = ~valid | (published != n)
    populated = n > 0
    moved_mass = int(n[src].sum())
    total = float(np.sort(n[src] * dist).sum())  # summed in sorted order: the same whatever the row order
    m: dict[str, Any] = {
        "threshold": int(threshold),
        "cells": int(n.size),
        "populated_cells": int(populated.sum()),
        "sensitive_cells": int(small.sum()),
        "moved_cells": int(src.size),
        "suppressed_cells": int(suppressed.size),
        "receiving_cells": int((valid & (published > n)).sum()),
        "mass_before": before,
        "mass_after": after,
        "mass_moved": moved_mass,
        "mass_suppressed": lost,
        "mass_preserved": after + lost == before,
        "cells_changed": int(changed.sum()),
        "share_changed": float(changed.sum() / populated.sum()) if populated.any() else 0.0,
        "distance_total": total,
        "distance_mean": total / moved_mass if moved_mass else 0.0,
        "distance_max": float(dist.max()) if dist.size else 0.0,
        "remaining_sensitive": remaining,
        "small_unchanged": float((valid[small] & (published[small] == n[small])).mean()) if small.any() else None,
        "coarse_level": _LABEL[big] if big is not None else None,
    }
    if big is not None:
        f = big // r
        g = pl.DataFrame({"cx": ix // f, "cy": iy // f, "before": n, "after": pub}).group_by("cx", "cy").agg(
            pl.col("before").sum(), pl.col("after").sum())
        d = (g["after"] - g["before"]).abs()
        m.update({
            "coarse_squares": g.height,
            "coarse_abs_change": int(d.sum()),
            "coarse_rel_change": float(d.sum() / before) if before else 0.0,
            "coarse_max_abs_change": int(d.max()),
            "coarse_share_changed": float((d > 0).mean()),
        })
    return m
