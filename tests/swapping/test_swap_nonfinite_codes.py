"""Record swapping refuses geography codes and household ids that are not codes: NaN, ±inf and
NULL in floating-point columns, with an InputError naming table, column and problem; nothing
is written."""

from __future__ import annotations

import duckdb
import pytest

from protab.errors import InputError
from protab.swapping import SwapSpec, swap

SEED = "not-a-real-secret-0c1d"

# twelve one-person households in 2 regions x 2 squares (codes as DOUBLE / REAL)
POPULATION = """
CREATE TABLE persons AS SELECT i AS hid, CAST(i % 2 AS {t}) AS region, CAST(10 + i % 4 AS {t}) AS square,
    ['a', 'b', 'c'][i % 3 + 1] AS citizenship, 1 AS hsize
FROM range(12) r(i)
"""


def spec() -> SwapSpec:
    return SwapSpec(household="hid", geography=("region", "square"), risk_variables=("citizenship",),
                    similar=[("hsize",)], swap_rate=0.2, k_anonymity=0)


def connect(dtype: str = "DOUBLE") -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(POPULATION.format(t=dtype))
    return con


def tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


@pytest.mark.parametrize("dtype", ["DOUBLE", "REAL"])
@pytest.mark.parametrize(
    ("values", "problem"),
    [
        (["nan", "nan"], r"is NaN in 2 record\(s\) \(nan\)"),
        (["inf", "-inf"], r"is infinite in 2 record\(s\) \(-inf, inf \(2 in all\)\)"),
        (["nan", "inf"], r"is NaN in 1 record\(s\) and infinite in 1 record\(s\)"),
    ],
)
def test_nan_and_infinite_geography_codes_are_refused(dtype, values, problem):
    con = connect(dtype)
    for hid, v in zip((3, 7), values):
        con.execute(f"UPDATE persons SET square = CAST(? AS {dtype}) WHERE hid = ?", [v, hid])
    with pytest.raises(InputError, match=r"geography column 'square' of table 'persons' " + problem) as err:
        swap(con, "persons", spec(), seed=SEED, out="out", log="log")
    assert "finite" in str(err.value) and SEED not in str(err.value)
    assert tables(con) == {"persons"}


def test_nan_household_id_is_refused():
    con = duckdb.connect()
    con.execute(POPULATION.format(t="DOUBLE").replace("i AS hid", "CAST(i AS DOUBLE) AS hid"))
    con.execute("UPDATE persons SET hid = 'nan'::DOUBLE WHERE hid IN (2, 5)")
    with pytest.raises(InputError, match=r"household id column 'hid' of table 'persons' is NaN in 2 record\(s\)"):
        swap(con, "persons", spec(), seed=SEED, out="out", log="log")
    assert tables(con) == {"persons"}


def test_null_float_geography_is_refused_as_missing():
    con = connect()
    con.execute("UPDATE persons SET region = NULL WHERE hid = 4")
    with pytest.raises(InputError, match=r"table 'persons' has missing \(NULL\) values in 'region' \(1 records\)"):
        swap(con, "persons", spec(), seed=SEED, out="out", log="log")
    assert tables(con) == {"persons"}


def test_finite_float_codes_are_swapped():
    con = connect()
    summary = swap(con, "persons", spec(), seed=SEED, out="out", log="log")
    assert summary["swapped_households"] >= 3
    # the codes are only exchanged: the same multiset of (region, square) over the households
    assert sorted(con.execute("SELECT region, square FROM out").fetchall()) == sorted(
        con.execute("SELECT region, square FROM persons").fetchall()
    )
