"""The PostgreSQL server of the tests of this folder (tests/postgres_fixtures.py): one per test
process, started on first use and stopped at the end; a database of its own per module."""

from __future__ import annotations

import pytest
from postgres_fixtures import start_server


@pytest.fixture(scope="session")
def pg_server():
    server = start_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def pg_dsn(pg_server) -> str:
    """The DSN of a new database for the module."""
    return pg_server.new_database()
