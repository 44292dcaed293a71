"""The cells a request is estimated at before any scan (what ``max_cells`` and ``job_cells``
judge) are the cells its answer holds: a table shown at a chosen level counts that level's
codes, a dimension filtered to 3 codes counts 3, custom groups count as groups, for
``/v1/table`` and ``/v1/query`` alike. A property test over random requests on the small test
census (no area is withheld there, so the estimate is exact; LIMIT only cuts the answer), and
the examples of the review: a request that fits once its levels and filters are counted is
answered, not refused."""

from __future__ import annotations

import pytest
import serve_fixtures as F
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

DIMS = ["municipality", "region", "sex", "agegroup", "age"]
CODES = {"municipality": [c for _, c in F.PERSONS_CODES["municipality"]] + ["R1"],  # R1: not a finest code
         "region": ["R1", "R2", "R3"], "sex": F.PERSONS_CODES["sex"], "agegroup": F.AGEGROUP_CODES,
         "age": F.AGE_CODES}
BANDS = {"young": ["a0-4", "a5-9"], "older": ["a10-14", "a15-19"]}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from protab.serve.broker import Broker
    from protab.serve.config import load_config

    folder = tmp_path_factory.mktemp("estimate")
    db = F.build_database(folder / "micro.duckdb", persons=800)
    config, _ = F.write_setup(folder, db, min_population=1, max_cells=100_000, sessions=1)
    cfg = load_config(config)
    b = Broker(cfg)
    seen: list[int] = []
    judge = b._check_cells

    def record(cells, job_cells=None, ds=None):  # the estimate every caller hands to the max_cells check
        seen.append(cells)
        return judge(cells, job_cells, ds)

    b._check_cells = record
    try:
        yield b, cfg.users["bob"], seen
    finally:
        b.close()


def _estimated(broker, ask):
    b, bob, seen = broker
    seen.clear()
    answer = ask(b, bob)
    assert seen and len(set(seen)) == 1, seen
    return seen[0], answer.cells


@st.composite
def table_requests(draw):
    dims = draw(st.lists(st.sampled_from(DIMS), min_size=1, max_size=3, unique=True))
    req = {"dataset": "persons", "dims": dims}
    if "municipality" in dims and draw(st.booleans()):
        req["levels"] = {"municipality": draw(st.sampled_from(["region", 1, "municipality"]))}
    filters = {}
    for d in dims:
        if d not in req.get("levels", {}) and draw(st.integers(0, 2)) == 0:
            filters[d] = draw(st.lists(st.sampled_from(CODES[d]), min_size=2, max_size=4, unique=True))
    for d in DIMS:
        if d not in dims and draw(st.integers(0, 3)) == 0:
            filters[d] = draw(st.sampled_from(CODES[d][:-1] if d == "municipality" else CODES[d]))
    if filters:
        req["filters"] = filters
    if len(dims) >= 2 and draw(st.booleans()):
        a, b, *rest = dims
        req["formula"] = f"{a}*{b}" + "".join(f" + {r}" for r in rest) if draw(st.booleans()) else " + ".join(dims)
    free = [d for d in dims if d == "agegroup" and d not in filters]
    if free and draw(st.booleans()):
        req["groups"] = {"agegroup": BANDS}
    return req


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(req=table_requests())
def test_a_table_requests_estimate_is_the_cells_of_its_answer(broker, req):
    from protab.serve.query import QueryRefused

    try:
        estimate, cells = _estimated(broker, lambda b, bob: b.table(req, bob))
    except QueryRefused as exc:  # nobody selected, or groups too close: nothing to compare
        assert exc.rule in ("min_population", "groups.min_difference"), exc
        event(f"refused by {exc.rule}")
        return
    event("answered")
    assert estimate >= cells  # never below: max_cells and job_cells judge no smaller request
    assert estimate == cells  # and not above: no withheld area here, so it is exact


@st.composite
def queries(draw):
    dims = draw(st.lists(st.sampled_from(DIMS), min_size=0, max_size=3, unique=True))
    names = ", ".join(dims)
    kind = draw(st.sampled_from(["plain", "ROLLUP", "CUBE", "SETS"])) if dims else "none"
    if kind == "plain":
        group = f" GROUP BY {names}"
    elif kind in ("ROLLUP", "CUBE"):
        group = f" GROUP BY {kind}({names})"
    elif kind == "SETS":
        sets = draw(st.lists(st.lists(st.sampled_from(dims), unique=True), min_size=1, max_size=3))
        missing = [d for d in dims if all(d not in s for s in sets)]
        if missing:  # every selected dimension is grouped in some set
            sets.append(missing)
        group = " GROUP BY GROUPING SETS (" + ", ".join("(" + ", ".join(s) + ")" for s in sets) + ")"
    else:
        group = ""
    where = []
    for d in dims:  # several values only on a dimension grouped in every set (plain GROUP BY)
        if kind == "plain" and draw(st.integers(0, 2)) == 0:
            values = draw(st.lists(st.sampled_from(CODES[d]), min_size=2, max_size=4, unique=True))
            op = draw(st.sampled_from(["IN", "NOT IN"]))
            where.append(f"{d} {op} (" + ", ".join(f"'{v}'" for v in values) + ")")
    for d in DIMS:
        if d not in dims and draw(st.integers(0, 3)) == 0:
            where.append(f"{d} = '{draw(st.sampled_from(CODES[d][:-1] if d == 'municipality' else CODES[d]))}'")
    limit = draw(st.sampled_from(["", " LIMIT 5"]))
    sql = (f"SELECT {names + ', ' if dims else ''}count(*) AS n FROM persons"
           + (" WHERE " + " AND ".join(where) if where else "") + group + limit)
    return sql, bool(limit)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=queries())
def test_a_querys_estimate_is_the_cells_of_its_answer(broker, case):
    from protab.serve.query import QueryRefused

    sql, limited = case
    try:
        estimate, cells = _estimated(broker, lambda b, bob: b.query(sql, bob))
    except QueryRefused as exc:  # filters that select nobody: the minimum-population rule
        assert exc.rule == "min_population"
        event("refused by min_population")
        return
    event("answered")
    assert estimate >= cells
    if not limited:
        assert estimate == cells


def test_a_table_at_a_chosen_level_counts_that_levels_codes(broker):
    b, bob, _ = broker
    req = {"dataset": "persons", "dims": ["municipality", "sex"], "levels": {"municipality": "region"}}
    plan = b.plan_table(req, bob)
    assert plan.cells == (3 + 1) * (2 + 1)  # regions and their total, by sex and its total (not 12 municipalities)


def test_a_dimension_filtered_to_three_codes_counts_three_and_shows_them(broker):
    b, bob, _ = broker
    three = ["R1-0", "R1-1", "R2-3"]
    req = {"dataset": "persons", "dims": ["municipality", "sex"], "filters": {"municipality": three}}
    answer = b.table(req, bob)
    assert b.plan_table(req, bob).cells == 3 * (2 + 1) == answer.cells
    assert sorted(set(answer.frame["municipality"].to_list())) == three
    sql = "SELECT municipality, sex, count(*) AS n FROM persons WHERE municipality IN ('R1-0', 'R1-1', 'R2-3') " \
          "GROUP BY municipality, sex"
    assert _estimated(broker, lambda b, bob: b.query(sql, bob)) == (6, 6)


def test_a_request_that_fits_once_its_levels_are_counted_is_answered(tmp_path):
    """max_cells 20: municipalities (12) by sex at level region are 12 cells and are answered;
    counted at the finest level (48 cells with margins) the request was refused."""
    from protab.serve.broker import Broker
    from protab.serve.config import load_config

    db = F.build_database(tmp_path / "micro.duckdb", persons=300)
    config, _ = F.write_setup(tmp_path, db, min_population=1, max_cells=20, sessions=1)
    cfg = load_config(config)
    b = Broker(cfg)
    try:
        req = {"dataset": "persons", "dims": ["municipality", "sex"], "levels": {"municipality": "region"}}
        assert b.table(req, cfg.users["bob"]).cells == 12
        from protab.serve.query import QueryRefused

        with pytest.raises(QueryRefused) as info:
            b.table({"dataset": "persons", "dims": ["municipality", "sex"]}, cfg.users["bob"])
        assert info.value.rule == "max_cells"
    finally:
        b.close()
