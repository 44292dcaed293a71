"""Where the tables of ``protect --engine postgres`` read their records: tables of the
PostgreSQL database of ``--pg-dsn`` (or ``$PROTAB_PG_DSN``) by name, else the Parquet files
``<pg-data>/<source>.parquet`` copied into TEMP tables of the session (the database is only
read); their record keys from the request's DuckDB database or ``--pg-keys``. The DSN may hold
a password: no message here shows it (the engine names host, port and database)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protab.cli.protect_sources import key_option, keys_in_database
from protab.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from protab.session import Session

#: the environment variable of the DSN when ``--pg-dsn`` is not given
PG_DSN_ENV = "PROTAB_PG_DSN"


def postgres_options(dsn: str | None, keys: str | None, data: str | None, command: str = "protect") -> dict[str, Any]:
    """The PostgreSQL options of ``protect --engine postgres``: the DSN of ``--pg-dsn``, else of
    ``$PROTAB_PG_DSN`` (one of them is needed), ``--pg-keys`` and ``--pg-data``."""
    dsn = dsn or os.environ.get(PG_DSN_ENV) or None
    if dsn is None or not dsn.strip():
        raise InputError(f"{command} --engine postgres needs the database: pass --pg-dsn DSN or set {PG_DSN_ENV} "
                         "(a libpq connection string, e.g. 'host=db.example port=5432 dbname=census user=protab', "
                         "or a postgresql:// URI; the password best from PGPASSWORD or ~/.pgpass)")
    key_option(keys, "--pg-keys")  # checked before any connection
    return {"dsn": dsn, "keys": keys, "data": data, "command": command}


def postgres_session(pg: dict[str, Any], cfg: dict[str, Any], db: str, base: Path) -> Session:
    """The PostgreSQL engine's session of ``protect --engine postgres``: each source a table (or
    view) of the database, else its Parquet file copied into a TEMP table; the record keys
    declared from the DuckDB database (catalog only) or ``--pg-keys``. With [swap] its source
    is read so (the engine refuses the swap itself). Closed again if a source fails."""
    from protab.session import Session

    s = Session.postgres(pg["dsn"])
    try:
        keys = key_option(pg["keys"], "--pg-keys")
        data = Path(pg["data"]) if pg["data"] else base
        swapped = cfg["swap"]["out"] if "swap" in cfg else None
        sources = [cfg["swap"]["source"]] if "swap" in cfg else []
        sources += [t["source"] for t in cfg["tables"] if t["source"] != swapped]
        for source in dict.fromkeys(sources):
            if not s.exists(source):
                _copy_parquet(s, source, data, pg.get("command", "protect"))
            column, modulus = (keys_in_database(db, source, "postgres", pg.get("command", "protect")) if keys is None
                               else keys)
            s.use_record_keys(source, column, modulus)
    except BaseException:
        s.close()
        raise
    return s


def _copy_parquet(s: Session, source: str, data: Path, command: str) -> None:
    """``<data>/<source>.parquet`` read by an in-process DuckDB (DuckDB's types, as
    ``Session.register`` reads a file) and copied into the TEMP table ``source`` of the
    session: gone when it closes, nothing written to the database."""
    import duckdb

    from protab.sqltools import quote_ident

    path = data / f"{source}.parquet"
    if not path.is_file():
        raise InputError(f"{command} --engine postgres: source {source!r} is neither a table of {s.database} nor the "
                         f"Parquet file {str(path)!r} (pass --pg-data FOLDER holding {source}.parquet)")
    try:
        with duckdb.connect() as reader:
            rows = reader.read_parquet(str(path)).to_arrow_table()
    except duckdb.Error as exc:
        raise InputError(f"{command} --engine postgres: cannot read {str(path)!r}: {exc}") from None
    s.engine.register(quote_ident(source), rows)
