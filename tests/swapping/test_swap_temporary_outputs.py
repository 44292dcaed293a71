"""All-or-nothing record swapping: swap(..., temporary=True) writes the swapped records and the log
as temporary tables of the connection (nothing in the database file), persist_swap keeps them
under their names in one transaction (honouring replace, keeping the record-key comments), and
discard_swap or closing the connection leaves the database as it was."""

from __future__ import annotations

import duckdb
import pytest

from protab.errors import InputError
from protab.swapping import SwapSpec, discard_swap, persist_swap, swap

SEED = "not-a-real-secret-91aa"
POPULATION = """
CREATE TABLE persons AS SELECT i AS pid, i // 3 AS hid, ['R1', 'R2', 'R3'][(i // 3) % 3 + 1] AS region,
    ['R1', 'R2', 'R3'][(i // 3) % 3 + 1] || '-' || ((i // 3) % 5)::VARCHAR AS muni,
    ['a', 'b', 'c', 'd', 'e'][(i // 3 * 7) % 5 + 1] AS citizenship, ((i // 3) % 4)::VARCHAR AS hsize,
    ['F', 'M'][i % 2 + 1] AS sex
FROM range(1500) t(i)
"""
SPEC = SwapSpec(household="hid", geography=("region", "muni"), risk_variables=("citizenship", "sex"),
                similar=[("hsize",)], swap_rate=0.05)


@pytest.fixture()
def db(tmp_path):
    path = str(tmp_path / "s.duckdb")
    with duckdb.connect(path) as con:
        con.execute(POPULATION)
    return path


def kept(con: duckdb.DuckDBPyConnection) -> set[tuple[str, str]]:
    """(database, table) of every table."""
    return {(r[0], r[1]) for r in con.execute("SELECT database_name, table_name FROM duckdb_tables()").fetchall()}


def reference(db: str, tmp_path) -> tuple[list, list]:
    """The out and log of a permanent swap of the same data and seed (in a copy of the file)."""
    with duckdb.connect(str(tmp_path / "ref.duckdb")) as con:
        con.execute(f"ATTACH '{db}' AS src (READ_ONLY)")
        con.execute("CREATE TABLE persons AS FROM src.persons")
        swap(con, "persons", SPEC, seed=SEED, out="persons_swapped", log="swap_log")
        return con.execute("FROM persons_swapped").fetchall(), con.execute("FROM swap_log").fetchall()


def test_temporary_swap_writes_nothing_to_the_database(db):
    with duckdb.connect(db) as con:
        name = con.execute("SELECT current_database()").fetchall()[0][0]
        swap(con, "persons", SPEC, seed=SEED, out="persons_swapped", log="swap_log", temporary=True)
        assert kept(con) == {(name, "persons"), ("temp", "persons_swapped"), ("temp", "swap_log")}
        assert con.execute("SELECT count(*) FROM persons_swapped").fetchall() == [(1500,)]
    with duckdb.connect(db) as con:  # the temporary tables ended with the connection
        assert kept(con) == {(name, "persons")}


def test_persist_keeps_the_same_records_and_log_in_one_step(db, tmp_path):
    want = reference(db, tmp_path)
    with duckdb.connect(db) as con:
        swap(con, "persons", SPEC, seed=SEED, out="persons_swapped", log="swap_log", temporary=True)
        con.execute("COMMENT ON COLUMN persons_swapped.pid IS 'protab record key; modulus=1000'")
        persist_swap(con, "persons_swapped", "swap_log")
        assert {t for d, t in kept(con) if d == "temp"} == set()
    with duckdb.connect(db) as con:
        assert (con.execute("FROM persons_swapped").fetchall(), con.execute("FROM swap_log").fetchall()) == want
        comments = con.execute(
            "SELECT column_name, comment FROM duckdb_columns() WHERE table_name = 'persons_swapped' "
            "AND comment IS NOT NULL"
        ).fetchall()
        assert comments == [("pid", "protab record key; modulus=1000")]


def test_an_existing_table_is_replaced_only_with_replace(db):
    with duckdb.connect(db) as con:
        con.execute("CREATE TABLE persons_swapped AS SELECT 1 AS x")
        with pytest.raises(InputError, match="'persons_swapped' exists already; pass replace=True"):
            swap(con, "persons", SPEC, seed=SEED, out="persons_swapped", temporary=True)
        swap(con, "persons", SPEC, seed=SEED, out="persons_swapped", temporary=True, replace=True)
        # the permanent table stays until the swap is persisted
        assert con.execute("SELECT count(*) FROM s.main.persons_swapped").fetchall() == [(1,)]
        with pytest.raises(InputError, match="persist_swap: a table named 'persons_swapped' exists already"):
            persist_swap(con, "persons_swapped")
        assert con.execute("SELECT count(*) FROM temp.main.persons_swapped").fetchall() == [(1500,)]
        persist_swap(con, "persons_swapped", replace=True)
        assert con.execute("SELECT count(*) FROM s.main.persons_swapped").fetchall() == [(1500,)]
        assert ("temp", "persons_swapped") not in kept(con)


def test_a_failed_request_leaves_the_database_as_it_was(db):
    # the CLI's all-or-nothing: swap into temporary tables, a later table fails, discard
    with duckdb.connect(db) as con:
        before = kept(con)
        swap(con, "persons", SPEC, seed=SEED, out="persons_swapped", log="swap_log", temporary=True)
        discard_swap(con, "persons_swapped", "swap_log")
        assert kept(con) == before
        with pytest.raises(InputError, match="no temporary table named 'persons_swapped'"):
            persist_swap(con, "persons_swapped", "swap_log")
        assert kept(con) == before


class _FailOn:
    """A connection whose statements that contain ``text`` fail (a disk full, say)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, text: str) -> None:
        self.con, self.text = con, text

    def execute(self, sql: str, params=None):
        if self.text in sql:
            raise duckdb.IOException("no space left on device")
        return self.con.execute(sql, params)


def test_persist_is_one_transaction(db):
    with duckdb.connect(db) as con:
        before = kept(con)
        swap(con, "persons", SPEC, seed=SEED, out="persons_swapped", log="swap_log", temporary=True)
        with pytest.raises(duckdb.IOException):
            persist_swap(_FailOn(con, 'AS SELECT * FROM temp.main."swap_log"'), "persons_swapped", "swap_log")
        # neither table was kept; both temporary ones are still there to retry
        assert kept(con) == before | {("temp", "persons_swapped"), ("temp", "swap_log")}
        persist_swap(con, "persons_swapped", "swap_log")
        assert {t for d, t in kept(con) if d != "temp"} == {"persons", "persons_swapped", "swap_log"}


def test_temporary_must_be_a_bool(db):
    with duckdb.connect(db) as con, pytest.raises(InputError, match="temporary must be True or False"):
        swap(con, "persons", SPEC, seed=SEED, out="persons_swapped", temporary="yes")


def test_a_swap_kept_beside_a_pending_temporary_one_replaces_the_databases_table(db, tmp_path):
    """A permanent swap written while a temporary one of the same name is pending replaces the
    database's table (it used to drop the pending one and then fail: "already exists"); the
    pending one stays until discarded."""
    want = reference(db, tmp_path)
    with duckdb.connect(db) as con:
        name = con.execute("SELECT current_database()").fetchall()[0][0]
        swap(con, "persons", SPEC, seed=SEED, out="persons_swapped", log="swap_log")
        swap(con, "persons", SPEC, seed=SEED + "-other", out="persons_swapped", log="swap_log", temporary=True,
             replace=True)
        swap(con, "persons", SPEC, seed=SEED, out="persons_swapped", log="swap_log", replace=True)
        assert ("temp", "persons_swapped") in kept(con) and (name, "persons_swapped") in kept(con)
        discard_swap(con, "persons_swapped", "swap_log")
        assert (con.execute("FROM persons_swapped").fetchall(), con.execute("FROM swap_log").fetchall()) == want
