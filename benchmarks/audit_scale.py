"""Time of the feasibility-interval audit (protab.audit.intervals) on hypercubes with all
margins: random counts, noise within ±D as the cell key method makes it (empty cells kept 0).

Prints, per table, the cells, the seconds and the seconds per inner cell, beside a baseline
measured in the same run (the two LPs of the smallest table's block, solved once each).

    .venv/bin/python benchmarks/audit_scale.py [sizes ...]     e.g. 20x20 10x10x10 40x50
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


def run(sizes: tuple[int, ...], D: int = 3, seed: int = 1) -> tuple[int, int, float]:
    rng = np.random.default_rng(seed)
    X = hypercube(sizes)
    y = rng.poisson(4.0, X.shape[0]).astype(float)
    t = X.T @ y
    z = np.where(t == 0, 0.0, np.maximum(t + rng.integers(-D, D + 1, t.size), 0.0))
    lower, upper = noise_bounds(z, D)
    start = time.perf_counter()
    intervals(X, lower, upper)
    return X.shape[0], X.shape[1], time.perf_counter() - start


def main(argv: list[str]) -> None:
    shapes = [tuple(int(x) for x in a.split("x")) for a in argv] or [(10, 10), (30, 30), (10, 10, 10), (100, 100)]
    _, _, base = run((3, 3))
    print(f"baseline 3x3 table: {base:.3f} s")
    print(f"{'table':>12}{'inner':>9}{'published':>11}{'seconds':>10}{'s/cell':>10}{'x baseline':>12}")
    for s in shapes:
        n, m, sec = run(s)
        print(f"{'x'.join(map(str, s)):>12}{n:>9}{m:>11}{sec:>10.2f}{sec / n:>10.4f}{sec / base:>12.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
