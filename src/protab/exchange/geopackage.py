"""A grid table as a GeoPackage of square polygons in EPSG:3035 (ETRS89-LAEA), or as CSV, with
the INSPIRE ``GRD_ID`` of each square (the long form, ``CRS3035RES1000mN2684000E4334000``).

The squares come from the codes alone (protab.grid: lower-left corner and side), as WKB polygons
built with numpy; pyogrio (GDAL) writes the file (``pip install protab[geo]``). The root of a
grid hierarchy (``<grid>_level`` 0, "Total") is not a square and is left out; every other code
must be an INSPIRE code of EPSG:3035 whose square lies in the CRS's area of use.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from protab.errors import InputError
from protab.grid import format_codes, laea_inverse, parse_codes

#: EPSG:3035's area of use (EPSG dataset, "Europe - LCC & LAEA"): west, south, east, north (degrees).
AREA_OF_USE = (-35.58, 24.6, 44.83, 84.73)
#: OGC WKT of EPSG:3035 is taken from GDAL by its code.
CRS = "EPSG:3035"


def grid_cells(frame: Any, grid: str, table: str) -> pl.DataFrame:
    """The squares of ``frame``: ``GRD_ID`` first, the other columns (without ``grid`` and its
    level), and ``_e``, ``_n``, ``_r`` (corner and side in metres). Codes outside EPSG:3035
    are an InputError naming ``table`` and the code."""
    from protab._frames import as_polars, require_columns

    f = as_polars(frame, f"table {table!r}")
    require_columns(f, [grid], f"table {table!r}")
    level = f"{grid}_level"
    if level in f.columns:
        f = f.filter(pl.col(level) != 0)
    try:
        p = parse_codes(f[grid].cast(pl.String))
    except InputError as exc:
        raise InputError(f"table {table!r}: {exc}") from None
    e, n, r = (p[c].to_numpy() for c in ("easting", "northing", "resolution"))
    _check_area(f[grid], e, n, r, table)
    rest = [c for c in f.columns if c not in (grid, level)]
    return pl.DataFrame([format_codes(n, e, r, form="long", name="GRD_ID")]).hstack(f.select(rest)).with_columns(
        pl.Series("_e", e), pl.Series("_n", n), pl.Series("_r", r))


def _check_area(codes: pl.Series, e: np.ndarray, n: np.ndarray, r: np.ndarray, table: str) -> None:
    """Every corner of every square inside EPSG:3035's area of use (as longitude/latitude)."""
    west, south, east, north = AREA_OF_USE
    bad = np.zeros(e.size, dtype=bool)
    for de, dn in ((0, 0), (1, 0), (0, 1), (1, 1)):
        with np.errstate(all="ignore"):
            lon, lat = laea_inverse(e + de * r, n + dn * r)
        bad |= ~((lon >= west) & (lon <= east) & (lat >= south) & (lat <= north))
    if bad.any():
        shown = ", ".join(repr(c) for c in codes.filter(pl.Series(bad)).head(5).to_list())
        raise InputError(
            f"table {table!r}: {int(bad.sum())} grid code(s) outside the area of use of EPSG:3035 "
            f"(longitude {west}..{east}, latitude {south}..{north}): {shown}; only European squares "
            "can be written in EPSG:3035"
        )


def square_wkb(e: np.ndarray, n: np.ndarray, r: np.ndarray) -> pa.Array:
    """Little-endian WKB polygons (one ring of five points, counter-clockwise) of the squares
    with lower-left corners (e, n) and sides r, built as one numpy buffer."""
    k = e.size
    head = np.zeros(k, dtype=[("order", "u1"), ("type", "<u4"), ("rings", "<u4"), ("points", "<u4"),
                              ("xy", "<f8", (10,))])
    head["order"], head["type"], head["rings"], head["points"] = 1, 3, 1, 5
    x0, y0 = e.astype(float), n.astype(float)
    x1, y1 = x0 + r, y0 + r
    head["xy"] = np.column_stack([x0, y0, x1, y0, x1, y1, x0, y1, x0, y0])
    size = head.dtype.itemsize  # 93 bytes
    offsets = pa.array(np.arange(k + 1, dtype=np.int32) * size)
    return pa.BinaryArray.from_buffers(pa.binary(), k, [None, offsets.buffers()[1], pa.py_buffer(head.tobytes())])


def grid_arrow(frame: Any, grid: str, table: str) -> pa.Table:
    """The squares as an Arrow table with a WKB ``geometry`` column (see :func:`grid_cells`)."""
    cells = grid_cells(frame, grid, table)
    geom = square_wkb(cells["_e"].to_numpy(), cells["_n"].to_numpy(), cells["_r"].to_numpy())
    return cells.drop("_e", "_n", "_r").to_arrow().append_column("geometry", geom)


def write_geopackage(frame: Any, path: str | Path, grid: str, *, table: str | None = None,
                     layer: str | None = None) -> Path:
    """Write the grid table ``frame`` (codes in column ``grid``) as a GeoPackage of EPSG:3035
    squares, atomically (a temporary file renamed when complete). Needs pyogrio."""
    from protab._io import atomic_path

    name = table or Path(path).stem
    data = grid_arrow(frame, grid, name)
    pyogrio = _pyogrio()
    target = Path(path)
    with atomic_path(target) as tmp, warnings.catch_warnings():
        tmp.unlink(missing_ok=True)  # GDAL creates the file itself
        warnings.filterwarnings("ignore", message="The filename extension should be", category=RuntimeWarning)
        pyogrio.write_arrow(data, str(tmp), layer=layer or name, driver="GPKG", geometry_name="geometry",
                            geometry_type="Polygon", crs=CRS)
    return target


def grid_csv(frame: Any, grid: str, *, table: str = "grid") -> pl.DataFrame:
    """The grid table with ``GRD_ID`` (long INSPIRE codes) first, the root left out, ready to be
    written as CSV (``protab._io.write_frame``)."""
    return grid_cells(frame, grid, table).drop("_e", "_n", "_r")


def write_grid_csv(frame: Any, path: str | Path, grid: str, *, table: str | None = None) -> Path:
    """Write :func:`grid_csv` to ``path`` (a .csv file) atomically."""
    from protab._io import write_frame

    return write_frame(grid_csv(frame, grid, table=table or Path(path).stem), path)


def _pyogrio() -> Any:
    try:
        import pyogrio
    except ImportError:  # pragma: no cover - the geo extra is part of dev
        raise InputError("writing a GeoPackage needs pyogrio: pip install 'protab[geo]'") from None
    return pyogrio
