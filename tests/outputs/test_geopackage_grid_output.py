"""Grid tables written as GeoPackages of EPSG:3035 squares and as CSV with the INSPIRE GRD_ID
(protab.exchange, docs/exchange.md), read back with pyogrio: the CRS, each row's square (its
bounds from the code), GRD_ID and the counts; the root of a grid hierarchy is no square; codes
outside EPSG:3035 are refused by table and code, and nothing is written."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import protab as pt
from protab.errors import InputError
from protab.exchange import write_geopackage, write_grid_csv

pyogrio = pytest.importorskip("pyogrio")  # the geo extra (part of dev)

TABLE = pl.DataFrame({
    "grid1km": ["Total", "100kmN26E43", "10kmN268E433", "1kmN2689E4337", "CRS3035RES1000mN2684000E4334000"],
    "sex": ["Total", "F", "F", "M", "F"],
    "grid1km_level": [0, 1, 2, 3, 3],
    "n_pert": [40, 21, 12, 7, None],
})
# (GRD_ID, xmin, ymin, side) of the squares, worked out by hand from the codes
SQUARES = [
    ("CRS3035RES100000mN2600000E4300000", 4_300_000, 2_600_000, 100_000),
    ("CRS3035RES10000mN2680000E4330000", 4_330_000, 2_680_000, 10_000),
    ("CRS3035RES1000mN2689000E4337000", 4_337_000, 2_689_000, 1_000),
    ("CRS3035RES1000mN2684000E4334000", 4_334_000, 2_684_000, 1_000),
]


def _bounds(wkb: bytes) -> tuple[float, float, float, float]:
    """xmin, ymin, xmax, ymax of a WKB polygon (GeoPackage blobs are read back as WKB)."""
    assert wkb[0] == 1 and int.from_bytes(wkb[1:5], "little") == 3  # little-endian polygon
    rings, points = int.from_bytes(wkb[5:9], "little"), int.from_bytes(wkb[9:13], "little")
    assert rings == 1 and points == 5
    xy = np.frombuffer(wkb[13:13 + 80], dtype="<f8").reshape(5, 2)
    assert (xy[0] == xy[-1]).all()  # a closed ring
    return xy[:, 0].min(), xy[:, 1].min(), xy[:, 0].max(), xy[:, 1].max()


def test_squares_round_trip_through_a_geopackage(tmp_path):
    path = write_geopackage(TABLE, tmp_path / "grid_sex.gpkg", "grid1km")
    info = pyogrio.read_info(path)
    assert info["crs"] == "EPSG:3035" and info["geometry_type"] == "Polygon" and info["features"] == 4
    meta, table = pyogrio.read_arrow(path)
    back = pl.from_arrow(table)
    assert back["GRD_ID"].to_list() == [s[0] for s in SQUARES]
    assert back["n_pert"].to_list() == [21, 12, 7, None]
    assert back["sex"].to_list() == ["F", "F", "M", "F"]
    for wkb, (_, x, y, side) in zip(table[meta["geometry_name"]].to_pylist(), SQUARES):
        assert _bounds(wkb) == (x, y, x + side, y + side)
    assert not [p for p in tmp_path.iterdir() if p.name != "grid_sex.gpkg"]  # no temporary left


def test_grid_as_csv_with_grd_id(tmp_path):
    path = write_grid_csv(TABLE, tmp_path / "grid_sex.csv", "grid1km")
    back = pl.read_csv(path)
    assert back.columns == ["GRD_ID", "sex", "n_pert"]
    assert back["GRD_ID"].to_list() == [s[0] for s in SQUARES]
    assert back["n_pert"].to_list() == [21, 12, 7, None]


def test_a_session_grid_table_round_trips(tmp_path):
    codes = ["1kmN2689E4337", "1kmN2689E4338", "1kmN2701E4352", "1kmN2701E4352"]
    persons = pl.DataFrame({"pid": range(4), "cell": codes})
    with pt.Session(":memory:") as s:
        s.register("persons", persons)
        frame = s.tabulate("persons", pt.TableSpec({"cell": pt.grid.grid_hierarchy(codes, ["10km"])}))
    path = write_geopackage(frame, tmp_path / "g.gpkg", "cell")
    back = pl.from_arrow(pyogrio.read_arrow(path)[1])
    want = frame.filter(pl.col("cell_level") > 0)
    assert back["n"].to_list() == want["n"].to_list()
    assert back.filter(pl.col("GRD_ID") == "CRS3035RES1000mN2701000E4352000")["n"].to_list() == [2]


@pytest.mark.parametrize("code, why", [
    ("1kmN9999E4337", "area of use"),          # 9 999 km north of the origin: beyond the pole
    ("1kmN2689E99999", "area of use"),         # far east of Europe
    ("CRS4326RES1000mN2689000E4337000", "malformed"),
    ("EPSG3035_1km_N2689E4337", "malformed"),
])
def test_codes_outside_epsg3035_are_refused_by_table_and_code(tmp_path, code, why):
    frame = pl.DataFrame({"cell": ["1kmN2689E4337", code], "n": [3, 4]})
    with pytest.raises(InputError, match=f"table 'squares'.*{why}") as err:
        write_geopackage(frame, tmp_path / "out.gpkg", "cell", table="squares")
    assert code in str(err.value)
    with pytest.raises(InputError, match="table 'squares'"):
        write_grid_csv(frame, tmp_path / "out.csv", "cell", table="squares")
    assert list(tmp_path.iterdir()) == []
