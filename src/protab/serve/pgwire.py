"""A PostgreSQL wire-protocol front of the query service, so that psql, psycopg and other
PostgreSQL clients can send the SQL that ``POST /v1/query`` accepts.

It speaks the part of protocol 3.0 that such clients use (PostgreSQL documentation, chapter
"Frontend/Backend Protocol"): start-up, cleartext password, the simple query protocol and the
extended one (Parse, Bind, Describe, Execute, Close, Sync, Flush). It computes nothing: every
statement that asks for data goes to :meth:`Engine.query <protab.serve.broker.Engine.query>`,
so the validator is the only gate, as over HTTP. The password of the login is the user's
bearer token, checked by :class:`~protab.serve.auth.TokenStore`; the login's user name must be
the token's user. Every statement, and every refused login, is written to the audit log
before its answer is sent. Refusals become PostgreSQL errors: 42501 outside the user's rights,
42000 for a query the service refuses, 53400 past the user's rate of
requests (requests_per_minute), 28P01 for a bad login, XX000 for the service's own
failure (its cause goes to the audit log only).

Limits, so that no client can keep the analysts out or grow the server's memory: a connection
takes one of ``max_connections`` slots only once logged in, and one user at most
:data:`MAX_CONNECTIONS_PER_USER` of them (53300 past either); connections that
are not logged in yet are capped per peer address and in all, the oldest one waiting giving way
to a new one, and each has :data:`LOGIN_SECONDS` to log in; a logged-in connection that sends
nothing for :data:`IDLE_SECONDS` is closed (57P05); one connection keeps at most
:data:`MAX_STATEMENTS` prepared statements and as many portals, holding at most
:data:`MAX_STORED_BYTES` of SQL and kept answers (53400); portals end with their transaction.

Answered without the engine, because they tell nothing about the data: ``SET`` (accepted and
ignored), ``SHOW`` of the server's parameters, ``BEGIN``/``COMMIT``/``ROLLBACK`` (the service is
read-only), ``SELECT version()``, ``current_schema()``, ``current_database()``, ``current_user``.
Anything else, such as the ``pg_catalog`` look-ups of graphical clients, reaches the validator
and is refused with its message. No TLS: clients are told so and continue in clear (libpq's
default ``sslmode=prefer``), and the token travels as a cleartext password; PostgreSQL clients
negotiate TLS inside the protocol, so a plain TLS proxy does not help: serve on localhost and let
remote analysts come through an SSH tunnel (docs/pgwire_evaluation.md).
"""

from __future__ import annotations

import asyncio
import re
import secrets
import struct
import threading
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from protab.errors import ProtabError
from protab.serve.audit_log import AuditLog
from protab.serve.auth import AuthError, TokenStore
from protab.serve.broker import Engine
from protab.serve.config import UserConfig
from protab.serve.pgproto import (
    _FLOAT8,
    _INT8,
    _TEXT,
    PgError,
    _bind,
    _count_params,
    _cstr,
    _data_row,
    _error_msg,
    _msg,
    _Reader,
    _row_description,
    check_result_formats,
    read_bind,
    read_oids,
    read_subtype,
)
from protab.serve.validator import QueryError, QueryForbidden, QueryThrottled, validate

SERVER_VERSION = "16.0 (protab)"
_SSL_REQUEST, _GSS_REQUEST, _CANCEL_REQUEST, _PROTOCOL_3 = 80877103, 80877104, 80877102, 196608
_INTERNAL = "the service could not answer this statement (an internal error, recorded for the office)"
_MAX_STARTUP = 10_000
#: seconds a client has from connecting to being logged in
LOGIN_SECONDS = 10
#: seconds a logged-in connection may wait between two messages before the service closes it
IDLE_SECONDS = 15 * 60
#: connections that are not logged in yet, in all and from one peer address; past either, the
#: oldest one waiting (of that address) is closed, so that sockets that never log in cannot
#: keep an analyst out (a connection slot is taken only at login)
MAX_WAITING, MAX_WAITING_PER_PEER = 64, 16
#: connections one user may hold at once (of ``max_connections``), so that one user's idle
#: connections cannot keep the others out (53300 past it)
MAX_CONNECTIONS_PER_USER = 8
#: prepared statements and portals one connection may keep, each, and the bytes of their SQL
#: and answers together (PostgreSQL's SQLSTATE 53400 past either)
MAX_STATEMENTS, MAX_STORED_BYTES = 256, 16 << 20
ENDPOINT = "PGWIRE query"


def _sqlstate(exc: QueryError) -> str:
    if isinstance(exc, QueryThrottled):
        return "53400"  # configuration_limit_exceeded: the user's rate
    return "42501" if isinstance(exc, QueryForbidden) else "42000"


@dataclass
class _Result:
    """What a statement answers: column names and type oids, rows, and the command tag."""

    columns: list[tuple[str, int]] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    tag: str = "SELECT 0"


@dataclass
class _Portal:
    sql: str
    result: _Result | None = None
    formats: list[int] = field(default_factory=list)
    sent: int = 0
    size: int = 0  # bytes (about) of the kept result


#: bytes counted per value of a kept result (a Python object and its slot in the row)
_ROW_BYTES = 64


def _held(item: tuple[str, list[int]] | _Portal) -> int:
    """Bytes (about) a prepared statement (sql, oids) or a portal holds."""
    return len(item[0]) if isinstance(item, tuple) else len(item.sql) + item.size


def _too_much() -> PgError:
    return PgError("53400", f"the prepared statements and portals of this connection would hold more than "
                   f"{MAX_STORED_BYTES / 2**20:g} MiB, the service's limit; close some (Close, DEALLOCATE or "
                   "DISCARD ALL) first")


# -- statements answered by the front ---------------------------------------------------------
_SET = re.compile(r"set\s+(session\s+|local\s+)?[a-z_][a-z0-9_.]*\s*(=|to)\s*[^;]*", re.I | re.S)
_DEALLOCATE = re.compile(r'deallocate\s+(prepare\s+)?("?[a-z_][a-z0-9_]*"?)', re.I)
_SHOW = re.compile(r"show\s+([a-z_][a-z0-9_.]*)", re.I)
_TX = {"begin": "BEGIN", "start transaction": "BEGIN", "commit": "COMMIT", "end": "COMMIT", "rollback": "ROLLBACK",
       "abort": "ROLLBACK"}
_FUNCS = re.compile(r"select\s+((pg_catalog\.)?(version|current_schema|current_database)\(\)|current_user|"
                    r"session_user)", re.I)


def _normal(sql: str) -> str:
    s = sql.strip()
    while s.endswith(";"):
        s = s[:-1].rstrip()
    return s


class PgWireServer:
    """The PostgreSQL front of one engine, token store and audit log, listening on ``host:port``
    (port 0: a free one). :meth:`start` serves from a thread, :meth:`stop` ends it."""

    def __init__(self, engine: Engine, tokens: TokenStore, audit: AuditLog, host: str = "127.0.0.1",
                 port: int = 5432, *, max_connections: int = 64, login_seconds: float = LOGIN_SECONDS,
                 idle_seconds: float = IDLE_SECONDS, max_waiting: int = MAX_WAITING,
                 max_waiting_per_peer: int = MAX_WAITING_PER_PEER,
                 max_connections_per_user: int = MAX_CONNECTIONS_PER_USER) -> None:
        self.engine, self.tokens, self.audit = engine, tokens, audit
        self.host, self.port = host, port
        self.max_message = max(engine.config.max_body_bytes, engine.config.max_sql_length + 1024)
        self.login_seconds, self.idle_seconds = login_seconds, idle_seconds
        self.max_waiting, self.max_waiting_per_peer = max_waiting, max_waiting_per_peer
        self.max_connections_per_user = max_connections_per_user
        self._slots = threading.BoundedSemaphore(max_connections)
        self._per_user: dict[str, int] = {}  # logged-in connections by user (changed on the loop's thread only)
        self._waiting: dict[asyncio.Task[None], tuple[str, asyncio.StreamWriter]] = {}  # oldest first
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._ready = threading.Event()
        self._failed: BaseException | None = None

    # -- life cycle -------------------------------------------------------------------------
    def start(self) -> int:
        """Listen and serve from a daemon thread; returns the port (raises if it cannot listen)."""
        self._thread = threading.Thread(target=self._run, name="protab-pgwire", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._failed is not None:
            raise self._failed
        return self.port

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._server = loop.run_until_complete(asyncio.start_server(self._connection, self.host, self.port))
            self.port = self._server.sockets[0].getsockname()[1]
        except BaseException as exc:  # handed to start()
            self._failed = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._shutdown())
            loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def stop(self, timeout: float = 10) -> None:
        """Stop listening, close the connections (a statement under way finishes first) and the thread."""
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)

    # -- one connection ---------------------------------------------------------------------
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        user: UserConfig | None = None
        try:
            self._wait(task, writer)
            try:
                # the login takes a connection slot (see _login): sockets that never log in take none
                user = await asyncio.wait_for(self._startup(reader, writer), self.login_seconds)
            except TimeoutError:
                raise PgError("08P01", f"no login within {self.login_seconds:g} seconds", fatal=True) from None
            finally:
                self._waiting.pop(task, None)
            if user is not None:
                try:
                    await _Session(self, user, reader, writer).run()
                finally:
                    self._release(user)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        except PgError as exc:
            writer.write(_error_msg(exc.code, str(exc), fatal=True))
        except (struct.error, ValueError):
            writer.write(_error_msg("08P01", "malformed start-up or login message", fatal=True))
        except Exception as exc:  # the service's own failure ends this connection only; its cause to the audit log
            writer.write(_error_msg("XX000", _INTERNAL, fatal=True))
            try:
                await self._audit(user=None if user is None else user.name, status=500,
                                  reason=f"connection: {type(exc).__name__}: {exc}")
            except Exception:  # the log cannot be written either: the connection ends all the same
                pass
        finally:
            self._tasks.discard(task)
            self._waiting.pop(task, None)
            try:
                await writer.drain()
                writer.close()
                await writer.wait_closed()
            except (ConnectionError, asyncio.CancelledError, RuntimeError):
                pass

    def _wait(self, task: asyncio.Task[None], writer: asyncio.StreamWriter) -> None:
        """Count a connection that is not logged in yet; past :attr:`max_waiting_per_peer` from its
        address, or :attr:`max_waiting` in all, close the oldest one waiting (of that address)."""
        peer = writer.get_extra_info("peername")
        host = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        self._waiting[task] = (host, writer)
        while True:
            same = [t for t, (h, _) in self._waiting.items() if h == host]
            if len(same) > self.max_waiting_per_peer:
                oldest = same[0]
            elif len(self._waiting) > self.max_waiting:
                oldest = next(iter(self._waiting))
            else:
                return
            _, old_writer = self._waiting.pop(oldest)
            old_writer.write(_error_msg("53300", "too many connections waiting to log in to the protab service; "
                                        "this one waited longest", fatal=True))
            oldest.cancel()  # its own finally closes the socket

    async def _startup(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> UserConfig | None:
        while True:
            (length,) = struct.unpack("!i", await reader.readexactly(4))
            if not 8 <= length <= _MAX_STARTUP:
                raise PgError("08P01", "invalid start-up packet")
            body = await reader.readexactly(length - 4)
            (code,) = struct.unpack_from("!i", body)
            if code in (_SSL_REQUEST, _GSS_REQUEST):
                writer.write(b"N")  # no TLS, no GSSAPI: the client goes on in clear or gives up
                await writer.drain()
                continue
            if code == _CANCEL_REQUEST:
                return None  # statements are not cancelled: the connection just closes
            if code != _PROTOCOL_3:
                raise PgError("0A000", f"unsupported protocol version {code >> 16}.{code & 0xFFFF}; use 3.0")
            parts = body[4:].split(b"\x00")
            params = {parts[k].decode("utf-8", "replace"): parts[k + 1].decode("utf-8", "replace")
                      for k in range(0, len(parts) - 1, 2) if parts[k]}
            return await self._login(reader, writer, params)

    async def _login(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     params: dict[str, str]) -> UserConfig:
        """Check the password (the user's token); the user, holding one of the connection slots,
        which the caller releases; a login past the slots is refused with 53300 and audited."""
        name = params.get("user", "")
        writer.write(_msg(b"R", struct.pack("!i", 3)))  # AuthenticationCleartextPassword
        await writer.drain()
        kind = await reader.readexactly(1)
        (length,) = struct.unpack("!i", await reader.readexactly(4))
        if kind != b"p" or not 4 < length <= 4096:
            raise PgError("08P01", "expected a password message")
        password = (await reader.readexactly(length - 4)).rstrip(b"\x00").decode("utf-8", "replace")
        loop = asyncio.get_running_loop()
        try:
            user = await loop.run_in_executor(None, self.tokens.authenticate, f"Bearer {password}")
            if user.name != name:
                raise AuthError(f"the token is not {name[:60]!r}'s; connect as its user")
        except AuthError as exc:
            await self._audit(user=None, query=None, status=401, reason=f"login as {name[:60]!r}: {exc}")
            raise PgError("28P01", f"password authentication failed for user {name[:60]!r}: {exc} "
                          "(the password is your protab token)", fatal=True) from None
        except Exception as exc:  # a broken tokens file: the office's problem
            await self._audit(user=None, query=None, status=500, reason=f"token store: {type(exc).__name__}: {exc}")
            raise PgError("XX000", _INTERNAL, fatal=True) from None
        await self._take_slot(user)
        try:
            self._greet(writer, name, params)
            await writer.drain()
        except BaseException:  # no session will release the slot
            self._release(user)
            raise
        return user

    async def _take_slot(self, user: UserConfig) -> None:
        """Take one of the user's :attr:`max_connections_per_user` and one of the service's
        ``max_connections`` slots (53300, audited, past either); :meth:`_release` gives them back."""
        held = self._per_user.get(user.name, 0)
        if held >= self.max_connections_per_user:
            await self._audit(user=user.name, status=503,
                              reason=f"login refused: the user already holds {held} connections (the per-user limit)")
            raise PgError("53300", f"too many connections for user {user.name[:60]!r}: at most "
                          f"{self.max_connections_per_user} at once per user (the service's per-user limit); close "
                          "one of your connections first", fatal=True)
        if not self._slots.acquire(blocking=False):
            await self._audit(user=user.name, status=503, reason="login refused: too many connections")
            raise PgError("53300", "too many connections to the protab service; try again later", fatal=True)
        self._per_user[user.name] = self._per_user.get(user.name, 0) + 1

    def _release(self, user: UserConfig) -> None:
        left = self._per_user.get(user.name, 0) - 1
        if left > 0:
            self._per_user[user.name] = left
        else:
            self._per_user.pop(user.name, None)
        self._slots.release()

    @staticmethod
    def _greet(writer: asyncio.StreamWriter, name: str, params: dict[str, str]) -> None:
        status = {"server_version": SERVER_VERSION, "server_encoding": "UTF8", "client_encoding": "UTF8",
                  "DateStyle": "ISO, MDY", "TimeZone": "UTC", "integer_datetimes": "on", "IntervalStyle": "postgres",
                  "standard_conforming_strings": "on", "is_superuser": "off", "session_authorization": name,
                  "application_name": params.get("application_name", "")[:60]}
        out = [_msg(b"R", struct.pack("!i", 0))]
        out += [_msg(b"S", _cstr(k) + _cstr(v)) for k, v in status.items()]
        out.append(_msg(b"K", struct.pack("!ii", secrets.randbits(31), secrets.randbits(31))))
        out.append(_msg(b"Z", b"I"))
        writer.write(b"".join(out))

    async def _audit(self, **fields: Any) -> None:
        record = {"user": None, "endpoint": ENDPOINT, "query": None, "status": 200, "accepted": False,
                  "reason": None, "cells": None, "cached": None, "format": None, "ms": None}
        record.update(fields)
        record["accepted"] = record["status"] == 200
        await asyncio.get_running_loop().run_in_executor(None, lambda: self.audit.write(**record))


class _Session:
    """The statements of one logged-in connection."""

    def __init__(self, server: PgWireServer, user: UserConfig, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.server, self.user, self.reader, self.writer = server, user, reader, writer
        self.statements: dict[str, tuple[str, list[int]]] = {}
        self.portals: dict[str, _Portal] = {}
        self.tx = b"I"  # I idle, T in a transaction, E in a failed transaction
        self.skip_to_sync = False

    async def read(self) -> tuple[bytes, bytes]:
        """The next message (kind, payload)."""
        limit = self.server.max_message
        kind = await self.reader.readexactly(1)
        (length,) = struct.unpack("!i", await self.reader.readexactly(4))
        if length < 4 or length - 4 > limit:
            raise PgError("08P01", f"message of {length} bytes: larger than the service's limit of {limit}")
        return kind, await self.reader.readexactly(length - 4)

    async def run(self) -> None:
        idle = self.server.idle_seconds
        while True:
            try:
                kind, body = await asyncio.wait_for(self.read(), idle)
            except TimeoutError:
                raise PgError("57P05", f"terminating connection: idle for more than {idle:g} seconds "
                              "(the service's limit); connect again", fatal=True) from None
            if kind == b"X":
                return
            if kind == b"Q":
                try:
                    sql = _Reader(body).cstr()
                except ValueError:
                    sql = None
                await self.simple(sql)
            elif kind == b"S":
                self.skip_to_sync = False
                if self.tx == b"I":  # the implicit transaction ends, and its portals with it (as in PostgreSQL)
                    self.portals.clear()
                self.writer.write(_msg(b"Z", self.tx))
            elif kind == b"H":
                pass
            elif self.skip_to_sync:
                continue  # after an error, the extended protocol discards messages until Sync
            else:
                try:
                    if kind == b"D":
                        await self.describe(_Reader(body))
                    elif kind == b"E":
                        await self.execute(_Reader(body))
                    else:
                        await self.extended(kind, _Reader(body))
                except PgError as exc:
                    self.fail(exc)
                except (struct.error, ValueError):
                    self.fail(PgError("08P01", f"malformed {kind.decode('latin-1')!r} message"))
            await self.writer.drain()

    def fail(self, exc: PgError) -> None:
        self.writer.write(_error_msg(exc.code, str(exc)))
        if self.tx == b"T":
            self.tx = b"E"
        self.skip_to_sync = True

    # -- the simple protocol ----------------------------------------------------------------
    async def simple(self, sql: str | None) -> None:
        try:
            if sql is None:
                raise PgError("08P01", "malformed query message (not UTF-8 text ending in a zero byte)")
            if not _normal(sql):
                self.writer.write(_msg(b"I"))
            else:
                result = await self.answer(sql)
                self.writer.write(_row_description(result.columns, []) if result.columns else b"")
                self.writer.write(b"".join(_data_row(r, result.columns, []) for r in result.rows))
                self.writer.write(_msg(b"C", _cstr(result.tag)))
        except PgError as exc:
            self.fail(exc)
        self.skip_to_sync = False
        self.writer.write(_msg(b"Z", self.tx))

    # -- the extended protocol --------------------------------------------------------------
    def stored(self) -> int:
        """Bytes (about) held by this connection's prepared statements and portals."""
        return sum(map(_held, self.statements.values())) + sum(map(_held, self.portals.values()))

    def room(self, kind: str, names: dict[str, Any], name: str, size: int) -> None:
        """Refuse (53400) a new statement or portal past MAX_STATEMENTS of its kind, or one that
        would take the connection past MAX_STORED_BYTES; one that replaces its namesake counts once."""
        old = names.get(name)
        if old is None and len(names) >= MAX_STATEMENTS:
            raise PgError("53400", f"this connection already keeps {len(names)} {kind}s, the service's limit; "
                          "close some (Close, DEALLOCATE or DISCARD ALL) first")
        if self.stored() - (0 if old is None else _held(old)) + size > MAX_STORED_BYTES:
            raise _too_much()

    async def result(self, portal: _Portal) -> _Result:
        """The portal's answer, run at its first Describe or Execute and kept: one engine call,
        one audit line. Refused (53400) while the connection already holds MAX_STORED_BYTES."""
        if portal.result is None:
            if self.stored() > MAX_STORED_BYTES:
                raise _too_much()
            portal.result = await self.answer(portal.sql)
            portal.size = _ROW_BYTES * len(portal.result.rows) * max(1, len(portal.result.columns))
        return portal.result

    async def extended(self, kind: bytes, r: _Reader) -> None:
        if kind == b"P":
            name, sql = r.cstr(), r.cstr()
            oids = read_oids(r)
            self.room("prepared statement", self.statements, name, len(sql))
            self.statements[name] = (sql, oids)
            self.writer.write(_msg(b"1"))
        elif kind == b"B":
            bind = read_bind(r)
            if bind.statement not in self.statements:
                raise PgError("26000", f"prepared statement {bind.statement[:60]!r} does not exist")
            sql, oids = self.statements[bind.statement]
            try:
                bound = _bind(sql, oids, bind.formats, bind.values)
            except PgError as exc:  # a refused statement: audited as those the engine refuses
                await self.server._audit(user=self.user.name, query=sql, status=400, reason=str(exc))
                raise
            self.room("portal", self.portals, bind.portal, len(bound))
            self.portals[bind.portal] = _Portal(bound, formats=bind.result_formats)
            self.writer.write(_msg(b"2"))
        elif kind == b"C":
            what, name = read_subtype(r, "Close"), r.cstr()
            (self.statements if what == b"S" else self.portals).pop(name, None)
            self.writer.write(_msg(b"3"))
        else:
            raise PgError("0A000", f"protocol message {kind.decode('latin-1')!r} is not supported by the protab service")

    async def describe(self, r: _Reader) -> None:
        what, name = read_subtype(r, "Describe"), r.cstr()
        if what == b"S":
            if name not in self.statements:
                raise PgError("26000", f"prepared statement {name[:60]!r} does not exist")
            sql, oids = self.statements[name]
            n = _count_params(sql)
            oids = (oids + [0] * n)[:n]
            self.writer.write(_msg(b"t", struct.pack("!h", n) + b"".join(struct.pack("!i", o or _TEXT) for o in oids)))
            columns = self.columns(sql, oids, n)
            self.writer.write(_row_description(columns, []) if columns else _msg(b"n"))
            return
        portal = self.portals.get(name)
        if portal is None:
            raise PgError("34000", f"portal {name[:60]!r} does not exist")
        cols = (await self.result(portal)).columns
        check_result_formats(portal.formats, len(cols))
        self.writer.write(_row_description(cols, portal.formats) if cols else _msg(b"n"))

    async def execute(self, r: _Reader) -> None:
        name, max_rows = r.cstr(), r.int32()
        portal = self.portals.get(name)
        if portal is None:
            raise PgError("34000", f"portal {name[:60]!r} does not exist")
        res = await self.result(portal)
        if not res.columns and res.tag == "":
            self.writer.write(_msg(b"I"))
            return
        check_result_formats(portal.formats, len(res.columns))
        end = len(res.rows) if max_rows <= 0 else min(len(res.rows), portal.sent + max_rows)
        self.writer.write(b"".join(_data_row(row, res.columns, portal.formats) for row in res.rows[portal.sent:end]))
        portal.sent = end
        if end < len(res.rows):
            self.writer.write(_msg(b"s"))
        else:
            self.writer.write(_msg(b"C", _cstr(res.tag)))

    def columns(self, sql: str, oids: list[int], n: int) -> list[tuple[str, int]]:
        """The columns of a statement with ``n`` parameters of types ``oids`` from the validator
        alone (no data, placeholder values), for Describe of a statement."""
        local = self.local(sql, dry=True)
        if local is not None:
            return local.columns
        placeholders = [b"0" if oid in (20, 21, 23) else b"" for oid in (oids + [0] * n)[:n]]
        try:
            q = validate(_bind(sql, oids, [], placeholders), self.server.engine.catalog_rights,
                         self.server.engine.user_rights(self.user), max_length=self.server.engine.config.max_sql_length,
                         max_limit=self.server.engine.config.max_limit)
        except QueryError as exc:
            raise PgError(_sqlstate(exc), str(exc)) from None
        oids = {m.alias: _INT8 if m.func == "count" else _FLOAT8 for m in q.measures}
        return [(c, oids.get(c, _TEXT)) for c in q.columns]

    # -- answers ----------------------------------------------------------------------------
    def local(self, sql: str, dry: bool = False) -> _Result | None:
        """The answer of a session statement the front answers itself, else None; ``dry``: the
        answer's shape only, without changing the session (for Describe)."""
        s = _normal(sql)
        low = " ".join(s.lower().split())
        if not s:
            return _Result(tag="")
        if low in _TX:
            tag = _TX[low]
            if not dry:
                self.tx = b"T" if tag == "BEGIN" else b"I"
            return _Result(tag=tag)
        if self.tx == b"E":
            raise PgError("25P02", "current transaction is aborted, commands ignored until end of transaction block")
        if ";" in s:
            return None  # several statements: the validator refuses them
        if _SET.fullmatch(s):
            return _Result(tag="SET")
        m = _DEALLOCATE.fullmatch(s)
        if m:  # SQL-level prepared statements are the protocol's named statements
            name = m.group(2)
            if dry:
                return _Result(tag="DEALLOCATE")
            if name.lower() == "all":
                self.statements = {k: v for k, v in self.statements.items() if k == ""}
                return _Result(tag="DEALLOCATE ALL")
            self.statements.pop(name.strip('"'), None)
            return _Result(tag="DEALLOCATE")
        if low == "discard all":
            if dry:
                return _Result(tag="DISCARD ALL")
            self.statements.clear()
            self.portals.clear()
            return _Result(tag="DISCARD ALL")
        m = _SHOW.fullmatch(s)
        if m:
            name = m.group(1).lower()
            values = {"server_version": SERVER_VERSION, "server_encoding": "UTF8", "client_encoding": "UTF8",
                      "datestyle": "ISO, MDY", "timezone": "UTC", "standard_conforming_strings": "on",
                      "transaction_isolation": "read committed", "search_path": "public", "integer_datetimes": "on",
                      "max_identifier_length": "63", "transaction_read_only": "on", "default_transaction_read_only": "on"}
            if name not in values:
                raise PgError("42704", f"unrecognized configuration parameter {name[:60]!r}")
            return _Result([(name, _TEXT)], [(values[name],)], "SHOW")
        m = _FUNCS.fullmatch(s)
        if m:
            fn = (m.group(3) or m.group(1)).lower()
            value = {"version": f"PostgreSQL {SERVER_VERSION}", "current_schema": "public",
                     "current_database": "protab", "current_user": self.user.name,
                     "session_user": self.user.name}[fn]
            return _Result([(fn, _TEXT)], [(value,)], "SELECT 1")
        return None

    async def answer(self, sql: str) -> _Result:
        """A statement's answer: the front's own for session statements, else Engine.query; audited."""
        t0 = time.perf_counter()
        record: dict[str, Any] = {"user": self.user.name, "query": sql}
        try:
            result = self.local(sql)
            if result is None:
                loop = asyncio.get_running_loop()
                answer = await loop.run_in_executor(None, self.server.engine.query, sql, self.user)
                record.update(query=answer.summary, cells=answer.cells, cached=answer.cached)
                oids = [_TEXT if dt == pl.String else _FLOAT8 if dt.is_float() else _INT8 if dt.is_integer() else _TEXT
                        for dt in answer.frame.dtypes]
                result = _Result(list(zip(answer.frame.columns, oids)), answer.frame.rows(),
                                 f"SELECT {answer.frame.height}")
            status, reason, error = 200, None, None
        except PgError as exc:
            status, reason, error = 400, str(exc), exc
        except QueryError as exc:
            status, reason, error = exc.status, str(exc), PgError(_sqlstate(exc), str(exc))
        except Exception as exc:  # the service's own failure: its cause to the audit log only
            status, reason, error = 500, f"{type(exc).__name__}: {exc}", PgError("XX000", _INTERNAL)
        record.update(status=status, reason=reason, ms=round(1000 * (time.perf_counter() - t0), 1))
        try:
            await self.server._audit(**record)
        except Exception:  # no line, no answer
            raise PgError("XX000", "the service could not write its audit log; the statement was not answered") from None
        if error is not None:
            raise error
        return result


# -- running it beside the HTTP app ------------------------------------------------------------
def attach(app: Any, host: str = "127.0.0.1", port: int = 5432, *,
           max_connections_per_user: int = MAX_CONNECTIONS_PER_USER) -> PgWireServer:
    """Start the front for a :func:`~protab.serve.app.create_app` app, on its engine, with a token
    store and an audit log of its config (the audit lines of both fronts go to the same file),
    and stop it when the app shuts down, before the app closes its engine.
    ``max_connections_per_user``: ``protab serve --pg-connections-per-user``."""
    from contextlib import asynccontextmanager

    from starlette.concurrency import run_in_threadpool

    cfg = app.state.config
    audit = AuditLog(cfg.audit_log)
    server = PgWireServer(app.state.engine, TokenStore(cfg), audit, host, port,
                          max_connections_per_user=max_connections_per_user)
    try:
        server.start()
    except OSError as exc:
        audit.close()
        raise ProtabError(f"--pg-port: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            try:
                yield state
            finally:
                await run_in_threadpool(server.stop)
                audit.close()

    app.router.lifespan_context = lifespan
    return server


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m protab.serve.pgwire --config serve.toml [--db FILE] [--host H] [--port 8000]
    [--pg-port 5432]``: ``protab serve`` with the PostgreSQL front on (port 5432 unless given)."""
    import sys

    from protab.serve.commands import main as serve_main

    args = list(sys.argv[1:] if argv is None else argv)
    if not any(a == "--pg-port" or a.startswith("--pg-port=") for a in args):
        args += ["--pg-port", "5432"]
    return serve_main(args)

if __name__ == "__main__":
    raise SystemExit(main())
