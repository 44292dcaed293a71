"""Bearer tokens: who is asking. Tokens are stored as SHA-256 hashes only and compared in
constant time (:func:`hmac.compare_digest` against every stored hash, no early exit); a token
is never logged, echoed or stored in clear.

Hashes come from serve.toml (``users.<name>.token_sha256``) and from the tokens file that
``protab serve-token`` manages (JSON; re-read when it changes, so that a revocation takes
effect at once without a restart). A token is refused (401) when it is missing, unknown,
expired or revoked, or its user is; what the user may query is then the broker's concern.

The tokens file is changed read-modify-write under an exclusive lock (``fcntl.flock`` on
``<tokens file>.lock`` beside it), so that concurrent ``add`` and ``revoke`` commands lose
nothing, and replaced atomically (a temporary file in the same folder, mode 0600, fsync'ed,
renamed over it, the folder fsync'ed), so that the service only ever reads whole files. A
reload that fails (a file edited by hand, half saved) keeps the tokens read before.
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
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protab.errors import InputError
from protab.serve.config import ServeConfig, UserConfig, parse_expiry

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: the token commands must not run concurrently
    fcntl = None  # type: ignore[assignment]

TOKEN_PREFIX = "ptk_"
MAX_TOKEN_LENGTH = 512
#: a tokens file changed less than this long ago (its status-change time) is re-read at every
#: request: two versions written within one tick of the file system's clock may share a size
#: and times ("racy" stamps, as git calls them)
RACY_SECONDS = 2.0


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
    """Write the tokens file atomically, readable by its owner only: a temporary file (mode
    0600) in the same folder, fsync'ed, renamed over it, and the folder fsync'ed so that the
    rename survives a crash. Callers that read the file first hold :func:`locked`."""
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
    _fsync_folder(path.parent)


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - a folder that cannot be opened (not POSIX)
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - file systems that do not sync folders
        pass
    finally:
        os.close(fd)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of a tokens file (``fcntl.flock`` on ``<name>.lock`` beside it)
    for a read-modify-write; concurrent ``protab serve-token`` commands wait for each other.
    The lock file stays (removing it would let two commands lock different files)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(path.name + ".lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise InputError(f"cannot open the lock file {str(lock)!r} of the tokens file: {exc.strerror}") from None
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


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
    when = None
    if expires is not None:
        try:
            when = parse_expiry(expires)
        except ValueError:
            raise InputError(f"--expires {expires!r} is not a date such as 2027-12-31") from None
        if when <= _now():
            raise InputError(f"--expires {expires!r} is in the past")
    token = new_token()
    with locked(path):
        entries = read_tokens(path)
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
    with locked(path):
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


def show_expiry(when: dt.datetime) -> str:
    """An expiry as the office gave it: a date (``--expires 2027-06-30``, kept as the end of
    that day, UTC) as "until end of 2027-06-30", any other time as ISO text."""
    if (when.hour, when.minute, when.second, when.microsecond) == (0, 0, 0, 0):
        return f"until end of {(when - dt.timedelta(days=1)).date().isoformat()}"
    return f"until {when.isoformat(timespec='seconds')}"


def token_state(entry: TokenEntry, user: UserConfig | None, now: dt.datetime) -> str:
    """The effective state of a token: its own (revoked, expired) and its user's in serve.toml
    (revoked, expired, gone), the first that turns it off; "active" when none does."""
    if entry.revoked:
        return "revoked"
    if user is None:
        return "unknown user"
    if user.revoked:
        return "revoked (user)"
    if entry.expires is not None and entry.expires <= now:
        return "expired"
    if user.expires is not None and user.expires <= now:
        return "expired (user)"
    return "active"


def list_tokens(config: ServeConfig) -> str:
    """A table of the tokens: id, user, created, expires, effective state (no hashes, no tokens)."""
    entries = read_tokens(_tokens_path(config))
    now = _now()
    rows = [("id", "user", "created", "expires", "state")]
    rows += [(e.id, e.user, e.created, show_expiry(e.expires) if e.expires else "-",
              token_state(e, config.users.get(e.user), now)) for e in entries]
    widths = [max(len(r[k]) for r in rows) + 2 for k in range(4)]
    lines = ["".join(f"{v:<{w}}" for v, w in zip(r, widths)) + r[4] for r in rows]
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
        self._stamp: tuple[int, ...] | None = None
        self._racy = True
        self._file: list[TokenEntry] = []
        self._inline = [TokenEntry(f"config:{u.name}:{k}", u.name, h)
                        for u in config.users.values() for k, h in enumerate(u.token_sha256)]
        self._load(self._stat())  # a broken tokens file stops the start-up

    def _stat(self) -> tuple[int, ...] | None:
        """What tells two versions of the tokens file apart: inode (a replaced file is a new
        one), size, modification and status-change times; None when there is no file."""
        if self.path is None:
            return None
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def _load(self, stamp: tuple[int, ...] | None) -> None:
        # a stamp only for a file (self._stat)
        self._file = ([e for e in read_tokens(self.path) if e.user in self.users]
                      if stamp and self.path is not None else [])
        self._stamp = stamp
        self._racy = stamp is not None and time.time_ns() - stamp[3] < RACY_SECONDS * 1e9

    def _entries(self) -> list[TokenEntry]:
        """Inline hashes and the tokens file, re-read when its stamp changed (or changed a moment
        ago); a file that cannot be read now keeps the entries read before, and is tried again."""
        if self.path is None:
            return self._inline
        stamp = self._stat()
        with self._lock:
            if stamp != self._stamp or self._racy:
                try:
                    self._load(stamp)
                except InputError:
                    pass  # the previous entries stay in force until the file reads again
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
                raise AuthError(f"this token expired (it was valid {show_expiry(when)}, UTC); ask the office "
                                "for a new one")
        return user
