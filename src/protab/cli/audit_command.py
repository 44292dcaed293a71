"""``protab audit``: the feasibility-interval audit (docs/audit.md) of the cell-key tables a
``protab protect`` request wrote: X rebuilt from the records' codes, one joint system per
source (its tables are linked), a CSV of the risky cells and a summary per table.

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
        "audit", help="audit cell-key tables written by protect: the attacker's interval of every true count",
        description="Rebuild the model matrix of a protect request's cell-key tables from the records' codes, "
                    "read the published tables, and compute by linear programming the interval an attacker who "
                    "knows the p-table's noise bound D derives for every true count (all tables of a source "
                    "together). Writes the risky cells (exact within --max-width, or a pinned count of 1 or 2) "
                    "as CSV and prints a summary per table; D is never shown (docs/audit.md).")
    p.add_argument("request", help="the TOML request file that protect ran")
    p.add_argument("--db", help="DuckDB file of the microdata (overrides the request's database)")
    p.add_argument("--tables", help="folder of the published tables (default: the request's output)")
    p.add_argument("--D-env", dest="d_env",
                   help="environment variable holding D (default: D and support of the request's p-table)")
    p.add_argument("--max-width", type=int, default=0,
                   help="report intervals of at most this width (default 0: counts known exactly)")
    p.add_argument("--report", help="the CSV report of risky cells (default: audit_report.csv beside the request)")
    p.add_argument("--budget", type=float, default=600.0, metavar="SECONDS",
                   help="refuse, with the estimate, an audit whose linear programs are estimated to take longer "
                        "(default 600; 0: no limit)")
    p.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> None:
    audit(args.request, args.db, args.tables, d_env=args.d_env, max_width=args.max_width, report=args.report,
          budget=args.budget or None)


def audit(request: str, database: str | None = None, tables: str | None = None, *, d_env: str | None = None,
          max_width: int = 0, report: str | None = None, budget: float | None = 600.0) -> pl.DataFrame:
    """Audit the cell-key tables of a protect request; returns the risky cells (also written)."""
    import polars as pl

    from protab._io import write_frame
    from protab.cli.protect_checks import database_path, read_request
    from protab.session import Session

    path = Path(request)
    cfg = read_request(path)
    folder = Path(tables) if tables else path.parent / cfg.get("output", DEFAULT_OUTPUT)
    target = Path(report) if report else path.parent / "audit_report.csv"
    noise = _noise(cfg, path.parent, d_env)
    chosen = [t for t in cfg["tables"] if t.get("method", "ckm") == "ckm"]
    if not chosen:
        raise InputError(f"audit: request {str(path)!r} has no table protected by the cell key method")
    published = {t["name"]: _read_table(folder, t["name"]) for t in chosen}
    with Session(database_path(path, cfg, database), read_only=True) as s:
        result = _audit_sources(s, cfg, path.parent, chosen, published, dict(noise, budget=budget), max_width)
    risky = result.filter(pl.col("risky"))
    write_frame(risky, target)
    print(_summary(result, chosen))
    print(f"risky cells written to {target}")
    return risky


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


def _read_table(folder: Path, name: str) -> pl.DataFrame:
    """A published table: Parquet when there, else CSV with codes kept as text."""
    import polars as pl

    pq, csv = folder / f"{name}.parquet", folder / f"{name}.csv"
    if pq.exists():
        return pl.read_parquet(pq)
    if csv.exists():
        frame = pl.read_csv(csv, infer_schema=False)
        nums = [c for c in frame.columns if c.endswith("_level") or c.endswith("_pert")]
        return frame.with_columns(pl.col(c).cast(pl.Float64) for c in nums)
    raise InputError(f"audit: table {name!r} is not in {str(folder)!r} (no {name}.parquet or {name}.csv); "
                     "run protab protect first or pass --tables")


def _audit_sources(s: Session, cfg: dict[str, Any], base: Path, chosen: list[dict[str, Any]],
                   published: dict[str, pl.DataFrame], noise: dict[str, Any], max_width: int) -> pl.DataFrame:
    """One joint audit per source: its tables linked through one combined TableSpec."""
    import polars as pl

    from protab.audit import feasibility, linked_model_matrix
    from protab.cli.protect_tables import specs

    all_specs = dict(zip((t["name"] for t in cfg["tables"]), specs(s, cfg, base)))
    parts = []
    for src in dict.fromkeys(t["source"] for t in chosen):
        names = [t["name"] for t in chosen if t["source"] == src]
        X, inner, pub = linked_model_matrix(s, src, _linked([all_specs[n] for n in names]))
        out = feasibility({n: published[n] for n in names}, X, pub, inner, max_width=max_width, **noise)
        parts.append(out.with_columns(pl.lit(src).alias("source")))
    return pl.concat(parts, how="diagonal_relaxed")


def _linked(table_specs: list[TableSpec]) -> TableSpec:
    """One TableSpec whose cells are every cell of the tables (the union of dimensions and crossings)."""
    from protab.table import union_spec

    first = table_specs[0]
    return union_spec(table_specs, null_code=first.null_code, total=first.total)


def _summary(result: pl.DataFrame, chosen: list[dict[str, Any]]) -> str:
    """Per table (and the inner cells of each source): cells, risky, narrow (width ≤ max_width), pinned 1–2."""
    import polars as pl

    rows = (result.with_columns(pl.coalesce(pl.col("table"), pl.format("(inner cells of {})", pl.col("source")))
                                .alias("table"))
            .group_by("table", maintain_order=True)
            .agg(pl.len().alias("cells"), pl.col("risky").sum(), pl.col("disclosed").sum(), pl.col("small").sum()))
    lines = [f"{'table':<34}{'cells':>10}{'risky':>8}{'narrow':>8}{'1-2':>6}"]
    for r in rows.iter_rows(named=True):
        lines.append(f"{r['table']:<34}{r['cells']:>10,}{r['risky']:>8,}{r['disclosed']:>8,}{r['small']:>6,}")
    return "\n".join(lines)
