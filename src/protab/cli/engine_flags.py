"""The engine flags that protect, publish and programme share: ``--engine`` and the options of
the Spark engine (``--spark-…``, docs/spark.md) and of the PostgreSQL engine (``--pg-…``,
docs/postgres.md), each checked to belong to the engine chosen."""

from __future__ import annotations

import argparse
from typing import Any

from protab.cli.protect_postgres import PG_DSN_ENV, postgres_options
from protab.cli.protect_sources import spark_options
from protab.errors import InputError

#: the engines of the command line
ENGINES = ("duckdb", "spark", "postgres")


def add_engine_options(parser: Any) -> None:
    """``--engine`` and the options of the Spark and PostgreSQL engines (protect and publish)."""
    parser.add_argument("--engine", choices=ENGINES, default="duckdb",
                        help="where the tables are computed (spark: docs/spark.md; postgres: docs/postgres.md; same "
                         "output files)")
    parser.add_argument("--spark-master", help="Spark master URL for --engine spark (default local[*])")
    parser.add_argument("--spark-remote", help="Spark Connect server for --engine spark, sc://host:port (default: "
                                           "$SPARK_REMOTE; not with --spark-master)")
    parser.add_argument("--spark-data", help="folder or URI (s3a://, abfss://, hdfs://, file://, ...) of "
                                         "<source>.parquet files for --engine spark (default: the request's "
                                         "folder; Spark tables are used first)")
    parser.add_argument("--spark-keys", help="COLUMN:MODULUS of the record keys in the Parquet files "
                                         "(default: as keyed in the request's DuckDB database)")
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for --engine spark, e.g. spark.sql.shuffle.partitions=8 (repeatable; "
                         "yours win over protab's, which are named on stderr)")
    parser.add_argument("--pg-dsn", metavar="DSN",
                        help=f"the PostgreSQL database of --engine postgres: a libpq connection string or postgresql:// "
                         f"URI (default: ${PG_DSN_ENV}, which keeps it off the command line; never printed)")
    parser.add_argument("--pg-keys", metavar="COLUMN:MODULUS",
                        help="record keys of the sources for --engine postgres (default: as keyed in the request's "
                         "DuckDB database)")
    parser.add_argument("--pg-data", metavar="FOLDER",
                        help="folder of <source>.parquet files for --engine postgres, copied into temporary tables "
                         "(default: the request's folder; tables of the database are used first)")


def engine_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The engine options of ``protect``/``publish`` from their parsed arguments."""
    return {"engine": args.engine, "spark_master": args.spark_master, "spark_remote": args.spark_remote,
            "spark_data": args.spark_data, "spark_keys": args.spark_keys, "spark_conf": args.spark_conf,
            "pg_dsn": args.pg_dsn, "pg_keys": args.pg_keys, "pg_data": args.pg_data}


def check_engine_flags(command: str, engine: str, options: dict[str, Any]) -> None:
    """``--engine`` is a known engine and every engine flag given is one of its own (named)."""
    given = ["--" + k.replace("_", "-") for k, v in options.items() if v]
    if engine not in ENGINES:
        raise InputError(f"{command}: --engine must be duckdb, spark or postgres, not {engine!r}")
    if engine != "spark" and any(f.startswith("--spark-") for f in given):
        raise InputError(f"{command}: --spark-master, --spark-remote, --spark-data, --spark-keys and --spark-conf "
                         f"need --engine spark (given: {', '.join(f for f in given if f.startswith('--spark-'))}; "
                         f"the engine is {engine})")
    pg_flags = [f for f in given if f.startswith("--pg-")]
    if engine != "postgres" and pg_flags:
        raise InputError(f"{command}: {', '.join(pg_flags)} need{'s' if len(pg_flags) == 1 else ''} --engine "
                         f"postgres (the engine is {engine})")


def engine_options(engine: str, o: dict[str, Any], command: str = "protect"
                   ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The Spark and PostgreSQL options of a run of ``command`` on ``engine`` (None for the others)."""
    spark = (spark_options(o["spark_master"], o["spark_remote"], o["spark_data"], o["spark_keys"], o["spark_conf"],
                           command) if engine == "spark" else None)
    pg = postgres_options(o["pg_dsn"], o["pg_keys"], o["pg_data"], command) if engine == "postgres" else None
    return spark, pg


#: the engine options of protect and publish (their keyword arguments; --spark-…, --pg-… flags)
ENGINE_OPTIONS = ("spark_master", "spark_remote", "spark_data", "spark_keys", "spark_conf", "pg_dsn", "pg_keys",
                   "pg_data")
