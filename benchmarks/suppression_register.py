"""Benchmark: cell suppression of a generated business register (run through
benchmarks/suppression_scale.py --register / --huge).

The register is pre-aggregated: one row per inner cell (activity group × municipality × size
class) with its number of enterprises (``freq``), drawn from a skewed distribution so that most
inner cells are small (primary: counts 1–3, min_frequency 4). Activity: sections → divisions →
groups (NACE-like, 3 levels); region: regions → municipalities; size class: flat.

--register (about 9e4 published cells): Gauss mode and the modular mode (cost "cells"), each
with the exact audit of every primary cell; their secondary cells, suppressed enterprises and
times side by side, and each time as a multiple of the floor of suppression_scale.py (a sparse
LU of XᵀX + I on the same X).
--huge (about 2.4e6 published cells, 1.4e6 of them primary): Gauss mode and its audit only, the
time and peak memory (the target: under 30 min and 16 GiB on 2 cores).
"""

from __future__ import annotations

import resource
import time
import warnings

import numpy as np
import polars as pl
from scipy import sparse
from scipy.sparse.linalg import splu

import protab as pt

SMALL = dict(sections=10, divisions=4, groups=4, regions=8, munis=5, sizes=8, mean=6.0, shape=0.6, floor=0)
HUGE = dict(sections=21, divisions=4, groups=3, regions=27, munis=35, sizes=6, mean=0.8, shape=4.0, floor=1)


def register(sections: int, divisions: int, groups: int, regions: int, munis: int, sizes: int,
             mean: float, shape: float, floor: int) -> tuple[pl.DataFrame, pt.TableSpec]:
    """The inner cells with their counts and the TableSpec of the register."""
    act = [f"{chr(65 + s % 26)}{s // 26}.{d}.{g}" for s in range(sections) for d in range(divisions)
           for g in range(groups)]
    reg = [f"R{r:02d}M{k:02d}" for r in range(regions) for k in range(munis)]
    size = [f"S{c}" for c in range(sizes)]
    rng = np.random.default_rng(2026)
    n = len(act) * len(reg) * len(size)
    freq = floor + rng.poisson(rng.gamma(shape, mean / shape, n))  # skewed: many small cells, some large
    a, r, c = np.unravel_index(np.arange(n), (len(act), len(reg), len(size)))
    frame = pl.DataFrame({"activity": np.array(act)[a], "region": np.array(reg)[r], "size": np.array(size)[c],
                          "freq": freq}).filter(pl.col("freq") > 0)
    divs = sorted({x.rsplit(".", 1)[0] for x in act})
    hier = {
        "activity": pt.Hierarchy.from_parent_child([(d.split(".")[0], d) for d in divs]
                                                   + [(x.rsplit(".", 1)[0], x) for x in act]),
        "region": pt.Hierarchy.from_parent_child([(x[:3], x) for x in reg]),
        "size": None,
    }
    return frame, pt.TableSpec(hier, freq="freq")


def main_register(huge: bool, time_limit: float) -> None:
    frame, spec = register(**(HUGE if huge else SMALL))
    with pt.Session(":memory:", progress=False) as s:
        s.register("r", frame)
        t0 = time.perf_counter()
        X, _, published = s.model_matrix("r", spec)
        print(f"register: {frame.height:,} non-empty inner cells, {X.shape[1]:,} published cells "
              f"(X {time.perf_counter() - t0:.1f} s)", flush=True)
        rows = {"gauss": _run(s, spec, published, "gauss", None)}
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(f"gauss + audit: {rows['gauss']}  peak {peak:.2f} GiB", flush=True)
        if not huge:
            rows["modular"] = _run(s, spec, published, "modular", time_limit)
            print(f"modular: {rows['modular']}", flush=True)
            t0 = time.perf_counter()
            splu((X.T @ X + sparse.identity(X.shape[1])).tocsc())
            floor = time.perf_counter() - t0
            print(f"floor (LU of XᵀX + I): {floor:.2f} s", flush=True)
            for name, r in rows.items():
                print(f"{name:>8}: {r['secondary']:,} secondary cells, {r['value']:,} enterprises suppressed, "
                      f"{r['seconds']:.1f} s = {r['seconds'] / floor:.0f} × floor, protected {r['protected']}")


def _run(s: pt.Session, spec: pt.TableSpec, published: pl.DataFrame, method: str,
         time_limit: float | None) -> dict[str, object]:
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if method == "gauss":
            out = s.suppress("r", spec, min_frequency=4, audit=True)
        else:
            out = s.suppress("r", spec, min_frequency=4, method="modular", cost="cells", time_limit=time_limit)
    secs = time.perf_counter() - t0
    label = out["suppressed"].to_numpy()
    sec = label == "secondary"
    value = int(published["n"].to_numpy()[sec].sum())
    return {"seconds": round(secs, 2), "primary": int((label == "primary").sum()), "secondary": int(sec.sum()),
            "value": value, "protected": bool(out["protected"].all()),
            "warning": str(caught[-1].message)[:200] if caught else ""}
