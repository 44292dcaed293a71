"""Requests that are slow, cut short or odd get a clear answer from the HTTP front, never a 500
or a connection held open for ever: the real service (``python -m protab.serve``) on a free
localhost port with ``--body-timeout 1 --header-timeout 1``, spoken to over raw sockets.

A JSON integer of more digits than Python reads (its int_max_str_digits) is a 400; a body
shorter than its Content-Length is a 408 after the body timeout, audited; a client that goes
away in the middle of its body is audited as a 400; a connection whose request headers do not
come complete within the header timeout is closed; requests in time are answered as before.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
import serve_fixtures as F

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")

TIMEOUT = 1  # --body-timeout and --header-timeout of the service under test, in seconds
WAIT = 10  # the longest any test waits for an answer or a close (well above TIMEOUT)


def TimedServer(config: Path) -> F.Server:
    """``python -m protab.serve`` with short body and header timeouts, on a free port."""
    return F.Server(config, extra=["--body-timeout", str(TIMEOUT), "--header-timeout", str(TIMEOUT)])


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("slow_requests")
    db = F.build_database(folder / "micro.duckdb", persons=500)
    config, tokens = F.write_setup(folder, db, min_population=1)
    server = TimedServer(config)
    try:
        yield {"server": server, "tokens": tokens, "audit": folder / "audit.jsonl"}
    finally:
        server.stop()
    assert "Traceback" not in server.stderr()


def _connect(served) -> socket.socket:
    return socket.create_connection(("127.0.0.1", served["server"].port), timeout=WAIT)


def _head(served, length: int, path: str = "/v1/query") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {served['tokens']['bob']}\r\nContent-Length: {length}\r\n\r\n").encode()


def _read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (socket.timeout after WAIT s)."""
    out = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return out
        out += chunk


def _audit_line(served, status: int, words: str) -> dict:
    """The audit line of bob's request with this status and words in its reason (waits for it)."""
    deadline = time.monotonic() + WAIT
    while True:
        lines = [json.loads(x) for x in served["audit"].read_text(encoding="ascii").splitlines()]
        hits = [x for x in lines if x["status"] == status and words in (x["reason"] or "")]
        if hits or time.monotonic() > deadline:
            assert hits, [(x["status"], x["reason"]) for x in lines[-5:]]
            return hits[-1]
        time.sleep(0.1)


@pytest.mark.parametrize("path", ["/v1/query", "/v1/table"])
def test_a_json_integer_too_long_for_python_is_a_400(served, path):
    body = b'{"sql": ' + b"9" * 5000 + b"}"
    r = httpx.post(served["server"].url + path, content=body, timeout=30,
                   headers={"Authorization": f"Bearer {served['tokens']['bob']}", "Content-Type": "application/json"})
    assert r.status_code == 400
    assert "a number has more than 4,300 digits" in r.json()["error"]
    assert _audit_line(served, 400, "more than 4,300 digits")["user"] == "bob"


def test_a_body_shorter_than_its_content_length_is_a_408(served):
    with _connect(served) as s:
        s.sendall(_head(served, 100) + b'{"sql": "SELECT')  # 15 of 100 bytes, and the socket stays open
        answer = _read_all(s)  # the service answers, then closes the connection
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ") and b"connection: close" in head.lower()
    assert "did not arrive within 1 seconds" in json.loads(body)["error"]
    line = _audit_line(served, 408, "did not arrive")
    assert line["user"] == "bob" and not line["accepted"]


def test_a_client_gone_in_the_middle_of_its_body_is_audited_as_400(served):
    with _connect(served) as s:
        s.sendall(_head(served, 100) + b'{"sql": "SELECT region')
        time.sleep(0.2)
    assert _audit_line(served, 400, "closed the connection")["user"] == "bob"


@pytest.mark.parametrize("sent", [b"", b"POST /v1/query HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"GET /healthz HT"])
def test_unfinished_request_headers_are_closed(served, sent):
    with _connect(served) as s:
        s.sendall(sent)
        assert _read_all(s) == b""  # closed after the header timeout, with no answer


def test_a_kept_alive_connection_that_starts_a_request_and_stalls_is_closed(served):
    with _connect(served) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = b""
        while b'"ok"' not in first:
            first += s.recv(65536)
        assert first.startswith(b"HTTP/1.1 200 ")
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 12")
        assert _read_all(s) == b""


def test_requests_in_time_are_answered_as_before(served):
    with httpx.Client(base_url=served["server"].url, timeout=30,
                      headers={"Authorization": f"Bearer {served['tokens']['bob']}"}) as client:
        for _ in range(3):  # one kept-alive connection
            r = client.post("/v1/query", json={"sql": "SELECT sex, count(*) AS n FROM persons GROUP BY sex"})
            assert r.status_code == 200 and len(r.json()["rows"]) == 2
    body = json.dumps({"sql": "SELECT sex, count(*) AS n FROM persons GROUP BY sex"}).encode()
    with _connect(served) as s:  # a body in two parts, the second well within the body timeout
        s.sendall(_head(served, len(body)) + body[:10])
        time.sleep(0.3)
        s.sendall(body[10:])
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += s.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200 ")
