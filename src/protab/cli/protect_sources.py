"""Where the tables of a protect request read their records: the records after targeted record
swapping ([swap], a temporary table until every table is written), or Spark tables and Parquet
files (``protect --engine spark``, in this process or through Spark Connect)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
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

    s = Session.spark(open_spark(spark))
    keys = key_option(spark["keys"], "--spark-keys")
    data = str(spark["data"]) if spark["data"] else str(base)
    swapped = cfg["swap"]["out"] if "swap" in cfg else None
    sources = [cfg["swap"]["source"]] if "swap" in cfg else []
    sources += [t["source"] for t in cfg["tables"] if t["source"] != swapped]
    for source in dict.fromkeys(sources):
        if not s.exists(source):
            _register_parquet(s, source, data, remote=bool(spark.get("remote")), command=spark.get("command", "protect"))
        column, modulus = (keys_in_database(db, source, "spark", spark.get("command", "protect")) if keys is None
                           else keys)
        s.use_record_keys(source, column, modulus)
    return s


#: a URI's scheme as Spark's file systems name one (s3a://, abfss://, hdfs://, gs://, file://)
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def _register_parquet(s: Session, source: str, data: str, *, remote: bool, command: str) -> None:
    """``source`` as the Parquet file (or folder) ``<data>/<source>.parquet``: ``data`` a local
    folder, or a URI Spark reads (``s3a://``, ``abfss://``, ``hdfs://``, ``file://``, …), joined
    as text. A local path is checked here (not over Spark Connect: the server reads its own
    files); a URI by Spark when registered."""
    uri = _URI.match(data) is not None
    path = f"{data.rstrip('/')}/{source}.parquet" if uri else str(Path(data) / f"{source}.parquet")
    if not uri and not remote and not Path(path).exists():
        raise InputError(f"{command} --engine spark: source {source!r} is neither a Spark table nor the Parquet "
                         f"file {path!r} (pass --spark-data FOLDER or URI holding {source}.parquet)")
    s.register(source, path)  # a path Spark cannot read: the engine's InputError names it and Spark's reason


def spark_options(master: str | None, remote: str | None, data: str | None, keys: str | None,
                  conf: Sequence[str] = (), command: str = "protect") -> dict[str, Any]:
    """The Spark options of ``protect --engine spark``: a master (``--spark-master``) or a Spark
    Connect server (``--spark-remote``, else the ``SPARK_REMOTE`` environment variable), not both,
    and the settings of ``--spark-conf`` (:func:`spark_conf`); ``command`` names the command
    in messages."""
    remote = remote or os.environ.get("SPARK_REMOTE") or None
    if master and remote:
        raise InputError(f"{command}: --spark-master {master!r} and --spark-remote {remote!r} (or SPARK_REMOTE) "
                         "exclude each other: Spark runs locally or on a cluster by its master, or on a Spark "
                         "Connect server; give one")
    return {"master": master, "remote": remote, "data": data, "keys": keys, "conf": spark_conf(conf, command),
            "command": command}


#: a setting's name as Spark spells one: words joined by dots (spark.sql.shuffle.partitions)
_DOTTED = re.compile(r"[A-Za-z][\w-]*(\.[\w-]+)+")
_EXAMPLE = "e.g. --spark-conf spark.sql.shuffle.partitions=8"


def spark_conf(given: Sequence[str], command: str = "protect") -> dict[str, str]:
    """``--spark-conf KEY=VALUE`` (repeatable) as Spark settings, each key a ``spark.`` one given
    once. An error names the key, never the value (it may be a secret: a token, a password), nor
    a key that is no dotted name (it may be a secret given without its key)."""
    conf: dict[str, str] = {}
    for k, item in enumerate(given, 1):
        key, sep, value = str(item).partition("=")
        named = repr(key) if _DOTTED.fullmatch(key) else f"number {k} (not shown: no dotted setting name)"
        if not sep:
            raise InputError(f"{command}: --spark-conf {named} is not KEY=VALUE ({_EXAMPLE})")
        if not key.startswith("spark.") or not _DOTTED.fullmatch(key):
            hint = f"; did you mean 'spark.{key}'?" if _DOTTED.fullmatch(key) else ""
            raise InputError(f"{command}: --spark-conf key {named} is not a Spark setting: a key is spark.NAME, "
                             f"without spaces ({_EXAMPLE}){hint}")
        if not value:
            raise InputError(f"{command}: --spark-conf {key} has an empty value (an unset shell variable?)")
        if key in conf:
            raise InputError(f"{command}: --spark-conf {key} is given twice; give it once")
        conf[key] = value
    return conf


def open_spark(spark: dict[str, Any]) -> Any:
    """The SparkSession: a client of the Spark Connect server ``remote`` (it must answer within
    a few seconds), else one of the master (default ``local[*]``) in this process; with the
    settings of ``--spark-conf`` (over protab's own of the builder), then protab's recommended
    ones the user left unset (protab.engines.recommended_settings), named on stderr."""
    from protab.engines import recommended_settings, remote_session, require_java, require_spark, spark_refusal

    conf = spark.get("conf") or {}
    command = spark.get("command", "protect")
    if spark.get("remote"):
        session = remote_session(spark["remote"], f"{command}: --spark-remote", conf=conf)
    else:
        builder = require_spark().builder
        require_java()
        builder = (builder.master(spark["master"] or "local[*]").appName(f"protab {command}")
                   .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                   .config("spark.log.level", "ERROR"))
        for key, value in conf.items():
            builder = builder.config(key, value)
        try:
            session = builder.getOrCreate()
        except Exception as exc:  # a value Spark refuses (spark.sql.shuffle.partitions=abc): named by its key
            refusal = spark_refusal(exc, conf, f"{command}: --spark-conf")
            if refusal is None:
                raise
            raise refusal from None
    filled = recommended_settings(session)
    if filled:
        say(f"{command} --engine spark: protab set " + ", ".join(f"{k}={v}" for k, v in filled.items())
            + " (left unset; --spark-conf KEY=VALUE sets your own)")
    return session


def key_option(given: str | None, flag: str) -> tuple[str, int] | None:
    """``--spark-keys`` or ``--pg-keys`` (``flag``) ``COLUMN:MODULUS``, or None."""
    if given is None:
        return None
    column, _, modulus = str(given).rpartition(":")
    if not column or not modulus.isdigit() or int(modulus) < 2:
        raise InputError(f"{flag} must be COLUMN:MODULUS (e.g. rkey:4294967296), not {given!r}")
    return column, int(modulus)


def keys_in_database(db: str, source: str, engine: str, command: str = "protect") -> tuple[str, int]:
    """The record-key column and modulus of ``source`` as keyed in the DuckDB database, for
    ``protect --engine spark`` or ``postgres`` (``engine``: its keys flag is named; ``command``
    names the command)."""
    from protab.session import Session

    flag = "--pg-keys" if engine == "postgres" else f"--{engine}-keys"
    with Session(db, read_only=True, progress=False) as d:
        if not d.exists(source):
            raise InputError(
                f"{command} --engine {engine}: the database {db!r} has no table {source!r} to tell its "
                f"record keys; pass {flag} COLUMN:MODULUS"
            )
        return d.record_key(source)


def swap(s: Session, cfg: dict[str, Any], base: Path) -> None:
    """The [swap] section (protab.request.swap_section), its summary said."""
    say(swap_line(run_swap(s, cfg, base), cfg))
