"""Benchmark: the SQL macro ckm() against Session.cell_key, the ONS package and a plain GROUP BY.

    python benchmarks/ckm_macro_scale.py            # 1e6 records
    python benchmarks/ckm_macro_scale.py --large    # adds 1e7 records
    python benchmarks/ckm_macro_scale.py --old      # also the interval-search macro it replaced

The flat table of benchmarks/ckm_scale.py (municipality × age × occupation, 288,000 possible
cells, no margins) with two installed p-tables: a maximum-entropy one (D=5, V=3, js=2) with
32-bit record keys, and an ONS-layout one (pcv 1..750, period 250, 8-bit keys) whose noise
depends on the key differently in every row. Timed, in the same process on the same table:

- macro: ``SELECT m, a, o, ckm(count(*), sum(rkey)) FROM t GROUP BY ALL`` fetched as Arrow
  through the duckdb Python API (the SQL an analyst types in the duckdb CLI);
- cell_key: ``Session.cell_key`` of the same flat table (``margins=False``, ``drop_empty=True``:
  the same cells), result as polars;
- ONS: ``create_perturbed_table`` of ONSdigital cell-key-perturbation (pandas; ONS p-table only,
  its data frame made beforehand and not timed), threshold 0;
- GROUP BY: ``SELECT m, a, o, count(*), sum(rkey) FROM t GROUP BY ALL`` as Arrow.

Each runs once to warm up, then all alternate ``--repeat`` times (the ONS package
``--ons-repeat`` times); the best time counts. The macro's counts are checked against
cell_key's (and the ONS package's) before timing.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import polars as pl
from ckm_scale import GEN

import protab as pt
from protab.engines.duckdb_ptable import install_ptable

MACRO = "SELECT m, a, o, ckm(count(*), sum(rkey)) AS n_pert FROM t GROUP BY ALL"
GROUP_BY = "SELECT m, a, o, count(*) AS n, sum(rkey) AS k FROM t GROUP BY ALL"
SPEC = pt.TableSpec({"m": None, "a": None, "o": None}, margins=False, drop_empty=True)

# the macro this benchmark's one replaced: a correlated search over the key intervals
OLD_MACRO = """
CREATE OR REPLACE TEMP MACRO ckm_old(n, ksum) AS n + coalesce(
    (SELECT list(protab_v ORDER BY protab_i) FROM protab_ptable
      WHERE (ksum) % (SELECT modulus FROM protab_ptable_meta) BETWEEN protab_klo AND protab_khi)
    [protab_row_class(n, (SELECT imin FROM protab_ptable_meta), (SELECT imax FROM protab_ptable_meta),
                      (SELECT period FROM protab_ptable_meta)) - (SELECT imin FROM protab_ptable_meta) + 1], 0)
"""


def ons_layout() -> pt.PTable:
    """pcv 1..750, 8-bit keys: maximum-entropy rows with the keys rotated by row."""
    ons = pt.PTable.maximum_entropy(D=5, V=3, js=2).to_ons(256)
    return pt.PTable.from_ons(ons.with_columns(ckey=(pl.col("ckey") + 37 * pl.col("pcv")) % 256))


def best_of(fns: dict[str, Callable[[], object]], repeat: int, once: frozenset[str] = frozenset(),
            once_repeat: int = 1) -> dict[str, float]:
    """Best time of each function, run alternately after one warm-up each (``once``: the
    functions run ``once_repeat`` times only, without warm-up), so that the load of a shared
    machine falls on all alike."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for k, fn in fns.items():
        if k not in once:
            fn()
    for r in range(repeat):
        for k, fn in fns.items():
            if k in once and r >= once_repeat:
                continue
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: min(v) for k, v in times.items()}


def run(n: int, repeat: int, ons_repeat: int, threads: int | None, old: bool) -> list[dict[str, object]]:
    from cell_key_perturbation.create_perturbed_table import create_perturbed_table

    rows = []
    with pt.Session(":memory:", threads=threads, progress=False) as s:
        s.con.execute(GEN, [40, n])
        for name, p, bits in (("max-entropy", pt.PTable.maximum_entropy(D=5, V=3, js=2), 32),
                              ("ONS 750", ons_layout(), 8)):
            s.add_record_keys("t", id_column="pid", seed="benchmark-seed", bits=bits, replace=True)
            install_ptable(s.con, p, 2**bits)
            fns: dict[str, Callable[[], object]] = {
                "group_by": lambda: s.con.sql(GROUP_BY).to_arrow_table(),
                "macro": lambda: s.con.sql(MACRO).to_arrow_table(),
                "cell_key": lambda p=p: s.cell_key("t", SPEC, p),
            }
            macro = pl.from_arrow(s.con.sql(MACRO).to_arrow_table()).sort("m", "a", "o")
            want = s.cell_key("t", SPEC, p).sort("m", "a", "o")
            assert macro["n_pert"].to_list() == want["n_pert"].to_list(), "macro and cell_key differ"
            if bits == 8:
                frame = s.con.sql("SELECT m, a, o, CAST(rkey AS BIGINT) AS record_key FROM t").df()
                ons_p = p.to_ons(256).to_pandas()

                def ons(frame=frame, ons_p=ons_p):
                    return create_perturbed_table(data=frame, ptable=ons_p, geog=["m"], tab_vars=["a", "o"],
                                                  record_key="record_key", threshold=0)

                theirs = ons()
                theirs = pl.from_pandas(theirs[theirs["pre_sdc_count"] > 0][["m", "a", "o", "count"]])
                assert theirs.sort("m", "a", "o")["count"].to_list() == macro["n_pert"].to_list(), \
                    "macro and the ONS package differ"
                fns["ons"] = ons
            if old:
                s.con.execute(OLD_MACRO)
                fns["old_macro"] = lambda: s.con.sql(MACRO.replace("ckm(", "ckm_old(")).to_arrow_table()
            t = best_of(fns, repeat, once=frozenset({"ons", "old_macro"}), once_repeat=ons_repeat)
            rows.append({"records": n, "ptable": name, "cells": macro.height, **t})
    return rows


HEADER = (f"{'records':>12} {'p-table':<12}{'cells':>9}{'GROUP BY s':>12}{'macro s':>9}{'cell_key s':>12}"
          f"{'ONS s':>8}{'macro/cell_key':>16}{'macro/ONS':>11}{'macro/GROUP BY':>16}")


def line(r: dict[str, object]) -> str:
    """One row of the printed table (HEADER names the columns)."""
    ons = r.get("ons")
    ons_s, ons_ratio = (f"{ons:>8.3f}", f"{r['macro'] / ons:>11.3f}") if ons else (f"{'-':>8}", f"{'-':>11}")
    out = (f"{r['records']:>12,} {r['ptable']:<12}{r['cells']:>9,}{r['group_by']:>12.3f}{r['macro']:>9.3f}"
           f"{r['cell_key']:>12.3f}{ons_s}{r['macro'] / r['cell_key']:>16.2f}{ons_ratio}"
           f"{r['macro'] / r['group_by']:>16.2f}")
    if "old_macro" in r:
        out += f"   (old macro {r['old_macro']:.3f} s)"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="*", type=float, default=[1e6])
    ap.add_argument("--large", action="store_true", help="also 1e7 records")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ons-repeat", type=int, default=2, help="timed runs of the ONS package (and --old)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--old", action="store_true", help="also time the interval-search macro (slow)")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes] + ([10_000_000] if args.large else [])
    print(HEADER)
    for n in sizes:
        for r in run(n, args.repeat, args.ons_repeat, args.threads, args.old):
            print(line(r), flush=True)


if __name__ == "__main__":
    main()
