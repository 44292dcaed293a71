"""psql's ``\\d``, ``\\dt`` and ``\\d <dataset>`` on the PostgreSQL front answer with the
catalogue of the user's rights — the datasets as tables of schema public, a dataset's
dimensions as text columns and its measures as double precision — instead of refusing psql's
catalogue queries as joins. Other queries of pg_catalog and information_schema are refused with
a message that says what is answered (rule ``catalog``), and the service goes on.

The real service and the real psql (Debian's postgresql-client), as in test_serve_pgwire.py."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import serve_fixtures as F

pytestmark = pytest.mark.skipif(shutil.which("psql") is None, reason="psql (postgresql-client) is not installed")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    yield from F.serve(tmp_path_factory, lambda config: F.Server(config, pg=True), "psql_catalogue")


def _psql(served, user, command, *, rows=True):
    """psql -c ``command`` as ``user``: (return code, rows as lists of fields (or the whole text), stderr)."""
    server = served["server"]
    env = {"PGPASSWORD": served["tokens"][user], "PATH": "/usr/bin:/bin"}
    cmd = ["psql", "-h", "127.0.0.1", "-p", str(server.pg_port), "-U", user, "-d", "protab", "-X", "-c", command]
    if rows:
        cmd[-2:-2] = ["-A", "-t", "-F", "|"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=30)
    out = [line.split("|") for line in r.stdout.splitlines() if line] if rows else r.stdout
    return r.returncode, out, r.stderr


@pytest.mark.parametrize("command", ["\\d", "\\dt"])
def test_d_lists_the_datasets_of_the_users_rights(served, command):
    code, rows, err = _psql(served, "bob", command)
    assert code == 0, err
    assert rows == [["public", "households", "table", "protab"], ["public", "persons", "table", "protab"]]
    code, rows, err = _psql(served, "erin", command)  # rights to persons only
    assert code == 0 and rows == [["public", "persons", "table", "protab"]], err


def test_d_with_a_pattern_lists_the_datasets_it_matches(served):
    assert _psql(served, "bob", "\\dt pers*")[1] == [["public", "persons", "table", "protab"]]
    assert _psql(served, "bob", "\\dt public.house*")[1] == [["public", "households", "table", "protab"]]
    assert _psql(served, "bob", "\\dt other.*")[1] == []


def test_d_of_a_dataset_lists_its_dimensions_and_measures_with_types(served):
    code, text, err = _psql(served, "alice", "\\d persons", rows=False)
    assert code == 0, err
    assert 'Table "public.persons"' in text
    cols = [[f.strip() for f in line.split("|")][:2] for line in text.splitlines() if "|" in line][1:]
    # alice's rights: four dimensions and the measure income, not age or hours
    assert cols == [["region", "text"], ["municipality", "text"], ["sex", "text"], ["agegroup", "text"],
                    ["income", "double precision"]]
    code, text, err = _psql(served, "erin", "\\d persons", rows=False)  # dimensions only, no measure
    cols = [[f.strip() for f in line.split("|")][:2] for line in text.splitlines() if "|" in line][1:]
    assert code == 0 and cols == [["municipality", "text"], ["sex", "text"]], err


def test_d_of_a_dataset_outside_the_rights_is_not_found(served):
    code, text, err = _psql(served, "erin", "\\d households", rows=False)
    assert code == 1 and 'Did not find any relation named "households"' in err
    code, _, err = _psql(served, "bob", "\\d nosuch", rows=False)
    assert code == 1 and 'Did not find any relation named "nosuch"' in err


@pytest.mark.parametrize("sql", ["SELECT * FROM pg_catalog.pg_tables", "SELECT * FROM information_schema.tables",
                                 "\\l"])
def test_other_catalogue_queries_are_refused_saying_what_is_answered(served, sql):
    code, _, err = _psql(served, "bob", sql, rows=False)
    assert code == 1 and "catalogue queries (pg_catalog, information_schema) are answered only as psql's" in err
    assert "DETAIL:  rule: catalog" in err and "joins are not accepted" not in err
    code, rows, err = _psql(served, "bob", "SELECT sex, count(*) AS n FROM persons GROUP BY sex ORDER BY sex")
    assert code == 0 and [r[0] for r in rows] == ["F", "M"]  # the service goes on
