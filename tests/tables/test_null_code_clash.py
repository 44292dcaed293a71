"""TableSpec(null_code=...) on a column that holds that code and NULLs as well would merge the
missing records into the code's cell: refused with an error naming the table, the column and
the code (the check rides on the inner cells of the one scan)."""

from __future__ import annotations

import polars as pl
import pytest

import protab as pt
from protab.errors import SpecError

FRAME = pl.DataFrame({
    "sex": ["F", "M", None, "F", "M"],
    "region": ["x", "y", "y", "x", "x"],
    "age": [1.0, 2.0, float("nan"), None, 2.0],
    "year": [2020, 2021, 2021, 2020, 2020],
})


def _tabulate(spec: pt.TableSpec) -> pl.DataFrame:
    with pt.Session(":memory:") as s:
        s.register("people", FRAME)
        return s.tabulate("people", spec)


@pytest.mark.parametrize("dims", [{"sex": None, "region": None}, {"region": None, "sex": None}, {"sex": None}])
def test_code_and_nulls_in_one_column_are_refused(dims):
    # the NULL record is in cell (y), the F records in cell (x): another inner cell
    with pytest.raises(SpecError) as exc:
        _tabulate(pt.TableSpec(dims, null_code="F"))
    msg = str(exc.value)
    assert "null_code 'F' is also a code of column 'sex' of table 'people'" in msg
    assert "missing (NULL) values too" in msg and "choose a null_code the column does not hold" in msg


def test_float_column_with_nan_and_the_code():
    with pytest.raises(SpecError, match="null_code '2.0' is also a code of column 'age'"):
        _tabulate(pt.TableSpec({"age": None}, null_code="2.0"))


def test_same_cell_clash_is_refused():
    with pytest.raises(SpecError, match="column 'sex'"):
        _tabulate(pt.TableSpec({"sex": None, "year": None}, null_code="M", where=[("region", "in", ["y"])]))


def test_no_clash_publishes_as_before():
    out = _tabulate(pt.TableSpec({"sex": None}, null_code="Unknown"))
    assert dict(zip(out["sex"], out["n"])) == {"Total": 5, "F": 2, "M": 2, "Unknown": 1}
    # the code occurs but nothing is missing in this column: nothing merges
    out = _tabulate(pt.TableSpec({"region": None}, null_code="x"))
    assert dict(zip(out["region"], out["n"])) == {"Total": 5, "x": 3, "y": 2}
    # the NULL record is filtered out: no clash among the records the table reads
    out = _tabulate(pt.TableSpec({"sex": None}, null_code="F", where=[("region", "in", ["x"])]))
    assert dict(zip(out["sex"], out["n"])) == {"Total": 3, "F": 2, "M": 1}
