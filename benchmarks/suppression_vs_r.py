"""Benchmark: protab's cell suppression against GaussSuppression (R) on the same data.

    python benchmarks/suppression_vs_r.py                  # about 8e3 and 1e5 published cells
    python benchmarks/suppression_vs_r.py --large          # adds about 6.5e5 (R limited by --r-timeout)
    python benchmarks/suppression_vs_r.py --extra 400 20   # adds a table of 400 municipalities in 20 regions

The tables of benchmarks/suppression_scale.py (municipalities under regions × 18 age groups
under 3 broad groups × sex, all margins, about 5 records per inner cell). The inner cells
(region, m, broad, a, s, freq) are written to one CSV in a temporary directory; protab reads
that CSV into DuckDB and runs ``Session.suppress(min_frequency=4)``, and
benchmarks/suppression_vs_r.R runs GaussSuppression's ``SuppressSmallCounts`` on it through
Rscript with the same rule: counts 1–3 primary, zeros not protected, singletonMethod
"anySum", candidates in frequency order (CandidatesDefault). Each time is the suppression
call alone (model matrix included, CSV reading excluded). The baseline of the ratio is the R
run. Cells are matched by their codes (margins "Total" on both sides, "total" accepted);
where the patterns differ, both are checked with the exact rank test
(protab.suppression.derivable: no primary cell derivable from the published ones) and
compared by the number and the total count of their suppressed cells.

Measured (2026-11-23, 2 shared cores, R 4.2.2, GaussSuppression 1.2.3, SSBtools 1.8.6): 7,986 cells
protab 1.80 s, R 13.8 s; 27,786 cells 3.71 s vs 101.5 s; 54,846 cells 7.44 s vs 388.6 s; primary and
secondary suppressions identical cell for cell at all three. 98,406 cells: protab 24.6 s, R did not
finish within 1200 s (its time grew about as the square of the table size).

Without Rscript or the R package the script says so and runs protab alone (exit status 0).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

import protab as pt
from protab.suppression import derivable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from suppression_scale import GEN, hierarchies  # the same tables

R_SCRIPT = Path(__file__).resolve().parent / "suppression_vs_r.R"
DIMS = ["m", "a", "s"]
INNER = """
COPY (
    SELECT substr(m, 1, 4) AS region, m,
           CASE WHEN a < '04' THEN 'young' WHEN a < '13' THEN 'working' ELSE 'old' END AS broad,
           a, s, count(*) AS freq
    FROM t GROUP BY ALL ORDER BY ALL
) TO '{path}' (HEADER, DELIMITER ',')
"""


def r_available(rscript: str | None, rlib: str) -> str | None:
    """None if Rscript and GaussSuppression load, else the reason."""
    if rscript is None:
        return "Rscript not found on PATH"
    expr = f'.libPaths(c("{rlib}", .libPaths())); suppressPackageStartupMessages(library(GaussSuppression))'
    try:
        r = subprocess.run([rscript, "-e", expr], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "loading GaussSuppression in R took more than 2 minutes"
    except OSError as e:
        return f"Rscript {rscript!r} cannot be run: {e.strerror}"
    if r.returncode != 0:
        return "the R package GaussSuppression does not load: " + " ".join(r.stderr.split())[:300]
    return None


def write_inner(munis: int, regions: int, path: Path) -> None:
    """The microdata of suppression_scale.py, aggregated to inner cells in a CSV."""
    records = munis * 18 * 2 * 5
    with pt.Session(":memory:", progress=False) as s:
        s.con.execute(GEN, [regions, munis, records])
        s.con.execute(INNER.format(path=str(path).replace("'", "''")))


def run_protab(path: Path, munis: int, regions: int) -> dict:
    """protab's Session.suppress on the inner cells of the CSV; X for the rank test."""
    with pt.Session(":memory:", progress=False) as s:
        s.con.execute(
            "CREATE TABLE inner_cells AS SELECT * FROM read_csv(?, header = true, columns = "
            "{'region': 'VARCHAR', 'm': 'VARCHAR', 'broad': 'VARCHAR', 'a': 'VARCHAR', 's': 'VARCHAR', "
            "'freq': 'BIGINT'})",
            [str(path)],
        )
        spec = pt.TableSpec(hierarchies(munis, regions), freq="freq")
        t0 = time.perf_counter()
        out = s.suppress("inner_cells", spec, min_frequency=4)
        seconds = time.perf_counter() - t0
        X, _, published = s.model_matrix("inner_cells", spec)
    label = out["suppressed"]
    cells = published.select(DIMS, n=pl.col("n")).with_columns(
        primary=(label == "primary").to_numpy(), suppressed=(label != "no").to_numpy())
    if not out.select(DIMS).equals(published.select(DIMS)):
        raise RuntimeError("Session.suppress and Session.model_matrix list the published cells in different orders")
    return {"seconds": seconds, "cells": cells, "X": X}


def run_r(path: Path, out: Path, rscript: str, rlib: str, timeout: float) -> dict | str:
    """SuppressSmallCounts through Rscript: the cells and the time, or why there are none."""
    try:
        r = subprocess.run([rscript, str(R_SCRIPT), str(path), str(out), rlib],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"R did not finish within {timeout:.0f} s"
    if r.returncode != 0:
        return "R failed: " + " | ".join(r.stderr.strip().splitlines()[-3:])
    seconds = float(next(x.split()[1] for x in r.stdout.splitlines() if x.startswith("elapsed_s")))
    cells = pl.read_csv(out, schema_overrides={d: pl.Utf8 for d in DIMS})
    cells = cells.with_columns([  # R's margin code "Total" (or "total") as protab's
        pl.when(pl.col(d).str.to_lowercase() == "total").then(pl.lit("Total")).otherwise(pl.col(d)).alias(d)
        for d in DIMS])
    version = next((x for x in r.stdout.splitlines() if x.startswith("versions")), "")
    return {"seconds": seconds, "cells": cells, "version": version}


def compare(p: dict, r: dict) -> dict:
    """Cell-for-cell comparison of the two patterns (matched by codes); rank tests where they differ."""
    both = p["cells"].with_row_index("j").join(r["cells"], on=DIMS, how="full", coalesce=True, suffix="_r")
    unmatched = both.filter(pl.col("j").is_null() | pl.col("freq").is_null()).height
    both = both.filter(pl.col("j").is_not_null() & pl.col("freq").is_not_null()).sort("j")
    res = {"unmatched": unmatched, "count_mismatch": both.filter(pl.col("n") != pl.col("freq")).height,
           "primary_differ": both.filter(pl.col("primary") != pl.col("primary_r")).height,
           "differ": both.filter(pl.col("suppressed") != pl.col("suppressed_r")).height}
    for side, col in (("protab", "suppressed"), ("R", "suppressed_r")):
        res[f"total_{side}"] = int(both.filter(pl.col(col))["n"].sum())
    res["safe_protab"] = res["safe_R"] = "-"
    if res["differ"] and not unmatched:
        X = p["X"]
        primary = both["primary"].to_numpy()
        for side, col in (("protab", "suppressed"), ("R", "suppressed_r")):
            leaks = derivable(X, both[col].to_numpy())[primary]
            res[f"safe_{side}"] = "yes" if not leaks.any() else f"NO ({int(leaks.sum())} primary derivable)"
    return res


def counts(cells: pl.DataFrame) -> tuple[int, int]:
    """(primary, secondary) suppressions."""
    primary = int(cells["primary"].sum())
    return primary, int(cells["suppressed"].sum()) - primary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--large", action="store_true", help="also about 6.5e5 published cells")
    ap.add_argument("--r-timeout", type=float, default=1200.0, help="seconds R may take per table (default 1200)")
    ap.add_argument("--rscript", default=shutil.which("Rscript"), help="the Rscript program")
    ap.add_argument("--rlib", default=os.environ.get("PROTAB_RLIB", "/work/rlib_c"),
                    help="R library that holds GaussSuppression (default /work/rlib_c or $PROTAB_RLIB)")
    ap.add_argument("--extra", type=int, nargs=2, metavar=("MUNICIPALITIES", "REGIONS"), action="append",
                    default=[], help="also a table of this many municipalities and regions (repeatable)")
    ap.add_argument("--only-extra", action="store_true", help="only the --extra tables")
    args = ap.parse_args()
    why = r_available(args.rscript, args.rlib)
    if why:
        print(f"GaussSuppression is not available ({why}): protab runs alone, nothing is compared.")
    else:
        print(f"Rscript {args.rscript}, R library {args.rlib}")
    sizes = [] if args.only_extra else [(110, 10), (1450, 40)] + ([(9800, 40)] if args.large else [])
    sizes += [tuple(x) for x in args.extra]
    for munis, regions in sizes:
        with tempfile.TemporaryDirectory(prefix="protab_vs_r_") as tmp:
            path = Path(tmp) / "inner.csv"
            write_inner(munis, regions, path)
            p = run_protab(path, munis, regions)
            pp, ps = counts(p["cells"])
            print(f"\n{p['cells'].height:,} published cells ({munis} municipalities, {regions} regions)")
            print(f"  protab  {p['seconds']:9.2f} s   primary {pp:>7,}   secondary {ps:>7,}", flush=True)
            if why:
                continue
            r = run_r(path, Path(tmp) / "r_out.csv", args.rscript, args.rlib, args.r_timeout)
            if isinstance(r, str):
                print(f"  R       {r}")
                continue
            rp, rs = counts(r["cells"])
            print(f"  R       {r['seconds']:9.2f} s   primary {rp:>7,}   secondary {rs:>7,}   ({r['version']})")
            c = compare(p, r)
            print(f"  ratio protab/R {p['seconds'] / r['seconds']:.3f}")
            if c["unmatched"] or c["count_mismatch"]:
                print(f"  cells not matched by codes: {c['unmatched']:,}; matched cells with other counts: "
                      f"{c['count_mismatch']:,}")
            same = c["differ"] == 0 and not c["unmatched"]
            print(f"  patterns identical cell for cell: {'yes' if same else 'no'}"
                  + ("" if same else f" ({c['differ']:,} cells differ; primary differ at {c['primary_differ']:,})"))
            if not same:
                print(f"  suppressed cells  protab {pp + ps:,} (total count {c['total_protab']:,})   "
                      f"R {rp + rs:,} (total count {c['total_R']:,})")
                print(f"  no primary cell derivable (rank test)  protab {c['safe_protab']}   R {c['safe_R']}")


if __name__ == "__main__":
    main()
