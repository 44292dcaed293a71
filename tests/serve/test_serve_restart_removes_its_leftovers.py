"""A service restart removes what a killed service left in its state folder, and nothing else:
the snapshot of the database (with its write-ahead log and lock), the temporary files of atomic
writes (saved tables, groups, the jobs' index, a job's answer being written, the ETag key's),
answers of jobs the index does not name (a job's partial answer) and the owner locks of gone
services; the saved tables, groups, jobs and their answers, the ETag key and other files stay.
While another service runs on the folder, its temporary files are left alone (they may be in
use); dead snapshots still go. And for real: a service killed with SIGKILL leaves its snapshot,
which the next start removes."""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

import pytest
import serve_fixtures as F

DONE = "a" * 32  # a finished job of the index, with its answer
ORPHAN = "b" * 32  # an answer no job of the index names


def _state(folder: Path) -> tuple[list[Path], list[Path]]:
    """A state folder with one leftover of each kind and files to keep: (leftovers, kept)."""
    jobs = folder / "jobs"
    jobs.mkdir(parents=True)
    kept = {
        folder / "saved.json": json.dumps({"users": {}}),
        folder / "groups.json": json.dumps({"users": {}}),
        folder / "etag.key": "k" * 32,
        folder / "notes.txt": "the office's own notes",
        folder / ".not-ours.tmp": "not the name of an atomic write's file",
        jobs / "index.json": json.dumps({"jobs": [{"id": DONE, "user": "bob", "status": "done", "finished": time.time(),
                                                   "created": time.time(), "request": "r", "cells": 1,
                                                   "error": None, "http_status": 200}]}),
        jobs / f"{DONE}.arrow": "answer",
    }
    leftovers = {
        folder / "snapshot-0123456789abcdef.duckdb": "copy",
        folder / "snapshot-0123456789abcdef.duckdb.wal": "wal",
        folder / "snapshot-0123456789abcdef.lock": "",
        folder / ".saved.json.k2j4_x9q.tmp": "half a file",
        folder / ".groups_used.json.a1b2c3d4.tmp": "half a file",
        folder / "etag.tmp": "half a key",
        jobs / ".index.json.zz99yy88.tmp": "half an index",
        jobs / f".{ORPHAN}.arrow.q1w2e3r4.tmp": "half an answer",
        jobs / f"{ORPHAN}.arrow": "an answer of no job",
        jobs / "owner-deadbeefdeadbeef.lock": "",
    }
    for path, text in {**kept, **leftovers}.items():
        path.write_text(text, encoding="utf-8")
    return sorted(leftovers), sorted(kept)


def test_leftovers_of_each_kind_are_removed_and_nothing_else(tmp_path):
    from protab.serve.leftovers import remove_leftovers

    leftovers, kept = _state(tmp_path / "serve_state")
    gone = remove_leftovers(tmp_path / "serve_state")
    assert sorted(gone) == [p for p in leftovers if p.name != "owner-deadbeefdeadbeef.lock"]
    assert [p for p in leftovers if p.exists()] == []  # the dead owner's lock too
    assert [p for p in kept if not p.exists()] == []


def test_with_another_service_running_only_dead_snapshots_go(tmp_path):
    from protab.serve.leftovers import remove_leftovers

    folder = tmp_path / "serve_state"
    leftovers, kept = _state(folder)
    live = folder / "snapshot-feedfacefeedface.lock"  # a running service's snapshot: its lock is held
    fd = os.open(live, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    (folder / "snapshot-feedfacefeedface.duckdb").write_text("in use", encoding="utf-8")
    try:
        gone = remove_leftovers(folder)
    finally:
        os.close(fd)
    assert sorted(p.name for p in gone) == ["snapshot-0123456789abcdef.duckdb", "snapshot-0123456789abcdef.duckdb.wal",
                                            "snapshot-0123456789abcdef.lock"]
    assert (folder / "snapshot-feedfacefeedface.duckdb").exists()
    assert all(p.exists() for p in leftovers if not p.name.startswith("snapshot-")) and all(p.exists() for p in kept)


def test_the_apps_start_removes_them(tmp_path):
    from protab.serve.app import create_app

    db = F.build_database(tmp_path / "micro.duckdb", persons=300)
    config, tokens = F.write_setup(tmp_path, db, min_population=1, sessions=1)
    leftovers, _ = _state(tmp_path / "serve_state")
    (tmp_path / "serve_state" / "etag.key").unlink()  # the app makes its own key
    with F.starlette_client(create_app(config)) as client:
        assert [p for p in leftovers if p.exists()] == []
        r = client.get("/v1/jobs", headers={"Authorization": f"Bearer {tokens['bob']}"})
        assert [j["id"] for j in r.json()["jobs"]] == [DONE]  # the job of the index is kept


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
def test_a_killed_services_snapshot_is_removed_by_the_next_start(tmp_path):
    db = F.build_database(tmp_path / "micro.duckdb", persons=300)
    config, _ = F.write_setup(tmp_path, db, min_population=1)
    state = tmp_path / "serve_state"
    server = F.Server(config)
    first = sorted(state.glob("snapshot-*.duckdb"))
    server.kill()  # SIGKILL: nothing is cleaned up
    assert first and all(p.exists() for p in first)
    again = F.Server(config)
    try:
        now = sorted(state.glob("snapshot-*.duckdb"))
        assert len(now) == 1 and now != first and not any(p.exists() for p in first)
    finally:
        again.stop()
    assert not list(state.glob("snapshot-*"))
