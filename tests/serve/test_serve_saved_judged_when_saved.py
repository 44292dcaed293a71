"""A saved table (``POST /v1/saved``) is judged when it is saved by everything a table request is
judged by before its scan — its form, the user's rights, the disclosure rules of the dataset
and the cells estimate against ``max_cells`` — not only when it is run; a refused save stores
nothing (the list of saved tables and the file are unchanged), and the service goes on saving
and answering the requests that pass. A request above ``job_cells`` (a job when run) is saved."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("starlette")

import serve_fixtures as F

RULES = """
[datasets.persons.rules]
max_dims = 2
blocked = [["sex", "age"]]
"""
GOOD = {"dataset": "persons", "dims": ["region", "sex"]}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from protab.serve.app import create_app

    folder = tmp_path_factory.mktemp("saved_judged")
    db = F.build_database(folder / "micro.duckdb", persons=800)
    config, tokens = F.write_setup(folder, db, sessions=1, max_cells=300, job_cells=40, job_workers=1)
    config.write_text(config.read_text() + RULES)
    with F.starlette_client(create_app(config)) as client:
        yield {"client": client, "tokens": tokens, "state": folder / "serve_state" / "saved.json"}


def _call(setup, method, path, body=None, token="bob"):
    return setup["client"].request(method, path, json=body, headers={"Authorization": f"Bearer {setup['tokens'][token]}"})


def _stored(setup):
    path = setup["state"]
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


@pytest.mark.parametrize(("request_", "status", "rule"), [
    ({"dataset": "persons", "dims": ["sex", "age"]}, 400, "blocked[0]"),
    ({"dataset": "persons", "dims": ["region", "sex", "agegroup"]}, 400, "max_dims"),
    ({"dataset": "persons", "dims": ["municipality", "age"]}, 400, "max_cells"),  # 16 x 21 cells
    ({"dataset": "persons", "dims": ["region", "sex"], "filters": {"agegroup": ["a0-4", "a5-9"]}}, 400,
     "multi_value_filter"),
    ({"dataset": "persons", "dims": ["region", "sex"], "measure": "hours"}, 403, "rights"),  # alice: income only
], ids=["blocked", "max_dims", "max_cells", "several values off the table", "rights"])
def test_a_saved_request_the_rules_refuse_is_refused_when_saved_and_nothing_is_stored(setup, request_, status, rule):
    token = "alice" if rule == "rights" else "bob"
    before = _stored(setup)
    listed = _call(setup, "GET", "/v1/saved", token=token).json()["saved"]
    r = _call(setup, "POST", "/v1/saved", {"name": "refused", "request": request_}, token=token)
    assert r.status_code == status, r.text
    assert r.json()["rule"] == rule and r.json()["advice"]
    assert _call(setup, "GET", "/v1/saved", token=token).json()["saved"] == listed
    assert _stored(setup) == before
    assert _call(setup, "GET", "/v1/saved/refused", token=token).status_code == 404


def test_a_request_that_passes_is_saved_and_answered_and_a_job_sized_one_is_saved(setup):
    assert _call(setup, "POST", "/v1/saved", {"name": "ok", "request": GOOD}).status_code == 201
    assert _call(setup, "GET", "/v1/saved/ok").status_code == 200
    big = {"dataset": "persons", "dims": ["municipality", "sex"]}  # 48 cells: above job_cells, within max_cells
    assert _call(setup, "POST", "/v1/saved", {"name": "big", "request": big}).status_code == 201
    assert _call(setup, "GET", "/v1/saved/big").status_code == 202  # run as a job
    assert {"ok", "big"} <= set(_stored(setup)["users"]["bob"])
