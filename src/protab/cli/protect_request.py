"""``protab protect`` and ``protab publish``: the tables of a TOML request protected and
written as CSV/Parquet files, or into a DuckDB file of protected tables only."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protab._io import check_output_file, check_output_folder, refuse_replacing
from protab._locks import output_lock
from protab.cli.engine_flags import ENGINE_OPTIONS, add_engine_options, check_engine_flags, engine_flags, engine_options
from protab.cli.options import DEFAULT_OUTPUT, FORMATS, output_file
from protab.cli.protect_checks import (
    OWN_FOLDER,
    check_names,
    check_publish_names,
    check_request,
    check_sources,
    database_path,
    read_request,
    request_inputs,
)
from protab.cli.protect_postgres import postgres_session
from protab.cli.protect_sources import spark_session, swap
from protab.cli.protect_tables import labelled, protect_tables, summary, table_labels, write_all
from protab.errors import InputError
from protab.request.swap_section import keep_swap

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

#: the engines of ``protect --engine``

PROTECT_FORMAT = """\
request file (TOML; paths in it are relative to the file; the keys every front shares and
include = ["shared.toml"] of shared sections: docs/vocabulary.md):

  include = ["office.toml"]           # optional: files of shared sections (docs/vocabulary.md)

  database = "protab.duckdb"          # optional (--db overrides)
  output = "protab_output"            # optional (--out overrides)
  formats = ["csv", "parquet"]        # optional: csv, parquet, sdmx-csv (<name>.sdmx.csv, SDMX-CSV
                                      # 2.0, dataflow PROTAB:<NAME>(1.0)), sdmx-structure
                                      # (<name>.structure.xml, its SDMX-ML 2.1 structure; needs
                                      # protab[sdmx]), json-stat (<name>.stat.json)
  label_columns = ["en"]              # optional: CSV/Parquet (and publish's) columns <dim>_label_<lang>
                                      # of the labels

  [ptable]                            # the cell key method's p-table: one of
  maximum_entropy = { D = 5, V = 3, js = 2 }   # optional pstay, mono, optim, infeasible = "warn"
  # file = "ptable.csv"               # format = "auto" | "ptable" | "tauargus" | "ons"

  [hierarchies.municipality]          # optional, one per hierarchical dimension; one of
  columns = ["region", "municipality"]  # code_lengths = [2, 3], hrc = "x.hrc",
                                        # parent_child = "x.csv", ssb_frame = "x.csv"; root = "Total";
                                        # grid = ["10km", "100km"] (INSPIRE codes, grid_form = "short")
                                        # optional labels = { en = { R1 = "North" } },
                                        # labels_file = "labels.csv" (code,label_en,…) and
                                        # name = { en = "Municipality" } (docs/vocabulary.md)
  [swap]                              # optional: targeted record swapping first (docs/swapping.md)
  source = "persons"                  #   writes the swapped records to table `out` of the database
  out = "persons_swapped"             #   (replace = true to overwrite), kept only when every table
                                      #   is protected and written; the tables may read it;
  household = "hid"                   #   log = "swap_log" keeps the (internal) swap log
  geography = ["region", "municipality"]
  risk_variables = ["agegroup", "sex"]
  similar = [["hsize"]]               #   optional similarity profiles, first preferred (default
                                      #   [[]]: any household of another area; docs/swapping.md)
  swap_rate = 0.05                    #   every risky household is swapped (the rate may end higher:
  max_swap_rate = 0.10                #   a warning says so); optional cap, riskiest first
  seed_env = "PROTAB_SWAP_SEED"       #   or seed_file = "swap.seed" (never the seed itself)
  [[tables]]                          # one per table
  name = "municipality_by_sex"        # output file name (plain, no path)
  source = "persons"                  # a keyed table of the database
  dims = ["municipality", "sex"]
  formula = "municipality*sex"        # optional; default: every crossing with all margins
  weight = "weight"                   # optional weighted counts
  drop_empty = false                  # optional: publish cells without records (default)
  null_code = "Unknown"               # optional: NULL codes as this category
  threshold = 3                       # optional: blank perturbed counts below this
  margins = false                     # optional: the flat crosstab alone (flat dims, no formula)
  method = "suppression"              # optional: cell suppression instead of the cell key method
  min_frequency = 3                   #   (suppression) counts 1..2 are primary; protect_zeros = true;
                                      #   freq = "count" for rows that are already aggregated
                                      #   adds empty cells; with sums the primary cells come from
                                      #   [rules]; suppressed cells are written empty (no [ptable]
                                      #   needed when every table is suppressed)
  direct_disclosure = ["diagnosis"]   #   (suppression, counts) cells holding all but `coalition`
  coalition = 1                       #   of their row along these dimensions (or true: all) are
  k_disclosure = 1                    #   primary; differences of k or less are protected
                                      #   (methods §6.4; min_frequency is then optional)
  suppression_method = "optimal"      #   optional: "gauss" (default, Gaussian elimination), the
  suppression_cost = "cells"          #   least-cost pattern "optimal" or "modular" (per subtable)
  time_limit = 600                    #   ("value" default, "frequency", "cells"); seconds for
                                      #   "optimal"/"modular" (then the best protecting pattern)
  sums = ["income"]                   # optional magnitudes: <sum>_pert, <sum>_mean_pert (needs
  null_sums = "zero"                  #   [magnitude]); NULL values: "error" (default), "zero", "omit"

  [magnitude]                         # the cell key method for sums (tables with sums)
  ptable = { maximum_entropy = { D = 10, V = 3, step = 2, icat = [1, 5, 10] } }
                                      # or { file = "num.csv", format = "r" | "argus" }
  # even = {…}  odd = {…}             # parity tables instead of ptable (top_k = 1)
  # small_cells = {…}                 # p-table below the separation point
  fp = 1000                           # flex point (without it: simple scaling, p one number)
  p = [0.25, 0.05]                    # p_small, p_large;  q = 3;  epsilon = [1, 0.5, 0.3]
  variant = "top_contr"               # or "mean", "range", "sum";  top_k = 3;  mu_c = 0
                                      # same_key = true;  zero_keys = false
  [rules]                             # optional sensitivity rules (<sum>_sensitive, <sum>_rule)
  min_frequency = 3                   # dominance = [[1, 80], [2, 90]];  p_percent = 10
                                      # pq = [10, 50];  zero = false;  holding = "enterprise"
                                      # convention = "gauss" | "argus";  weights = "default"

Unknown keys and values of the wrong type are errors. Every table is protected before any
file is written, and the output folder receives all tables at once (a killed run leaves it
as it was; the next run clears what it left). One run at a time writes an output folder: a
second run into it refuses at once, naming the first (--wait waits for it instead).
"""


def add_parsers(sub: Any) -> None:
    """``protab protect`` and ``protab publish``."""
    fmt = argparse.RawDescriptionHelpFormatter
    pr = sub.add_parser("protect", help="protect the tables of a TOML request file",
                        formatter_class=fmt, epilog=PROTECT_FORMAT,
                        description="Protect every table of a request and write them as CSV/Parquet: by the cell "
                                    "key method (counts, weighted counts, and sums by the cell key method for "
                                    "magnitudes, with optional sensitivity rules), or by cell suppression (method = "
                                    "\"suppression\"), optionally after targeted record swapping ([swap]).")
    pr.add_argument("request", help="the TOML request file")
    pr.add_argument("--db", help="DuckDB file (overrides the request's database)")
    pr.add_argument("--out", help="output folder (overrides the request's output)")
    add_engine_options(pr)
    pr.add_argument("--wait", action="store_true",
                    help="wait for another run writing the same output folder (default: refuse at once)")
    pr.set_defaults(run=_run_protect)

    pb = sub.add_parser("publish", help="protect a request's tables into a DuckDB file of protected tables only",
                        formatter_class=fmt,
                        description="Protect every table of a request (as `protab protect`) and write them into a "
                                    "new DuckDB database for analysts: protected tables and a view protab_catalog, "
                                    "no records, keys, p-table, originals or seeds. Written atomically.",
                        epilog="The request format: `protab protect --help`.")
    pb.add_argument("request", help="the TOML request file")
    pb.add_argument("--to", required=True, help="the DuckDB file to write (e.g. protected.duckdb)")
    pb.add_argument("--db", help="DuckDB file of the microdata (overrides the request's database)")
    pb.add_argument("--replace", action="store_true", help="replace the file if it exists")
    add_engine_options(pb)
    pb.add_argument("--wait", action="store_true",
                    help="wait for another run writing the same file (default: refuse at once)")
    pb.set_defaults(run=_run_publish)


def _run_protect(args: argparse.Namespace) -> None:
    protect(args.request, args.db, args.out, wait=args.wait, **engine_flags(args))


def _run_publish(args: argparse.Namespace) -> None:
    publish(args.request, args.to, args.db, replace=args.replace, wait=args.wait, **engine_flags(args))


def protect(
    request: str, database: str | None = None, out: str | None = None, *, engine: str = "duckdb",
    spark_master: str | None = None, spark_data: str | None = None, spark_keys: str | None = None,
    wait: bool = False, spark_remote: str | None = None, spark_conf: Sequence[str] = (),
    pg_dsn: str | None = None, pg_keys: str | None = None, pg_data: str | None = None,
) -> list[dict[str, Any]]:
    """Protect every table of a TOML request file (format: ``PROTECT_FORMAT``) and write them.

    The whole request is checked first (schema, file names, output folder, database, p-table,
    hierarchies); tables are written only after every one was protected, all at once. The run
    holds the output folder's lock (protab._locks) from before the first table: another run
    into it refuses at once, naming this one, or waits for it with ``wait=True``.

    ``engine="spark"`` runs the tables on Spark (docs/spark.md): each source is a Spark table
    of that name or the Parquet ``<spark_data>/<source>.parquet``; its record-key column and
    modulus come from the request's DuckDB database when it has the source keyed, else from
    ``spark_keys`` (``"COLUMN:MODULUS"``, e.g. ``"rkey:4294967296"``). ``spark_remote``
    (``sc://host:port``, default ``$SPARK_REMOTE``) runs them on a Spark Connect server instead
    of ``spark_master``. ``spark_conf`` (``"KEY=VALUE"`` strings, as ``--spark-conf``) are Spark
    settings of the session; protab's recommended ones (``spark.sql.adaptive.enabled`` …) fill
    in only what they leave unset, and are named on stderr. The output files are byte-identical
    to the DuckDB engine's on the same records.

    ``engine="postgres"`` runs them on the PostgreSQL database ``pg_dsn`` (default
    ``$PROTAB_PG_DSN``; docs/postgres.md): each source a table of that name, else the Parquet
    ``<pg_data>/<source>.parquet`` copied into a temporary table; record keys as for Spark
    (``pg_keys``). What the engine does not support yet (a float dimension, say) is its
    SpecError before any file is written. No message shows the DSN.
    """
    options = {"spark_master": spark_master, "spark_remote": spark_remote, "spark_data": spark_data,
               "spark_keys": spark_keys, "spark_conf": spark_conf, "pg_dsn": pg_dsn, "pg_keys": pg_keys,
               "pg_data": pg_data}
    check_engine_flags("protect", engine, options)
    path = Path(request)
    cfg = read_request(path)
    out_dir = Path(out) if out else path.parent / cfg.get("output", DEFAULT_OUTPUT)
    formats = cfg.get("formats", list(FORMATS))
    names = [t["name"] for t in cfg["tables"]]
    check_names(names)
    _check_exchange_ids(names, formats)
    check_output_folder(out_dir, [output_file(n, f) for n in names for f in formats])
    refuse_replacing(out_dir, request_inputs(path, cfg, database_path(path, cfg, database)),
                     "protect: the output folder", OWN_FOLDER)
    spark, pg = engine_options(engine, options)
    labels, languages = table_labels(cfg), cfg.get("label_columns", ())

    def write(frames: dict[str, pl.DataFrame]) -> None:
        write_all(frames, out_dir, formats, labels, languages)

    with output_lock((out_dir, "protect: the output folder"), command=f"protab protect {request}", wait=wait):
        rows = _protect_request(path, cfg, database, write, spark=spark, postgres=pg)
    print(summary(rows))
    print(f"protected tables written to {out_dir}/")
    return rows


def _check_exchange_ids(names: list[str], formats: list[str]) -> None:
    """SDMX-CSV, its structure and JSON-stat name each table's dataflow by its upper-case name:
    an SDMX id. A structure message needs the sdmx1 library (the extra named before any work)."""
    if "sdmx-structure" in formats:
        from protab.exchange import sdmx_library

        sdmx_library()
    if {"sdmx-csv", "sdmx-structure", "json-stat"} & set(formats):
        from protab.exchange import check_id

        for n in names:
            check_id(n.upper(), f"protect: table {n!r} (its SDMX dataflow id)")


def publish(request: str, to: str, database: str | None = None, *, replace: bool = False,
            wait: bool = False, engine: str = "duckdb", **flags: Any) -> list[dict[str, Any]]:
    """Protect the tables of a request (as ``protect``) into a new DuckDB database ``to``.

    The database holds the protected tables only (one table each, named as in the request, and
    a view ``protab_catalog`` of table names, cells and methods): no records, record keys,
    p-table, original values or seeds. A table is protect's Parquet table of the request, its
    ``label_columns`` included (``<dim>_label_<lang>`` after each labelled dimension). It is
    written beside ``to`` and renamed onto it when complete (atomic); an existing file is
    replaced only with ``replace=True``. The run holds the file's lock (protab._locks) from
    before the first table, as ``protect`` its folder's. ``engine`` and the engine ``flags``
    (``spark_master``, ``pg_dsn``, …) are protect's: the tables computed on Spark or PostgreSQL,
    the file the same.
    """
    from protab._io import atomic_path

    options = {k: flags.get(k) for k in ENGINE_OPTIONS}
    unknown = sorted(set(flags) - set(ENGINE_OPTIONS))
    if unknown:
        raise InputError(f"publish: unknown option {unknown[0]!r} (the engine options: {', '.join(ENGINE_OPTIONS)})")
    check_engine_flags("publish", engine, options)
    path = Path(request)
    cfg = read_request(path)
    check_publish_names([t["name"] for t in cfg["tables"]])
    target = check_output_file(to)  # the real file: through a symbolic link, the file it points to
    refuse_replacing(to, request_inputs(path, cfg, database_path(path, cfg, database)), "publish: --to",
                     "publish to a new file")
    methods = {t["name"]: t.get("method", "ckm") for t in cfg["tables"]}
    labels, languages = table_labels(cfg), cfg.get("label_columns", ())

    def write(frames: dict[str, pl.DataFrame]) -> None:
        with atomic_path(target) as tmp:
            os.unlink(tmp)  # DuckDB creates the file itself
            _write_database(str(tmp), {n: labelled(f, labels[n], languages) for n, f in frames.items()}, methods)

    with output_lock((target, "publish: the file"), command=f"protab publish {request} --to {to}", wait=wait):
        if target.exists() and not replace:  # under the lock: two runs cannot both find it missing
            raise InputError(f"publish: {to!r} exists; pass --replace to replace it")
        rows = _protect_request(path, cfg, database, write, *engine_options(engine, options, "publish"))
    print(summary(rows))
    print(f"protected tables published to {target} (open it with duckdb; it holds protected tables only)")
    return rows


def _write_database(path: str, frames: dict[str, pl.DataFrame], methods: dict[str, str]) -> None:
    """The protected frames as tables of a new DuckDB file (a storage format DuckDB 1.2+ reads),
    written through a :class:`~protab.engines.DuckDBEngine` on that file."""
    import duckdb

    from protab.engines import DuckDBEngine
    from protab.sqltools import quote_ident

    eng = DuckDBEngine(duckdb.connect(path, config={"storage_compatibility_version": "v1.2.0"}))
    try:
        eng.execute("BEGIN")
        for name, frame in frames.items():
            reg = "_protab_publish_frame"
            eng.register(reg, frame.to_arrow())
            eng.execute(f"CREATE TABLE {quote_ident(name)} AS SELECT * FROM {reg}")
            eng.unregister(reg)
        eng.execute("CREATE TABLE protab_published (table_name VARCHAR, cells BIGINT, method VARCHAR)")
        for n, f in frames.items():
            eng.execute("INSERT INTO protab_published VALUES (?, ?, ?)", [n, f.height, methods[n]])
        eng.execute("CREATE VIEW protab_catalog AS SELECT * FROM protab_published ORDER BY table_name")
        _record_run(eng, list(frames))
        eng.execute("COMMIT")
        eng.execute("CHECKPOINT")
    finally:
        eng.close()


def _record_run(eng: Any, names: list[str]) -> None:
    """The run's fingerprint (protab._run_manifest): table protab_run, one row per table with the
    run id, protab version, time and the digest of the table as written (read back)."""
    from protab._run_manifest import RUN_TABLE, new_run, table_digest
    from protab.sqltools import quote_ident

    run = new_run("publish")
    eng.execute(f"CREATE TABLE {RUN_TABLE} (run_id VARCHAR, protab_version VARCHAR, created VARCHAR, "
                "table_name VARCHAR, sha256 VARCHAR)")
    for n in names:
        digest = table_digest(eng.frame(f"SELECT * FROM {quote_ident(n)}"))
        eng.execute(f"INSERT INTO {RUN_TABLE} VALUES (?, ?, ?, ?, ?)",
                    [run["run_id"], run["protab_version"], run["created"], n, digest])


def _protect_request(
    path: Path, cfg: dict[str, Any], database: str | None,
    write: Callable[[dict[str, pl.DataFrame]], None], spark: dict[str, Any] | None = None,
    postgres: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Protect every table of a checked request, then ``write`` the frames; all or nothing. With
    [swap] the swapped records are a temporary table of the session until every table was
    protected and written, and only then kept in the database (a failure leaves it as it was)."""
    from protab.session import Session

    db = database_path(path, cfg, database)
    methods = check_request(path, cfg, db, spark or postgres)
    if spark is not None:
        opened = spark_session(spark, cfg, db, path.parent)
    elif postgres is not None:
        opened = postgres_session(postgres, cfg, db, path.parent)
    else:  # protect only reads, unless it swaps
        opened = Session(db) if "swap" in cfg else Session(db, read_only=True)
    with opened as s:
        if "swap" in cfg:
            swap(s, cfg["swap"], path.parent)
        check_sources(s, cfg["tables"], db)
        frames, rows = protect_tables(s, cfg, path.parent, methods, f"request {str(path)!r}")
        write(frames)
        if "swap" in cfg:
            keep_swap(s, cfg["swap"])
    return rows
