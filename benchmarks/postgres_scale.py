"""Benchmark: the cell-key count table on PostgreSQL against PostgreSQL's own GROUP BY with the
key sum on the same table, in one run (issue 39, item 4).

    python benchmarks/postgres_scale.py                      # 1e5 records, a server of its own
    python benchmarks/postgres_scale.py --sizes 1e5 1e6
    python benchmarks/postgres_scale.py --dsn "host=... dbname=... user=..."

Without ``--dsn`` a throwaway server is started in a temporary folder with Debian's initdb
and pg_ctl (``make postgres``; as root it runs as the ``postgres`` user) and removed at the end.
Synthetic microdata (generated in DuckDB) with three hierarchical dimensions — municipality
(8 regions → 400 municipalities), age (3 broad groups → 18 five-year groups), occupation (10
groups → 40 codes) — copied into a PostgreSQL table, record keys added there. Printed per size,
each the best of ``--repeat`` runs after a warm-up:

- the floor: PostgreSQL's GROUP BY of the records to the inner cells with the record-key sum
  modulo 2^32, fetched to the client;
- protab's ``Session.cell_key`` of the count table with every margin (the scan, the roll-up,
  the p-table join, the frame) and its ratio to the floor;
- the same table on DuckDB in memory, and the frames checked equal.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import warnings
from pathlib import Path

import duckdb
import measurements
from polars.testing import assert_frame_equal
from synthetic import best, population_sql

import protab as pt

GEN = population_sql("{n}")
FLOOR = "SELECT m, a, o, count(*), sum(rkey) % 4294967296 FROM t GROUP BY m, a, o"


def spec() -> pt.TableSpec:
    muni = [f"R{r}{k:03d}" for r in range(1, 9) for k in range(1, 51)]
    ages = [f"{a:02d}" for a in range(18)]
    occ = [f"O{o:02d}" for o in range(40)]
    return pt.TableSpec({
        "m": pt.Hierarchy.from_code_lengths(muni, [2, 3]),
        "a": pt.Hierarchy.from_parent_child(
            [("young" if int(a) < 4 else "working" if int(a) < 13 else "old", a) for a in ages]),
        "o": pt.Hierarchy.from_parent_child([(f"G{int(c[1:]) // 4}", c) for c in occ]),
    })


def start_server(root: Path) -> tuple[str, list[str], Path]:
    """A throwaway server in ``root``: (DSN, the command prefix it runs as, pg_ctl)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise SystemExit("no PostgreSQL server here (make postgres), or give --dsn")
    bindir = Path(found[-1]).parent
    as_user: list[str] = []
    if os.geteuid() == 0:
        import pwd

        user = pwd.getpwnam("postgres")
        os.chown(root, user.pw_uid, user.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = root / "data"
    subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(data), "-U", "protab", "--auth=trust", "-E",
                    "UTF8", "--locale=C.UTF-8"], check=True, capture_output=True)
    subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-o",
                    f"-p {port} -k {root} -c listen_addresses=127.0.0.1", "-w", "start"], check=True,
                   capture_output=True)
    return f"host=127.0.0.1 port={port} user=protab dbname=postgres", as_user, bindir / "pg_ctl"



def run_size(dsn: str, n: int, repeat: int) -> dict[str, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ptable = pt.PTable.maximum_entropy(D=3, V=1.0)
    records = duckdb.sql(GEN.format(n=n)).to_arrow_table()
    table = spec()
    with pt.Session.postgres(dsn) as pg, pt.Session(":memory:") as duck:
        for s in (pg, duck):
            s.register("t", records, replace=True)
            s.add_record_keys("t", id_column="pid", seed="benchmark-seed")
        pg.engine.execute("ANALYZE t")
        floor = best(lambda: pg.engine.con.execute(FLOOR).fetchall(), repeat)[0]
        inner = len(pg.engine.con.execute(FLOOR).fetchall())
        protab = best(lambda: pg.cell_key("t", table, ptable), repeat)[0]
        duck_s = best(lambda: duck.cell_key("t", table, ptable), repeat)[0]
        got, expected = pg.cell_key("t", table, ptable), duck.cell_key("t", table, ptable)
        assert_frame_equal(got, expected, check_exact=True)
        return {"records": n, "inner": inner, "cells": got.height, "floor": floor, "postgres": protab,
                "duckdb": duck_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="*", type=float, default=[1e5])
    ap.add_argument("--dsn", default=None, help="a PostgreSQL database to use (default: a throwaway server)")
    ap.add_argument("--repeat", type=int, default=3)
    measurements.add_option(ap)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="protab-pg-bench-"))
    server = None
    try:
        dsn = args.dsn
        if dsn is None:
            dsn, as_user, pg_ctl = start_server(root)
            server = (as_user, pg_ctl)
        print(f"{'records':>10}{'inner':>8}{'cells':>8}{'floor s':>9}{'protab s':>10}{'/floor':>8}{'duckdb s':>10}")
        for size in args.sizes:
            r = run_size(dsn, int(size), args.repeat)
            print(f"{r['records']:>10,}{r['inner']:>8,}{r['cells']:>8,}{r['floor']:>9.3f}{r['postgres']:>10.3f}"
                  f"{r['postgres'] / r['floor']:>8.2f}{r['duckdb']:>10.3f}", flush=True)
            if args.record:
                measurements.append(args.record, [measurements.row(
                    "postgres_scale", "counts", "postgres", r["records"], r["postgres"],
                    "PostgreSQL GROUP BY + key sum", r["floor"], inner_cells=r["inner"], published_cells=r["cells"])])
    finally:
        if server is not None:
            subprocess.run([*server[0], str(server[1]), "-D", str(root / "data"), "-m", "fast", "stop"],
                           capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
