"""A PNG map of a grid table: one raster pixel per grid square (matplotlib ``imshow``)."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from protab._frames import as_polars, require_columns
from protab._io import atomic_path
from protab.errors import InputError
from protab.grid._codes import _LABEL, as_code_series, parse_codes, single_resolution

#: Colour of blanked (null) squares: outside every sequential colour map used here.
NULL_COLOUR = "#d62728"


def grid_map(
    frame: Any,
    code_column: str,
    value_column: str,
    path: str | os.PathLike[str],
    *,
    title: str | None = None,
    cmap: str = "viridis",
    log: bool = False,
    width: float = 8.0,
    height: float = 8.0,
    max_pixels: int = 50_000_000,
) -> Path:
    """Write a PNG map of a grid table (INSPIRE codes of one resolution, EPSG:3035).

    Each square is one pixel of a raster drawn with ``imshow`` over its EPSG:3035 extent (km),
    so a national 1 km grid is one image, not a patch per cell. Squares with a value are
    coloured by ``cmap`` (``log``: a logarithmic scale over the positive values; zeros are then
    left white like absent squares), squares
    whose value is null (blanked by protection) in red (:data:`NULL_COLOUR`, named in the
    legend), squares absent from the frame are left white. A colour bar and a title; the
    figure is ``width`` × ``height`` inches at 100 dpi, written atomically. ``max_pixels``
    bounds the raster (the bounding box of the squares); coarsen the codes for larger maps.
    """
    from matplotlib import colormaps

    if cmap not in colormaps:
        raise InputError(f"grid_map: unknown colour map {cmap!r}; use a matplotlib name such as 'viridis'")
    df = as_polars(frame, "grid_map frame")
    require_columns(df, [code_column, value_column], "grid_map frame")
    if df.height == 0:
        raise InputError(f"grid_map: the frame has no rows; nothing to map in column {value_column!r}")
    values = df[value_column]
    if not (values.dtype.is_numeric() or values.dtype == pl.Null):
        raise InputError(f"grid_map: column {value_column!r} must be numeric, got {values.dtype}")
    s = as_code_series(df[code_column], code_column)
    parsed = parse_codes(s)
    r = single_resolution(parsed, code_column)
    raster, blank, extent = _raster(parsed, values, r, code_column, max_pixels)
    fig = _draw(raster, blank, extent=extent, title=title or f"{value_column} by {_LABEL[r]} square",
                label=value_column, cmap=cmap, log=log, size=(width, height),
                n_blank=int(values.is_null().sum()))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    target = Path(path)
    with atomic_path(target) as tmp:
        tmp.write_bytes(buf.getvalue())
    return target


def _raster(
    parsed: pl.DataFrame, values: pl.Series, r: int, code_column: str, max_pixels: int
) -> tuple[np.ndarray, np.ndarray, tuple[float, float, float, float]]:
    """The raster of the values (NaN where absent or null), the mask of the null (blanked)
    squares, and the extent (km) of the bounding box of the squares."""
    col = (parsed["easting"].to_numpy() // r).astype(np.int64)
    row = (parsed["northing"].to_numpy() // r).astype(np.int64)
    c0, r0 = int(col.min()), int(row.min())
    ncols, nrows = int(col.max()) - c0 + 1, int(row.max()) - r0 + 1
    if ncols * nrows > max_pixels:
        raise InputError(
            f"grid_map: the squares of column {code_column!r} span {ncols} × {nrows} {_LABEL[r]} squares, more "
            f"than max_pixels={max_pixels}; map coarser squares (coarsen_codes and sum) or raise max_pixels"
        )
    v = values.cast(pl.Float64).to_numpy()
    is_null = values.is_null().to_numpy()
    raster = np.full((nrows, ncols), np.nan)
    blank = np.zeros((nrows, ncols), dtype=bool)
    raster[row - r0, col - c0] = np.where(is_null, np.nan, v)
    blank[row - r0, col - c0] = is_null
    extent = (c0 * r / 1000, (c0 + ncols) * r / 1000, r0 * r / 1000, (r0 + nrows) * r / 1000)
    return raster, blank, extent


def _draw(raster: np.ndarray, blank: np.ndarray, *, extent: tuple[float, float, float, float], title: str,
          label: str, cmap: str, log: bool, size: tuple[float, float], n_blank: int) -> Any:
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import ListedColormap, LogNorm, Normalize
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    fig = Figure(figsize=size, dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    finite = raster[np.isfinite(raster)]
    if log:
        pos = finite[finite > 0]
        lo, hi = (float(pos.min()), float(pos.max())) if pos.size else (1.0, 10.0)
        norm: Any = LogNorm(vmin=lo, vmax=max(hi, lo * 10 if hi == lo else hi))
        shown = np.where(raster > 0, raster, np.nan)
    else:
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        norm = Normalize(vmin=lo, vmax=hi if hi > lo else lo + 1)
        shown = raster
    cm = colormaps[cmap].with_extremes(bad=(0.0, 0.0, 0.0, 0.0))
    img = ax.imshow(np.ma.masked_invalid(shown), origin="lower", extent=extent, cmap=cm, norm=norm,
                    interpolation="nearest", aspect="equal")
    if blank.any():
        ax.imshow(np.ma.masked_where(~blank, blank.astype(float)), origin="lower", extent=extent,
                  cmap=ListedColormap([NULL_COLOUR]), vmin=0, vmax=1, interpolation="nearest", aspect="equal")
        fig.legend(handles=[Patch(color=NULL_COLOUR, label=f"blanked (null): {n_blank} squares")],
                   loc="lower center", fontsize=8, frameon=False)
    from mpl_toolkits.axes_grid1 import make_axes_locatable

    cax = make_axes_locatable(ax).append_axes("right", size="4%", pad=0.1)  # as tall as the map
    fig.colorbar(img, cax=cax, label=label + (" (log scale)" if log else ""))
    ax.set_title(title)
    ax.set_xlabel("easting (km, EPSG:3035)")
    ax.set_ylabel("northing (km, EPSG:3035)")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig
