"""Names are matched in full: ``^...$`` with ``re.match`` lets a trailing newline pass (``$``
matches before a final newline), so every name the service checks — saved tables, saved
groups, datasets, dimensions, users and token hashes of serve.toml — is compared whole, and a
name with a trailing newline is refused (400 over HTTP, a start-up error in serve.toml)."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette")

import serve_fixtures as F

TABLE = {"dataset": "persons", "dims": ["sex"]}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from protab.serve.app import create_app

    folder = tmp_path_factory.mktemp("names")
    db = F.build_database(folder / "micro.duckdb", persons=600)
    config, tokens = F.write_setup(folder, db, sessions=1)
    with F.starlette_client(create_app(config)) as client:
        yield {"client": client, "tokens": tokens, "folder": folder, "db": db}


def _call(setup, method, path, body=None):
    return setup["client"].request(method, path, json=body, headers={"Authorization": f"Bearer {setup['tokens']['bob']}"})


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/saved", {"name": "by-sex\n", "request": TABLE}),
    ("/v1/groups", {"dataset": "persons", "dim": "sex", "name": "both\n", "groups": {"all": ["F", "M"]}}),
    ("/v1/table", {"dataset": "persons\n", "dims": ["sex"]}),
    ("/v1/table", {"dataset": "persons", "dims": ["sex\n"]}),
    ("/v1/table", {**TABLE, "measure": "income\n"}),
    ("/v1/query", {"sql": 'SELECT "sex\n", count(*) AS n FROM persons GROUP BY 1'}),
    ("/v1/query", {"sql": 'SELECT sex, count(*) AS n FROM "persons\n" GROUP BY sex'}),
], ids=["saved table", "saved groups", "dataset", "dimension", "measure", "sql column", "sql dataset"])
def test_a_name_with_a_trailing_newline_is_refused(setup, path, body):
    r = _call(setup, "POST", path, body)
    assert r.status_code == 400, r.text
    assert r.json()["rule"] in ("name", "validator", "allowed_form")


def test_nothing_is_saved_under_a_name_with_a_newline(setup):
    assert _call(setup, "POST", "/v1/saved", {"name": "kept", "request": TABLE}).status_code == 201
    assert _call(setup, "POST", "/v1/saved", {"name": "kept\n", "request": TABLE}).status_code == 400
    assert [e["name"] for e in _call(setup, "GET", "/v1/saved").json()["saved"]] == ["kept"]


def test_the_name_check_matches_in_full():
    from protab.serve.query import QueryRefused
    from protab.serve.saved import check_name

    assert check_name("by-sex.2") == "by-sex.2"
    for bad in ("by-sex\n", "by-sex\r\n", "\nby-sex", "by sex", "", "a" * 65):
        with pytest.raises(QueryRefused):
            check_name(bad)


@pytest.mark.parametrize("edit", [
    lambda t: t.replace("[datasets.secret]", '[datasets."secret\\n"]'),
    lambda t: t.replace("[users.bob]", '[users."bob\\n"]'),
    lambda t: t.replace('token_sha256 = ["', 'token_sha256 = ["').replace('"]\n[users.carol]', '\\n"]\n[users.carol]'),
], ids=["dataset name", "user name", "token hash"])
def test_serve_toml_refuses_names_with_a_trailing_newline(setup, tmp_path, edit):
    from protab.errors import SpecError
    from protab.serve.config import load_config

    path = tmp_path / "serve.toml"
    text = edit(F.config_text(setup["db"]))
    assert text != F.config_text(setup["db"])
    path.write_text(text)
    with pytest.raises(SpecError):
        load_config(path)
