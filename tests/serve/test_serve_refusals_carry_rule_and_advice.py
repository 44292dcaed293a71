"""Every refusal of the service names the rule or check that refused it and what would pass:
its JSON is ``{"error", "rule", "advice"}`` whatever refused it (max_cells, min_population, the
disclosure rules, the allowed SQL form, the table-request check, custom groups, rights, tokens,
jobs and saved limits, routes), and over the PostgreSQL front the rule is the ErrorResponse's
DETAIL (``rule: <name>``) and the advice its HINT.

The app in-process (Starlette's test client) over the test census (tests/serve_fixtures.py):
exactly one person is 19 years old; alice may not use ``age``."""

from __future__ import annotations

import json
import threading

import pytest

pytest.importorskip("starlette")

import serve_fixtures as F

RULES = """
[datasets.persons.rules]
blocked = [["sex", "agegroup"]]
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from protab.serve.app import create_app

    folder = tmp_path_factory.mktemp("refusals")
    db = F.build_database(folder / "micro.duckdb", persons=1500)
    config, tokens = F.write_setup(folder, db, sessions=1, saved_per_user=1, groups_per_user=1)
    config.write_text(config.read_text() + RULES)
    with F.starlette_client(create_app(config)) as client:
        yield {"client": client, "tokens": tokens}


def _call(setup, method, path, body=None, token="bob"):
    headers = {"Authorization": f"Bearer {setup['tokens'][token]}"} if token else {}
    return setup["client"].request(method, path, json=body, headers=headers)


def _refusal(r, status, rule):
    """The refusal's JSON, checked: its status, and error, rule and advice all given."""
    body = r.json()
    assert r.status_code == status, r.text
    assert set(body) == {"error", "rule", "advice"}, body
    assert body["rule"] == rule, body
    assert body["error"].strip() and body["advice"].strip() and body["advice"] != body["error"]
    return body


TABLE = {"dataset": "persons", "dims": ["municipality", "sex"]}
CASES = [
    # (what, method, path, body, token, status, rule)
    # (not sex with age: the rule blocks sex with agegroup and with age, a finer level of it)
    ("max_cells", "POST", "/v1/table", {"dataset": "persons", "dims": ["municipality", "region", "age", "agegroup"]},
     "bob", 400, "max_cells"),
    ("min_population", "POST", "/v1/table", {"dataset": "persons", "dims": ["municipality"], "filters": {"age": "19"}},
     "bob", 400, "min_population"),
    ("a disclosure rule", "POST", "/v1/query", {"sql": "SELECT sex, agegroup, count(*) FROM persons GROUP BY sex, agegroup"},
     "bob", 400, "blocked[0]"),
    ("the allowed SQL form", "POST", "/v1/query", {"sql": "SELECT * FROM persons"}, "bob", 400, "allowed_form"),
    ("the table-request check", "POST", "/v1/table", {**TABLE, "colour": 1}, "bob", 400, "validator"),
    ("a filter of several values", "POST", "/v1/table", {**TABLE, "filters": {"agegroup": ["a0-4", "a5-9"]}},
     "bob", 400, "multi_value_filter"),
    ("a custom group's codes", "POST", "/v1/table", {**TABLE, "groups": {"sex": {"g": ["X"]}}}, "bob", 400,
     "validator"),
    ("the differencing rule of groups", "POST", "/v1/table",
     {"dataset": "persons", "dims": ["age"], "groups": {"age": {"young": [str(a) for a in range(19)]}}},
     "bob", 400, "groups.min_difference"),
    ("rights", "POST", "/v1/query", {"sql": "SELECT age, count(*) FROM persons GROUP BY age"}, "alice", 403,
     "rights"),
    ("a missing token", "GET", "/v1/catalog", None, None, 401, "token"),
    ("a malformed body", "POST", "/v1/query", {"query": "SELECT 1"}, "bob", 400, "body"),
    ("an unknown route", "GET", "/v1/nothing", None, "bob", 404, "endpoint"),
    ("an unknown job", "GET", "/v1/jobs/" + "0" * 32, None, "bob", 404, "job"),
    ("an unknown saved table", "GET", "/v1/saved/none", None, "bob", 404, "saved"),
    ("an unknown format", "GET", "/v1/catalog?format=xls", None, "bob", 400, "format"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_each_kind_of_refusal_names_its_rule_and_advice(setup, case):
    _, method, path, body, token, status, rule = case
    _refusal(_call(setup, method, path, body, token), status, rule)


def test_a_refusal_kept_in_the_answer_cache_keeps_its_rule_and_advice(setup):
    body = {"dataset": "persons", "dims": ["municipality"], "filters": {"age": "19"}}
    first = _refusal(_call(setup, "POST", "/v1/table", body), 400, "min_population")
    again = _refusal(_call(setup, "POST", "/v1/table", body), 400, "min_population")
    assert first == again


def test_saved_and_groups_limits_name_their_own_rule(setup):
    for name in ("one", "two"):
        r = _call(setup, "POST", "/v1/saved", {"name": name, "request": TABLE})
    _refusal(r, 409, "saved_per_user")
    groups = {"dataset": "persons", "dim": "sex", "groups": {"women": ["F"], "men": ["M"]}}
    for name in ("one", "two"):
        r = _call(setup, "POST", "/v1/groups", {**groups, "name": name})
    _refusal(r, 409, "groups_per_user")


def test_the_jobs_limit_names_jobs_per_user(tmp_path):
    from protab.serve.app import _refusal as answer_of
    from protab.serve.jobs import JobStore

    store = JobStore(tmp_path, workers=1, per_user=1)
    hold = threading.Event()
    try:
        store.submit("bob", "first", 10, lambda: (hold.wait(30), (None, {}))[1])
        with pytest.raises(Exception) as info:
            store.submit("bob", "second", 10, lambda: (None, {}))
    finally:
        hold.set()
        store.close()
    status, _, response = answer_of(info.value)
    assert status == 429 and info.value.rule == "jobs_per_user"
    body = json.loads(response.body)
    assert body["rule"] == "jobs_per_user" and "GET /v1/jobs" in body["advice"]


def test_the_rate_limit_names_requests_per_minute():
    from protab.serve.limits import RateLimit
    from protab.serve.query import QueryThrottled

    rate = RateLimit(1)
    rate.admit("bob")
    with pytest.raises(QueryThrottled) as info:
        rate.admit("bob")
    assert info.value.rule == "requests_per_minute" and f"wait {info.value.retry_after} s" in info.value.advice


# -- the PostgreSQL front -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pg(tmp_path_factory):
    yield from F.pg_front(tmp_path_factory.mktemp("refusals_pg"))


@pytest.mark.parametrize(("user", "sql", "rule"), [
    ("bob", "SELECT * FROM persons", "allowed_form"),
    ("bob", "SELECT municipality, agegroup, age, sex, count(*) FROM persons "
            "GROUP BY CUBE(municipality, agegroup, age, sex)", "max_cells"),
    ("alice", "SELECT age, count(*) FROM persons GROUP BY age", "rights"),
])
def test_the_postgresql_front_sends_the_rule_as_detail_and_the_advice_as_hint(pg, user, sql, rule):
    psycopg = pytest.importorskip("psycopg")
    port, tokens, _ = pg
    with psycopg.connect(host="127.0.0.1", port=port, user=user, password=tokens[user], dbname="protab",
                         autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as info:
            conn.execute(sql)
        diag = info.value.diag
        assert diag.message_detail == f"rule: {rule}"
        assert diag.message_hint and diag.message_hint.strip() != diag.message_primary.strip()
        assert conn.execute("SELECT sex, count(*) AS n FROM persons GROUP BY sex").fetchall()  # the service goes on
