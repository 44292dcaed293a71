"""A real PostgreSQL server for the tests of the PostgreSQL engine (tests/postgres): initdb and
pg_ctl of Debian's postgresql package (`make postgres`) in a temporary folder, listening on
127.0.0.1 on a free port (its unix socket in that folder), stopped at the end. As root (CI) the
server runs as the package's ``postgres`` user (PostgreSQL refuses to run as root). Each test
module gets a database of its own whose default collation is ICU's en-US (not byte order), so
that an ordering that leaned on the database's locale would show."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest


def find_bindir() -> Path | None:
    """The folder of initdb and pg_ctl: Debian's newest /usr/lib/postgresql/N/bin, or PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    which = shutil.which("initdb")
    return Path(which).parent if which else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A running server: its port and the DSN of a new database."""

    def __init__(self, bindir: Path, root: Path, as_user: list[str]) -> None:
        self.bindir, self.root, self.as_user = bindir, root, as_user
        self.port = _free_port()
        self.data = root / "data"
        self._run("initdb", "-D", str(self.data), "-U", "protab", "--auth=trust", "-E", "UTF8",
                  "--locale=C.UTF-8")
        opts = f"-p {self.port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(root / "log"), "-o", opts, "-w", "start")

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run([*self.as_user, str(self.bindir / tool), *args], check=True, capture_output=True,
                       timeout=120)

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user=protab dbname={dbname}"

    def new_database(self) -> str:
        """The DSN of a new, empty database (ICU en-US collation where the server has ICU)."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.dsn(), autocommit=True) as con:
            try:
                con.execute(f"CREATE DATABASE {name} LOCALE_PROVIDER icu ICU_LOCALE 'en-US' "
                            "LOCALE 'C.UTF-8' TEMPLATE template0")
            except psycopg.Error:  # a server built without ICU
                con.execute(f"CREATE DATABASE {name}")
        return self.dsn(name)

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def start_server() -> Server:
    """A server in a new temporary folder; skipped when initdb is not installed."""
    pytest.importorskip("psycopg", reason="psycopg (in the dev extra) is not installed")
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("the PostgreSQL server (initdb, pg_ctl) is not installed (make postgres)")
    as_user: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="protab-pg-"))  # under /tmp: the postgres user can reach it
    if os.geteuid() == 0:
        import pwd

        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("the PostgreSQL server runs as the 'postgres' user, and there is none (make postgres)")
        os.chown(root, user.pw_uid, user.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    try:
        return Server(bindir, root, as_user)
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"could not start PostgreSQL: {exc.stderr.decode(errors='replace')}") from None


def duckdb_and_postgres(dsn: str, prepare):
    """The body of a module's ``engines`` fixture: a DuckDB Session in memory and a Session on
    the PostgreSQL database ``dsn``, each prepared by ``prepare(session)``; yields (duckdb,
    postgres) and closes both."""
    import protab as pt

    duck, pg = pt.Session(":memory:", progress=False), pt.Session.postgres(dsn)
    try:
        for s in (duck, pg):
            prepare(s)
        yield duck, pg
    finally:
        pg.close()
        duck.close()
