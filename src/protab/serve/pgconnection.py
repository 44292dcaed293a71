"""One logged-in connection of the PostgreSQL front (:class:`Connection`): its messages, the
simple and the extended protocol, its prepared statements and portals (bounded in number and
bytes), and the answers of its statements: the front's own for session statements that tell
nothing about the data (SET, SHOW, BEGIN, version() ...), else :meth:`Broker.query
<protab.serve.broker.Broker.query>`, every one audited before its answer is sent."""

from __future__ import annotations

import asyncio
import re
import struct
import time
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Protocol

import polars as pl

from protab.serve import pgcatalog
from protab.serve.broker import Broker
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
    _msg,
    _Reader,
    _row_description,
    check_result_formats,
    read_bind,
    read_oids,
    read_subtype,
)
from protab.serve.query import QueryError, QueryForbidden, QueryThrottled
from protab.serve.validator import validate

SERVER_VERSION = "16.0 (protab)"
INTERNAL = "the service could not answer this statement (an internal error, recorded for the office)"


class Front(Protocol):
    """What a connection uses of its server (:class:`~protab.serve.pgwire.PgWireServer`)."""

    broker: Broker
    max_message: int
    idle_seconds: float
    max_statements: int
    max_stored_bytes: int

    @property
    def executor(self) -> Executor:
        """The threads statements are answered in (one per connection slot: none waits for a thread)."""

    async def write_audit(self, **fields: Any) -> None: ...


def _sqlstate(exc: QueryError) -> str:
    if isinstance(exc, QueryThrottled):
        return "53400"  # configuration_limit_exceeded: the user's rate
    return "42501" if isinstance(exc, QueryForbidden) else "42000"


def pg_refusal(exc: QueryError) -> PgError:
    """A refusal of the broker or the validator as an ErrorResponse: its SQLSTATE, message, and
    its rule (DETAIL) and advice (HINT)."""
    return PgError(_sqlstate(exc), str(exc), rule=exc.rule, advice=exc.advice)


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


def _too_much(limit: int) -> PgError:
    return PgError("53400", f"the prepared statements and portals of this connection would hold more than "
                   f"{limit / 2**20:g} MiB, the service's limit; close some (Close, DEALLOCATE or "
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



class Connection:
    """The statements of one logged-in connection."""

    def __init__(self, server: Front, user: UserConfig, reader: asyncio.StreamReader,
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
        self.writer.write(exc.message())
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
        """Refuse (53400) a new statement or portal past the server's max_statements of its kind,
        or one that would take the connection past max_stored_bytes; one that replaces its
        namesake counts once."""
        old = names.get(name)
        if old is None and len(names) >= self.server.max_statements:
            raise PgError("53400", f"this connection already keeps {len(names)} {kind}s, the service's limit; "
                          "close some (Close, DEALLOCATE or DISCARD ALL) first")
        if self.stored() - (0 if old is None else _held(old)) + size > self.server.max_stored_bytes:
            raise _too_much(self.server.max_stored_bytes)

    async def result(self, portal: _Portal) -> _Result:
        """The portal's answer, run at its first Describe or Execute and kept: one broker call,
        one audit line. Refused (53400) while the connection already holds max_stored_bytes."""
        if portal.result is None:
            if self.stored() > self.server.max_stored_bytes:
                raise _too_much(self.server.max_stored_bytes)
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
            except PgError as exc:  # a refused statement: audited as those the broker refuses
                await self.server.write_audit(user=self.user.name, query=sql, status=400, reason=str(exc))
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
        try:
            found = pgcatalog.answer(sql, self.server.broker, self.user)
        except QueryError as exc:
            raise pg_refusal(exc) from None
        if found is not None:
            return [(c, _TEXT) for c in found.columns]
        placeholders: list[bytes | None] = [b"0" if oid in (20, 21, 23) else b"" for oid in (oids + [0] * n)[:n]]
        try:
            q = validate(_bind(sql, oids, [], placeholders), self.server.broker.catalog_rights,
                         self.server.broker.user_rights(self.user), max_length=self.server.broker.config.max_sql_length,
                         max_limit=self.server.broker.config.max_limit)
        except QueryError as exc:
            raise pg_refusal(exc) from None
        types = {m.alias: _INT8 if m.func == "count" else _FLOAT8 for m in q.measures}
        return [(c, types.get(c, _TEXT)) for c in q.columns]

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

    def catalog(self, sql: str) -> _Result | None:
        """psql's catalogue queries (\\d, \\dt, \\d NAME), answered from the catalogue of the user's
        rights (protab.serve.pgcatalog); None for any other statement. Counted against the rate."""
        found = pgcatalog.answer(sql, self.server.broker, self.user)
        if found is None:
            return None
        self.server.broker.rate.admit(self.user.name)
        return _Result([(c, _TEXT) for c in found.columns], found.rows, f"SELECT {len(found.rows)}")

    async def answer(self, sql: str) -> _Result:
        """A statement's answer: the front's own for session statements, else Broker.query; audited."""
        t0 = time.perf_counter()
        record: dict[str, Any] = {"user": self.user.name, "query": sql}
        try:
            result = self.local(sql)
            if result is None:
                result = self.catalog(sql)
            if result is None:
                loop = asyncio.get_running_loop()
                answer = await loop.run_in_executor(self.server.executor, self.server.broker.query, sql, self.user)
                record.update(query=answer.summary, cells=answer.cells, cached=answer.cached)
                if answer.notice:  # areas the disclosure rules withheld: a NoticeResponse before the rows
                    self.writer.write(_msg(b"N", b"SNOTICE\0VNOTICE\0C01000\0M" + _cstr(answer.notice) + b"\0"))
                oids = [_TEXT if dt == pl.String else _FLOAT8 if dt.is_float() else _INT8 if dt.is_integer() else _TEXT
                        for dt in answer.frame.dtypes]
                result = _Result(list(zip(answer.frame.columns, oids)), answer.frame.rows(),
                                 f"SELECT {answer.frame.height}")
            status, reason, error = 200, None, None
        except PgError as exc:
            status, reason, error = 400, str(exc), exc
        except QueryError as exc:
            status, reason, error = exc.status, str(exc), pg_refusal(exc)
        except Exception as exc:  # the service's own failure: its cause to the audit log only
            status, reason, error = 500, f"{type(exc).__name__}: {exc}", PgError("XX000", INTERNAL)
        record.update(status=status, reason=reason, ms=round(1000 * (time.perf_counter() - t0), 1))
        try:
            await self.server.write_audit(**record)
        except Exception:  # no line, no answer
            raise PgError("XX000", "the service could not write its audit log; the statement was not answered") from None
        if error is not None:
            raise error
        assert result is not None  # each branch of the try gives one, or an error
        return result
