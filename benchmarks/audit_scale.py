"""Time of the feasibility-interval audit (protab.audit.intervals) on hypercubes with all
margins: random counts, noise within ±D as the cell key method makes it (empty cells kept 0).

Prints, per table, the cells, the seconds and the seconds per inner cell, beside a baseline
measured in the same run (the audit of a 3 x 3 table), and the LPs solved by kind ("ipm":
cold, interior point; "primal": primal simplex from the block's last basis) with their seconds.

    .venv/bin/python benchmarks/audit_scale.py [sizes ...]     e.g. 20x20 10x10x10 40x50
    .venv/bin/python benchmarks/audit_scale.py --large          the 50x50x40 table (1e5 inner cells)
    .venv/bin/python benchmarks/audit_scale.py --nested [--crossed]

Each hypercube first prints the work estimate (protab.audit.work_estimate) beside the time.
``--nested``: two linked tables over nested geographies (municipality × sex, county × sex;
300,000 persons, 300 municipalities in 20 counties) protected by the cell key method and
audited through Session.model_matrix(..., nested=True); ``--crossed`` also times the audit of the
same tables with municipality crossed with county as if independent (Session.model_matrix).
"""

from __future__ import annotations

import itertools
import sys
import time

import numpy as np
from scipy import sparse

from protab.audit import intervals, noise_bounds


def hypercube(sizes: tuple[int, ...]) -> sparse.csc_array:
    """X of the full crossing with every margin: one column per (code or Total) per dimension."""
    n = int(np.prod(sizes))
    codes = np.indices(sizes).reshape(len(sizes), n)
    blocks = []
    for keep in itertools.product([True, False], repeat=len(sizes)):
        kept = [k for k in range(len(sizes)) if keep[k]]
        col = np.zeros(n, dtype=np.int64)
        for k in kept:
            col = col * sizes[k] + codes[k]
        width = int(np.prod([sizes[k] for k in kept])) if kept else 1
        blocks.append(sparse.csc_array((np.ones(n), (np.arange(n), col)), shape=(n, width)))
    return sparse.hstack(blocks, format="csc")


class _Count:
    """The LPs the audit solves (protab.audit.lp_intervals._Block.solve), by kind."""

    def __init__(self) -> None:
        from protab.audit import lp_intervals

        self.by_how: dict[str, int] = {}
        self.seconds: dict[str, float] = {}
        solve = lp_intervals._Block.solve

        def counted(block, c, how="primal"):
            start = time.perf_counter()
            try:
                return solve(block, c, how)
            finally:
                self.by_how[how] = self.by_how.get(how, 0) + 1
                self.seconds[how] = self.seconds.get(how, 0.0) + time.perf_counter() - start

        lp_intervals._Block.solve = counted

    def show(self) -> str:
        out = ", ".join(f"{k} {v} LPs {self.seconds[k]:.1f} s" for k, v in sorted(self.by_how.items()))
        self.by_how, self.seconds = {}, {}
        return out


COUNT = _Count()


def run(sizes: tuple[int, ...], D: int = 3, seed: int = 1) -> tuple[int, int, float]:
    rng = np.random.default_rng(seed)
    X = hypercube(sizes)
    y = rng.poisson(4.0, X.shape[0]).astype(float)
    t = X.T @ y
    z = np.where(t == 0, 0.0, np.maximum(t + rng.integers(-D, D + 1, t.size), 0.0))
    lower, upper = noise_bounds(z, D)
    start = time.perf_counter()
    intervals(X, lower, upper, budget=None)
    return X.shape[0], X.shape[1], time.perf_counter() - start


def floor(sizes: tuple[int, ...], D: int = 3, seed: int = 1) -> float:
    """The floor: one LP over the whole table (min of the total under the same published
    bounds), solved cold by HiGHS's interior point through scipy; any LP audit solves at least
    one of these, the audit at least two (a min and a max) per block."""
    from scipy.optimize import linprog

    rng = np.random.default_rng(seed)
    X = hypercube(sizes)
    y = rng.poisson(4.0, X.shape[0]).astype(float)
    t = X.T @ y
    z = np.where(t == 0, 0.0, np.maximum(t + rng.integers(-D, D + 1, t.size), 0.0))
    lower, upper = noise_bounds(z, D)
    A = sparse.csr_array(X.T)
    hi, lo = np.isfinite(upper), np.isfinite(lower) & (lower > 0)
    start = time.perf_counter()
    linprog(np.ones(X.shape[0]), A_ub=sparse.vstack([A[hi], -A[lo]], format="csr"),
            b_ub=np.concatenate([upper[hi], -lower[lo]]), bounds=(0, None), method="highs-ipm")
    return time.perf_counter() - start


def estimate(sizes: tuple[int, ...]) -> float:
    """The audit's first estimate of the LP seconds (one block: the grand total links all)."""
    from protab.audit.work_estimate import FIRST_LPS, lp_seconds

    X = hypercube(sizes)
    nnz = X.nnz - X.shape[0]  # the inner cells' own columns become bounds, not rows
    return FIRST_LPS * float(lp_seconds(nnz))


def nested(crossed: bool, persons: int = 300_000, munis: int = 300, counties: int = 20) -> None:
    """Time the audit of municipality × sex linked with county × sex (nested geographies)."""
    import tempfile

    import duckdb
    import polars as pl

    import protab as pt
    from protab.table import union_spec

    rng = np.random.default_rng(2)
    muni = rng.integers(0, munis, persons)
    county = rng.permutation(np.arange(munis) % counties)[muni]
    frame = pl.DataFrame({"pid": np.arange(persons), "muni": [f"m{m:03d}" for m in muni],
                          "county": [f"c{c:02d}" for c in county], "sex": rng.choice(["f", "m"], persons)})
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/nested.duckdb"
        con = duckdb.connect(path)
        con.register("frame", frame.to_arrow())
        con.execute("CREATE TABLE persons AS SELECT * FROM frame")
        con.close()
        p = pt.PTable.maximum_entropy(D=3, V=1)
        a, b = pt.TableSpec({"muni": None, "sex": None}), pt.TableSpec({"county": None, "sex": None})
        with pt.Session(path) as s:
            s.add_record_keys("persons", "pid", seed="benchmark seed")
            tables = {"a": s.cell_key("persons", a, p), "b": s.cell_key("persons", b, p)}
            spec = union_spec([a, b])
            runs = [("nested", lambda: s.model_matrix("persons", spec, extend0="all", nested=True))]
            if crossed:
                runs.append(("crossed", lambda: s.model_matrix("persons", spec, extend0="all")))
            for name, build in runs:
                start = time.perf_counter()
                X, inner, published = build()
                built = time.perf_counter() - start
                pt.audit.feasibility(tables, X, published, inner, budget=None, **pt.audit.ptable_noise(p))
                print(f"{name:>8}: {X.shape[0]:>7} inner cells, X built in {built:.2f} s, "
                      f"audit total {time.perf_counter() - start:.2f} s", flush=True)


def main(argv: list[str]) -> None:
    if "--nested" in argv:
        nested("--crossed" in argv)
        return
    if "--large" in argv:
        argv = [a for a in argv if a != "--large"] + ["50x50x40"]
    shapes = [tuple(int(x) for x in a.split("x")) for a in argv] or [(10, 10), (30, 30), (10, 10, 10), (100, 100)]
    _, _, base = run((3, 3))
    COUNT.show()
    print(f"baseline 3x3 table: {base:.3f} s")
    print(f"{'table':>12}{'inner':>9}{'published':>11}{'estimate':>10}{'seconds':>10}{'s/cell':>10}"
          f"{'x baseline':>12}{'floor s':>10}{'x floor':>9}")
    for s in shapes:
        est = estimate(s)
        print(f"{'x'.join(map(str, s)):>12}{'':>20}{est:>10.1f}", end="", flush=True)
        n, m, sec = run(s)
        lps = COUNT.show()
        one = floor(s)  # the same process, after the audit: one cold LP of the whole table
        print(f"\r{'x'.join(map(str, s)):>12}{n:>9}{m:>11}{est:>10.1f}{sec:>10.2f}{sec / n:>10.4f}"
              f"{sec / base:>12.1f}{one:>10.2f}{sec / one:>9.1f}   {lps}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
