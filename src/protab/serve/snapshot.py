"""The service's own copy of the microdata: a snapshot taken at start-up, so that a running
service holds no lock on the office's database file.

DuckDB locks a database file for as long as a connection has it open, even read-only: a service
on the file itself would stop ``protab keys``, ``protab protect`` or ``protab programme`` from
opening it to write. So at start-up the service attaches the database read-only for a moment,
copies the tables its datasets read (each with its record keys' tag) into a DuckDB file of its
state folder (``snapshot-<id>.duckdb``), detaches it and serves from the copy: the service
answers from the data as of its start (a restart picks up new data), and the ETag fingerprint
follows the source's identity as it was when copied. The copy is removed when the service stops;
one left by a killed service is removed at the next start (its lock, ``snapshot-<id>.lock``,
held with ``flock`` while the service runs, is then free).

A database written by ``protab publish`` holds protected tables, not microdata: the service
refuses it at start-up, saying what to do instead.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protab.errors import InputError, SpecError, show_values
from protab.sqltools import quote_ident

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: a snapshot of a killed run stays
    fcntl = None  # type: ignore[assignment]

PREFIX = "snapshot-"
#: the table `protab publish` writes beside the protected tables (with the view protab_catalog)
PUBLISHED = "protab_published"
_SOURCE = "protab_source"
_KEY_TAG = "protab record key; modulus="


def identity(path: str) -> list[Any]:
    """The identity of a file (path, device, inode, size, modification time), or [path, None]."""
    try:
        st = os.stat(path)
    except OSError:
        return [path, None]
    return [path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _held(lock: Path) -> bool:
    """Whether a running service holds the ``flock`` of ``lock``."""
    if fcntl is None:
        return True
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def files_of(folder: Path, ident: str) -> list[Path]:
    """The files of snapshot ``ident`` in ``folder``: the copy, its write-ahead log, its lock."""
    base = f"{PREFIX}{ident}"
    return [folder / f"{base}.duckdb", folder / f"{base}.duckdb.wal", folder / f"{base}.lock"]


def remove_dead(folder: Path) -> list[Path]:
    """Remove the snapshots of services that are gone (their lock is free); the files removed."""
    gone: list[Path] = []
    idents = {p.name[len(PREFIX):].split(".", 1)[0] for p in folder.glob(f"{PREFIX}*")}
    for ident in sorted(idents):
        if _held(folder / f"{PREFIX}{ident}.lock"):
            continue
        for p in files_of(folder, ident):
            if p.exists():
                p.unlink()
                gone.append(p)
    return gone


def live(folder: Path) -> bool:
    """Whether a running service holds a snapshot in ``folder``."""
    return any(_held(p) for p in folder.glob(f"{PREFIX}*.lock"))


@dataclass
class Snapshot:
    """The file the broker's sessions open (``path``), copied from ``source`` whose identity at
    that moment is ``source_identity``; :meth:`close` removes the copy."""

    path: str
    source: str
    source_identity: list[Any]
    _files: list[Path] = field(default_factory=list, repr=False)
    _fd: int = field(default=-1, repr=False)

    def close(self) -> None:
        """Remove the copy and release its lock (idempotent)."""
        for p in self._files:
            p.unlink(missing_ok=True)
        self._files = []
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def take(database: str, folder: Path, tables: Mapping[str, str]) -> Snapshot:
    """A snapshot of ``database`` in ``folder`` holding ``tables`` (table → the config key that
    names it, for messages). ``:memory:`` is not copied. SpecError for a table that is missing or
    a database written by ``protab publish``; InputError when the database cannot be read."""
    if database == ":memory:":
        return Snapshot(database, database, [database, secrets.token_hex(16)])
    if not os.path.isfile(database):
        raise InputError(f"cannot open the DuckDB database {database!r}: no such file")
    remove_dead(folder)
    ident = secrets.token_hex(8)
    copy, _, lock = files_of(folder, ident)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    snap = Snapshot(str(copy), database, [], files_of(folder, ident), fd)
    try:
        snap.source_identity = _copy(database, str(copy), tables)
    except BaseException:
        snap.close()
        raise
    return snap


def _copy(database: str, target: str, tables: Mapping[str, str]) -> list[Any]:
    """Copy ``tables`` of ``database`` into the new DuckDB file ``target`` (each with its
    record-key tag), the source attached read-only meanwhile; the source's identity then."""
    import duckdb

    from protab.engines import DuckDBEngine

    eng = DuckDBEngine(duckdb.connect(target))
    try:
        try:
            eng.execute(f"ATTACH ? AS {_SOURCE} (READ_ONLY)", [database])
        except duckdb.Error as exc:
            raise InputError(f"cannot read the database {database!r} to take the service's snapshot of it: "
                             f"{str(exc).splitlines()[0]} (a command writing it, such as protab keys, must "
                             "finish first)") from None
        seen = identity(database)  # while attached: no writer can change it meanwhile
        present = {str(n): str(k) for n, k in eng.rows(
            "SELECT table_name, 'table' FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main' "
            "UNION ALL SELECT view_name, 'view' FROM duckdb_views() WHERE database_name = ? "
            "AND schema_name = 'main' AND NOT internal", [_SOURCE, _SOURCE])}
        if PUBLISHED in present:
            raise SpecError(published_message(database, present))
        for table, key in tables.items():
            if table not in present:
                shown = sorted(n for n in present if not n.startswith(("protab_", "_protab")))
                raise SpecError(f"{key}: table {table!r} is not in the database {database!r} "
                                f"(tables: {show_values(shown, 10)})")
            src = f"{_SOURCE}.main.{quote_ident(table)}"
            eng.execute(f"CREATE TABLE main.{quote_ident(table)} AS SELECT * FROM {src}")
            for column, comment in eng.rows(
                    "SELECT column_name, comment FROM duckdb_columns() WHERE database_name = ? "
                    "AND schema_name = 'main' AND table_name = ? AND comment IS NOT NULL", [_SOURCE, table]):
                if str(comment).startswith(_KEY_TAG) and str(comment)[len(_KEY_TAG):].isdigit():
                    eng.tag_key_column(table, str(column), int(str(comment)[len(_KEY_TAG):]))
        eng.execute(f"DETACH {_SOURCE}")
        eng.execute("CHECKPOINT")
        return seen
    finally:
        eng.close()


def published_message(database: str, present: Mapping[str, str]) -> str:
    """Why the service does not serve a database of ``protab publish``, and what to do instead."""
    held = sorted(n for n in present if n != PUBLISHED and not n.startswith(("protab_", "_protab")))
    return (f"database {database!r} was written by protab publish: it holds protected tables "
            f"({show_values(held, 10)}), not microdata. The service protects microdata itself, from the "
            "records and their record keys: point `database` (or --db) at the microdata that protab publish "
            "read, or give the analysts the published file itself (open it with duckdb; it holds protected "
            "tables only and needs no service)")
