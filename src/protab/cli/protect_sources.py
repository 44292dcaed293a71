"""Where the tables of a protect request read their records: the records after targeted record
swapping ([swap], a temporary table until every table is written), or Spark tables and Parquet
files (``protect --engine spark``, in this process or through Spark Connect)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protab.cli.words import say
from protab.errors import InputError
from protab.request.swap_section import run_swap, swap_line

if TYPE_CHECKING:  # pragma: no cover
    from protab.session import Session


def spark_session(spark: dict[str, Any], cfg: dict[str, Any], db: str, base: Path) -> Session:
    """The Spark engine's session of ``protect --engine spark``: the request's sources as Spark
    tables or Parquet files, their record keys declared from the DuckDB database (catalog only)
    or from ``--spark-keys``. With [swap], its source is read so and its output is left to the
    swap (a view of the Spark session)."""
    from protab.session import Session

    s = Session.spark(_open_spark(spark))
    keys = _spark_keys(spark["keys"])
    data = Path(spark["data"]) if spark["data"] else base
    swapped = cfg["swap"]["out"] if "swap" in cfg else None
    sources = [cfg["swap"]["source"]] if "swap" in cfg else []
    sources += [t["source"] for t in cfg["tables"] if t["source"] != swapped]
    for source in dict.fromkeys(sources):
        if not s.exists(source):
            path = data / f"{source}.parquet"
            if not path.exists() and not spark.get("remote"):  # a Connect server reads its own files
                raise InputError(
                    f"protect --engine spark: source {source!r} is neither a Spark table nor the Parquet "
                    f"file {str(path)!r} (pass --spark-data FOLDER holding {source}.parquet)"
                )
            s.register(source, str(path))
        column, modulus = _keys_in_database(db, source) if keys is None else keys
        s.use_record_keys(source, column, modulus)
    return s


def spark_options(master: str | None, remote: str | None, data: str | None, keys: str | None) -> dict[str, Any]:
    """The Spark options of ``protect --engine spark``: a master (``--spark-master``) or a Spark
    Connect server (``--spark-remote``, else the ``SPARK_REMOTE`` environment variable), not both."""
    remote = remote or os.environ.get("SPARK_REMOTE") or None
    if master and remote:
        raise InputError(f"protect: --spark-master {master!r} and --spark-remote {remote!r} (or SPARK_REMOTE) "
                         "exclude each other: Spark runs locally or on a cluster by its master, or on a Spark "
                         "Connect server; give one")
    return {"master": master, "remote": remote, "data": data, "keys": keys}


def _open_spark(spark: dict[str, Any]) -> Any:
    """The SparkSession: a client of the Spark Connect server ``remote`` (it must answer within
    a few seconds), else one of the master (default ``local[*]``) in this process."""
    from protab.engines import remote_session, require_java, require_spark

    if spark.get("remote"):
        return remote_session(spark["remote"], "protect: --spark-remote")
    builder = require_spark().builder
    require_java()
    return (builder.master(spark["master"] or "local[*]").appName("protab protect")
            .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
            .config("spark.log.level", "ERROR").getOrCreate())


def _spark_keys(given: str | None) -> tuple[str, int] | None:
    """``--spark-keys COLUMN:MODULUS``, or None."""
    if given is None:
        return None
    column, _, modulus = str(given).rpartition(":")
    if not column or not modulus.isdigit() or int(modulus) < 2:
        raise InputError(f"--spark-keys must be COLUMN:MODULUS (e.g. rkey:4294967296), not {given!r}")
    return column, int(modulus)


def _keys_in_database(db: str, source: str) -> tuple[str, int]:
    """The record-key column and modulus of ``source`` as keyed in the DuckDB database."""
    from protab.session import Session

    with Session(db, read_only=True, progress=False) as d:
        if not d.exists(source):
            raise InputError(
                f"protect --engine spark: the database {db!r} has no table {source!r} to tell its "
                "record keys; pass --spark-keys COLUMN:MODULUS"
            )
        return d.record_key(source)


def swap(s: Session, cfg: dict[str, Any], base: Path) -> None:
    """The [swap] section (protab.request.swap_section), its summary said."""
    say(swap_line(run_swap(s, cfg, base), cfg))
