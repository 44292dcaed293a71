"""Benchmark: a cell-key protected table with all margins, against a plain DuckDB GROUP BY.

    python benchmarks/ckm_scale.py                # 1e6 and 1e7 records
    python benchmarks/ckm_scale.py --sizes 1e6    # one size
    python benchmarks/ckm_scale.py --large        # adds 5e7 records

Synthetic microdata (generated in SQL, record keys added once) with three hierarchical
dimensions: municipality (8 regions → 400 municipalities), age (3 broad groups → 18 five-year
groups) and occupation (10 groups → 40 codes; `--occupations 10` for a smaller table of 2
groups → 10 codes). The timed protab run is the whole
`Session.cell_key` call — one scan to inner cells, the roll-up to every margin at every
level, the p-table join and the result in polars. The baseline, in the same process on the
same table, is a plain `SELECT m, a, o, count(*) FROM t GROUP BY ALL` of the inner cells
fetched as Arrow. Each is run once to warm up, then the two alternate `--repeat` times (default
5); the best time of each counts. Also printed: the *key-sum floor*, the same GROUP BY
with the cell key's sum of record keys (``sum(rkey)``, what any cell key method must add to
the scan; summed as BIGINT, DOUBLE or two 16-bit halves it costs the same), over the GROUP BY.
Peak memory is the process's resident high-water mark (DuckDB's allocations included).
"""

from __future__ import annotations

import argparse
import resource
import time

import measurements
import polars as pl
from synthetic import population_sql

import protab as pt

GEN = "CREATE OR REPLACE TABLE t AS\n" + population_sql("?", "?")


def hierarchies(occupations: int) -> dict[str, pt.Hierarchy]:
    muni = [f"R{r}{k:03d}" for r in range(1, 9) for k in range(1, 51)]
    ages = [f"{a:02d}" for a in range(18)]
    occ = [f"O{o:02d}" for o in range(occupations)]
    return {
        "m": pt.Hierarchy.from_code_lengths(muni, [2, 3]),
        "a": pt.Hierarchy.from_parent_child(
            [("young" if int(a) < 4 else "working" if int(a) < 13 else "old", a) for a in ages]),
        "o": pt.Hierarchy.from_parent_child([(f"G{int(c[1:]) // 4}", c) for c in occ]),
    }


def best_pair(fn_a, fn_b, repeat: int) -> tuple[float, float]:
    """Best times of two functions run alternately (after one warm-up each), so that the
    load of a shared machine falls on both alike."""
    fn_a()
    fn_b()
    ta, tb = [], []
    for _ in range(repeat):
        for fn, times in ((fn_a, ta), (fn_b, tb)):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return min(ta), min(tb)


def run(n: int, repeat: int, threads: int | None, occupations: int) -> dict[str, float]:
    with pt.Session(":memory:", threads=threads, progress=False) as s:
        s.con.execute(GEN, [occupations, n])
        s.add_record_keys("t", id_column="pid", seed="benchmark-seed")
        spec = pt.TableSpec(hierarchies(occupations))
        p = pt.PTable.maximum_entropy(D=5, V=3, js=2)
        cells = {}

        def protab_run() -> None:
            cells["out"] = s.cell_key("t", spec, p)

        def baseline() -> None:
            cells["inner"] = s.con.sql("SELECT m, a, o, count(*) AS n FROM t GROUP BY ALL").to_arrow_table()

        def floor() -> None:
            s.con.sql("SELECT m, a, o, count(*) AS n, sum(rkey) AS k FROM t GROUP BY ALL").to_arrow_table()

        t_base, t_protab = best_pair(baseline, protab_run, repeat)
        t_base2, t_floor = best_pair(baseline, floor, repeat)
        print(f"    key-sum floor at {n:,}: GROUP BY {t_base2:.3f} s, with the key sum {t_floor:.3f} s "
              f"= {t_floor / t_base2:.2f}x", flush=True)
        out: pl.DataFrame = cells["out"]
        r = result(n, cells["inner"].num_rows, out.height, t_base, t_protab)
        r["floor_s"] = t_floor
        return r


def result(records: int, inner: int, published: int, t_base: float, t_protab: float) -> dict[str, float]:
    """One measured size: the row that :func:`line` prints."""
    return {
        "records": records,
        "inner_cells": inner,
        "published_cells": published,
        "baseline_s": t_base,
        "protab_s": t_protab,
        "ratio": t_protab / t_base,
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="*", type=float, default=[1e6, 1e7])
    ap.add_argument("--large", action="store_true", help="also 5e7 records")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--occupations", type=int, default=40, help="occupation codes (4 per group)")
    measurements.add_option(ap)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes] + ([50_000_000] if args.large else [])
    print(HEADER)
    for n in sizes:
        r = run(n, args.repeat, args.threads, args.occupations)
        print(line(r), flush=True)
        if args.record:
            measurements.append(args.record, [recorded("ckm_scale", "counts", "GROUP BY + key sum", r)])


def recorded(benchmark: str, method: str, floor: str, r: dict[str, float]) -> dict[str, object]:
    """The measurements row of one size (protab against the floor, the bare GROUP BY beside)."""
    return measurements.row(benchmark, method, "duckdb", r["records"], r["protab_s"], floor, r["floor_s"],
                            inner_cells=int(r["inner_cells"]), published_cells=int(r["published_cells"]),
                            groupby_s=r["baseline_s"], peak_rss_gib=r["peak_rss_gib"])


HEADER = (f"{'records':>12}{'inner':>10}{'published':>11}{'GROUP BY s':>12}{'protab s':>10}"
          f"{'ratio':>8}{'peak RSS GiB':>14}")


def line(r: dict[str, float]) -> str:
    """One row of the table the scale benchmarks print (HEADER names the columns)."""
    return (f"{r['records']:>12,}{r['inner_cells']:>10,}{r['published_cells']:>11,}"
            f"{r['baseline_s']:>12.3f}{r['protab_s']:>10.3f}{r['ratio']:>8.2f}{r['peak_rss_gib']:>14.2f}")


if __name__ == "__main__":
    main()
