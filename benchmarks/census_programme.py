"""Benchmark: a national census programme on one box (targeted record swapping, then the cell
key method on a programme of tables), against bare GROUP BYs of the same inner cells.

    python benchmarks/census_programme.py                   # 4e7 persons, 1.8 M 1 km squares
    python benchmarks/census_programme.py --persons 1e6     # a quick run (squares scale along)
    python benchmarks/census_programme.py --persons 1e7 --squares 1.8e6

The population is generated in DuckDB SQL: households (size 1..8, tenure) in populated 1 km
squares coded as INSPIRE short codes (``1kmN2689E4337``) with their 10 km and 100 km parents
(``10kmN268E433``, ``100kmN26E43``), municipalities nested in provinces and regions (blocks of
the same plane), and persons with sex, 10 age groups, activity, citizenship and the place of
residence a year before. Household density is skewed (a few dense squares, many sparse ones).

Stages, each with its wall time and the process's peak resident memory during the stage:

1. generation and record keys (SHA-256 of a secret seed and the person id);
2. targeted record swapping (``protab.swapping.swap``), skipped when the module is missing;
3. the cell key method on the programme (:data:`PROGRAMME`: grid tables at 1 km and 10 km
   with their 10 km/100 km parents, regional tables over region > province > municipality),
   one ``Session.cell_key`` per table;
4. the baseline: per table a bare ``GROUP BY`` of its inner cells (count per combination of
   its finest codes) fetched as Arrow, in the same process on the same table, run right
   after that table's cell_key (load on a shared machine changes by the minute);
5. the 1 km grid table by sex × age: a hand-written ``GROUP BY ROLLUP(100 km, 10 km, 1 km),
   CUBE(sex, age)`` of the same published cells (counts and key sums, no noise), unordered and
   ordered as published (each column totals first), against protab's whole protected table
   (scan, roll-up, p-table join, codes and publication order), as timed in the programme
   (where it builds the 1 km hierarchy's code tables) and once more.

Scans: every table reads the records once. Hierarchy code tables are built once per session
and shared by the tables that use them. One GROUPING SETS query for several tables (one scan,
one hash table per table) was measured slower in DuckDB than separate GROUP BYs (the six 1 km
tables at 2e6 persons: 1.9 s against 1.6 s of CPU), so tables do not share a scan.

The ratio printed is stage 3 over stage 4. Peak memory per stage is the kernel's high-water
mark of resident memory (VmHWM), reset at the start of each stage through
/proc/self/clear_refs; the last line gives the whole run's peak (getrusage).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import math
import os
import resource
import tempfile
import time
from collections.abc import Iterator

import polars as pl

import protab as pt

#: The plane of the generated country: SIDE × SIDE 1 km squares from (N0, E0) in km (EPSG:3035).
N0, E0, SIDE = 2000, 3500, 1500
PRIME = 1_000_003  # a stride coprime with SIDE², so that square s → position is one-to-one

GEN_HOUSEHOLDS = """
CREATE OR REPLACE TABLE households AS
WITH h AS (
    SELECT range AS hid,
           CAST(floor($squares * pow((hash(range, 11) % 1000000007) / 1000000007.0, 2)) AS BIGINT) AS s,
           (hash(range, 12) % 1000000007) / 1000000007.0 AS u_size,
           (hash(range, 13) % 1000000007) / 1000000007.0 AS u_ten
    FROM range($households)
), p AS (
    SELECT *, (s * $prime) % ($side * $side) AS pos FROM h
), g AS (
    SELECT *, $n0 + pos // $side AS n, $e0 + pos % $side AS e FROM p
)
SELECT hid,
       CASE WHEN u_size < 0.35 THEN 1 WHEN u_size < 0.67 THEN 2 WHEN u_size < 0.81 THEN 3
            WHEN u_size < 0.93 THEN 4 WHEN u_size < 0.98 THEN 5
            ELSE 6 + CAST(floor((u_size - 0.98) * 150) AS INTEGER) END AS size,
       CASE WHEN u_ten < 0.60 THEN 'OWN' WHEN u_ten < 0.90 THEN 'RENT' WHEN u_ten < 0.98 THEN 'SOC'
            ELSE 'OTH' END AS tenure,
       '1kmN' || n || 'E' || e AS g1km,
       '10kmN' || n // 10 || 'E' || e // 10 AS g10km,
       '100kmN' || n // 100 || 'E' || e // 100 AS g100km,
       'R' || lpad(CAST((n - $n0) // $rb * 5 + (e - $e0) // $rb AS VARCHAR), 2, '0') AS region,
       'R' || lpad(CAST((n - $n0) // $rb * 5 + (e - $e0) // $rb AS VARCHAR), 2, '0')
           || 'P' || lpad(CAST((n - $n0) % $rb // $pb * 5 + (e - $e0) % $rb // $pb AS VARCHAR), 2, '0')
           AS province,
       'R' || lpad(CAST((n - $n0) // $rb * 5 + (e - $e0) // $rb AS VARCHAR), 2, '0')
           || 'P' || lpad(CAST((n - $n0) % $rb // $pb * 5 + (e - $e0) % $rb // $pb AS VARCHAR), 2, '0')
           || 'M' || lpad(CAST((n - $n0) % $pb // $mb * 5 + (e - $e0) % $pb // $mb AS VARCHAR), 2, '0')
           AS muni
FROM g
"""

GEN_PERSONS = """
CREATE OR REPLACE TABLE persons AS
WITH m AS (
    SELECT hid, size, tenure, g1km, g10km, g100km, region, province, muni,
           hid * 16 + unnest(range(size)) AS pid
    FROM households
), u AS (
    SELECT *, (hash(pid, 21) % 1000000007) / 1000000007.0 AS u_sex,
              (hash(pid, 22) % 1000000007) / 1000000007.0 AS u_age,
              (hash(pid, 23) % 1000000007) / 1000000007.0 AS u_act,
              (hash(pid, 24) % 1000000007) / 1000000007.0 AS u_cit,
              (hash(pid, 25) % 1000000007) / 1000000007.0 AS u_mob
    FROM m
)
SELECT pid, hid, g1km, g10km, g100km, region, province, muni,
       CASE WHEN size >= 6 THEN '6+' ELSE CAST(size AS VARCHAR) END AS hhsize, tenure,
       CASE WHEN u_sex < 0.49 THEN 'M' ELSE 'F' END AS sex,
       'A' || CAST(least(9, floor(10 * pow(u_age, 1.15))) AS INTEGER) AS age,
       CASE WHEN u_act < 0.45 THEN 'EMP' WHEN u_act < 0.50 THEN 'UNE' WHEN u_act < 0.70 THEN 'STU'
            ELSE 'INA' END AS activity,
       CASE WHEN u_cit < 0.90 THEN 'NAT' WHEN u_cit < 0.95 THEN 'EU' ELSE 'OTH' END AS citizenship,
       CASE WHEN u_mob < 0.88 THEN 'SAME' WHEN u_mob < 0.98 THEN 'IN' ELSE 'ABROAD' END AS mobility
FROM u
"""

MEAN_HOUSEHOLD = 2.28  # the mean size of the household size distribution above

#: The programme: (name, dimensions, drop_empty). "g1km", "g10km" and "muni" take hierarchies
#: (1 km > 10 km > 100 km > Total, 10 km > 100 km > Total, municipality > province > region >
#: Total); other dimensions are flat with a Total. Grid tables leave empty cells out.
PROGRAMME: list[tuple[str, tuple[str, ...], bool]] = [
    ("grid1_sex_age", ("g1km", "sex", "age"), True),
    ("grid1_hhsize", ("g1km", "hhsize"), True),
    ("grid1_tenure", ("g1km", "tenure"), True),
    ("grid1_activity", ("g1km", "activity"), True),
    ("grid1_citizenship", ("g1km", "citizenship"), True),
    ("grid1_mobility", ("g1km", "mobility"), True),
    ("grid10_sex_age_activity", ("g10km", "sex", "age", "activity"), True),
    ("grid10_hhsize_tenure", ("g10km", "hhsize", "tenure"), True),
    ("grid10_citizenship_age", ("g10km", "citizenship", "age"), True),
    ("muni_sex_age", ("muni", "sex", "age"), False),
    ("muni_hhsize_tenure", ("muni", "hhsize", "tenure"), False),
    ("muni_activity_sex", ("muni", "activity", "sex"), False),
    ("region_sex_age_citizenship_activity", ("region", "sex", "age", "citizenship", "activity"), False),
    ("province_mobility_age_sex", ("province", "mobility", "age", "sex"), False),
]


# -- measuring ------------------------------------------------------------------------------
def _reset_peak() -> bool:
    """Reset the kernel's resident high-water mark of this process (Linux clear_refs 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_gib() -> float:
    """VmHWM of this process in GiB (the whole run's peak when it cannot be reset)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


STAGES: list[tuple[str, float, float]] = []


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    _reset_peak()
    t0 = time.perf_counter()
    yield
    dt = time.perf_counter() - t0
    STAGES.append((name, dt, _peak_gib()))
    print(f"  {name:<44}{dt:>9.1f} s{_peak_gib():>8.2f} GiB", flush=True)


def timed(fn) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


# -- data -----------------------------------------------------------------------------------
def generate(s: pt.Session, persons: int, squares: int) -> dict[str, int]:
    """Households and persons tables (SQL only); returns their sizes."""
    side = max(SIDE, math.ceil(math.sqrt(squares / 0.8)))
    rb = side // 5  # regions: 5 × 5 blocks, provinces 5 × 5 per region, municipalities 5 × 5 per province
    params = {
        "squares": squares, "households": round(persons / MEAN_HOUSEHOLD), "prime": PRIME, "side": side,
        "n0": N0, "e0": E0, "rb": rb, "pb": max(1, rb // 5), "mb": max(1, rb // 25),
    }
    s.con.execute(GEN_HOUSEHOLDS, params)
    s.con.execute(GEN_PERSONS)
    row = s.con.execute("SELECT (SELECT count(*) FROM households), count(*), count(DISTINCT g1km), "
                        "count(DISTINCT g10km), count(DISTINCT muni) FROM persons").fetchall()[0]
    return dict(zip(("households", "persons", "squares_1km", "squares_10km", "municipalities"), map(int, row)))


def hierarchies(s: pt.Session) -> dict[str, pt.Hierarchy]:
    """Grid and regional hierarchies from the codes that occur (parent-child pairs from SQL)."""
    def pairs(query: str) -> pl.DataFrame:
        return pl.from_arrow(s.con.sql(query).to_arrow_table())  # type: ignore[return-value]

    up = "SELECT DISTINCT g100km AS parent, g10km AS child FROM households"
    g10 = pt.Hierarchy.from_parent_child(pairs(up))
    g1 = pt.Hierarchy.from_parent_child(pairs(f"{up} UNION ALL SELECT DISTINCT g10km, g1km FROM households"))
    muni = pt.Hierarchy.from_code_lengths(pairs("SELECT DISTINCT muni FROM households")["muni"], [3, 3, 3])
    return {"g1km": g1, "g10km": g10, "muni": muni}


def specs(h: dict[str, pt.Hierarchy]) -> list[tuple[str, pt.TableSpec]]:
    return [(name, pt.TableSpec({d: h.get(d) for d in dims}, drop_empty=drop)) for name, dims, drop in PROGRAMME]


# -- stages ---------------------------------------------------------------------------------
def swap_stage(s: pt.Session, rate: float) -> tuple[str, str]:
    """Targeted record swapping of households (protab.swapping): (table to tabulate, note)."""
    try:
        from protab import swapping
    except ImportError:
        return "persons", "skipped: protab.swapping is missing (the TRS module has not landed)"
    spec = swapping.SwapSpec(
        household="hid",
        geography=["region", "province", "muni"],
        risk_variables=["hhsize", "citizenship"],
        similar=[["hhsize", "tenure"], ["hhsize"]],
        carry_along=["g1km", "g10km", "g100km"],
        swap_rate=rate,
    )
    r = swapping.swap(s.con, "persons", spec, seed="census-swap-seed", out="persons_swapped", log="swap_log")
    keys = ("households", "risky_households", "swapped_households", "swapped_persons")
    note = ", ".join(f"{k} {r[k]:,}" for k in keys if k in r)
    more = {k: v for k, v in r.items() if k not in keys and not isinstance(v, dict)}
    return "persons_swapped", f"done: {note}; " + ", ".join(f"{k} {v}" for k, v in more.items())


def programme(s: pt.Session, table: str, tables: list[tuple[str, pt.TableSpec]], p: pt.PTable,
              base: bool, digest: bool = False) -> tuple[dict[str, tuple[float, int]], dict[str, tuple[float, int]]]:
    """Each table's cell_key and, right after it (so that the load of a shared machine falls on
    both alike), with ``base`` the bare GROUP BY of its inner cells: (protab, baseline) times
    and sizes per table. With ``digest`` each table's SHA-256 (of its CSV) is printed, to show
    that a change of the code left the outputs as they were."""
    prot, bare = {}, {}
    dims = {name: d for name, d, _ in PROGRAMME}
    for name, spec in tables:
        dt, frame = timed(lambda spec=spec: s.cell_key(table, spec, p))
        prot[name] = (dt, frame.height)  # type: ignore[attr-defined]
        if digest:
            print(f"    sha256 {name} {hashlib.sha256(frame.write_csv().encode()).hexdigest()}", flush=True)
        del frame
        line = f"    {name:<42}{dt:>9.2f} s{prot[name][1]:>12,} cells"
        if base:
            cols = ", ".join(dims[name])
            tb, tab = timed(lambda cols=cols: s.con.sql(f"SELECT {cols}, count(*) AS n FROM {table} GROUP BY ALL")
                            .to_arrow_table())
            bare[name] = (tb, tab.num_rows)  # type: ignore[attr-defined]
            line += f"   GROUP BY {tb:.2f} s"
        print(line, flush=True)
    return prot, bare


HAND_ROLLUP = """
SELECT g100km, g10km, g1km, sex, age, count(*) AS n, CAST(sum(rkey) % 4294967296 AS BIGINT) AS ck
FROM {table} GROUP BY ROLLUP(g100km, g10km, g1km), CUBE(sex, age)
"""
#: the same cells in publication order: every column's total first, then its codes in order
HAND_ORDER = " ORDER BY g100km NULLS FIRST, g10km NULLS FIRST, g1km NULLS FIRST, sex NULLS FIRST, age NULLS FIRST"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--persons", type=float, default=4e7)
    ap.add_argument("--squares", type=float, default=None,
                    help="populated 1 km squares (default 1.8e6 at 4e7 persons, in proportion below)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--database", default=None,
                    help="DuckDB file for the data (default: a temporary file, removed at the end)")
    ap.add_argument("--swap-rate", type=float, default=0.05)
    ap.add_argument("--memory-limit", default="9GB",
                    help="DuckDB's memory limit (the rest of the 16 GiB budget holds the polars tables)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the GROUP BY and ROLLUP/CUBE baselines")
    ap.add_argument("--digest", action="store_true", help="print each protected table's SHA-256 (of its CSV)")
    args = ap.parse_args()
    persons = int(args.persons)
    squares = int(args.squares) if args.squares else min(1_800_000, round(1.8e6 * persons / 4e7))
    folder = None
    if args.database is None:
        folder = tempfile.mkdtemp(prefix="census_programme_", dir=os.environ.get("TMPDIR", "/tmp"))
        database = os.path.join(folder, "census.duckdb")
    else:
        database = args.database
    print(f"census programme: {persons:,} persons, {squares:,} squares asked, threads "
          f"{args.threads or os.cpu_count()}, database {database}")
    try:
        with pt.Session(database, threads=args.threads, progress=False, memory_limit=args.memory_limit) as s:
            with stage("generate households and persons (SQL)"):
                sizes = generate(s, persons, squares)
            print("    " + ", ".join(f"{k} {v:,}" for k, v in sizes.items()))
            with stage("hierarchies (grid, regions)"):
                h = hierarchies(s)
            with stage("targeted record swapping"):
                table, note = swap_stage(s, args.swap_rate)
            print(f"    TRS {note}")
            with stage(f"record keys of {table}"):
                s.add_record_keys(table, id_column="pid", seed="census-benchmark-seed")
            tables = specs(h)
            p = pt.PTable.maximum_entropy(D=5, V=3, js=2)
            with stage(f"cell key method, {len(tables)} tables (each then its bare GROUP BY)"):
                prot, base = programme(s, table, tables, p, not args.no_baseline, args.digest)
            t_prot = sum(v[0] for v in prot.values())
            t_trs = next(t for n, t, _ in STAGES if n == "targeted record swapping")
            print(f"    cell key method: {t_prot:.1f} s in all; TRS + cell key method {t_trs + t_prot:.1f} s")
            if args.no_baseline:
                return
            t_base = sum(v[0] for v in base.values())
            grid_spec = dict(tables)["grid1_sex_age"]
            with stage("grid1_sex_age: hand-written ROLLUP/CUBE, protab again"):
                t_hand, hand = timed(lambda: s.con.sql(HAND_ROLLUP.format(table=table)).to_arrow_table())
                hand_cells = hand.num_rows  # type: ignore[attr-defined]
                del hand  # not held while protab runs again (the peak memory is protab's)
                t_sorted, _ = timed(lambda: s.con.sql(HAND_ROLLUP.format(table=table) + HAND_ORDER).to_arrow_table())
                t_warm, _ = timed(lambda: s.cell_key(table, grid_spec, p))
            t_grid, n_grid = prot["grid1_sex_age"]  # type: ignore[misc]
            print()
            print(f"{'table':<40}{'inner':>12}{'published':>12}{'GROUP BY s':>12}{'protab s':>10}{'ratio':>8}")
            for name, _, _ in PROGRAMME:
                tp, npub = prot[name]  # type: ignore[misc]
                tb, ninner = base[name]
                print(f"{name:<40}{ninner:>12,}{npub:>12,}{tb:>12.2f}{tp:>10.2f}{tp / tb:>8.2f}")
            print(f"{'programme':<40}{sum(b[1] for b in base.values()):>12,}"
                  f"{sum(v[1] for v in prot.values()):>12,}{t_base:>12.2f}{t_prot:>10.2f}"  # type: ignore[index]
                  f"{t_prot / t_base:>8.2f}")
            print(f"grid roll-up grid1_sex_age: hand-written ROLLUP/CUBE {t_hand:.2f} s ({hand_cells:,} cells, "
                  f"counts and key sums, unordered); protab cell_key {t_grid:.2f} s in the programme "
                  f"(first grid table: builds the 1 km hierarchy's code tables) = {t_grid / t_hand:.2f}x, "
                  f"{t_warm:.2f} s again = {t_warm / t_hand:.2f}x ({n_grid:,} cells, perturbed, in order); "
                  f"the hand-written query in publication order {t_sorted:.2f} s: protab again = "
                  f"{t_warm / t_sorted:.2f}x")
    finally:
        total = sum(t for _, t, _ in STAGES)
        print(f"all stages {total:.1f} s; peak resident memory of the run "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")
        if folder is not None:
            for f in os.listdir(folder):
                os.remove(os.path.join(folder, f))
            os.rmdir(folder)


if __name__ == "__main__":
    main()
