"""The same job request posted again by its user is its existing job, not a new one: 202 with
the same job (same id, same Location) while it is queued or running, and once it is done the
answer itself (200, as ``GET /v1/jobs/<id>`` gives it, with ``Content-Location`` naming the
job); another user's identical request gets its own job; two identical posts at once make one
job; a failed job does not stand for its request (posting it again makes a new job).

The app in-process (Starlette's test client); the job's computation is held on an event so
that it is still running when the request comes again."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("starlette")

import serve_fixtures as F

BIG = {"dataset": "persons", "dims": ["municipality", "sex"]}  # 16 x 3 cells: above job_cells


@pytest.fixture
def setup(tmp_path):
    from protab.serve.app import create_app

    db = F.build_database(tmp_path / "micro.duckdb", persons=600)
    config, tokens = F.write_setup(tmp_path, db, min_population=1, job_cells=20, job_workers=1, sessions=1)
    app = create_app(config)
    release = threading.Event()
    broker, table = app.state.broker, app.state.broker.table

    def held(body, user, **kw):  # a job's computation (admit=False) waits for the test
        if not kw.get("admit", True):
            release.wait(60)
        return table(body, user, **kw)

    broker.table = held
    with F.starlette_client(app) as client:
        yield {"client": client, "tokens": tokens, "release": release}
    release.set()


def _call(setup, method, path, body=None, token="alice"):
    return setup["client"].request(method, path, json=body, headers={"Authorization": f"Bearer {setup['tokens'][token]}"})


def _done(setup, job_id, token="alice"):
    for _ in range(600):
        r = _call(setup, "GET", f"/v1/jobs/{job_id}", token=token)
        if r.status_code != 202:
            return r
        threading.Event().wait(0.05)
    raise AssertionError(f"job {job_id} did not end")


def test_the_same_request_posted_again_is_its_existing_job(setup):
    first = _call(setup, "POST", "/v1/table", BIG)
    assert first.status_code == 202, first.text
    job = first.json()["job"]
    again = _call(setup, "POST", "/v1/table", BIG)  # while it runs
    assert again.status_code == 202 and again.json()["job"]["id"] == job["id"]
    assert again.headers["Location"] == first.headers["Location"] == f"/v1/jobs/{job['id']}"
    theirs = _call(setup, "POST", "/v1/table", BIG, token="bob")  # another user: a job of their own
    assert theirs.status_code == 202 and theirs.json()["job"]["id"] != job["id"]
    setup["release"].set()
    fetched = _done(setup, job["id"])
    assert fetched.status_code == 200
    once_done = _call(setup, "POST", "/v1/table", BIG)  # done: the answer, as GET /v1/jobs/<id> gives it
    assert once_done.status_code == 200 and once_done.content == fetched.content
    assert once_done.headers["Content-Location"] == f"/v1/jobs/{job['id']}"
    assert once_done.headers["ETag"] == fetched.headers["ETag"]
    mine = [j["id"] for j in _call(setup, "GET", "/v1/jobs").json()["jobs"]]
    assert mine == [job["id"]]
    other = {**BIG, "filters": {"agegroup": "a0-4"}}  # another request: another job
    assert _call(setup, "POST", "/v1/table", other).json()["job"]["id"] != job["id"]


def test_the_same_sql_posted_again_is_its_existing_job(setup):
    sql = {"sql": "SELECT municipality, sex, count(*) AS n FROM persons GROUP BY CUBE(municipality, sex)"}
    spelled = {"sql": "select MUNICIPALITY, sex, count(*) as n from persons group by cube(municipality, sex)"}
    first = _call(setup, "POST", "/v1/query", sql)
    again = _call(setup, "POST", "/v1/query", spelled)  # the same query in other words: the same job
    assert first.status_code == again.status_code == 202
    assert again.json()["job"]["id"] == first.json()["job"]["id"]


def test_a_failed_job_does_not_stand_for_its_request(setup):
    setup["release"].set()
    nobody = {**BIG, "filters": {"agegroup": "a99"}}  # no such code: nobody, refused by the population rule
    first = _call(setup, "POST", "/v1/table", nobody)
    assert first.status_code == 202, first.text  # judged before the scan: it passes; refused when run
    failed = _done(setup, first.json()["job"]["id"])
    assert failed.status_code == 400 and failed.json()["rule"] == "min_population"
    again = _call(setup, "POST", "/v1/table", nobody)
    assert again.status_code == 202 and again.json()["job"]["id"] != first.json()["job"]["id"]


def test_identical_posts_at_once_make_one_job(tmp_path):
    from protab.serve.jobs import JobStore

    store = JobStore(tmp_path, workers=1, per_user=50)
    gate, start = threading.Event(), threading.Barrier(8)
    seen: list[tuple[str, bool]] = []

    def post():
        start.wait()
        view, existing = store.submit_once("alice", "key-1", "the request", 48, lambda: (gate.wait(30), (None, {}))[1])
        seen.append((view["id"], existing))

    threads = [threading.Thread(target=post) for _ in range(8)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        gate.set()
        store.close()
    assert len({i for i, _ in seen}) == 1 and sorted(e for _, e in seen) == [False] + [True] * 7
