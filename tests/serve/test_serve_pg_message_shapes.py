"""Extended-protocol messages of the wrong shape get a PostgreSQL protocol error, and the
connection goes on: as many parameter format codes as neither none, one nor one per value, as
many result format codes as neither none, one nor one per column, a format code other than 0
and 1, a negative count, a Describe or Close of neither a statement nor a portal. Each is an
ErrorResponse (08P01, or 22023 for a format code, as PostgreSQL), the messages after it are
discarded up to Sync, which answers ReadyForQuery; never a FATAL internal error."""

from __future__ import annotations

import socket
import struct

import pytest
import serve_fixtures as F

pytest.importorskip("starlette")

SQL = (b"SELECT region, agegroup, count(*) AS n FROM persons WHERE sex = $1 AND agegroup IN ($2, $3) "
       b"GROUP BY region, agegroup ORDER BY region, agegroup")
VALUES = [b"F", b"a0-4", b"a5-9"]
SIMPLE = b"SELECT sex, count(*) AS n FROM persons GROUP BY sex ORDER BY sex\x00"


@pytest.fixture(scope="module")
def front(tmp_path_factory):
    """The PostgreSQL front in this process on a small database; yields (port, tokens)."""
    port, tokens, _ = next(gen := F.pg_front(tmp_path_factory.mktemp("pg_shapes")))
    yield port, tokens
    gen.close()


def _fields(payload: bytes) -> dict[str, str]:
    return {p[:1].decode(): p[1:].decode() for p in payload.split(b"\x00") if p}


def _login(front, user: str = "bob") -> socket.socket:
    port, tokens = front
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    params = b"user\x00" + user.encode() + b"\x00database\x00protab\x00\x00"
    s.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
    assert F.pg_messages(s, until=b"R")[-1] == (b"R", struct.pack("!i", 3))
    s.sendall(F.pg_message(b"p", tokens[user].encode() + b"\x00"))
    assert F.pg_messages(s)[-1] == (b"Z", b"I")
    return s


def _bind(formats: list[int], values: list[bytes], result_formats: list[int], *, statement: bytes = b"s",
          format_count: int | None = None) -> bytes:
    n = len(formats) if format_count is None else format_count
    body = b"\x00" + statement + b"\x00" + struct.pack("!h", n) + b"".join(struct.pack("!h", f) for f in formats)
    body += struct.pack("!h", len(values)) + b"".join(struct.pack("!i", len(v)) + v for v in values)
    body += struct.pack("!h", len(result_formats)) + b"".join(struct.pack("!h", f) for f in result_formats)
    return F.pg_message(b"B", body)


PARSE = F.pg_message(b"P", b"s\x00" + SQL + b"\x00" + struct.pack("!h", 0))
DESCRIBE, EXECUTE, SYNC = F.pg_message(b"D", b"P\x00"), F.pg_message(b"E", b"\x00" + struct.pack("!i", 0)), F.pg_message(b"S")

CASES = [
    # (messages after Parse, SQLSTATE, words of the message)
    pytest.param(_bind([0, 0], VALUES, []) + DESCRIBE + EXECUTE, "08P01", "2 parameter formats but 3 parameters",
                 id="2-parameter-formats-3-values"),
    pytest.param(_bind([0, 1, 0, 0], VALUES, []) + EXECUTE, "08P01", "4 parameter formats but 3 parameters",
                 id="4-parameter-formats-3-values"),
    pytest.param(_bind([], VALUES, [0, 1]) + DESCRIBE + EXECUTE, "08P01",
                 "2 result formats but the query has 3 columns", id="2-result-formats-3-columns-describe"),
    pytest.param(_bind([], VALUES, [1, 1, 1, 1]) + EXECUTE, "08P01", "4 result formats but the query has 3 columns",
                 id="4-result-formats-3-columns-execute"),
    pytest.param(_bind([2], VALUES, []) + EXECUTE, "22023", "unsupported format code: 2", id="parameter-format-2"),
    pytest.param(_bind([], VALUES, [7]) + EXECUTE, "22023", "unsupported format code: 7", id="result-format-7"),
    pytest.param(_bind([], VALUES, [], format_count=-1) + EXECUTE, "08P01",
                 "negative number of parameter format codes", id="negative-format-count"),
    pytest.param(F.pg_message(b"D", b"X\x00") + EXECUTE, "08P01", "invalid Describe message subtype", id="describe-X"),
    pytest.param(F.pg_message(b"C", b"X\x00"), "08P01", "invalid Close message subtype", id="close-X"),
    pytest.param(F.pg_message(b"P", b"t\x00SELECT 1\x00" + struct.pack("!h", -2)), "08P01",
                 "negative number of parameter types", id="parse-negative-type-count"),
]


@pytest.mark.parametrize(("messages", "code", "words"), CASES)
def test_misshapen_messages_are_protocol_errors_and_the_connection_goes_on(front, messages, code, words):
    s = _login(front)
    try:
        s.sendall(PARSE + messages + SYNC)
        got = F.pg_messages(s)
        kinds = [k for k, _ in got]
        assert kinds[-1] == b"Z" and kinds.count(b"E") == 1, kinds  # one error, then nothing up to Sync
        error = _fields(got[kinds.index(b"E")][1])
        assert (error["S"], error["C"]) == ("ERROR", code) and words in error["M"]
        assert b"D" not in kinds and b"C" not in kinds  # the messages after the error were discarded
        s.sendall(F.pg_message(b"Q", SIMPLE))  # the connection goes on
        assert [k for k, _ in F.pg_messages(s)] == [b"T", b"D", b"D", b"C", b"Z"]
    finally:
        s.close()


def test_well_shaped_binds_are_answered(front):
    """None, one and one per value of the parameter and result format codes: the same rows."""
    s = _login(front)
    try:
        answers = []
        for formats, result_formats in (([], []), ([0], [0]), ([0, 0, 0], [0, 0, 0])):
            s.sendall(PARSE + _bind(formats, VALUES, result_formats) + DESCRIBE + EXECUTE + SYNC)
            got = F.pg_messages(s)
            assert [k for k, _ in got][:3] == [b"1", b"2", b"T"] and got[-1] == (b"Z", b"I")
            answers.append([p for k, p in got if k == b"D"])
        assert answers[0] == answers[1] == answers[2] and len(answers[0]) >= 3
    finally:
        s.close()
