"""One user's idle PostgreSQL connections cannot lock the other users out: a user holds at most
``max_connections_per_user`` (8 by default, ``--pg-connections-per-user``) of the front's
connection slots; the next login of that user is refused with 53300 naming the per-user limit,
and audited, while the other users still log in; a closed connection gives its place back."""

from __future__ import annotations

import json
import socket
import struct
import time

import pytest
import serve_fixtures as F

pytest.importorskip("starlette")


@pytest.fixture
def front(tmp_path):
    """The PostgreSQL front in this process with its default limits; yields (port, tokens, audit)."""
    yield from F.pg_front(tmp_path)


def _login(front, user: str) -> tuple[socket.socket, list[tuple[bytes, bytes]]]:
    """A raw login as ``user``: the socket and the messages after the password."""
    port, tokens, _ = front
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    params = b"user\x00" + user.encode() + b"\x00database\x00protab\x00\x00"
    s.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
    assert F.pg_messages(s, until=b"R")[-1] == (b"R", struct.pack("!i", 3))  # the password is asked
    s.sendall(F.pg_message(b"p", tokens[user].encode() + b"\x00"))
    return s, F.pg_messages(s)


def _fields(payload: bytes) -> dict[str, str]:
    return {p[:1].decode(): p[1:].decode() for p in payload.split(b"\x00") if p}


def test_one_users_connections_leave_room_for_the_others(front):
    """With the default limits (64 slots, 8 per user): bob's ninth login is refused."""
    held = []
    try:
        for _ in range(8):
            s, got = _login(front, "bob")
            held.append(s)
            assert got[-1] == (b"Z", b"I")
        s, got = _login(front, "bob")  # the ninth of one user
        held.append(s)
        assert got and got[-1][0] == b"E"
        error = _fields(got[-1][1])
        assert (error["S"], error["C"]) == ("FATAL", "53300")
        assert "too many connections for user 'bob'" in error["M"] and "at most 8 at once per user" in error["M"]
        for user in ("alice", "erin"):  # the others are not locked out
            s, got = _login(front, user)
            held.append(s)
            assert got[-1] == (b"Z", b"I")
        held[0].sendall(F.pg_message(b"X"))  # bob ends one of his: its place is his again
        held[0].close()
        deadline = time.monotonic() + 10
        while True:
            s, got = _login(front, "bob")
            held.append(s)
            if got[-1] == (b"Z", b"I") or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert got[-1] == (b"Z", b"I")
    finally:
        for s in held:
            s.close()
    lines = [json.loads(x) for x in front[2].read_text(encoding="ascii").splitlines()]
    assert any(x["user"] == "bob" and x["status"] == 503 and "per-user limit" in x["reason"] for x in lines)


def test_the_per_user_limit_is_an_option_of_protab_serve(tmp_path, capsys):
    from protab.serve import commands as cli

    config, _ = F.write_setup(tmp_path, ":memory:")
    assert cli.main(["--config", str(config), "--pg-port", "5432", "--pg-connections-per-user", "0"]) == 2
    assert "--pg-connections-per-user must be 1 or more" in capsys.readouterr().err
