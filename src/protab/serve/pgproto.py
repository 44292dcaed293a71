"""The messages of the PostgreSQL wire protocol 3.0 as the service's PostgreSQL front
(:mod:`protab.serve.pgwire`) reads and writes them (PostgreSQL documentation, chapter
"Frontend/Backend Protocol", section "Message Formats"), and the binding of parameters.

Messages from the client are checked for their shape as PostgreSQL checks them
(``exec_bind_message`` of its ``postgres.c``): a negative count, data shorter than a length
says, as many parameter format codes as neither none, one nor one per value, a format code
other than 0 (text) and 1 (binary), a Describe or Close of neither a statement nor a portal,
result format codes that fit no number of columns. Each is a :class:`PgError` (08P01 protocol
violation, 22023 for a format code): an ErrorResponse after which the extended protocol
discards messages up to Sync, not the end of the connection.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Any

from sqlglot import exp, parse_one
from sqlglot.errors import SqlglotError

from protab.serve.query import ALLOWED_FORM, QueryError
from protab.serve.validator import check_strings

_TEXT, _INT8, _FLOAT8 = 25, 20, 701  # type oids of pg_type
_INT_OIDS = (20, 21, 23)  # int8, int2, int4
_WHOLE = re.compile(r"-?[0-9]{1,38}")  # a whole number in text (up to DuckDB's HUGEINT)


class PgError(Exception):
    """An ErrorResponse: SQLSTATE ``code`` and ``message``; ``fatal`` ends the connection; a
    refusal's ``rule`` goes into the DETAIL field (``rule: <name>``), its ``advice`` into HINT."""

    def __init__(self, code: str, message: str, fatal: bool = False, *, rule: str | None = None,
                 advice: str | None = None) -> None:
        super().__init__(message)
        self.code, self.fatal, self.rule, self.advice = code, fatal, rule, advice

    def message(self) -> bytes:
        """The ErrorResponse message."""
        return _error_msg(self.code, str(self), self.fatal, rule=self.rule, advice=self.advice)


# -- messages ---------------------------------------------------------------------------------
def _msg(kind: bytes, payload: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(payload) + 4) + payload


def _cstr(s: str) -> bytes:
    return s.encode("utf-8") + b"\x00"


def _error_msg(code: str, message: str, fatal: bool = False, *, rule: str | None = None,
               advice: str | None = None) -> bytes:
    """An ErrorResponse (fields S, V, C, M; D ``rule: <name>`` and H the advice when given)."""
    sev = "FATAL" if fatal else "ERROR"
    extra = (b"D" + _cstr(f"rule: {rule}") if rule else b"") + (b"H" + _cstr(advice) if advice else b"")
    return _msg(b"E", b"S" + _cstr(sev) + b"V" + _cstr(sev) + b"C" + _cstr(code) + b"M" + _cstr(message) + extra
                + b"\x00")


def _row_description(columns: list[tuple[str, int]], formats: list[int]) -> bytes:
    out = [struct.pack("!h", len(columns))]
    for k, (name, oid) in enumerate(columns):
        size = 8 if oid in (_INT8, _FLOAT8) else -1
        out.append(_cstr(name) + struct.pack("!ihihih", 0, 0, oid, size, -1, _format(formats, k)))
    return _msg(b"T", b"".join(out))


def _format(formats: list[int], k: int) -> int:
    if not formats:
        return 0
    return formats[0] if len(formats) == 1 else formats[k]


def _encode(value: Any, oid: int, fmt: int) -> bytes:
    if fmt == 1:
        if oid == _INT8:
            return struct.pack("!q", int(value))
        if oid == _FLOAT8:
            return struct.pack("!d", float(value))
        return str(value).encode("utf-8")
    if isinstance(value, float):
        return repr(value).encode()
    return str(value).encode("utf-8")


def _data_row(row: tuple[Any, ...], columns: list[tuple[str, int]], formats: list[int]) -> bytes:
    out = [struct.pack("!h", len(row))]
    for k, v in enumerate(row):
        if v is None:
            out.append(struct.pack("!i", -1))
        else:
            b = _encode(v, columns[k][1], _format(formats, k))
            out.append(struct.pack("!i", len(b)) + b)
    return _msg(b"D", b"".join(out))


class _Reader:
    """Reads a message payload."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def int16(self) -> int:
        (v,) = struct.unpack_from("!h", self.data, self.pos)
        self.pos += 2
        return v

    def int32(self) -> int:
        (v,) = struct.unpack_from("!i", self.data, self.pos)
        self.pos += 4
        return v

    def cstr(self) -> str:
        end = self.data.index(b"\x00", self.pos)
        s = self.data[self.pos:end].decode("utf-8")
        self.pos = end + 1
        return s

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise PgError("08P01", "malformed message")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b


# -- the shape of extended-protocol messages --------------------------------------------------
def _count(r: _Reader, what: str) -> int:
    """A count (int16) of ``what`` in a message; 08P01 when negative."""
    n = r.int16()
    if n < 0:
        raise PgError("08P01", f"invalid message: a negative number of {what} ({n})")
    return n


def _format_codes(r: _Reader, what: str) -> list[int]:
    """A list of format codes (0 text, 1 binary); 22023 for any other, as PostgreSQL."""
    codes = [r.int16() for _ in range(_count(r, f"{what} format codes"))]
    bad = next((c for c in codes if c not in (0, 1)), None)
    if bad is not None:
        raise PgError("22023", f"unsupported format code: {bad} (0 is text, 1 binary)")
    return codes


@dataclass
class Bind:
    """A Bind message: portal and statement names, parameter formats and values, result formats."""

    portal: str
    statement: str
    formats: list[int]
    values: list[bytes | None]
    result_formats: list[int]


def read_bind(r: _Reader) -> Bind:
    """A Bind message's fields, their shapes checked: as many parameter format codes as none
    (all text), one (for all) or one per value, else 08P01."""
    portal, statement = r.cstr(), r.cstr()
    formats = _format_codes(r, "parameter")
    values: list[bytes | None] = []
    for _ in range(_count(r, "parameter values")):
        n = r.int32()
        values.append(None if n == -1 else r.take(n))
    result_formats = _format_codes(r, "result")
    if len(formats) not in (0, 1, len(values)):
        raise PgError("08P01", f"bind message has {len(formats)} parameter formats but {len(values)} parameters; "
                      "send none (all text), one (for all) or one per parameter")
    return Bind(portal, statement, formats, values, result_formats)


def read_oids(r: _Reader) -> list[int]:
    """The parameter type oids of a Parse message (after the statement's name and text)."""
    return [r.int32() for _ in range(_count(r, "parameter types"))]


def read_subtype(r: _Reader, message: str) -> bytes:
    """The subtype of a Describe or Close message: b"S" (statement) or b"P" (portal), else 08P01."""
    what = r.take(1)
    if what not in (b"S", b"P"):
        raise PgError("08P01", f"invalid {message} message subtype {what!r}: S (statement) or P (portal)")
    return what


def check_result_formats(formats: list[int], columns: int) -> None:
    """08P01 unless the result format codes of a Bind fit a result of ``columns`` columns:
    none (all text), one (for all) or one per column; a result without columns takes any
    (PostgreSQL's ``PortalSetResultFormat``)."""
    if columns and len(formats) not in (0, 1, columns):
        raise PgError("08P01", f"bind message has {len(formats)} result formats but the query has {columns} "
                      "columns; send none (all text), one (for all) or one per column")


# -- binding parameters ----------------------------------------------------------------------
_TOO_DEEP = f"the SQL is nested too deeply. {ALLOWED_FORM}"  # the validator's words over HTTP


def _too_deep() -> PgError:
    return PgError("42000", _TOO_DEEP, rule="allowed_form", advice="write the query in the allowed form, less nested")


def _count_params(sql: str) -> int:
    try:
        tree = parse_one(sql, read="duckdb")
        nums = [int(p.this) for p in tree.find_all(exp.Placeholder) if str(p.this).isdigit()]
    except SqlglotError:
        return 0
    except RecursionError:  # refused as the validator refuses it over HTTP
        raise _too_deep() from None
    return max(nums, default=0)


def _literal(k: int, value: bytes | None, oid: int, fmt: int) -> exp.Expression:
    """Parameter ``$k+1`` as a literal: NULL, a whole number for the integer types, else text."""
    if value is None:
        return exp.Null()
    if fmt == 0:
        text = value.decode("utf-8")
        if oid not in _INT_OIDS:
            return exp.Literal.string(text)
        if not _WHOLE.fullmatch(text):
            raise PgError("22P02", f"parameter ${k + 1}: {text[:40]!r} is not a whole number")
        return exp.Literal.number(int(text))
    if oid in _INT_OIDS:
        return exp.Literal.number(int.from_bytes(value, "big", signed=True))
    if oid in (25, 1043, 0, 705):
        return exp.Literal.string(value.decode("utf-8"))
    raise PgError("0A000", f"parameter ${k + 1}: binary values of type oid {oid} are not supported; "
                  "send codes as text or whole numbers")


def _bind(sql: str, oids: list[int], formats: list[int], values: list[bytes | None]) -> str:
    """The statement with its parameters ($1, $2, ...) replaced by literals in sqlglot's tree
    (never pasted into the text); the validator then checks the result as any other query."""
    if not values:
        return sql
    try:
        check_strings(sql)  # bound, a $$...$$ string would come back as '...': said as over HTTP
    except QueryError as exc:
        raise PgError("42000", str(exc), rule=exc.rule, advice=exc.advice) from None
    if len(formats) not in (0, 1, len(values)):
        raise PgError("08P01", f"bind message has {len(formats)} parameter formats but {len(values)} parameters")
    literals = [_literal(k, v, oids[k] if k < len(oids) else 0,
                         formats[0] if len(formats) == 1 else formats[k] if formats else 0)
                for k, v in enumerate(values)]
    try:
        tree = parse_one(sql, read="duckdb")
    except SqlglotError as exc:
        raise PgError("42601", f"syntax error: {str(exc)[:200]}") from None
    except RecursionError:  # refused as the validator refuses it over HTTP
        raise _too_deep() from None

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Placeholder) and str(node.this).isdigit():
            k = int(node.this) - 1
            if not 0 <= k < len(literals):
                raise PgError("08P01", f"the statement uses ${k + 1} but {len(literals)} parameters were bound")
            return literals[k].copy()
        return node

    try:
        return tree.transform(swap).sql(dialect="duckdb")
    except RecursionError:
        raise _too_deep() from None
