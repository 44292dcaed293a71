"""Benchmark: small count rounding (SCR) and controlled rounding on census-like tables.

    python benchmarks/rounding_scale.py                      # 1e3, 1e4, 1e5 inner cells
    python benchmarks/rounding_scale.py --sizes 1e3 1e4 1e5 1e6
    python benchmarks/rounding_scale.py --time-limit 120     # controlled: seconds per table

Synthetic table: municipality (regions → municipalities, a hierarchy) × age (20 groups) ×
sex, the full crossing published with every margin at every level (TableSpec with the
municipality hierarchy). Municipality sizes are log-normal, inner counts Poisson around
size × age share / 2 (fixed seed): about 56 % zeros and 29 % counts of 1 or 2, as in small
areas of a census. Base 3 for both methods.

Where ``Rscript`` with the R package SmallCountRounding is installed (``--r``; install it
from its sources, statisticsnorway/ssb-smallcountrounding with SSBtools), SCR also runs in R
on the same data — ``PLSrounding(data, "n", roundBase = 3, dimVar = c("region",
"municipality", "age", "sex"))``, the hierarchy found from the region column — and the
benchmark prints R's time (PLSrounding alone, by ``system.time``) against protab's whole
``rounding.small_count`` call (model matrix included), with cells changed and Hellinger
utility of both, and checks R's result too has no published cell in 1..2. tau-ARGUS cannot
run here; the other ratios are against baselines measured in the same process on the same
data:

* SCR: the time of building X with ``protab.model_matrix`` (the SQL roll-up, inner × published)
  plus one product Xᵀy — what any method on this table pays before it starts. ``ratio`` is
  SCR's own time (X given) over that baseline.
* controlled: the time HiGHS takes for the LP relaxation of the same whole-table problem.
  Up to ``--whole-max`` inner cells the whole table is one MIP; above, it is partitioned by
  municipality (regions as blocks: first the region × age × sex table with its margins,
  then each region with its region × age × sex sums fixed), each part under a share of
  ``--time-limit``. ``gap`` is HiGHS' relative MIP gap (the largest over the parts);
  ``vs LP`` is the objective over the LP bound (≥ 1; near 1 means near optimal).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time

import measurements
import numpy as np
import polars as pl

import protab as pt
from protab import rounding as rnd
from protab.rounding._rounding_inputs import prepare, xty


def census(size: int, seed: int = 1, n_age: int = 20) -> tuple[pl.DataFrame, pt.TableSpec]:
    """About ``size`` inner cells: municipalities × n_age × 2 sexes, regions above."""
    rng = np.random.default_rng(seed)
    n_muni = max(2, size // (n_age * 2))
    n_reg = max(2, int(np.sqrt(n_muni) / 2))
    muni = np.array([f"M{k:06d}" for k in range(n_muni)])
    reg = [f"R{k % n_reg:03d}" for k in range(n_muni)]
    h = pt.Hierarchy.from_parent_child(list(zip(reg, muni)))
    pop = np.exp(rng.normal(3.0, 1.5, n_muni))
    age_share = rng.dirichlet(np.full(n_age, 5.0))
    lam = pop[:, None, None] * age_share[None, :, None] * 0.5 * np.ones((1, 1, 2))
    n = rng.poisson(lam).ravel()
    frame = pl.DataFrame(
        {
            "municipality": np.repeat(muni, n_age * 2),
            "age": np.tile(np.repeat([f"A{a:02d}" for a in range(n_age)], 2), n_muni),
            "sex": np.tile(["F", "M"], n_muni * n_age),
            "n": n,
        }
    )
    spec = pt.TableSpec({"municipality": h, "age": None, "sex": None})
    return frame.filter(pl.col("n") > 0), spec  # Extend0 brings the zeros back


R_SCRIPT = r"""
suppressMessages(library(SmallCountRounding))
args <- commandArgs(trailingOnly = TRUE)
d <- read.csv(args[1], colClasses = c(rep("character", 4), "integer"))
t <- system.time(a <- PLSrounding(d, "n", roundBase = 3,
                                  dimVar = c("region", "municipality", "age", "sex")))
write.csv(a$inner[, c("municipality", "age", "sex", "rounded")], args[2], row.names = FALSE)
cat(t[["elapsed"]], "\n")
"""


def r_available() -> bool:
    if shutil.which("Rscript") is None:
        return False
    ok = subprocess.run(["Rscript", "-e", "library(SmallCountRounding)"], capture_output=True)
    return ok.returncode == 0


def scr_vs_r(frame: pl.DataFrame, spec: pt.TableSpec) -> tuple[float, float] | None:
    """protab's small_count against R's PLSrounding on the same inner cells: (protab s, R s)."""
    h = spec.dimensions[0].hierarchy
    region = {m: h.parent_of(m) for m in frame["municipality"].unique().to_list()}
    data = frame.with_columns(pl.col("municipality").replace_strict(region).alias("region"))
    t0 = time.perf_counter()
    res = rnd.small_count(frame, spec, 3)
    t_py = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        src, dst, script = (os.path.join(tmp, f) for f in ("in.csv", "out.csv", "scr.R"))
        data.select("region", "municipality", "age", "sex", "n").write_csv(src)
        with open(script, "w", encoding="utf-8") as fh:
            fh.write(R_SCRIPT)
        run_r = subprocess.run(["Rscript", script, src, dst], capture_output=True, text=True)
        if run_r.returncode != 0:
            print(f"  R PLSrounding failed: {run_r.stderr.strip()[-300:]}")
            return None
        t_r = float(run_r.stdout.split()[-1])
        rounded = pl.read_csv(dst, schema_overrides={"age": pl.String, "sex": pl.String})
    keys = ["municipality", "age", "sex"]
    inner = res.inner.join(rounded.rename({"rounded": "r_rounded"}), on=keys, how="left",
                           maintain_order="left").with_columns(pl.col("r_rounded").fill_null(pl.col("n")))
    yr = inner["r_rounded"].to_numpy()
    z = xty(res.X, inner["n"].to_numpy())
    zr = xty(res.X, yr)
    r_small = int(((zr > 0) & (zr < 3)).sum())
    r_changed = int((yr != inner["n"].to_numpy()).sum())
    zp = res.published["rounded"].to_numpy()
    print(f"  SCR vs R    protab {t_py:.2f} s, R PLSrounding {t_r:.2f} s: ratio R/protab {t_r / t_py:6.1f}  "
          f"changed {int(res.changed.sum()):,} vs {r_changed:,}  HU published "
          f"{res.hellinger_utility:.5f} vs {pt.measures.hellinger_utility(z, zr):.5f}  "
          f"mean |diff| published {pt.measures.mean_absolute_deviation(z, zp):.5f} vs "
          f"{pt.measures.mean_absolute_deviation(z, zr):.5f}  R's published cells in 1..2: {r_small}  "
          f"load {os.getloadavg()}")
    return t_py, t_r


def run(size: int, time_limit: float, whole_max: int, methods: list[str], with_r: bool = False,
        record: str | None = None) -> None:
    frame, spec = census(size)
    # baseline: X and one product
    t0 = time.perf_counter()
    X, inner, _pub = pt.model_matrix(frame, spec)
    y = inner["n"].to_numpy()
    z = xty(X, y)
    t_base = time.perf_counter() - t0
    n_in, n_pub = X.shape
    small = int(((z > 0) & (z < 3)).sum())
    print(f"\n{n_in:>9,} inner cells, {n_pub:,} published ({small:,} published in 1..2); "
          f"X + Xᵀy: {t_base:.2f} s")

    if "scr" in methods:
        t_scr = scr(X, y, z, t_base)
        peer = scr_vs_r(frame, spec) if with_r else None
        if record:
            cells = {"inner_cells": n_in, "published_cells": n_pub}
            rows = [measurements.row("rounding_scale", "small count rounding", "python", None, t_scr,
                                     "X + Xᵀy", t_base, **cells)]
            if peer:  # the whole small_count call (X included) beside R's PLSrounding
                rows.append(measurements.row("rounding_scale", "small count rounding, whole call", "python", None,
                                             peer[0], "X + Xᵀy", t_base, peer="R PLSrounding", peer_s=peer[1],
                                             **cells))
            measurements.append(record, rows)
    if "controlled" in methods:
        crp(frame, spec, time_limit, whole_max)


def scr(X: object, y: np.ndarray, z: np.ndarray, t_base: float) -> float:
    t0 = time.perf_counter()
    yr, passes = rnd.small_count_matrix(X, y, 3)
    t_scr = time.perf_counter() - t0
    zr = xty(X, yr)
    assert not np.any((zr > 0) & (zr < 3))
    print(f"  SCR         {t_scr:8.2f} s  ratio {t_scr / t_base:6.2f}  passes {passes}  "
          f"changed {int((yr != y).sum()):,}  HU published {pt.measures.hellinger_utility(z, zr):.5f}  "
          f"inner {pt.measures.hellinger_utility(y, yr):.5f}  total {int(yr.sum() - y.sum()):+d}")
    return t_scr


def crp(frame: pl.DataFrame, spec: pt.TableSpec, time_limit: float, whole_max: int) -> None:
    prep = prepare(frame, spec, "n", "benchmark")
    n_in = prep.X.shape[0]
    partition = None if n_in <= whole_max else "municipality"
    # baseline: the first feasible rounding (tau-ARGUS' stop rule 2) of the same problem
    t0 = time.perf_counter()
    first = None
    try:
        first = rnd.controlled(frame, spec, 3, time_limit=time_limit, partition=partition, stop="first_feasible")
    except rnd.RoundingError as exc:
        print(f"  first feasible failed: {exc}")
    t_lp = time.perf_counter() - t0
    lp_bound = first.objective if first is not None else None  # objective to compare with
    t0 = time.perf_counter()
    try:
        res = rnd.controlled(frame, spec, 3, time_limit=time_limit, partition=partition)
    except rnd.RoundingError as exc:
        print(f"  controlled  failed: {exc}")
        return
    t_crp = time.perf_counter() - t0
    how = "whole" if partition is None else f"partitioned, {res.blocks} blocks"
    vs_lp = f"{res.objective / lp_bound:.4f}" if lp_bound else "n/a"
    print(f"  controlled  {t_crp:8.2f} s  ratio {t_crp / t_lp:6.2f} (first feasible {t_lp:.2f} s)  {how}  "
          f"{res.status}  gap {res.mip_gap:.2e}  Σ|a−z| {res.objective:,}  vs first feasible {vs_lp}  "
          f"changed inner {int((res.inner['rounded'] != res.inner['n']).sum()):,}  "
          f"HU published {pt.measures.hellinger_utility(res.published['n'], res.published['rounded']):.5f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="+", type=float, default=[1e3, 1e4, 1e5])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--whole-max", type=int, default=20_000)
    ap.add_argument("--methods", nargs="+", choices=["scr", "controlled"], default=["scr", "controlled"])
    ap.add_argument("--r", action="store_true", help="also run R's SmallCountRounding (needs Rscript)")
    measurements.add_option(ap)
    args = ap.parse_args()
    with_r = args.r and "scr" in args.methods
    if with_r and not r_available():
        print("--r: Rscript with the R package SmallCountRounding is not installed: protab's figures only")
        with_r = False
    run(1000, args.time_limit, args.whole_max, args.methods)  # warm-up (imports, DuckDB, HiGHS)
    print("\n--- timed runs ---")
    for s in args.sizes:
        run(int(s), args.time_limit, args.whole_max, args.methods, with_r, args.record)


if __name__ == "__main__":
    main()
