"""Audit lines written at the same time share their fsync (group commit): every line is whole
and on disk before its write returns, but requests that finish together do not queue behind one
fsync each (so one user's many requests do not slow another's answer by their fsyncs). A fake,
slow fsync (an event wait, no clock) makes the writers overlap."""

from __future__ import annotations

import json
import threading


def test_concurrent_lines_are_whole_synced_and_share_fsyncs(tmp_path, monkeypatch):
    from protab.serve import audit_log

    log = audit_log.AuditLog(tmp_path / "audit.jsonl")
    real = audit_log.os.fsync
    syncs: list[int] = []
    slow = threading.Event()

    def fsync(fd):  # slow enough that other writers append their lines meanwhile
        syncs.append(log._written)
        slow.wait(0.02)
        real(fd)

    monkeypatch.setattr(audit_log.os, "fsync", fsync)
    writers, each = 16, 25
    returned: list[tuple[int, int]] = []  # (lines appended when a write returned, lines then synced)
    lock = threading.Lock()

    def write(k: int) -> None:
        for j in range(each):
            log.write(user=f"u{k}", endpoint="POST /v1/query", query="x" * j, status=200)
            with lock:
                returned.append((log._written, log._synced))

    threads = [threading.Thread(target=write, args=(k,)) for k in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log.close()
    lines = (tmp_path / "audit.jsonl").read_text(encoding="ascii").splitlines()
    assert len(lines) == writers * each
    assert sorted((json.loads(x)["user"], len(json.loads(x)["query"])) for x in lines) == sorted(
        (f"u{k}", j) for k in range(writers) for j in range(each))
    assert syncs and max(syncs) == writers * each  # the last line was synced
    assert len(syncs) < writers * each  # fewer fsyncs than lines: writers shared them
    assert all(synced > 0 for _, synced in returned)  # no write returned before any fsync ended
