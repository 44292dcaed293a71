"""Disclosure rules of the query service (issue 28 item 1), each on every front: ``/v1/query``
and ``/v1/table`` over HTTP (the web builder uses ``/v1/table``) and the PostgreSQL front via
psycopg, against the real service (``protab serve --pg-port``) in a subprocess.

The test census (tests/serve_fixtures.py) has 6,000 persons: regions R1 (3,066), R2 (1,744)
and R3 (1,190), municipalities of 279 to 915 persons; here age is a hierarchy (agegroup > age).
The rules below withhold region R3 (below its level's minimum) and so its municipalities.
"""

from __future__ import annotations

import json

import polars as pl
import pytest

import protab as pt

psycopg = pytest.importorskip("psycopg")
httpx = pytest.importorskip("httpx")

import serve_fixtures as F  # noqa: E402

AGES = [[["a0-4", "a5-9", "a10-14", "a15-19"][a // 5], str(a)] for a in range(20)]
RULES = """
[datasets.persons.rules]
max_cells = 100
max_dims = 2
min_population = 700
group_min_difference = 20
blocked = [["sex", "age"]]
[datasets.persons.rules.area]
dim = "municipality"
min_population = { region = 1400, municipality = 200 }
detail = { municipality = { age = "agegroup" } }
"""
R3 = ["R3-0", "R3-1", "R3-2", "R3-3"]


def rules_config(db: str) -> str:
    """The fixture's serve.toml with age as a hierarchy (agegroup > age) and the rules above."""
    text = F.config_text(db)
    codes = {"municipality": F.PERSONS_CODES["municipality"], "sex": F.PERSONS_CODES["sex"], "age": AGES}
    text = text.replace(f"codes = {F._toml_value(F.PERSONS_CODES)}", f"codes = {F._toml_value(codes)}")
    assert "age = [\"agegroup\", \"age\"]" in text and "a15-19\", \"19\"" in text
    return text + RULES


class PgServer(F.Server):
    def __init__(self, config, timeout: float = 60) -> None:
        super().__init__(config, timeout=timeout, pg=True)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rules")
    db = F.build_database(folder / "micro.duckdb")
    config, tokens = F.write_setup(folder, db)
    config.write_text(rules_config(db), encoding="utf-8")
    server = PgServer(config)
    try:
        yield {"server": server, "tokens": tokens, "db": db}
    finally:
        server.stop()


def _post(served, path, body, user="bob"):
    return httpx.post(served["server"].url + path, json=body, timeout=60,
                      headers={"Authorization": f"Bearer {served['tokens'][user]}"})


def _rows(r):
    assert r.status_code == 200, r.text
    body = r.json()
    return pl.DataFrame(body["rows"], schema=body["columns"], orient="row", infer_schema_length=None)


def _pg(served, sql, user="bob"):
    """(rows, notices) of ``sql`` over the PostgreSQL front."""
    s = served["server"]
    dsn = psycopg.conninfo.make_conninfo(host="127.0.0.1", port=s.pg_port, dbname="protab", user=user,
                                         password=served["tokens"][user], connect_timeout=10)
    notes: list[str] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notes.append(d.message_primary))
        rows = conn.execute(sql).fetchall()
    return rows, notes


def _pg_refusal(served, sql) -> str:
    with pytest.raises(psycopg.errors.SyntaxErrorOrAccessRuleViolation) as info:
        _pg(served, sql)
    return str(info.value)


# rule: (sql refused, table request refused, words of the refusal, SQL advice, table advice)
CASES = {
    "max_dims": ("SELECT region, sex, agegroup, count(*) AS n FROM persons GROUP BY region, sex, agegroup",
                 {"dims": ["region", "sex", "agegroup"]},
                 "disclosure rule max_dims of dataset 'persons'", "drop 1 of them", "drop 1 of them"),
    "max_cells": ("SELECT municipality, agegroup, region, age, count(*) AS n FROM persons "
                  "GROUP BY GROUPING SETS ((municipality, agegroup), (region, age))",
                  {"dims": ["age", "agegroup"]},  # 25 x 5 cells (regions by age are 4 x 25: answered)
                  "the service answers at most 100 (the disclosure rule max_cells of dataset 'persons')",
                  "use fewer or coarser dimensions", "use fewer or coarser dimensions"),
    "min_population": ("SELECT sex, count(*) AS n FROM persons WHERE municipality = 'R1-1' GROUP BY sex",
                       {"dims": ["sex"], "filters": {"municipality": "R1-1"}},
                       "refused by the minimum-population rule", "widen or drop a filter condition",
                       "widen or drop a filter condition"),
    "blocked": ("SELECT age, count(*) AS n FROM persons WHERE sex = 'F' GROUP BY age",
                {"dims": ["age"], "filters": {"sex": "F"}},
                "disclosure rule blocked[0] of dataset 'persons': sex × age may not be tabulated together",
                "use agegroup instead of age", "use age at level 'agegroup'"),
    "area.detail": ("SELECT municipality, age, count(*) AS n FROM persons GROUP BY municipality, age",
                    {"dims": ["municipality", "age"]},
                    "disclosure rule area.detail.municipality of dataset 'persons': with municipality (or finer), "
                    "age may be used at level agegroup at most, not age",
                    "use agegroup instead of age, or use region instead of municipality",
                    "use age at level 'agegroup', or use municipality at level 'region'"),
    "area.min_population": ("SELECT sex, count(*) AS n FROM persons WHERE municipality = 'R3-1' GROUP BY sex",
                            {"dims": ["sex"], "filters": {"municipality": "R3-1"}},
                            "disclosure rule area.min_population of dataset 'persons': the filter on municipality "
                            "selects withheld areas only", "filter on an area that answers do not withhold",
                            "filter on an area that answers do not withhold"),
}
# what passes instead (the advice followed), per rule: SQL and table request
PASSING = {
    "max_dims": ("SELECT region, sex, count(*) AS n FROM persons GROUP BY region, sex", {"dims": ["region", "sex"]}),
    "max_cells": ("SELECT municipality, agegroup, count(*) AS n FROM persons GROUP BY municipality, agegroup",
                  {"dims": ["municipality", "agegroup"]}),
    "min_population": ("SELECT sex, count(*) AS n FROM persons WHERE municipality = 'R1-0' GROUP BY sex",
                       {"dims": ["sex"], "filters": {"municipality": "R1-0"}}),
    "blocked": ("SELECT agegroup, count(*) AS n FROM persons WHERE sex = 'F' GROUP BY agegroup",
                {"dims": ["age"], "filters": {"sex": "F"}, "levels": {"age": "agegroup"}}),
    "area.detail": ("SELECT region, age, count(*) AS n FROM persons GROUP BY region, age",
                    {"dims": ["municipality", "agegroup"]}),
    "area.min_population": ("SELECT sex, count(*) AS n FROM persons WHERE municipality = 'R1-2' GROUP BY sex",
                            {"dims": ["sex"], "filters": {"municipality": "R1-2"}}),
}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_each_rule_refuses_over_v1_query(served, rule):
    sql, _, words, advice, _ = CASES[rule]
    r = _post(served, "/v1/query", {"sql": sql})
    assert r.status_code == 400 and words in r.json()["error"] and advice in r.json()["error"], r.text
    assert _post(served, "/v1/query", {"sql": PASSING[rule][0]}).status_code == 200


@pytest.mark.parametrize("rule", sorted(CASES))
def test_each_rule_refuses_over_v1_table(served, rule):
    _, body, words, _, advice = CASES[rule]
    r = _post(served, "/v1/table", {"dataset": "persons", **body})
    assert r.status_code == 400 and words in r.json()["error"] and advice in r.json()["error"], r.text
    ok = _post(served, "/v1/table", {"dataset": "persons", **PASSING[rule][1]})
    assert ok.status_code == 200, ok.text


@pytest.mark.parametrize("rule", ["max_dims", "blocked", "area.detail"])
def test_a_refusal_names_its_rule_and_advice_as_fields(served, rule):
    """The web builder shows ``rule`` and ``advice`` of the JSON error beside the message."""
    _, body, _, _, advice = CASES[rule]
    r = _post(served, "/v1/table", {"dataset": "persons", **body})
    assert r.status_code == 400
    assert r.json()["rule"].startswith(rule) and advice in r.json()["advice"], r.text


@pytest.mark.parametrize("rule", sorted(CASES))
def test_each_rule_refuses_over_the_postgresql_front(served, rule):
    sql, _, words, advice, _ = CASES[rule]
    message = _pg_refusal(served, sql)
    assert words in message and advice in message
    assert _pg(served, PASSING[rule][0])[0]


def test_the_rules_apply_to_every_grouping_set_and_filter(served):
    """A filter is a dimension of every cell: sex = 'F' with age is the blocked sex × age."""
    r = _post(served, "/v1/query", {"sql": "SELECT sex, count(*) AS n FROM persons WHERE age = 3 GROUP BY sex"})
    assert r.status_code == 400 and "blocked[0]" in r.json()["error"]
    sets = "SELECT sex, age, count(*) AS n FROM persons GROUP BY GROUPING SETS ((sex), (age))"
    assert _post(served, "/v1/query", {"sql": sets}).status_code == 200  # sex and age never crossed


# -- areas withheld per area, named in the answer --------------------------------------------------
def test_withheld_areas_over_v1_query(served):
    r = _post(served, "/v1/query", {"sql": "SELECT municipality, count(*) AS n FROM persons GROUP BY municipality"})
    got = _rows(r)
    assert sorted(got["municipality"]) == [f"R{k}-{m}" for k in (1, 2) for m in range(4)]
    assert json.loads(r.headers["Protab-Withheld"]) == {"municipality": R3}
    regions = _post(served, "/v1/query", {"sql": "SELECT region, count(*) AS n FROM persons GROUP BY ROLLUP(region)"})
    assert _rows(regions)["region"].to_list() == ["R1", "R2", None]  # the grand total stays
    assert json.loads(regions.headers["Protab-Withheld"]) == {"region": ["R3"]}
    # the same header in every format
    csv = httpx.post(served["server"].url + "/v1/query?format=csv", timeout=60,
                     json={"sql": "SELECT region, count(*) AS n FROM persons GROUP BY region"},
                     headers={"Authorization": f"Bearer {served['tokens']['bob']}"})
    assert csv.status_code == 200 and "R3" not in csv.text
    assert json.loads(csv.headers["Protab-Withheld"]) == {"region": ["R3"]}
    # LIMIT counts the rows that are published
    top = _rows(_post(served, "/v1/query", {"sql": "SELECT municipality, count(*) AS n FROM persons "
                                                   "GROUP BY municipality ORDER BY n LIMIT 3"}))
    assert top.height == 3 and not set(top["municipality"]) & set(R3)
    # no area withheld: no header
    plain = _post(served, "/v1/query", {"sql": "SELECT sex, count(*) AS n FROM persons GROUP BY sex"})
    assert plain.status_code == 200 and "Protab-Withheld" not in plain.headers


def test_withheld_areas_over_v1_table(served):
    r = _post(served, "/v1/table", {"dataset": "persons", "dims": ["municipality", "sex"]})
    got = _rows(r)
    assert not set(got["municipality"]) & {"R3", *R3}
    assert set(got.filter(pl.col("municipality_level") == 2)["municipality"]) == {
        f"R{k}-{m}" for k in (1, 2) for m in range(4)}
    assert got.filter(pl.col("municipality_level") == 0).height == 3  # the totals (by sex and overall)
    assert json.loads(r.headers["Protab-Withheld"]) == {"region": ["R3"], "municipality": R3}
    # a level chosen: only that level's withheld areas are named
    by_region = _post(served, "/v1/table", {"dataset": "persons", "dims": ["municipality"],
                                            "levels": {"municipality": "region"}})
    assert sorted(_rows(by_region)["municipality"]) == ["R1", "R2", "Total"]
    assert json.loads(by_region.headers["Protab-Withheld"]) == {"region": ["R3"]}
    # erin has municipality without region: served flat, the same municipalities withheld
    erin = _post(served, "/v1/table", {"dataset": "persons", "dims": ["municipality"]}, user="erin")
    assert sorted(_rows(erin)["municipality"]) == sorted([f"R{k}-{m}" for k in (1, 2) for m in range(4)] + ["Total"])
    assert json.loads(erin.headers["Protab-Withheld"]) == {"municipality": R3}


def test_withheld_areas_over_the_postgresql_front(served):
    sql = "SELECT municipality, count(*) AS n FROM persons GROUP BY municipality ORDER BY municipality"
    rows, notes = _pg(served, sql)
    assert [r[0] for r in rows] == [f"R{k}-{m}" for k in (1, 2) for m in range(4)]
    assert len(notes) == 1 and "area.min_population" in notes[0] and "municipality R3-0, R3-1, R3-2, R3-3" in notes[0]
    assert rows == [tuple(r) for r in _post(served, "/v1/query", {"sql": sql}).json()["rows"]]
    assert _pg(served, "SELECT sex, count(*) AS n FROM persons GROUP BY sex")[1] == []


def test_published_cells_keep_their_values(served):
    """Withholding removes rows; the others are the cells of the same table without the rule."""
    table = _rows(_post(served, "/v1/table", {"dataset": "persons", "dims": ["municipality", "sex"]}))
    with pt.Session(served["db"], read_only=True) as s:
        h = s.hierarchy_from_columns("persons", ["region", "municipality"])
        want = s.cell_key("persons", pt.TableSpec({"municipality": h, "sex": ["F", "M"]}),
                          pt.PTable.maximum_entropy(**F.PTABLE), threshold=F.THRESHOLD)
    joined = table.join(want, on=["municipality", "sex"], suffix="_all")
    assert joined.height == table.height and (joined["n_pert"] == joined["n_pert_all"]).all()
    assert want.filter(pl.col("municipality").is_in(["R3", *R3])).height == 15  # there, and withheld here


def test_refusals_leak_no_threshold_or_count(served):
    """Thresholds are secrets and verdicts use perturbed values: no refusal shows either."""
    with pt.Session(served["db"], read_only=True) as s:
        exact = {str(n) for (n,) in s.sql("SELECT count(*) AS n FROM persons GROUP BY municipality").rows()}
    texts = [_post(served, "/v1/query", {"sql": c[0]}).text for c in CASES.values()]
    texts += [_post(served, "/v1/table", {"dataset": "persons", **c[1]}).text for c in CASES.values()]
    for text in texts:
        for secret in ("700", "1400", "200", *exact):
            assert secret not in text.replace("R1-", "").replace("R2-", "").replace("R3-", "")


# -- custom groups follow the rules (issue 28 item 2) -------------------------------------------------
def test_custom_groups_follow_the_rules(served):
    """A group of municipalities counts as municipality at its finest level (area.detail), and a
    group may not hold a withheld area (it would publish it)."""
    north = {"municipality": {"north": ["R1-0", "R1-1"]}}
    detail = _post(served, "/v1/table", {"dataset": "persons", "dims": ["municipality", "age"], "groups": north})
    assert detail.status_code == 400 and "area.detail.municipality" in detail.json()["error"]
    ok = _post(served, "/v1/table", {"dataset": "persons", "dims": ["municipality", "agegroup"], "groups": north})
    assert ok.status_code == 200 and "Protab-Withheld" not in ok.headers
    assert sorted(set(_rows(ok)["municipality"])) == ["Total", "north"]
    east = _post(served, "/v1/table", {"dataset": "persons", "dims": ["municipality"],
                                       "groups": {"municipality": {"east": ["R2-1", "R3-0"]}}})
    assert east.status_code == 400 and "area.min_population" in east.json()["error"] and "R3-0" in east.json()["error"]
    blocked = _post(served, "/v1/table", {"dataset": "persons", "dims": ["age", "sex"],
                                          "groups": {"age": {"young": ["0", "1", "2"]}}})
    assert blocked.status_code == 400 and "blocked[0]" in blocked.json()["error"]
