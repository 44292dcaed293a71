"""The PostgreSQL wire-protocol front of the query service (issue 13): the real service
(``protab serve --pg-port``: HTTP and PostgreSQL on one engine) in a subprocess, queried
with psycopg and psql; its answers must equal those of the HTTP API (which test_serve_app checks
against ``Session.cell_key``), refusals must be PostgreSQL errors, every statement audited."""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest
import serve_fixtures as F

psycopg = pytest.importorskip("psycopg")
httpx = pytest.importorskip("httpx")

ROLLUP = "SELECT region, sex, count(*) AS n FROM persons GROUP BY ROLLUP(region, sex) ORDER BY region, sex"
# filters of several values only on dimensions grouped by (the service's rule)
SUMS = ("SELECT region, agegroup, count(*) AS n, sum(income) AS s, avg(income) AS a FROM persons "
        "WHERE agegroup IN ('a0-4', 'a5-9') GROUP BY region, agegroup ORDER BY region, agegroup")
FILTERED = ("SELECT region, agegroup, count(*) AS n FROM persons WHERE sex = 'F' AND agegroup IN ('a0-4', 'a5-9') "
            "GROUP BY region, agegroup ORDER BY region, agegroup")
BOUND = ("SELECT region, agegroup, count(*) AS n FROM persons WHERE sex = %s AND agegroup IN (%s, %s) "
         "GROUP BY region, agegroup ORDER BY region, agegroup")


class PgServer(F.Server):
    """The service with its PostgreSQL front (tests/serve/serve_fixtures.py)."""

    def __init__(self, config: Path, timeout: float = 60) -> None:
        super().__init__(config, timeout=timeout, pg=True)

    def dsn(self, user: str, token: str) -> str:
        return psycopg.conninfo.make_conninfo(host="127.0.0.1", port=self.pg_port, dbname="protab", user=user,
                                              password=token, connect_timeout=10)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    yield from F.serve(tmp_path_factory, PgServer, "pgwire")


def _connect(served, user="bob", **kw):
    return psycopg.connect(served["server"].dsn(user, served["tokens"][user]), **kw)


def _http(served, sql, user="bob"):
    r = httpx.post(served["server"].url + "/v1/query", json={"sql": sql}, timeout=30,
                   headers={"Authorization": f"Bearer {served['tokens'][user]}"})
    assert r.status_code == 200, r.text
    body = r.json()
    return body["columns"], [tuple(row) for row in body["rows"]]


@pytest.mark.parametrize("sql", [ROLLUP, SUMS, FILTERED])
@pytest.mark.parametrize("binary", [False, True])
def test_answers_equal_the_http_api(served, sql, binary):
    columns, rows = _http(served, sql)
    with _connect(served, autocommit=True) as conn:
        cur = conn.cursor(binary=binary)
        cur.execute(sql)
        assert [d.name for d in cur.description] == columns
        assert cur.fetchall() == rows
    assert len(rows) >= 3


def test_alice_rights_apply_as_over_http(served):
    sql = "SELECT municipality, count(*) AS n FROM persons WHERE region = 'R1' GROUP BY municipality ORDER BY municipality"
    with _connect(served, "alice", autocommit=True) as conn:
        assert conn.execute(sql).fetchall() == _http(served, sql, "alice")[1]
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="age"):
            conn.execute("SELECT age, count(*) FROM persons GROUP BY age")


def test_types_follow_the_measures(served):
    with _connect(served, autocommit=True) as conn:
        cur = conn.execute(SUMS)
        oids = {d.name: d.type_code for d in cur.description}
    assert oids == {"region": 25, "agegroup": 25, "n": 20, "s": 701, "a": 701}  # text, int8, float8 of pg_type


def test_bound_parameters_equal_literals(served):
    with _connect(served) as conn:
        bound = conn.execute(BOUND, ["F", "a0-4", "a5-9"]).fetchall()
        assert bound == conn.execute(FILTERED).fetchall() == _http(served, FILTERED)[1]
        limited = conn.execute("SELECT region, count(*) AS n FROM persons GROUP BY region ORDER BY region LIMIT %s",
                               [2]).fetchall()
        assert [r[0] for r in limited] == ["R1", "R2"]
        for _ in range(6):  # psycopg prepares a statement from its 5th execution (Describe of a statement)
            prepared = conn.execute(BOUND, ["F", "a0-4", "a5-9"], prepare=True).fetchall()
        assert prepared == bound
        for _ in range(6):  # a whole-number parameter in LIMIT, prepared on the server too
            top = conn.execute("SELECT region, count(*) AS n FROM persons GROUP BY region ORDER BY region LIMIT %s",
                               [2], prepare=True).fetchall()
        assert top == limited


def test_a_bound_value_is_a_code_not_sql(served):
    """A value with quotes stays one code of the filter: no records, so the population rule refuses it."""
    with _connect(served, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.SyntaxErrorOrAccessRuleViolation, match="minimum-population"):
            conn.execute("SELECT region, count(*) AS n FROM persons WHERE sex = %s GROUP BY region",
                         ["F' OR sex <> 'F"])


def test_bind_rewrites_the_tree_not_the_text():
    from sqlglot import exp, parse_one

    from protab.serve.pgproto import _bind

    value = "it's $2 -- x"
    sql = _bind("SELECT sex, count(*) FROM persons WHERE region = $1 GROUP BY sex LIMIT $2", [0, 20], [0, 0],
                [value.encode(), b"7"])
    tree = parse_one(sql, read="duckdb")
    eq = tree.find(exp.EQ)
    assert eq.expression.is_string and eq.expression.this == value
    assert tree.args["limit"].expression.this == "7"


REFUSED = [
    ("SELECT * FROM persons", psycopg.errors.SyntaxErrorOrAccessRuleViolation, "SELECT * is not accepted"),
    ("SELECT kind, count(*) FROM secret GROUP BY kind", psycopg.errors.InsufficientPrivilege,
     "no rights to dataset 'secret'"),
    ("SELECT pid, count(*) FROM persons GROUP BY pid", psycopg.errors.SyntaxErrorOrAccessRuleViolation, "pid"),
    ("SELECT typname FROM pg_catalog.pg_type", psycopg.errors.SyntaxErrorOrAccessRuleViolation,
     "catalogue queries (pg_catalog, information_schema) are answered only as psql's"),
    ("DELETE FROM persons", psycopg.errors.SyntaxErrorOrAccessRuleViolation, "only a SELECT"),
    ("SELECT region, count(*) FROM persons WHERE age = 19 GROUP BY region",
     psycopg.errors.SyntaxErrorOrAccessRuleViolation, "minimum-population"),
    ("SHOW data_directory", psycopg.errors.UndefinedObject, "unrecognized configuration parameter"),
]


@pytest.mark.parametrize(("sql", "error", "message"), REFUSED)
def test_refusals_are_postgresql_errors(served, sql, error, message):
    with _connect(served) as conn:
        with pytest.raises(error, match=re.escape(message)):
            conn.execute(sql)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            conn.execute(ROLLUP)
        conn.rollback()  # the connection goes on after the error
        assert conn.execute(ROLLUP).fetchall() == _http(served, ROLLUP)[1]


def test_server_side_cursors_are_refused_and_the_connection_goes_on(served):
    with _connect(served) as conn:
        with pytest.raises(psycopg.errors.SyntaxErrorOrAccessRuleViolation, match="DECLARE"):
            with conn.cursor(name="c1") as cur:
                cur.execute(ROLLUP)
        conn.rollback()
        assert len(conn.execute(ROLLUP).fetchall()) == 10


@pytest.mark.parametrize(("user", "token", "message"), [
    ("bob", "not-a-token", "invalid token"),
    ("carol", "carol", "expired"),
    ("dave", "dave", "revoked"),
    ("alice", "alice_revoked", "revoked"),
    ("alice", "bob", "the token is not 'alice'"),
])
def test_bad_logins_are_refused(served, user, token, message):
    secret = served["tokens"].get(token, token)
    with pytest.raises(psycopg.OperationalError, match=f"password authentication failed for user '{user}'.*{message}"):
        psycopg.connect(served["server"].dsn(user, secret))


def test_session_statements_of_clients(served):
    with _connect(served) as conn:
        conn.execute("SET extra_float_digits = 3")
        conn.execute("SET application_name = 'DBeaver 24'")
        assert conn.execute("SHOW standard_conforming_strings").fetchone() == ("on",)
        assert conn.execute("SELECT version()").fetchone()[0].startswith("PostgreSQL 16")
        assert conn.execute("select current_schema()").fetchone() == ("public",)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS  # psycopg sent BEGIN
        conn.commit()
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.info.server_version == 160000


def test_statements_are_audited_without_tokens(served):
    with _connect(served, "erin", autocommit=True) as conn:
        conn.execute("SELECT sex, count(*) AS n FROM persons GROUP BY sex").fetchall()
        with pytest.raises(psycopg.Error):
            conn.execute("SELECT region, count(*) FROM persons GROUP BY region")
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(served["server"].dsn("erin", "tok-erin-wrong"))
    text = served["audit"].read_text(encoding="utf-8")
    lines = [json.loads(x) for x in text.splitlines()]
    pg = [x for x in lines if x["endpoint"] == "PGWIRE query"]
    ok = [x for x in pg if x["user"] == "erin" and x["accepted"]]
    assert ok and ok[-1]["cells"] == 2 and "GROUP BY" in ok[-1]["query"]
    assert any(x["user"] == "erin" and x["status"] == 403 for x in pg)
    assert any(x["status"] == 401 and "'erin'" in x["reason"] for x in pg)
    for tok in served["tokens"].values():
        assert tok not in text
    assert "tok-erin-wrong" not in text


def test_four_concurrent_clients_agree(served):
    expected = {s: _http(served, BOUND.replace("%s", "'{}'").format(s, "a0-4", "a5-9"))[1] for s in "FM"}
    results, errors = {}, []

    def client(k):
        try:
            with _connect(served, autocommit=True) as conn:
                results[k] = [(s, conn.execute(BOUND, [s, "a0-4", "a5-9"]).fetchall()) for s in "FMFMFM"]
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert len(results) == 4
    for answers in results.values():
        for s, rows in answers:
            assert rows == expected[s]


def test_ssl_request_is_declined_in_the_protocol(served):
    with socket.create_connection(("127.0.0.1", served["server"].pg_port), timeout=5) as s:
        s.sendall(struct.pack("!ii", 8, 80877103))
        assert s.recv(1) == b"N"


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql (postgresql-client) is not installed")
def test_psql(served):
    server = served["server"]
    env = {"PGPASSWORD": served["tokens"]["bob"], "PATH": "/usr/bin:/bin"}
    base = ["psql", "-h", "127.0.0.1", "-p", str(server.pg_port), "-U", "bob", "-d", "protab", "-X", "-A", "-t",
            "-F", ","]
    r = subprocess.run(base + ["-c", ROLLUP], capture_output=True, text=True, env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    rows = [tuple(line.split(",")) for line in r.stdout.splitlines()]
    expected = [tuple("" if v is None else str(v) for v in row) for row in _http(served, ROLLUP)[1]]
    assert rows == expected
    r = subprocess.run(base + ["-c", "SELECT * FROM persons"], capture_output=True, text=True, env=env, timeout=30)
    assert r.returncode == 1 and "ERROR:  SELECT * is not accepted" in r.stderr


def test_stops_cleanly_with_clients_connected(tmp_path):
    db = F.build_database(tmp_path / "micro.duckdb", persons=500)
    config, tokens = F.write_setup(tmp_path, db, min_population=1)
    server = PgServer(config)
    try:
        conn = psycopg.connect(server.dsn("bob", tokens["bob"]), autocommit=True)
        assert conn.execute("SELECT sex, count(*) AS n FROM persons GROUP BY sex").fetchall()
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(15) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after its shutdown
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", server.pg_port), timeout=2).close()
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT sex, count(*) AS n FROM persons GROUP BY sex")
        conn.close()
    finally:
        server.stop()
    assert "Traceback" not in server.stderr()


def _fields(payload):
    """The fields of an ErrorResponse: {code letter: text}."""
    return {p[:1].decode(): p[1:].decode() for p in payload.split(b"\x00") if p}


def test_malformed_messages_get_errors_and_the_service_goes_on(served):
    server, token = served["server"], served["tokens"]["bob"]
    with socket.create_connection(("127.0.0.1", server.pg_port), timeout=10) as s:
        params = b"user\x00bob\x00database\x00protab\x00\x00"
        s.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
        assert F.pg_messages(s, until=b"R")[-1] == (b"R", struct.pack("!i", 3))  # cleartext password asked
        s.sendall(F.pg_message(b"p", token.encode() + b"\x00"))
        assert [k for k, _ in F.pg_messages(s)][0] == b"R"
        s.sendall(F.pg_message(b"Q", b"\xff\xfe\x00"))  # not UTF-8
        got = F.pg_messages(s)
        assert got[0][0] == b"E" and _fields(got[0][1])["C"] == "08P01" and got[-1] == (b"Z", b"I")
        s.sendall(F.pg_message(b"B", b"\x00nostmt\x00\x00\x00\x00\x00\x00\x00") + F.pg_message(b"d", b"xx") + F.pg_message(b"S"))
        got = F.pg_messages(s)
        assert [k for k, _ in got] == [b"E", b"Z"]  # after the first error, messages up to Sync are skipped
        assert _fields(got[0][1])["C"] == "26000"
        s.sendall(F.pg_message(b"d", b"xx") + F.pg_message(b"S"))
        got = F.pg_messages(s)
        assert _fields(got[0][1])["C"] == "0A000" and got[-1][0] == b"Z"
        s.sendall(F.pg_message(b"B", b"\x00") + F.pg_message(b"S"))  # truncated Bind
        got = F.pg_messages(s)
        assert _fields(got[0][1])["C"] == "08P01" and got[-1][0] == b"Z"
        s.sendall(F.pg_message(b"Q", ROLLUP.encode() + b"\x00"))
        kinds = [k for k, _ in F.pg_messages(s)]
        assert kinds == [b"T"] + [b"D"] * 10 + [b"C", b"Z"]
        s.sendall(b"Q" + struct.pack("!i", 2**30))  # larger than the service takes: the connection ends
        got = F.pg_messages(s, until=b"never")
        assert got[0][0] == b"E" and _fields(got[0][1])["S"] == "FATAL"
    with _connect(served, autocommit=True) as conn:  # the service goes on
        assert len(conn.execute(ROLLUP).fetchall()) == 10


JDBC_JAR = Path("/usr/share/java/postgresql.jar")  # Debian's libpostgresql-jdbc-java (the driver DBeaver uses)
JDBC_SOURCE = """
import java.sql.*;
public class Probe {
  public static void main(String[] a) throws Exception {
    try (Connection c = DriverManager.getConnection("jdbc:postgresql://127.0.0.1:" + a[0] + "/protab", a[1], a[2])) {
      c.setAutoCommit(false);
      try (PreparedStatement p = c.prepareStatement(a[3])) {
        for (int k = 0; k < 7; k++) {  // the driver prepares on the server from the 5th execution
          p.setString(1, "F");
          try (ResultSet r = p.executeQuery()) {
            StringBuilder b = new StringBuilder("rows");
            while (r.next()) b.append(";").append(r.getString(1)).append(",").append(r.getLong(2));
            System.out.println(b);
          }
        }
      }
      c.commit();
      try (Statement s = c.createStatement()) { s.executeQuery("SELECT * FROM persons"); }
      catch (SQLException e) { System.out.println("refused " + e.getSQLState()); }
    }
  }
}
"""


@pytest.mark.skipif(shutil.which("java") is None or not JDBC_JAR.is_file(),
                    reason="java or Debian's PostgreSQL JDBC driver (libpostgresql-jdbc-java) is not installed")
def test_jdbc_driver(served, tmp_path):
    sql = "SELECT region, count(*) AS n FROM persons WHERE sex = ? GROUP BY region ORDER BY region"
    src = tmp_path / "Probe.java"
    src.write_text(JDBC_SOURCE, encoding="utf-8")
    r = subprocess.run(["java", "-cp", str(JDBC_JAR), str(src), str(served["server"].pg_port), "bob",
                        served["tokens"]["bob"], sql], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    expected = "rows" + "".join(f";{a},{b}" for a, b in _http(served, sql.replace("?", "'F'"))[1])
    assert lines == [expected] * 7 + ["refused 42000"]


# -- limits of the front (the attacks of test_serve_attacks, on small limits) ---------------------
def test_deep_nesting_is_refused_audited_and_the_connection_goes_on(served):
    """900 parentheses around a bound parameter: 42000 at Bind (and at Describe of a prepared
    statement), as over HTTP; an audit line with the user; the connection goes on."""
    deep = "SELECT region, count(*) FROM persons WHERE " + "(" * 900 + "sex = %s" + ")" * 900 + " GROUP BY region"
    with _connect(served, "erin", autocommit=True) as conn:
        for prepare in (False, True):
            with pytest.raises(psycopg.errors.SyntaxErrorOrAccessRuleViolation, match="nested too deeply"):
                conn.execute(deep, ["F"], prepare=prepare)
        assert len(conn.execute("SELECT sex, count(*) AS n FROM persons GROUP BY sex").fetchall()) == 2
    lines = [json.loads(x) for x in served["audit"].read_text(encoding="utf-8").splitlines()]
    assert any(x["user"] == "erin" and x["status"] == 400 and "nested too deeply" in x["reason"] for x in lines)


def test_audit_lines_are_ascii(tmp_path):
    """Unicode line breaks (U+2028, U+2029, U+0085), other non-ASCII text and a lone surrogate are
    escaped: one ASCII line that str.splitlines does not cut, and reads back the same."""
    from protab.serve.audit_log import AuditLog

    text = "WHERE region = 'R1\u2028\u2029\x85\u0158\ud800'"
    log = AuditLog(tmp_path / "a.jsonl")
    log.write(user="bob", query=text)
    log.close()
    raw = (tmp_path / "a.jsonl").read_bytes()
    assert raw.isascii() and raw.count(b"\n") == 1
    assert len(raw.decode("ascii").splitlines()) == 1
    assert json.loads(raw)["query"] == text


@pytest.fixture
def limited(tmp_path, monkeypatch):
    """The front in this process with small limits: 2 connection slots, 1 s to log in, 1 s idle,
    2 connections waiting to log in per address and 4 in all, 8 statements and portals each and
    256 KiB of them per connection."""
    from protab.serve import pgwire
    from protab.serve.audit_log import AuditLog
    from protab.serve.auth import TokenStore
    from protab.serve.broker import Broker
    from protab.serve.config import load_config

    monkeypatch.setattr(pgwire, "MAX_STATEMENTS", 8)
    monkeypatch.setattr(pgwire, "MAX_STORED_BYTES", 1 << 18)
    db = F.build_database(tmp_path / "micro.duckdb", persons=500)
    config, tokens = F.write_setup(tmp_path, db, min_population=1)
    cfg = load_config(config)
    engine, audit = Broker(cfg), AuditLog(tmp_path / "limited.jsonl")
    server = pgwire.PgWireServer(engine, TokenStore(cfg), audit, port=0, max_connections=2, login_seconds=1,
                                 idle_seconds=1, max_waiting=4, max_waiting_per_peer=2)
    port = server.start()
    try:
        yield {"port": port, "tokens": tokens, "audit": tmp_path / "limited.jsonl"}
    finally:
        server.stop()
        engine.close()
        audit.close()


def _limited_connect(limited, user="bob"):
    return psycopg.connect(host="127.0.0.1", port=limited["port"], dbname="protab", user=user,
                           password=limited["tokens"][user], connect_timeout=10, autocommit=True)


def _limited_login(limited, user="bob"):
    s = socket.create_connection(("127.0.0.1", limited["port"]), timeout=10)
    params = b"user\x00" + user.encode() + b"\x00database\x00protab\x00\x00"
    s.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
    assert F.pg_messages(s, until=b"R")[-1] == (b"R", struct.pack("!i", 3))
    s.sendall(F.pg_message(b"p", limited["tokens"][user].encode() + b"\x00"))
    assert F.pg_messages(s)[-1] == (b"Z", b"I")
    return s


def _fatal(sock):
    """The code and message of the FATAL error that ends the connection."""
    got = F.pg_messages(sock, until=b"never")
    assert got and got[0][0] == b"E", got
    fields = _fields(got[0][1])
    assert fields["S"] == "FATAL"
    return fields["C"], fields["M"]


def test_sockets_that_never_log_in_take_no_connection_slot(limited):
    port = limited["port"]
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(3)]
    try:
        code, message = _fatal(idle[0])  # the oldest of three from one address: closed at once
        assert code == "53300" and "waiting to log in" in message
        code, message = _fatal(idle[2])  # the others when their second to log in is over
        assert code == "08P01" and message == "no login within 1 seconds"
    finally:
        for s in idle:
            s.close()
    others = []
    try:  # past 4 waiting in all, the oldest one (of any address) is closed
        for k in range(5):
            s = socket.socket()
            s.settimeout(10)
            s.bind((f"127.0.0.{2 + k}", 0))
            s.connect(("127.0.0.1", port))
            others.append(s)
        assert _fatal(others[0])[0] == "53300"
    finally:
        for s in others:
            s.close()
    with _limited_connect(limited) as a, _limited_connect(limited, "alice"):  # logins take the 2 slots
        with pytest.raises(psycopg.OperationalError, match="too many connections to the protab service"):
            _limited_connect(limited, "erin")
        a.close()
        time.sleep(0.2)
        with _limited_connect(limited, "erin") as e:  # a slot is free again
            assert len(e.execute("SELECT sex, count(*) AS n FROM persons GROUP BY sex").fetchall()) == 2
    lines = [json.loads(x) for x in limited["audit"].read_text(encoding="ascii").splitlines()]
    assert any(x["user"] == "erin" and x["status"] == 503 for x in lines)


def test_idle_sessions_are_closed_and_free_their_slot(limited):
    s1, s2 = _limited_login(limited), _limited_login(limited, "alice")
    try:
        s1.sendall(F.pg_message(b"Q", b"SELECT sex, count(*) AS n FROM persons GROUP BY sex\x00"))
        assert [k for k, _ in F.pg_messages(s1)] == [b"T", b"D", b"D", b"C", b"Z"]
        code, message = _fatal(s1)  # 1 s without a message
        assert code == "57P05" and "idle for more than 1 seconds" in message
        _fatal(s2)
    finally:
        s1.close()
        s2.close()
    with _limited_connect(limited) as a, _limited_connect(limited, "alice") as b:  # both slots are free
        assert a.execute("SELECT current_user").fetchone() == ("bob",)
        assert b.execute("SELECT current_user").fetchone() == ("alice",)


def _parse(name: bytes, sql: bytes) -> bytes:
    return F.pg_message(b"P", name + b"\x00" + sql + b"\x00" + struct.pack("!h", 0))


def test_statements_and_portals_are_capped(limited):
    s = _limited_login(limited)
    try:
        s.sendall(b"".join(_parse(b"s%d" % k, b"SELECT 1") for k in range(9)) + F.pg_message(b"S"))
        got = F.pg_messages(s)
        assert [k for k, _ in got] == [b"1"] * 8 + [b"E", b"Z"]
        fields = _fields(got[8][1])
        assert fields["C"] == "53400" and "already keeps 8 prepared statements" in fields["M"]
        # a statement that replaces its namesake, or one after a Close, fits
        s.sendall(_parse(b"s0", b"SELECT 2") + F.pg_message(b"C", b"Ss1\x00") + _parse(b"s9", b"SELECT 1") + F.pg_message(b"S"))
        assert [k for k, _ in F.pg_messages(s)] == [b"1", b"3", b"1", b"Z"]
        s.sendall(F.pg_message(b"Q", b"DISCARD ALL\x00"))
        assert [k for k, _ in F.pg_messages(s)] == [b"C", b"Z"]
        big = b"SELECT " + b"x" * 60_000  # 4 x 60 kB fit in 256 KiB, the 5th does not
        s.sendall(b"".join(_parse(b"b%d" % k, big) for k in range(5)) + F.pg_message(b"S"))
        got = F.pg_messages(s)
        assert [k for k, _ in got] == [b"1"] * 4 + [b"E", b"Z"]
        fields = _fields(got[4][1])
        assert fields["C"] == "53400" and "more than 0.25 MiB" in fields["M"]
        bind = F.pg_message(b"B", b"p\x00b0\x00" + struct.pack("!hhh", 0, 0, 0))  # portal p of statement b0, no values
        s.sendall(F.pg_message(b"C", b"Sb3\x00") + bind + F.pg_message(b"B", b"q\x00b1\x00" + struct.pack("!hhh", 0, 0, 0))
                  + F.pg_message(b"S"))
        got = F.pg_messages(s)
        assert [k for k, _ in got] == [b"3", b"2", b"E", b"Z"]  # portals count too
        assert _fields(got[2][1])["C"] == "53400"
        s.sendall(bind + F.pg_message(b"S"))  # Sync ended the implicit transaction and its portals
        assert [k for k, _ in F.pg_messages(s)] == [b"2", b"Z"]
    finally:
        s.close()


def test_python_m_pgwire_is_protab_serve_with_the_front(served, capsys):
    """``python -m protab.serve.pgwire`` is ``protab serve --pg-port 5432`` unless a port is given:
    the same checks of its options (here a bad HTTP port, refused before anything starts)."""
    from protab.serve.pgwire import main

    assert main(["--config", str(served["config"]), "--port", "0"]) == 2
    assert "--port must be from 1 to 65535" in capsys.readouterr().err
    assert main(["--config", str(served["config"]), "--pg-port", "70000"]) == 2
    assert "--pg-port must be from 1 to 65535" in capsys.readouterr().err


def test_requests_per_minute_per_user_over_both_fronts(tmp_path):
    """requests_per_minute = 2: bob's third request is refused — 429 with Retry-After over HTTP,
    SQLSTATE 53400 over the PostgreSQL front (one bucket per user, shared by the fronts) — and
    audited; alice still gets her two."""
    db = F.build_database(tmp_path / "micro.duckdb", persons=500)
    config, tokens = F.write_setup(tmp_path, db, min_population=1, requests_per_minute=2)
    server = PgServer(config)
    sql = "SELECT sex, count(*) AS n FROM persons GROUP BY sex"
    try:
        def post(user):
            return httpx.post(server.url + "/v1/query", json={"sql": sql}, timeout=30,
                              headers={"Authorization": f"Bearer {tokens[user]}"})

        assert post("bob").status_code == 200
        with psycopg.connect(server.dsn("bob", tokens["bob"]), autocommit=True) as conn:
            assert conn.execute(sql).fetchall()
            with pytest.raises(psycopg.errors.ConfigurationLimitExceeded, match="at most 2 requests a minute"):
                conn.execute(sql)
        r = post("bob")
        assert r.status_code == 429 and "at most 2 requests a minute" in r.json()["error"]
        assert 1 <= int(r.headers["Retry-After"]) <= 30
        assert [post("alice").status_code for _ in range(3)] == [200, 200, 429]
    finally:
        server.stop()
    lines = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [x["status"] for x in lines if x["user"] == "bob" and x["query"]] == [200, 200, 429, 429]
