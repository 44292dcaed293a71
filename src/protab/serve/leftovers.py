"""What a service that was killed leaves in its state folder, removed at the next start: the
snapshot of the database it served from (``snapshot-<id>.duckdb``, its write-ahead log and its
lock, once no running service holds the lock), the temporary files of its atomic writes
(``.<file>.<8 characters>.tmp`` beside ``saved.json``, ``groups.json``, ``jobs/index.json``, a
job's ``jobs/<id>.arrow``, ...; ``etag.tmp``), the answers of jobs its index no longer names
(``jobs/<id>.arrow``: a job's partial or orphaned answer) and the owner locks of services that
are gone (``jobs/owner-<id>.lock``). Nothing else is touched: the saved tables, the groups, the
jobs' index and their answers, the ETag key and any file of another name stay.

While another service runs on the same folder (it holds a snapshot's or a jobs' owner lock),
only the dead snapshots are removed: its temporary files may be in use.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from protab.serve import snapshot
from protab.serve.jobs import INDEX, _alive

#: the temporary file of an atomic write (protab.serve.jobs.write_atomic: tempfile.mkstemp's name)
TEMPORARY = re.compile(r"\.[^/]+\.[a-z0-9_]{8}\.tmp")
#: a job's answer
ANSWER = re.compile(r"[0-9a-f]{32}\.arrow")
OWNER = re.compile(r"owner-([0-9a-f]+)\.lock")
KEY_TEMPORARY = "etag.tmp"  # protab.serve.caching.load_key's


def _owners_alive(jobs: Path) -> bool:
    """Whether a running service holds one of the jobs' owner locks (the locks of gone ones are removed)."""
    alive = False
    for p in sorted(jobs.glob("owner-*.lock")) if jobs.is_dir() else []:
        m = OWNER.fullmatch(p.name)
        if m and _alive(jobs, m.group(1)):
            alive = True
    return alive


def _orphans(jobs: Path) -> list[Path]:
    """Answers in ``jobs`` of no job of its index (none when the index cannot be read)."""
    try:
        raw = json.loads((jobs / INDEX).read_text(encoding="utf-8"))
        known = {str(j["id"]) for j in raw["jobs"] if isinstance(j, dict) and "id" in j}
    except FileNotFoundError:
        known = set()
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [p for p in jobs.iterdir() if ANSWER.fullmatch(p.name) and p.name[:32] not in known]


def remove_leftovers(folder: Path) -> list[Path]:
    """Remove what dead services left in the state folder ``folder`` (module doc); the files removed."""
    gone = snapshot.remove_dead(folder)
    jobs = folder / "jobs"
    if snapshot.live(folder) or _owners_alive(jobs):
        return gone
    candidates = [p for p in folder.iterdir() if TEMPORARY.fullmatch(p.name) or p.name == KEY_TEMPORARY]
    if jobs.is_dir():
        candidates += [p for p in jobs.iterdir() if TEMPORARY.fullmatch(p.name)] + _orphans(jobs)
    for p in candidates:
        if p.is_file():
            p.unlink(missing_ok=True)
            gone.append(p)
    return gone
