"""Saved tables per user: the request, never the numbers, re-run on demand.

``POST /v1/saved`` ``{"name": ..., "request": {table request}}`` keeps a table request (checked
as a table request when saved); ``GET /v1/saved/{name}`` runs it again through the normal path
(the rights of the day, the rate limit, the cache, jobs for large tables), so that a saved
table never holds a number the service would not publish today. A user keeps at most
``saved_per_user`` of them (409 beyond). They are kept in ``<state folder>/saved.json``, read
afresh and replaced atomically under an exclusive ``flock`` (``saved.lock``) at every change.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from protab.errors import InputError
from protab.serve.jobs import write_atomic
from protab.serve.query import QueryError, QueryRefused

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: one service per state folder
    fcntl = None  # type: ignore[assignment]

FILE = "saved.json"
#: a saved table's or saved groups' name, matched in full (``$`` would let a trailing newline pass)
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class SavedFull(QueryError):
    """HTTP 409: the user keeps as many saved tables (or groups) as the service allows."""

    status = 409
    rule = "saved_per_user"
    advice = "delete one of yours (DELETE /v1/saved/{name}) before saving another"


class SavedUnknown(QueryError):
    """HTTP 404: no saved table (or saved groups) of that name for this user."""

    status = 404
    rule = "saved"
    advice = "GET /v1/saved (saved tables) or GET /v1/groups (saved groups) lists yours"


def check_name(name: Any, what: str = "a saved table's") -> str:
    """A saved table's (or ``what``'s) name: 1 to 64 letters, digits, ``.``, ``_``, ``-`` (a letter
    or digit first)."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        shown = repr(name[:40]) if isinstance(name, str) else type(name).__name__
        raise QueryRefused(f"name {shown} is not {what} name: use 1 to 64 letters, digits, '.', '_' "
                           "or '-', starting with a letter or digit", rule="name",
                           advice="use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return name


class UserStore:
    """What users keep, per user, in one JSON file of the state folder (``file``), read afresh and
    replaced atomically under a lock at every change."""

    file = FILE
    what = "saved tables"

    def __init__(self, folder: Path, per_user: int = 100) -> None:
        self.path = Path(folder) / self.file
        self.per_user = per_user
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, Any]] = self._read()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """The file, read afresh, under this process's lock and an exclusive ``flock`` on
        ``saved.lock`` (an embedded app may share the folder with a running service)."""
        with self._lock:
            fd = os.open(self.path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                self._users = self._read()
                yield
            finally:
                os.close(fd)

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"cannot read the {self.what} {str(self.path)!r}: {type(exc).__name__}") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("users"), dict):
            raise InputError(f"{str(self.path)!r} is not a protab {self.what} file (no object 'users')")
        return raw["users"]

    def _save(self) -> None:
        text = json.dumps({"users": self._users}, ensure_ascii=True, indent=1)
        write_atomic(self.path, lambda fh: fh.write(text), "w")


class SavedTables(UserStore):
    """The saved table requests of every user, in ``folder/saved.json``."""

    def save(self, user: str, name: str, request: dict[str, Any]) -> dict[str, Any]:
        """Keep ``request`` as ``user``'s table ``name`` (replacing one of that name)."""
        check_name(name)
        with self._locked():
            mine = self._users.setdefault(user, {})
            if name not in mine and len(mine) >= self.per_user:
                raise SavedFull(
                    f"you have {len(mine)} saved tables, the most the service keeps for one user; delete one "
                    "(DELETE /v1/saved/{name}) before saving another")
            entry = {"request": request, "saved": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
            mine[name] = entry
            self._save()
        return {"name": name, **entry}

    def get(self, user: str, name: str) -> dict[str, Any]:
        """``user``'s saved table ``name`` (404 when there is none)."""
        with self._locked():
            entry = self._users.get(user, {}).get(name)
        if entry is None:
            raise SavedUnknown(f"you have no saved table named {str(name)[:64]!r}; GET /v1/saved lists yours")
        return {"name": name, **entry}

    def listing(self, user: str) -> list[dict[str, Any]]:
        with self._locked():
            return [{"name": n, **e} for n, e in sorted(self._users.get(user, {}).items())]

    def delete(self, user: str, name: str) -> None:
        with self._locked():
            mine = self._users.get(user, {})
            if name not in mine:
                raise SavedUnknown(f"you have no saved table named {str(name)[:64]!r}; GET /v1/saved lists yours")
            del mine[name]
            self._save()
