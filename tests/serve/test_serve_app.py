"""protab serve, the query service for SQL analysts (issue 13): the real server in a subprocess
(``python -m protab.serve`` on a free localhost port), queried over HTTP with httpx.

Answers equal ``Session.cell_key`` of the same table computed here in-process; overlapping
queries agree cell for cell; a catalogue of refused requests (SQL forms, bodies, tokens,
rights, routes, sizes) with status and message; the differencing attack; formats round-trip;
the audit log survives kill -9; no token, seed or p-table parameter leaks anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import threading

import polars as pl
import pytest

import protab as pt

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")

import serve_fixtures as F  # noqa: E402

RESPONSES: list[str] = []  # every answer and error text the tests saw (checked for secrets at the end)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    yield from F.serve(tmp_path_factory)


def _call(served, method, path, body=None, *, token="alice", raw=None, headers=None, params=None):
    h = {} if token is None else {"Authorization": f"Bearer {served['tokens'].get(token, token)}"}
    h.update(headers or {})
    r = httpx.request(method, served["url"] + path, json=body if raw is None else None,
                      content=raw, headers=h, params=params, timeout=60)
    RESPONSES.append(r.text if r.headers.get("content-type", "").startswith(("application/json", "text")) else "")
    return r


def _sql(served, sql, token="alice", **kw):
    return _call(served, "POST", "/v1/query", {"sql": sql}, token=token, **kw)


def _frame(r) -> pl.DataFrame:
    assert r.status_code == 200, r.text
    answer = r.json()
    return pl.DataFrame(answer["rows"], schema=answer["columns"], orient="row", infer_schema_length=None)


def _cell_key(db, spec):
    from protab.request.loaders import load_magnitude

    ptable = pt.PTable.maximum_entropy(**F.PTABLE)
    magnitude = load_magnitude({"ptable": {"maximum_entropy": F.MAGNITUDE}, "fp": 100}, None) if spec.sums else None
    with pt.Session(db, read_only=True) as s:
        return s.cell_key("persons", spec, ptable, threshold=F.THRESHOLD, magnitude=magnitude)


def _codes(db, col):
    with pt.Session(db, read_only=True) as s:
        return s.codes("persons", col)


# -- answers are Session.cell_key's ------------------------------------------------------------
def test_cube_equals_session_cell_key(served):
    got = _frame(_sql(served, "SELECT region, sex, count(*) AS n FROM persons GROUP BY CUBE(region, sex)"))
    db = served["db"]
    want = _cell_key(db, pt.TableSpec({"region": _codes(db, "region"), "sex": _codes(db, "sex")}))
    want = want.select(
        pl.when(pl.col("region_level") == 1).then(pl.col("region")).alias("region"),
        pl.when(pl.col("sex_level") == 1).then(pl.col("sex")).alias("sex"),
        pl.col("n_pert").alias("n"),
    )
    assert got.height == 3 * 2 + 3 + 2 + 1
    key = ["region", "sex"]
    assert got.sort(key, nulls_last=True).equals(want.sort(key, nulls_last=True).cast({"n": got["n"].dtype}))
    # perturbed: some cell differs from the plain count (which the service never returns)
    with pt.Session(db, read_only=True) as s:
        plain = s.sql("SELECT region, sex, count(*) AS n FROM persons GROUP BY region, sex")
    joined = got.drop_nulls(key).join(plain, on=key, suffix="_true")
    assert joined.height == 6 and (joined["n"] != joined["n_true"]).any()


def test_filtered_query_with_sums_equals_session_cell_key(served):
    sql = ("SELECT agegroup, count(*) AS n, sum(income) AS s, avg(income) AS a FROM persons "
           "WHERE region = 'R1' AND sex = 'F' GROUP BY agegroup")
    got = _frame(_sql(served, sql)).sort("agegroup")
    db = served["db"]
    spec = pt.TableSpec({"agegroup": _codes(db, "agegroup")}, sums=["income"],
                        where=[("region", "in", ["R1"]), ("sex", "in", ["F"])])
    want = _cell_key(db, spec).filter(pl.col("agegroup_level") == 1).sort("agegroup")
    assert got["agegroup"].to_list() == want["agegroup"].to_list()
    assert got["n"].to_list() == want["n_pert"].to_list()
    assert got["s"].to_list() == pytest.approx(want["income_pert"].to_list(), rel=1e-12)
    assert got["a"].to_list() == pytest.approx(want["income_mean_pert"].to_list(), rel=1e-12)


def test_table_request_equals_session_cell_key_with_hierarchy(served):
    body = {"dataset": "persons", "dims": ["municipality", "sex"], "filters": {"agegroup": "a0-4"}}
    got = _frame(_call(served, "POST", "/v1/table", body))
    assert got.columns == ["municipality", "sex", "municipality_level", "sex_level", "n_pert"]
    db = served["db"]
    with pt.Session(db, read_only=True) as s:
        h = s.hierarchy_from_columns("persons", ["region", "municipality"])
    want = _cell_key(db, pt.TableSpec({"municipality": h, "sex": _codes(db, "sex")},
                                      where=[("agegroup", "in", ["a0-4"])]))
    key = ["municipality", "sex"]
    assert got.sort(key).equals(want.select(got.columns).sort(key).cast(dict(got.schema)))
    assert set(got["municipality_level"]) == {0, 1, 2}
    # threshold: no published count below it; some blanked
    values = got["n_pert"].drop_nulls()
    assert ((values == 0) | (values >= F.THRESHOLD)).all()


def test_hierarchy_needs_rights_to_its_upper_levels(served):
    """erin may use municipality but not region: municipality is served flat to her (its region
    level would be the region table), also from the answer cache, and her catalogue shows no levels."""
    body = {"dataset": "persons", "dims": ["municipality"]}
    alice = _frame(_call(served, "POST", "/v1/table", body))
    erin = _frame(_call(served, "POST", "/v1/table", body, token="erin"))
    assert set(alice["municipality_level"]) == {0, 1, 2} and set(erin["municipality_level"]) == {0, 1}
    assert erin.filter(pl.col("municipality_level") == 1).equals(
        alice.filter(pl.col("municipality_level") == 2).with_columns(pl.col("municipality_level") - 1))
    cat = _call(served, "GET", "/v1/catalog", token="erin").json()
    assert [(d["name"], d["levels"]) for d in cat["datasets"][0]["dims"]] == [("municipality", []), ("sex", [])]
    assert _sql(served, "SELECT region, count(*) FROM persons GROUP BY region", token="erin").status_code == 403


def test_levels_keep_one_level_and_the_total(served):
    body = {"dataset": "persons", "dims": ["municipality"], "levels": {"municipality": "region"}}
    got = _frame(_call(served, "POST", "/v1/table", body))
    assert sorted(got["municipality"]) == ["R1", "R2", "R3", "Total"]


# -- the same cell has the same value in every answer -----------------------------------------
def test_overlapping_answers_agree_cell_for_cell(served):
    by_region_sex = _frame(_sql(served, "SELECT region, sex, count(*) FROM persons GROUP BY region, sex"))
    rollup = _frame(_sql(
        served, "SELECT region, sex, agegroup, count(*) AS n FROM persons GROUP BY ROLLUP(region, sex, agegroup)"))
    a = by_region_sex.rename({"n": "x"}).join(
        rollup.filter(pl.col("agegroup").is_null() & pl.col("sex").is_not_null()).drop("agegroup"),
        on=["region", "sex"])
    assert a.height == 6 and (a["x"] == a["n"]).all()
    # a filtered query: its cells are cells of the unfiltered one
    r1 = _frame(_sql(served, "SELECT sex, count(*) FROM persons WHERE region = 'R1' GROUP BY sex"))
    b = r1.join(by_region_sex.filter(pl.col("region") == "R1"), on="sex", suffix="_all")
    assert b.height == 2 and (b["n"] == b["n_all"]).all()
    # the hierarchy's region level in a table request = GROUP BY region
    table = _frame(_call(served, "POST", "/v1/table", {"dataset": "persons", "dims": ["municipality"]}))
    regions = _frame(_sql(served, "SELECT region, count(*) FROM persons GROUP BY region"))
    c = regions.join(table.filter(pl.col("municipality_level") == 1), left_on="region", right_on="municipality")
    assert c.height == 3 and (c["n"] == c["n_pert"]).all()
    # the grand total, however asked
    total = _frame(_sql(served, "SELECT count(*) AS t FROM persons"))["t"][0]
    assert total == rollup.filter(pl.col("region").is_null())["n"][0]
    assert total == table.filter(pl.col("municipality_level") == 0)["n_pert"][0]


def test_order_by_and_limit_apply_after_protection(served):
    full = _frame(_sql(served, "SELECT municipality, count(*) AS n FROM persons GROUP BY municipality"))
    top = _frame(_sql(served, "SELECT municipality, count(*) AS n FROM persons GROUP BY municipality "
                              "ORDER BY n DESC, municipality LIMIT 3"))
    want = full.sort(["n", "municipality"], descending=[True, False]).head(3)
    assert top.equals(want)


def test_concurrent_requests_agree(served):
    sqls = [f"SELECT sex, count(*) FROM persons WHERE agegroup = '{g}' GROUP BY sex"
            for g in ("a0-4", "a5-9", "a10-14")] * 3
    out: list[object] = [None] * len(sqls)

    def run(k):
        r = _sql(served, sqls[k])
        out[k] = (r.status_code, r.text)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(sqls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(o[0] == 200 for o in out)
    assert out[0] == out[3] == out[6] and out[1] == out[4]


# -- formats ---------------------------------------------------------------------------------
def test_formats_round_trip(served):
    import pyarrow as pa
    import pyarrow.ipc

    sql = "SELECT region, agegroup, count(*) AS n, avg(income) FROM persons GROUP BY ROLLUP(region, agegroup)"
    want = _frame(_sql(served, sql))
    csv = _sql(served, sql, headers={"Accept": "text/csv"})
    assert csv.headers["content-type"].startswith("text/csv")
    got = pl.read_csv(io.BytesIO(csv.content), schema=want.schema)
    assert got.equals(want)
    parquet = _sql(served, sql, params={"format": "parquet"})
    assert pl.read_parquet(io.BytesIO(parquet.content)).equals(want)
    arrow = _sql(served, sql, params={"format": "arrow"})
    table = pa.ipc.open_stream(io.BytesIO(arrow.content)).read_all()
    assert pl.from_arrow(table).equals(want)
    assert _sql(served, sql, headers={"Accept": "application/vnd.apache.arrow.stream"}).content == arrow.content


def test_json_rendering_matches_json_module():
    from protab.serve.formats import to_json

    frame = pl.DataFrame({"a": ['q"u\\o', None, "é\n\t€"], "b": [1, None, -3], "c": [0.1, None, float("nan")]})
    answer = json.loads(to_json(frame))
    assert answer["columns"] == ["a", "b", "c"]
    assert answer["rows"] == [['q"u\\o', 1, 0.1], [None, None, None], ["é\n\t€", -3, None]]
    assert json.loads(to_json(frame.clear())) == {"columns": ["a", "b", "c"], "rows": []}


def test_catalog_lists_what_the_user_may_use(served):
    cat = _call(served, "GET", "/v1/catalog").json()
    names = [d["name"] for d in cat["datasets"]]
    assert names == ["households", "persons"]  # not "secret"
    persons = cat["datasets"][1]
    assert [d["name"] for d in persons["dims"]] == F.ALICE_DIMS  # not "age"
    assert persons["measures"] == ["income"] and persons["functions"] == ["count", "sum", "avg"]
    muni = next(d for d in persons["dims"] if d["name"] == "municipality")
    assert muni["levels"] == ["region", "municipality"] and muni["n_codes"] == 12
    assert cat["datasets"][0]["functions"] == ["count"]


def test_static_page_is_served(served):
    r = httpx.get(served["url"] + "/")
    assert r.status_code == 200 and "<html" in r.text.lower()
    assert "default-src 'self'" in r.headers["content-security-policy"]
    assert httpx.get(served["url"] + "/static/app.js").status_code == 200


# -- refused requests: status and message ------------------------------------------------------
LONG = "SELECT count(*) FROM persons WHERE region IN (" + ", ".join(["'R1'"] * 400) + ")"
BIG = ("SELECT region, municipality, sex, agegroup, age, count(*) FROM persons "
       "GROUP BY CUBE(municipality, sex, agegroup, age, region)")

REFUSED = [
    # SQL forms
    ("sql", "SELECT * FROM persons", "alice", 400, "SELECT * is not accepted"),
    ("sql", "SELECT pid, count(*) FROM persons GROUP BY pid", "alice", 400, "unknown column 'pid'"),
    ("sql", "SELECT rkey, count(*) FROM persons GROUP BY rkey", "alice", 400, "unknown column 'rkey'"),
    ("sql", "SELECT region, count(*) FROM persons JOIN households USING (region) GROUP BY region", "alice", 400,
     "joins are not accepted"),
    ("sql", "SELECT region, count(*) FROM (SELECT * FROM persons) GROUP BY region", "alice", 400, "Allowed form"),
    ("sql", "SELECT count(*) FROM persons UNION SELECT count(*) FROM persons", "alice", 400, "UNION"),
    ("sql", "SELECT region, count(*) OVER () FROM persons", "alice", 400, "window functions"),
    ("sql", "SELECT upper(region), count(*) FROM persons GROUP BY upper(region)", "alice", 400, "Allowed form"),
    ("sql", "SELECT count(*) FROM persons WHERE income > 5", "alice", 400, "WHERE"),
    ("sql", "SELECT count(*) FROM persons WHERE region LIKE 'R%'", "alice", 400, "LIKE is not accepted"),
    ("sql", "SELECT count(*) FROM persons; SELECT count(*) FROM persons", "alice", 400, "one statement"),
    ("sql", "SELECT count(*) FROM persons -- ; DROP TABLE persons", "alice", 400, "comments are not accepted"),
    ("sql", "SELECT count(*) FROM persons /* x */", "alice", 400, "comments are not accepted"),
    ("sql", "SELECT count(*) FROM nope", "alice", 400, "unknown dataset 'nope'"),
    ("sql", "SELECT colour, count(*) FROM persons GROUP BY colour", "alice", 400, "unknown column 'colour'"),
    ("sql", "SELECT region, count(*) FROM persons GROUP BY region HAVING count(*) > 3", "alice", 400, "HAVING"),
    ("sql", "SELECT count(*) FROM persons LIMIT 0", "alice", 400, "LIMIT must be between"),
    ("sql", LONG, "alice", 400, "characters long"),
    ("sql", BIG, "bob", 400, "cells; the service answers at most 2,000"),
    ("sql", "SELECT count(*), sum(rooms) FROM households", "alice", 400, "sum() and avg() are not available"),
    ("sql", "SELECT sex, count(*) FROM persons WHERE region = 'R3' AND age = 19 GROUP BY sex", "bob", 400,
     "minimum-population rule"),
    ("sql", "DROP TABLE persons", "alice", 400, "Allowed form"),
    # rights
    ("sql", "SELECT age, count(*) FROM persons GROUP BY age", "alice", 403, "you may not use 'age'"),
    ("sql", "SELECT count(*) FROM persons WHERE age = 3", "alice", 403, "you may not use 'age'"),
    ("sql", "SELECT count(*), sum(hours) FROM persons", "alice", 403, "you may not use 'hours'"),
    ("sql", "SELECT kind, count(*) FROM secret GROUP BY kind", "alice", 403, "no rights to dataset 'secret'"),
    # tokens
    ("sql", "SELECT count(*) FROM persons", None, 401, "authentication needed"),
    ("sql", "SELECT count(*) FROM persons", "tok-wrong-0000", 401, "invalid token"),
    ("sql", "SELECT count(*) FROM persons", "carol", 401, "expired"),
    ("sql", "SELECT count(*) FROM persons", "dave", 401, "revoked"),
    ("sql", "SELECT count(*) FROM persons", "alice_expired", 401, "expired"),
    ("sql", "SELECT count(*) FROM persons", "alice_revoked", 401, "revoked"),
    # bodies and formats
    ("raw", b'{"sql": "SELECT count(*) FROM persons"', "alice", 400, "malformed JSON"),
    ("raw", b"", "alice", 400, "malformed JSON"),
    ("raw", b"\xff\xfe{}", "alice", 400, "malformed JSON"),
    ("raw", b"[1, 2]", "alice", 400, "JSON object"),
    ("raw", b'{"query": "SELECT 1"}', "alice", 400, "JSON object"),
    ("raw", b'{"sql": 5}', "alice", 400, "SQL text"),
    ("raw", b'{"sql": "SELECT count(*) FROM persons", "as": "x"}', "alice", 400, "unknown key 'as'"),
    ("raw", b'{"sql": "' + b"x" * (F.MAX_BODY + 10) + b'"}', "alice", 413, "larger than 65,536 bytes"),
    ("format", "SELECT count(*) FROM persons", "alice", 400, "unknown format 'xml'"),
    # table requests
    ("table", {"dataset": "nope", "dims": ["sex"]}, "alice", 400, "unknown dataset 'nope'"),
    ("table", {"dataset": "secret", "dims": ["kind"]}, "alice", 403, "no rights to dataset 'secret'"),
    ("table", {"dataset": "persons", "dims": "sex"}, "alice", 400, "dims must be a non-empty list"),
    ("table", {"dataset": "persons", "dims": ["sex", "colour"]}, "alice", 400, "unknown dimension 'colour'"),
    ("table", {"dataset": "persons", "dims": ["age"]}, "alice", 403, "you may not use 'age'"),
    ("table", {"dataset": "persons", "dims": ["sex"], "filters": {"age": 3}}, "alice", 403, "you may not use 'age'"),
    ("table", {"dataset": "persons", "dims": ["sex"], "measure": "hours"}, "alice", 403, "you may not use 'hours'"),
    ("table", {"dataset": "persons", "dims": ["sex"], "formula": "sex*"}, "alice", 400, "cannot read the formula"),
    ("table", {"dataset": "persons", "dims": ["sex"], "colour": 1}, "alice", 400, "unknown key 'colour'"),
    ("table", {"dataset": "persons", "dims": ["sex"], "levels": {"sex": 1}}, "alice", 400, "not a level of 'sex'"),
    ("table", {"dataset": "persons", "dims": ["sex"], "filters": {"region": []}}, "alice", 400, "list of 1 to"),
    ("table", {"dataset": "households", "dims": ["size"], "measure": "rooms"}, "alice", 400, "not available"),
    ("table", {"dataset": "persons", "dims": ["municipality", "sex", "agegroup", "age"]}, "bob", 400,
     "the service answers at most"),
    ("table", {"dataset": "persons", "dims": ["sex"], "filters": {"region": "R3", "age": 19}}, "bob", 400,
     "minimum-population rule"),
    ("table", {"dataset": "persons", "dims": ["sex"], "filters": {"sex": "X"}}, "alice", 400, "minimum-population"),
    ("sql", "SELECT sex, count(*) FROM persons WHERE sex = 'X' GROUP BY sex", "alice", 400, "minimum-population"),
    # routes
    ("route", ("GET", "/v1/nothing"), "alice", 404, "no such endpoint"),
    ("route", ("GET", "/v1/query"), "alice", 405, "not allowed"),
    ("route", ("DELETE", "/v1/catalog"), "alice", 405, "not allowed"),
]


@pytest.mark.parametrize("kind, what, token, status, message", REFUSED,
                         ids=[f"{k}-{i}" for i, (k, *_) in enumerate(REFUSED)])
def test_refused_requests(served, kind, what, token, status, message):
    if kind == "sql":
        r = _sql(served, what, token=token)
    elif kind == "raw":
        r = _call(served, "POST", "/v1/query", token=token, raw=what, headers={"Content-Type": "application/json"})
    elif kind == "format":
        r = _sql(served, what, token=token, params={"format": "xml"})
    elif kind == "table":
        r = _call(served, "POST", "/v1/table", what, token=token)
    else:
        r = _call(served, what[0], what[1], token=token)
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    assert message in r.json()["error"]
    if status == 401:
        assert r.headers["www-authenticate"].startswith("Bearer")


def test_refusal_catalogue_is_large():
    assert len(REFUSED) >= 30


# -- the differencing attack -----------------------------------------------------------------
def test_differencing_attack_needs_an_isolating_filter_which_is_refused(served):
    """One person is 19 (in region R3). Two answers whose populations differ by that record alone
    would give away its sex. Filters that make a new population (several values, exclusions) are
    refused unless the column is grouped in every cell; a one-value filter selects a cell of a
    larger crosstab (same records, same noise); a population whose perturbed total is below the
    minimum is refused with one message that tells no count."""
    new_population = [
        "SELECT sex, count(*) FROM persons WHERE region = 'R3' AND age <> 19 GROUP BY sex",
        "SELECT sex, count(*) FROM persons WHERE region = 'R3' AND age IN (" + ", ".join(map(str, range(19)))
        + ") GROUP BY sex",
        "SELECT sex, count(*) FROM persons WHERE age <> 19 GROUP BY sex",
        "SELECT age, sex, count(*) FROM persons WHERE age NOT IN (18, 19) GROUP BY ROLLUP(age, sex)",
    ]
    for sql in new_population:
        r = _sql(served, sql, token="bob")
        assert r.status_code == 400 and "several values" in r.json()["error"], sql
    table = {"dataset": "persons", "dims": ["sex"], "filters": {"age": [str(a) for a in range(19)]}}
    r = _call(served, "POST", "/v1/table", table, token="bob")
    assert r.status_code == 400 and "several values" in r.json()["error"]
    small = ["SELECT sex, count(*) FROM persons WHERE age = 19 GROUP BY sex",
             "SELECT sex, count(*) FROM persons WHERE region = 'R3' AND age = 19 GROUP BY sex"]
    messages = set()
    for sql in small:
        r = _sql(served, sql, token="bob")
        assert r.status_code == 400, sql
        messages.add(r.json()["error"])
    assert len(messages) == 1 and "minimum-population" in next(iter(messages))
    assert not any(ch.isdigit() for ch in messages.pop())
    # a one-value filter gives the cells of the larger crosstab, value for value
    one = _frame(_sql(served, "SELECT sex, count(*) AS n FROM persons WHERE region = 'R3' GROUP BY sex", "bob"))
    cross = _frame(_sql(served, "SELECT region, sex, count(*) AS n FROM persons GROUP BY region, sex", "bob"))
    assert one.sort("sex")["n"].to_list() == cross.filter(pl.col("region") == "R3").sort("sex")["n"].to_list()
    # an exclusion on a grouped column only picks rows of the answer
    picked = _frame(_sql(served, "SELECT age, sex, count(*) AS n FROM persons WHERE age <> 3 GROUP BY age, sex", "bob"))
    full = _frame(_sql(served, "SELECT age, sex, count(*) AS n FROM persons GROUP BY age, sex", "bob"))
    assert picked.sort(["age", "sex"]).equals(full.filter(pl.col("age") != "3").sort(["age", "sex"]))


def test_population_rule_judges_the_perturbed_total(served):
    """The rule refuses exactly the filters whose population's perturbed total (the cell key
    method's value of the filtered grand total, computed here in-process) is below the minimum."""
    db = served["db"]
    cases = [{"age": "19"}, {"age": "3"}, {"region": "R3", "age": "19"}, {"region": "R3"}, {"sex": "F", "age": "0"},
             {"municipality": "R3-0", "agegroup": "a15-19"}, {"municipality": "R1-0"}]
    seen = set()
    for filters in cases:
        r = _call(served, "POST", "/v1/table", {"dataset": "persons", "dims": ["sex"], "filters": filters}, token="bob")
        spec = pt.TableSpec({"sex": _codes(db, "sex")}, where=[(k, "in", [v]) for k, v in filters.items()])
        try:
            total = _cell_key(db, spec).filter(pl.col("sex_level") == 0)["n_pert"][0]
        except pt.InputError:  # no records at all
            total = None
        ok = total is not None and total >= F.MIN_POPULATION
        assert (r.status_code == 200) == ok, (filters, r.status_code)
        seen.add(ok)
    assert seen == {True, False}  # both verdicts occur among the cases


# -- tokens: the command, and a running server sees changes at once ---------------------------
def _token_cmd(*argv):
    from protab.serve import commands as cli

    parser = argparse.ArgumentParser(prog="protab")
    cli.add_parsers(parser.add_subparsers(dest="cmd", required=True))
    cli.run(parser.parse_args(list(argv)))


def test_token_command_add_list_revoke(served, capsys):
    cfg = str(served["config"])
    _token_cmd("serve-token", "add", "--config", cfg, "--user", "bob", "--expires", "2099-12-31")
    out = capsys.readouterr()
    token = out.out.strip()
    assert token.startswith("ptk_") and token not in served["tokens_file"].read_text()
    assert _sql(served, "SELECT count(*) FROM persons", token=token).status_code == 200
    _token_cmd("serve-token", "list", "--config", cfg)
    listing = capsys.readouterr().out
    assert "bob" in listing and "until end of 2099-12-31" in listing and token not in listing
    ident = next(line.split()[0] for line in listing.splitlines() if "2099-12-31" in line)
    _token_cmd("serve-token", "revoke", "--config", cfg, "--id", ident)
    assert "revoked 1 token(s)" in capsys.readouterr().out
    r = _sql(served, "SELECT count(*) FROM persons", token=token)
    assert r.status_code == 401 and "revoked" in r.json()["error"]
    with pytest.raises(pt.ProtabError, match="no user 'zoe'"):
        _token_cmd("serve-token", "add", "--config", cfg, "--user", "zoe")
    with pytest.raises(pt.ProtabError, match="in the past"):
        _token_cmd("serve-token", "add", "--config", cfg, "--user", "bob", "--expires", "2001-01-01")


# -- the audit log ---------------------------------------------------------------------------
def test_audit_log_records_requests(served):
    sql = "SELECT sex, count(*) AS n FROM persons WHERE agegroup = 'a5-9' GROUP BY sex"
    assert _sql(served, sql).status_code == 200
    assert _sql(served, "SELECT * FROM persons").status_code == 400
    lines = [json.loads(x) for x in served["audit"].read_text().splitlines()]
    ok = [x for x in lines if x["accepted"] and x["query"] and "a5-9" in x["query"]][-1]
    assert ok["user"] == "alice" and ok["endpoint"] == "POST /v1/query" and ok["status"] == 200
    assert ok["query"] == """SELECT "sex", count(*) FROM "persons" WHERE "agegroup" IN ('a5-9') GROUP BY "sex\""""
    assert ok["cells"] == 2 and ok["reason"] is None
    bad = [x for x in lines if x["query"] == "SELECT * FROM persons"][-1]
    assert bad["status"] == 400 and not bad["accepted"] and "SELECT *" in bad["reason"]
    assert any(x["status"] == 401 and x["user"] is None for x in lines)


def test_audit_log_survives_kill_9(served, tmp_path):
    config, tokens = F.write_setup(tmp_path, served["db"], audit="audit-kill.jsonl")
    server = F.Server(config)
    try:
        h = {"Authorization": f"Bearer {tokens['bob']}"}
        r = httpx.post(server.url + "/v1/query", headers=h,
                       json={"sql": "SELECT region, count(*) FROM persons GROUP BY region"})
        assert r.status_code == 200
        refused = httpx.post(server.url + "/v1/query", headers=h, json={"sql": "SELECT * FROM persons"})
        assert refused.status_code == 400
    finally:
        server.kill()  # SIGKILL: no shutdown, no flush at exit
    assert server.proc.returncode == -9
    lines = [json.loads(x) for x in (tmp_path / "audit-kill.jsonl").read_text().splitlines()]
    assert [(x["user"], x["status"], x["cells"]) for x in lines] == [("bob", 200, 3), ("bob", 400, None)]
    assert lines[0]["query"] == 'SELECT "region", count(*) FROM "persons" GROUP BY "region"'


# -- configuration ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "old, new, message",
    [
        ("threshold = 3", "threshold = 3\nthresold = 4", "unknown key 'thresold'"),
        ('dims = ["kind"]', 'dims = ["kind"]\ntable = "missing_table"', "table 'missing_table' is not in the database"),
        ('dims = ["kind"]\ncodes = { kind = ["A", "B"] }',
         'dims = ["kind", "nope"]\ncodes = { kind = ["A", "B"], nope = ["x"] }', "'nope', not columns of table 'secret'"),
        ('dims = ["kind"]\ncodes = { kind = ["A", "B"] }', 'dims = ["rkey"]\ncodes = { rkey = ["1"] }',
         "the secret record keys"),
        ('datasets = ["households"]', 'datasets = ["housholds"]', "users.alice.datasets names 'housholds'"),
        ("revoked = true", "revoked = 1", "users.dave.revoked must be a boolean"),
        ('hierarchies = { municipality = ["region", "municipality"]',
         'hierarchies = { municipality = ["municipality", "region"]', "hierarchies.municipality"),
        ("maximum_entropy = { D = 5", "maximum_entropy = { D = 5.77", "ptable.maximum_entropy.D must be an integer"),
        ("fp = 100", "fp = -41.5", "magnitude.fp"),
        ("[ptable]\nmaximum_entropy = { D = 5, V = 2.71828, js = 2 }\n", "", "serve.toml' needs the key 'ptable'"),
    ],
)
def test_bad_config_is_named_at_start_up(served, tmp_path, old, new, message):
    from protab.serve.app import create_app

    text = F.config_text(served["db"], audit=str(tmp_path / "a.jsonl"))
    assert old in text
    path = tmp_path / "serve.toml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(pt.ProtabError) as info:
        create_app(path)
    assert message in str(info.value)
    for secret in ("5.77", "-41.5", "2.71828", F.SEED):
        assert secret not in str(info.value)


def test_bad_config_stops_the_command(served, tmp_path):
    import subprocess
    import sys

    path = tmp_path / "serve.toml"
    path.write_text(F.config_text(served["db"]).replace("max_cells = 2000", "max_cells = 0"))
    r = subprocess.run([sys.executable, "-m", "protab.serve", "--config", str(path)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "max_cells" in r.stderr and "Traceback" not in r.stderr


def test_create_app_mounts_in_another_asgi_server(served, tmp_path):
    from protab.serve.app import create_app
    from protab.serve.config import load_config

    config, tokens = F.write_setup(tmp_path, served["db"])
    app = create_app(load_config(config))

    async def ask():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://platform") as client:
            h = {"Authorization": f"Bearer {tokens['alice']}"}
            return await client.post("/v1/query", headers=h, json={"sql": "SELECT count(*) AS t FROM persons"})

    r = asyncio.run(ask())
    with pytest.warns(DeprecationWarning, match="app.state.broker"):
        assert app.state.engine is app.state.broker  # the old name, kept for one release
    app.state.broker.close()
    assert r.status_code == 200
    assert r.json() == _sql(served, "SELECT count(*) AS t FROM persons").json()


# -- no secret anywhere ----------------------------------------------------------------------
def test_no_secret_in_answers_errors_or_logs(served):
    """Runs last in this module (pytest keeps file order): every answer seen, the audit log and
    the server's stderr are free of tokens, the seed and the p-table parameters."""
    served["server"].stop()
    texts = RESPONSES + [served["audit"].read_text(), served["server"].stderr()]
    secrets = [served["tokens"][k] for k in ("alice", "bob", "carol", "dave")] + [F.SEED, "2.71828", "3.14159",
                                                                                  "maximum_entropy"]
    assert len(RESPONSES) > 50
    for text in texts:
        for s in secrets:
            assert s not in text


# -- count requests read the key sums of the dataset's dims ------------------------------------
@pytest.mark.parametrize("persons, used", [(F.PERSONS, True), (40, False)])
def test_engine_reads_key_sums_when_they_are_much_smaller(tmp_path, persons, used):
    """6,000 persons in 480 combinations of the dims: count and sum requests read the key sums
    (the same answers, compared with Session.cell_key on the records); 40 persons in about as
    many combinations: the records, no key-sum table kept."""
    from protab.serve.broker import Broker
    from protab.serve.config import load_config

    db = F.build_database(tmp_path / "small.duckdb", persons=persons)
    spec = pt.TableSpec({"region": _codes(db, "region"), "sex": _codes(db, "sex")},
                        where=[("agegroup", "in", ["a5-9"])])
    want = _cell_key(db, spec)  # on the records, before the engine opens the database its own way
    sums = pt.TableSpec({"agegroup": _codes(db, "agegroup")}, sums=["income"], where=[("region", "in", ["R1"])])
    want_sums = _cell_key(db, sums).filter(pl.col("agegroup_level") == 1)
    config, _ = F.write_setup(tmp_path, db)
    engine = Broker(load_config(config))
    try:
        ds = engine.datasets["persons"]
        assert (ds.counts_table is not None) is used
        user = engine.config.users["alice"]
        got = engine.query("SELECT region, sex, count(*) AS n FROM persons WHERE agegroup = 'a5-9' "
                           "GROUP BY CUBE(region, sex)", user).frame
        assert got.height == want.height == 12
        for row in got.iter_rows(named=True):
            cell = want.filter((pl.col("region") == (row["region"] or "Total")) & (pl.col("sex") == (row["sex"] or "Total")))
            assert cell["n_pert"].to_list() == [row["n"]]
        got_sums = engine.query("SELECT agegroup, count(*) AS n, sum(income) AS s, avg(income) AS a FROM persons "
                                "WHERE region = 'R1' GROUP BY agegroup ORDER BY agegroup", user).frame
        assert got_sums["s"].to_list() == want_sums.sort("agegroup")["income_pert"].to_list()  # exactly
        assert got_sums["a"].to_list() == want_sums.sort("agegroup")["income_mean_pert"].to_list()
        assert ds.sums_kept is used
        if used:
            with engine.session() as s:
                assert s.exists(ds.counts_table)
                assert "protab_m0_top" in s.columns(ds.counts_table)
    finally:
        engine.close()


def test_rate_limit_buckets_are_per_user_and_refill():
    from protab.serve.limits import RateLimit as _RateLimit
    from protab.serve.validator import QueryThrottled

    limit = _RateLimit(3)
    for _ in range(3):
        limit.admit("a")
    with pytest.raises(QueryThrottled, match="at most 3 requests a minute; try again in") as err:
        limit.admit("a")
    assert err.value.status == 429 and 1 <= err.value.retry_after <= 20
    limit.admit("b")  # another user's bucket is full
    tokens, last = limit._buckets["a"]
    limit._buckets["a"] = (tokens, last - 20)  # 20 s later: one request a 20 s has come back
    limit.admit("a")
    with pytest.raises(QueryThrottled):
        limit.admit("a")
    off = _RateLimit(0)
    for _ in range(10_000):
        off.admit("a")
