"""Bearer tokens: who is asking. Tokens are stored as SHA-256 hashes only and compared in
constant time (:func:`hmac.compare_digest` against every stored hash, no early exit); a token
is never logged, echoed or stored in clear.

Hashes come from serve.toml (``users.<name>.token_sha256``) and from the tokens file that
``protab serve-token`` manages (JSON; re-read when it changes, so that a revocation takes
effect at once without a restart). A token is refused (401) when it is missing, unknown,
expired or revoked, or its user is; what the user may query is then the engine's concern.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import os
import secrets
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protab.errors import InputError
from protab.serve.config import ServeConfig, UserConfig, parse_expiry

TOKEN_PREFIX = "ptk_"
MAX_TOKEN_LENGTH = 512


class AuthError(Exception):
    """HTTP 401: no valid token. The message says what to do, never what the token was."""

    status = 401


@dataclass(frozen=True)
class TokenEntry:
    """One stored token: its id (for revocation), user, SHA-256 hex, expiry and revocation."""

    id: str
    user: str
    sha256: str
    created: str = ""
    expires: dt.datetime | None = None
    revoked: bool = False


def token_hash(token: str) -> str:
    """SHA-256 of a token as 64 lowercase hex digits (what serve.toml and the tokens file hold)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe text)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


# -- the tokens file ------------------------------------------------------------------------
def read_tokens(path: Path) -> list[TokenEntry]:
    """The entries of a tokens file (none when it does not exist yet)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read the tokens file {str(path)!r}: {type(exc).__name__}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("tokens"), list):
        raise InputError(f"the tokens file {str(path)!r} is not a protab tokens file (no list 'tokens')")
    out = []
    for k, t in enumerate(raw["tokens"]):
        try:
            out.append(TokenEntry(
                id=str(t["id"]), user=str(t["user"]), sha256=str(t["sha256"]), created=str(t.get("created", "")),
                expires=parse_expiry(t["expires"]) if t.get("expires") else None, revoked=bool(t.get("revoked")),
            ))
        except (KeyError, TypeError, ValueError):
            raise InputError(f"the tokens file {str(path)!r}: entry {k} is incomplete or malformed") from None
    return out


def write_tokens(path: Path, entries: list[TokenEntry]) -> None:
    """Write the tokens file atomically (a temporary file renamed over it), readable by its owner only."""
    data = {"tokens": [
        {"id": e.id, "user": e.user, "sha256": e.sha256, "created": e.created,
         "expires": e.expires.isoformat() if e.expires else None, "revoked": e.revoked}
        for e in entries
    ]}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _tokens_path(config: ServeConfig) -> Path:
    if config.tokens_file is None:
        where = str(config.path) if config.path else "the serve config"
        raise InputError(f"{where} has no tokens_file; add tokens_file = \"tokens.json\" to manage tokens")
    return config.tokens_file


def add_token(config: ServeConfig, user: str, expires: Any = None) -> tuple[str, str]:
    """A new token for ``user`` (a user of serve.toml): returns (id, token). Only the hash is
    stored; the token itself exists only in the return value (printed once by the command)."""
    if user not in config.users:
        raise InputError(
            f"no user {user!r} in the serve config (users: {', '.join(sorted(config.users)) or 'none'}); "
            f"add a [users.{user}] section with the user's datasets first"
        )
    path = _tokens_path(config)
    entries = read_tokens(path)
    when = None
    if expires is not None:
        try:
            when = parse_expiry(expires)
        except ValueError:
            raise InputError(f"--expires {expires!r} is not a date such as 2027-12-31") from None
        if when <= _now():
            raise InputError(f"--expires {expires!r} is in the past")
    token = new_token()
    ident = secrets.token_hex(4)
    while any(e.id == ident for e in entries):  # pragma: no cover - 2^32 ids
        ident = secrets.token_hex(4)
    entries.append(TokenEntry(ident, user, token_hash(token), _now().isoformat(timespec="seconds"), when, False))
    write_tokens(path, entries)
    return ident, token


def revoke_tokens(config: ServeConfig, *, token_id: str | None = None, user: str | None = None) -> int:
    """Revoke one token by id, or every token of a user; returns how many were revoked now."""
    if (token_id is None) == (user is None):
        raise InputError("revoke: give either --id (one token) or --user (all tokens of a user)")
    path = _tokens_path(config)
    entries = read_tokens(path)
    hit = [e for e in entries if (e.id == token_id if token_id is not None else e.user == user)]
    if not hit:
        what = f"id {token_id!r}" if token_id is not None else f"user {user!r}"
        raise InputError(f"no token with {what} in {str(path)!r} (see `protab serve-token list`)")
    n = sum(not e.revoked for e in hit)
    ids = {e.id for e in hit}
    write_tokens(path, [TokenEntry(e.id, e.user, e.sha256, e.created, e.expires, True) if e.id in ids else e
                        for e in entries])
    return n


def list_tokens(config: ServeConfig) -> str:
    """A table of the tokens: id, user, created, expires, state (no hashes, no tokens)."""
    entries = read_tokens(_tokens_path(config))
    now = _now()
    lines = [f"{'id':<10}{'user':<20}{'created':<27}{'expires':<27}state"]
    for e in entries:
        state = "revoked" if e.revoked else "expired" if e.expires and e.expires <= now else "active"
        lines.append(f"{e.id:<10}{e.user:<20}{e.created:<27}{e.expires.isoformat() if e.expires else '-':<27}{state}")
    if len(lines) == 1:
        lines.append("(no tokens: give one with `protab serve-token add --user NAME`)")
    return "\n".join(lines)


# -- checking a request's token ---------------------------------------------------------------
class TokenStore:
    """The valid tokens: hashes of serve.toml plus the tokens file, re-read when it changes."""

    def __init__(self, config: ServeConfig) -> None:
        self.users: Mapping[str, UserConfig] = config.users
        self.path = config.tokens_file
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._file: list[TokenEntry] = []
        self._inline = [TokenEntry(f"config:{u.name}:{k}", u.name, h)
                        for u in config.users.values() for k, h in enumerate(u.token_sha256)]
        self._entries()  # a broken tokens file stops the start-up

    def _entries(self) -> list[TokenEntry]:
        if self.path is None:
            return self._inline
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            if stamp != self._stamp:
                self._file = [e for e in read_tokens(self.path) if e.user in self.users] if stamp else []
                self._stamp = stamp
            return self._inline + self._file

    def authenticate(self, header: str | None) -> UserConfig:
        """The user of an ``Authorization: Bearer <token>`` header; :class:`AuthError` otherwise."""
        if not header:
            raise AuthError("authentication needed: send the header 'Authorization: Bearer <token>'")
        scheme, _, token = header.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthError("the Authorization header must be 'Bearer <token>'")
        if len(token) > MAX_TOKEN_LENGTH or not token.isascii() or not token.isprintable():
            raise AuthError("invalid token")
        digest = token_hash(token)
        found = None
        for e in self._entries():  # every hash compared, in constant time each
            if hmac.compare_digest(digest, e.sha256):
                found = e
        if found is None:
            raise AuthError("invalid token")
        user = self.users[found.user]
        now = _now()
        if found.revoked or user.revoked:
            raise AuthError("this token has been revoked; ask the office for a new one")
        for when in (found.expires, user.expires):
            if when is not None and when <= now:
                raise AuthError(f"this token expired on {when.isoformat(timespec='seconds')}; ask the office "
                                "for a new one")
        return user
