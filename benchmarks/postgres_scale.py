"""Benchmark: the cell-key count table on PostgreSQL against PostgreSQL's own GROUP BY with the
key sum on the same table, in one run (issue 39, item 4).

    python benchmarks/postgres_scale.py                      # 1e5 records, a server of its own
    python benchmarks/postgres_scale.py --sizes 1e5 1e6
    python benchmarks/postgres_scale.py --dsn "host=... dbname=... user=..."
    python benchmarks/postgres_scale.py --magnitudes         # adds a magnitude table (1e4 records)

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
- the same table on DuckDB in memory, and the frames checked equal;
- the analyst's query ``SELECT m, a, o, ckm(count(*), sum(rkey)) FROM t GROUP BY m, a, o`` once
  the p-table is installed as the SQL function ``ckm`` (``Session.install_ptable``), against the
  same floor, its counts checked equal to the inner cells of protab's table.

With ``--magnitudes`` (sizes ``--magnitude-sizes``, default 1e4: the PostgreSQL magnitude path
is slow) a magnitude table too: the spec above with a skewed variable ``v`` (sums, sensitivity
rules (minimum frequency, (1, 80) dominance, p%) and the cell key method for magnitudes), against
the *top-k floor* on PostgreSQL: the GROUP BY with the key sum, the exact sum of ``v``, its
non-zero contributors and its six largest contributions (``array_agg(v ORDER BY v DESC)``),
fetched. Checked equal to DuckDB's frame.
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
import polars as pl
from polars.testing import assert_frame_equal
from synthetic import best, population_sql

import protab as pt

FLOOR = "SELECT m, a, o, count(*), sum(rkey) % 4294967296 FROM t GROUP BY m, a, o"
CKM = "SELECT m, a, o, ckm(count(*), sum(rkey)) FROM t GROUP BY m, a, o"
VALUE = ", round(1000 * pow((hash(range * 7) % 1000003) / 1000003.0 + 1e-6, -0.8), 2) AS v"
TOPK_FLOOR = ("SELECT m, a, o, count(*), sum(rkey) % 4294967296, sum(v), count(*) FILTER (WHERE v <> 0), "
              "(array_agg(v ORDER BY v DESC))[1:6] FROM t GROUP BY m, a, o")


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



def _ptable() -> pt.PTable:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pt.PTable.maximum_entropy(D=3, V=1.0)


def _sessions(dsn: str, n: int, extra: str = "") -> tuple[pt.Session, pt.Session]:
    """A PostgreSQL and an in-memory DuckDB session, each with the same ``n`` keyed records ``t``."""
    records = duckdb.sql(population_sql(str(n), extra=extra)).to_arrow_table()
    pg, duck = pt.Session.postgres(dsn), pt.Session(":memory:")
    for s in (pg, duck):
        s.register("t", records, replace=True)
        s.add_record_keys("t", id_column="pid", seed="benchmark-seed")
    pg.engine.execute("ANALYZE t")
    return pg, duck


def _inner_counts(frame: pl.DataFrame, codes: pl.DataFrame) -> dict[tuple[str, str, str], int]:
    """The perturbed counts of ``frame``'s inner cells (the codes the records hold)."""
    inner = frame.join(codes, on=["m", "a", "o"], how="semi")
    return {(m, a, o): c for m, a, o, c in inner.select("m", "a", "o", "n_pert").iter_rows()}


def run_size(dsn: str, n: int, repeat: int) -> dict[str, float]:
    ptable, table = _ptable(), spec()
    pg, duck = _sessions(dsn, n)
    with pg, duck:
        floor = best(lambda: pg.engine.con.execute(FLOOR).fetchall(), repeat)[0]
        inner = len(pg.engine.con.execute(FLOOR).fetchall())
        protab = best(lambda: pg.cell_key("t", table, ptable), repeat)[0]
        duck_s = best(lambda: duck.cell_key("t", table, ptable), repeat)[0]
        got, expected = pg.cell_key("t", table, ptable), duck.cell_key("t", table, ptable)
        assert_frame_equal(got, expected, check_exact=True)
        pg.install_ptable(ptable, table="t")
        ckm_s, rows = best(lambda: pg.engine.con.execute(CKM).fetchall(), repeat)
        codes = pl.DataFrame([r[:3] for r in rows], schema=["m", "a", "o"], orient="row")
        assert {r[:3]: r[3] for r in rows} == _inner_counts(got, codes), "ckm() disagrees with cell_key"
        return {"records": n, "inner": inner, "cells": got.height, "floor": floor, "postgres": protab,
                "duckdb": duck_s, "ckm": ckm_s}


def run_magnitudes(dsn: str, n: int, repeat: int) -> dict[str, float]:
    table = pt.TableSpec(spec().dims, sums=["v"])
    num = pt.MagnitudePTable.maximum_entropy(10, 3, step=2, icat=[1, 5, 10], optim=[4, 1, 1])
    magnitude = pt.MagnitudeCKM(num, fp=1000, p=(0.3, 0.03), q=3, epsilon=[1, 0.6, 0.4])
    rules = pt.SensitivityRules(min_frequency=3, dominance=[(1, 80)], p_percent=10)
    ptable = _ptable()
    pg, duck = _sessions(dsn, n, VALUE)
    with pg, duck:
        def protect(s: pt.Session) -> pl.DataFrame:
            return s.cell_key("t", table, ptable, magnitude=magnitude, rules=rules)

        floor = best(lambda: pg.engine.con.execute(TOPK_FLOOR).fetchall(), repeat)[0]
        protab, got = best(lambda: protect(pg), repeat)
        duck_s, expected = best(lambda: protect(duck), repeat)
        assert_frame_equal(got, expected, check_exact=True)
        return {"records": n, "cells": got.height, "floor": floor, "postgres": protab, "duckdb": duck_s}


def _print_counts(r: dict[str, float], record: str | None) -> None:
    print(f"{r['records']:>10,}{r['inner']:>8,}{r['cells']:>8,}{r['floor']:>9.3f}{r['postgres']:>10.3f}"
          f"{r['postgres'] / r['floor']:>8.2f}{r['duckdb']:>10.3f}{r['ckm']:>9.3f}{r['ckm'] / r['floor']:>8.2f}",
          flush=True)
    if record:
        measurements.append(record, [
            measurements.row("postgres_scale", "counts", "postgres", r["records"], r["postgres"],
                             "PostgreSQL GROUP BY + key sum", r["floor"], inner_cells=r["inner"],
                             published_cells=r["cells"]),
            measurements.row("postgres_scale", "ckm() in SQL, inner cells", "postgres", r["records"], r["ckm"],
                             "PostgreSQL GROUP BY + key sum", r["floor"], inner_cells=r["inner"])])


def _print_magnitudes(r: dict[str, float], record: str | None) -> None:
    print(f"{r['records']:>10,}{r['cells']:>8,}{r['floor']:>9.3f}{r['postgres']:>10.3f}"
          f"{r['postgres'] / r['floor']:>8.2f}{r['duckdb']:>10.3f}", flush=True)
    if record:
        measurements.append(record, [measurements.row(
            "postgres_scale", "magnitudes", "postgres", r["records"], r["postgres"],
            "PostgreSQL GROUP BY + key sum, sum, non-zero count, top-6", r["floor"], published_cells=r["cells"])])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="*", type=float, default=[1e5])
    ap.add_argument("--dsn", default=None, help="a PostgreSQL database to use (default: a throwaway server)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--magnitudes", action="store_true", help="also a magnitude table against the top-k floor")
    ap.add_argument("--magnitude-sizes", nargs="*", type=float, default=[1e4])
    measurements.add_option(ap)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="protab-pg-bench-"))
    server = None
    try:
        dsn = args.dsn
        if dsn is None:
            dsn, as_user, pg_ctl = start_server(root)
            server = (as_user, pg_ctl)
        print(f"{'records':>10}{'inner':>8}{'cells':>8}{'floor s':>9}{'protab s':>10}{'/floor':>8}"
              f"{'duckdb s':>10}{'ckm() s':>9}{'/floor':>8}")
        for size in args.sizes:
            _print_counts(run_size(dsn, int(size), args.repeat), args.record)
        if args.magnitudes:
            print(f"magnitudes\n{'records':>10}{'cells':>8}{'floor s':>9}{'protab s':>10}{'/floor':>8}{'duckdb s':>10}")
            for size in args.magnitude_sizes:
                _print_magnitudes(run_magnitudes(dsn, int(size), args.repeat), args.record)
    finally:
        if server is not None:
            subprocess.run([*server[0], str(server[1]), "-D", str(root / "data"), "-m", "fast", "stop"],
                           capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
