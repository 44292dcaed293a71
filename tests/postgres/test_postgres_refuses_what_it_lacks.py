"""The PostgreSQL engine's own behaviour: a DSN that does not connect, a table without record
keys, options of other engines, and what it does not support yet (the
ckm() macro, list pieces it does not render) — each one protab error
that says what to do, before any work (never a psycopg traceback, never another table)."""

from __future__ import annotations

import warnings

import polars as pl
import pytest

import protab as pt
from protab.errors import InputError, SpecError

RECORDS = pl.DataFrame({"pid": [1, 2, 3, 4, 5, 6], "sex": ["f", "m", "f", "m", "f", "f"],
                        "hh": [1, 1, 2, 2, 3, 3], "v": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                        "x": [0.5, 1.5, 0.5, 1.5, 0.5, 0.5]})
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    P = pt.PTable.maximum_entropy(D=2, V=1.0)


@pytest.fixture(scope="module")
def pg(pg_dsn):
    with pt.Session.postgres(pg_dsn) as s:
        s.register("t", RECORDS)
        s.add_record_keys("t", id_column="pid", seed="refusals")
        yield s


def test_a_dsn_that_fails_names_host_and_port_not_the_password(pg_server):
    from postgres_fixtures import _free_port

    port = _free_port()  # nothing listens there
    with pytest.raises(InputError) as info:
        pt.Session.postgres(f"host=127.0.0.1 port={port} user=protab password=s3cret-pw dbname=x")
    message = str(info.value)
    assert f"host 127.0.0.1, port {port}" in message and "check that the server runs" in message
    assert "s3cret-pw" not in message and info.value.__cause__ is None


def test_a_database_that_does_not_exist_is_named(pg_server):
    with pytest.raises(InputError, match="database nowhere_db.*database exists"):
        pt.Session.postgres(pg_server.dsn("nowhere_db"))


def test_an_option_of_another_engine_is_refused_by_name(pg_dsn):
    with pytest.raises(InputError, match="takes no option 'memory_limit'.*options accepted by the postgres engine: 'dsn'"):
        pt.Session.postgres(pg_dsn, memory_limit="1GB")


def test_a_table_without_record_keys_is_refused(pg):
    pg.register("nokeys", RECORDS, replace=True)
    with pytest.raises(InputError, match="nokeys"):
        pg.cell_key("nokeys", pt.TableSpec({"sex": None}), P)


def test_record_keys_are_remembered_by_the_engine(pg):
    assert pg.engine.key_tag("t") == ("rkey", 2**32)
    assert "t" in pg.tables() and pg.columns("t")["rkey"] == "BIGINT"


def test_a_list_piece_postgres_lacks_is_refused_by_name(pg):
    """What the list rewriting does not render is a SpecError, never other SQL."""
    with pytest.raises(SpecError, match="arg_max.* FILTER .* not supported on the PostgreSQL engine"):
        pg.engine.rows("SELECT arg_max(pid, v, 2) FILTER (WHERE v > 0) FROM t")
    with pytest.raises(SpecError, match="list index below 1"):
        pg.engine.rows("SELECT [1, 2][-1]")
    with pytest.raises(SpecError, match="structs of fields"):
        pg.engine.rows("SELECT {'q': 1}")


def test_a_float_dimension_is_refused(pg):
    with pytest.raises(SpecError, match="'x' of type DOUBLE is not supported on the PostgreSQL engine yet"):
        pg.tabulate("t", pt.TableSpec({"x": None}))


def test_a_server_limit_is_an_input_error_that_says_what_to_raise(pg):
    pg.engine.con.execute("SET statement_timeout = '50ms'")
    try:
        with pytest.raises(InputError, match="could not finish this request .*statement_timeout"):
            pg.engine.rows("SELECT pg_sleep(2)")
    finally:
        pg.engine.con.execute("RESET statement_timeout")
    assert pg.engine.rows("SELECT 1") == [(1,)]
