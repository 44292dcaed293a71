"""``protab audit``: the feasibility-interval audit (docs/audit.md) of the cell-key tables of
one run, read as an attacker finds them: the output folder of ``protab protect`` or ``protab
programme`` (every hypercube), or a database ``protab publish`` wrote. The tables must be of
one run and unchanged (their run fingerprint, protab._run_manifest) and agree on the cells
they share (protab.cli.audit_inputs); X is rebuilt from the records' codes, one joint system
per source (a programme: per hypercube), a CSV of the risky cells and a summary per table.

The noise bound D is a p-table parameter, a secret: it comes from the request's p-table
(or ``--D-env``, an environment variable), and is never printed or written."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protab.cli.options import DEFAULT_OUTPUT
from protab.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from protab.session import Session
    from protab.table import TableSpec


def add_parser(sub: Any) -> None:
    """``protab audit``."""
    p = sub.add_parser(
        "audit", help="audit the cell-key tables of a protect, publish or programme run: the attacker's interval "
                      "of every true count",
        description="Read the published tables of one run (a protect request's or a programme's output folder, or "
                    "with --tables a database protab publish wrote), check that they are of one run and unchanged "
                    "(protab_run.json / table protab_run) and agree on the cells they share, rebuild the model "
                    "matrix from the records' codes, and compute by linear programming the interval an attacker who "
                    "knows the p-table's noise bound D derives for every true count (all tables of a source, or of "
                    "a hypercube, together). Writes the risky cells (exact within --max-width, or a pinned count of "
                    "1 or 2) as CSV and prints a summary per table; D is never shown (docs/audit.md).")
    p.add_argument("request", help="the TOML request file that protect or publish ran, or the programme file")
    p.add_argument("--db", help="DuckDB file of the microdata (overrides the request's database)")
    p.add_argument("--tables", help="the published tables: an output folder (default: the request's output) or "
                                    "the DuckDB file protab publish wrote")
    p.add_argument("--D-env", dest="d_env",
                   help="environment variable holding D (default: D and support of the request's p-table)")
    p.add_argument("--max-width", type=int, default=0,
                   help="report intervals of at most this width (default 0: counts known exactly)")
    p.add_argument("--report", help="the CSV report of risky cells (default: audit_report.csv beside the request); "
                                    "never an input, a published table or a file in a run's output folder")
    p.add_argument("--budget", type=float, default=600.0, metavar="SECONDS",
                   help="refuse, with the estimate, an audit whose linear programs are estimated to take longer "
                        "(default 600; 0: no limit)")
    p.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> None:
    audit(args.request, args.db, args.tables, d_env=args.d_env, max_width=args.max_width, report=args.report,
          budget=args.budget or None)


def audit(request: str, database: str | None = None, tables: str | None = None, *, d_env: str | None = None,
          max_width: int = 0, report: str | None = None, budget: float | None = 600.0) -> pl.DataFrame:
    """Audit the cell-key tables of one protect, publish or programme run; returns the risky cells (also written)."""
    import polars as pl

    from protab._io import read_toml, write_frame
    from protab.cli.audit_inputs import check_report, check_shared
    from protab.session import Session

    path = Path(request)
    if path.is_file() and "hypercubes" in read_toml(path, InputError):
        run = _programme_run(path, database, tables)
    else:
        run = _request_run(path, database, tables)
    default = path.parent / "audit_report.csv"
    target = check_report(str(report) if report is not None else str(default), run["protected"], run["runs"])
    noise = dict(_noise(run["cfg"], path.parent, d_env), budget=budget)
    frames = run["read"]()
    check_shared(frames, run["dims"])
    with Session(run["db"], read_only=True) as s:
        try:
            result = run["audit"](s, frames, noise, max_width)
        except InputError as exc:
            if "inconsistent" not in str(exc):
                raise
            raise InputError(f"audit: the tables {_names(frames)} are not consistent with noise bound D: wrong D or "
                             "altered tables (no non-negative true counts reproduce them)") from None
    risky = result.filter(pl.col("risky"))
    write_frame(risky, target)
    print(_summary(result))
    print(f"risky cells written to {target}")
    return risky


def _names(frames: dict[str, Any]) -> str:
    shown = list(frames)[:4]
    return ", ".join(repr(n) for n in shown) + (f" and {len(frames) - 4} more" if len(frames) > 4 else "")


def _request_run(path: Path, database: str | None, tables: str | None) -> dict[str, Any]:
    """What the audit of a protect request (or its publish) reads and how it audits it."""
    from protab._io import database_files, protected_form
    from protab.cli.audit_inputs import read_folder, read_published
    from protab.cli.protect_checks import database_path, read_request, request_inputs

    cfg = read_request(path)
    db = database_path(path, cfg, database)
    chosen = [t for t in cfg["tables"] if t.get("method", "ckm") == "ckm" and "weight" not in t]
    if not chosen:
        raise InputError(f"audit: request {str(path)!r} has no count table protected by the cell key method")
    dims = {t["name"]: list(t["dims"]) for t in chosen}
    where = Path(tables) if tables else path.parent / cfg.get("output", DEFAULT_OUTPUT)
    protected = request_inputs(path, cfg, db)
    if where.is_file():
        if where.resolve() == Path(db).resolve():  # the records' own database, not one publish wrote
            raise InputError(f"audit: --tables {str(where)!r} is the database of the records, not a database "
                             "protab publish wrote; give the published database or the output folder")
        rerun = f"publish again (protab publish {path} --to {where} --replace) and audit that"
        protected += [(p, f"the published database {str(where)!r}") for p in database_files(str(where))]
        runs = []

        def read() -> dict[str, pl.DataFrame]:
            return read_published(where, dims, rerun)
    else:
        rerun = f"run protab protect {path} again and audit its output folder"
        protected.append((protected_form(str(where)), f"the folder of the published tables {str(where)!r}"))
        runs = [where]

        def read() -> dict[str, pl.DataFrame]:
            return read_folder(where, dims, rerun)

    def run(s: Session, frames: dict[str, pl.DataFrame], noise: dict[str, Any], max_width: int) -> pl.DataFrame:
        return _audit_sources(s, cfg, path.parent, chosen, frames, noise, max_width)

    return {"cfg": cfg, "db": db, "dims": dims, "protected": protected, "runs": runs, "read": read, "audit": run}


def _programme_run(path: Path, database: str | None, tables: str | None) -> dict[str, Any]:
    """What the audit of a programme's output folder reads and how it audits it."""
    from protab._io import protected_form
    from protab.cli import audit_programme as ap
    from protab.cli.audit_inputs import read_folder
    from protab.programme import Programme

    prog = Programme(path)
    given = prog.cfg.get("database", "protab.duckdb")
    db = database or (given if os.path.isabs(given) else str(path.parent / given))
    named = ap.tables(prog)
    if not named:
        raise InputError(f"audit: programme {str(path)!r} has no count table")
    where = Path(tables) if tables else path.parent / prog.cfg.get("output", "protab_output")
    if where.is_file():
        raise InputError(f"audit: --tables {str(where)!r} is a file; a programme's tables are the files of its "
                         "output folder")
    dims = {n: d for n, (_, d) in named.items()}
    rerun = f"run protab programme {path} again and audit its output folder"
    protected = ap.inputs(prog, db) + [(protected_form(str(where)), f"the programme's output folder {str(where)!r}")]

    def run(s: Session, frames: dict[str, pl.DataFrame], noise: dict[str, Any], max_width: int) -> pl.DataFrame:
        return ap.audit_cubes(s, prog, frames, noise, max_width)

    return {"cfg": prog.cfg, "db": db, "dims": dims, "protected": protected, "runs": [where],
            "read": lambda: read_folder(where, dims, rerun), "audit": run}


def _noise(cfg: dict[str, Any], base: Path, d_env: str | None) -> dict[str, Any]:
    """D (and support, zeros) from the request's p-table, or D alone from an environment variable."""
    from protab.audit import ptable_noise
    from protab.request.loaders import load_ptable

    if d_env is None:
        if "ptable" not in cfg:
            raise InputError("audit: the request has no [ptable]; give D in an environment variable with --D-env")
        return ptable_noise(load_ptable(cfg["ptable"], base))
    text = os.environ.get(d_env)
    try:
        value = float(text) if text is not None else None
    except ValueError:
        value = None
    if value is None:
        raise InputError(f"audit: environment variable {d_env!r} is not set to a number (D)")
    return {"D": value}


def _audit_sources(s: Session, cfg: dict[str, Any], base: Path, chosen: list[dict[str, Any]],
                   published: dict[str, pl.DataFrame], noise: dict[str, Any], max_width: int) -> pl.DataFrame:
    """One joint audit per source: its tables linked through one combined TableSpec."""
    import polars as pl

    from protab.audit import feasibility
    from protab.cli.protect_tables import specs

    all_specs = dict(zip((t["name"] for t in cfg["tables"]), specs(s, cfg, base)))
    parts = []
    for src in dict.fromkeys(t["source"] for t in chosen):
        names = [t["name"] for t in chosen if t["source"] == src]
        X, inner, pub = s.model_matrix(src, _linked([all_specs[n] for n in names]), extend0="all", nested=True)
        out = feasibility({n: published[n] for n in names}, X, pub, inner, max_width=max_width, **noise)
        parts.append(out.with_columns(pl.lit(src).alias("source")))
    return pl.concat(parts, how="diagonal_relaxed")


def _linked(table_specs: list[TableSpec]) -> TableSpec:
    """One TableSpec whose cells are every cell of the tables (the union of dimensions and crossings)."""
    from protab.table import union_spec

    first = table_specs[0]
    return union_spec(table_specs, null_code=first.null_code, total=first.total)


def _summary(result: pl.DataFrame) -> str:
    """Per table (and the inner cells of each source or hypercube): cells, risky, narrow (width ≤ max_width), pinned 1–2."""
    import polars as pl

    rows = (result.with_columns(pl.coalesce(pl.col("table"), pl.format("(inner cells of {})", pl.col("source")))
                                .alias("table"))
            .group_by("table", maintain_order=True)
            .agg(pl.len().alias("cells"), pl.col("risky").sum(), pl.col("disclosed").sum(), pl.col("small").sum()))
    lines = [f"{'table':<34}{'cells':>10}{'risky':>8}{'narrow':>8}{'1-2':>6}"]
    for r in rows.iter_rows(named=True):
        lines.append(f"{r['table']:<34}{r['cells']:>10,}{r['risky']:>8,}{r['disclosed']:>8,}{r['small']:>6,}")
    return "\n".join(lines)
