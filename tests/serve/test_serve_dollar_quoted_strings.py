"""A PostgreSQL dollar-quoted string (``$$R1$$``, ``$tag$R1$tag$``) or an escape string
(``E'R1'``) is refused with a message that says what it is and that only '...' literals are
accepted (giving the literal to write), over ``/v1/query`` and the PostgreSQL front — the
simple protocol and the extended one with bound parameters alike (binding would otherwise
rewrite the string as '...')."""

from __future__ import annotations

import pytest
import serve_fixtures as F

SQL = "SELECT sex, count(*) AS n FROM persons WHERE region = {literal} GROUP BY sex"
CASES = [("$$R1$$", "PostgreSQL dollar-quoted string"), ("$tag$R1$tag$", "PostgreSQL dollar-quoted string"),
         ("E'R1'", "escape string")]


@pytest.mark.parametrize(("literal", "what"), CASES)
def test_the_validator_says_what_the_literal_is_and_what_to_write(literal, what):
    from protab.serve.query import DatasetRights, QueryRefused
    from protab.serve.validator import validate

    catalog = {"persons": DatasetRights(frozenset({"region", "sex"}), frozenset())}
    with pytest.raises(QueryRefused) as info:
        validate(SQL.format(literal=literal), catalog)
    message = str(info.value)
    assert message.startswith(f"{literal} is a{'n' if what[0] == 'e' else ''} {what}"), message
    assert "single quotes" in message and "write 'R1'" in message
    assert "not 'R1'" not in message  # the old words, which read as if 'R1' were refused
    assert info.value.rule == "allowed_form"


@pytest.fixture(scope="module")
def app_client(tmp_path_factory):
    pytest.importorskip("starlette")
    from protab.serve.app import create_app

    folder = tmp_path_factory.mktemp("dollar")
    db = F.build_database(folder / "micro.duckdb", persons=300)
    config, tokens = F.write_setup(folder, db, min_population=1, sessions=1)
    with F.starlette_client(create_app(config)) as client:
        yield client, tokens


@pytest.mark.parametrize(("literal", "what"), CASES)
def test_v1_query_refuses_it_with_that_message(app_client, literal, what):
    client, tokens = app_client
    r = client.post("/v1/query", json={"sql": SQL.format(literal=literal)},
                    headers={"Authorization": f"Bearer {tokens['bob']}"})
    assert r.status_code == 400 and r.json()["error"].startswith(f"{literal} is a") and what in r.json()["error"]
    assert r.json()["rule"] == "allowed_form"


@pytest.fixture(scope="module")
def pg(tmp_path_factory):
    yield from F.pg_front(tmp_path_factory.mktemp("dollar_pg"))


def test_the_postgresql_front_refuses_it_with_that_message_bound_or_not(pg):
    psycopg = pytest.importorskip("psycopg")
    port, tokens, _ = pg
    with psycopg.connect(host="127.0.0.1", port=port, user="bob", password=tokens["bob"], dbname="protab",
                         autocommit=True) as conn:
        with pytest.raises(psycopg.errors.SyntaxErrorOrAccessRuleViolation) as simple:
            conn.execute(SQL.format(literal="$$R1$$"))
        bound_sql = "SELECT sex, count(*) AS n FROM persons WHERE region = $$R1$$ AND agegroup = %s GROUP BY sex"
        with pytest.raises(psycopg.errors.SyntaxErrorOrAccessRuleViolation) as bound:
            conn.execute(bound_sql, ["a0-4"])
        for info in (simple, bound):
            assert info.value.diag.message_primary.startswith("$$R1$$ is a PostgreSQL dollar-quoted string")
            assert info.value.diag.message_detail == "rule: allowed_form"
        assert conn.execute(SQL.format(literal="'R1'")).fetchall()  # the literal it advises is answered
