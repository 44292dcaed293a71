"""``protab programme``: a census programme of hypercubes (docs/census.md) protected in one run
from one copy of the records, written all at once, resumable after a kill."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from protab.cli.engine_flags import add_engine_options, check_engine_flags, engine_flags, engine_options
from protab.cli.protect_postgres import postgres_session
from protab.cli.protect_sources import spark_session

PROGRAMME_FORMAT = """\
programme file (TOML; paths in it are relative to the file):

  database = "protab.duckdb"          # optional (--db overrides)
  output = "census_output"            # optional (--out overrides)
  formats = ["csv"]                   # optional: csv, parquet (a file per table), sdmx-csv,
                                      # sdmx-structure, json-stat (a file per hypercube)
  label_columns = ["en"]              # optional: CSV/Parquet columns <dim>_label_<lang> of the
                                      # classifications' labels (as protect's; docs/vocabulary.md)
  source = "persons"                  # the records (with [swap]: its source; may be left out)
  threshold = 3                       # optional: perturbed counts below it are published blank
  max_cells = 10000000                # optional: the default cell limit of a hypercube

  [ptable]                            # as protect's: one p-table for every hypercube
  maximum_entropy = { D = 5, V = 3, js = 2 }

  [swap]                              # optional, as protect's: the hypercubes read the swapped copy
  source = "persons"
  out = "persons_swapped"
  ...

  [classifications.geo]               # shared by name; as protect's hierarchies (columns,
  columns = ["region", "municipality"]  # code_lengths, hrc, parent_child, ssb_frame, grid), or
  levels = ["nuts2", "lau"]             # codes = [...] / flat = true; levels names levels 1, 2, ...
                                        # (default: the columns; a flat one: its own name);
                                        # labels, labels_file, name as protect's hierarchies
  [[hypercubes]]
  name = "HC01"                       # an SDMX id: [A-Za-z][A-Za-z0-9_]*
  dims = { municipality = "geo:nuts2", sex = "sex" }   # variable = "classification[:level]"
  max_cells = 100000                  # optional cell limit (every table, totals included)
  [[hypercubes.tables]]               # optional; default: one table, the whole hypercube
  name = "by_sex"
  dims = ["municipality", "sex"]      # optional: a subset of the hypercube's dims
  formula = "municipality*sex"        # optional; weight, drop_empty, null_code as protect's

Outputs: <hypercube>.<table>.<format> and summary.csv, written all at once. A killed run keeps
its finished hypercubes beside the output folder and the next run of the same programme on the
same records does not recompute them. One run at a time writes an output folder: a second run
into it refuses at once, naming the first (--wait waits for it instead).
"""


def add_parser(sub: Any) -> None:
    """``protab programme``."""
    pr = sub.add_parser("programme", help="protect a census programme of hypercubes (TOML file)",
                        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=PROGRAMME_FORMAT,
                        description="Protect every hypercube of a census programme by the cell key method from one "
                                    "copy of the records (swapped first with [swap]), so that a cell two hypercubes "
                                    "share has one value; write them all at once with a summary.")
    pr.add_argument("programme", help="the TOML programme file")
    pr.add_argument("--db", help="DuckDB file (overrides the programme's database)")
    pr.add_argument("--out", help="output folder (overrides the programme's output)")
    add_engine_options(pr)
    pr.add_argument("--wait", action="store_true",
                    help="wait for another run writing the same output folder (default: refuse at once)")
    pr.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> None:
    from protab.programme import Programme

    flags = engine_flags(args)
    engine = flags.pop("engine")
    check_engine_flags("programme", engine, flags)
    spark, pg = engine_options(engine, flags, "programme")
    base = Path(args.programme).parent

    def opener(sources: dict[str, Any], db: str) -> Any:
        """The session on the engine of the flags: its sources as protect's (Spark tables or
        PostgreSQL tables, else their Parquet files)."""
        if spark is not None:
            return spark_session(spark, sources, db, base)
        assert pg is not None  # the opener is used only with one of them
        return postgres_session(pg, sources, db, base)

    engine_session = opener if spark is not None or pg is not None else None
    Programme(args.programme).run(args.db, args.out, wait=args.wait, engine=engine_session)
