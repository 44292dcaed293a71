"""One protab run at a time per output: an exclusive lock that a run takes on its output folder
(or file) before any work that writes, and holds until its outputs are in place.

The lock is ``flock(2)`` on a file beside the output's real path (symbolic links resolved, so
two spellings of one folder share one lock): ``.<name>.protab-lock``. The file is never renamed
or replaced, and the kernel releases the lock when its holder exits, also when it is killed
(``kill -9``), so a dead run never blocks the next one. While a run holds it, the file names the
holder — process id, host, command and start time, no secret — for the message a second run
gets: it refuses at once (:class:`OutputInUse`) unless asked to wait (``--wait``, ``wait=True``).

The holder removes the file as it lets go, so that a finished run leaves nothing beside its
output (a killed run's file stays until the next run). That is safe because a run holds the
lock only when the file it locked is still the one at the path (same device and inode, checked
after the flock): a run that waited on a file removed meanwhile locks the path anew. (POSIX
only: where Python has no ``fcntl`` no lock is taken.)

Within one thread the lock is re-entrant: the batch a run writes (``protab._io.write_batch``,
``recover``) takes its folder's lock again without waiting for itself. Another thread, or another
process, opens the file again, and flock locks of two open files exclude each other.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from protab.errors import ProtabError

LOCK = "protab-lock"
_LOCAL = threading.local()


class OutputInUse(ProtabError):
    """Another protab run is writing the same output folder or file (its lock is held)."""


def lock_file(target: str | os.PathLike[str]) -> Path:
    """The lock file of an output folder or file: ``.<name>.protab-lock`` beside its real path."""
    real = Path(os.path.realpath(os.path.expanduser(os.fspath(target))))
    return real.parent / f".{real.name}.{LOCK}"


def default_command() -> str:
    """What a lock file says of a run that does not name its command: the program's name only
    (never its arguments, which are the user's)."""
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"


@contextmanager
def output_lock(*targets: str | os.PathLike[str] | tuple[str | os.PathLike[str], str], command: str | None = None,
                wait: bool = False) -> Iterator[list[Path]]:
    """Hold the lock of every target (a path, or a pair of a path and what it is, as "the output
    folder") for the block; yield the lock files. A target another run holds is an
    :class:`OutputInUse` naming that run, unless ``wait`` (then this waits for it). The locks are
    taken in the order of their files, so two runs never wait for each other."""
    named = [t if isinstance(t, tuple) else (t, "the output") for t in targets]
    files = sorted({lock_file(path): (path, what) for path, what in named}.items())
    with ExitStack() as stack:
        for lock, (path, what) in files:
            stack.enter_context(_hold(lock, f"{what} {os.fspath(path)!r}", command or default_command(), wait))
        yield [lock for lock, _ in files]


def _held() -> dict[str, list[int]]:
    """This thread's locks: lock file -> [file descriptor, depth]."""
    if not hasattr(_LOCAL, "held"):
        _LOCAL.held = {}
    return _LOCAL.held


@contextmanager
def _hold(lock: Path, what: str, command: str, wait: bool) -> Iterator[None]:
    held = _held()
    key = str(lock)
    if key in held:
        held[key][1] += 1
    else:
        fd = _take(lock, what, command, wait)
        if fd is None:  # no flock on this system
            yield
            return
        held[key] = [fd, 1]
    try:
        yield
    finally:
        held[key][1] -= 1
        if held[key][1] == 0:
            fd = held.pop(key)[0]
            try:
                os.unlink(lock)  # still holding it: a waiter finds the path gone and locks it anew
            except OSError:
                pass
            os.close(fd)  # releases the lock


def _take(lock: Path, what: str, command: str, wait: bool) -> int | None:
    """Open the lock file and flock it (refusing, or waiting, when another run holds it)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return None
    lock.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd, writable = _open(lock)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not wait:
                    raise OutputInUse(
                        f"{what} is in use by another protab run ({_named_holder(lock)}); wait for it to finish and run "
                        f"again, or pass --wait (wait=True in Python) to wait for it (its lock: {str(lock)!r})"
                    ) from None
                print(f"protab: waiting for {what}, in use by another protab run ({_named_holder(lock)})",
                      file=sys.stderr, flush=True)
                fcntl.flock(fd, fcntl.LOCK_EX)
            if _current(fd, lock):
                if writable:
                    _note(fd, command)
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # the holder removed the file as it let go: lock the path anew


def _current(fd: int, lock: Path) -> bool:
    """True when the open file ``fd`` is still the file at ``lock`` (not removed or replaced)."""
    mine = os.fstat(fd)
    try:
        now = os.stat(lock, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino)


def _open(lock: Path) -> tuple[int, bool]:
    """The lock file opened (made if needed) without following a symbolic link; read-only when
    another user made it (a flock needs no write access)."""
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    try:
        return os.open(lock, os.O_RDWR | os.O_CREAT | nofollow, 0o666), True
    except PermissionError:
        try:
            return os.open(lock, os.O_RDONLY | nofollow), False
        except OSError as exc:
            raise ProtabError(f"cannot open the lock file {str(lock)!r}: {exc.strerror}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ProtabError(f"the lock file {str(lock)!r} is a symbolic link, which protab does not follow; "
                              "remove it") from None
        raise ProtabError(f"cannot open the lock file {str(lock)!r}: {exc.strerror}") from None


def _note(fd: int, command: str) -> None:
    """Write who holds the lock into its file (pid, host, command, start time)."""
    info = {"pid": os.getpid(), "host": socket.gethostname(), "command": command,
            "started": time.strftime("%Y-%m-%d %H:%M:%S %z")}
    data = (json.dumps(info, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    except OSError:  # pragma: no cover - a full disk: the lock holds without its note
        pass


def holder(lock: str | os.PathLike[str]) -> str:
    """The run named in a lock file, as words ("pid 12, host h, `protab protect r.toml`, started …")."""
    try:
        with open(lock, "rb") as fh:
            info = json.loads(fh.read(4096).decode("utf-8"))
        parts = [f"pid {int(info['pid'])}", f"host {_clean(info['host'])}", f"`{_clean(info['command'])}`",
                 f"started {_clean(info['started'])}"]
    except (OSError, ValueError, KeyError, TypeError):
        return "it has not named itself yet"
    return ", ".join(parts)


def _named_holder(lock: Path, patience: float = 1.0) -> str:
    """:func:`holder`, given a moment: a run that has just taken the lock writes its name right
    after the flock, so a second run that finds the file empty reads it again for up to
    ``patience`` seconds before saying the holder has not named itself."""
    deadline = time.monotonic() + patience
    while True:
        who = holder(lock)
        if not who.startswith("it has not named") or time.monotonic() >= deadline:
            return who
        time.sleep(0.02)


def _clean(value: object) -> str:
    """A field of a lock file fit for a message: text, no control characters, not too long."""
    text = "".join(ch if ch.isprintable() else "?" for ch in str(value))
    return text if len(text) <= 200 else text[:200] + "…"
