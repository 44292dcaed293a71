"""The demo's synthetic census and business register (sql/demo_population.sql, protab demo):
households living together, one geography (1 km squares in municipalities in regions), clustered
settlement, a skewed firm register with enterprise groups; the same rows for any thread count."""

from __future__ import annotations

import polars as pl
import pytest

import protab as pt
from protab import cli, sql_text
from protab.errors import InputError
from protab.grid import coarsen_codes, parse_codes

PERSONS = 40_000
FIRMS = 4_000


@pytest.fixture(scope="module")
def demo():
    """persons, firms and the towns of the demo generator, as polars frames."""
    with pt.Session(":memory:", progress=False) as s:
        s.con.execute(sql_text("demo_population.sql"))
        persons = s.sql("SELECT * FROM protab_demo_population(?)", [PERSONS])
        firms = s.sql("SELECT * FROM protab_demo_firms(?)", [FIRMS])
        towns = s.sql("SELECT * FROM protab_demo_towns()")
    return persons, firms, towns


def test_persons_live_in_households(demo):
    persons, _, _ = demo
    assert persons["pid"].to_list() == list(range(1, PERSONS + 1))
    shared = ["region", "municipality", "grid1km", "grid10km", "hsize", "tenure", "dwelling_type"]
    per_household = persons.group_by("hid").agg(pl.len().alias("members"), *[pl.col(c).n_unique() for c in shared])
    assert per_household.select([(pl.col(c) == 1).all() for c in shared]).row(0) == (True,) * len(shared)
    sizes = persons.group_by("hid").agg(pl.len(), pl.col("hsize").first())
    assert (sizes["len"] == sizes["hsize"]).all()
    assert set(sizes["hsize"]) == {1, 2, 3, 4, 5, 6}
    assert 2.0 < PERSONS / sizes.height < 2.6  # persons per household


def test_person_columns_hold_their_codes(demo):
    persons, _, _ = demo
    assert persons["age"].min() >= 0 and persons["age"].max() <= 99
    band = (pl.col("age") // 5 * 5).cast(pl.Utf8).str.zfill(2) + "-" + (pl.col("age") // 5 * 5 + 4).cast(
        pl.Utf8).str.zfill(2)
    want = pl.when(pl.col("age") >= 85).then(pl.lit("85+")).otherwise(band)
    assert persons.select((pl.col("agegroup") == want).all()).item()
    assert set(persons["sex"]) == {"F", "M"}
    assert set(persons["citizenship"]) == {"national", "EU", "non-EU"}
    assert set(persons["tenure"]) == {"owner", "tenant", "social"}
    assert set(persons["dwelling_type"]) == {"house", "flat"}
    assert persons.filter(pl.col("age") < 16)["income"].max() == 0
    assert persons.null_count().sum_horizontal().item() == 0
    assert persons.select(pl.col("agegroup").n_unique()).item() == 18


def test_one_geography_squares_in_municipalities_in_regions(demo):
    persons, _, towns = demo
    squares = persons.select("grid1km", "grid10km", "municipality", "region").unique()
    assert squares["grid1km"].n_unique() == squares.height  # a square lies in one municipality
    assert (squares.group_by("municipality").agg(pl.col("region").n_unique())["region"] == 1).all()
    assert squares["grid10km"].to_list() == coarsen_codes(squares["grid1km"], "10km").to_list()
    corners = parse_codes(squares["grid1km"])
    assert corners["northing"].is_between(2_600_000, 2_839_000).all()
    assert corners["easting"].is_between(4_200_000, 4_439_000).all()
    # the municipalities and regions are those of the generator's classification
    known = set(towns.select("region", "municipality").iter_rows())
    assert set(squares.select("region", "municipality").iter_rows()) <= known
    assert towns.height == 400 and towns["municipality"].n_unique() == 400
    assert set(towns["region"]) == {f"R{k}" for k in range(1, 9)}
    assert (towns["municipality"].str.slice(0, 2) == towns["region"]).all()


def test_settlement_is_clustered_in_towns_with_countryside_around(demo):
    persons, _, _ = demo
    counts = persons.group_by("grid1km").len().sort("len", descending=True)["len"]
    assert counts.head(counts.len() // 10).sum() / PERSONS > 0.3  # a tenth of the squares: a third of us
    small = (counts <= 3).sum() / counts.len()
    assert 0.2 < small < 0.7  # farms and villages, but most populated squares are in places
    assert counts.len() < 0.5 * 240 * 240  # much of the country is empty
    largest = persons.group_by("municipality").len()["len"]
    assert largest.max() > 10 * largest.median()  # one capital, many small municipalities
    # regions are compact areas, not bands across the country
    boxes = parse_codes(persons["grid1km"]).with_columns(persons["region"]).group_by("region").agg(
        (pl.col("northing").max() - pl.col("northing").min()).alias("ns"),
        (pl.col("easting").max() - pl.col("easting").min()).alias("ew"))
    ratio = boxes.select(pl.max_horizontal("ns", "ew") / pl.min_horizontal("ns", "ew"))
    assert ratio.max().item() < 2


def test_firms_are_skewed_and_grouped(demo):
    _, firms, towns = demo
    assert firms["fid"].to_list() == list(range(1, FIRMS + 1))
    assert set(firms["nace"]) <= set("ABCDEFGHIJKLMNOPQRS") and firms["nace"].n_unique() == 13
    size = (pl.when(pl.col("employees") < 10).then(pl.lit("0-9")).when(pl.col("employees") < 50)
            .then(pl.lit("10-49")).when(pl.col("employees") < 250).then(pl.lit("50-249")).otherwise(pl.lit("250+")))
    assert firms.select((pl.col("size") == size).all()).item()
    assert set(firms["size"]) == {"0-9", "10-49", "50-249", "250+"}
    assert (firms["turnover"] > 0).all()
    top = firms["turnover"].sort(descending=True)
    assert top.head(FIRMS // 100).sum() / top.sum() > 0.2  # the largest 1 % hold a fifth or more
    groups = firms.group_by("enterprise_group").len()
    assert groups.filter(pl.col("len") >= 2).height > 10  # groups of several firms (holdings)
    alone = firms.filter(pl.col("enterprise_group").str.starts_with("F"))
    assert (alone["enterprise_group"] == "F" + alone["fid"].cast(pl.Utf8)).all()
    assert set(firms.select("region", "municipality").iter_rows()) <= set(
        towns.select("region", "municipality").iter_rows())


def test_the_same_rows_for_any_number_of_threads():
    frames = []
    for threads in (1, 2):
        with pt.Session(":memory:", progress=False) as s:
            s.con.execute(f"SET threads = {threads}")
            s.con.execute(sql_text("demo_population.sql"))
            frames.append((s.sql("SELECT * FROM protab_demo_population(5000)"),
                           s.sql("SELECT * FROM protab_demo_firms(500)")))
    assert frames[0][0].equals(frames[1][0]) and frames[0][1].equals(frames[1][1])


def test_the_demo_database_holds_keyed_persons_and_firms(tmp_path):
    db = tmp_path / "d.duckdb"
    cli.demo(1200, str(db), str(tmp_path / "out"), "demo-firms-seed", formats=("csv",))
    with pt.Session(db, read_only=True, progress=False) as s:
        assert s.sql("SELECT count(*) AS n FROM firms").item() == 1200 // 12
        assert s.record_key("firms")[1] == 2**32 and s.record_key("persons")[1] == 2**32
        # a firm and a person of the same id get unrelated keys
        same = s.sql("SELECT count(*) FROM persons p JOIN firms f ON p.pid = f.fid AND p.rkey = f.rkey").item()
        assert same == 0


def test_the_demo_does_not_replace_firms(tmp_path):
    db = tmp_path / "f.duckdb"
    with pt.Session(db, progress=False) as s:
        s.con.execute("CREATE TABLE firms AS SELECT 1 AS fid")
    with pytest.raises(InputError, match="'firms'.*--replace"):
        cli.demo(100, str(db), str(tmp_path / "out"), "s", formats=("csv",))
    with pt.Session(db, read_only=True, progress=False) as s:
        assert s.sql("SELECT count(*) FROM firms").item() == 1
