"""The audit log: one JSON line per request, on disk before the answer leaves.

Each line holds the time (UTC), the user (null when no valid token was shown), the endpoint,
the normalised query or a summary of the request, the HTTP status, whether it was accepted,
the reason of a refusal, the number of cells answered and the time taken. A line is written,
flushed and ``os.fsync``'ed before the answer is sent, so that every answer an analyst saw is
in the log even if the server is killed (kill -9) or the machine loses power right after.
The log never holds a token, a seed, a record key or a p-table parameter: callers pass the
fields above only. Lines are ASCII JSON (every other character escaped as ``\\uXXXX``), so no
text a user sent, such as U+2028, U+2029 or U+0085, can look like a line break to a reader that
splits on Unicode line breaks (Python's ``str.splitlines``, many log shippers).

Lines written at the same time share their fsync (group commit, as databases commit their
logs): each writer appends its line, then waits until an fsync that began after its line was
written has ended — its own, or the one another writer was doing — so that requests finishing
together do not queue behind one fsync each.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
from pathlib import Path
from typing import Any

from protab.errors import InputError

#: the longest text (a query, a reason) kept in one field of a line
MAX_FIELD = 4000


class AuditLog:
    """An append-only JSON-lines file; :meth:`write` returns once the line is durable."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise InputError(f"the folder of the audit log {str(self.path)!r} does not exist; create it first")
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise InputError(f"cannot open the audit log {str(self.path)!r}: {exc.strerror}") from None
        self._lock = threading.Lock()  # appending a line
        self._sync = threading.Lock()  # one fsync at a time
        self._written = self._synced = 0  # lines appended; lines known to be on disk

    def write(self, **fields: Any) -> None:
        """Append one line (``time`` added) and fsync it; raises OSError if the disk refuses."""
        record = {"time": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")}
        for k, v in fields.items():
            record[k] = v[:MAX_FIELD] + "…" if isinstance(v, str) and len(v) > MAX_FIELD else v
        line = (json.dumps(record, ensure_ascii=True, separators=(",", ":"), default=str) + "\n").encode("ascii")
        with self._lock:
            view = memoryview(line)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
            self._written += 1
            mine = self._written
        with self._sync:
            if self._synced >= mine:  # an fsync that began after this line was written covered it
                return
            with self._lock:
                upto = self._written
                fd = self._fd
            os.fsync(fd)
            self._synced = upto

    def close(self) -> None:
        with self._sync, self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
