"""Benchmark: the EU-style census programme (examples/census_programme/eu_programme.toml: 37
hypercubes, 105 tables and the 1 km grid dataset) on a synthetic national population, against
the bare GROUP BYs of the same cells in the same process.

    python benchmarks/census_hypercubes.py                   # 1.8e7 persons (the anchor's country)
    python benchmarks/census_hypercubes.py --persons 1e6     # a quick run

Stages, each with its wall time, the process's CPU time and its peak resident memory during it
(VmHWM, reset at the start of each stage through /proc/self/clear_refs; DuckDB's memory is
in-process):

1. generation (examples/census_programme/eu_population.py, DuckDB SQL) into a database file;
2. record keys (SHA-256 of a seed and the person id, ``Session.add_record_keys``);
3. the programme (``protab.Programme.run``): checks and classifications, targeted record
   swapping, the cell key method on every table, the outputs (CSV) written at once; split into
   "before the first hypercube" (checks, classifications, the records' fingerprint, the swap),
   the hypercubes (their own seconds) and the writing of the outputs;
4. the baseline: per table of the programme a bare ``GROUP BY`` of its inner cells (a count
   per combination of its codes at the level published, read from the column of that level)
   on the same swapped records, fetched as Arrow.

The ratio printed is the hypercubes' time (stage 3 without the swap and checks) over stage 4,
and the whole programme over stage 4. The load average before and after is printed (the
machine may be shared).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import runpy
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import protab as pt

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "census_programme"


def _generator() -> SimpleNamespace:
    """The example's generator (examples/ is not a package): its functions and code lists."""
    return SimpleNamespace(**runpy.run_path(str(EXAMPLE / "eu_population.py")))


def _reset_peak() -> None:
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _peak_gib() -> float:
    with contextlib.suppress(OSError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


STAGES: list[tuple[str, float, float]] = []


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Wall time, CPU time of the process (on a shared machine the wall time grows with the
    load, the CPU time much less) and peak resident memory of a stage."""
    _reset_peak()
    t0, c0 = time.perf_counter(), _cpu()
    yield
    dt = time.perf_counter() - t0
    STAGES.append((name, dt, _peak_gib()))
    print(f"  {name:<52}{dt:>9.1f} s{_peak_gib():>8.2f} GiB   cpu {_cpu() - c0:.1f} s", flush=True)


def _loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return "unknown"


def baseline(s: pt.Session, prog: pt.Programme, table: str) -> tuple[float, int, int]:
    """Per table a bare GROUP BY of its inner cells at the level published: (seconds, tables, cells)."""
    from protab.programme import classifications as cls
    from protab.sqltools import quote_ident

    columns = {n: c.get("columns") for n, c in prog.cfg["classifications"].items()}
    hierarchies = cls.build(s, prog.cfg, prog.cubes, table, prog.path.parent)
    total, tables, cells = 0.0, 0, 0
    for cube in prog.cubes:
        depth = cls.levels(prog.cfg, cube, hierarchies)
        read = {}
        for d in cube.dims:
            cols = columns.get(d.classification)
            read[d.variable] = cols[depth[d.variable] - 1] if cols else d.variable
        for t in cube.tables:
            sel = ", ".join(quote_ident(read[v]) for v in t.dims)
            t0 = time.perf_counter()
            arrow = s.con.sql(f"SELECT {sel}, count(*) AS n FROM {quote_ident(table)} GROUP BY ALL").to_arrow_table()
            total += time.perf_counter() - t0
            tables += 1
            cells += arrow.num_rows
    return total, tables, cells


def run_programme(prog: pt.Programme, database: str, out: Path) -> tuple[list[tuple[str, float]], float, float]:
    """The programme, with the time of each hypercube's end: (per hypercube (name, seconds),
    seconds before the first hypercube started, seconds after the last one ended)."""
    marks: list[float] = []
    t0 = time.perf_counter()
    summary = prog.run(database, out, quiet=True, on_hypercube=lambda name, row: marks.append(time.perf_counter()))
    end = time.perf_counter()
    cubes = list(zip(summary["hypercube"].to_list(), summary["seconds"].to_list()))
    before = marks[0] - t0 - cubes[0][1]
    return cubes, before, end - marks[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--persons", type=float, default=1.8e7)
    ap.add_argument("--folder", default=None, help="working folder (default: a temporary one, removed)")
    args = ap.parse_args()
    persons = int(args.persons)
    folder = Path(args.folder or tempfile.mkdtemp(prefix="census_hypercubes_", dir=os.environ.get("TMPDIR", "/tmp")))
    folder.mkdir(parents=True, exist_ok=True)
    database, out = str(folder / "eu_census.duckdb"), folder / "eu_census_output"
    os.environ.setdefault("SWAP_SEED", "census-hypercubes-benchmark-swap-seed")
    os.environ.setdefault("PROTAB_PROGRESS", "0")
    prog = pt.Programme(EXAMPLE / "eu_programme.toml")
    n_tables = sum(len(c.tables) for c in prog.cubes)
    print(f"census hypercubes: {persons:,} persons, {len(prog.cubes)} hypercubes, {n_tables} tables, "
          f"{os.cpu_count()} cores, folder {folder}")
    print(f"load average before: {_loadavg()}", flush=True)
    gen = _generator()
    try:
        with stage("generate persons (SQL)"), pt.Session(database, progress=False) as s:
            n = gen.generate(s.con, persons, "eu-census-benchmark")
        with stage("record keys"), pt.Session(database, progress=False) as s:
            s.add_record_keys("persons", id_column="pid", seed="eu-census-benchmark-keys")
            squares = s.con.sql("SELECT count(DISTINCT grid1km) FROM persons").fetchall()[0][0]
        print(f"    {n:,} persons in {squares:,} populated 1 km squares", flush=True)
        with stage("programme: TRS + cell key method + outputs"):
            cubes, before, after = run_programme(prog, database, out)
        t_prog = STAGES[-1][1]
        t_cubes = sum(t for _, t in cubes)
        print(f"    checks, classifications, fingerprint and swap {before:.1f} s; {len(cubes)} hypercubes "
              f"{t_cubes:.1f} s; writing the outputs {after:.1f} s")
        slowest = sorted(cubes, key=lambda c: -c[1])[:5]
        print("    slowest hypercubes: " + ", ".join(f"{c} {t:.1f} s" for c, t in slowest))
        size = sum(f.stat().st_size for f in out.iterdir())
        print(f"    outputs: {len(list(out.iterdir()))} files, {size / 2**20:.1f} MiB", flush=True)
        with stage("baseline: bare GROUP BY per table"), pt.Session(database, read_only=True, progress=False) as s:
            t_base, tables, cells = baseline(s, prog, prog.cfg["swap"]["out"])
        print(f"    {tables} GROUP BYs, {cells:,} inner cells, {t_base:.1f} s")
        print()
        print(f"hypercubes / GROUP BYs: {t_cubes / t_base:.2f}; whole programme (TRS, checks, outputs "
              f"included) / GROUP BYs: {t_prog / t_base:.2f}")
    finally:
        total = sum(t for _, t, _ in STAGES)
        peak = max([p for _, _, p in STAGES] + [resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20])
        print(f"all stages {total:.1f} s; peak resident memory of the run {peak:.2f} GiB (the stages' highest)")
        print(f"load average after: {_loadavg()}", flush=True)
        if args.folder is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
