"""Linked tables whose common cells disagree (tabulated from different records by different
``where`` filters) are refused with an InputError naming both tables and the cell; equal
filters are kept for the combined table."""

from __future__ import annotations

import polars as pl
import pytest

import protab as pt


def _data() -> pl.DataFrame:
    return pl.DataFrame({"region": ["N", "N", "S", "S", "S", "N", "S", "N"],
                         "sector": ["a", "b", "a", "b", "b", "a", "a", "b"],
                         "year": ["1", "1", "1", "2", "2", "2", "2", "1"]})


@pytest.mark.parametrize("mode", ["global", "local", "consistent", "super-consistent"])
def test_common_cells_with_different_values_name_both_tables_and_the_cell(mode):
    specs = [pt.TableSpec(["region", "sector"], where=[("year", "in", ["1"])]),
             pt.TableSpec(["region", "year"])]
    with pt.Session(":memory:") as s:
        s.register("t", _data())
        with pytest.raises(pt.InputError) as err:
            s.suppress("t", specs, min_frequency=2, singleton_method="none", linked=mode)
    msg = str(err.value)
    assert "table 1 (region x sector)" in msg and "table 2 (region x year)" in msg
    # region N: 3 records in year 1 (table 1), 4 in all years (table 2); the first differing cell
    assert "region=" in msg and "common cell" in msg


def test_equal_where_filters_are_the_combined_tables_filter():
    """Both tables over year 1 only: their cells count the year-1 records (4), not all (8)."""
    where = [("year", "in", ["1"])]
    specs = [pt.TableSpec(["region"], where=where), pt.TableSpec(["region", "sector"], where=where)]
    with pt.Session(":memory:") as s:
        s.register("t", _data())
        one, two = s.suppress("t", specs, min_frequency=1, linked="local")
    assert one.filter(pl.col("region") == "Total")["n"].item() == 4
    assert two.filter((pl.col("region") == "N") & (pl.col("sector") == "Total"))["n"].item() == 3
