"""Shared set-up of the query-service tests: a small keyed database, a serve.toml with users of
every kind, and the real server (``python -m protab.serve``) on a free localhost port.

``served`` (module-scoped fixture) yields a dict: url, token (alice's, from the tokens file),
tokens (every user's), dataset ("persons"), forbidden_dim ("age": not in alice's rights),
config, db, audit, tokens_file, folder, server. A test module makes it its own with
``def served(tmp_path_factory): yield from serve_fixtures.serve(tmp_path_factory)`` (a module-scoped fixture).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import socket
import ssl
import struct
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

import protab as pt

SEED = "serve-fixture-seed-7Qx"  # secret: must never appear in an answer or a log
PTABLE = {"D": 5, "V": 2.71828, "js": 2}  # secret too
MAGNITUDE = {"D": 10, "V": 3.14159, "step": 2, "icat": [1, 5, 10], "optim": 4}
THRESHOLD = 3
MIN_POPULATION = 10
MAX_CELLS = 2000
MAX_BODY = 65536
PERSONS = 6000
ALICE_DIMS = ["region", "municipality", "sex", "agegroup"]
#: the declared code lists of persons (the codes its data hold, in the order of their text)
#: (age is a classification with its age groups: agegroup is a function of age in the records, and
#: the service refuses custom groups on dimensions that nest undeclared, protab.serve.nesting)
PERSONS_CODES = {
    "municipality": [[f"R{r}", f"R{r}-{m}"] for r in (1, 2, 3) for m in range(4)],
    "sex": ["F", "M"],
    "age": [[["a0-4", "a5-9", "a10-14", "a15-19"][a // 5], str(a)] for a in sorted(range(20), key=str)],
}
#: the codes of the age classification's two levels, in the declared order
AGE_CODES = [age for _, age in PERSONS_CODES["age"]]
AGEGROUP_CODES = list(dict.fromkeys(group for group, _ in PERSONS_CODES["age"]))
INLINE = {"bob": "tok-bob-inline-5b1e", "carol": "tok-carol-expired-77aa", "dave": "tok-dave-revoked-0c3d",
          "erin": "tok-erin-no-region-2f6c"}


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def build_database(path: str | os.PathLike[str], persons: int = PERSONS) -> str:
    """persons (dims region, municipality in region, sex, agegroup, age; measures income, hours),
    households and secret; record keys from ``SEED``. Exactly one person is 19 years old (in R3)."""
    path = str(path)
    with pt.Session(path) as s:
        s.con.execute(
            f"""CREATE TABLE persons AS
            WITH base AS (
                SELECT i AS pid, CASE WHEN hash(i, 1) % 10 < 5 THEN 'R1' WHEN hash(i, 1) % 10 < 8 THEN 'R2'
                                      ELSE 'R3' END AS region,
                       CAST(hash(i, 2) % 4 AS INTEGER) AS m, CASE WHEN (hash(i, 3) // 64) % 2 = 0 THEN 'F' ELSE 'M' END AS sex,
                       CAST(hash(i, 4) % 19 AS INTEGER) AS age
                FROM range(1, {persons}) t(i)
                UNION ALL SELECT {persons}, 'R3', 0, 'F', 19
            )
            SELECT pid, region, region || '-' || CAST(m AS VARCHAR) AS municipality, sex,
                   ['a0-4', 'a5-9', 'a10-14', 'a15-19'][age // 5 + 1] AS agegroup, age,
                   CAST(hash(pid, 5) % 5000 AS DOUBLE) AS income, CAST(hash(pid, 6) % 40 AS INTEGER) AS hours
            FROM base"""
        )
        s.con.execute(
            "CREATE TABLE households AS SELECT i AS hid, ['R1', 'R2', 'R3'][i % 3 + 1] AS region, "
            "CAST(1 + i % 5 AS INTEGER) AS size, CAST(1 + i % 7 AS INTEGER) AS rooms FROM range(2000) t(i)"
        )
        s.con.execute("CREATE TABLE secret AS SELECT i AS sid, ['A', 'B'][i % 2 + 1] AS kind FROM range(500) t(i)")
        for table, ident in (("persons", "pid"), ("households", "hid"), ("secret", "sid")):
            s.add_record_keys(table, id_column=ident, seed=SEED)
    return path


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def config_text(db: str, audit: str = "audit.jsonl", **overrides: object) -> str:
    """serve.toml of the test service (``overrides`` replace top-level keys)."""
    top = {"database": db, "audit_log": audit, "tokens_file": "tokens.json", "threshold": THRESHOLD,
           "min_population": MIN_POPULATION, "max_cells": MAX_CELLS, "max_body_bytes": MAX_BODY,
           "max_sql_length": 2000, "sessions": 2, "threads": 1, "requests_per_minute": 100_000}
    top.update(overrides)
    lines = [f"{k} = {_toml_value(v)}" for k, v in top.items()]
    lines += [
        "[ptable]", f"maximum_entropy = {_toml_value(PTABLE)}",
        "[datasets.persons]",
        'dims = ["region", "municipality", "sex", "agegroup", "age"]',
        'measures = ["income", "hours"]',
        'hierarchies = { municipality = ["region", "municipality"], age = ["agegroup", "age"] }',
        f"codes = {_toml_value(PERSONS_CODES)}",  # region: the level of municipality's hierarchy
        'description = "persons of the test census"',
        "[datasets.persons.magnitude]",
        f"ptable = {{ maximum_entropy = {_toml_value(MAGNITUDE)} }}",
        "fp = 100",
        "[datasets.households]",
        'dims = ["region", "size"]',
        'measures = ["rooms"]',
        'codes = { region = ["R1", "R2", "R3"], size = [1, 2, 3, 4, 5] }',
        "[datasets.secret]",
        'dims = ["kind"]',
        'codes = { kind = ["A", "B"] }',
        "[users.alice]",
        'datasets = ["households"]',
        "[users.alice.rights.persons]",
        f"dims = {_toml_value(ALICE_DIMS)}",
        'measures = ["income"]',
        "[users.bob]",
        'datasets = ["persons", "households"]',
        f'token_sha256 = ["{_sha(INLINE["bob"])}"]',
        "[users.carol]",
        'datasets = ["persons"]',
        f'token_sha256 = "{_sha(INLINE["carol"])}"',
        "expires = 2020-01-31",
        "[users.dave]",
        'datasets = ["persons"]',
        f'token_sha256 = "{_sha(INLINE["dave"])}"',
        "revoked = true",
        "[users.erin.rights.persons]",  # municipality without region: served flat
        'dims = ["municipality", "sex"]',
        "measures = []",
        "[users.erin]",
        f'token_sha256 = "{_sha(INLINE["erin"])}"',
    ]
    return "\n".join(lines) + "\n"


def write_setup(folder: Path, db: str, **overrides: object) -> tuple[Path, dict[str, str]]:
    """serve.toml in ``folder`` and its tokens file: alice's token (added as `protab serve-token add`
    does), an expired and a revoked tokens-file entry; returns (config path, tokens by name)."""
    from protab.serve import auth
    from protab.serve.config import load_config

    config = folder / "serve.toml"
    config.write_text(config_text(db, **overrides), encoding="utf-8")
    cfg = load_config(config, database=":memory:")
    _, alice = auth.add_token(cfg, "alice")
    tokens = dict(INLINE, alice=alice, alice_expired="tok-alice-old-9d2f", alice_revoked="tok-alice-gone-41ee")
    entries = auth.read_tokens(cfg.tokens_file)
    past = dt.datetime(2021, 1, 1, tzinfo=dt.timezone.utc)
    entries += [
        auth.TokenEntry("old00001", "alice", _sha(tokens["alice_expired"]), "2020-01-01T00:00:00+00:00", past),
        auth.TokenEntry("gone0001", "alice", _sha(tokens["alice_revoked"]), "2020-01-01T00:00:00+00:00", None, True),
    ]
    auth.write_tokens(cfg.tokens_file, entries)
    return config, tokens


def starlette_client(app: object) -> object:
    """Starlette's TestClient of ``app`` (its notice about the HTTP library it uses silenced)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
        from starlette.testclient import TestClient

        return TestClient(app)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``protab serve`` (``python -m protab.serve``) in a subprocess on a free port, with the
    PostgreSQL front on a second one when ``pg``; waits until it answers; ``stop()`` ends it
    (``kill()`` by SIGKILL)."""

    def __init__(self, config: Path, db: str | None = None, timeout: float = 60, *, pg: bool = False,
                 extra: Sequence[str] = (), tls: ssl.SSLContext | None = None) -> None:
        """``extra``: more options of ``protab.serve``; ``tls``: the client context that trusts the
        server's certificate (its options in ``extra``): the HTTP front is then https."""
        self.port = free_port()
        self.pg_port = free_port() if pg else None
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.stderr_path = config.parent / f"server-{self.port}.err"
        cmd = [sys.executable, "-m", "protab.serve", "--config", str(config), "--port", str(self.port), *extra]
        if db is not None:
            cmd += ["--db", db]
        if pg:
            cmd += ["--pg-port", str(self.pg_port)]
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=config.parent)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(self.url + "/healthz", timeout=2, verify=tls or True).status_code == 200:
                    if self.pg_port is None:
                        return
                    with socket.create_connection(("127.0.0.1", self.pg_port), timeout=2):
                        return
            except (httpx.TransportError, OSError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the server did not start: {self.stderr()}")
            time.sleep(0.1)

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def serve(tmp_path_factory, server_class: type[Server] = Server, name: str = "serve"):
    """The generator of the ``served`` fixture (for a module's own fixture: ``yield from serve(...)``);
    ``server_class``: a subclass of :class:`Server` taking the config path."""
    folder = tmp_path_factory.mktemp(name)
    db = build_database(folder / "micro.duckdb")
    config, tokens = write_setup(folder, db)
    server = server_class(config)
    try:
        yield {"url": server.url, "token": tokens["alice"], "tokens": tokens, "dataset": "persons",
               "forbidden_dim": "age", "config": config, "db": db, "audit": folder / "audit.jsonl",
               "tokens_file": folder / "tokens.json", "folder": folder, "server": server, "service": server}
    finally:
        server.stop()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    yield from serve(tmp_path_factory)



# -- the PostgreSQL front in the test's process, and its wire messages ----------------------------
def pg_front(folder: Path):
    """The body of a PostgreSQL-front fixture: the front in this process with its default limits
    over a 500-person database in ``folder``; yields (port, tokens, audit path)."""
    from protab.serve import pgwire
    from protab.serve.audit_log import AuditLog
    from protab.serve.auth import TokenStore
    from protab.serve.broker import Broker
    from protab.serve.config import load_config

    db = build_database(folder / "micro.duckdb", persons=500)
    config, tokens = write_setup(folder, db, min_population=1)
    cfg = load_config(config)
    engine, audit = Broker(cfg), AuditLog(folder / "pg.jsonl")
    server = pgwire.PgWireServer(engine, TokenStore(cfg), audit, port=0)
    port = server.start()
    try:
        yield port, tokens, folder / "pg.jsonl"
    finally:
        server.stop()
        engine.close()
        audit.close()


def pg_message(kind: bytes, payload: bytes = b"") -> bytes:
    """One frontend message of the PostgreSQL protocol: kind, length, payload."""
    return kind + struct.pack("!i", len(payload) + 4) + payload


def pg_messages(sock: socket.socket, until: bytes = b"Z") -> list[tuple[bytes, bytes]]:
    """Backend messages (kind, payload) up to and including one of kind ``until`` (or the end)."""
    out, buf = [], b""
    while True:
        while len(buf) >= 5 and len(buf) >= 1 + struct.unpack("!i", buf[1:5])[0]:
            n = struct.unpack("!i", buf[1:5])[0]
            out.append((buf[:1], buf[5:1 + n]))
            buf = buf[1 + n:]
            if out[-1][0] == until:
                return out
        chunk = sock.recv(65536)
        if not chunk:
            return out
        buf += chunk
