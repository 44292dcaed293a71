"""HTTP caching of the service's answers (issue 28 item 4): an ETag on every answer, keyed so
that it tells nothing about the protection parameters; If-None-Match gives 304 without
counting against the rate limit, after the token and the rights are checked; Cache-Control
from serve.toml's ``cache_max_age``; the tag changes when the data or a parameter changes.

The real server in a subprocess for the HTTP behaviour; the app in-process (Starlette's test
client) where the service must start again with another database or configuration.
"""

from __future__ import annotations

import json
import os

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")

import serve_fixtures as F  # noqa: E402

MAX_AGE = 120
RATE = 15
TABLE = {"dataset": "persons", "dims": ["region", "sex"], "filters": {"agegroup": "a0-4"}}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("etag")
    db = F.build_database(folder / "micro.duckdb")
    config, tokens = F.write_setup(folder, db, cache_max_age=MAX_AGE, requests_per_minute=RATE)
    server = F.Server(config)
    try:
        yield {"url": server.url, "tokens": tokens, "audit": folder / "audit.jsonl", "folder": folder}
    finally:
        server.stop()


def _call(served, method, path, body=None, *, token="alice", etag=None, params=None):
    headers = {} if token is None else {"Authorization": f"Bearer {served['tokens'].get(token, token)}"}
    if etag is not None:
        headers["If-None-Match"] = etag
    return httpx.request(method, served["url"] + path, json=body, headers=headers, params=params, timeout=60)


def _audit(served):
    return [json.loads(x) for x in served["audit"].read_text(encoding="utf-8").splitlines()]


def test_every_answer_has_an_etag_and_cache_control(served):
    answers = [
        _call(served, "POST", "/v1/table", TABLE),
        _call(served, "POST", "/v1/query", {"sql": "SELECT sex, count(*) AS n FROM persons GROUP BY sex"}),
        _call(served, "GET", "/v1/catalog"),
    ] + [_call(served, "POST", "/v1/table", TABLE, params={"format": f}) for f in ("csv", "parquet", "sdmx-csv")]
    for r in answers:
        assert r.status_code == 200, r.text
        assert r.headers["Cache-Control"] == f"private, max-age={MAX_AGE}, must-revalidate"
        assert r.headers["ETag"].startswith('W/"') and r.headers["ETag"].endswith('"')
    tags = [r.headers["ETag"] for r in answers]
    assert len(set(tags)) == len(tags)  # per request and per format
    # refusals are not cached
    refused = _call(served, "POST", "/v1/table", {"dataset": "persons", "dims": ["nope"]})
    assert refused.status_code == 400 and refused.headers["Cache-Control"] == "no-store"
    assert "ETag" not in refused.headers


def test_same_request_same_tag_and_the_tag_is_the_canonical_requests(served):
    a = _call(served, "POST", "/v1/table", TABLE)
    b = _call(served, "POST", "/v1/table", TABLE)
    reordered = {"filters": {"agegroup": ["a0-4"]}, "dims": ["region", "sex"], "dataset": "persons"}
    c = _call(served, "POST", "/v1/table", reordered)
    assert a.headers["ETag"] == b.headers["ETag"] == c.headers["ETag"]
    assert a.content == c.content


def test_if_none_match_gives_304_and_is_audited(served):
    first = _call(served, "POST", "/v1/table", TABLE, token="bob")
    tag = first.headers["ETag"]
    r = _call(served, "POST", "/v1/table", TABLE, token="bob", etag=tag)
    assert r.status_code == 304 and r.content == b""
    assert r.headers["ETag"] == tag and r.headers["Cache-Control"].startswith("private")
    # a list of tags, a strong form of the tag
    for header in (f'W/"other", {tag}', tag.removeprefix("W/")):
        assert _call(served, "POST", "/v1/table", TABLE, token="bob", etag=header).status_code == 304
    # '*' is no tag: it would make a 304 of any request, also of one the rules refuse
    assert _call(served, "POST", "/v1/table", TABLE, token="bob", etag="*").status_code == 200
    small = {**TABLE, "filters": {"age": "19"}}  # one person: refused by the minimum-population rule
    assert _call(served, "POST", "/v1/table", small, token="bob", etag="*").status_code == 400
    # another format or request does not match
    assert _call(served, "POST", "/v1/table", TABLE, token="bob", etag=tag, params={"format": "csv"}).status_code == 200
    line = [x for x in _audit(served) if x["user"] == "bob" and x["status"] == 304][-1]
    assert line["accepted"] and line["endpoint"] == "POST /v1/table" and "agegroup" in line["query"]
    # a catalogue too
    cat = _call(served, "GET", "/v1/catalog", token="bob")
    assert _call(served, "GET", "/v1/catalog", token="bob", etag=cat.headers["ETag"]).status_code == 304


def test_304_needs_a_valid_token_and_the_rights(served):
    alice = _call(served, "POST", "/v1/table", TABLE)
    tag = alice.headers["ETag"]
    for token in (None, "dave", "carol", "alice_revoked", "no-such-token"):
        r = _call(served, "POST", "/v1/table", TABLE, token=token, etag=tag)
        assert r.status_code == 401, (token, r.status_code)
    # erin may not use region: her If-None-Match is no way around the 403 (the rate test drains
    # erin's bucket: it runs after this one)
    assert _call(served, "POST", "/v1/table", TABLE, token="erin", etag=tag).status_code == 403
    assert _call(served, "POST", "/v1/table", TABLE, token="erin", etag="*").status_code == 403
    # tags are per user: bob's answer has another tag; alice's tag gets him the answer, not a 304
    bob = _call(served, "POST", "/v1/table", TABLE, token="bob", etag=tag)
    assert bob.status_code == 200 and bob.headers["ETag"] != tag


def test_the_tag_says_nothing_of_the_parameters(served):
    """Keyed: nothing a user sees or could guess (request, parameters, seed) gives the tag
    without the key kept in the state folder, readable by the service only."""
    import hashlib

    r = _call(served, "POST", "/v1/table", TABLE)
    tag = r.headers["ETag"].removeprefix("W/").strip('"')
    key = served["folder"] / "serve_state" / "etag.key"
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_bytes()) >= 32
    guesses = [json.dumps(TABLE), json.dumps(F.PTABLE), F.SEED, r.text, str(F.THRESHOLD)]
    for g in guesses:
        for h in (hashlib.sha256, hashlib.sha1, hashlib.md5):
            assert h(g.encode()).hexdigest()[: len(tag)] != tag
    for text in (r.headers["ETag"], json.dumps(dict(r.headers))):
        for secret in (F.SEED, "2.71828", "3.14159"):
            assert secret not in text


def test_304_does_not_count_against_the_rate_limit(served):
    sql = {"sql": "SELECT sex, count(*) AS n FROM persons GROUP BY sex"}
    tag = _call(served, "POST", "/v1/query", sql, token="erin").headers["ETag"]
    for _ in range(RATE + 10):  # more than the bucket holds: each would be refused if counted
        assert _call(served, "POST", "/v1/query", sql, token="erin", etag=tag).status_code == 304
    admitted = 0
    while admitted < 3 * RATE and _call(served, "POST", "/v1/query", sql, token="erin").status_code == 200:
        admitted += 1
    assert admitted >= RATE // 2  # the bucket was not drained: the 304s took nothing
    assert admitted < 3 * RATE  # and the limit holds for answers


# -- in-process: the tag after a restart, a changed database or parameter ---------------------
def _client(config):
    import warnings

    from protab.serve.app import create_app

    app = create_app(config)
    with warnings.catch_warnings():  # Starlette's notice about its test client's HTTP library
        warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
        from starlette.testclient import TestClient

        return TestClient(app)


def _tag(client, token):
    r = client.post("/v1/table", json=TABLE, headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    return r.headers["ETag"]


def test_tag_kept_across_restarts_and_changed_by_new_data(tmp_path):
    db = F.build_database(tmp_path / "micro.duckdb", persons=800)
    config, tokens = F.write_setup(tmp_path, db, min_population=1, sessions=1)
    with _client(config) as c:
        first = _tag(c, tokens["alice"])
    with _client(config) as c:  # the same service again: the same tag (the key is kept)
        assert _tag(c, tokens["alice"]) == first
    os.replace(db, tmp_path / "old.duckdb")
    F.build_database(db, persons=900)  # new data under the same name
    with _client(config) as c:
        assert _tag(c, tokens["alice"]) != first


@pytest.mark.parametrize(("old", "new"), [
    (f"threshold = {F.THRESHOLD}", "threshold = 4"),
    ("D = 5", "D = 6"),  # the p-table
    ("fp = 100", "fp = 101"),  # the magnitude section
    (f"min_population = {F.MIN_POPULATION}", "min_population = 11"),
    ('"F", "M"', '"M", "F"'),  # a declared code list
    ("[datasets.households]", '[datasets.persons.rules]\nblocked = [["age", "municipality"]]\n[datasets.households]'),
])
def test_the_version_changes_with_every_protection_parameter(tmp_path, old, new):
    from protab.serve import caching
    from protab.serve.config import load_config

    db = str(tmp_path / "micro.duckdb")
    (tmp_path / "micro.duckdb").write_bytes(b"")  # only its identity is read
    text = F.config_text(db)
    assert old in text
    (tmp_path / "a.toml").write_text(text, encoding="utf-8")
    (tmp_path / "b.toml").write_text(text.replace(old, new), encoding="utf-8")
    same = caching.version(load_config(tmp_path / "a.toml"))
    assert caching.version(load_config(tmp_path / "a.toml")) == same
    assert caching.version(load_config(tmp_path / "b.toml")) != same
    # and the tag of the same request under two keys differs: it is keyed
    tags = {caching.ETags(k, same).tag("alice", "table", TABLE, [], "json") for k in (b"k" * 32, b"q" * 32)}
    assert len(tags) == 2


def test_state_folder_that_cannot_be_made_is_a_clear_error(tmp_path):
    from protab.errors import ProtabError
    from protab.serve.app import create_app

    db = F.build_database(tmp_path / "micro.duckdb", persons=300)
    config, _ = F.write_setup(tmp_path, db, state_dir="no/such/folder/state")
    with pytest.raises(ProtabError, match="state_dir of the serve config: the folder of .* does not exist"):
        create_app(config)
