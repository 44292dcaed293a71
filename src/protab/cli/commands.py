"""The ``protab`` command: demo, tables, register, keys, ptable, protect, report.

Secrets stay off the command line where it matters: record-key seeds are read from an
environment variable or a file (``--seed-env``, ``--seed-file``), and no command prints a
seed, a record key or a p-table parameter. Heavy libraries are imported only by the command
that needs them, so ``protab --help`` answers at once.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protab._io import check_output_file, check_output_folder, read_toml, refuse_replacing
from protab.cli.demo import DEMO_TABLES, demo  # noqa: F401  (cli.demo, cli.DEMO_TABLES)
from protab.errors import InputError, ProtabError, SpecError
from protab.request import schema as _schema
from protab.request.loaders import hierarchy, load_magnitude, load_ptable, load_rules, reading

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from protab.ptable import PTable
    from protab.session import Session
    from protab.table import TableSpec

#: The database file commands use without ``--db`` (the same as ``protab.DEFAULT_DATABASE``).
DEFAULT_DATABASE = "protab.duckdb"
DEFAULT_OUTPUT = "protab_output"
FORMATS = ("csv", "parquet")

PROTECT_FORMAT = """\
request file (TOML; paths in it are relative to the file):

  database = "protab.duckdb"          # optional (--db overrides)
  output = "protab_output"            # optional (--out overrides)
  formats = ["csv", "parquet"]        # optional, csv and/or parquet

  [ptable]                            # the cell key method's p-table: one of
  maximum_entropy = { D = 5, V = 3, js = 2 }   # optional pstay, mono, optim, infeasible = "warn"
  # file = "ptable.csv"               # format = "auto" | "ptable" | "tauargus" | "ons"

  [hierarchies.municipality]          # optional, one per hierarchical dimension; one of
  columns = ["region", "municipality"]  # code_lengths = [2, 3], hrc = "x.hrc",
                                        # parent_child = "x.csv", ssb_frame = "x.csv"; root = "Total";
                                        # grid = ["10km", "100km"] (INSPIRE codes, grid_form = "short")
  [swap]                              # optional: targeted record swapping first (docs/swapping.md)
  source = "persons"                  #   writes the swapped records to table `out` of the database
  out = "persons_swapped"             #   (replace = true to overwrite), kept only when every table
                                      #   is protected and written; the tables may read it;
  household = "hid"                   #   log = "swap_log" keeps the (internal) swap log
  geography = ["region", "municipality"]
  risk_variables = ["agegroup", "sex"]
  similar = [["hsize"]]               #   similarity profiles, first preferred
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
as it was; the next run clears what it left).
"""


PTABLE_KINDS = """\
Count p-tables perturb frequencies (ckm() in SQL; [ptable] of a protect request). Numeric
(magnitude) p-tables perturb sums ([magnitude] of a protect request; R ptable's
create_num_ptable): noise on a grid of 1/step per ratio class i, of type all, even, odd or
small_cells. Layouts: ptable (R ptable's CSV; format = "r" in a request's [magnitude]),
tauargus (tau-ARGUS' ';' file; "argus"); ons holds count p-tables only.

show and convert tell the kinds apart: a file with integer noise and a row for every
original value is a count p-table; one with fractional noise, gaps between the classes or
a type even/odd/small_cells is numeric. --numeric refuses a count p-table; install refuses
a numeric one.

p-table parameters (D, V, js, pstay) are secrets of the office: no protected output, log
line or error message of protab shows them, and they are not to be published (the ESS
guidelines for census protection advise against publishing D). `show` prints them for the
office that holds the file (whoever can read the file can read them): keep its output internal.
"""

PTABLE_GENERATE = """\
examples:
  protab ptable generate --D 5 --V 3 --js 2 --out counts.csv
  protab ptable generate --numeric --D 10 --V 3 --step 2 --icat 1 5 10 --optim 4 1 1 \\
      --out sums.csv --format tauargus

--numeric takes --D, --V, --icat (required: the ratio classes, including 1 and D), --step,
--optim, --mono (true/false, one or one per class) and --type; not --js, --pstay or the ons
layout. Rows that cannot reach the variance V warn (see `protab ptable show`).
"""


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- protect: one table ---------------------------------------------------------------------
def _protect_one(
    s: Session, name: str, source: str, spec: TableSpec, ptable: PTable, threshold: float | None = None,
    magnitude: Any = None, rules: Any = None,
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Protect one table: the publishable frame (original values dropped) and its summary row."""
    from protab.measures import hellinger_utility, share_changed

    frame = s.cell_key(source, spec, ptable, original=True, threshold=threshold,
                       magnitude=magnitude if spec.sums else None, rules=rules if spec.sums else None)
    n = frame["n"].to_numpy()
    n_pert = frame["n_pert"].fill_null(0).to_numpy()
    row = {
        "table": name,
        "cells": frame.height,
        "changed": share_changed(n, n_pert),
        "method": "ckm",
        "hellinger_utility": hellinger_utility(n, n_pert) if n.sum() > 0 else None,
    }
    # originals, and the sensitivity verdicts (they tell which cells one contributor dominates)
    originals = ["n", "w"] + [c for v in spec.sums for c in (v, f"{v}_w", f"{v}_sensitive", f"{v}_rule")]
    return frame.drop([c for c in originals if c in frame.columns]), row


def _check_methods(tables: list[dict[str, Any]], cfg: dict[str, Any]) -> None:
    """The keys of each table fit its method (cell key method or cell suppression)."""
    for t in tables:
        name = t["name"]
        if t.get("method", "ckm") == "suppression":
            if "threshold" in t:
                raise SpecError(f"request: table {name!r}: threshold blanks perturbed counts; with "
                                "method = \"suppression\" use min_frequency")
            if t.get("sums"):
                if "rules" not in cfg:
                    raise SpecError(f"request: table {name!r} suppresses cells of sums: add a [rules] section")
                if "min_frequency" in t:
                    raise SpecError(f"request: table {name!r}: with sums the primary cells come from [rules] "
                                    "(min_frequency goes there)")
            elif "min_frequency" not in t:
                raise SpecError(f"request: table {name!r} (method = \"suppression\") needs min_frequency: "
                                "counts from 1 to min_frequency - 1 are suppressed")
        else:
            for key in ("min_frequency", "protect_zeros", "freq"):
                if key in t:
                    raise SpecError(f"request: table {name!r}: {key} belongs to method = \"suppression\"")
    by_source: dict[str, set[str]] = {}
    for t in tables:
        by_source.setdefault(t["source"], set()).add(t.get("method", "ckm"))
    mixed = sorted(src for src, methods in by_source.items() if len(methods) > 1)
    if mixed:
        raise SpecError(
            f"request: source {mixed[0]!r} has tables protected by the cell key method and tables "
            "suppressed: the suppressed ones publish exact values of cells the others perturb, which "
            "gives their noise away; protect all tables of one source by the same method"
        )
    for src in by_source:
        _check_linked([t for t in tables if t["source"] == src and t.get("method", "ckm") == "suppression"])
    if "ptable" not in cfg and any(t.get("method", "ckm") == "ckm" for t in tables):
        raise SpecError("request: needs a [ptable] section for the cell key method (tables without "
                        "method = \"suppression\")")


#: what the suppressed tables of one source must share, the kind of value first (a sums table
#: takes its primary cells from [rules], a count table from min_frequency: that is the conflict)
LINKED_KEYS = ("sums", "weight", "freq", "null_sums", "min_frequency", "protect_zeros")


def _check_linked(group: list[dict[str, Any]]) -> None:
    """The suppressed tables of one source are suppressed together (linked: a common cell gets one
    decision), so they must agree on what is suppressed and how: name the first key they differ on."""
    if not group:
        return
    defaults = {"sums": [], "null_sums": "error", "protect_zeros": False}
    for key in LINKED_KEYS:
        def value(t: dict[str, Any], key: str = key) -> str:
            return repr(t.get(key, defaults.get(key)))

        a = group[0]
        b = next((t for t in group if value(t) != value(a)), None)
        if b is not None:
            what = (" (a table of counts and a table of sums cannot be suppressed together: put them in "
                    "separate requests, or give both the same sums)" if key == "sums" else "")
            shown = (f": table {a['name']!r} has {_shown(a.get(key))}, table {b['name']!r} has {_shown(b.get(key))}"
                     if key in ("sums", "weight", "freq", "null_sums") else  # thresholds are not shown
                     f" (tables {a['name']!r} and {b['name']!r} differ)")
            raise SpecError(
                f"request: the suppressed tables of source {a['source']!r} are suppressed together (linked: a "
                f"common cell gets one decision), so they must agree on {key}{shown}{what}"
            )


def _shown(value: Any) -> str:
    return "none" if value is None or value == [] else repr(value)


def _suppress_all(
    s: Session, tables: list[dict[str, Any]], specs: list[TableSpec], rules: Any
) -> dict[str, tuple[pl.DataFrame, dict[str, Any]]]:
    """Suppress the tables of each source together, as linked tables (a cell common to two
    tables gets one decision, so that no table helps to disclose another's primary cell):
    per table its original values, null where suppressed (no labels: they would tell which
    cells are sensitive), and its summary row."""
    out: dict[str, tuple[pl.DataFrame, dict[str, Any]]] = {}
    for src in dict.fromkeys(t["source"] for t in tables):
        group = [(t, spec) for t, spec in zip(tables, specs) if t["source"] == src]
        t0, spec0 = group[0]
        frames = s.suppress(src, [spec for _, spec in group] if len(group) > 1 else spec0,
                            rules=rules if spec0.sums else None,
                            min_frequency=None if spec0.sums else t0["min_frequency"],
                            protect_zeros=t0.get("protect_zeros", False))
        if len(group) == 1:
            frames = [frames]
        for (t, spec), frame in zip(group, frames):
            out[t["name"]] = (frame.drop("suppressed"), _suppression_row(s, t, spec, frame))
    return out


def _suppression_row(s: Session, t: dict[str, Any], spec: TableSpec, frame: pl.DataFrame) -> dict[str, Any]:
    """The summary of a suppressed table: the share of its cells suppressed and the share of its
    value (the count, or the first sums variable) in suppressed cells, from the original table."""
    import polars as pl

    value = spec.sums[0] if spec.sums else "n"
    mask = frame["suppressed"] != "no"
    dims = [d.column for d in spec.dimensions]
    original = s.tabulate(t["source"], spec).select(*dims, pl.col(value).alias("_v"))
    v = frame.select(dims).join(original, on=dims, how="left", nulls_equal=True)["_v"].cast(pl.Float64).abs()
    total = float(v.sum())
    return {"table": t["name"], "cells": frame.height, "method": "suppression",
            "changed": float(mask.mean()) if frame.height else None, "value": value,
            "suppressed_value_share": float(v.filter(mask).sum()) / total if total > 0 else None,
            "hellinger_utility": None}


def _write_all(frames: dict[str, pl.DataFrame], out: Path, formats: Sequence[str]) -> None:
    """Write every table into ``out`` at once, after all were protected (see protab._io)."""
    from protab._io import frame_writer, write_batch

    write_batch(out, {f"{name}.{fmt}": frame_writer(frame, fmt)
                      for name, frame in frames.items() for fmt in formats})


def _summary(rows: list[dict[str, Any]]) -> str:
    """One line per table with the measures that apply to its method: for the cell key method
    the share of cells changed and the Hellinger utility; for suppression the share of cells
    and of the table's value suppressed. A measure without meaning (an empty table) is "-"."""
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.1%}"

    lines = [f"{'table':<34}{'cells':>10}  measures"]
    for r in rows:
        if r.get("method") == "suppression":
            text = (f"suppressed {pct(r['changed'])} of cells, {pct(r['suppressed_value_share'])} of the "
                    f"{'value' if r.get('value') == 'n' else repr(r.get('value'))}")
        else:
            h = r["hellinger_utility"]
            text = f"changed {pct(r['changed'])}, Hellinger utility {'-' if h is None else f'{h:.6f}'}"
        lines.append(f"{r['table']:<34}{r['cells']:>10,}  {text}")
    return "\n".join(lines)


# -- protect: a request file ----------------------------------------------------------------
def _require_database(db: str, hint: str = "") -> None:
    """Commands that read tables must not create an empty database file by mistake."""
    if db != ":memory:" and not Path(db).exists():
        raise InputError(
            f"the database {db!r} does not exist ({hint}create it with `protab register` or "
            "`protab demo`, or pass --db)"
        )
    if db != ":memory:" and Path(db).is_dir():
        raise InputError(f"the database {db!r} is a folder, not a DuckDB file")


def _request(path: Path, schema: _schema.Table) -> dict[str, Any]:
    if path.is_dir():
        raise SpecError(f"the request {str(path)!r} is a folder, not a TOML file")
    cfg = read_toml(path, SpecError)
    _schema.check(cfg, schema)
    return cfg


def protect(
    request: str, database: str | None = None, out: str | None = None, *, engine: str = "duckdb",
    spark_master: str | None = None, spark_data: str | None = None, spark_keys: str | None = None,
) -> list[dict[str, Any]]:
    """Protect every table of a TOML request file (format: ``PROTECT_FORMAT``) and write them.

    The whole request is checked first (schema, file names, output folder, database, p-table,
    hierarchies); tables are written only after every one was protected, all at once.

    ``engine="spark"`` runs the tables on Spark (docs/spark.md): each source is a Spark table
    of that name or the Parquet ``<spark_data>/<source>.parquet``; its record-key column and
    modulus come from the request's DuckDB database when it has the source keyed, else from
    ``spark_keys`` (``"COLUMN:MODULUS"``, e.g. ``"rkey:4294967296"``). The output files are
    byte-identical to the DuckDB engine's on the same records.
    """
    if engine not in ("duckdb", "spark"):
        raise InputError(f"protect: --engine must be duckdb or spark, not {engine!r}")
    if engine == "duckdb" and (spark_master or spark_data or spark_keys):
        raise InputError("protect: --spark-master, --spark-data and --spark-keys need --engine spark")
    path = Path(request)
    cfg = _request(path, _schema.PROTECT)
    out_dir = Path(out) if out else path.parent / cfg.get("output", DEFAULT_OUTPUT)
    formats = cfg.get("formats", list(FORMATS))
    names = [t["name"] for t in cfg["tables"]]
    _check_names(names)
    check_output_folder(out_dir, [f"{n}.{f}" for n in names for f in formats])
    refuse_replacing(out_dir, request_inputs(path, cfg, _database_path(path, cfg, database)),
                     "protect: the output folder", _OWN_FOLDER)
    spark = None if engine == "duckdb" else {"master": spark_master, "data": spark_data, "keys": spark_keys}
    rows = _protect_request(path, cfg, database, lambda frames: _write_all(frames, out_dir, formats), spark=spark)
    print(_summary(rows))
    print(f"protected tables written to {out_dir}/")
    return rows


def publish(request: str, to: str, database: str | None = None, *, replace: bool = False) -> list[dict[str, Any]]:
    """Protect the tables of a request (as ``protect``) into a new DuckDB database ``to``.

    The database holds the protected tables only (one table each, named as in the request, and
    a view ``protab_catalog`` of table names, cells and methods): no records, record keys,
    p-table, original values or seeds. It is written beside ``to`` and renamed onto it when
    complete (atomic); an existing file is replaced only with ``replace=True``.
    """
    from protab._io import atomic_path

    path = Path(request)
    cfg = _request(path, _schema.PROTECT)
    _check_publish_names([t["name"] for t in cfg["tables"]])
    target = check_output_file(to)  # the real file: through a symbolic link, the file it points to
    refuse_replacing(to, request_inputs(path, cfg, _database_path(path, cfg, database)), "publish: --to",
                     "publish to a new file")
    if target.exists() and not replace:
        raise InputError(f"publish: {to!r} exists; pass --replace to replace it")
    methods = {t["name"]: t.get("method", "ckm") for t in cfg["tables"]}

    def write(frames: dict[str, pl.DataFrame]) -> None:
        with atomic_path(target) as tmp:
            os.unlink(tmp)  # DuckDB creates the file itself
            _write_database(str(tmp), frames, methods)

    rows = _protect_request(path, cfg, database, write)
    print(_summary(rows))
    print(f"protected tables published to {target} (open it with duckdb; it holds protected tables only)")
    return rows


def _write_database(path: str, frames: dict[str, pl.DataFrame], methods: dict[str, str]) -> None:
    """The protected frames as tables of a new DuckDB file (a storage format DuckDB 1.2+ reads)."""
    import duckdb

    from protab._sql import quote_ident

    con = duckdb.connect(path, config={"storage_compatibility_version": "v1.2.0"})
    try:
        con.execute("BEGIN")
        for name, frame in frames.items():
            reg = "_protab_publish_frame"
            con.register(reg, frame.to_arrow())
            con.execute(f"CREATE TABLE {quote_ident(name)} AS SELECT * FROM {reg}")
            con.unregister(reg)
        con.execute("CREATE TABLE protab_published (table_name VARCHAR, cells BIGINT, method VARCHAR)")
        con.executemany("INSERT INTO protab_published VALUES (?, ?, ?)",
                        [[n, f.height, methods[n]] for n, f in frames.items()])
        con.execute("CREATE VIEW protab_catalog AS SELECT * FROM protab_published ORDER BY table_name")
        con.execute("COMMIT")
        con.execute("CHECKPOINT")
    finally:
        con.close()


_FILE_KEYS = ("file", "hrc", "parent_child", "ssb_frame", "seed_file")
_VIEW_FILE = re.compile(r"'((?:[^']|'')+)'")
_FILE_SUFFIX = re.compile(r"(\.(parquet|csv|tsv|json|ndjson|txt)(\.gz|\.zst)?|[*?\[].*)$", re.IGNORECASE)


def request_inputs(path: Path, cfg: dict[str, Any], db: str) -> list[tuple[str, str]]:
    """What no output of a request may replace, as (protected form, label): the microdata database
    and its write-ahead log, the request file, every file the request names (p-tables,
    hierarchies, seeds) and the files the database's views read (``protab register``)."""
    from protab._io import database_files, protected_form

    found = [(p, f"the microdata database {db!r}") for p in database_files(db)]
    found.append((protected_form(str(path)), f"the request file {str(path)!r}"))

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k in _FILE_KEYS and isinstance(v, str):
                    found.append((protected_form(str(path.parent / v)), f"the file of {where}{k} ({v!r})"))
                else:
                    walk(v, f"{where}{k}.")
        elif isinstance(node, list):
            for k, v in enumerate(node):
                walk(v, f"{where[:-1]}[{k}].")

    walk(cfg, "")
    return found + [(protected_form(f), f"the file {f!r} that a view of {db!r} reads") for f in view_files(db)]


def view_files(db: str) -> list[str]:
    """The files the views of a database read (``protab register`` makes views over files): every
    quoted name in a view's SQL that looks like a data file or a glob."""
    import duckdb

    if db == ":memory:" or not Path(db).is_file():
        return []
    try:
        with duckdb.connect(db, read_only=True) as con:
            texts = [r[0] for r in con.execute(
                "SELECT sql FROM duckdb_views() WHERE NOT internal AND NOT temporary").fetchall()]
    except duckdb.Error:  # open elsewhere, or not a database: the run itself will say so
        return []
    names = {m.replace("''", "'") for t in texts for m in _VIEW_FILE.findall(t or "")}
    return sorted(n for n in names if _FILE_SUFFIX.search(n))


_OWN_FOLDER = ("outputs are swapped in as a whole folder, so give them a folder of their own "
               "(e.g. output = \"protab_output\")")


def _check_names(names: list[str]) -> None:
    for n in names:
        if "/" in n or "\\" in n or n.startswith("."):
            raise SpecError(f"request: table name {n!r} is used as the output file name; use a plain name "
                            "(no path separators, not starting with a dot)")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SpecError(f"request: the table names {dup} appear more than once (they name the output files)")


_PUBLISH_RESERVED = ("protab_published", "protab_catalog")


def _check_publish_names(names: list[str]) -> None:
    """Table names of a published database: plain file names (as for protect), none of the names
    publish gives its own catalogue, and distinct without regard to case (DuckDB's names are not
    case-sensitive)."""
    _check_names(names)
    for n in names:
        if n.lower() in _PUBLISH_RESERVED:
            raise SpecError(f"request: table name {n!r} is taken: a published database names its catalogue "
                            f"{' and '.join(_PUBLISH_RESERVED)}; rename the table")
    lowered = [n.lower() for n in names]
    clash = sorted({n for n in names if lowered.count(n.lower()) > 1})
    if clash:
        raise SpecError(f"request: the table names {clash} differ only in case; a DuckDB database takes them as "
                        "one name, so rename one of them")


def _database_path(path: Path, cfg: dict[str, Any], database: str | None) -> str:
    """The microdata database of a request: ``--db``, else its ``database`` (relative to the
    request file), else the default file beside it."""
    if database is not None:
        return database
    db = cfg.get("database", DEFAULT_DATABASE)
    return db if os.path.isabs(db) or db == ":memory:" else str(path.parent / db)


def _protect_request(
    path: Path, cfg: dict[str, Any], database: str | None,
    write: Callable[[dict[str, pl.DataFrame]], None], spark: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Protect every table of a checked request, then ``write`` the frames; all or nothing. With
    [swap] the swapped records are a temporary table of the session until every table was
    protected and written, and only then kept in the database (a failure leaves it as it was)."""
    from protab.session import Session

    db = _database_path(path, cfg, database)
    methods = _check_request(path, cfg, db, spark)
    if spark is not None:
        opened = _spark_session(spark, cfg["tables"], db, path.parent)
    else:  # protect only reads, unless it swaps
        opened = Session(db) if "swap" in cfg else Session(db, read_only=True)
    with opened as s:
        if "swap" in cfg:
            _swap(s, cfg["swap"], path.parent)
        frames, rows = _protect_tables(s, cfg, db, path.parent, methods)
        write(frames)
        if "swap" in cfg:
            _keep_swap(s, cfg["swap"])
    return rows


def _check_request(path: Path, cfg: dict[str, Any], db: str, spark: dict[str, Any] | None) -> dict[str, Any]:
    """Every check of a request that needs no table built; the p-table, magnitude and rules."""
    if spark is not None and "swap" in cfg:  # the swap would change the DuckDB table, not what Spark reads
        raise SpecError("protect --engine spark: [swap] (record swapping) does not run on Spark yet; run the "
                        "request with the DuckDB engine, or swap with it first (`Session.swap`) and give Spark "
                        "the swapped records without a [swap] section")
    base, tables = path.parent, cfg["tables"]
    unused = sorted(set(cfg.get("hierarchies", {})) - {d for t in tables for d in t["dims"]})
    if unused:
        raise SpecError(f"request: [hierarchies.{unused[0]}] is not a dimension of any table (dims of the "
                        "[[tables]] entries); remove it or fix the name")
    if spark is None or spark["keys"] is None:
        _require_database(db, "paths in a request file are relative to the file; ")
    _check_methods(tables, cfg)
    ckm = [t for t in tables if t.get("method", "ckm") == "ckm"]
    with_sums = [t["name"] for t in ckm if t.get("sums")]
    if with_sums and "magnitude" not in cfg:
        raise SpecError(
            f"request: table {with_sums[0]!r} has sums, which are published only perturbed: add a "
            "[magnitude] section (the cell key method for magnitudes), or remove sums"
        )
    if "magnitude" in cfg and not with_sums:
        raise SpecError("request: [magnitude] applies to cell-key tables with sums; no such table")
    if "rules" in cfg and not any(t.get("sums") for t in tables):
        raise SpecError("request: [rules] apply to tables with sums; no table has sums")
    return {"ptable": load_ptable(cfg["ptable"], base) if ckm else None,
            "magnitude": load_magnitude(cfg["magnitude"], base) if with_sums else None,
            "rules": load_rules(cfg["rules"]) if "rules" in cfg else None}


def _specs(s: Session, cfg: dict[str, Any], base: Path) -> list[TableSpec]:
    """The TableSpec of every table (hierarchies read), before any table is built."""
    from protab.table import TableSpec

    specs = []
    for t in cfg["tables"]:
        dims: dict[str, Any] = {}
        for d in t["dims"]:
            h = cfg.get("hierarchies", {}).get(d)
            dims[d] = hierarchy(s, h, t["source"], d, base) if h else None
        specs.append(TableSpec(
            dims, formula=t.get("formula"), weight=t.get("weight"),
            drop_empty=t.get("drop_empty", False), null_code=t.get("null_code"),
            margins=t.get("margins", True), sums=t.get("sums", ()), null_sums=t.get("null_sums", "error"),
            freq=t.get("freq"),
        ))
    return specs


def _protect_tables(
    s: Session, cfg: dict[str, Any], db: str, base: Path, methods: dict[str, Any]
) -> tuple[dict[str, pl.DataFrame], list[dict[str, Any]]]:
    """Every table protected in memory, by its method (the suppressed ones of a source together)."""
    from protab._progress import track

    tables = cfg["tables"]
    _check_sources(s, tables, db)
    specs = _specs(s, cfg, base)
    rows, frames = [], {}
    suppressed: dict[str, tuple[pl.DataFrame, dict[str, Any]]] = {}
    for k, (t, spec) in enumerate(track(list(zip(tables, specs)), "protecting tables",
                                        total=len(tables), unit="table")):
        _say(f"  protecting {t['name']} ({k + 1}/{len(tables)}) …")
        if t.get("method", "ckm") == "suppression":
            if t["name"] not in suppressed:
                chosen = [(u, x) for u, x in zip(tables, specs) if u.get("method", "ckm") == "suppression"]
                suppressed.update(_suppress_all(s, [u for u, _ in chosen], [x for _, x in chosen],
                                                methods["rules"]))
            frames[t["name"]], row = suppressed[t["name"]]
        else:
            frames[t["name"]], row = _protect_one(s, t["name"], t["source"], spec, methods["ptable"],
                                                  threshold=t.get("threshold"), magnitude=methods["magnitude"],
                                                  rules=methods["rules"])
        rows.append(row)
    return frames, rows


def _spark_session(spark: dict[str, Any], tables: list[dict[str, Any]], db: str, base: Path) -> Session:
    """The Spark engine's session of ``protect --engine spark``: the request's sources as Spark
    tables or Parquet files, their record keys declared from the DuckDB database (catalog only)
    or from ``--spark-keys``. The swap section does not run on Spark yet."""
    from protab.engines import require_java, require_spark
    from protab.session import Session
    from protab.session.spark import SparkSession

    builder = require_spark().builder
    require_java()
    session = (builder.master(spark["master"] or "local[*]").appName("protab protect")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    s = SparkSession(session)
    keys: tuple[str, int] | None = None
    if spark["keys"] is not None:
        column, _, modulus = str(spark["keys"]).rpartition(":")
        if not column or not modulus.isdigit() or int(modulus) < 2:
            raise InputError(f"--spark-keys must be COLUMN:MODULUS (e.g. rkey:4294967296), not {spark['keys']!r}")
        keys = (column, int(modulus))
    data = Path(spark["data"]) if spark["data"] else base
    for source in dict.fromkeys(t["source"] for t in tables):
        if not s.exists(source):
            path = data / f"{source}.parquet"
            if not path.exists():
                raise InputError(
                    f"protect --engine spark: source {source!r} is neither a Spark table nor the Parquet "
                    f"file {str(path)!r} (pass --spark-data FOLDER holding {source}.parquet)"
                )
            s.register(source, str(path))
        if keys is None:
            with Session(db, read_only=True, progress=False) as d:
                if not d.exists(source):
                    raise InputError(
                        f"protect --engine spark: the database {db!r} has no table {source!r} to tell its "
                        "record keys; pass --spark-keys COLUMN:MODULUS"
                    )
                column, modulus = d.record_key(source)
        else:
            column, modulus = keys
        s.use_record_keys(source, column, modulus)
    return s


def _swap(s: Session, cfg: dict[str, Any], base: Path) -> None:
    """The [swap] section: targeted record swapping of ``source`` into a temporary table ``out`` of
    the session, which the tables of the request then read (kept by :func:`_keep_swap` only when
    every table was protected and written)."""
    from protab.swapping import SwapSpec

    seed_file = base / cfg["seed_file"] if "seed_file" in cfg else None
    seed = _read_seed(cfg.get("seed_env"), seed_file, "[swap] needs seed_env or seed_file")
    spec = SwapSpec(
        household=cfg["household"], geography=cfg["geography"], risk_variables=cfg["risk_variables"],
        similar=cfg["similar"], swap_rate=cfg["swap_rate"], k_anonymity=cfg.get("k_anonymity", 3),
        carry_along=cfg.get("carry_along", ()), max_swap_rate=cfg.get("max_swap_rate"),
    )
    try:
        summary = s.swap(cfg["source"], spec, seed=seed, out=cfg["out"], log=cfg.get("log"),
                         replace=cfg.get("replace", False), temporary=True)
    except ProtabError as exc:  # the option of a request, not of the Python API
        raise type(exc)(str(exc).replace("pass replace=True", "set replace = true in [swap]")) from None
    _say(_swap_line(summary, cfg))


def _swap_line(summary: dict[str, Any], cfg: dict[str, Any]) -> str:
    """The swap's summary: the rate asked for and the rate reached, and why they differ."""
    share = summary.get("share_risky_swapped")
    cap = summary.get("max_swap_rate")
    capped = "" if cap is None else f", capped at {cap:g}"
    left = "" if cap is None else f", left by the cap {summary['risky_over_cap']:,}"
    swapped = "-" if share is None else f"{share:.1%}"
    return (f"  swapped {summary['swapped_households']:,} of {summary['households']:,} households into "
            f"{cfg['out']!r}: rate {summary['achieved_swap_rate']:.4f} (requested "
            f"{summary['requested_swap_rate']:g}{capped}); risky households {summary['risky_share']:.1%}, "
            f"of them swapped {swapped}{left}; without donor {summary['households_without_donor']:,}")


def _keep_swap(s: Session, cfg: dict[str, Any]) -> None:
    """Every table was protected and written: keep the swapped records (and log) in the database."""
    from protab.swapping import persist_swap

    persist_swap(s.con, cfg["out"], cfg.get("log"), replace=cfg.get("replace", False))


def _check_sources(s: Session, tables: list[dict[str, Any]], db: str) -> None:
    """Every table's source and columns exist (a catalog look-up, before any table is built)."""
    known = s.tables()
    for t in tables:
        if t["source"] not in known:
            raise InputError(
                f"request: table {t['name']!r}: the database {db!r} has no table {t['source']!r} "
                f"(tables: {', '.join(known) or 'none'}); register it with `protab register`"
            )
        cols = s.columns(t["source"])
        wanted = [("dims", d) for d in t["dims"]] + ([("weight", t["weight"])] if "weight" in t else []) + [
            ("sums", v) for v in t.get("sums", [])] + ([("freq", t["freq"])] if "freq" in t else [])
        for key, c in wanted:
            if c not in cols:
                raise InputError(
                    f"request: table {t['name']!r}: {key} names {c!r}, which is not a column of "
                    f"{t['source']!r} (columns: {', '.join(cols)})"
                )


# -- tables and p-tables ----------------------------------------------------------------------
def list_tables(database: str) -> str:
    """What a database holds: tables and views, rows, columns, record keys, installed p-table."""
    from protab._sql import quote_ident
    from protab.session import Session

    _require_database(database)
    lines = [f"{'name':<32}{'kind':<7}{'rows':>14}{'columns':>9}  record key"]
    with Session(database, read_only=True, progress=False) as s:
        for name in s.tables():
            kind = s._kind(name) or ""
            try:
                rows = s.con.execute(f"SELECT count(*) FROM {quote_ident(name)}").fetchall()[0][0]
                shown = f"{rows:,}"
            except Exception:  # a view over files that are gone
                shown = "unreadable"
            try:
                key = s.record_key(name)[0]
            except ProtabError:
                key = "-"
            lines.append(f"{name:<32}{kind:<7}{shown:>14}{len(s.columns(name)):>9}  {key}")
        installed = s.con.execute("SELECT count(*) FROM protab_ptable").fetchall()[0][0]
    if len(lines) == 1:
        lines.append("(no tables: add some with `protab register NAME SOURCE` or `protab demo`)")
    lines.append("p-table for ckm(): " + ("installed" if installed else "none (protab ptable install)"))
    return "\n".join(lines)


#: the command line's p-table layouts, and the names MagnitudePTable gives them (no ons layout)
_NUMERIC_LAYOUTS = {"auto": "auto", "ptable": "r", "tauargus": "argus"}


def read_ptable(source: str, fmt: str = "auto", kind: str = "auto") -> tuple[str, Any]:
    """A p-table file as ``("count", PTable)`` or ``("numeric", {type: MagnitudePTable})``.

    ``kind`` "auto" tells them apart: a file :meth:`PTable.read` accepts (integer noise, a row
    for every original value, type "all" only) is a count p-table, else one
    :meth:`MagnitudePTable.read_set` accepts is numeric. "count" and "numeric" refuse the other.
    """
    from protab.errors import PTableError
    from protab.ptable import MagnitudePTable, PTable

    layout = _NUMERIC_LAYOUTS.get(fmt)
    if kind == "numeric" and layout is None:
        raise InputError(f"--from {fmt} is a layout of count p-tables; numeric (magnitude) p-tables are "
                         "read from the ptable or tauargus layout")
    with reading(source, "the p-table file"):
        try:
            count = PTable.read(source, format=fmt)
        except PTableError as exc:
            count_error = exc
        else:
            return _refuse_kind("count", kind, source), count
        if layout is None:
            raise count_error
        try:
            tables = MagnitudePTable.read_set(source, format=layout)  # type: ignore[arg-type]
        except PTableError:
            if kind == "numeric" or "numeric (magnitude)" in str(count_error):
                raise
            raise count_error from None
    return _refuse_kind("numeric", kind, source), tables


def _refuse_kind(found: str, wanted: str, source: str) -> str:
    if wanted in ("auto", found):
        return found
    if found == "count":
        raise InputError(f"the p-table file {source!r} is a count p-table (integer noise, a row for every "
                         "original value), not a numeric (magnitude) one; leave out --numeric for counts")
    raise InputError(f"the p-table file {source!r} is a numeric (magnitude) p-table; this command takes count "
                     "p-tables (numeric ones serve the [magnitude] section of `protab protect`)")


def show_ptable(source: str, fmt: str = "auto", png: str | None = None, kind: str = "auto") -> str:
    """A p-table's summary (count: D, V, rows, variance per row; numeric: per ratio class, for
    each type the file holds); optionally a PNG of a count p-table's noise."""
    import polars as pl

    found, p = read_ptable(source, fmt, kind)
    if found == "numeric":
        if png:
            raise InputError(f"--png draws count p-tables; {source!r} is a numeric (magnitude) p-table")
        return _show_numeric(source, p)
    summary = p.summary()
    D, V = int(summary["D"][0]), float(summary["V"][0])
    text = [f"p-table {source}: D = {D}, V = {V:g}, {p.frame.height} rows, original values "
            f"0..{int(summary['i'].max())} (the last serves every larger count)"]
    summary = summary.drop("D", "V")
    with pl.Config(tbl_rows=-1, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                   float_precision=4):
        text.append(str(summary))
    if png:
        from protab._io import atomic_path

        with atomic_path(png) as tmp:
            p.plot(tmp)
        text.append(f"wrote {png}")
    text.append("(p-table parameters are internal: do not publish them with protected tables)")
    return "\n".join(text)


def _show_numeric(source: str, tables: dict[str, Any]) -> str:
    """MagnitudePTable.summary() of each table of a file: nothing the file does not hold."""
    import polars as pl

    kinds = ", ".join(tables)
    text = [f"numeric (magnitude) p-table {source}: {len(tables)} table{'s' if len(tables) > 1 else ''} "
            f"(type {kinds})",
            "per ratio class i: mean and variance of the noise v (in units of x_delta), p_stay (p of "
            "v = 0), n_entries"]
    with pl.Config(tbl_rows=-1, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                   float_precision=4):
        for kind, t in tables.items():
            text.append(f"type {kind}: {len(t.rows) - 1} ratio classes and row 0, {len(t)} entries")
            text.append(str(t.summary()))
    text.append("(p-table parameters are internal: do not publish them with protected tables)")
    return "\n".join(text)


def macro_path() -> Path:
    """Where the SQL macros (``protab.sql``) of this installation are, for ``.read`` in duckdb."""
    from importlib import resources

    try:
        res = resources.files("protab").joinpath("sql", "protab.sql")
        if res.is_file():
            return Path(str(res))
    except (FileNotFoundError, ModuleNotFoundError):  # pragma: no cover
        pass
    return Path(__file__).resolve().parents[3] / "sql" / "protab.sql"  # a source checkout


# -- the command line -----------------------------------------------------------------------
def _seed(args: argparse.Namespace) -> str:
    if args.seed_env and args.seed_file:
        raise InputError("give the seed once: --seed-env or --seed-file, not both")
    return _read_seed(args.seed_env, args.seed_file, "give the secret seed with --seed-env VAR or --seed-file PATH")


def _read_seed(env: str | None, file: str | os.PathLike[str] | None, missing: str) -> str:
    """A secret seed from an environment variable or a file (never from the command line)."""
    if env:
        val = os.environ.get(env)
        if not val or not val.strip():
            raise InputError(f"the environment variable {env} is not set or empty")
        return val
    if file:
        with reading(file, "the seed file"):
            val = Path(file).read_text(encoding="utf-8").strip()
        if not val:
            raise InputError(f"the seed file {str(file)!r} is empty")
        return val
    raise InputError(missing)


def _ons_modulus(fmt: str, bits: int) -> dict[str, int]:
    """The ONS layout lists every integer cell key, so it needs the key modulus 2^bits."""
    if fmt != "ons":
        return {}
    if not 1 <= bits <= 20:
        raise InputError("--bits for the ons layout must be from 1 to 20 (ONS uses 8: keys 0-255)")
    return {"modulus": 2**bits}


# the Python API's wording of an option, and the command line's
_CLI_WORDS = (
    ("pass replace=True", "pass --replace"),
    ("name= to choose", "--name to choose"),
    ("TableSpec(..., null_code='Unknown')", "null_code = 'Unknown' in its [[tables]] entry"),
    ("Session.register, or `protab register NAME SOURCE`", "`protab register NAME SOURCE`"),
    ("Session.add_record_keys", "`protab keys`"),
    ("Session.install_ptable", "`protab ptable install`"),
    ("see MagnitudePTable.diagnostics", "see the variance per class of `protab ptable show`"),
    ("set mono=False or optim for those classes", "pass --mono false or --optim for those classes"),
    ("e.g. icat = [1, D]", "e.g. --icat 1 … D"),
    ("built with infeasible='warn'", "built with --infeasible warn (infeasible = \"warn\" in a request)"),
)


_KEYS_HINT = re.compile(r"call Session\.add_record_keys\(('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"), "
                        r"id_column=\.\.\., seed=\.\.\.\) or add_record_keys\(\.\.\., record_key_column=\.\.\.\)")


def _keys_hint(match: re.Match[str]) -> str:
    """The command line's form of the hint to add record keys: a whole `protab keys` command."""
    import ast
    import shlex

    table = shlex.quote(ast.literal_eval(match.group(1)))
    return (f"add them with `protab keys {table} --id ID_COLUMN --seed-env VAR` (or `--seed-file FILE`; "
            f"existing keys: `protab keys {table} --record-key-column COLUMN`)")


def cli_words(text: str) -> str:
    """A message of the Python API in the command line's words (options instead of arguments)."""
    text = _KEYS_HINT.sub(_keys_hint, text)
    for api, flag in _CLI_WORDS:
        text = text.replace(api, flag)
    return text


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    p = argparse.ArgumentParser(
        prog="protab", formatter_class=fmt,
        description="Protected frequency and magnitude tables from microdata in DuckDB (cell key method, "
                    "cell suppression, record swapping, rounding).",
        epilog="Request formats: `protab protect --help` and `protab report --help`; more in README.md.\n"
               "Progress bars show on a terminal; PROTAB_PROGRESS=0 hides them, =1 forces them.",
    )
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    db_help = f"the DuckDB database file (default {DEFAULT_DATABASE})"

    d = sub.add_parser("demo", help="generate a synthetic census and protect four tables",
                       description="Generate a synthetic census in SQL into a DuckDB file, add record keys, "
                                   "install a p-table and protect four tables by the cell key method.")
    d.add_argument("--persons", type=int, default=1_000_000, help="population size (default 1,000,000)")
    d.add_argument("--db", default=DEFAULT_DATABASE, help=db_help)
    d.add_argument("--out", default=DEFAULT_OUTPUT, help=f"output folder (default {DEFAULT_OUTPUT})")
    d.add_argument("--seed", default="protab-demo-seed",
                   help="record-key seed of the synthetic data (demo only; real seeds: protab keys)")
    d.add_argument("--replace", action="store_true",
                   help="replace a persons table or installed p-table the database holds already")

    t = sub.add_parser("tables", help="list what a database holds",
                       description="List the tables and views of a database: rows, columns, record-key "
                                   "column, and whether a p-table is installed for ckm().")
    t.add_argument("--db", default=DEFAULT_DATABASE, help=db_help)

    m = sub.add_parser("macros", help="print the path of the SQL macros (ckm, record keys)",
                       description="Print where this installation's sql/protab.sql is, to load it in the "
                                   "duckdb CLI with .read from any folder.")
    m.add_argument("--read", action="store_true", help="print the whole .read line")

    r = sub.add_parser("register", help="register a Parquet/CSV file (or glob) as a table",
                       description="Make a Parquet or CSV file, glob or existing table available as NAME.")
    r.add_argument("name", help="the table name to register")
    r.add_argument("source", help="a .parquet/.csv path or glob, or the name of a table of the database")
    r.add_argument("--db", default=DEFAULT_DATABASE, help=db_help)
    r.add_argument("--materialize", action="store_true",
                   help="copy the rows into the database (default: a view over the files)")
    r.add_argument("--replace", action="store_true", help="replace a table of that name")

    k = sub.add_parser("keys", help="add record keys to a table",
                       description="Add a record-key column: a keyed hash of an id column with a secret seed "
                                   "(from an environment variable or a file, never the command line), or "
                                   "existing keys from a column.")
    k.add_argument("table", help="the table to key")
    k.add_argument("--db", default=DEFAULT_DATABASE, help=db_help)
    k.add_argument("--id", dest="id_column", help="identifier column to hash with the seed")
    k.add_argument("--seed-env", help="name of the environment variable holding the secret seed")
    k.add_argument("--seed-file", help="file holding the secret seed (first line, trimmed)")
    k.add_argument("--record-key-column", help="use existing keys from this column instead of hashing")
    k.add_argument("--decimals", type=int, help="existing keys are decimals in [0, 1] with this many digits")
    k.add_argument("--bits", type=int, default=32, help="keys below 2^bits (default 32; ONS style: 8)")
    k.add_argument("--name", default="rkey", help="name of the key column (default rkey)")
    k.add_argument("--replace", action="store_true", help="overwrite an existing record-key column (never data)")

    pt = sub.add_parser("ptable", help="generate, convert, show or install p-tables",
                        formatter_class=fmt, epilog=PTABLE_KINDS,
                        description="Perturbation tables (p-tables) of the cell key method: count p-tables\n"
                                    "for frequencies, numeric (magnitude) p-tables for sums.")
    ps = pt.add_subparsers(dest="pcmd", required=True, metavar="ACTION")
    g = ps.add_parser("generate", help="a maximum-entropy p-table (as the R package ptable)",
                      formatter_class=fmt, epilog=PTABLE_GENERATE,
                      description="A count p-table by maximum entropy (R ptable's create_cnt_ptable), or with\n"
                                  "--numeric a magnitude p-table (create_num_ptable) for the [magnitude]\n"
                                  "section of a protect request.")
    g.add_argument("--D", type=int, required=True, help="maximum deviation (noise in -D..D)")
    g.add_argument("--V", type=float, required=True, help="variance of the noise")
    g.add_argument("--js", type=int, default=0, help="counts 1..js are never published (default 0; counts only)")
    g.add_argument("--pstay", type=float, help="least probability of no change (default: none; counts only)")
    g.add_argument("--infeasible", choices=("error", "warn"), default="error",
                   help="a row that cannot have a variance as small as V: refuse (error, as R's ptable; "
                        "default) or build it with its smallest variance and warn")
    g.add_argument("--out", required=True, help="the p-table file to write")
    g.add_argument("--format", default="ptable", choices=["ptable", "tauargus", "ons"],
                   help="file layout: ptable (R CSV, default), tauargus, ons (counts only)")
    g.add_argument("--bits", type=int, default=8, help="ons layout only: cell keys below 2^bits (default 8)")
    gn = g.add_argument_group("numeric (magnitude) p-tables")
    gn.add_argument("--numeric", action="store_true",
                    help="a numeric p-table for sums (R ptable's create_num_ptable) instead of a count one")
    gn.add_argument("--icat", type=int, nargs="+", metavar="I",
                    help="required with --numeric: the ratio classes, integers including 1 and D")
    gn.add_argument("--step", type=int, help="the noise grid is 1/step (default 2); D * step must be below 50")
    gn.add_argument("--optim", type=int, nargs="+", metavar="K",
                    help="optimisation 1 to 4 (4: variance exactly V), one or one per class (default 1)")
    gn.add_argument("--mono", nargs="+", metavar="true|false",
                    help="probabilities non-decreasing up to v = 0: one or one per class (default true)")
    gn.add_argument("--type", metavar="TYPE", help="the table's type: all (default), even, odd or small_cells")
    c = ps.add_parser("convert", help="convert a p-table file between layouts",
                      description="Read a p-table in one layout and write it in another. A numeric p-table "
                                  "keeps every type its file holds (an even/odd pair stays a pair, even "
                                  "first as tau-ARGUS needs).")
    c.add_argument("source", help="the p-table file to read")
    c.add_argument("target", help="the p-table file to write")
    c.add_argument("--to", default="tauargus", choices=["ptable", "tauargus", "ons"],
                   help="layout to write (default tauargus; ons holds count p-tables only)")
    c.add_argument("--from", dest="from_", default="auto", choices=["auto", "ptable", "tauargus", "ons"],
                   help="layout to read (default: told from the file)")
    c.add_argument("--bits", type=int, default=8, help="--to ons only: cell keys below 2^bits (default 8)")
    c.add_argument("--numeric", action="store_true",
                   help="the source must be a numeric (magnitude) p-table (a count one is refused)")
    sh = ps.add_parser("show", help="summarise a p-table (count: D, V, variance per row; numeric: per class)",
                       description="Print a count p-table's summary per original value (--png draws its "
                                   "noise), or a numeric p-table's per ratio class, for each type its file "
                                   "holds (MagnitudePTable.summary: nothing the file does not hold).")
    sh.add_argument("source", help="the p-table file to read")
    sh.add_argument("--from", dest="from_", default="auto", choices=["auto", "ptable", "tauargus", "ons"],
                    help="layout to read (default: told from the file)")
    sh.add_argument("--png", help="write a PNG of the noise distribution per original value here (counts only)")
    sh.add_argument("--numeric", action="store_true",
                    help="the file must be a numeric (magnitude) p-table (a count one is refused)")
    i = ps.add_parser("install", help="install a count p-table for the SQL macro ckm()",
                      description="Install a count p-table in a database, for ckm(count(*), sum(rkey)) in "
                                  "SQL (numeric p-tables serve the [magnitude] section of a protect request).")
    i.add_argument("source", help="the p-table file to read")
    i.add_argument("--db", default=DEFAULT_DATABASE, help=db_help)
    i.add_argument("--table", help="keyed table whose key modulus to use")
    i.add_argument("--bits", type=int, help="key modulus 2^bits (1 to 32), for keys made elsewhere")
    i.add_argument("--decimals", type=int, help="key modulus 10^decimals (1 to 18), for decimal keys")

    pr = sub.add_parser("protect", help="protect the tables of a TOML request file",
                        formatter_class=fmt, epilog=PROTECT_FORMAT,
                        description="Protect every table of a request and write them as CSV/Parquet: by the cell "
                                    "key method (counts, weighted counts, and sums by the cell key method for "
                                    "magnitudes, with optional sensitivity rules), or by cell suppression (method = "
                                    "\"suppression\"), optionally after targeted record swapping ([swap]).")
    pr.add_argument("request", help="the TOML request file")
    pr.add_argument("--db", help="DuckDB file (overrides the request's database)")
    pr.add_argument("--out", help="output folder (overrides the request's output)")
    pr.add_argument("--engine", choices=("duckdb", "spark"), default="duckdb",
                    help="where the tables are computed (spark: docs/spark.md; same output files)")
    pr.add_argument("--spark-master", help="Spark master URL for --engine spark (default local[*])")
    pr.add_argument("--spark-data", help="folder of <source>.parquet files for --engine spark "
                                         "(default: the request's folder; Spark tables are used first)")
    pr.add_argument("--spark-keys", help="COLUMN:MODULUS of the record keys in the Parquet files "
                                         "(default: as keyed in the request's DuckDB database)")

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

    rp = sub.add_parser("report", help="risk-utility report of protected tables (TOML request file)",
                        formatter_class=fmt,
                        description="Compare protected tables with the originals (trusted use): measures, "
                                    "an R-U map and noise plots as HTML/Markdown.",
                        epilog="The request format, with an example, is the docstring of protab.report:\n"
                               "  python -m pydoc protab.report")
    rp.add_argument("request", help="the TOML request file")
    rp.add_argument("--out", help="report folder (overrides the request's output)")
    rp.add_argument("--db", help="DuckDB file of the microdata (overrides the request's [original] database; "
                                 "only when [original] names a table)")

    from protab.serve import commands as serve_cli  # argparse only: Starlette loads when the server starts

    serve_cli.add_parsers(sub)
    return p


def _run(args: argparse.Namespace) -> None:
    if args.cmd == "demo":
        demo(args.persons, args.db, args.out, args.seed, replace=args.replace)
    elif args.cmd == "tables":
        print(list_tables(args.db))
    elif args.cmd == "macros":
        print(f".read '{macro_path()}'" if args.read else macro_path())
    elif args.cmd == "register":
        from protab.session import Session

        with Session(args.db) as s:
            s.register(args.name, args.source, materialize=args.materialize, replace=args.replace)
        print(f"registered {args.name} in {args.db}")
    elif args.cmd == "keys":
        from protab.session import Session

        if args.record_key_column and (args.id_column or args.seed_env or args.seed_file):
            raise InputError("give either --record-key-column (existing keys) or --id with a seed (new keys), "
                             "not both")
        if args.decimals is not None and not args.record_key_column:
            raise InputError("--decimals describes existing keys: use it with --record-key-column")
        seed = None if args.record_key_column else _seed(args)
        _require_database(args.db)
        with Session(args.db) as s:
            if args.record_key_column:
                s.add_record_keys(args.table, record_key_column=args.record_key_column,
                                  decimals=args.decimals, bits=args.bits, name=args.name,
                                  replace=args.replace)
            else:
                s.add_record_keys(args.table, id_column=args.id_column, seed=seed,
                                  bits=args.bits, name=args.name, replace=args.replace)
        print(f"record keys added to {args.table} as column {args.name}")
    elif args.cmd == "ptable":
        _run_ptable(args)
    elif args.cmd == "protect":
        protect(args.request, args.db, args.out, engine=args.engine, spark_master=args.spark_master,
                spark_data=args.spark_data, spark_keys=args.spark_keys)
    elif args.cmd == "publish":
        publish(args.request, args.to, args.db, replace=args.replace)
    elif args.cmd in ("serve", "serve-token"):
        from protab.serve import commands as serve_cli

        serve_cli.run(args)
    elif args.cmd == "report":
        from protab.report import run_request

        run_request(args.request, args.out, database=args.db)


def _run_ptable(args: argparse.Namespace) -> None:
    from protab.ptable import PTable

    if args.pcmd == "generate":
        if args.numeric:
            _generate_numeric(args)
            return
        given = [o for o in ("icat", "step", "optim", "mono", "type") if getattr(args, o) is not None]
        if given:
            raise InputError(f"--{given[0]} is an option of numeric (magnitude) p-tables: add --numeric")
        modulus = _ons_modulus(args.format, args.bits)
        check_output_file(args.out)
        p = PTable.maximum_entropy(D=args.D, V=args.V, js=args.js, pstay=args.pstay, infeasible=args.infeasible)
        p.write(args.out, format=args.format, **modulus)
        print(f"wrote {args.out}")
    elif args.pcmd == "convert":
        modulus = _ons_modulus(args.to, args.bits)
        check_output_file(args.target)
        found, p = read_ptable(args.source, args.from_, "numeric" if args.numeric else "auto")
        if found == "numeric":
            _write_numeric(p, args.target, args.to, args.source)
        else:
            p.write(args.target, format=args.to, **modulus)
        print(f"wrote {args.target}")
    elif args.pcmd == "show":
        print(show_ptable(args.source, args.from_, args.png, "numeric" if args.numeric else "auto"))
    else:
        from protab.session import Session

        given = [o for o in ("table", "bits", "decimals") if getattr(args, o) is not None]
        if len(given) != 1:
            raise InputError("give exactly one of --table, --bits or --decimals for the key modulus")
        if args.bits is not None and not 1 <= args.bits <= 32:
            raise InputError(f"--bits must be from 1 to 32 (got {args.bits})")
        if args.decimals is not None and not 1 <= args.decimals <= 18:
            raise InputError(f"--decimals must be from 1 to 18 (got {args.decimals})")
        _, p = read_ptable(args.source, kind="count")
        _require_database(args.db)
        with Session(args.db) as s:
            if args.table:
                s.install_ptable(p, table=args.table)
            elif args.bits:
                s.install_ptable(p, modulus=2**args.bits)
            else:
                s.install_ptable(p, modulus=10**args.decimals)
        print(f"p-table installed in {args.db}; use ckm(count(*), sum(rkey)) in SQL")


def _generate_numeric(args: argparse.Namespace) -> None:
    """`protab ptable generate --numeric`: MagnitudePTable.maximum_entropy, written as ptable or tauargus."""
    from protab.ptable.magnitude import TYPES, MagnitudePTable

    if args.icat is None:
        raise InputError("--numeric needs --icat: the ratio classes, integers from 1 to D that include 1 and D")
    if args.js:
        raise InputError("--js applies to count p-tables; numeric p-tables have no js")
    if args.pstay is not None:
        raise InputError("--pstay applies to count p-tables (R ptable ignores it for numeric ones)")
    if args.format == "ons":
        raise InputError("the ons layout holds count p-tables; write a numeric p-table as ptable or tauargus")
    if args.type is not None and args.type not in TYPES:
        raise InputError(f"--type must be one of {', '.join(TYPES)}")
    kw: dict[str, Any] = {"step": 2 if args.step is None else args.step, "icat": args.icat,
                          "type": args.type or "all"}
    for name in ("optim", "mono"):
        given = getattr(args, name)
        if given is not None and len(given) not in (1, len(set(args.icat))):
            raise InputError(f"--{name} takes one value, or one per class of --icat")
    if args.optim is not None:
        kw["optim"] = args.optim[0] if len(args.optim) == 1 else args.optim
    if args.mono is not None:
        words = [m.strip().lower() for m in args.mono]
        if any(w not in ("true", "false") for w in words):
            raise InputError("--mono takes true or false: one, or one per class of --icat")
        kw["mono"] = words[0] == "true" if len(words) == 1 else [w == "true" for w in words]
    check_output_file(args.out)
    p = MagnitudePTable.maximum_entropy(args.D, args.V, infeasible=args.infeasible, **kw)
    p.write(args.out, format=_NUMERIC_LAYOUTS[args.format])  # type: ignore[arg-type]
    print(f"wrote {args.out}")


def _write_numeric(tables: dict[str, Any], target: str, layout: str, source: str) -> None:
    """Every table of a numeric file, in one file: one table as it is, several as a set."""
    from protab.ptable import MagnitudePTable

    if layout == "ons":
        raise InputError(f"the ons layout holds count p-tables; {source!r} is a numeric (magnitude) "
                         "p-table: convert it --to ptable or tauargus")
    fmt = _NUMERIC_LAYOUTS[layout]
    if len(tables) == 1:
        next(iter(tables.values())).write(target, format=fmt)
    else:
        MagnitudePTable.write_set(target, tables, format=fmt)  # type: ignore[arg-type]


def _warn(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    """Warnings as one line for people, not a Python file path and source line."""
    print(f"protab: warning: {cli_words(str(message))}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    import warnings

    args = build_parser().parse_args(argv)
    shown = warnings.showwarning
    warnings.showwarning = _warn
    try:
        _run(args)
    except ProtabError as exc:
        print(f"protab: error: {cli_words(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:  # the disk, not the input: say what and where, without a traceback
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"protab: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("protab: interrupted (nothing half-written is left in the output folder)", file=sys.stderr)
        return 130
    finally:
        warnings.showwarning = shown
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
