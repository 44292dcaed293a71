"""Grid tools (issue 15): INSPIRE codes, SQL parents, grid hierarchies, centroids, maps, re-distribution."""

from __future__ import annotations

import struct

import duckdb
import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import linprog

from protab.errors import InputError
from protab.grid import (
    RESOLUTIONS,
    centroids,
    coarsen_codes,
    coarser_code_sql,
    code_parts_sql,
    format_codes,
    grid_hierarchy,
    grid_map,
    laea_forward,
    laea_inverse,
    parse_codes,
    redistribute,
    valid_code_sql,
)

LABELS = list(RESOLUTIONS)

# ------------------------------------------------------------------------------------------
# codes


def test_parse_both_forms_all_resolutions():
    codes = [
        "CRS3035RES1000mN2689000E4337000",
        "1kmN2689E4337",
        "100mN26890E43379",
        "CRS3035RES100mN2689000E4337900",
        "10kmN268E433",
        "CRS3035RES10000mN2680000E4330000",
        "100kmN26E43",
        "CRS3035RES100000mN0E4300000",
    ]
    got = parse_codes(codes)
    assert got.columns == ["northing", "easting", "resolution"]
    assert got.rows() == [
        (2689000, 4337000, 1000),
        (2689000, 4337000, 1000),
        (2689000, 4337900, 100),
        (2689000, 4337900, 100),
        (2680000, 4330000, 10000),
        (2680000, 4330000, 10000),
        (2600000, 4300000, 100000),
        (0, 4300000, 100000),
    ]


def test_malformed_codes_listed_with_counts_and_column():
    s = pl.Series("cell", ["1kmN2689E4337", "x", "x", "x", None, "1kmN02689E4337", "1KMN1E1",
                           "CRS3035RES1000mN2689500E4337000", "2kmN1E1", " 1kmN1E1", "1kmN-1E1"])
    with pytest.raises(InputError) as err:
        parse_codes(s)
    msg = str(err.value)
    assert "column 'cell': 8 malformed codes in 10 rows: 'x' (3 rows), " in msg
    assert "8 distinct codes in all" in msg
    assert "'1kmN2689E4337'" not in msg.split("Expected")[0]


def test_malformed_codes_message_counts():
    with pytest.raises(InputError, match=r"column 'g': 2 malformed codes in 3 rows: 'bad' \(2 rows\), None \(1 row\)"):
        parse_codes(pl.DataFrame({"g": ["1kmN1E1", "bad", "bad", None]}), column="g")
    with pytest.raises(InputError, match="expected strings"):
        parse_codes(pl.Series("g", [1, 2]))


def test_format_examples_and_errors():
    assert format_codes([2689000], [4337000], "1km").to_list() == ["1kmN2689E4337"]
    assert format_codes([2689000], [4337000], 1000, form="long").to_list() == ["CRS3035RES1000mN2689000E4337000"]
    assert format_codes([2689000], [4337900], "100m").to_list() == ["100mN26890E43379"]
    assert format_codes([2600000], [4300000], "100km").to_list() == ["100kmN26E43"]
    with pytest.raises(InputError, match="not multiples"):
        format_codes([2689500], [4337000], "1km")
    with pytest.raises(InputError, match="unknown grid resolution"):
        format_codes([0], [0], "5km")
    with pytest.raises(InputError, match="form must be"):
        format_codes([0], [0], "1km", form="medium")


corners = st.tuples(st.integers(0, 10**7), st.integers(0, 10**7), st.sampled_from(LABELS))


@given(st.lists(corners, min_size=1, max_size=30), st.sampled_from(["short", "long"]))
def test_round_trip_both_forms(cells, form):
    res = np.array([RESOLUTIONS[c[2]] for c in cells])
    n = np.array([c[0] for c in cells]) * res
    e = np.array([c[1] for c in cells]) * res
    codes = format_codes(n, e, res, form=form)
    back = parse_codes(codes)
    assert back["northing"].to_list() == n.tolist()
    assert back["easting"].to_list() == e.tolist()
    assert back["resolution"].to_list() == res.tolist()
    # the other form names the same squares, and formats back to the same text
    other = format_codes(back["northing"], back["easting"], back["resolution"],
                         form="long" if form == "short" else "short")
    again = parse_codes(other)
    assert again.equals(back)
    assert format_codes(again["northing"], again["easting"], again["resolution"], form=form).equals(codes)


def test_coarsen_examples():
    codes = ["1kmN2689E4337", "CRS3035RES1000mN2689000E4337000", "100mN26899E43379", "10kmN268E433"]
    assert coarsen_codes(codes, "10km").to_list() == ["10kmN268E433"] * 4
    assert coarsen_codes(codes, "100km", form="long").to_list() == ["CRS3035RES100000mN2600000E4300000"] * 4
    assert coarsen_codes(["100mN26899E43379"], "1km").to_list() == ["1kmN2689E4337"]
    with pytest.raises(InputError, match="at least as coarse"):
        coarsen_codes(["10kmN268E433"], "1km")


@given(st.lists(corners, min_size=1, max_size=30), st.sampled_from(LABELS), st.sampled_from(["short", "long"]))
def test_parents_contain_their_children(cells, level, form):
    res = np.array([RESOLUTIONS[c[2]] for c in cells])
    codes = format_codes(np.array([c[0] for c in cells]) * res, np.array([c[1] for c in cells]) * res, res)
    keep = res <= RESOLUTIONS[level]
    if not keep.any():
        return
    codes = codes.filter(pl.Series(keep))
    child = parse_codes(codes)
    parent = parse_codes(coarsen_codes(codes, level, form=form))
    assert (parent["resolution"] == RESOLUTIONS[level]).all()
    for a in ("northing", "easting"):
        assert (parent[a] <= child[a]).all()
        assert (child[a] + child["resolution"] <= parent[a] + parent["resolution"]).all()


# ------------------------------------------------------------------------------------------
# SQL text for DuckDB


GOOD = ["CRS3035RES1000mN2689000E4337000", "1kmN2689E4337", "100mN26890E43379", "10kmN268E433",
        "100kmN26E43", "1kmN0E0", "CRS3035RES100mN100E0", "CRS3035RES100000mN0E0"]
BAD = ["x", "", "1kmN02689E4337", "CRS3035RES1000mN2689500E4337000", "1KMN1E1", "2kmN1E1", "1kmN1E1 ",
       "CRS3035RES1000mN2689000E4337", "CRS3035RES1000N2689000E4337000", "1kmE1N1", "1kmN1E1E1", "N1E1",
       "CRS3035RES100mN150E0", "1kmN1234567890E1"]


_CON: list[duckdb.DuckDBPyConnection] = []


def _duckdb_eval(codes: list, *exprs: str) -> list[tuple]:
    """Evaluate SQL expressions over a table t with the codes in column 'my "odd" col'."""
    if not _CON:
        _CON.append(duckdb.connect())
    con = _CON[0]
    t = pl.DataFrame({"i": range(len(codes)), 'my "odd" col': pl.Series(codes, dtype=pl.String)})
    con.register("t", t.to_arrow())
    try:
        return con.execute(f"SELECT {', '.join(exprs)} FROM t ORDER BY i").fetchall()
    finally:
        con.unregister("t")


def test_sql_validity_agrees_with_parse():
    col = 'my "odd" col'
    rows = _duckdb_eval(GOOD + BAD + [None], valid_code_sql(col))
    assert [r[0] for r in rows] == [True] * len(GOOD) + [False] * (len(BAD) + 1)
    parse_codes(GOOD)
    for code in BAD:
        with pytest.raises(InputError):
            parse_codes([code])


def _mutate(args: tuple[str, int, str, str]) -> str:
    code, i, ch, how = args
    i = i % (len(code) + 1)
    if how == "delete":
        return code[:i] + code[i + 1:]
    if how == "insert":
        return code[:i] + ch + code[i:]
    if how == "replace":
        return code[:i] + ch + code[i + 1:]
    return code


near_codes = st.tuples(st.sampled_from(GOOD), st.integers(0, 40), st.sampled_from(list("0123456789NEkmCRS -")),
                       st.sampled_from(["keep", "delete", "insert", "replace"])).map(_mutate)


@given(st.lists(st.one_of(near_codes, st.text(alphabet="0123456789NEkmCRS35 ", max_size=14)), min_size=1,
                max_size=20))
def test_sql_validity_agrees_with_parse_on_random_text(texts):
    rows = _duckdb_eval(texts, valid_code_sql('my "odd" col'))
    for text, (ok,) in zip(texts, rows):
        try:
            parse_codes([text])
            assert ok, text
        except InputError:
            assert not ok, text


def test_sql_parents_match_python():
    col = 'my "odd" col'
    exprs = [coarser_code_sql(col, lv, form=f) for lv in ("1km", "10km", "100km") for f in ("short", "long")]
    parts = code_parts_sql(col)
    rows = _duckdb_eval(GOOD + BAD, *exprs, parts["northing"], parts["easting"], parts["resolution"])
    parsed = parse_codes(GOOD)
    k = 0
    for lv in ("1km", "10km", "100km"):
        for f in ("short", "long"):
            ok = parsed["resolution"] <= RESOLUTIONS[lv]
            expect = [None] * len(GOOD)
            sub = coarsen_codes(pl.Series(GOOD).filter(ok), lv, form=f).to_list()
            for i, j in enumerate(np.flatnonzero(ok.to_numpy())):
                expect[j] = sub[i]
            assert [r[k] for r in rows[: len(GOOD)]] == expect, (lv, f)
            assert all(r[k] is None for r in rows[len(GOOD):]), (lv, f)
            k += 1
    assert [r[k:] for r in rows[: len(GOOD)]] == parsed.rows()


def test_sql_rejects_unknown_level_and_form():
    with pytest.raises(InputError):
        coarser_code_sql("c", "5km")
    with pytest.raises(InputError):
        coarser_code_sql("c", "10km", form="x'; DROP TABLE t; --")


# ------------------------------------------------------------------------------------------
# hierarchy


def test_grid_hierarchy_levels_and_root():
    codes = ["1kmN2689E4337", "1kmN2690E4337", "1kmN2789E4337", "1kmN2689E4337"]
    h = grid_hierarchy(codes)
    assert h.root == "Total" and h.depth == 3
    assert sorted(h.leaves) == sorted(set(codes))
    assert h.parent_of("1kmN2689E4337") == "10kmN268E433"
    assert h.parent_of("1kmN2690E4337") == "10kmN269E433"
    assert h.parent_of("10kmN268E433") == "100kmN26E43"
    assert h.parent_of("10kmN278E433") == "100kmN27E43"
    assert h.parent_of("100kmN27E43") == "Total"
    assert sorted(h.children_of("Total")) == ["100kmN26E43", "100kmN27E43"]

    long = grid_hierarchy(["CRS3035RES1000mN2689000E4337000"], levels=["100km"], form="long", root="EU")
    assert long.root == "EU" and long.depth == 2
    assert long.parent_of("CRS3035RES1000mN2689000E4337000") == "CRS3035RES100000mN2600000E4300000"


def test_grid_hierarchy_bad_input():
    with pytest.raises(InputError, match="2 resolutions"):
        grid_hierarchy(["1kmN1E1", "10kmN1E1"])
    with pytest.raises(InputError, match="must be coarser"):
        grid_hierarchy(["10kmN1E1"], levels=("10km", "100km"))
    with pytest.raises(InputError, match=r"'bad' \(2 rows\)"):
        grid_hierarchy(["1kmN1E1", "bad", "bad"])
    with pytest.raises(InputError, match="null"):
        grid_hierarchy(["1kmN1E1", None])


@given(st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 3000)), min_size=1, max_size=40))
def test_grid_hierarchy_parents_contain_children(cells):
    codes = format_codes([c[0] * 100 for c in cells], [c[1] * 100 for c in cells], "100m")
    h = grid_hierarchy(codes, levels=("1km", "100km", "10km"))
    rel = h.to_frame().filter(pl.col("parent").is_not_null() & (pl.col("parent") != "Total"))
    child, parent = parse_codes(rel["code"]), parse_codes(rel["parent"])
    assert (parent["resolution"] == child["resolution"] * 10).all()
    for a in ("northing", "easting"):
        assert (parent[a] <= child[a]).all()
        assert (child[a] + child["resolution"] <= parent[a] + parent["resolution"]).all()
    assert set(h.leaves) == set(codes.to_list())


# ------------------------------------------------------------------------------------------
# projection and centroids

# IOGP GIGS test dataset 2.1, procedure 5110 (Lambert azimuthal equal area, ETRS89 / LAEA
# Europe = EPSG:3035): latitude, longitude, northing, easting. Point 3 is also EPSG Guidance
# Note 7-2's worked example. Tolerances there: 0.05 m and 6e-7 degrees.
GIGS_5110 = [
    (70, 5, 5214090.649, 4127824.658),
    (60, 5, 4109791.66, 4041548.125),
    (50, 5, 2999718.853, 3962799.451),
    (40, 5, 1892578.962, 3892127.02),
    (30, 5, 796781.677, 3830117.902),
    (52, 10, 3210000, 4321000),
    (50, 0, 3036305.967, 3606514.431),
    (50, 3, 3011432.894, 3819948.288),
    (50, 8, 2989464.315, 4177612.521),
    (50, 10, 2987510.567, 4321000),
]


def test_laea_against_published_points():
    a = np.array(GIGS_5110, dtype=float)
    lon, lat = laea_inverse(a[:, 3], a[:, 2])
    assert np.abs(lat - a[:, 0]).max() < 1e-7
    assert np.abs(lon - a[:, 1]).max() < 1e-7
    x, y = laea_forward(a[:, 1], a[:, 0])
    assert np.abs(x - a[:, 3]).max() < 0.005
    assert np.abs(y - a[:, 2]).max() < 0.005


def test_laea_round_trip():
    rng = np.random.default_rng(1)
    lon, lat = rng.uniform(-30, 45, 1000), rng.uniform(27, 72, 1000)
    x, y = laea_forward(lon, lat)
    lon2, lat2 = laea_inverse(x, y)
    assert np.abs(lon2 - lon).max() < 1e-11 and np.abs(lat2 - lat).max() < 1e-11


def test_centroids():
    c = centroids(pl.Series("cell", ["1kmN2989E3962", "CRS3035RES100mN3209900E4320900"]))
    assert c.columns == ["cell", "x", "y", "lon", "lat"]
    assert c["x"].to_list() == [3962500.0, 4320950.0]
    assert c["y"].to_list() == [2989500.0, 3209950.0]
    # the second square's centre is 50 m south-west of the projection's origin (52° N, 10° E)
    assert abs(c["lat"][1] - 52) < 0.001 and abs(c["lon"][1] - 10) < 0.001
    assert c["lat"][1] < 52 and c["lon"][1] < 10
    # the first is the 1 km square 10 km south of GIGS point 3 (50° N, 5° E): about 0.09° south
    assert 49.9 < c["lat"][0] < 49.92 and abs(c["lon"][0] - 5) < 0.01


# ------------------------------------------------------------------------------------------
# map


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_grid_map_writes_png_with_blanked_squares(tmp_path):
    rng = np.random.default_rng(0)
    n, e = np.meshgrid(np.arange(40), np.arange(30))
    frame = pl.DataFrame({"cell": format_codes(2600000 + n.ravel() * 1000, 4300000 + e.ravel() * 1000, "1km"),
                          "n": rng.integers(0, 100, n.size)})
    frame = frame.with_columns(pl.when(pl.col("n") < 10).then(None).otherwise(pl.col("n")).alias("n"))
    path = grid_map(frame, "cell", "n", tmp_path / "map.png", title="persons")
    data = path.read_bytes()
    assert _png_size(data) == (800, 800)
    assert 10_000 < len(data) < 2_000_000
    from matplotlib.image import imread

    img = imread(str(path))[:, :, :3]
    red = np.all(np.abs(img - np.array([0xD6, 0x27, 0x28]) / 255) < 0.02, axis=2)
    assert red.sum() > 100  # blanked squares are drawn (legend patch alone is far smaller)
    # the same frame without nulls: no red squares
    grid_map(frame.fill_null(50), "cell", "n", tmp_path / "full.png", log=True)
    img2 = imread(str(tmp_path / "full.png"))[:, :, :3]
    red2 = np.all(np.abs(img2 - np.array([0xD6, 0x27, 0x28]) / 255) < 0.02, axis=2)
    assert red2.sum() < red.sum() / 10


def test_grid_map_bad_input_writes_nothing(tmp_path):
    out = tmp_path / "m.png"
    with pytest.raises(InputError, match="malformed"):
        grid_map(pl.DataFrame({"c": ["1kmN1E1", "oops"], "v": [1, 2]}), "c", "v", out)
    with pytest.raises(InputError, match="max_pixels"):
        grid_map(pl.DataFrame({"c": ["1kmN1E1", "1kmN5000E5000"], "v": [1, 2]}), "c", "v", out, max_pixels=1000)
    with pytest.raises(InputError, match="missing column"):
        grid_map(pl.DataFrame({"c": ["1kmN1E1"]}), "c", "v", out)
    assert not out.exists() and list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------
# re-distribution


def test_redistribute_worked_example():
    # a 1 km strip: safe 5 at E0; 1 and 2 beside it; an isolated 1; an empty square; a safe 4
    df = pl.DataFrame({"cell": ["1kmN0E0", "1kmN0E1", "1kmN0E2", "1kmN5E5", "1kmN9E9", "1kmN9E8"],
                       "n": [5, 1, 2, 1, 0, 4]})
    out, m = redistribute(df, "cell", "n", max_distance=3000)
    assert out["published"].to_list() == [8, 0, 0, None, 0, 4]
    assert out["moved_to"].to_list() == [None, "1kmN0E0", "1kmN0E0", None, None, None]
    assert out["distance"].to_list() == [None, 1000.0, 2000.0, None, None, None]
    assert out["n"].equals(df["n"])
    assert m["mass_before"] == 13 and m["mass_after"] == 12 and m["mass_suppressed"] == 1
    assert m["mass_moved"] == 3 and m["moved_cells"] == 2 and m["suppressed_cells"] == 1
    assert m["distance_total"] == 1 * 1000 + 2 * 2000
    assert m["distance_mean"] == pytest.approx(5000 / 3)
    assert m["distance_max"] == 2000
    assert m["cells_changed"] == 4 and m["share_changed"] == pytest.approx(4 / 5)
    assert m["remaining_sensitive"] == 0 and m["small_unchanged"] == 0.0
    # all in one 10 km square: it lost the suppressed 1
    assert m["coarse_level"] == "10km" and m["coarse_abs_change"] == 1
    assert m["coarse_rel_change"] == pytest.approx(1 / 13)
    # without a distance limit the isolated 1 goes to 1kmN9E8 (distance √(16 + 9) km = 5 km)
    out2, m2 = redistribute(df, "cell", "n")
    assert out2["published"].to_list() == [8, 0, 0, 0, 0, 5]
    assert m2["mass_after"] == 13 and m2["distance_total"] == pytest.approx(10000.0)


def test_redistribute_tie_rule_and_coarse_change():
    # the 1 at (N1, E1) has safe squares at N0E1, N1E0, N1E2 and N2E1, all 1 km away:
    # the smallest northing wins (N0E1). Two 10 km squares: mass crosses between them.
    df = pl.DataFrame({"cell": ["1kmN1E1", "1kmN1E2", "1kmN2E1", "1kmN1E0", "1kmN0E1"], "n": [1, 3, 3, 3, 3]})
    out, _ = redistribute(df, "cell", "n")
    assert out["moved_to"][0] == "1kmN0E1"
    d = pl.DataFrame({"cell": ["1kmN9E9", "1kmN10E9"], "n": [1, 7]})
    out, m = redistribute(d, "cell", "n")
    assert out["published"].to_list() == [0, 8]
    assert m["coarse_squares"] == 2 and m["coarse_abs_change"] == 2 and m["coarse_max_abs_change"] == 1
    assert m["coarse_share_changed"] == 1.0


def test_redistribute_bad_input():
    good = {"cell": ["1kmN0E0", "1kmN0E1"], "n": [5, 1]}
    with pytest.raises(InputError, match=r"more than one row: '1kmN0E0' \(2 rows\)"):
        redistribute(pl.DataFrame({"cell": ["1kmN0E0", "1kmN0E0"], "n": [5, 1]}), "cell", "n")
    with pytest.raises(InputError, match="negative"):
        redistribute(pl.DataFrame({"cell": good["cell"], "n": [5, -1]}), "cell", "n")
    with pytest.raises(InputError, match="null count"):
        redistribute(pl.DataFrame({"cell": good["cell"], "n": [5, None]}), "cell", "n")
    with pytest.raises(InputError, match="whole counts"):
        redistribute(pl.DataFrame({"cell": good["cell"], "n": [5.0, 1.5]}), "cell", "n")
    with pytest.raises(InputError, match="2 resolutions"):
        redistribute(pl.DataFrame({"cell": ["1kmN0E0", "10kmN0E1"], "n": [5, 1]}), "cell", "n")
    with pytest.raises(InputError, match="malformed"):
        redistribute(pl.DataFrame({"cell": ["1kmN0E0", "?"], "n": [5, 1]}), "cell", "n")
    with pytest.raises(InputError, match="threshold"):
        redistribute(pl.DataFrame(good), "cell", "n", threshold=0)
    with pytest.raises(InputError, match="max_distance"):
        redistribute(pl.DataFrame(good), "cell", "n", max_distance=-5)
    with pytest.raises(InputError, match="missing column"):
        redistribute(pl.DataFrame(good), "cell", "count")
    with pytest.raises(InputError, match="no rows"):
        redistribute(pl.DataFrame(good).head(0), "cell", "n")


grids = st.dictionaries(st.tuples(st.integers(0, 11), st.integers(0, 11)), st.integers(0, 7), min_size=1,
                        max_size=40)


def _brute_force(cells, counts, threshold, max_distance, res):
    """Nearest safe square per sensitive square by comparing all pairs (ties: smallest N, then E)."""
    xy = np.array(cells)
    safe = [i for i, c in enumerate(counts) if c >= threshold]
    expect = {}
    for i, c in enumerate(counts):
        if 1 <= c < threshold:
            cands = sorted(((xy[i] - xy[j]) @ (xy[i] - xy[j]), xy[j][0], xy[j][1], j) for j in safe)
            if cands and (max_distance is None or np.sqrt(cands[0][0]) * res <= max_distance):
                expect[i] = cands[0][3]
            else:
                expect[i] = None
    return expect


@given(grids, st.integers(1, 5), st.sampled_from([None, 1000.0, 2500.0, 10_000.0]), st.sampled_from(LABELS[:3]),
       st.sampled_from(["short", "long"]))
def test_redistribute_properties(grid, threshold, max_distance, label, form):
    res = RESOLUTIONS[label]
    cells = list(grid)
    counts = [grid[c] for c in cells]
    codes = format_codes([c[0] * res for c in cells], [c[1] * res for c in cells], res, form=form)
    df = pl.DataFrame({"g": codes, "k": counts})
    md = None if max_distance is None else max_distance * res / 1000
    out, m = redistribute(df, "g", "k", threshold=threshold, max_distance=md)
    pub = out["published"]
    # mass preserved exactly: published plus suppressed is the original mass
    assert int(pub.sum()) + m["mass_suppressed"] == sum(counts) == m["mass_before"]
    suppressed = pub.is_null().to_numpy()
    assert m["mass_suppressed"] == sum(c for c, s in zip(counts, suppressed) if s)
    # no published count in 1 … threshold − 1
    assert not ((pub >= 1) & (pub < threshold)).fill_null(False).any()
    assert m["remaining_sensitive"] == 0
    # each sensitive square goes to its nearest safe square (brute force), or is suppressed
    expect = _brute_force(cells, counts, threshold, md, res)
    moved_to = out["moved_to"].to_list()
    for i, c in enumerate(counts):
        if i in expect:
            assert moved_to[i] == (None if expect[i] is None else codes[expect[i]])
            assert suppressed[i] == (expect[i] is None)
        else:
            assert moved_to[i] is None and pub[i] == c + sum(counts[j] for j, t in expect.items() if t == i)


@given(grids, st.integers(2, 5))
def test_redistribute_distance_is_the_transport_optimum(grid, threshold):
    """Cross-check against the transport LP (HiGHS): move every sensitive count to safe squares
    at least total distance Σ n·d; the LP optimum must equal what redistribute moved."""
    cells = list(grid)
    counts = np.array([grid[c] for c in cells])
    sens = np.flatnonzero((counts >= 1) & (counts < threshold))
    safe = np.flatnonzero(counts >= threshold)
    df = pl.DataFrame({"g": format_codes([c[0] * 1000 for c in cells], [c[1] * 1000 for c in cells], "1km"),
                       "k": counts})
    _, m = redistribute(df, "g", "k", threshold=threshold)
    if sens.size == 0 or safe.size == 0:
        assert m["distance_total"] == 0.0
        assert m["mass_suppressed"] == (counts[sens].sum() if safe.size == 0 else 0)
        return
    xy = np.array(cells, dtype=float) * 1000
    d = np.linalg.norm(xy[sens][:, None, :] - xy[safe][None, :, :], axis=2)
    ns, nr = d.shape
    a_eq = np.kron(np.eye(ns), np.ones(nr))  # Σ_j x_ij = n_i for every sensitive square i
    lp = linprog(d.ravel(), A_eq=a_eq, b_eq=counts[sens], bounds=(0, None), method="highs")
    assert lp.status == 0
    assert m["distance_total"] == pytest.approx(lp.fun, rel=1e-9, abs=1e-6)
    assert m["mass_moved"] == counts[sens].sum()


@given(grids, st.permutations(range(40)))
def test_redistribute_does_not_depend_on_row_order(grid, perm):
    cells = list(grid)
    df = pl.DataFrame({"g": format_codes([c[0] * 1000 for c in cells], [c[1] * 1000 for c in cells], "1km"),
                       "k": [grid[c] for c in cells]})
    order = [i for i in perm if i < df.height]
    a, ma = redistribute(df, "g", "k", max_distance=3000)
    b, mb = redistribute(df[order], "g", "k", max_distance=3000)
    assert a.sort("g").equals(b.sort("g"))
    assert ma == mb
