"""Large tables as jobs: requests above ``job_cells`` cells run in a bounded worker pool.

A job is the same call a direct request makes (the broker's ``table`` or ``query``, with the
same cell keys and noise), run by one of ``job_workers`` threads; its protected answer is
written to ``<state folder>/jobs/<id>.arrow`` (Arrow IPC: a temporary file, fsync'ed, renamed)
and kept ``job_keep_hours`` after it finished, then removed. The index of jobs
(``jobs/index.json``: id, user, request summary, status, times, cells, refusal message) is
replaced atomically under a lock at every change, so that a restart finds every finished job;
jobs that were queued or running when the service stopped are marked failed then ("the
service restarted"). Every change reads the index afresh under an exclusive ``flock``
(``index.lock``), and each service holds a lock of its own (``owner-<id>.lock``) while it runs,
so that an app embedded beside a running service on the same folder loses nothing and marks
failed only the jobs of a service that is gone.

Job ids are random (128 bits) and per user: another user's id is answered as an unknown one.
A user may have ``jobs_per_user`` jobs queued or running at once (429 beyond), so that one
user cannot fill the queue before the others. The same request posted again by its user
(the same canonical request, rights and data: the key its ETag hashes) while its job is
queued, running or done is that job (:meth:`JobStore.submit_once`), not a new one; another
user's identical request gets its own job.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

from protab.errors import InputError
from protab.serve.query import QueryError, QueryThrottled

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: one service per state folder
    fcntl = None  # type: ignore[assignment]

INDEX = "index.json"
RESTARTED = "the service restarted while this job was queued or running; submit the request again"
INTERNAL = "the service could not compute this job (an internal error, recorded for the office)"
#: seconds a client is asked to wait before asking about a job again (Retry-After of a 202)
POLL_SECONDS = 2
UNFINISHED = ("queued", "running")
#: a job's computation: the protected frame, and the areas withheld from it (level column → codes)
Run = Callable[[], "tuple[pl.DataFrame, dict[str, list[str]]]"]


def _iso(t: float | None) -> str | None:
    return None if t is None else dt.datetime.fromtimestamp(t, dt.timezone.utc).isoformat(timespec="seconds")


def _hold(path: Path) -> int:
    """An open file with an exclusive ``flock`` on it, held until it is closed (or the process ends)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _alive(folder: Path, owner: Any) -> bool:
    """Whether the service that queued a job still runs: it holds the ``flock`` of its owner file."""
    path = folder / f"owner-{owner}.lock"
    if fcntl is None or not isinstance(owner, str) or not path.exists():
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    path.unlink(missing_ok=True)  # its service is gone
    return False


def write_atomic(path: Path, write: Callable[[Any], None], mode: str = "wb") -> None:
    """Write ``path`` whole or not at all: a temporary file beside it, fsync'ed, renamed over it,
    the folder fsync'ed."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


#: how much lower (in nice steps) the workers' threads run than the service's
JOB_NICE = 10


def _background() -> None:
    """Lower the calling worker thread's CPU priority by JOB_NICE (Linux: the nice value is per
    thread), so that small requests are served first while jobs run. Where the platform cannot,
    the jobs run at the service's priority."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + JOB_NICE))
    except (AttributeError, OSError):  # pragma: no cover - not Linux, or not allowed
        pass


class JobStore:
    """The jobs of one service in ``folder``; :meth:`submit` queues one, :meth:`get` and
    :meth:`listing` show a user's own, :meth:`frame` reads a finished job's answer."""

    def __init__(self, folder: Path, *, workers: int = 2, keep_hours: float = 24, per_user: int = 4,
                 on_finish: Callable[[dict[str, Any], str | None], None] | None = None) -> None:
        self.folder = Path(folder)
        self.keep = keep_hours * 3600.0
        self.per_user = per_user
        self.on_finish = on_finish
        self._lock = threading.Lock()
        try:
            self.folder.mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create the jobs folder {str(self.folder)!r}: {exc.strerror}") from None
        self._jobs: dict[str, dict[str, Any]] = {}
        self.owner = secrets.token_hex(8)  # this service, alive while it holds its owner lock
        self._owner_fd = _hold(self.folder / f"owner-{self.owner}.lock")
        with self._locked():
            now = time.time()
            for job in self._jobs.values():
                if job["status"] in UNFINISHED and not _alive(self.folder, job.get("owner")):  # stopped under it
                    job.update(status="failed", http_status=503, error=RESTARTED, finished=now, rule="restart",
                               advice="submit the request again")
            self._expire(now)
            self._save()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="protab-job", initializer=_background)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """The index, read afresh, under this process's lock and an exclusive ``flock`` on
        ``index.lock`` (another service or embedded app may share the folder)."""
        with self._lock:
            fd = os.open(self.folder / "index.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                self._jobs = self._read()
                yield
            finally:
                os.close(fd)  # releases the flock

    # -- the index on disk -------------------------------------------------------------------
    def _read(self) -> dict[str, dict[str, Any]]:
        path = self.folder / INDEX
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"cannot read the jobs index {str(path)!r}: {type(exc).__name__}; move it away to "
                             "start with no jobs") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("jobs"), list):
            raise InputError(f"the jobs index {str(path)!r} is not a protab jobs index (no list 'jobs')")
        return {str(j["id"]): j for j in raw["jobs"] if isinstance(j, dict) and "id" in j}

    def _save(self) -> None:
        """Replace the index (the caller holds the lock)."""
        text = json.dumps({"jobs": list(self._jobs.values())}, ensure_ascii=True, indent=1)
        write_atomic(self.folder / INDEX, lambda fh: fh.write(text), "w")

    def _result(self, job_id: str) -> Path:
        return self.folder / f"{job_id}.arrow"

    def _expire(self, now: float) -> None:
        """Drop jobs finished more than ``keep_hours`` ago, and their answers (the caller holds the lock)."""
        old = [k for k, j in self._jobs.items() if j["status"] not in UNFINISHED and j["finished"] + self.keep < now]
        for k in old:
            self._result(k).unlink(missing_ok=True)
            del self._jobs[k]

    def expire(self, now: float | None = None) -> None:
        """Drop the jobs whose answers are older than ``keep_hours`` (at ``now``, default the present)."""
        with self._locked():
            before = len(self._jobs)
            self._expire(time.time() if now is None else now)
            if len(self._jobs) != before:
                self._save()

    # -- jobs ----------------------------------------------------------------------------------
    def submit(self, user: str, summary: str | None, cells: int | None, run: Run) -> dict[str, Any]:
        """Queue ``run`` (the protected answer's computation: its frame and the areas the
        disclosure rules withheld from it) for ``user``; the job's public view."""
        return self.submit_once(user, None, summary, cells, run)[0]

    def submit_once(self, user: str, key: str | None, summary: str | None, cells: int | None,
                    run: Run) -> tuple[dict[str, Any], bool]:
        """:meth:`submit`, unless ``user`` already has a job of the same ``key`` (the request's
        canonical form, rights and data, as its ETag hashes them) that is queued, running or done:
        then that job. Returns the job's public view and whether it is the existing one. Under the
        index's lock, so that the same request posted twice at once makes one job."""
        self.expire()
        with self._locked():
            same = [j for j in self._jobs.values() if key is not None and j["user"] == user
                    and j.get("key") == key and j["status"] in (*UNFINISHED, "done")]
            if same:
                return self.view(max(same, key=lambda j: j["created"])), True
            mine = sum(1 for j in self._jobs.values() if j["user"] == user and j["status"] in UNFINISHED)
            if mine >= self.per_user:
                raise QueryThrottled(
                    f"you have {mine} jobs queued or running, the most the service runs for one user at once; "
                    f"wait until one has finished (GET /v1/jobs)", POLL_SECONDS * 5, rule="jobs_per_user",
                    advice="wait until one of your jobs has finished (GET /v1/jobs lists them), then ask again")
            job_id = secrets.token_hex(16)
            job = {"id": job_id, "user": user, "owner": self.owner, "request": summary, "status": "queued",
                   "http_status": None, "key": key,
                   "error": None, "cells": cells, "created": time.time(), "finished": None}
            self._jobs[job_id] = job
            self._save()
            view = self.view(job)
        self._pool.submit(self._run, job_id, run)
        return view, False

    def _finish(self, job_id: str, **changes: Any) -> dict[str, Any]:
        with self._locked():
            job = self._jobs[job_id]
            job.update(finished=time.time(), **changes)
            self._save()
            return dict(job)

    def _run(self, job_id: str, run: Run) -> None:
        """Compute one job in a worker thread; its answer to disk, its state to the index, a line
        to the audit log (``on_finish``)."""
        with self._locked():
            self._jobs[job_id]["status"] = "running"
            self._save()
        reason = None
        try:
            frame, withheld = run()
            write_atomic(self._result(job_id), frame.write_ipc)
            job = self._finish(job_id, status="done", http_status=200, cells=frame.height, withheld=withheld)
        except QueryError as exc:  # a refusal (the minimum-population rule): the analyst may read it
            reason = str(exc)
            job = self._finish(job_id, status="failed", http_status=exc.status, error=reason, rule=exc.rule,
                               advice=exc.advice)
        except Exception as exc:  # the service's own failure: its cause to the audit log only
            reason = f"{type(exc).__name__}: {exc}"
            job = self._finish(job_id, status="failed", http_status=500, error=INTERNAL, rule="internal",
                               advice="submit the request again later; the office finds the cause in the audit log")
        if self.on_finish is not None:
            try:
                self.on_finish(job, reason)
            except Exception:  # the job's state is on disk; the audit log's failure is its own
                pass

    def get(self, user: str, job_id: str) -> dict[str, Any] | None:
        """The job ``job_id`` if it is ``user``'s (None for another user's, as for an unknown id)."""
        self.expire()
        with self._locked():
            job = self._jobs.get(job_id)
            return dict(job) if job is not None and job["user"] == user else None

    def listing(self, user: str) -> list[dict[str, Any]]:
        """The public views of ``user``'s jobs, newest first."""
        self.expire()
        with self._locked():
            mine = [self.view(j) for j in self._jobs.values() if j["user"] == user]
        return sorted(mine, key=lambda j: j["created"], reverse=True)

    def frame(self, job_id: str) -> pl.DataFrame:
        """The answer of a finished job."""
        return pl.read_ipc(self._result(job_id).read_bytes())  # not mapped: expiry may remove the file

    def view(self, job: dict[str, Any]) -> dict[str, Any]:
        """What a user sees of a job (times as ISO UTC text)."""
        expires = job["finished"] + self.keep if job["finished"] is not None else None
        return {"id": job["id"], "status": job["status"], "request": job["request"], "cells": job["cells"],
                "created": _iso(job["created"]), "finished": _iso(job["finished"]), "expires": _iso(expires),
                "error": job["error"], "result": f"/v1/jobs/{job['id']}"}

    def close(self, cancel: bool = True) -> None:
        """Stop the workers once the running jobs end; queued jobs are dropped (``cancel``; the next
        start marks them failed) or run first."""
        self._pool.shutdown(wait=True, cancel_futures=cancel)
        if self._owner_fd >= 0:
            (self.folder / f"owner-{self.owner}.lock").unlink(missing_ok=True)
            os.close(self._owner_fd)
            self._owner_fd = -1



class JobUnknown(QueryError):
    """HTTP 404: no such job of this user (another user's id is answered the same)."""

    status = 404
    rule = "job"
    advice = "GET /v1/jobs lists your jobs; submit the request again for a job that expired"


class JobFailed(QueryError):
    """A failed job, asked for: the status its request would have had (400 refused, 500 the
    service's failure, 503 the service restarted under it), with its refusal's rule and advice."""

    def __init__(self, status: int, message: str, *, rule: str | None = None, advice: str | None = None) -> None:
        super().__init__(message, rule=rule or "job", advice=advice or "submit the request again")
        self.status = status
