"""Benchmark: targeted record swapping in protab (DuckDB SQL) beside sdcMicro's C++ recordSwap.

    python benchmarks/swap_compare.py                          # protab alone, 1e5 persons
    python benchmarks/swap_compare.py --large                  # adds 1e6 and 4e7 persons
    python benchmarks/swap_compare.py --sdcmicro-src DIR       # side by side, 1e5 persons
    python benchmarks/swap_compare.py --sdcmicro-src DIR --sizes 1e5 1e6

A census-like population is generated in SQL: households of 1-6 persons (2.4 on average) in
8 regions > 400 municipalities > 1 km squares (about 22 persons a square, as a national grid
of 4e7 persons in 1.8 M squares), with tenure, dwelling type, and per person sex, ten-year
age group and citizenship (96 %, 3.5 %, 0.5 %). Risk: k-anonymity counts (k = 3) of
citizenship at every geography level; similarity profiles (hsize, tenure)
then (hsize); the dwelling type is carried along; swap rate 5 %. ``--scenario strict``: risk by
household size × citizenship × tenure and one profile (hsize, tenure, dwelling), no fallback.

``--sdcmicro-src DIR`` is a checkout of github.com/sdcTools/sdcMicro (not part of protab).
Its C++ core ``src/recordSwap/recordSwap.cpp`` needs only the C++ standard library (the Rcpp
glue is in ``src/recordSwap_R.cpp``), so a small driver written here is compiled with it by
g++ in a temporary folder; it reads the same population as CSV (sorted by household, as the R
wrapper sorts it), calls ``recordSwap`` with the same parameters and writes the swapped data.
Its time is that of the ``recordSwap`` call alone (reading and writing the CSV excluded);
protab's is the whole ``swap`` call (validation, risk, matching, writing the swapped table and
the log). For both, the achieved swap rate and the share of risky households swapped are
measured the same way from the output: a household is swapped when its geography changed,
risky when some member's count is below k at some level (computed here in plain SQL).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import duckdb

from protab.swapping import SwapSpec, swap

GEN = """
CREATE OR REPLACE TABLE persons AS
WITH h AS (
    SELECT range AS hid,
           CAST(floor(? * pow((hash(range * 7) % 1000003) / 1000003.0, 1.3)) AS INTEGER) AS grid,
           CASE WHEN x < 0.32 THEN 1 WHEN x < 0.63 THEN 2 WHEN x < 0.79 THEN 3
                WHEN x < 0.92 THEN 4 WHEN x < 0.97 THEN 5 ELSE 6 END AS hsize,
           CAST(hash(range * 7 + 2) % 3 AS INTEGER) AS tenure,
           CAST(hash(range * 7 + 3) % 4 AS INTEGER) AS dwelling,
           (hash(range * 7 + 4) % 1000) / 1000.0 AS c
    FROM (SELECT range, (hash(range * 7 + 1) % 1000003) / 1000003.0 AS x FROM range(?))
)
SELECT hid, CAST(grid * 400 // ? // 50 AS INTEGER) AS region, CAST(grid * 400 // ? AS INTEGER) AS muni,
       grid, hsize, tenure, dwelling,
       CASE WHEN c < 0.96 THEN 0 WHEN c < 0.995 THEN 1 ELSE 2 END AS citizen,
       CAST(hash(hid * 11 + m) % 2 AS INTEGER) AS sex,
       CAST(hash(hid * 13 + m) % 9 AS INTEGER) AS age
FROM h, range(6) r(m)
WHERE m < hsize
ORDER BY hid, m
"""

SPEC = SwapSpec(
    household="hid",
    geography=("region", "muni", "grid"),
    risk_variables=("citizen",),
    similar=[("hsize", "tenure"), ("hsize",)],
    swap_rate=0.05,
    k_anonymity=3,
    carry_along=("dwelling",),
)

SPECS = {
    "census": SPEC,
    # more risky households (risk by household size x citizenship x tenure) and one strict
    # profile without fallback: donors are scarcer
    "strict": SwapSpec(
        household="hid",
        geography=("region", "muni", "grid"),
        risk_variables=("hsize", "citizen", "tenure"),
        similar=[("hsize", "tenure", "dwelling")],
        swap_rate=0.05,
        k_anonymity=3,
    ),
}

MEASURE = """
WITH a AS (SELECT hid, any_value(region) AS r, any_value(muni) AS m, any_value(grid) AS g FROM persons GROUP BY hid),
b AS (SELECT hid, any_value(region) AS r, any_value(muni) AS m, any_value(grid) AS g FROM {out} GROUP BY hid),
risky AS (SELECT DISTINCT hid FROM (
    SELECT hid, least(count(*) OVER (PARTITION BY {rv}, region),
                      count(*) OVER (PARTITION BY {rv}, region, muni),
                      count(*) OVER (PARTITION BY {rv}, region, muni, grid)) AS c
    FROM persons) WHERE c < ?)
SELECT count(*), count(*) FILTER (WHERE (a.r, a.m, a.g) <> (b.r, b.m, b.g)), (SELECT count(*) FROM risky),
       count(*) FILTER (WHERE (a.r, a.m, a.g) <> (b.r, b.m, b.g) AND a.hid IN (SELECT hid FROM risky))
FROM a JOIN b USING (hid)
"""

DRIVER = r"""
// Reads a CSV of integers (header line), runs sdcMicro's recordSwap, writes the swapped CSV.
#include "recordSwap.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::stringstream ss(s);
  while (std::getline(ss, item, sep)) if (!item.empty()) out.push_back(item);
  return out;
}

int main(int argc, char **argv) {
  if (argc != 11) { std::fprintf(stderr, "usage: in out seed rate k hid hier profiles risk carry\n"); return 2; }
  std::ifstream in(argv[1]);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> names = split(line, ',');
  auto col = [&](const std::string &n) {
    for (size_t i = 0; i < names.size(); i++) if (names[i] == n) return (int)i;
    std::fprintf(stderr, "no column %s\n", n.c_str()); std::exit(2);
  };
  auto cols = [&](const std::string &s) { std::vector<int> v; for (auto &n : split(s, ',')) v.push_back(col(n)); return v; };
  std::vector<std::vector<int>> data;
  while (std::getline(in, line)) {
    std::vector<int> row; row.reserve(names.size());
    const char *p = line.c_str(); char *end;
    for (size_t j = 0; j < names.size(); j++) { row.push_back((int)std::strtol(p, &end, 10)); p = end + 1; }
    data.push_back(row);
  }
  std::vector<std::vector<int>> similar;
  for (auto &prof : split(argv[8], ';')) similar.push_back(cols(prof));
  std::vector<std::vector<double>> risk;
  int swapped_records = 0, swapped_hid = 0;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<int>> res = recordSwap(data, col(argv[6]), cols(argv[7]), similar, std::atof(argv[4]),
      risk, 0.0, std::atoi(argv[5]), cols(argv[9]), cols(argv[10]), swapped_records, swapped_hid,
      std::string(argv[2]) + ".log", std::atoi(argv[3]));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ofstream out(argv[2]);
  out << names[0]; for (size_t j = 1; j < names.size(); j++) out << ',' << names[j]; out << '\n';
  for (auto &row : res) { out << row[0]; for (size_t j = 1; j < row.size(); j++) out << ',' << row[j]; out << '\n'; }
  std::printf("seconds=%.6f swapped_hid=%d swapped_records=%d\n", secs, swapped_hid, swapped_records);
  return 0;
}
"""


def generate(con: duckdb.DuckDBPyConnection, persons: int) -> None:
    n_hh = int(persons / 2.4)
    n_grid = max(400, persons // 22)
    con.execute(GEN, [n_grid, n_hh, n_grid, n_grid])


def measure(con: duckdb.DuckDBPyConnection, out: str, spec: SwapSpec) -> tuple[int, int, int, int]:
    sql = MEASURE.format(out=out, rv=", ".join(spec.risk_variables))
    row = con.execute(sql, [spec.k_anonymity]).fetchall()[0]
    return tuple(int(v) for v in row)  # households, swapped, risky, risky swapped


def build_sdcmicro(src: Path, work: Path) -> Path:
    core = src / "src" / "recordSwap"
    if not (core / "recordSwap.cpp").exists():
        raise SystemExit(f"--sdcmicro-src {src}: no src/recordSwap/recordSwap.cpp there (a sdcMicro checkout?)")
    if shutil.which("g++") is None:
        raise SystemExit("the comparison needs g++ to compile sdcMicro's recordSwap; none found on PATH")
    for name in ("recordSwap.cpp", "recordSwap.h"):
        shutil.copy(core / name, work / name)
    (work / "driver.cpp").write_text(DRIVER)
    exe = work / "trs"
    # recordSwap.cpp calls std::iota without including <numeric> (g++ 12 brings it in through
    # other headers); -include numeric keeps it compiling where it does not
    cmd = [
        "g++",
        "-O2",
        "-DNDEBUG",
        "-std=c++11",
        "-include",
        "numeric",
        "-o",
        str(exe),
        "driver.cpp",
        "recordSwap.cpp",
    ]
    done = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"sdcMicro's recordSwap did not compile without R:\n{done.stderr[-3000:]}")
    return exe


def run_sdcmicro(
    exe: Path, con: duckdb.DuckDBPyConnection, work: Path, spec: SwapSpec, seed: int, timeout: float
) -> tuple[float, float]:
    csv_in, csv_out = work / "in.csv", work / "out.csv"
    t0 = time.perf_counter()
    con.execute(f"COPY (SELECT * FROM persons ORDER BY hid) TO '{csv_in}' (HEADER)")
    args = [
        str(exe),
        str(csv_in),
        str(csv_out),
        str(seed),
        repr(spec.swap_rate),
        str(spec.k_anonymity),
        spec.household,
        ",".join(spec.geography),
        ";".join(",".join(p) for p in spec.similar),
        ",".join(spec.risk_variables),
        ",".join(spec.carry_along),
    ]
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if done.returncode:
        raise SystemExit(f"sdcMicro's recordSwap failed: {done.stderr[-2000:]}")
    inner = float(done.stdout.split("seconds=")[1].split()[0])
    con.execute(f"CREATE OR REPLACE TABLE sdc_out AS SELECT * FROM read_csv('{csv_out}', header = true)")
    return inner, time.perf_counter() - t0


def report(name: str, secs: float, m: tuple[int, int, int, int], extra: str = "") -> None:
    n, swapped, risky, risky_swapped = m
    share = risky_swapped / risky if risky else float("nan")
    print(
        f"  {name:<9} {secs:9.2f} s   swap rate {swapped / n:7.4f}   risky {risky:>9}   "
        f"risky swapped {share:7.2%}{extra}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sdcmicro-src", type=Path, help="a checkout of sdcTools/sdcMicro to compare with")
    ap.add_argument("--sizes", type=float, nargs="+", help="persons (default 1e5; --large adds 1e6 and 4e7)")
    ap.add_argument("--large", action="store_true")
    ap.add_argument("--sdcmicro-timeout", type=float, default=1800.0, help="seconds before recordSwap is stopped")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--seed", type=int, default=20211)
    ap.add_argument("--scenario", choices=sorted(SPECS), default="census", help="risk variables and profiles")
    args = ap.parse_args()
    spec = SPECS[args.scenario]
    sizes = [int(s) for s in (args.sizes or ([1e5, 1e6, 4e7] if args.large else [1e5]))]
    with tempfile.TemporaryDirectory(prefix="protab-swap-") as tmp:
        work = Path(tmp)
        exe = build_sdcmicro(args.sdcmicro_src, work) if args.sdcmicro_src else None
        for persons in sizes:
            con = duckdb.connect(config={"threads": args.threads} if args.threads else {})
            t0 = time.perf_counter()
            generate(con, persons)
            n_rec = con.execute("SELECT count(*) FROM persons").fetchall()[0][0]
            threads = con.execute("SELECT current_setting('threads')").fetchall()[0][0]
            print(
                f"{n_rec} persons, scenario {args.scenario} (generated in {time.perf_counter() - t0:.1f} s, "
                f"{os.cpu_count()} cores, DuckDB threads {threads})",
                flush=True,
            )
            t0 = time.perf_counter()
            summary = swap(con, "persons", spec, seed=args.seed, out="pt_out", log="pt_log")
            secs = time.perf_counter() - t0
            m = measure(con, "pt_out", spec)
            report(
                "protab",
                secs,
                m,
                f"   (summary: rate {summary['achieved_swap_rate']:.4f}, risky swapped "
                f"{summary['share_risky_swapped'] or 0:.2%}, without donor {summary['households_without_donor']}, "
                f"rounds {summary['matching_rounds']})",
            )
            if exe is not None:
                try:
                    inner, total = run_sdcmicro(exe, con, work, spec, args.seed, args.sdcmicro_timeout)
                except subprocess.TimeoutExpired:
                    print(f"  sdcMicro  not finished after {args.sdcmicro_timeout:.0f} s (stopped)", flush=True)
                    con.close()
                    continue
                ms = measure(con, "sdc_out", spec)
                report("sdcMicro", inner, ms, f"   (with CSV in/out {total:.2f} s)")
                print(f"  ratio sdcMicro/protab time: {inner / secs:.2f}", flush=True)
            con.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"peak resident memory of this process: {peak:.2f} GiB")


if __name__ == "__main__":
    main()
