"""Benchmark: the same cell-key table on local Spark and on DuckDB, in one run (issue 14).

    python benchmarks/spark_scale.py                  # 1e6 records
    python benchmarks/spark_scale.py --large          # 1e6 and 1e7 records
    python benchmarks/spark_scale.py --master local[2] --sizes 1e6

Synthetic microdata (generated in DuckDB, record keys added there, written once to Parquet)
with three hierarchical dimensions: municipality (8 regions → 400 municipalities), age (3
broad groups → 18 five-year groups), occupation (10 groups → 40 codes). Both engines read
the same Parquet file (DuckDB: a view over it; Spark: ``spark.read.parquet``) and run the whole
``Session.cell_key`` (one scan to inner cells, the roll-up to every margin, the p-table join,
the result in polars); the results must be equal frame for frame. Printed per size: the
best of ``--repeat`` runs per engine after a warm-up, the ratio Spark / DuckDB, the time
of the Spark stages (scan to inner cells: the only stage that reads records; all later
stages read inner cells), the time of the same table written as Parquet by Spark's
executors (``cell_key(..., path=...)``: nothing collected; read back and checked equal), the
magnitude table of the same cells (a skewed variable x: sums, top-3 lists, p% and dominance
rules, the cell key method for magnitudes) on both engines (also checked equal), and the
peak resident memory of the driver process (the Python process with DuckDB; Spark's JVM is
a child process and is measured apart, from /proc).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

import protab as pt
from protab.magnitude import MagnitudeCKM, SensitivityRules
from protab.ptable.magnitude_ptable import MagnitudePTable

GEN = """
COPY (
SELECT range AS pid,
       'R' || CAST(m % 8 + 1 AS VARCHAR) || lpad(CAST(m // 8 + 1 AS VARCHAR), 3, '0') AS m,
       lpad(CAST(a AS VARCHAR), 2, '0') AS a,
       'O' || lpad(CAST(o AS VARCHAR), 2, '0') AS o,
       CAST(protab_record_key('benchmark-seed', range, 32) AS BIGINT) AS rkey,
       round(100 * pow((hash(range * 3 + 5) % 1000003 + 1) / 1000004.0, -0.8), 2) AS x
FROM (
    SELECT range,
           CAST(floor(400 * pow((hash(range * 3) % 1000003) / 1000003.0, 2)) AS INTEGER) AS m,
           CAST(floor(18 * (hash(range * 3 + 1) % 1000003) / 1000003.0) AS INTEGER) AS a,
           CAST(floor(40 * pow((hash(range * 3 + 2) % 1000003) / 1000003.0, 1.5)) AS INTEGER) AS o
    FROM range({n})
)) TO '{path}' (FORMAT parquet)
"""


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


def best(fn, repeat: int) -> tuple[float, object]:
    out = fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="*", type=float, default=None)
    ap.add_argument("--large", action="store_true", help="1e6 and 1e7 records")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    sizes = [int(x) for x in (args.sizes or ([1e6, 1e7] if args.large else [1e6]))]

    from pyspark.sql import SparkSession as PySparkSession

    tmp = Path(tempfile.mkdtemp(prefix="protab-spark-bench-"))
    spark = (PySparkSession.builder.master(args.master).appName("protab-spark-scale")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "2g")
             .config("spark.sql.shuffle.partitions", "8")
             .config("spark.sql.warehouse.dir", str(tmp / "warehouse")).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    h = hierarchies()
    spec = pt.TableSpec({"m": h["m"], "a": h["a"], "o": h["o"]})
    p = pt.PTable.maximum_entropy(D=5, V=3, js=2)
    spec_x = pt.TableSpec({"m": h["m"], "a": h["a"], "o": h["o"]}, sums=["x"])
    mag = MagnitudeCKM(MagnitudePTable.maximum_entropy(10, 3, step=2, icat=[1, 5, 10], optim=[4, 1, 1]),
                       fp=500, p=(0.25, 0.05), epsilon=[1, 0.5, 0.2])
    rules = SensitivityRules(min_frequency=3, dominance=[(1, 85)], p_percent=10)

    def magnitudes(sess: pt.Session) -> pl.DataFrame:
        return sess.cell_key("persons", spec_x, p, magnitude=mag, rules=rules)

    print(f"{'records':>12}{'cells':>10}{'duckdb s':>10}{'spark s':>10}{'ratio':>8}{'spark scan s':>14}"
          f"{'to parquet s':>14}{'mag duckdb s':>14}{'mag spark s':>13}{'ratio':>7}{'driver MiB':>12}{'jvm MiB':>9}")
    for n in sizes:
        path = tmp / f"persons_{n}.parquet"
        with pt.Session(":memory:") as d:
            d.con.execute(GEN.format(n=int(n), path=str(path).replace("'", "''")))
            d.register("persons", str(path))
            d.add_record_keys("persons", record_key_column="rkey", bits=32, name="rkey")  # the keys as they are
            t_duck, a = best(lambda d=d: d.cell_key("persons", spec, p, original=True), args.repeat)
            t_mduck, ma = best(lambda d=d: magnitudes(d), 1)
        s = pt.Session.spark(spark)
        s.register("persons", str(path), replace=True)
        s.use_record_keys("persons", "rkey", 2**32)
        t_spark, b = best(lambda s=s: s.cell_key("persons", spec, p, original=True), args.repeat)
        assert_frame_equal(a, b)  # type: ignore[arg-type]
        t0 = time.perf_counter()
        out = s.cell_key("persons", spec, p, original=True, path=tmp / f"out_{n}")
        t_write = time.perf_counter() - t0
        assert_frame_equal(a, pl.read_parquet(f"{out}/*.parquet"))  # type: ignore[arg-type]
        # the one stage that reads records: the scan to inner cells (GROUP BY of the records)
        t0 = time.perf_counter()
        inner = s.sql("SELECT m, a, o, count(*) AS n, pmod(sum(rkey), 4294967296) AS k FROM persons GROUP BY ALL")
        t_scan = time.perf_counter() - t0
        del inner
        t_mspark, mb = best(lambda s=s: magnitudes(s), 1)
        assert_frame_equal(ma, mb)
        s.close()
        driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{n:>12,}{a.height:>10,}{t_duck:>10.2f}{t_spark:>10.2f}{t_spark / t_duck:>8.1f}{t_scan:>14.2f}{t_write:>14.2f}"  # type: ignore[attr-defined]
              f"{t_mduck:>14.2f}{t_mspark:>13.2f}{t_mspark / t_mduck:>7.1f}"
              f"{driver:>12.0f}{jvm_peak_kib() / 1024:>9.0f}")
    spark.stop()


if __name__ == "__main__":
    main()
