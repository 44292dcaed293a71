"""Large tables as jobs (issue 28 item 3), over HTTP against the real server: a request above
``job_cells`` cells is answered 202 with a job; the job's answer is the protected table a
direct request gives (``Session.cell_key``'s), downloadable in every format, with an ETag;
jobs are listed per user, another user's job id is answered exactly as an unknown one (404),
a job refused by the rules fails with the refusal's status and message, and everything is in
the audit log.
"""

from __future__ import annotations

import io
import json
import secrets
import time

import polars as pl
import pytest

import protab as pt

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")

import serve_fixtures as F  # noqa: E402

JOB_CELLS = 20
BIG = {"dataset": "persons", "dims": ["municipality", "sex"], "filters": {"agegroup": "a0-4"}}  # 16 x 3 cells


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jobs")
    db = F.build_database(folder / "micro.duckdb")
    config, tokens = F.write_setup(folder, db, job_cells=JOB_CELLS, job_workers=1, jobs_per_user=50)
    server = F.Server(config)
    try:
        yield {"url": server.url, "tokens": tokens, "audit": folder / "audit.jsonl", "db": db}
    finally:
        server.stop()


def _call(served, method, path, body=None, *, token="alice", params=None, headers=None):
    h = {"Authorization": f"Bearer {served['tokens'][token]}", **(headers or {})}
    return httpx.request(method, served["url"] + path, json=body, headers=h, params=params, timeout=60)


def _wait(served, job_id, token="alice"):
    """The answer to GET /v1/jobs/{id} once the job is no longer queued or running."""
    deadline = time.monotonic() + 120
    while True:
        r = _call(served, "GET", f"/v1/jobs/{job_id}", token=token)
        if r.status_code != 202 or time.monotonic() > deadline:
            return r
        assert r.json()["job"]["status"] in ("queued", "running") and r.headers["Retry-After"]
        time.sleep(0.1)


def _submit(served, body, token="alice", path="/v1/table"):
    r = _call(served, "POST", path, body, token=token)
    assert r.status_code == 202, r.text
    job = r.json()["job"]
    assert r.headers["Location"] == f"/v1/jobs/{job['id']}" == job["result"]
    assert job["status"] in ("queued", "running", "done") and r.headers["Cache-Control"] == "no-store"
    assert job["cells"] > JOB_CELLS  # the estimate, before any scan
    return job


def _frame(r) -> pl.DataFrame:
    assert r.status_code == 200, r.text
    answer = r.json()
    return pl.DataFrame(answer["rows"], schema=answer["columns"], orient="row", infer_schema_length=None)


def test_small_requests_are_answered_and_large_ones_become_jobs_with_the_same_answer(served):
    small = _call(served, "POST", "/v1/table", {"dataset": "persons", "dims": ["sex"]})
    assert small.status_code == 200 and small.json()["columns"][0] == "sex"
    job = _submit(served, BIG)
    got = _frame(_wait(served, job["id"]))
    # the protected answer a direct request gives: Session.cell_key of the same table
    with pt.Session(served["db"], read_only=True) as s:
        h = s.hierarchy_from_columns("persons", ["region", "municipality"])
        want = s.cell_key("persons", pt.TableSpec({"municipality": h, "sex": ["F", "M"]},
                                                  where=[("agegroup", "in", ["a0-4"])]),
                          pt.PTable.maximum_entropy(**F.PTABLE), threshold=F.THRESHOLD)
    key = ["municipality", "sex"]
    assert got.height == 16 * 3 > JOB_CELLS
    assert got.sort(key).equals(want.select(got.columns).sort(key).cast(dict(got.schema)))
    done = [j for j in _call(served, "GET", "/v1/jobs").json()["jobs"] if j["id"] == job["id"]][0]
    assert done["status"] == "done" and done["cells"] == got.height and done["expires"] and not done["error"]


def test_sql_above_job_cells_is_a_job_too(served):
    sql = "SELECT municipality, sex, count(*) AS n FROM persons GROUP BY CUBE(municipality, sex)"
    job = _submit(served, {"sql": sql}, path="/v1/query")
    got = _frame(_wait(served, job["id"]))
    assert got.columns == ["municipality", "sex", "n"] and got.height == (12 + 1) * (2 + 1)


def test_job_answer_in_every_format_with_an_etag(served):
    job = _submit(served, {**BIG, "filters": {"agegroup": "a5-9"}})  # a new request: a new job
    as_json = _frame(_wait(served, job["id"]))
    path = f"/v1/jobs/{job['id']}"
    readers = {"csv": lambda b: pl.read_csv(io.BytesIO(b), infer_schema_length=None),
               "parquet": lambda b: pl.read_parquet(io.BytesIO(b)), "arrow": lambda b: pl.read_ipc_stream(io.BytesIO(b))}
    tags = set()
    for fmt in ("json", "csv", "parquet", "arrow", "sdmx-csv", "json-stat"):
        r = _call(served, "GET", path, params={"format": fmt})
        assert r.status_code == 200, (fmt, r.text)
        assert r.headers["ETag"] not in tags
        tags.add(r.headers["ETag"])
        if fmt in readers:
            got = readers[fmt](r.content)
            assert got["n_pert"].to_list() == as_json["n_pert"].to_list()
        again = _call(served, "GET", path, params={"format": fmt}, headers={"If-None-Match": r.headers["ETag"]})
        assert again.status_code == 304 and again.content == b""
    assert json.loads(_call(served, "GET", path, params={"format": "json-stat"}).content)["class"] == "dataset"


def test_jobs_are_listed_per_user_and_other_users_ids_are_unknown(served):
    job = _submit(served, {**BIG, "filters": {"agegroup": "a10-14"}})  # a new request: a new job
    _wait(served, job["id"])
    alice = {j["id"] for j in _call(served, "GET", "/v1/jobs").json()["jobs"]}
    bob = {j["id"] for j in _call(served, "GET", "/v1/jobs", token="bob").json()["jobs"]}
    assert job["id"] in alice and job["id"] not in bob
    theirs = _call(served, "GET", f"/v1/jobs/{job['id']}", token="bob")
    unknown_id = secrets.token_hex(16)
    unknown = _call(served, "GET", f"/v1/jobs/{unknown_id}", token="bob")
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.text.replace(job["id"], "ID") == unknown.text.replace(unknown_id, "ID")
    assert sorted(theirs.headers.keys()) == sorted(unknown.headers.keys())
    assert "of yours" in theirs.json()["error"] and "alice" not in theirs.text
    odd = _call(served, "GET", "/v1/jobs/..%2F..%2Fserve.toml", token="bob")
    assert odd.status_code == 404 and "[ptable]" not in odd.text


def test_a_job_refused_by_the_rules_fails_with_the_refusal(served):
    from protab.serve.broker import MIN_POPULATION_MESSAGE

    job = _submit(served, {**BIG, "filters": {"age": "19"}}, token="bob")  # one person is 19
    r = _wait(served, job["id"], token="bob")
    assert r.status_code == 400 and MIN_POPULATION_MESSAGE in r.json()["error"] and job["id"] in r.json()["error"]
    listed = [j for j in _call(served, "GET", "/v1/jobs", token="bob").json()["jobs"] if j["id"] == job["id"]][0]
    assert listed["status"] == "failed" and MIN_POPULATION_MESSAGE in listed["error"]
    # the service goes on serving
    assert _call(served, "POST", "/v1/table", {"dataset": "persons", "dims": ["sex"]}).status_code == 200


def test_jobs_are_audited(served):
    job = _submit(served, {**BIG, "filters": {"agegroup": "a15-19"}})  # a new request: a new job
    _wait(served, job["id"])
    _call(served, "GET", f"/v1/jobs/{job['id']}", params={"format": "csv"})
    lines = [json.loads(x) for x in served["audit"].read_text(encoding="utf-8").splitlines()]
    mine = [x for x in lines if x.get("job") == job["id"] or job["id"] in x["endpoint"]]
    submitted = [x for x in mine if x["endpoint"] == "POST /v1/table"]
    assert len(submitted) == 1 and submitted[0]["status"] == 202 and "agegroup" in submitted[0]["query"]
    ran = [x for x in mine if x["endpoint"] == f"JOB /v1/jobs/{job['id']}"]
    assert len(ran) == 1 and ran[0]["status"] == 200 and ran[0]["cells"] == 48 and ran[0]["user"] == "alice"
    fetched = [x for x in mine if x["endpoint"] == f"GET /v1/jobs/{job['id']}" and x["status"] == 200]
    assert fetched and fetched[-1]["format"] == "csv" and fetched[-1]["cells"] == 48
    text = served["audit"].read_text(encoding="utf-8")
    assert F.SEED not in text and "2.71828" not in text


def test_jobs_take_sessions_of_their_own(tmp_path):
    """With job_cells, the broker opens job_workers more sessions; a request inside Broker.as_job
    takes one of them, so jobs never wait for, or hold, the small requests' sessions."""
    from protab.serve.broker import Broker
    from protab.serve.config import load_config

    db = F.build_database(tmp_path / "micro.duckdb", persons=300)
    config, _ = F.write_setup(tmp_path, db, job_cells=JOB_CELLS, job_workers=1, min_population=1)
    broker = Broker(load_config(config))
    try:
        assert len(broker._sessions) == broker.config.sessions + 1
        held = [broker._pool.get() for _ in range(broker.config.sessions)]  # every small session busy
        try:
            with broker.as_job(), broker.session() as job:
                assert all(job is not s for s in held)
        finally:
            for s in held:
                broker._pool.put(s)
        with broker.session() as small:
            assert small in held  # outside as_job: the small requests' pool
    finally:
        broker.close()


def test_job_workers_run_at_a_lower_priority():
    """The workers' threads are niced by JOB_NICE (Linux: per thread), the service's are not."""
    import os
    import threading

    from protab.serve.jobs import JOB_NICE, _background

    if not hasattr(os, "getpriority"):
        pytest.skip("no per-thread priority on this platform")
    seen = {}

    def worker():
        _background()
        seen["nice"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen["nice"] == min(19, base + JOB_NICE)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base
