"""Jobs across a restart, expiry and the per-user bound (issue 28 item 3), in-process: the app
started twice on one state folder (the first left as a kill -9 leaves it: its job still
running), and the job store alone with computations that wait for the test.
"""

from __future__ import annotations

import json
import threading

import polars as pl
import pytest

pytest.importorskip("starlette")

import serve_fixtures as F

BIG = {"dataset": "persons", "dims": ["municipality", "sex"]}


def _wait(client, path, headers):
    for _ in range(1200):
        r = client.get(path, headers=headers)
        if r.status_code != 202:
            return r
        threading.Event().wait(0.05)
    raise AssertionError(f"job {path} did not end")


def test_restart_keeps_finished_jobs_and_fails_running_ones(tmp_path):
    from protab.serve.app import create_app

    db = F.build_database(tmp_path / "micro.duckdb", persons=800)
    config, tokens = F.write_setup(tmp_path, db, min_population=1, job_cells=20, job_workers=1, sessions=1)
    auth = {"Authorization": f"Bearer {tokens['alice']}"}
    first = create_app(config)
    c1 = F.starlette_client(first).__enter__()  # left open while the second starts, as a killed service leaves it
    done = c1.post("/v1/table", json=BIG, headers=auth).json()["job"]["id"]
    kept = _wait(c1, f"/v1/jobs/{done}", auth)
    assert kept.status_code == 200
    release = threading.Event()
    broker, table = first.state.broker, first.state.broker.table

    def stuck(body, user, **kw):  # the job's computation waits: the service "dies" while it runs
        release.wait(60)
        return table(body, user, **kw)

    broker.table = lambda body, user, **kw: table(body, user, **kw) if kw.get("admit", True) else stuck(body, user, **kw)
    running = c1.post("/v1/table", json={**BIG, "filters": {"agegroup": "a0-4"}}, headers=auth).json()["job"]["id"]
    # the first service "dies": its owner lock goes, as a killed process's flock does
    (tmp_path / "serve_state" / "jobs" / f"owner-{first.state.jobs.owner}.lock").unlink()
    try:
        second = create_app(config)  # a restart over the state the first left
        with F.starlette_client(second) as c2:
            again = c2.get(f"/v1/jobs/{done}", headers=auth)
            assert again.status_code == 200 and again.content == kept.content
            assert again.headers["ETag"] == kept.headers["ETag"]
            failed = c2.get(f"/v1/jobs/{running}", headers=auth)
            assert failed.status_code == 503 and "restarted" in failed.json()["error"]
            listed = {j["id"]: j["status"] for j in c2.get("/v1/jobs", headers=auth).json()["jobs"]}
            assert listed == {done: "done", running: "failed"}
    finally:
        release.set()
        c1.__exit__(None, None, None)


def _store(tmp_path, **kw):
    from protab.serve.jobs import JobStore

    return JobStore(tmp_path / "jobs", **kw)


def test_a_user_has_a_bounded_number_of_unfinished_jobs_and_others_go_on(tmp_path):
    from protab.serve.query import QueryThrottled

    store = _store(tmp_path, workers=1, per_user=2)
    gate = threading.Event()
    frame = pl.DataFrame({"n_pert": [1, 2]})

    def slow():
        gate.wait(30)
        return frame, {}

    try:
        store.submit("alice", "t1", None, slow)
        store.submit("alice", "t2", None, slow)
        with pytest.raises(QueryThrottled, match="you have 2 jobs queued or running") as exc:
            store.submit("alice", "t3", None, slow)
        assert exc.value.status == 429 and exc.value.retry_after > 0
        bob = store.submit("bob", "t4", None, lambda: (frame, {}))  # another user is still served
        assert bob["status"] == "queued"
    finally:
        gate.set()
    for _ in range(600):  # the jobs end once the gate opens
        if {j["status"] for j in store.listing("alice") + store.listing("bob")} == {"done"}:
            break
        threading.Event().wait(0.05)
    store.close()
    assert {j["status"] for j in store.listing("alice")} == {"done"}
    assert store.frame(bob["id"]).equals(frame)


def test_finished_jobs_expire_with_their_answers(tmp_path):
    import time

    store = _store(tmp_path, workers=1, keep_hours=2)
    job = store.submit("alice", "t", None, lambda: (pl.DataFrame({"n_pert": [5]}), {}))
    store.close(cancel=False)  # waits for the job
    result = tmp_path / "jobs" / f"{job['id']}.arrow"
    assert result.is_file() and store.get("alice", job["id"])["status"] == "done"
    store.expire(now=time.time() + 1.5 * 3600)  # not yet
    assert store.get("alice", job["id"]) is not None
    store.expire(now=time.time() + 2.5 * 3600)
    assert store.get("alice", job["id"]) is None and not result.exists()
    index = json.loads((tmp_path / "jobs" / "index.json").read_text(encoding="utf-8"))
    assert index == {"jobs": []}


def test_a_failing_computation_fails_its_job_only_and_tells_nothing(tmp_path):
    store = _store(tmp_path, workers=1)
    seen = []
    store.on_finish = lambda job, reason: seen.append((job["status"], reason))

    def broken():
        raise RuntimeError("disk trouble at /secret/path")

    bad = store.submit("alice", "t", None, broken)
    good = store.submit("alice", "t", None, lambda: (pl.DataFrame({"n_pert": [5]}), {"region": ["R9"]}))
    store.close(cancel=False)
    failed = store.get("alice", bad["id"])
    assert failed["status"] == "failed" and failed["http_status"] == 500 and "secret" not in failed["error"]
    assert store.get("alice", good["id"])["status"] == "done"
    assert store.get("alice", good["id"])["withheld"] == {"region": ["R9"]}  # kept for the download's header
    assert ("failed", "RuntimeError: disk trouble at /secret/path") in seen  # the cause: to the audit log


def test_a_damaged_jobs_index_is_a_clear_error(tmp_path):
    from protab.errors import InputError

    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "index.json").write_text('{"jobs": [', encoding="utf-8")
    with pytest.raises(InputError, match=r"cannot read the jobs index .*index.json.*move it away"):
        _store(tmp_path)


@pytest.mark.parametrize(("key", "value"), [
    ("job_workers", 0), ("job_keep_hours", -1), ("jobs_per_user", 0), ("saved_per_user", "many"),
    ("job_cells", -5), ("cache_max_age", -1), ("state_dir", 3),
])
def test_bad_job_and_cache_keys_are_named(tmp_path, key, value):
    from protab.errors import SpecError
    from protab.serve.config import load_config

    config = tmp_path / "serve.toml"
    config.write_text(F.config_text(str(tmp_path / "micro.duckdb"), **{key: value}), encoding="utf-8")
    with pytest.raises(SpecError, match=rf"serve config .*: {key}( = \S+)? must be ") as exc:
        load_config(config)
    assert str(F.PTABLE["V"]) not in str(exc.value)


def test_two_services_on_one_state_folder_share_the_jobs(tmp_path):
    """An app embedded beside a running service: it neither fails the other's running jobs nor
    loses them; each sees the other's."""
    first, second = _store(tmp_path, workers=1), None
    gate = threading.Event()

    def slow():
        gate.wait(30)
        return pl.DataFrame({"n_pert": [7]}), {}

    try:
        job = first.submit("alice", "t", None, slow)
        second = _store(tmp_path, workers=1)
        assert second.get("alice", job["id"])["status"] in ("queued", "running")  # the first is alive
        other = second.submit("alice", "u", None, lambda: (pl.DataFrame({"n_pert": [8]}), {}))
    finally:
        gate.set()
        first.close(cancel=False)
        if second is not None:
            second.close(cancel=False)
    assert {j["id"]: j["status"] for j in first.listing("alice")} == {job["id"]: "done", other["id"]: "done"}
    assert second.frame(job["id"])["n_pert"].to_list() == [7]
