"""Attacks on the query service (issue 13) by an analyst who wants an unprotected count, a record,
a record key, the seed or the p-table, or to crash the service: the real service
(``protab serve --pg-port``: HTTP and PostgreSQL on one engine) in a subprocess, attacked
over HTTP (httpx), the PostgreSQL protocol (psycopg and raw sockets), and ``protab publish``.

An attack that is refused is a regression test. An attack that works is a test of the secure
behaviour marked ``xfail(strict=True)``: it fails today and passes once the hole is closed.
The fixture database (tests/serve/serve_fixtures.py) has exactly one person aged 19 (in R3).
"""

from __future__ import annotations

import json
import socket
import struct
import time
from pathlib import Path

import duckdb
import pytest
import serve_fixtures as F

httpx = pytest.importorskip("httpx")
psycopg = pytest.importorskip("psycopg")

MIN_POP = "refused by the minimum-population rule"
SET_FILTER = "a filter with several values"
SECRETS = [F.SEED, "2.71828", "3.14159"]  # the seed and p-table parameters of the fixture


class Service(F.Server):
    """The service with its PostgreSQL front (tests/serve/serve_fixtures.py)."""

    def __init__(self, config: Path, timeout: float = 60) -> None:
        super().__init__(config, timeout=timeout, pg=True)

    def rss_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS"))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    yield from F.serve(tmp_path_factory, Service, "attacks")


def _post(served, path, body, user="bob", **kw):
    return httpx.post(served["url"] + path, json=body, timeout=60,
                      headers={"Authorization": f"Bearer {served['tokens'][user]}"}, **kw)


def _query(served, sql, user="bob"):
    return _post(served, "/v1/query", {"sql": sql}, user)


def _rows(served, sql, user="bob"):
    r = _query(served, sql, user)
    assert r.status_code == 200, r.text
    return r.json()["rows"]


def _pg(served, user="bob", **kw):
    s = served["service"]
    return psycopg.connect(host="127.0.0.1", port=s.pg_port, dbname="protab", user=user,
                           password=served["tokens"][user], connect_timeout=10, **kw)


def _truth(served, sql):
    with duckdb.connect(served["db"], read_only=True) as con:
        return con.execute(sql).fetchall()


# -- SQL the validator must refuse ----------------------------------------------------------------
REFUSED = [
    # DuckDB-specific syntax
    ("SELECT region, count(*) FROM persons GROUP BY ALL", 400, "GROUP BY ALL"),
    ("SELECT COLUMNS(*) FROM persons", 400, "COLUMNS(*)"),
    ("SELECT * EXCLUDE (pid) FROM persons", 400, "SELECT *"),
    ("SELECT region, count(*) FILTER (WHERE age = 19) FROM persons GROUP BY region", 400, "FILTER"),
    ("SELECT region, count(*) OVER () FROM persons GROUP BY region", 400, "window functions"),
    ("SELECT region, list(age), count(*) FROM persons GROUP BY region", 400, "dimension columns and count(*)"),
    ("SELECT region, count(*) FROM persons USING SAMPLE 10 GROUP BY region", 400, "TABLESAMPLE"),
    ("SELECT region, count(*) FROM persons GROUP BY region QUALIFY 1", 400, "QUALIFY"),
    ("PIVOT persons ON sex USING count(*)", 400, "only a SELECT"),
    ("CREATE MACRO m(x) AS x", 400, "only a SELECT"),
    ("SELECT region, count(*) FROM persons WHERE region = {'a': 'R1'} GROUP BY region", 400, "literals only"),
    ("SELECT region, count(*) FROM persons WHERE region = ANY(['R3']) GROUP BY region", 400, "literals only"),
    # table functions, catalogue tables, other datasets, names
    ("SELECT region, count(*) FROM read_csv('/etc/passwd') GROUP BY region", 400, "FROM takes one dataset"),
    ("SELECT region, count(*) FROM duckdb_tables() GROUP BY region", 400, "FROM takes one dataset"),
    ("SELECT region, count(*) FROM main.persons GROUP BY region", 400, "qualified table names"),
    ("SELECT region, count(*) FROM persons p GROUP BY region", 400, "table aliases"),
    ("SELECT region, count(*) FROM persons, secret GROUP BY region", 400, "joins"),
    ("SELECT region, count(*) FROM persons POSITIONAL JOIN secret GROUP BY region", 400, "joins"),
    ("SELECT k, count(*) FROM protab_ptable GROUP BY k", 400, "unknown dataset 'protab_ptable'"),
    ('SELECT region, count(*) FROM "PERSONS" GROUP BY region', 400, "unknown dataset 'PERSONS'"),
    ('SELECT "REGION", count(*) FROM persons GROUP BY "REGION"', 400, "unknown column 'REGION'"),
    ("SELECT kind, count(*) FROM secret GROUP BY kind", 403, "no rights to dataset 'secret'"),
    ("SELECT region, sum(pid), count(*) FROM persons GROUP BY region", 400, "unknown column 'pid'"),
    ("SELECT region, sum(age), count(*) FROM persons GROUP BY region", 400, "not a measure"),
    ("SELECT region, count(1) FROM persons GROUP BY region", 400, "only count(*)"),
    ("SELECT region, count(*) FROM persons GROUP BY region HAVING count(*) < 5", 400, "HAVING"),
    ("SELECT region, count(*) FROM persons GROUP BY region LIMIT 1 OFFSET 1", 400, "OFFSET"),
    ("SELECT region, count(*) FROM persons GROUP BY region UNION ALL SELECT region, count(*) FROM persons "
     "GROUP BY region", 400, "UNION"),
    ("SELECT region, count(*) FROM persons WHERE age IN (SELECT 19) GROUP BY region", 400, "subqueries"),
    ("SELECT region, count(*) FROM persons WHERE age = CAST(19 AS INTEGER) GROUP BY region", 400, "casts"),
    ("SELECT region, count(*) FROM persons GROUP BY region; DROP TABLE persons", 400, "one statement"),
    ("SELECT region, count(*) FROM persons /* x */ GROUP BY region", 400, "comments"),
    # literals that are not plain codes
    ("SELECT region, count(*) FROM persons WHERE 'R3' = region GROUP BY region", 400, "plain column names"),
    ("SELECT region, count(*) FROM persons WHERE region = $1 GROUP BY region", 400, "literals only"),
    ("SELECT region, count(*) FROM persons WHERE region = 'R' || '1' GROUP BY region", 400, "literals only"),
    ("SELECT region, count(*) FROM persons WHERE region = E'R\\x31' GROUP BY region", 400, "is an escape string"),
    ("SELECT region, count(*) FROM persons WHERE region = U&'\\0052\\0031' GROUP BY region", 400, "literals only"),
    ("SELECT region, count(*) FROM persons WHERE region = $$R1$$ GROUP BY region", 400,
     "is a PostgreSQL dollar-quoted string"),
    ("SELECT region, count(*) FROM persons WHERE age = 19.0 GROUP BY region", 400, "literals only"),
    ("SELECT region, count(*) FROM persons WHERE age <> 1e1 GROUP BY region", 400, "literals only"),
    ("SELECT region, count(*) FROM persons WHERE region = 'R1\u2028' GROUP BY region", 400, "U+2028"),
    ('SELECT region, count(*) AS "x\ny" FROM persons GROUP BY region', 400, "printable"),
    # size
    ("SELECT region, count(*) FROM persons WHERE " + "(" * 900 + "region = 'R1'" + ")" * 900 + " GROUP BY region",
     400, "nested too deeply"),
    ("SELECT region, count(*) FROM persons GROUP BY CUBE(" + ", ".join(["region", "sex"] * 7) + ")", 400,
     "CUBE of 14 elements"),
    ("SELECT region, sex, agegroup, count(*) FROM persons GROUP BY CUBE(region, sex, agegroup, region, sex, agegroup, "
     "region, sex, agegroup, region, sex, agegroup), CUBE(region, sex)", 400, "grouping sets"),
    ("SELECT municipality, age, agegroup, sex, count(*) FROM persons GROUP BY CUBE(municipality, age, agegroup, sex)",
     400, "cells"),
]


@pytest.mark.parametrize(("sql", "status", "message"), REFUSED, ids=[f"r{k}" for k in range(len(REFUSED))])
def test_validator_refuses(served, sql, status, message):
    r = _query(served, sql)
    assert r.status_code == status, r.text
    assert message in r.json()["error"]


def test_from_first_and_case_tricks_are_the_same_query(served):
    """DuckDB's FROM-first form, upper-case names and dataset-qualified columns are the same query,
    and give the same protected cells."""
    plain = _rows(served, "SELECT region, count(*) FROM persons GROUP BY region")
    for sql in ["FROM persons SELECT region, count(*) GROUP BY region",
                "select REGION, COUNT(*) from PERSONS group by Region",
                "SELECT persons.region, count(*) FROM persons GROUP BY persons.region"]:
        assert _rows(served, sql) == plain
    r1 = _rows(served, "SELECT region, count(*) FROM persons WHERE region = 'R1' GROUP BY region")
    assert _rows(served, "SELECT region, count(*) FROM persons WHERE region IN ['R1'] GROUP BY region") == r1


# -- the minimum-population rule: differencing by one record through filters ---------------------
ISOLATING = [
    "WHERE age <> 19",
    "WHERE age NOT IN (19)",
    "WHERE age IN (19, 999)",
    "WHERE age = 1_9",
    "WHERE age NOT IN (" + ", ".join(str(a) for a in range(19)) + ")",
    "WHERE age IN (18, 19) AND age <> 18",
    "WHERE region = 'R3' AND age <> 19",
    "WHERE sex = 'F' AND region = 'R3' AND age <> 19",
    "WHERE region = 'R3' AND municipality <> 'R3-1' AND age NOT IN (19)",
    "WHERE agegroup = 'a15-19' AND age <> 19",
    "WHERE sex NOT IN ('F', 'M')",
]


@pytest.mark.parametrize("where", ISOLATING)
def test_filters_isolating_one_record_are_refused_with_one_message(served, where):
    r = _query(served, f"SELECT sex, count(*) FROM persons {where} GROUP BY sex")
    assert r.status_code == 400
    # the same words whatever the true count: the population rule's, or the rule that a filter of
    # several values (or an exclusion) must be on a grouped dimension, which looks at no data
    assert r.json()["error"].startswith(MIN_POP) or r.json()["error"].startswith(SET_FILTER)


@pytest.mark.parametrize("filters", [{"age": [19]}, {"age": list(range(19))}, {"region": "R3", "age": 19},
                                     {"sex": ["X"]}])
def test_table_filters_isolating_one_record_are_refused(served, filters):
    r = _post(served, "/v1/table", {"dataset": "persons", "dims": ["sex"], "filters": filters})
    assert r.status_code == 400
    assert r.json()["error"].startswith(MIN_POP) or "several values may only be" in r.json()["error"]


def test_odd_table_filter_values_stay_codes(served):
    """Quotes, NUL bytes, line separators and long values in a table request's filters are codes that
    match no record: the table is the one of 'R1' alone (the population rule and the scan agree)."""
    full = _post(served, "/v1/table", {"dataset": "persons", "dims": ["region", "sex"]}).json()
    r1 = [row for row in full["rows"] if row[0] == "R1" and row[2] == 1]
    for odd in ["x'); DROP TABLE persons; --", "R2\x00x", "R2'", "\\", "\u2028", "\u0158" * 20000, '"',
                "R1' OR '1'='1", 10 ** 40]:
        body = {"dataset": "persons", "dims": ["region", "sex"], "filters": {"region": ["R1", odd]}}
        assert _post(served, "/v1/table", body).json()["rows"] == r1
        alone = _post(served, "/v1/table", {"dataset": "persons", "dims": ["sex"], "filters": {"region": odd}})
        assert alone.status_code == 400 and alone.json()["error"].startswith(MIN_POP)


def test_bound_parameters_cannot_isolate_one_record(served):
    with _pg(served, autocommit=True) as conn:
        for value in [19, "19"]:
            with pytest.raises(psycopg.errors.SyntaxErrorOrAccessRuleViolation, match="minimum-population"):
                conn.execute("SELECT sex, count(*) FROM persons WHERE age = %s GROUP BY sex", [value])
        for value in ["R1\\", "R1\\'", "R1' OR region <> 'x", "R1'); SELECT 1; --"]:  # one code, no records
            with pytest.raises(psycopg.errors.SyntaxErrorOrAccessRuleViolation, match="minimum-population"):
                conn.execute("SELECT sex, count(*) FROM persons WHERE region = %s GROUP BY sex", [value])


def test_two_accepted_filters_do_not_single_out_one_record(served):
    """The attack the rule misses: two filters on different dimensions (age nests in agegroup)
    whose populations differ by one record. Cells without that record are the same records and
    get the same noise, so they agree exactly; cells with her differ. The differing cells give
    her region, municipality and sex; the differences of their sums are her income plus a whole
    multiple of one noise step, so her income is on the lattice the differences span."""
    cube = ("SELECT region, municipality, sex, count(*) AS n, sum(income) AS s FROM persons WHERE {} "
            "GROUP BY CUBE(region, municipality, sex)")
    a = _query(served, cube.format("agegroup = 'a15-19'"))
    b = _query(served, cube.format("age IN (15, 16, 17, 18)"))
    if a.status_code == 400 or b.status_code == 400:
        return  # one of the pair is refused: the hole is closed
    [(region, municipality, sex, income)] = _truth(
        served, "SELECT region, municipality, sex, income FROM persons WHERE age = 19")
    differing = [(x, y) for x, y in zip(a.json()["rows"], b.json()["rows"]) if x != y]
    located = all(x[0] in (None, region) and x[1] in (None, municipality) and x[2] in (None, sex)
                  for x, _ in differing)
    sums = sorted({round(x[4] - y[4], 6) for x, y in differing if x[4] is not None and y[4] is not None})
    step = min((v - u for u, v in zip(sums, sums[1:])), default=0.0)
    on_lattice = step > 0 and min(abs((income - sums[0]) / step - k) for k in range(-50, 51)) < 1e-6
    assert not (differing and located and on_lattice)


def test_the_population_rule_verdict_does_not_locate_a_record(served):
    """'municipality = M AND age <> 19' removes, by its age condition, the records aged 19 in M:
    none (passes) or one (refused), while 'municipality = M' alone passes for every M. The verdicts
    must not depend on which M holds a record aged 19. (In this database the cell (19, R3-0) is
    also published, as 3; the verdict is exact where cells are not: a blank cell, or a union of
    cells that no table publishes.)"""
    municipalities = [f"R{r}-{k}" for r in (1, 2, 3) for k in range(4)]
    sql = "SELECT sex, count(*) FROM persons WHERE municipality = '{}'{} GROUP BY sex"
    assert {_query(served, sql.format(m, "")).status_code for m in municipalities} == {200}
    verdicts = {m: _query(served, sql.format(m, " AND age <> 19")).status_code for m in municipalities}
    [(municipality,)] = _truth(served, "SELECT municipality FROM persons WHERE age = 19")
    assert len(set(verdicts.values())) == 1, f"refused only for {[m for m, v in verdicts.items() if v == 400]}, " \
        f"where the 19-year-old lives ({municipality})"


# -- the same cell, the same value, everywhere; blank cells stay blank -----------------------------
def test_one_cell_one_value_across_fronts_filters_and_hierarchies(served):
    """R3 (and R3 x F) through GROUP BY, WHERE, ROLLUP, table requests with and without the
    municipality hierarchy, and psycopg: one count and one sum each (no averaging)."""
    r3 = {tuple(x) for x in [
        _rows(served, "SELECT region, count(*), sum(income) FROM persons GROUP BY region")[2][1:],
        _rows(served, "SELECT count(*), sum(income) FROM persons WHERE region = 'R3'")[0],
        _rows(served, "SELECT sex, count(*), sum(income) FROM persons WHERE region IN ('R3') "
                      "GROUP BY ROLLUP(sex)")[2][1:],
    ]}
    for body, key in [({"dims": ["municipality"]}, ("R3", 1)),
                      ({"dims": ["region", "sex"]}, ("R3", "Total", 1, 0)),
                      ({"dims": ["sex"], "filters": {"region": "R3"}}, ("Total", 0))]:
        answer = _post(served, "/v1/table", {"dataset": "persons", "measure": "income", **body}).json()
        k = len(key)
        [cell] = [tuple(row[k:k + 2]) for row in answer["rows"] if tuple(row[:k]) == key]
        r3.add(cell)
    with _pg(served, autocommit=True) as conn:
        r3.add(conn.execute("SELECT count(*), sum(income) FROM persons WHERE region = %s", ["R3"]).fetchone())
    assert len(r3) == 1


def test_blank_cells_are_blank_in_every_format_and_front(served):
    """The cell (age 19, M) holds no record; the cell (19, F) holds one: both perturbed counts below
    the threshold must be blank (null) with their sums and means, everywhere."""
    sql = "SELECT age, sex, count(*) AS n, sum(income) AS s, avg(income) AS a FROM persons GROUP BY age, sex"
    rows = _rows(served, sql)
    assert all(n is None or n >= F.THRESHOLD for _, _, n, _, _ in rows)
    assert all((s is None and a is None) for _, _, n, s, a in rows if n is None)
    blank = {(age, sex) for age, sex, n, _, _ in rows if n is None}
    assert blank  # the test database has blank cells
    csv = _post(served, "/v1/query", {"sql": sql}, params={"format": "csv"}).text.splitlines()
    for line in csv[1:]:
        age, sex, n, s, a = line.split(",")
        assert ((age, sex) in blank) == (n == "" and s == "" and a == "")
    with _pg(served, autocommit=True) as conn:
        assert [list(r) for r in conn.execute(sql).fetchall()] == rows


# -- cache and rights ------------------------------------------------------------------------------
def test_cache_does_not_cross_rights(served):
    """bob (every dimension) asks first; alice (no age) and erin (municipality without region) ask the
    same: alice is refused, erin gets the flat municipality, not bob's cached region level."""
    sql = "SELECT age, count(*) FROM persons GROUP BY age"
    assert _query(served, sql).status_code == 200
    assert _query(served, sql, "alice").status_code == 403
    body = {"dataset": "persons", "dims": ["municipality", "sex"]}
    bob = _post(served, "/v1/table", body).json()["rows"]
    erin = _post(served, "/v1/table", body, "erin").json()["rows"]
    assert {r[0] for r in bob} >= {"R1", "R2", "R3"}
    assert not {r[0] for r in erin} & {"R1", "R2", "R3"}
    r = _post(served, "/v1/table", {"dataset": "persons", "dims": ["region"], "formula": "region*age"}, "alice")
    assert r.status_code == 400 and "age" in r.json()["error"]  # a formula cannot reach a dimension either
    assert _post(served, "/v1/table", {"dataset": "persons", "dims": ["sex"], "filters": {"region": "R1"}},
                 "erin").status_code == 403


# -- tokens, headers, bodies, paths ---------------------------------------------------------------
@pytest.mark.parametrize("header", ["Basic {t}", "{t}", "Bearer {t}x", "Bearer", "Bearer ptk_" + "a" * 600,
                                    "Bearer tok-carol-expired-77aa", "Bearer tok-dave-revoked-0c3d"])
def test_token_tricks_are_401(served, header):
    r = httpx.get(served["url"] + "/v1/catalog", headers={"Authorization": header.format(t=served["tokens"]["bob"])})
    assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
    assert served["tokens"]["bob"] not in r.text


def test_a_second_authorization_header_does_not_help(served):
    headers = [("Authorization", "Bearer nope"), ("Authorization", "Bearer " + served["tokens"]["bob"])]
    assert httpx.get(served["url"] + "/v1/catalog", headers=headers).status_code == 401


def test_bodies_too_large_or_malformed(served):
    token = {"Authorization": f"Bearer {served['tokens']['bob']}"}
    big = b'{"sql": "' + b"x" * (F.MAX_BODY + 10) + b'"}'
    assert httpx.post(served["url"] + "/v1/query", content=big, headers=token).status_code == 413
    chunks = (b"x" * 8192 for _ in range(F.MAX_BODY // 8192 + 2))  # no Content-Length: counted while read
    assert httpx.post(served["url"] + "/v1/query", content=chunks, headers=token).status_code == 413
    deep = b'{"sql": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    r = httpx.post(served["url"] + "/v1/query", content=deep, headers=token)
    assert r.status_code == 400
    r = httpx.post(served["url"] + "/v1/query", content=b'{"sql": "\xff"}', headers=token)
    assert r.status_code == 400


@pytest.mark.parametrize("path", ["/static/../app.py", "/static/%2e%2e/app.py", "/static/..%2fapp.py",
                                  "/static/%2e%2e%2f%2e%2e%2fserve.toml", "/serve.toml", "/audit.jsonl"])
def test_no_path_outside_the_static_folder(served, path):
    r = httpx.get(served["url"] + path)
    assert r.status_code == 404
    assert "ptable" not in r.text and "import " not in r.text


def test_audit_log_cannot_be_forged_and_holds_no_secret(served):
    """A query with newlines and a JSON object inside stays one audit line; no token, seed or
    p-table parameter is in the log, and none in any error message."""
    before = served["audit"].read_text(encoding="utf-8").count("\n")
    forged = 'SELECT region, count(*) FROM persons GROUP BY region\n{"user":"admin","status":200}\n'
    r = _query(served, forged)
    assert r.status_code == 400
    text = served["audit"].read_text(encoding="utf-8")
    lines = text.split("\n")[:-1]
    assert len(lines) == before + 1
    assert all(json.loads(line)["user"] != "admin" for line in lines)
    for secret in SECRETS + list(served["tokens"].values()):
        assert secret not in text
        assert secret not in r.text


def test_audit_lines_hold_no_unicode_line_break(served):
    r = _query(served, "SELECT region, count(*) FROM persons WHERE region = 'R1\u2028\x85' GROUP BY region")
    assert r.status_code == 400
    text = served["audit"].read_text(encoding="utf-8")
    assert len(text.splitlines()) == text.count("\n")


# -- the PostgreSQL front --------------------------------------------------------------------------
def _msg(kind: bytes, payload: bytes) -> bytes:
    return kind + struct.pack("!i", len(payload) + 4) + payload


def _raw_login(served, user="bob") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", served["service"].pg_port), timeout=20)
    body = struct.pack("!i", 196608) + b"user\x00" + user.encode() + b"\x00database\x00protab\x00\x00"
    s.sendall(struct.pack("!i", len(body) + 4) + body)
    assert s.recv(9)[:1] == b"R"
    s.sendall(_msg(b"p", served["tokens"][user].encode() + b"\x00"))
    _read_until_ready(s)
    return s


def _read_until_ready(s: socket.socket) -> bytes:
    buf = b""
    while not buf.endswith(b"Z\x00\x00\x00\x05I"):
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        buf += chunk
    return buf


def test_pgwire_login_needs_the_users_own_token(served):
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(host="127.0.0.1", port=served["service"].pg_port, dbname="protab", user="alice",
                        password=served["tokens"]["bob"], connect_timeout=10)
    text = served["audit"].read_text(encoding="utf-8")
    assert served["tokens"]["bob"] not in text


def test_pgwire_garbage_does_not_break_the_service(served):
    for junk in [b"\x00\x00\x00\x08\x04\xd2\x16\x2f" * 3, b"\xff" * 64, b"\x00\x00\x00\x03", b"GET / HTTP/1.1\r\n\r\n"]:
        with socket.create_connection(("127.0.0.1", served["service"].pg_port), timeout=10) as s:
            s.sendall(junk)
            s.shutdown(socket.SHUT_WR)
            s.recv(1024)
    s = _raw_login(served)
    s.sendall(_msg(b"Q", b"SELECT region, count(*) FROM persons GROUP BY region\xff\x00"))
    assert b"E" in _read_until_ready(s)[:1]
    s.close()
    with _pg(served, autocommit=True) as conn:
        assert len(conn.execute("SELECT region, count(*) FROM persons GROUP BY region").fetchall()) == 3


def test_pgwire_deep_nesting_is_refused_like_http(served):
    deep = "SELECT region, count(*) FROM persons WHERE " + "(" * 900 + "region = %s" + ")" * 900 + " GROUP BY region"
    with _pg(served, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.SyntaxErrorOrAccessRuleViolation, match="nested too deeply"):
            conn.execute(deep, ["R1"])


def test_pgwire_unauthenticated_sockets_cannot_lock_analysts_out(served):
    idle = [socket.create_connection(("127.0.0.1", served["service"].pg_port), timeout=10) for _ in range(64)]
    try:
        time.sleep(0.3)
        with _pg(served, autocommit=True) as conn:
            assert len(conn.execute("SELECT region, count(*) FROM persons GROUP BY region").fetchall()) == 3
    finally:
        for s in idle:
            s.close()
        time.sleep(0.3)


def test_pgwire_prepared_statements_are_bounded(served):
    s = _raw_login(served)
    sql = ("SELECT region, count(*) FROM persons WHERE region IN (" + ",".join(["'R1'"] * 9000)
           + ") GROUP BY region").encode()
    try:
        before = served["service"].rss_kib()
        for k in range(1000):  # 1000 x 45 kB
            s.sendall(_msg(b"P", f"s{k}".encode() + b"\x00" + sql + b"\x00" + struct.pack("!h", 0)))
        s.sendall(_msg(b"S", b""))
        _read_until_ready(s)
        grown_mib = (served["service"].rss_kib() - before) / 1024
    finally:
        s.close()
    assert grown_mib < 20


# -- protab publish --------------------------------------------------------------------------------
PUBLISH = """
database = "micro.duckdb"
[ptable]
maximum_entropy = {{ D = 5, V = {v}, js = 2 }}
[magnitude]
ptable = {{ maximum_entropy = {{ D = 10, V = {vm}, step = 2, icat = [1, 5, 10], optim = 4 }} }}
fp = 100
[[tables]]
name = "by_age"
source = "persons"
dims = ["age", "sex"]
sums = ["income"]
threshold = 3
[[tables]]
name = "by_muni"
source = "persons"
dims = ["municipality", "sex"]
"""


def test_publish_holds_protected_tables_only(served, capsys):
    from protab import cli

    folder = served["folder"]
    request = folder / "publish.toml"
    request.write_text(PUBLISH.format(v=F.PTABLE["V"], vm=F.MAGNITUDE["V"]), encoding="utf-8")
    target = folder / "published.duckdb"
    assert cli.main(["publish", str(request), "--to", str(target)]) == 0
    printed = capsys.readouterr()
    with duckdb.connect(str(target), read_only=True) as con:
        def one(sql):
            return sorted(r[0] for r in con.execute(sql).fetchall())
        assert one("SELECT table_name FROM duckdb_tables()") == ["by_age", "by_muni", "protab_published", "protab_run"]
        assert one("SELECT view_name FROM duckdb_views() WHERE NOT internal") == ["protab_catalog"]
        assert one("SELECT function_name FROM duckdb_functions() WHERE NOT internal") == []
        assert one("SELECT name FROM duckdb_secrets()") == []
        assert one("SELECT sequence_name FROM duckdb_sequences()") == []
        assert one("SELECT type_name FROM duckdb_types() WHERE NOT internal") == []
        assert one("SELECT index_name FROM duckdb_indexes()") == []
        assert one("SELECT database_name FROM duckdb_databases() WHERE NOT internal") == ["published"]
        cols = set(one("SELECT column_name FROM duckdb_columns() WHERE NOT internal"))
        assert cols == {"age", "sex", "age_level", "sex_level", "n_pert", "income_pert", "income_mean_pert",
                        "municipality", "municipality_level", "table_name", "cells", "method",
                        "run_id", "protab_version", "created", "sha256"}  # protab_run: the run's fingerprint
        blank = con.execute("SELECT n_pert, income_pert, income_mean_pert FROM by_age WHERE age = '19' "
                            "AND sex = 'M'").fetchall()
        assert blank == [(None, None, None)]  # no record: blank like a small cell
    raw = target.read_bytes()
    for secret in SECRETS:
        assert secret.encode() not in raw
        assert secret not in printed.out + printed.err
    for name in [b"pid", b"rkey", b"protab_ptable", b"hours"]:  # ids, keys and unpublished columns
        assert name not in raw
