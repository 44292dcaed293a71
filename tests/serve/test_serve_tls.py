"""TLS on both fronts of the query service (``protab serve --tls-cert --tls-key``): HTTPS from
uvicorn, and the PostgreSQL front answering SSLRequest and upgrading the connection, so that
psycopg and psql (``sslmode=require``, ``verify-full``) and JDBC (``ssl=true``) log in over TLS;
``require_tls = true`` refuses a start-up in clear (28000) before any password is asked. The
certificate is a self-signed one for 127.0.0.1 and localhost, made here with Debian's
``openssl``. Bad TLS files stop the start-up with an error naming the option and none of the
key's text; odd handshakes end their own connection only."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import ssl
import struct
import subprocess
import time
import warnings
from pathlib import Path

import pytest
import serve_fixtures as F

psycopg = pytest.importorskip("psycopg")
httpx = pytest.importorskip("httpx")

OPENSSL = shutil.which("openssl")
pytestmark = pytest.mark.skipif(OPENSSL is None, reason="openssl (Debian's openssl package) is not installed")

SQL = "SELECT region, count(*) AS n FROM persons GROUP BY region ORDER BY region"
REFUSAL = "this server requires TLS: connect with sslmode=require"
SSL_REQUEST, GSS_REQUEST = struct.pack("!ii", 8, 80877103), struct.pack("!ii", 8, 80877104)
JDBC_JAR = Path("/usr/share/java/postgresql.jar")  # Debian's libpostgresql-jdbc-java


def _pair(folder: Path, name: str, subject: str, san: str | None) -> tuple[Path, Path]:
    """A self-signed certificate and its unencrypted key (P-256), valid for two days."""
    cert, key = folder / f"{name}.pem", folder / f"{name}-key.pem"
    cmd = [OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
           "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", subject]
    if san:
        cmd += ["-addext", f"subjectAltName={san}"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=30)
    return cert, key


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("certs")
    cert, key = _pair(folder, "server", "/CN=localhost", "DNS:localhost,IP:127.0.0.1")
    other_cert, other_key = _pair(folder, "other", "/CN=other", None)
    encrypted = folder / "encrypted-key.pem"
    subprocess.run([OPENSSL, "pkey", "-in", str(key), "-aes256", "-passout", "pass:pw-9f2c", "-out", str(encrypted)],
                   check=True, capture_output=True, timeout=30)
    return {"cert": cert, "key": key, "other_cert": other_cert, "other_key": other_key, "encrypted": encrypted,
            "folder": folder}


def _ca(certs) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(certs["cert"]))


def TLSServer(config: Path, certs: dict, timeout: float = 60) -> F.Server:
    """``python -m protab.serve`` with both fronts over TLS, on free ports; waits for HTTPS."""
    return F.Server(config, timeout=timeout, pg=True, tls=_ca(certs),
                    extra=["--tls-cert", str(certs["cert"]), "--tls-key", str(certs["key"])])


@pytest.fixture(scope="module")
def served(tmp_path_factory, certs):
    folder = tmp_path_factory.mktemp("tls")
    db = F.build_database(folder / "micro.duckdb", persons=500)
    config, tokens = F.write_setup(folder, db, min_population=1, require_tls=True)
    server = TLSServer(config, certs)
    try:
        yield {"server": server, "tokens": tokens, "config": config, "audit": folder / "audit.jsonl", "certs": certs}
    finally:
        server.stop()


def _http_rows(served, sql=SQL):
    r = httpx.post(served["server"].url + "/v1/query", json={"sql": sql}, verify=_ca(served["certs"]), timeout=30,
                   headers={"Authorization": f"Bearer {served['tokens']['bob']}"})
    assert r.status_code == 200, r.text
    return [tuple(row) for row in r.json()["rows"]]


def _pg(served, sslmode, **kw):
    return psycopg.connect(host="127.0.0.1", port=served["server"].pg_port, dbname="protab", user="bob",
                           password=served["tokens"]["bob"], connect_timeout=10, sslmode=sslmode, autocommit=True, **kw)


# -- the HTTP front ---------------------------------------------------------------------------
def test_https_with_the_certificate_as_ca_and_no_plain_http(served):
    rows = _http_rows(served)
    assert [r[0] for r in rows] == ["R1", "R2", "R3"]
    with pytest.raises(httpx.TransportError):
        httpx.get(served["server"].url.replace("https:", "http:") + "/healthz", timeout=5)
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):  # not a certificate of a known CA
        httpx.get(served["server"].url + "/healthz", timeout=5)


def _client(certs, version: ssl.TLSVersion) -> ssl.SSLContext:
    """A client of at most TLS ``version``, willing to go as low as TLS 1.0 (OpenSSL's security level 0)."""
    ctx = _ca(certs)
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # TLS 1.0 and 1.1 are deprecated: the point here
        ctx.minimum_version, ctx.maximum_version = ssl.TLSVersion.TLSv1, version
    return ctx


def test_both_fronts_refuse_tls_below_1_2(served):
    server, certs = served["server"], served["certs"]
    for version, ok in ((ssl.TLSVersion.TLSv1_1, False), (ssl.TLSVersion.TLSv1_2, True)):
        for port, ask in ((server.port, b""), (server.pg_port, SSL_REQUEST)):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                if ask:
                    s.sendall(ask)
                    assert s.recv(1) == b"S"
                if ok:
                    with _client(certs, version).wrap_socket(s, server_hostname="localhost") as t:
                        assert t.version() == "TLSv1.2"
                else:
                    with pytest.raises(ssl.SSLError):
                        _client(certs, version).wrap_socket(s, server_hostname="localhost")


# -- the PostgreSQL front ---------------------------------------------------------------------
@pytest.mark.parametrize("sslmode", ["require", "verify-full"])
def test_psycopg_over_tls(served, sslmode):
    with _pg(served, sslmode, sslrootcert=str(served["certs"]["cert"])) as conn:
        assert conn.pgconn.ssl_in_use
        assert conn.execute(SQL).fetchall() == _http_rows(served)


def test_require_tls_refuses_a_cleartext_login_before_the_password(served):
    with pytest.raises(psycopg.OperationalError, match=REFUSAL):
        _pg(served, "disable")
    with socket.create_connection(("127.0.0.1", served["server"].pg_port), timeout=10) as s:
        params = b"user\x00bob\x00database\x00protab\x00\x00"
        s.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
        got = F.pg_messages(s, until=b"never")
    assert [k for k, _ in got] == [b"E"]  # no AuthenticationCleartextPassword: the token is never asked for
    fields = {p[:1]: p[1:] for p in got[0][1].split(b"\x00") if p}
    assert fields[b"C"] == b"28000" and fields[b"S"] == b"FATAL" and REFUSAL.encode() in fields[b"M"]
    lines = [json.loads(x) for x in served["audit"].read_text(encoding="utf-8").splitlines()]
    assert any(x["status"] == 403 and "not over TLS" in x["reason"] and "'bob'" in x["reason"] for x in lines)


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql (postgresql-client) is not installed")
def test_psql_verify_full_and_refused_in_clear(served):
    server, cert = served["server"], served["certs"]["cert"]
    env = {"PGPASSWORD": served["tokens"]["bob"], "PATH": "/usr/bin:/bin", "HOME": str(served["config"].parent)}
    dsn = f"host=127.0.0.1 port={server.pg_port} dbname=protab user=bob sslrootcert={cert}"
    base = ["psql", "-X", "-A", "-t", "-F", ","]
    r = subprocess.run(base + [dsn + " sslmode=verify-full", "-c", SQL, "-c", "\\conninfo"], capture_output=True,
                       text=True, env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [tuple(x.split(",")) for x in lines[:3]] == [(a, str(b)) for a, b in _http_rows(served)]
    assert "SSL connection (protocol: TLSv1." in r.stdout
    r = subprocess.run(base + [dsn + " sslmode=disable", "-c", SQL], capture_output=True, text=True, env=env, timeout=30)
    assert r.returncode == 2 and REFUSAL in r.stderr


JDBC_SOURCE = """
import java.sql.*;
import java.util.Properties;
public class TlsProbe {
  public static void main(String[] a) throws Exception {
    for (String mode : new String[] {"verify-full", "disable"}) {
      Properties p = new Properties();
      p.setProperty("user", "bob");
      p.setProperty("password", a[1]);
      p.setProperty("ssl", mode.equals("disable") ? "false" : "true");
      p.setProperty("sslmode", mode);
      p.setProperty("sslrootcert", a[2]);
      try (Connection c = DriverManager.getConnection("jdbc:postgresql://127.0.0.1:" + a[0] + "/protab", p);
           PreparedStatement s = c.prepareStatement(a[3]); ResultSet r = s.executeQuery()) {
        StringBuilder b = new StringBuilder("rows");
        while (r.next()) b.append(";").append(r.getString(1)).append(",").append(r.getLong(2));
        System.out.println(b);
      } catch (SQLException e) { System.out.println("refused " + e.getSQLState() + " " + e.getMessage()); }
    }
  }
}
"""


@pytest.mark.skipif(shutil.which("java") is None or not JDBC_JAR.is_file(),
                    reason="java or Debian's PostgreSQL JDBC driver (libpostgresql-jdbc-java) is not installed")
def test_jdbc_ssl_true(served, tmp_path):
    src = tmp_path / "TlsProbe.java"
    src.write_text(JDBC_SOURCE, encoding="utf-8")
    r = subprocess.run(["java", "-cp", str(JDBC_JAR), str(src), str(served["server"].pg_port), served["tokens"]["bob"],
                        str(served["certs"]["cert"]), SQL], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    tls, clear = r.stdout.splitlines()
    assert tls == "rows" + "".join(f";{a},{b}" for a, b in _http_rows(served))  # ssl=true, sslmode=verify-full
    assert clear.startswith(f"refused 28000 FATAL: {REFUSAL}")  # ssl=false: refused by require_tls


def _until_closed(s: socket.socket) -> bytes:
    """What the server sends before it closes the connection (a reset counts as closed)."""
    s.settimeout(10)
    out = b""
    try:
        while chunk := s.recv(4096):
            out += chunk
    except ConnectionResetError:
        pass
    return out


def _raw(served) -> socket.socket:
    return socket.create_connection(("127.0.0.1", served["server"].pg_port), timeout=10)


def test_odd_handshakes_end_their_own_connection_only(served):
    """Garbage after the server's S, cleartext bytes sent with the SSLRequest, a TLS handshake
    without an SSLRequest, a second SSLRequest inside TLS; GSSENCRequest is declined. Each ends (or
    answers) its own connection; a connection opened before them goes on."""
    before = _pg(served, "require")
    with _raw(served) as s:
        s.sendall(GSS_REQUEST)
        assert s.recv(1) == b"N"
    with _raw(served) as s:
        s.sendall(SSL_REQUEST)
        assert s.recv(1) == b"S"
        s.sendall(b"\x00garbage, not a TLS ClientHello" * 20)
        assert len(_until_closed(s)) < 64  # at most a TLS alert; then the connection is closed
    with _raw(served) as s:  # data sent in clear right behind the request is never read as if over TLS
        params = b"user\x00bob\x00database\x00protab\x00\x00"
        s.sendall(SSL_REQUEST + struct.pack("!ii", 8 + len(params), 196608) + params)
        got = F.pg_messages(s, until=b"never")
        assert got and got[0][0] == b"E" and b"unencrypted data after the SSL request" in got[0][1]
    with _raw(served) as s, pytest.raises((ssl.SSLError, ConnectionError)):  # TLS straight away (no SSLRequest)
        _ca(served["certs"]).wrap_socket(s, server_hostname="localhost")
    with _raw(served) as s:
        s.sendall(SSL_REQUEST)
        assert s.recv(1) == b"S"
        t = _ca(served["certs"]).wrap_socket(s, server_hostname="localhost")
        t.sendall(SSL_REQUEST)
        got = F.pg_messages(t, until=b"never")
        assert got and got[0][0] == b"E" and b"second encryption request" in got[0][1]
    assert before.execute(SQL).fetchall() == _http_rows(served)
    before.close()
    with _pg(served, "require") as conn:
        assert conn.execute(SQL).fetchall() == _http_rows(served)
    assert "Traceback" not in served["server"].stderr_path.read_text()


# -- the front in this process without require_tls: TLS is offered, clear still allowed ---------
@pytest.fixture
def front(tmp_path, certs):
    from protab.serve import pgwire
    from protab.serve.audit_log import AuditLog
    from protab.serve.auth import TokenStore
    from protab.serve.broker import Broker
    from protab.serve.config import load_config
    from protab.serve.tls import PG_ALPN, tls_files

    db = F.build_database(tmp_path / "micro.duckdb", persons=500)
    config, tokens = F.write_setup(tmp_path, db, min_population=1)
    cfg = load_config(config)
    engine, audit = Broker(cfg), AuditLog(tmp_path / "pg.jsonl")
    tls = tls_files(str(certs["cert"]), str(certs["key"]))
    server = pgwire.PgWireServer(engine, TokenStore(cfg), audit, port=0, tls=tls.context(alpn=PG_ALPN))
    port = server.start()
    try:
        yield port, tokens, server, tmp_path / "pg.jsonl"
    finally:
        server.stop()
        engine.close()
        audit.close()


def test_without_require_tls_both_are_served(front):
    port, tokens, server, audit = front
    for sslmode, on_tls in (("disable", False), ("prefer", True), ("require", True)):
        with psycopg.connect(host="127.0.0.1", port=port, dbname="protab", user="bob", password=tokens["bob"],
                             sslmode=sslmode, connect_timeout=10, autocommit=True) as conn:
            assert conn.pgconn.ssl_in_use == on_tls
            assert len(conn.execute(SQL).fetchall()) == 3
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:  # a handshake that fails
        s.sendall(SSL_REQUEST)
        assert s.recv(1) == b"S"
        s.sendall(b"\x16\x03\x01\x00\x05hello")
        assert len(_until_closed(s)) < 64
    deadline = time.monotonic() + 10
    while server._tasks and time.monotonic() < deadline:  # the failed connection's task ends too
        time.sleep(0.05)
    assert not server._tasks
    statuses = [json.loads(x)["status"] for x in audit.read_text(encoding="utf-8").splitlines()]
    assert statuses and 500 not in statuses  # a failed handshake is the client's, not the service's failure


def test_require_tls_without_tls_is_refused_by_the_front(front):
    from protab.errors import ProtabError
    from protab.serve import pgwire

    server = front[2]
    with pytest.raises(ProtabError, match="require_tls = true .* --tls-cert and --tls-key"):
        pgwire.PgWireServer(server.broker, server.tokens, server.audit, port=0, require_tls=True)


# -- bad TLS files stop the start-up -----------------------------------------------------------
BAD_FILES = [
    ("missing cert", lambda c: ["--tls-cert", str(c["folder"] / "nope.pem"), "--tls-key", str(c["key"])],
     "--tls-cert: no such file"),
    ("missing key", lambda c: ["--tls-cert", str(c["cert"]), "--tls-key", str(c["folder"] / "nope-key.pem")],
     "--tls-key: no such file"),
    ("a folder", lambda c: ["--tls-cert", str(c["cert"]), "--tls-key", str(c["folder"])], "--tls-key: "),
    ("not a pair", lambda c: ["--tls-cert", str(c["cert"]), "--tls-key", str(c["other_key"])],
     "is not the private key of the certificate in --tls-cert"),
    ("swapped", lambda c: ["--tls-cert", str(c["key"]), "--tls-key", str(c["cert"])],
     "--tls-cert: .* holds no PEM certificate"),
    ("encrypted", lambda c: ["--tls-cert", str(c["cert"]), "--tls-key", str(c["encrypted"])],
     "--tls-key: the private key is encrypted"),
    ("cert alone", lambda c: ["--tls-cert", str(c["cert"])], "--tls-cert needs --tls-key"),
    ("key alone", lambda c: ["--tls-key", str(c["key"])], "--tls-key needs --tls-cert"),
]


@pytest.mark.parametrize(("case", "options", "message"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_tls_files_stop_the_start_up(served, certs, capsys, case, options, message):
    from protab.serve.pgwire import main

    assert main(["--config", str(served["config"]), "--port", str(F.free_port()), *options(certs)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("protab serve: error: ") and "Traceback" not in err
    assert len(err.splitlines()) == 1
    assert re.search(message, err), err
    for name in ("key", "other_key", "encrypted"):  # never a line of a key
        body = [x for x in certs[name].read_text().splitlines() if x and not x.startswith("-----")]
        assert not any(x in err for x in body)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 000")
def test_unreadable_key_stops_the_start_up(served, certs, capsys, tmp_path):
    from protab.serve.pgwire import main

    key = tmp_path / "key.pem"
    key.write_bytes(certs["key"].read_bytes())
    key.chmod(0)
    assert main(["--config", str(served["config"]), "--tls-cert", str(certs["cert"]), "--tls-key", str(key)]) == 2
    assert "--tls-key: cannot read" in capsys.readouterr().err


def test_require_tls_needs_the_files(served, capsys):
    from protab.serve.pgwire import main

    assert main(["--config", str(served["config"]), "--port", str(F.free_port())]) == 2
    assert "require_tls = true in the serve config: start the service with --tls-cert and --tls-key" in \
        capsys.readouterr().err
