"""Fixed costs a user meets on every call, each as a ratio to a baseline run in this process.

    python benchmarks/overheads.py [--repeat 5] [--ptable-D 5 50 150]

- ``protab --help``: the command's start-up against ``python -c pass`` (the interpreter alone);
- ``model_matrix(frame, spec)`` on a small frame (array-level callers: rounding, fits,
  reports) against a plain DuckDB ``GROUP BY`` of the same frame on a fresh connection;
- ``PTable.maximum_entropy(D, V=3, js=2)`` for each D against D = 5.

Best of ``--repeat`` runs each; the two sides of a ratio run alternately.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import duckdb
import polars as pl
from synthetic import best

import protab as pt
from protab.session import model_matrix


def pair(a, b, repeat: int) -> tuple[float, float]:
    ta, tb = [], []
    for _ in range(repeat):
        ta.append(best(a, 1, warm=False)[0])
        tb.append(best(b, 1, warm=False)[0])
    return min(ta), min(tb)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ptable-D", type=int, nargs="+", default=[5, 50, 150])
    args = ap.parse_args()

    base, cli = pair(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True),
                     lambda: subprocess.run([sys.executable, "-m", "protab.cli", "--help"], check=True,
                                            stdout=subprocess.DEVNULL), args.repeat)
    print(f"protab --help      {cli:7.3f} s   python -c pass {base:7.3f} s   ratio {cli / base:6.2f}")

    frame = pl.DataFrame({"a": ["x", "y", "z"] * 6, "b": ["p", "q"] * 9, "n": list(range(18))})
    spec = pt.TableSpec({"a": None, "b": None})

    def group_by() -> None:
        con = duckdb.connect()
        con.register("f", frame.to_arrow())
        con.sql("SELECT a, b, sum(n) FROM f GROUP BY ROLLUP (a, b)").fetchall()
        con.close()

    model_matrix(frame, spec)  # the first call opens the private session
    base, mm = pair(group_by, lambda: model_matrix(frame, spec), args.repeat)
    print(f"model_matrix call  {mm * 1e3:7.1f} ms  fresh DuckDB GROUP BY {base * 1e3:7.1f} ms   ratio {mm / base:6.2f}")

    t5 = best(lambda: pt.PTable.maximum_entropy(D=5, V=3, js=2), args.repeat, warm=False)[0]
    for D in args.ptable_D:
        t = best(lambda D=D: pt.PTable.maximum_entropy(D=D, V=3, js=2), 1 if D > 50 else args.repeat, warm=False)[0]
        print(f"p-table D={D:<4}     {t:7.2f} s   D=5 {t5:7.3f} s   ratio {t / t5:8.1f}")


if __name__ == "__main__":
    main()
