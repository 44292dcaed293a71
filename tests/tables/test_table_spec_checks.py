"""The checks TableSpec splits out of its argument check (protab.table._sums, _check_crossings)."""

from __future__ import annotations

import pytest

from protab.errors import SpecError
from protab.table import _check_crossings, _sums


def test_sums_take_one_name_or_a_list_and_refuse_a_name_twice():
    assert _sums("x") == ("x",)
    assert _sums(["x", "y"]) == ("x", "y")
    with pytest.raises(SpecError, match="sums names 'x' twice"):
        _sums(["x", "y", "x"])
    with pytest.raises(SpecError, match="sums must be a column name or a list of column names, not dict"):
        _sums({"x": 1})
    with pytest.raises(SpecError, match="sums must be a column name"):
        _sums(["x", 3])


def test_crossings_are_names_or_lists_of_names():
    _check_crossings(["a", ("a", "b"), {"b"}])
    with pytest.raises(SpecError, match="crossings must be a list of crossings"):
        _check_crossings("a")
    with pytest.raises(SpecError, match=r"each crossing must be a column name or a list of column names \(strings\), not 3"):
        _check_crossings([3])
