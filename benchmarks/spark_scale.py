"""Benchmark: the same cell-key table on local Spark and on DuckDB, in one run (issue 14).

    python benchmarks/spark_scale.py                  # 1e6 records
    python benchmarks/spark_scale.py --large          # 1e6 and 1e7 records
    python benchmarks/spark_scale.py --master local[2] --sizes 1e6

Synthetic microdata (generated in DuckDB, record keys added there, written once to Parquet)
with three hierarchical dimensions: municipality (8 regions → 400 municipalities), age (3
broad groups → 18 five-year groups), occupation (10 groups → 40 codes). Both engines read
the same Parquet file (DuckDB: a view over it; Spark: ``spark.read.parquet``) and run the whole
``Session.cell_key`` (one scan to inner cells, the roll-up to every margin, the p-table join,
the result in polars); the results must be equal frame for frame. Printed per size, each the
best of ``--repeat`` runs after a warm-up, in one SparkSession (protab's local defaults,
docs/spark.md, unless ``--partitions``):

- Spark's floor for counts: its own GROUP BY of the records to the same inner cells with the
  record-key sum, collected to the driver; protab's count table on Spark against it (/floor);
- the same table on DuckDB and the ratio Spark / DuckDB;
- the top-k floor for magnitudes: that GROUP BY plus the sum of a skewed variable x, its
  non-zero contributions and its top-3 and bottom-3 lists (``max_by(x, x, 3)``); protab's
  magnitude table (sums, top-3 lists, p% and dominance rules, the cell key method for
  magnitudes, all margins) against it; and on DuckDB;
- the count table written as Parquet by Spark's executors (nothing collected; read back and
  checked equal); the peak resident memory of the driver (Python with DuckDB) and of Spark's
  JVM (a child process, read from /proc).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import measurements
import polars as pl
from polars.testing import assert_frame_equal
from synthetic import best, population_sql

import protab as pt
from protab.magnitude import MagnitudeCKM, SensitivityRules
from protab.ptable.magnitude_ptable import MagnitudePTable

GEN = "COPY (\n" + population_sql("{n}", extra=(
    ",\n       CAST(protab_record_key('benchmark-seed', range, 32) AS BIGINT) AS rkey,"
    "\n       round(100 * pow((hash(range * 3 + 5) % 1000003 + 1) / 1000004.0, -0.8), 2) AS x"
)) + ") TO '{path}' (FORMAT parquet)\n"


def hierarchies() -> dict[str, pt.Hierarchy]:
    muni = [f"R{r}{k:03d}" for r in range(1, 9) for k in range(1, 51)]
    ages = [f"{a:02d}" for a in range(18)]
    occ = [f"O{o:02d}" for o in range(40)]
    return {
        "m": pt.Hierarchy.from_code_lengths(muni, [2, 3]),
        "a": pt.Hierarchy.from_parent_child(
            [("young" if int(a) < 4 else "working" if int(a) < 13 else "old", a) for a in ages]),
        "o": pt.Hierarchy.from_parent_child([(f"G{int(c[1:]) // 4}", c) for c in occ]),
    }


def jvm_peak_kib() -> int:
    """The peak resident memory (VmHWM) of this process's Java children, in KiB (Linux)."""
    peak = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        if "\nName:\tjava" not in "\n" + text:
            continue
        for line in text.splitlines():
            if line.startswith("VmHWM:"):
                peak = max(peak, int(line.split()[1]))
    return peak



#: the floors: the cheapest Spark queries any design must run for the same inner cells, collected
#: to the driver as protab's frames are (counts: the GROUP BY with the record-key sum; magnitudes:
#: plus the sums, the number of non-zero contributions and the top-3 and bottom-3 lists)
COUNT_FLOOR = "SELECT m, a, o, count(*) AS n, pmod(sum(rkey), 4294967296) AS k FROM persons GROUP BY m, a, o"
TOPK_FLOOR = ("SELECT m, a, o, count(*) AS n, pmod(sum(rkey), 4294967296) AS k, sum(x) AS s, "
              "count_if(x <> 0) AS nz, max_by(x, x, 3) AS top, min_by(x, x, 3) AS bottom "
              "FROM persons GROUP BY m, a, o")


def spark_session(master: str, warehouse: Path, partitions: int | None):
    """The benchmark's SparkSession: protab's local defaults unless ``--partitions`` is given."""
    from pyspark.sql import SparkSession as PySparkSession

    builder = (PySparkSession.builder.master(master).appName("protab-spark-scale")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "2g").config("spark.sql.warehouse.dir", str(warehouse)))
    if partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(partitions))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_size(spark, n: int, tmp: Path, repeat: int) -> dict[str, float]:
    """One size: DuckDB and Spark, counts and magnitudes, each against its floor."""
    h = hierarchies()
    spec = pt.TableSpec({"m": h["m"], "a": h["a"], "o": h["o"]})
    spec_x = pt.TableSpec({"m": h["m"], "a": h["a"], "o": h["o"]}, sums=["x"])
    p = pt.PTable.maximum_entropy(D=5, V=3, js=2)
    mag = MagnitudeCKM(MagnitudePTable.maximum_entropy(10, 3, step=2, icat=[1, 5, 10], optim=[4, 1, 1]),
                       fp=500, p=(0.25, 0.05), epsilon=[1, 0.5, 0.2])
    rules = SensitivityRules(min_frequency=3, dominance=[(1, 85)], p_percent=10)
    path = tmp / f"persons_{n}.parquet"
    r: dict[str, float] = {"records": n}
    with pt.Session(":memory:") as d:
        d.con.execute(GEN.format(n=int(n), path=str(path).replace("'", "''")))
        d.register("persons", str(path))
        d.add_record_keys("persons", record_key_column="rkey", bits=32, name="rkey")  # the keys as they are
        r["duckdb"], a = best(lambda: d.cell_key("persons", spec, p, original=True), repeat)
        r["mag duckdb"], ma = best(lambda: d.cell_key("persons", spec_x, p, magnitude=mag, rules=rules), 1)
    s = pt.Session.spark(spark)
    s.register("persons", str(path), replace=True)
    s.use_record_keys("persons", "rkey", 2**32)
    r["floor"], inner = best(lambda: s.engine.arrow(COUNT_FLOOR), repeat)
    r["topk floor"], _ = best(lambda: s.engine.arrow(TOPK_FLOOR), repeat)
    r["spark"], b = best(lambda: s.cell_key("persons", spec, p, original=True), repeat)
    assert_frame_equal(a, b)  # type: ignore[arg-type]
    r["mag spark"], mb = best(lambda: s.cell_key("persons", spec_x, p, magnitude=mag, rules=rules), 1)
    assert_frame_equal(ma, mb)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    out = s.cell_key("persons", spec, p, original=True, path=tmp / f"out_{n}")
    r["to parquet"] = time.perf_counter() - t0
    assert_frame_equal(a, pl.read_parquet(f"{out}/*.parquet"))  # type: ignore[arg-type]
    s.close()
    r["cells"], r["inner"] = a.height, inner.num_rows  # type: ignore[attr-defined]
    return r


def recorded(r: dict[str, float], driver_gib: float) -> list[dict[str, object]]:
    """The measurements rows of one size: counts and magnitudes on Spark against Spark's floors."""
    common = {"inner_cells": int(r["inner"]), "published_cells": int(r["cells"]), "peak_rss_gib": driver_gib}
    return [
        measurements.row("spark_scale", "counts", "spark", r["records"], r["spark"], "Spark GROUP BY + key sum",
                         r["floor"], **common),
        measurements.row("spark_scale", "magnitudes", "spark", r["records"], r["mag spark"], "Spark top-k floor",
                         r["topk floor"], **common),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="*", type=float, default=None)
    ap.add_argument("--large", action="store_true", help="1e6 and 1e7 records")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--partitions", type=int, default=None,
                    help="spark.sql.shuffle.partitions (default: protab's local defaults, docs/spark.md)")
    ap.add_argument("--repeat", type=int, default=2)
    measurements.add_option(ap)
    args = ap.parse_args()
    sizes = [int(x) for x in (args.sizes or ([1e6, 1e7] if args.large else [1e6]))]
    tmp = Path(tempfile.mkdtemp(prefix="protab-spark-bench-"))
    spark = spark_session(args.master, tmp / "warehouse", args.partitions)
    print(f"{'records':>12}{'inner':>9}{'cells':>9}{'floor s':>9}{'spark s':>9}{'/floor':>8}{'duckdb s':>10}"
          f"{'spark/duck':>11}{'topk floor s':>13}{'mag spark s':>12}{'/floor':>8}{'mag duck s':>11}"
          f"{'to parquet s':>13}{'driver MiB':>11}{'jvm MiB':>9}")
    for n in sizes:
        r = run_size(spark, n, tmp, args.repeat)
        driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{n:>12,}{r['inner']:>9,.0f}{r['cells']:>9,.0f}{r['floor']:>9.2f}{r['spark']:>9.2f}"
              f"{r['spark'] / r['floor']:>8.2f}{r['duckdb']:>10.2f}{r['spark'] / r['duckdb']:>11.1f}"
              f"{r['topk floor']:>13.2f}{r['mag spark']:>12.2f}{r['mag spark'] / r['topk floor']:>8.2f}"
              f"{r['mag duckdb']:>11.2f}{r['to parquet']:>13.2f}{driver:>11.0f}{jvm_peak_kib() / 1024:>9.0f}", flush=True)
        if args.record:
            measurements.append(args.record, recorded(r, driver / 1024))
    spark.stop()


if __name__ == "__main__":
    main()
