"""Every cell that two hypercubes of a programme share — the same codes of the same variables,
margins included — has one value, because all are protected from one swapped copy of the records
with one set of record keys and one p-table."""

from __future__ import annotations

import itertools

import polars as pl
import pytest
from conftest import read_outputs

import protab as pt


def _level_columns(frame: pl.DataFrame) -> list[str]:
    return [c[: -len("_level")] for c in frame.columns if c.endswith("_level")]


def shared_cells(a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    """The cells two tables both publish, with each table's ``n_pert``: the common variables'
    codes equal, and every variable only one table has at its total (level 0)."""
    va, vb = _level_columns(a), _level_columns(b)
    common = [v for v in va if v in vb]
    only_a = [pl.col(f"{v}_level") == "0" for v in va if v not in vb]
    only_b = [pl.col(f"{v}_level") == "0" for v in vb if v not in va]
    a = a.filter(pl.all_horizontal(only_a)) if only_a else a
    b = b.filter(pl.all_horizontal(only_b)) if only_b else b
    left, right = a.select(*common, pl.col("n_pert").alias("a")), b.select(*common, pl.col("n_pert").alias("b"))
    if not common:
        return left.join(right, how="cross")
    return left.join(right, on=common, how="inner", nulls_equal=True)


def check_shared(frames: dict[tuple[str, str], pl.DataFrame]) -> tuple[int, list[str]]:
    """(cells compared, descriptions of the cells that differ) over every pair of tables of
    different hypercubes."""
    checked, bad = 0, []
    for (ka, a), (kb, b) in itertools.combinations(frames.items(), 2):
        if ka[0] == kb[0]:
            continue
        cells = shared_cells(a, b)
        checked += cells.height
        differ = cells.filter(pl.col("a").ne_missing(pl.col("b")))
        bad += [f"{ka} vs {kb}: {row}" for row in differ.head(3).iter_rows()]
    return checked, bad


def test_every_cell_shared_by_two_hypercubes_has_one_value(workdir, capsys):
    pt.Programme(workdir / "programme.toml").run(out=workdir / "out", quiet=True)
    frames = read_outputs(workdir / "out")
    assert len({k[0] for k in frames}) == 4 and len(frames) == 10
    checked, bad = check_shared(frames)
    with capsys.disabled():
        print(f"\n  shared cells compared across hypercubes: {checked:,}")
    assert not bad, bad[:5]
    # region × sex with its margins (8 regions and the total, 2 sexes and the total) is in
    # HC01, in HC02 (municipalities with their regions) and in HC03 (at the citizenship total)
    for other in (("HC02", "municipality_sex"), ("HC03", "region_citizenship_sex")):
        assert shared_cells(frames["HC01", "region_sex"], frames[other]).height == 9 * 3
    assert checked > 2 * 9 * 3


def test_the_check_finds_a_cell_that_differs(workdir):
    pt.Programme(workdir / "programme.toml").run(out=workdir / "out", quiet=True)
    frames = read_outputs(workdir / "out")
    key = ("HC03", "citizenship_sex")
    total = (pl.col("citizenship_level") == "0") & (pl.col("sex_level") == "0")
    frames[key] = frames[key].with_columns(pl.when(total).then(pl.lit("-1")).otherwise(pl.col("n_pert"))
                                           .alias("n_pert"))
    _, bad = check_shared(frames)
    assert bad and all("HC03" in b for b in bad)


def test_the_hypercubes_read_the_swapped_copy_kept_in_the_database(workdir):
    """The cells are those of the swapped records (kept as persons_swapped once all is written),
    not of the records before swapping."""
    pt.Programme(workdir / "programme.toml").run(out=workdir / "out", quiet=True)
    published = read_outputs(workdir / "out")["HC02", "municipality_sex"]
    p = pt.PTable.maximum_entropy(D=5, V=3, js=2)
    with pt.Session(str(workdir / "demo.duckdb"), read_only=True) as s:
        spec = pt.TableSpec({"municipality": s.hierarchy_from_columns("persons", ["region", "municipality"]),
                             "sex": None})
        swapped = s.cell_key("persons_swapped", spec, p, threshold=3)
        before = s.cell_key("persons", spec, p, threshold=3)

    def as_text(f: pl.DataFrame) -> pl.DataFrame:
        return f.select("municipality", "sex", pl.col("n_pert").cast(pl.String)).sort("municipality", "sex")

    assert as_text(published).equals(as_text(swapped))
    assert not as_text(published).equals(as_text(before))


@pytest.mark.parametrize("level", ["nuts2", "1"])
def test_a_dimension_at_a_coarser_level_equals_the_coarser_table(workdir, level):
    """municipality at geo:nuts2 publishes exactly the region cells (and totals) of a table of
    regions: the same codes and values."""
    text = (workdir / "programme.toml").read_text(encoding="utf-8")
    (workdir / "programme.toml").write_text(text.replace('municipality = "geo:nuts2", citizenship',
                                                         f'municipality = "geo:{level}", citizenship'))
    pt.Programme(workdir / "programme.toml").run(out=workdir / "out", quiet=True)
    hc03 = read_outputs(workdir / "out")["HC03", "region_citizenship_sex"]
    assert set(hc03["municipality_level"]) == {"0", "1"}
    p = pt.PTable.maximum_entropy(D=5, V=3, js=2)
    with pt.Session(str(workdir / "demo.duckdb"), read_only=True) as s:
        regions = s.cell_key("persons_swapped", pt.TableSpec(["region", "citizenship", "sex"]), p, threshold=3)
    want = regions.select(pl.col("region").alias("municipality"), "citizenship", "sex",
                          pl.col("n_pert").cast(pl.String))
    got = hc03.select("municipality", "citizenship", "sex", "n_pert")
    key = ["municipality", "citizenship", "sex"]
    assert got.sort(key).equals(want.sort(key))
