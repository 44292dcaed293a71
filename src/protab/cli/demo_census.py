"""``protab demo``: a synthetic census and business register generated in SQL
(sql/demo_population.sql: persons in households on a 1 km grid, and firms), keyed, with an
installed p-table, and four tables protected by the cell key method into an output folder.
Its database is what the README's examples read."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from protab.cli.options import DB_HELP, DEFAULT_DATABASE, DEFAULT_OUTPUT, FORMATS
from protab.cli.protect_tables import protect_one, summary, write_all
from protab.cli.words import say
from protab.errors import InputError

DEMO_TABLES = ("municipality_sex_agegroup", "grid_sex", "region_agegroup_weighted",
               "municipality_agegroup_plus_sex")
#: the microdata tables the demo writes (and refuses to replace without ``replace``)
DEMO_SOURCES = ("persons", "firms")
#: one firm per this many persons (at least one firm)
PERSONS_PER_FIRM = 12


def add_parser(sub: Any) -> None:
    """``protab demo``."""
    d = sub.add_parser("demo", help="generate a synthetic census and protect four tables",
                       description="Generate a synthetic census in SQL into a DuckDB file, add record keys, "
                                   "install a p-table and protect four tables by the cell key method.")
    d.add_argument("--persons", type=int, default=1_000_000, help="population size (default 1,000,000)")
    d.add_argument("--db", default=DEFAULT_DATABASE, help=DB_HELP)
    d.add_argument("--out", default=DEFAULT_OUTPUT, help=f"output folder (default {DEFAULT_OUTPUT})")
    d.add_argument("--seed", default="protab-demo-seed",
                   help="record-key seed of the synthetic data (demo only; real seeds: protab keys)")
    d.add_argument("--replace", action="store_true",
                   help="replace a persons table or installed p-table the database holds already")
    d.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> None:
    demo(args.persons, args.db, args.out, args.seed, replace=args.replace)


def demo(persons: int, database: str, out: str, seed: str, formats: Sequence[str] = FORMATS,
         replace: bool = False) -> list[dict[str, Any]]:
    """Generate a synthetic census (``persons``) and business register (``firms``, one firm per
    12 persons) in SQL, key both (the firms with the seed followed by ``/firms``, so that a firm
    and a person of the same id get unrelated keys), protect four tables of persons by the cell
    key method."""
    from protab._io import check_output_folder, database_files, refuse_replacing
    from protab._progress import track
    from protab.ptable import PTable
    from protab.session import Session
    from protab.table import TableSpec

    if isinstance(persons, bool) or not isinstance(persons, int) or persons < 1:
        raise InputError("--persons must be a whole number of at least 1")
    if persons > 2_000_000_000:
        raise InputError("--persons must be at most 2,000,000,000")
    out_dir = check_output_folder(out, [f"{t}.{f}" for t in DEMO_TABLES for f in formats])
    refuse_replacing(out, [(p, f"the demo's database {database!r}") for p in database_files(database)],
                     "demo: --out", "give the tables a folder of their own (the folder is swapped in whole)")
    t0 = time.perf_counter()
    if not replace and database != ":memory:" and Path(database).is_file():
        _refuse_to_replace(database)
    firms = max(1, persons // PERSONS_PER_FIRM)
    with Session(database) as s:
        _generate(s, persons, firms, seed, database)
        h_mun = s.hierarchy_from_columns("persons", ["region", "municipality"])
        h_grid = s.hierarchy_from_columns("persons", ["grid10km", "grid1km"])
        ptable = PTable.maximum_entropy(D=5, V=3, js=2)
        s.install_ptable(ptable, table="persons")
        tables = {
            "municipality_sex_agegroup": TableSpec(
                {"municipality": h_mun, "sex": None, "agegroup": None}),
            "grid_sex": TableSpec({"grid1km": h_grid, "sex": None}, drop_empty=True),
            "region_agegroup_weighted": TableSpec(
                {"region": None, "agegroup": None}, weight="weight"),
            "municipality_agegroup_plus_sex": TableSpec(
                {"municipality": h_mun, "agegroup": None, "sex": None},
                formula="municipality*agegroup + municipality*sex"),
        }
        rows, frames = [], {}
        for name, spec in track(tables.items(), "protecting tables", total=len(tables), unit="table"):
            say(f"  protecting {name} …")
            frames[name], row = protect_one(s, name, "persons", spec, ptable)
            rows.append(row)
    write_all(frames, out_dir, formats)
    say(f"done in {time.perf_counter() - t0:.1f} s")
    print(f"protab demo: {persons:,} persons and {firms:,} firms, {len(rows)} tables protected by the cell key method")
    print(summary(rows))
    print(f"protected tables written to {out}/ as {', '.join(formats)}")
    print(f"the microdata (persons, firms), record keys and p-table are in {database} "
          "(query it with the duckdb CLI: SELECT sex, ckm(count(*), sum(rkey)) FROM persons GROUP BY ALL)")
    return rows


def _refuse_to_replace(database: str) -> None:
    """The demo does not replace microdata or a p-table of an existing database unless told."""
    from protab.session import Session

    with Session(database, read_only=True, progress=False) as s:  # look, write nothing
        taken = [t for t in DEMO_SOURCES if s.exists(t)]
        installed = s.engine.rows("SELECT count(*) FROM protab_ptable")[0][0]
    if taken or installed:
        what = " and ".join(
            ([f"the table{'s' if len(taken) > 1 else ''} {' and '.join(map(repr, taken))}"] if taken else [])
            + (["an installed p-table"] if installed else [])
        )
        raise InputError(
            f"the database {database!r} holds {what} already; the demo would replace "
            "them: pass --replace to do so, or --db another file"
        )


def _generate(s: Any, persons: int, firms: int, seed: str, database: str) -> None:
    """persons and firms from sql/demo_population.sql in one transaction, then their record keys."""
    from protab.sqltools import sql_text

    say(f"protab demo: generating {persons:,} persons and {firms:,} firms in {database} "
         "(tables persons, firms) …")
    s.engine.execute(sql_text("demo_population.sql"))
    s.engine.execute("BEGIN TRANSACTION")
    try:
        s.engine.execute("CREATE OR REPLACE TABLE persons AS SELECT * FROM protab_demo_population(?)", [persons])
        s.engine.execute("CREATE OR REPLACE TABLE firms AS SELECT * FROM protab_demo_firms(?)", [firms])
        s.engine.execute("COMMIT")
    except BaseException:
        s.engine.execute("ROLLBACK")
        raise
    say("  adding record keys …")
    s.add_record_keys("persons", id_column="pid", seed=seed, bits=32, replace=True)
    s.add_record_keys("firms", id_column="fid", seed=f"{seed}/firms", bits=32, replace=True)
