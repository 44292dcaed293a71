"""TableSpec(where=...): tables of a subset of the records, with the same cell keys."""

import duckdb
import polars as pl
import pytest

import protab as pt
from protab.errors import InputError, SpecError


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("where") / "w.duckdb")
    with pt.Session(path) as s:
        s.con.execute(
            "CREATE TABLE p AS SELECT i AS id, ['N', 'S', 'E'][i % 3 + 1] AS region, "
            "['1', '2'][i % 2 + 1] AS sex, i % 7 AS age, CASE WHEN i % 11 = 0 THEN NULL ELSE 'x' END AS flag "
            "FROM range(3000) t(i)"
        )
        s.add_record_keys("p", id_column="id", seed="where-test")
    return path


P = pt.PTable.maximum_entropy(D=3, V=1)


def test_filtered_cells_are_the_cells_of_the_full_table(db):
    with pt.Session(db, read_only=True) as s:
        full = s.cell_key("p", pt.TableSpec({"region": None, "sex": None}), P, original=True)
        part = s.cell_key("p", pt.TableSpec({"sex": None}, where=[("region", "in", ["N"])]), P, original=True)
        expect = full.filter(pl.col("region") == "N").select("sex", "n", "n_pert").sort("sex")
        assert part.select("sex", "n", "n_pert").sort("sex").equals(expect)
        assert s.tables() == ["p"]  # the filtered view is gone


def test_counts_equal_sql_filter_with_null_semantics(db):
    spec = pt.TableSpec(
        {"sex": None},
        where=[("age", "not in", [3, "4"]), ("region", "in", ["N", "S"]), ("flag", "in", ["x"])],
    )
    with pt.Session(db, read_only=True) as s:
        got = s.tabulate("p", spec).filter(pl.col("sex_level") == 1).select("sex", "n").sort("sex")
        want = s.sql(
            "SELECT sex, count(*) AS n FROM p WHERE age NOT IN (3, 4) AND region IN ('N', 'S') "
            "AND flag IN ('x') GROUP BY sex ORDER BY sex"
        )
        assert got.equals(want)
        # a NULL value passes neither 'in' nor 'not in'
        nin = s.tabulate("p", pt.TableSpec({"sex": None}, where=[("flag", "not in", ["y"])]))
        assert nin.filter(pl.col("sex_level") == 0)["n"][0] == 3000 - 273


@pytest.mark.parametrize(
    "where, match",
    [
        ("region", "where must be"),
        ([("region", "=", ["N"])], "'in' or 'not in'"),
        ([("region", "in", [])], "non-empty list"),
        ([("region", "in", "N")], "non-empty list"),
        ([("region", "in", [None])], "strings or whole numbers"),
        ([("region", "in", [1.5])], "strings or whole numbers"),
        ([("region", "in")], "where must be"),
    ],
)
def test_bad_where(where, match):
    with pytest.raises(SpecError, match=match):
        pt.TableSpec({"sex": None}, where=where)


def test_unknown_where_column_names_it(db):
    with pt.Session(db, read_only=True) as s, pytest.raises(InputError, match="nope"):
        s.tabulate("p", pt.TableSpec({"sex": None}, where=[("nope", "in", ["1"])]))


def test_quotes_in_values_are_values(db):
    with pt.Session(db, read_only=True) as s, pytest.raises(InputError, match="no records that pass the where"):
        s.tabulate("p", pt.TableSpec({"sex": None}, where=[("region", "in", ["N' OR 1=1 --"])]))
    with duckdb.connect(db, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM p").fetchall()[0][0] == 3000
