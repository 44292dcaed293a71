"""The validator counts the grouping sets of a GROUP BY on the syntax tree (CUBE of k elements
2^k, ROLLUP k + 1, GROUPING SETS the sum, the items of GROUP BY multiplied) and refuses a GROUP
BY past its limit before expanding anything, with a message that says the count and the limit:
a short query of many CUBEs cannot keep the service busy."""

from __future__ import annotations

import pytest

from protab.serve import DatasetRights, QueryRefused, select_checker, validator

COLUMNS = [f"c{k:02d}" for k in range(12)]
CATALOG = {"t": DatasetRights(dims=frozenset(COLUMNS), measures=frozenset())}
CUBE = "CUBE(" + ", ".join(COLUMNS) + ")"
SELECT = f"SELECT {', '.join(COLUMNS)}, count(*) FROM t GROUP BY "


@pytest.fixture
def no_expansion(monkeypatch):
    """Expanding a GROUP BY item into its grouping sets fails the test."""

    def expand(self, node):
        raise AssertionError(f"grouping sets of {type(node).__name__} expanded")

    monkeypatch.setattr(select_checker.SelectChecker, "group_item", expand)


@pytest.mark.parametrize(("group", "count"), [
    (f"GROUPING SETS ({', '.join([CUBE] * 100)})", "409,600"),  # 100 x 2^12
    (", ".join([CUBE] * 4), "more than 1,000,000,000,000"),  # (2^12)^4 = 2^48: said capped
    (", ".join(["ROLLUP(c00, c01, c02)"] * 7), "16,384"),  # 4^7
    (f"CUBE(c00, c01), GROUPING SETS ((c02), {', '.join(['ROLLUP(c03, c04, c05, c06)'] * 300)})", "6,004"),
])
def test_too_many_grouping_sets_are_refused_before_expanding(no_expansion, group, count):
    sql = SELECT + group
    with pytest.raises(QueryRefused) as info:
        validator.validate(sql, CATALOG, max_length=100_000)
    message = str(info.value)
    assert "grouping sets" in message and count in message
    assert f"at most {validator.MAX_GROUPING_SETS} are accepted" in message


def test_a_product_of_cubes_past_any_integer_limit_gets_a_message():
    """(2^12)^400 grouping sets, a number of 1445 digits: counted up to a cap and said as "more
    than" it, so that no count grows without bound with the length of the query."""
    sql = SELECT + ", ".join([CUBE] * 400)
    with pytest.raises(QueryRefused, match="more than 1,000,000,000,000 grouping sets"):
        validator.validate(sql, CATALOG, max_length=200_000)


def test_grouping_sets_within_the_limit_are_still_expanded():
    q = validator.validate(SELECT + CUBE, CATALOG)
    assert len(q.grouping_sets) == 2**12
    q = validator.validate("SELECT c00, c01, count(*) FROM t GROUP BY GROUPING SETS (ROLLUP(c00, c01), CUBE(c01))",
                           CATALOG)
    assert set(q.grouping_sets) == {("c00", "c01"), ("c00",), ("c01",), ()}
