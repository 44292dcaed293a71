"""Scale benchmark of protab.fit on a sparse 5-way table (the size in Langsrud 2019).

    python benchmarks/fit_scale.py            # ~500,000 inner cells, ~39,500 published cells
    python benchmarks/fit_scale.py --quick    # a small table, seconds
    python benchmarks/fit_scale.py --nnls     # also Method B (nnls) on the noisy margins

The inner table is the full crossing of five dimensions (zeros included, as Extend0 would
add them), about 47,000 inner cells non-zero with skewed counts (numpy default_rng(2019)).
The published cells are every cell of every 3-way margin. z = Xᵀy plus cell-key-like noise
in −2..2 on the non-zero cells, clipped at 0. Steps: lsfit_nonneg on the noisy z, then ipf
on its output (and, as a consistent-target control, ipf on the unperturbed margins). Each
step prints wall time, peak traced memory (tracemalloc), the process's peak RSS, the
additivity error / max deviation, and its time as a ratio to a baseline measured in the same
process: one scipy.sparse.linalg.lsqr solve of Xᵀy = z (same tolerances).
"""

from __future__ import annotations

import argparse
import itertools
import resource
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import lsqr

from protab import fit

FULL_DIMS = (50, 20, 10, 10, 5)  # 500,000 inner cells; 39,500 cells in the ten 3-way margins
QUICK_DIMS = (10, 8, 6, 5, 4)  # 9,600 inner cells
FULL_NONZERO = 47_000


def model_matrix(dims: tuple[int, ...], order: int = 3) -> tuple[sp.csc_array, list[str]]:
    """X (inner × published) for every cell of every `order`-way margin of a full crossing."""
    n = int(np.prod(dims))
    codes = np.indices(dims).reshape(len(dims), n)
    rows, cols, names = [], [], []
    offset = 0
    for term in itertools.combinations(range(len(dims)), order):
        sizes = [dims[d] for d in term]
        cols.append(offset + np.ravel_multi_index(codes[list(term)], sizes))
        rows.append(np.arange(n))
        names.append("x".join(f"v{d}" for d in term))
        offset += int(np.prod(sizes))
    r = np.concatenate(rows)
    c = np.concatenate(cols)
    X = sp.csc_array((np.ones(r.size), (r, c)), shape=(n, offset))
    return X, names


def skewed_counts(dims: tuple[int, ...], n_nonzero: int, rng: np.random.Generator) -> np.ndarray:
    """Counts with n_nonzero positive cells, chosen with Zipf-like marginal × lognormal weights."""
    n = int(np.prod(dims))
    w = np.ones(n)
    codes = np.indices(dims).reshape(len(dims), n)
    for d, k in enumerate(dims):
        marg = 1.0 / (1.0 + rng.permutation(k)) ** 1.1
        w *= marg[codes[d]]
    w *= rng.lognormal(0.0, 1.0, n)
    cells = rng.choice(n, size=n_nonzero, replace=False, p=w / w.sum())
    y = np.zeros(n)
    y[cells] = 1 + rng.poisson(rng.lognormal(0.5, 1.0, n_nonzero))
    return y


def ckm_like_noise(z: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Noise −2..2 (p = .05, .2, .5, .2, .05) on non-zero cells; zeros stay; clipped at 0."""
    v = rng.choice(np.arange(-2, 3), size=z.size, p=[0.05, 0.2, 0.5, 0.2, 0.05])
    return np.maximum(np.where(z > 0, z + v, 0.0), 0.0)


def measure(label: str, f: Callable[[], Any]) -> tuple[Any, float, float]:
    tracemalloc.start()
    tracemalloc.reset_peak()
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = f()
    dt = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    for w in caught:
        print(f"    [{label}] warning: {w.category.__name__}: {str(w.message)[:200]}")
    return out, dt, peak / 2**20


def rss_mib() -> float:
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small table (seconds)")
    ap.add_argument("--nnls", action="store_true", help="also run Method B (nnls, sparse fista)")
    ap.add_argument("--nnls-max-iter", type=int, default=20_000)
    ap.add_argument("--ipf-tol", type=float, default=1e-10)
    args = ap.parse_args()

    dims = QUICK_DIMS if args.quick else FULL_DIMS
    n_inner = int(np.prod(dims))
    n_nonzero = FULL_NONZERO if not args.quick else n_inner // 10
    rng = np.random.default_rng(2019)

    t0 = time.perf_counter()
    X, terms = model_matrix(dims)
    y = skewed_counts(dims, n_nonzero, rng)
    z_true = np.asarray(X.T @ y)
    z = ckm_like_noise(z_true, rng)
    print(f"dims {'x'.join(map(str, dims))}: {n_inner:,} inner cells, {int((y > 0).sum()):,} "
          f"non-zero, total {int(y.sum()):,} (max cell {int(y.max())})")
    print(f"published: {X.shape[1]:,} cells in {len(terms)} 3-way margins, X nnz {X.nnz:,}; "
          f"{int((z_true == 0).sum()):,} zero margins; noise changed {int((z != z_true).sum()):,} "
          f"(setup {time.perf_counter() - t0:.1f} s)")
    print()

    # Baseline: one LSQR solve of Xᵀ y = z, same tolerances as lsfit_nonneg's fits.
    Xt = sp.csr_array(X.T)
    _ = lsqr(Xt, z, atol=1e-12, btol=1e-12, iter_lim=10)  # warm-up
    (base, dt_base, mem_base) = measure(
        "lsqr", lambda: lsqr(Xt, z, atol=1e-12, btol=1e-12)
    )
    y_ls = base[0]
    print(f"baseline scipy lsqr(Xᵀ, z): {dt_base:8.2f} s  {base[2]} iterations  "
          f"peak traced {mem_base:7.1f} MiB  |Xᵀy−z|max {np.abs(Xt @ y_ls - z).max():.3g}")

    res, dt, mem = measure("lsfit", lambda: fit.lsfit_nonneg(X, z, solver="lsqr"))
    add_err = float(np.abs(np.asarray(Xt @ res.y) - res.z).max())
    print(f"lsfit_nonneg:                {dt:8.2f} s  {res.iterations} fits  "
          f"peak traced {mem:7.1f} MiB  additivity |Xᵀy−z_fit|max {add_err:.3g}  "
          f"min z_fit {res.z.min():.3g}  zeroed {int(res.zeroed.sum()):,}  "
          f"|z_fit−z|max {np.abs(res.z - z).max():.3g}  y≥0: {res.y_nonnegative} "
          f"(min y {res.y.min():.3g})  ratio {dt / dt_base:6.1f}x")

    blocks, dt_b, mem_b = measure("blocks", lambda: fit.column_blocks(X))
    print(f"column_blocks:               {dt_b:8.2f} s  {int(blocks.max()) + 1} blocks  "
          f"peak traced {mem_b:7.1f} MiB  ratio {dt_b / dt_base:6.1f}x")

    ipf1, dt, mem = measure(
        "ipf on lsfit output",
        lambda: fit.ipf(X, res.z, blocks=blocks, tol=args.ipf_tol, max_iter=1000),
    )
    print(f"ipf(lsfit z):                {dt:8.2f} s  {ipf1.iterations} sweeps  "
          f"peak traced {mem:7.1f} MiB  max dev {ipf1.max_deviation:.3g}  "
          f"converged {ipf1.converged} ({ipf1.status}), fixed {int(ipf1.fixed.sum()):,}  "
          f"ratio {dt / dt_base:6.1f}x")

    ipf2, dt, mem = measure(
        "ipf on true margins",
        lambda: fit.ipf(X, z_true, blocks=blocks, tol=args.ipf_tol, max_iter=1000),
    )
    print(f"ipf(true z) control:         {dt:8.2f} s  {ipf2.iterations} sweeps  "
          f"peak traced {mem:7.1f} MiB  max dev {ipf2.max_deviation:.3g}  "
          f"converged {ipf2.converged} ({ipf2.status}), fixed {int(ipf2.fixed.sum()):,}  "
          f"ratio {dt / dt_base:6.1f}x")

    if args.nnls:
        yb, dt, mem = measure(
            "nnls", lambda: fit.nnls(X, z, solver="fista", max_iter=args.nnls_max_iter)
        )
        s2 = 10.0  # every inner cell is in 10 published cells: mean column norm² of Xᵀ
        mu = (1e-4) ** 2 * s2
        r = np.asarray(Xt @ yb) - z
        g = np.asarray(X @ r) + mu * yb
        kkt = float(np.abs(yb - np.maximum(yb - g / s2, 0.0)).max())
        obj = 0.5 * float(r @ r) + 0.5 * mu * float(yb @ yb)
        print(f"nnls (Method B, fista):      {dt:8.2f} s  peak traced {mem:7.1f} MiB  "
              f"objective {obj:.10g}  projected gradient {kkt:.3g}  "
              f"|Xᵀy−z|max {np.abs(r).max():.3g}  min y {yb.min():.3g}  "
              f"ratio {dt / dt_base:6.1f}x")

    print(f"\nprocess peak RSS {rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
