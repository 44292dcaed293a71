"""Custom groups saved under their name (issue 28 item 2): per user, dataset and dimension;
checked when saved (400 naming the key, 403 outside the rights); used by name in a table
request with the answer of the same groups given inline (the same path: the differencing rule
applies); a per-user cap (409); another user's are unknown (404); kept on disk.

The app in-process (Starlette's test client), as a platform mounts it (``create_app``). The test
census (tests/serve_fixtures.py): exactly one person is 19 years old."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("starlette")

import serve_fixtures as F

CAP = 3
AGES = [str(a) for a in range(20)]
BANDS = {"young": ["a0-4", "a5-9"], "older": ["a10-14", "a15-19"]}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from protab.serve.app import create_app

    folder = tmp_path_factory.mktemp("saved_groups")
    db = F.build_database(folder / "micro.duckdb", persons=1500)
    config, tokens = F.write_setup(folder, db, groups_per_user=CAP, sessions=1)
    with F.starlette_client(create_app(config)) as client:
        yield {"client": client, "tokens": tokens, "folder": folder, "config": config}


def _call(setup, method, path, body=None, token="bob", **kw):
    headers = {"Authorization": f"Bearer {setup['tokens'][token]}", **kw.pop("headers", {})}
    return setup["client"].request(method, path, json=body, headers=headers, **kw)


def _save(setup, name, groups, dim="agegroup", token="bob", dataset="persons"):
    return _call(setup, "POST", "/v1/groups", {"dataset": dataset, "dim": dim, "name": name, "groups": groups},
                 token=token)


def _clear(setup, token="bob"):
    for g in _call(setup, "GET", "/v1/groups", token=token).json()["groups"]:
        _call(setup, "DELETE", f"/v1/groups/{g['dataset']}/{g['dim']}/{g['name']}", token=token)


def test_save_list_use_delete(setup):
    _clear(setup)
    r = _save(setup, "bands", BANDS)
    assert r.status_code == 201, r.text
    assert r.headers["Location"] == "/v1/groups/persons/agegroup/bands"
    assert r.json()["groups"] == BANDS and r.json()["name"] == "bands"
    listed = _call(setup, "GET", "/v1/groups").json()["groups"]
    assert [(g["dataset"], g["dim"], g["name"], g["groups"]) for g in listed] == [("persons", "agegroup", "bands", BANDS)]
    assert _call(setup, "GET", "/v1/groups/persons/agegroup/bands").json()["groups"] == BANDS
    table = {"dataset": "persons", "dims": ["agegroup", "sex"]}
    by_name = _call(setup, "POST", "/v1/table", {**table, "groups": {"agegroup": "bands"}})
    inline = _call(setup, "POST", "/v1/table", {**table, "groups": {"agegroup": BANDS}})
    assert by_name.status_code == 200, by_name.text
    assert by_name.content == inline.content and by_name.headers["ETag"] == inline.headers["ETag"]
    assert {r[0] for r in by_name.json()["rows"]} == {"young", "older", "Total"}
    assert _call(setup, "DELETE", "/v1/groups/persons/agegroup/bands").json() == {"deleted": "bands"}
    assert _call(setup, "GET", "/v1/groups/persons/agegroup/bands").status_code == 404
    gone = _call(setup, "POST", "/v1/table", {**table, "groups": {"agegroup": "bands"}})
    assert gone.status_code == 400 and gone.json()["error"].startswith("groups.agegroup: you have no saved groups")


def test_a_saved_table_keeps_the_groups_by_name(setup):
    """A saved table that uses saved groups runs with their codes of the day."""
    _clear(setup)
    assert _save(setup, "bands", BANDS).status_code == 201
    request = {"dataset": "persons", "dims": ["agegroup"], "groups": {"agegroup": "bands"}}
    assert _call(setup, "POST", "/v1/saved", {"name": "by-bands", "request": request}).status_code == 201
    first = _call(setup, "GET", "/v1/saved/by-bands").json()
    assert {r[0] for r in first["rows"]} == {"young", "older", "Total"}
    assert _save(setup, "bands", {"all-young": ["a0-4", "a5-9", "a10-14"]}).status_code == 201  # replaced
    again = _call(setup, "GET", "/v1/saved/by-bands").json()
    assert {r[0] for r in again["rows"]} == {"all-young", "Total"}
    _call(setup, "DELETE", "/v1/saved/by-bands")


@pytest.mark.parametrize("body, status, words", [
    ({"groups": {"g": ["a0-4", "a99"]}}, 400, "groups.g: 'a99' are not codes of 'agegroup'"),
    ({"groups": {"g": []}}, 400, "groups.g: give a non-empty list of codes"),
    ({"groups": {"g": ["a0-4", "a5-9"], "h": ["a5-9"]}}, 400, "groups.h: code 'a5-9' is also in group 'g'"),
    ({"groups": {"a0-4": ["a0-4", "a5-9"]}}, 400, "groups.a0-4: a group's name is 1 to 60 printable characters"),
    ({"groups": {"Total": ["a0-4"]}}, 400, "groups.Total: a group's name"),
    ({"groups": {"_T": ["a0-4"]}}, 400, "groups._T: a group's name is 1 to 60 printable characters, not 'Total' or "
                                        "'_T'"),
    ({"dim": "municipality", "groups": {"R1": ["R1-0"]}}, 400, "groups.R1: a group's name is 1 to 60 printable "
     "characters, not 'Total' or '_T' and not a code of 'municipality' at any level"),
    ({"groups": {}}, 400, "groups must be an object of 1 to 50 groups"),
    ({"name": "no spaces"}, 400, "name 'no spaces' is not a saved group's name"),
    ({"dim": "shoe"}, 400, "dim: unknown dimension 'shoe' of dataset 'persons'"),
    ({"dataset": "nope"}, 400, "dataset: unknown dataset 'nope'"),
    ({"dataset": "secret", "dim": "kind", "groups": {"g": ["A"]}}, 403, "you have no rights to dataset 'secret'"),
    ({"extra": 1}, 400, "unknown key 'extra'"),
])
def test_bad_saved_groups_name_the_key(setup, body, status, words):
    full = {"dataset": "persons", "dim": "agegroup", "name": "g1", "groups": {"g": ["a0-4"]}, **body}
    r = _call(setup, "POST", "/v1/groups", full)
    assert r.status_code == status and words in r.json()["error"], r.text
    assert all(g["name"] != "g1" for g in _call(setup, "GET", "/v1/groups").json()["groups"])


def test_a_dimension_outside_the_rights_is_forbidden(setup):
    r = _save(setup, "teens", {"teens": ["13", "14"]}, dim="age", token="alice")  # alice may not use age
    assert r.status_code == 403 and "you may not use 'age'" in r.json()["error"]


def test_another_users_groups_are_unknown(setup):
    _clear(setup)
    assert _save(setup, "mine", BANDS).status_code == 201
    theirs = _call(setup, "GET", "/v1/groups/persons/agegroup/mine", token="alice")
    unknown = _call(setup, "GET", "/v1/groups/persons/agegroup/nothing", token="alice")
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.json()["error"].replace("mine", "X") == unknown.json()["error"].replace("nothing", "X")
    assert _call(setup, "DELETE", "/v1/groups/persons/agegroup/mine", token="alice").status_code == 404
    assert _call(setup, "GET", "/v1/groups", token="alice").json()["groups"] == []
    used = _call(setup, "POST", "/v1/table", {"dataset": "persons", "dims": ["agegroup"],
                                             "groups": {"agegroup": "mine"}}, token="alice")
    assert used.status_code == 400 and "you have no saved groups named 'mine'" in used.json()["error"]
    assert _call(setup, "GET", "/v1/groups/persons/agegroup/mine").status_code == 200  # still bob's


def test_a_user_keeps_at_most_the_cap(setup):
    _clear(setup)
    for k in range(CAP):
        assert _save(setup, f"g{k}", {"g": ["a0-4"]}).status_code == 201
    full = _save(setup, "one-more", {"g": ["a0-4"]})
    assert full.status_code == 409 and f"you have {CAP} saved groups" in full.json()["error"]
    assert _save(setup, "g0", {"h": ["a5-9"]}).status_code == 201  # replacing one is fine
    assert _save(setup, "g0", BANDS, token="alice").status_code == 201  # a cap per user
    _clear(setup)
    _clear(setup, "alice")


def test_saved_groups_take_the_differencing_rule(setup):
    """All ages but 19 is the total less one person: refused by name as inline."""
    _clear(setup)
    assert _save(setup, "most", {"most": AGES[:19]}, dim="age").status_code == 201
    r = _call(setup, "POST", "/v1/table", {"dataset": "persons", "dims": ["age"], "groups": {"age": "most"}})
    assert r.status_code == 400 and r.json()["rule"] == "groups.min_difference", r.text
    assert re.search(r"group 'most' differs from (the total of age|agegroup 'a15-19') by too few records",
                     r.json()["error"]), r.text


def test_kept_on_disk_for_the_next_start(setup):
    from protab.serve.app import create_app

    _clear(setup)
    assert _save(setup, "kept", BANDS).status_code == 201
    stored = json.loads((setup["folder"] / "serve_state" / "groups.json").read_text(encoding="utf-8"))
    assert stored["users"]["bob"]["persons"]["agegroup"]["kept"]["groups"] == BANDS
    with F.starlette_client(create_app(setup["config"])) as other:
        r = other.get("/v1/groups", headers={"Authorization": f"Bearer {setup['tokens']['bob']}"})
        assert [g["name"] for g in r.json()["groups"]] == ["kept"]
