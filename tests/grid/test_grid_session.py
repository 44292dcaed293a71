"""Grid hierarchies from a session's data and from protect requests (protab.grid wired in)."""

from __future__ import annotations

import polars as pl
import pytest

import protab as pt
from protab import cli
from protab.errors import InputError

CODES = ["1kmN2689E4337", "1kmN2689E4338", "1kmN2699E4337", "1kmN2701E4337"]


@pytest.fixture()
def db(tmp_path):
    path = str(tmp_path / "g.duckdb")
    with pt.Session(path) as s:
        rows = [(i, CODES[i % 4], "FM"[i % 2]) for i in range(200)]
        s.register("persons", pl.DataFrame(rows, schema=["pid", "grid1km", "sex"], orient="row"))
        s.add_record_keys("persons", id_column="pid", seed="grid-seed")
    return path


def test_hierarchy_from_grid_publishes_10km_parents(db):
    with pt.Session(db, read_only=True) as s:
        h = s.hierarchy_from_grid("persons", "grid1km", ["10km"])
        t = s.tabulate("persons", pt.TableSpec({"grid1km": h, "sex": None}, drop_empty=True))
    parents = t.filter((pl.col("grid1km_level") == 1) & (pl.col("sex_level") == 0)).sort("grid1km")
    # 2689/4337 and 2689/4338 share 10 km square N268E433; 2699 -> N269E433; 2701 -> N270E433
    assert parents["grid1km"].to_list() == ["10kmN268E433", "10kmN269E433", "10kmN270E433"]
    assert parents["n"].to_list() == [100, 50, 50]


def test_malformed_codes_are_counted_not_built(db):
    with pt.Session(db) as s:
        s.con.execute("UPDATE persons SET grid1km = '1kmN26x9E4337' WHERE pid < 3")
        with pytest.raises(InputError, match=r"1kmN26x9E4337.*3|3.*1kmN26x9E4337"):
            s.hierarchy_from_grid("persons", "grid1km")


def test_grid_hierarchy_in_a_protect_request(db, tmp_path):
    (tmp_path / "r.toml").write_text('''
database = "g.duckdb"
output = "out"
formats = ["csv"]
[ptable]
maximum_entropy = { D = 3, V = 1 }
[hierarchies.grid1km]
grid = ["10km", "100km"]
[[tables]]
name = "grid"
source = "persons"
dims = ["grid1km"]
drop_empty = true
''', encoding="utf-8")
    assert cli.main(["protect", str(tmp_path / "r.toml")]) == 0
    out = pl.read_csv(tmp_path / "out" / "grid.csv")
    assert out.group_by("grid1km_level").len().sort("grid1km_level")["len"].to_list() == [1, 2, 3, 4]  # N26 and N27 at 100 km
