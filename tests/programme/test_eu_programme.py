"""The EU-style census example (examples/census_programme/eu_population.py and eu_programme.toml):
the generator yields the declared variables with codes inside the declared classifications and
a settlement pattern (a few dense 1 km squares, many sparse ones); the programme has at least 32
hypercubes and 100 tables; it runs end to end on a small population, and every cell two of its
hypercubes share has one value."""

from __future__ import annotations

import re
import runpy
import shutil
from pathlib import Path
from types import SimpleNamespace

import duckdb
import polars as pl
import pytest
from conftest import ROOT, read_outputs

import protab as pt

EXAMPLE = ROOT / "examples" / "census_programme"
PERSONS = 12_000


def _generator() -> SimpleNamespace:
    """The example's generator (examples/ is not a package): its functions and code lists."""
    return SimpleNamespace(**runpy.run_path(str(EXAMPLE / "eu_population.py")))


gen = _generator()


@pytest.fixture(scope="module")
def persons() -> pl.DataFrame:
    con = duckdb.connect()
    n = gen.generate(con, PERSONS, "test-seed")
    frame = pl.from_arrow(con.sql("SELECT * FROM persons").to_arrow_table())
    con.close()
    assert isinstance(frame, pl.DataFrame) and frame.height == n
    return frame


def test_the_generator_yields_the_declared_variables_and_codes(persons):
    assert abs(persons.height - PERSONS) < 0.05 * PERSONS
    prog = pt.Programme(EXAMPLE / "eu_programme.toml")
    declared = prog.cfg["classifications"]
    for name, c in declared.items():
        if "codes" in c:
            found = set(persons[name].unique())
            assert found <= set(c["codes"]), (name, found - set(c["codes"]))
            assert len(found) >= 2, name
    for grp, fine in (("pob1", "pob"), ("cit1", "cit"), ("cas1", "cas")):
        assert set(persons[fine].unique()) <= set(gen.CODES[fine]) and set(persons[grp].unique()) <= set(gen.CODES[grp])
    origin = persons.select(pl.col("pob").replace_strict(gen.ORIGIN_GROUP).alias("g"), "pob1")
    assert (origin["g"] == origin["pob1"]).all()
    # nested geography: NUTS 1 > 2 > 3 > municipality, by prefix
    for coarse, fine in (("nuts1", "nuts2"), ("nuts2", "nuts3"), ("nuts3", "lau")):
        assert persons.select(pl.col(fine).str.starts_with(pl.col(coarse)).all()).item(), fine
    assert persons["lau"].n_unique() > 300 and persons["nuts3"].n_unique() == 48
    assert persons["grid1km"].str.contains(r"^1kmN\d{4}E\d{4}$").all()
    # age: single years nested in five-year groups and three groups
    age = persons["age"].str.slice(1).cast(pl.Int32)
    assert age.min() == 0 and 95 <= age.max() <= 100
    assert ((age < 15) == (persons["age3"] == "Y_LT15")).all()
    assert (persons["age5"] == pl.Series([f"Y{a // 5 * 5}-{a // 5 * 5 + 4}" if a < 100 else "Y_GE100"
                                          for a in range(101)])[age]).all()
    # occupation and industry for the employed only; education from 15
    employed = persons["cas"] == "EMP"
    assert ((persons["occ"] != "NAP") == employed).all() and ((persons["ind"] != "NAP") == employed).all()
    assert ((persons["edu"] == "NAP") == (age < 15)).all()
    assert ((persons["yae"] == "NAP") == (persons["pob"] == "RC")).all()
    # households: one size and tenure per household, size matching its members
    hh = persons.group_by("hid").agg(pl.len().alias("members"), pl.col("hsize").n_unique().alias("sizes"),
                                     pl.col("hsize").first())
    assert (hh["sizes"] == 1).all()
    small = hh.filter(pl.col("hsize").is_in(["HS1", "HS2", "HS3", "HS4", "HS5"]))
    assert (small["hsize"].str.slice(2).cast(pl.Int64) == small["members"]).all()


def test_the_settlement_pattern_has_dense_and_sparse_squares(persons):
    per_square = persons.group_by("grid1km").len()["len"]
    assert per_square.max() >= 50 * per_square.median()        # city centres
    assert (per_square <= 3).mean() > 0.4                       # and many squares with a few persons


def test_the_generator_is_deterministic_from_its_seed():
    def digest(seed: str) -> tuple:
        con = duckdb.connect()
        gen.generate(con, 2000, seed)
        row = con.sql("SELECT count(*), sum(hash(COLUMNS(*))) FROM persons").fetchall()[0]
        con.close()
        return row

    assert digest("a") == digest("a")
    assert digest("a") != digest("b")


def test_the_eu_programme_has_32_hypercubes_and_100_tables():
    prog = pt.Programme(EXAMPLE / "eu_programme.toml")
    assert len(prog.cubes) >= 32
    assert sum(len(c.tables) for c in prog.cubes) >= 100
    grid = next(c for c in prog.cubes if c.name == "GRID")
    assert {d.variable for d in grid.dims} == {"grid1km", "sex", "age", "cas", "pob", "cit", "roy"}
    header = (EXAMPLE / "eu_programme.toml").read_text(encoding="utf-8").split("\n", 2)[:2]
    said = re.search(r"(\d+) hypercubes and\n# (\d+) tables", "\n".join(header))
    assert said and (int(said[1]), int(said[2])) == (len(prog.cubes), sum(len(c.tables) for c in prog.cubes))


def _cells(frames: dict[tuple[str, str], pl.DataFrame]) -> pl.DataFrame:
    """Every published cell with its hypercube, table, value and identity: the codes of the
    variables not at their total ("var=code", sorted by variable). Two tables share a cell
    when they publish the same identity (common variables equal, the others at their total)."""
    parts = []
    for (cube, table), f in frames.items():
        variables = sorted(c[: -len("_level")] for c in f.columns if c.endswith("_level"))
        parts.append(f.select(
            pl.lit(cube).alias("cube"), pl.lit(table).alias("table"), pl.col("n_pert"),
            pl.concat_str([pl.when(pl.col(f"{v}_level") != "0").then(pl.lit(f"{v}=") + pl.col(v))
                           for v in variables], separator="|", ignore_nulls=True).alias("cell")))
    return pl.concat(parts)


def _check(frames: dict[tuple[str, str], pl.DataFrame]) -> tuple[int, list[str]]:
    """(cells published by two or more hypercubes, those of them with more than one value)."""
    cells = _cells(frames).group_by("cell").agg(pl.col("cube").n_unique().alias("cubes"),
                                                pl.col("n_pert").n_unique().alias("values"),
                                                pl.concat_str("cube", "table", separator=".").unique().alias("where"))
    shared = cells.filter(pl.col("cubes") > 1)
    bad = shared.filter(pl.col("values") > 1)
    return shared.height, [f"{r['cell']}: {sorted(r['where'])}" for r in bad.head(5).iter_rows(named=True)]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[tuple[str, str], pl.DataFrame]:
    folder = tmp_path_factory.mktemp("eu_programme")
    with pt.Session(str(folder / "eu_census.duckdb"), progress=False) as s:
        gen.generate(s.con, PERSONS, "test-seed")
        s.add_record_keys("persons", id_column="pid", seed="test-keys")
    shutil.copy(EXAMPLE / "eu_programme.toml", folder / "eu_programme.toml")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SWAP_SEED", "test-swap-seed")
        mp.setenv("PROTAB_PROGRESS", "0")
        summary = pt.Programme(folder / "eu_programme.toml").run(out=folder / "out", quiet=True)
    assert summary.height >= 32 and (summary["cells"] > 0).all()
    return read_outputs(folder / "out")


def test_the_eu_programme_runs_and_shared_cells_have_one_value(outputs, capsys):
    assert len(outputs) >= 100
    grid = outputs["GRID", "activity"]
    assert set(grid["cas_level"]) <= {"0", "1", "2", "3"} and "EMP" in set(grid["cas"])
    checked, bad = _check(outputs)
    with capsys.disabled():
        print(f"\n  EU programme: shared cells compared across hypercubes: {checked:,}")
    assert not bad, bad[:5]
    assert checked > 1_000


def test_the_shared_cell_check_finds_one_changed_cell(outputs):
    frames = dict(outputs)
    key = ("HC35", "sex_age_cas")      # the national total by sex is in most hypercubes
    t = frames[key]
    total_f = (pl.col("sex") == "F") & (pl.col("age_level") == "0") & (pl.col("cas_level") == "0")
    assert t.filter(total_f).height == 1
    frames[key] = t.with_columns(pl.when(total_f).then(pl.lit("-1")).otherwise(pl.col("n_pert")).alias("n_pert"))
    _, bad = _check(frames)
    assert len(bad) == 1 and bad[0].startswith("sex=F:") and "HC35.sex_age_cas" in bad[0]


def test_a_hypercube_reads_the_records_once_and_coarse_levels_from_their_columns(workdir, monkeypatch):
    """The tables of the example's HC01 (age at 5-year groups) and HC02 read key sums of the
    records made once per hypercube, not the records three times; HC01 reads the agegroup column
    for age, and its margin tables are cut from its full table. The cells are those of tables
    computed one by one from the records."""
    calls = []
    cell_key = pt.Session.cell_key

    def spy(self, table, spec, *args, **kwargs):
        calls.append((table, list(spec.dims)))
        return cell_key(self, table, spec, *args, **kwargs)

    text = (workdir / "programme.toml").read_text(encoding="utf-8")
    (workdir / "programme.toml").write_text(text[: text.index('[[hypercubes]]\nname = "HC03"')], encoding="utf-8")
    monkeypatch.setattr(pt.Session, "cell_key", spy)
    pt.Programme(workdir / "programme.toml").run(out=workdir / "out", quiet=True)
    monkeypatch.setattr(pt.Session, "cell_key", cell_key)
    # HC01's region x sex and region x age are cut from its full table: one read of the records;
    # HC02's three tables read one relation of key sums made from the records once
    assert calls[0] == ("persons_swapped", ["region", "agegroup", "sex"])
    assert len(calls) == 4 and len({table for table, _ in calls[1:]}) == 1
    assert calls[1][0] not in ("persons", "persons_swapped")
    out = read_outputs(workdir / "out")
    p = pt.PTable.maximum_entropy(D=5, V=3, js=2)
    with pt.Session(str(workdir / "demo.duckdb"), read_only=True) as s:
        age = s.hierarchy_from_columns("persons_swapped", ["agegroup", "age"])
        geo = s.hierarchy_from_columns("persons_swapped", ["region", "municipality"])
        full = s.cell_key("persons_swapped", pt.TableSpec({"municipality": geo, "age": age, "sex": None}), p,
                          threshold=3)
        region_sex = s.cell_key("persons_swapped", pt.TableSpec({"municipality": geo, "sex": None}), p, threshold=3)
    cols = ["municipality", "age", "sex"]
    want = full.filter((pl.col("municipality_level") <= 1) & (pl.col("age_level") <= 1))
    assert out["HC01", "region_age_sex"].select(*cols, "n_pert").equals(
        want.select(*cols, pl.col("n_pert").cast(pl.String)))
    want = region_sex.filter(pl.col("municipality_level") <= 1)
    assert out["HC01", "region_sex"].select("municipality", "sex", "n_pert").equals(
        want.select("municipality", "sex", pl.col("n_pert").cast(pl.String)))


def test_the_example_classifications_match_the_generator():
    prog = pt.Programme(EXAMPLE / "eu_programme.toml")
    for name, c in prog.cfg["classifications"].items():
        if "codes" in c:
            assert c["codes"] == gen.CODES[name], name
    assert Path(EXAMPLE / "programme.toml").is_file()
