"""The named steps of grid.redistribute and grid_map (protab.grid._redistribute, _map), each on a
row of squares small enough to work out by hand."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from protab.errors import InputError
from protab.grid import parse_codes
from protab.grid._map import _raster
from protab.grid._redistribute import _check_arguments, _grid, _moves, _output

# five 1 km squares in a row, easting 4330 .. 4334 km, counts 1 5 0 2 9 (threshold 3)
CODES = pl.Series("code", [f"1kmN2680E{e}" for e in range(4330, 4335)])
COUNTS = np.array([1, 5, 0, 2, 9])


def test_grid_gives_the_resolution_and_the_square_indices():
    r, big, ix, iy = _grid(CODES, "code", None)
    assert (r, big) == (1000, 10_000)
    assert ix.tolist() == list(range(4330, 4335)) and iy.tolist() == [2680] * 5


def test_moves_send_each_small_count_to_the_nearest_safe_square():
    _, _, ix, iy = _grid(CODES, "code", None)
    src, dst, dist, suppressed = _moves(COUNTS, ix, iy, 1000, 3, None)
    # square 0 -> square 1 (1 km); square 3: square 4 at 1 km beats square 1 at 2 km
    assert src.tolist() == [0, 3] and dst.tolist() == [1, 4] and dist.tolist() == [1000.0, 1000.0]
    assert suppressed.size == 0
    src, dst, dist, suppressed = _moves(COUNTS, ix, iy, 1000, 3, 500.0)  # nothing within 500 m
    assert src.size == 0 and suppressed.tolist() == [0, 3]


def test_output_publishes_null_for_suppressed_and_names_the_receiver():
    published = np.array([0, 6, 0, 0, 11])
    valid = np.array([True, True, True, False, True])
    out = _output(pl.DataFrame({"code": CODES, "n": COUNTS}), CODES, published, valid,
                  np.array([0]), np.array([1]), np.array([1000.0]))
    assert out.columns == ["code", "n", "published", "moved_to", "distance"]
    assert out["published"].to_list() == [0, 6, 0, None, 11]
    assert out["moved_to"].to_list() == [CODES[1], None, None, None, None]
    assert out["distance"].to_list() == [1000.0, None, None, None, None]


def test_check_arguments_names_what_is_wrong():
    df = pl.DataFrame({"code": CODES, "n": COUNTS})
    with pytest.raises(InputError, match="threshold must be a whole number"):
        _check_arguments(df, "code", "n", 0, None)
    with pytest.raises(InputError, match="rename the input column 'published'"):
        _check_arguments(df.rename({"n": "published"}), "code", "published", 3, None)
    with pytest.raises(InputError, match="max_distance must be a positive number"):
        _check_arguments(df, "code", "n", 3, float("nan"))
    with pytest.raises(InputError, match="has no rows"):
        _check_arguments(df.head(0), "code", "n", 3, None)


def test_raster_places_each_square_and_marks_the_blanked_ones():
    values = pl.Series("v", [1.0, None, 3.0, 4.0, 5.0])
    raster, blank, extent = _raster(parse_codes(CODES), values, 1000, "code", 100)
    assert raster.shape == (1, 5) and extent == (4330.0, 4335.0, 2680.0, 2681.0)
    assert blank.tolist() == [[False, True, False, False, False]]
    assert np.isnan(raster[0, 1]) and raster[0, [0, 2, 3, 4]].tolist() == [1.0, 3.0, 4.0, 5.0]
    with pytest.raises(InputError, match="more than max_pixels=4"):
        _raster(parse_codes(CODES), values, 1000, "code", 4)
