"""Saved tables per user (issue 28 item 3): the request is kept, never the numbers, and run
again on demand through the normal path (the same answer and ETag as POST /v1/table, the rate
limit, jobs); checked as a table request when saved (400 naming the key, 403 outside the
rights); a per-user cap (409); names per user (another user's is unknown); kept on disk.

The app in-process (Starlette's test client), as a platform mounts it (``create_app``).
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("starlette")

import serve_fixtures as F

CAP = 3
TABLE = {"dataset": "persons", "dims": ["region", "sex"], "filters": {"agegroup": "a0-4"}}
BIG = {"dataset": "persons", "dims": ["municipality", "sex"]}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from protab.serve.app import create_app

    folder = tmp_path_factory.mktemp("saved")
    db = F.build_database(folder / "micro.duckdb", persons=1500)
    config, tokens = F.write_setup(folder, db, saved_per_user=CAP, job_cells=40, job_workers=1, sessions=1)
    with F.starlette_client(create_app(config)) as client:
        yield {"client": client, "tokens": tokens, "folder": folder, "config": config}


def _call(setup, method, path, body=None, token="alice", **kw):
    headers = {"Authorization": f"Bearer {setup['tokens'][token]}", **kw.pop("headers", {})}
    return setup["client"].request(method, path, json=body, headers=headers, **kw)


def test_save_list_run_delete(setup):
    r = _call(setup, "POST", "/v1/saved", {"name": "young-by-region", "request": TABLE})
    assert r.status_code == 201, r.text
    assert r.json()["request"] == TABLE and r.headers["Location"] == "/v1/saved/young-by-region"
    listed = _call(setup, "GET", "/v1/saved").json()["saved"]
    assert [s["name"] for s in listed] == ["young-by-region"] and listed[0]["request"] == TABLE
    direct = _call(setup, "POST", "/v1/table", TABLE)
    again = _call(setup, "GET", "/v1/saved/young-by-region")
    assert again.status_code == 200 and again.content == direct.content  # the same protected answer
    assert again.headers["ETag"] == direct.headers["ETag"]
    assert _call(setup, "GET", "/v1/saved/young-by-region", headers={"If-None-Match": direct.headers["ETag"]}
                 ).status_code == 304
    csv = _call(setup, "GET", "/v1/saved/young-by-region", params={"format": "csv"})
    assert csv.status_code == 200 and csv.text.startswith("region,sex,")
    # the file holds the request, not a number of the answer
    stored = json.loads((setup["folder"] / "serve_state" / "saved.json").read_text(encoding="utf-8"))
    assert stored["users"]["alice"]["young-by-region"]["request"] == TABLE
    assert "n_pert" not in json.dumps(stored)
    assert _call(setup, "DELETE", "/v1/saved/young-by-region").json() == {"deleted": "young-by-region"}
    gone = _call(setup, "GET", "/v1/saved/young-by-region")
    assert gone.status_code == 404 and "no saved table named 'young-by-region'" in gone.json()["error"]
    assert _call(setup, "DELETE", "/v1/saved/young-by-region").status_code == 404


def test_a_large_saved_table_runs_as_a_job(setup):
    assert _call(setup, "POST", "/v1/saved", {"name": "big", "request": BIG}).status_code == 201
    r = _call(setup, "GET", "/v1/saved/big")
    assert r.status_code == 202 and r.json()["job"]["id"]
    _call(setup, "DELETE", "/v1/saved/big")


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"name": "x", "request": {**TABLE, "dims": ["nope"]}}, 400, "'nope'"),
    ({"name": "x", "request": {**TABLE, "colour": 1}}, 400, "unknown key 'colour' in the table request"),
    ({"name": "x", "request": {"dataset": "persons", "dims": ["age"]}}, 403, "you may not use 'age'"),
    ({"name": "x", "request": {"dataset": "secret", "dims": ["kind"]}}, 403, "no rights to dataset 'secret'"),
    ({"name": "../etc/passwd", "request": TABLE}, 400, "is not a saved table's name"),
    ({"name": "", "request": TABLE}, 400, "is not a saved table's name"),
    ({"name": 7, "request": TABLE}, 400, "is not a saved table's name"),
    ({"request": TABLE}, 400, "the key 'name' is missing"),
    ({"name": "x"}, 400, "the key 'request' is missing"),
    ({"name": "x", "request": TABLE, "numbers": [1]}, 400, "unknown key 'numbers'"),
    ([1, 2], 400, "the body must be a JSON object"),
])
def test_bad_saved_tables_are_refused_naming_the_key(setup, body, status, message):
    r = _call(setup, "POST", "/v1/saved", body)
    assert r.status_code == status, r.text
    assert message in r.json()["error"]
    assert "Traceback" not in r.text and F.SEED not in r.text
    assert all(s["name"] != "x" for s in _call(setup, "GET", "/v1/saved").json()["saved"])


def test_per_user_cap_and_the_others_go_on(setup):
    for k in range(CAP):
        assert _call(setup, "POST", "/v1/saved", {"name": f"t{k}", "request": TABLE}, token="bob").status_code == 201
    over = _call(setup, "POST", "/v1/saved", {"name": "one-more", "request": TABLE}, token="bob")
    assert over.status_code == 409
    assert over.json()["error"].startswith(f"you have {CAP} saved tables, the most the service keeps for one user")
    # saving one of the same name again replaces it; deleting one makes room
    assert _call(setup, "POST", "/v1/saved", {"name": "t0", "request": BIG}, token="bob").status_code == 201
    assert len(_call(setup, "GET", "/v1/saved", token="bob").json()["saved"]) == CAP
    # another user saves and is answered as before
    assert _call(setup, "POST", "/v1/saved", {"name": "t0", "request": TABLE}).status_code == 201
    assert _call(setup, "GET", "/v1/saved/t0").status_code == 200
    assert _call(setup, "DELETE", "/v1/saved/t1", token="bob").status_code == 200
    assert _call(setup, "POST", "/v1/saved", {"name": "one-more", "request": TABLE}, token="bob").status_code == 201


def test_saved_tables_are_per_user(setup):
    _call(setup, "POST", "/v1/saved", {"name": "mine", "request": TABLE})
    theirs = _call(setup, "GET", "/v1/saved/mine", token="erin")
    unknown = _call(setup, "GET", "/v1/saved/no-such-name", token="erin")
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.text.replace("mine", "N") == unknown.text.replace("no-such-name", "N")
    assert _call(setup, "DELETE", "/v1/saved/mine", token="erin").status_code == 404
    assert "mine" not in {s["name"] for s in _call(setup, "GET", "/v1/saved", token="erin").json()["saved"]}
    assert _call(setup, "GET", "/v1/saved/mine").status_code == 200  # still alice's
    assert _call(setup, "GET", "/v1/saved", token="dave").status_code == 401


def test_saved_tables_survive_a_restart(setup):
    from protab.serve.app import create_app

    _call(setup, "POST", "/v1/saved", {"name": "kept", "request": TABLE})
    with F.starlette_client(create_app(setup["config"])) as other:
        auth = {"Authorization": f"Bearer {setup['tokens']['alice']}"}
        assert "kept" in {s["name"] for s in other.get("/v1/saved", headers=auth).json()["saved"]}
        assert other.get("/v1/saved/kept", headers=auth).content == _call(setup, "GET", "/v1/saved/kept").content
