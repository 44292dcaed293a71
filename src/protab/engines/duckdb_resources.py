"""Resources of a DuckDB engine: the memory limit (half of the machine's or container's by
default), the thread count, and a private spill folder per database file, removed on close and,
when a process was killed, by the next session (POSIX locks tell live folders from stale ones)."""

from __future__ import annotations

import numbers
import os
import re
import shutil
import tempfile
import threading
import time
import weakref
from pathlib import Path

import numpy as np

from protab.errors import InputError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


def check_threads(threads: object) -> int | None:
    """The thread count of a Session: None (DuckDB's default) or a whole number of 1 or more."""
    if threads is None:
        return None
    if isinstance(threads, (bool, np.bool_)) or not isinstance(threads, numbers.Integral) or threads < 1:
        raise InputError(f"Session: threads must be a whole number of 1 or more, not {threads!r}")
    if threads > 16 * (os.cpu_count() or 1):  # type: ignore[operator]  # numbers.Integral: no typed comparison
        raise InputError(
            f"Session: threads={threads} is far more than this machine's {os.cpu_count()} cores "
            f"(at most {16 * (os.cpu_count() or 1)})"
        )
    return int(threads)


def _total_memory() -> int | None:
    """Bytes of memory this process may use: the machine's, or its container's limit."""
    total = None
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:
            total = int(text) if total is None else min(total, int(text))
    return total


def memory_limit(value: object) -> str:
    """DuckDB's memory_limit setting: ``value`` checked, or half of the available memory."""
    if value is None:
        total = _total_memory()
        return f"{max(total // 2, 256 * 2**20)}b" if total else "50%"
    if isinstance(value, (bool, np.bool_)):
        pass
    elif isinstance(value, numbers.Integral) and int(value) >= 2**20:
        return f"{int(value)}b"
    elif isinstance(value, str) and _SIZE.match(value.strip()) and _size_ok(value.strip()):
        return value.strip()
    raise InputError(
        f"Session: memory_limit must be a size such as '4GB', '512MB' or '50%', or a number of "
        f"bytes (at least 1 MiB), not {value!r}"
    )


_SIZE = re.compile(r"^\d+(\.\d+)?\s*(%|b|bytes?|[kmgt]i?b)$", re.IGNORECASE)
_UNIT = {"b": 1, "byte": 1, "bytes": 1, "kb": 1e3, "kib": 2**10, "mb": 1e6, "mib": 2**20, "gb": 1e9,
         "gib": 2**30, "tb": 1e12, "tib": 2**40}


def _size_ok(text: str) -> bool:
    """A size string names at least 1 MiB (a percentage: more than 0 and at most 100)."""
    m = re.match(r"^(\d+(?:\.\d+)?)\s*(.*)$", text)
    assert m is not None  # _SIZE matched
    number, unit = float(m.group(1)), m.group(2).lower()
    if unit == "%":
        return 0 < number <= 100
    return number * _UNIT[unit] >= 2**20


class SpillFolder:
    """A private folder for DuckDB's spill files, removed on close or at exit.

    ``<base>/protab-<user>/s-<pid>-<random>``; on POSIX a live session holds an exclusive
    lock on ``.lock`` inside it, so that a later Session can tell the folders of killed
    processes (lock free) from live ones and remove them.
    """

    def __init__(self, base: str | os.PathLike[str] | None) -> None:
        root = Path(base) if base is not None else Path(tempfile.gettempdir())
        user = os.getuid() if hasattr(os, "getuid") else "user"
        self.root = root / f"protab-{user}"
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            if hasattr(os, "getuid") and (self.root.is_symlink() or self.root.stat().st_uid != os.getuid()):
                raise InputError(
                    f"Session: the temporary folder {str(self.root)!r} belongs to another user; "
                    "pass temp_directory= a folder of your own"
                )
            _remove_stale(self.root)
            self.path = tempfile.mkdtemp(prefix=f"s-{os.getpid()}-", dir=self.root)
        except OSError as exc:
            raise InputError(
                f"Session: cannot make a temporary folder under {str(root)!r} ({exc.strerror}); "
                "pass temp_directory= a writable folder"
            ) from None
        self._fd: int | None = None
        if fcntl is not None:
            self._fd = os.open(os.path.join(self.path, ".lock"), os.O_CREAT | os.O_RDWR, 0o600)
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._finalizer = weakref.finalize(self, _remove_folder, self.path, self._fd, os.getpid())

    def remove(self) -> None:
        self._finalizer()


# Sessions of one process on the same database file share one DuckDB instance, whose
# configuration must be the same: they share the spill folder (removed with the last).
_SHARED_SPILL: dict[str, tuple[SpillFolder, int]] = {}
_SHARED_LOCK = threading.Lock()


def database_key(database: str) -> str | None:
    """The real path of a database file (None for an in-memory database)."""
    if database in ("", ":memory:") or database.startswith(":memory:"):
        return None
    return os.path.realpath(os.path.expanduser(database))


def acquire_spill(key: str | None, base: str | os.PathLike[str] | None) -> SpillFolder:
    if key is None:
        return SpillFolder(base)
    with _SHARED_LOCK:
        if key in _SHARED_SPILL:
            folder, users = _SHARED_SPILL[key]
            _SHARED_SPILL[key] = (folder, users + 1)
            return folder
        folder = SpillFolder(base)
        _SHARED_SPILL[key] = (folder, 1)
        return folder


def release_spill(key: str | None, folder: SpillFolder) -> None:
    if key is None:
        folder.remove()
        return
    with _SHARED_LOCK:
        _, users = _SHARED_SPILL.get(key, (folder, 1))
        if users > 1:
            _SHARED_SPILL[key] = (folder, users - 1)
            return
        _SHARED_SPILL.pop(key, None)
    folder.remove()


def _remove_folder(path: str, fd: int | None, owner: int) -> None:
    if os.getpid() != owner:  # a forked child leaves its parent's folder alone
        return
    shutil.rmtree(path, ignore_errors=True)
    if fd is not None:
        os.close(fd)  # releases the lock


def _remove_stale(root: Path, min_age: float = 60.0) -> None:
    """Remove the spill folders under ``root`` of sessions that are gone (POSIX only):
    their lock is free, or they have no lock file and are older than ``min_age`` seconds."""
    if fcntl is None:  # pragma: no cover - Windows: files in use cannot be told apart safely
        return
    for entry in root.glob("s-*"):
        if not entry.is_dir():
            continue
        lock = entry / ".lock"
        try:
            fd = os.open(lock, os.O_RDWR)
        except FileNotFoundError:
            try:
                if time.time() - entry.stat().st_mtime > min_age:
                    shutil.rmtree(entry, ignore_errors=True)
            except OSError:
                pass
            continue
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)  # held by a live session
            continue
        try:
            shutil.rmtree(entry, ignore_errors=True)
        finally:
            os.close(fd)
