"""A PostgreSQL wire-protocol front of the query service, so that psql, psycopg and other
PostgreSQL clients can send the SQL that ``POST /v1/query`` accepts.

It speaks the part of protocol 3.0 that such clients use (PostgreSQL documentation, chapter
"Frontend/Backend Protocol"): start-up, cleartext password, the simple query protocol and the
extended one (Parse, Bind, Describe, Execute, Close, Sync, Flush). It computes nothing: every
statement that asks for data goes to :meth:`Broker.query <protab.serve.broker.Broker.query>`,
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

Answered without the broker, because they tell nothing about the data: ``SET`` (accepted and
ignored), ``SHOW`` of the server's parameters, ``BEGIN``/``COMMIT``/``ROLLBACK`` (the service is
read-only), ``SELECT version()``, ``current_schema()``, ``current_database()``, ``current_user``.
Anything else, such as the ``pg_catalog`` look-ups of graphical clients, reaches the validator
and is refused with its message.

TLS (``protab serve --tls-cert --tls-key``, :mod:`protab.serve.tls`): an SSLRequest is answered
``S`` and the connection upgraded before the start-up message, as PostgreSQL does; bytes sent in
clear after the request are refused (08P01). Without the files, SSLRequest is answered ``N`` and
clients continue in clear (libpq's default ``sslmode=prefer``); GSSENCRequest is always answered
``N``. ``require_tls = true`` in serve.toml refuses a start-up in clear (28000) before any
password is asked. A client whose handshake fails is closed; the others go on.

``python -m protab.serve.pgwire`` is ``protab serve`` with this front on (:func:`main`).
"""
from __future__ import annotations

import asyncio
import secrets
import ssl
import struct
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from protab.errors import ProtabError
from protab.serve import service
from protab.serve.audit_log import AuditLog
from protab.serve.auth import AuthError, TokenStore
from protab.serve.broker import Broker
from protab.serve.config import UserConfig
from protab.serve.pgconnection import INTERNAL, SERVER_VERSION, Connection
from protab.serve.pgproto import PgError, _cstr, _error_msg, _msg
from protab.serve.tls import PG_ALPN, TLSFiles, has_unread_data

_SSL_REQUEST, _GSS_REQUEST, _CANCEL_REQUEST, _PROTOCOL_3 = 80877103, 80877104, 80877102, 196608
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


class PgWireServer:
    """The PostgreSQL front of one broker, token store and audit log, listening on ``host:port``
    (port 0: a free one). :meth:`start` serves from a thread, :meth:`stop` ends it."""

    def __init__(self, broker: Broker, tokens: TokenStore, audit: AuditLog, host: str = "127.0.0.1",
                 port: int = 5432, *, max_connections: int = 64, login_seconds: float = LOGIN_SECONDS,
                 idle_seconds: float = IDLE_SECONDS, max_waiting: int = MAX_WAITING,
                 max_waiting_per_peer: int = MAX_WAITING_PER_PEER,
                 max_connections_per_user: int = MAX_CONNECTIONS_PER_USER, tls: ssl.SSLContext | None = None,
                 require_tls: bool = False) -> None:
        if require_tls and tls is None:
            raise ProtabError("require_tls = true in the serve config needs TLS: start with --tls-cert and --tls-key")
        self.broker, self.tokens, self.audit = broker, tokens, audit
        self.tls, self.require_tls = tls, require_tls
        self.host, self.port = host, port
        self.max_message = max(broker.config.max_body_bytes, broker.config.max_sql_length + 1024)
        self.max_statements, self.max_stored_bytes = MAX_STATEMENTS, MAX_STORED_BYTES
        self.login_seconds, self.idle_seconds = login_seconds, idle_seconds
        self.max_waiting, self.max_waiting_per_peer = max_waiting, max_waiting_per_peer
        self.max_connections_per_user = max_connections_per_user
        self._slots = threading.BoundedSemaphore(max_connections)
        # a thread per connection slot for the statements: a user's many statements wait for the broker's
        # sessions (handed out in turn by user), not for one of a few shared threads
        self.executor = ThreadPoolExecutor(max_workers=max_connections, thread_name_prefix="protab-pg")
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
        self.executor.shutdown(wait=False, cancel_futures=True)

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
                    await Connection(self, user, reader, writer).run()
                finally:
                    self._release(user)
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, asyncio.CancelledError):
            pass  # gone, or a TLS handshake that failed: nothing to answer
        except PgError as exc:
            writer.write(_error_msg(exc.code, str(exc), fatal=True, rule=exc.rule, advice=exc.advice))
        except (struct.error, ValueError):
            writer.write(_error_msg("08P01", "malformed start-up or login message", fatal=True))
        except Exception as exc:  # the service's own failure ends this connection only; its cause to the audit log
            writer.write(_error_msg("XX000", INTERNAL, fatal=True))
            try:
                await self.write_audit(user=None if user is None else user.name, status=500,
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
            except (ConnectionError, ssl.SSLError, asyncio.CancelledError, RuntimeError):
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
            on_tls = writer.get_extra_info("ssl_object") is not None
            if code in (_SSL_REQUEST, _GSS_REQUEST):
                if on_tls:
                    raise PgError("08P01", "a second encryption request on a connection already over TLS")
                if code == _SSL_REQUEST and self.tls is not None:
                    await self._upgrade(reader, writer)
                else:
                    writer.write(b"N")  # no TLS (no files given), no GSSAPI: the client goes on in clear or gives up
                    await writer.drain()
                continue
            if code == _CANCEL_REQUEST:
                return None  # statements are not cancelled: the connection just closes
            if code != _PROTOCOL_3:
                raise PgError("0A000", f"unsupported protocol version {code >> 16}.{code & 0xFFFF}; use 3.0")
            parts = body[4:].split(b"\x00")
            params = {parts[k].decode("utf-8", "replace"): parts[k + 1].decode("utf-8", "replace")
                      for k in range(0, len(parts) - 1, 2) if parts[k]}
            if self.require_tls and not on_tls:
                await self.write_audit(status=403, reason=f"login as {params.get('user', '')[:60]!r} refused: "
                                       "not over TLS (require_tls)")
                raise PgError("28000", "this server requires TLS: connect with sslmode=require (JDBC: ssl=true)",
                              fatal=True)
            return await self._login(reader, writer, params)

    async def _upgrade(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer an SSLRequest with ``S`` and run the TLS handshake (a failed one raises ssl.SSLError)."""
        if has_unread_data(reader):  # sent in clear after the request: never read as if over TLS
            raise PgError("08P01", "received unencrypted data after the SSL request", fatal=True)
        writer.write(b"S")
        await writer.drain()
        assert self.tls is not None
        if sys.version_info < (3, 11):  # pragma: no cover (no StreamWriter.start_tls; refused at start-up too)
            raise ProtabError("TLS on the service needs Python 3.11 or later")
        await writer.start_tls(self.tls)

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
            await self.write_audit(user=None, query=None, status=401, reason=f"login as {name[:60]!r}: {exc}")
            raise PgError("28P01", f"password authentication failed for user {name[:60]!r}: {exc} "
                          "(the password is your protab token)", fatal=True) from None
        except Exception as exc:  # a broken tokens file: the office's problem
            await self.write_audit(user=None, query=None, status=500, reason=f"token store: {type(exc).__name__}: {exc}")
            raise PgError("XX000", INTERNAL, fatal=True) from None
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
            await self.write_audit(user=user.name, status=503,
                              reason=f"login refused: the user already holds {held} connections (the per-user limit)")
            raise PgError("53300", f"too many connections for user {user.name[:60]!r}: at most "
                          f"{self.max_connections_per_user} at once per user (the service's per-user limit); close "
                          "one of your connections first", fatal=True)
        if not self._slots.acquire(blocking=False):
            await self.write_audit(user=user.name, status=503, reason="login refused: too many connections")
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

    async def write_audit(self, **fields: Any) -> None:
        record = {"user": None, "endpoint": ENDPOINT, "query": None, "status": 200, "accepted": False,
                  "reason": None, "cells": None, "cached": None, "format": None, "ms": None}
        record.update(fields)
        record["accepted"] = record["status"] == 200
        await asyncio.get_running_loop().run_in_executor(None, lambda: self.audit.write(**record))


# -- running it beside the HTTP app ------------------------------------------------------------
def attach(app: Any, host: str = "127.0.0.1", port: int = 5432, *,
           max_connections_per_user: int = MAX_CONNECTIONS_PER_USER) -> PgWireServer:
    """Start the front for a :func:`~protab.serve.app.create_app` app, on its broker, with a token
    store and an audit log of its config (the audit lines of both fronts go to the same file),
    and stop it when the app shuts down, before the app closes its broker.
    ``max_connections_per_user``: ``protab serve --pg-connections-per-user``; TLS with the
    :class:`~protab.serve.tls.TLSFiles` in ``app.state.tls`` (``--tls-cert``, ``--tls-key``), if
    any, and the config's ``require_tls``."""
    from contextlib import asynccontextmanager

    from starlette.concurrency import run_in_threadpool

    cfg = app.state.config
    files: TLSFiles | None = getattr(app.state, "tls", None)
    tls = None if files is None else files.context(alpn=PG_ALPN)
    audit = AuditLog(cfg.audit_log)
    server = PgWireServer(app.state.broker, TokenStore(cfg), audit, host, port,
                          max_connections_per_user=max_connections_per_user, tls=tls,
                          require_tls=getattr(cfg, "require_tls", False))
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

    args = list(sys.argv[1:] if argv is None else argv)
    if not any(a == "--pg-port" or a.startswith("--pg-port=") for a in args):
        args += ["--pg-port", "5432"]
    return service.main(args, attach)


if __name__ == "__main__":
    raise SystemExit(main())
