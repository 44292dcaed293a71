"""Benchmark: secondary cell suppression of hierarchical frequency tables of growing size.

    python benchmarks/suppression_scale.py                 # about 1e4 and 1e5 published cells
    python benchmarks/suppression_scale.py --large         # adds about 6.5e5 published cells
    python benchmarks/suppression_scale.py --register      # business register, ~9e4 cells: modular vs Gauss
    python benchmarks/suppression_scale.py --huge          # business register, ~2.4e6 cells: Gauss + audit

Synthetic microdata (generated in SQL): municipality (R regions → M municipalities, skewed
sizes), 18 age groups under 3 broad groups, and sex; about 5 records per inner cell, so that
5–20 % of the published cells are small counts. The timed protab run is `Session.suppress`
with min_frequency 4 (primary: counts 1–3; extend0, singletons, Gaussian elimination) after
the model matrix is built (its time is printed apart). The baseline, in the same process on
the same X, is a sparse LU factorisation of XᵀX + I (scipy.sparse.linalg.splu): a rank-revealing
step over the same sparsity that any exact method has to pay for. At 6.5e5 cells that LU needs
about 350 s and 10.6 GiB (more than the 8 GiB target), so it runs there only with --lu-large.
"peak GiB" is the process's peak resident memory after the suppression, before the LU. The
check: no primary cell is derivable from the published cells (an exact rank test, on the two
smaller sizes).

``--register`` / ``--huge``: a generated, pre-aggregated business register (benchmarks/
suppression_register.py): a NACE-like 3-level activity × a 2-level region × size class.
"""


from __future__ import annotations

import argparse
import resource
import time

from scipy import sparse
from scipy.sparse.linalg import splu

import protab as pt
from protab.suppression import derivable

GEN = """
CREATE OR REPLACE TABLE t AS
SELECT 'R' || lpad(CAST(m % ? AS VARCHAR), 3, '0') || lpad(CAST(m AS VARCHAR), 5, '0') AS m,
       lpad(CAST(a AS VARCHAR), 2, '0') AS a,
       CASE WHEN hash(range * 5 + 2) % 2 = 0 THEN 'F' ELSE 'M' END AS s
FROM (
    SELECT range,
           CAST(floor(? * pow((hash(range * 5) % 1000003) / 1000003.0, 1.6)) AS INTEGER) AS m,
           CAST(floor(18 * (hash(range * 5 + 1) % 1000003) / 1000003.0) AS INTEGER) AS a
    FROM range(?)
)
"""


def hierarchies(munis: int, regions: int) -> dict[str, pt.Hierarchy]:
    codes = [f"R{m % regions:03d}{m:05d}" for m in range(munis)]
    return {
        "m": pt.Hierarchy.from_parent_child([(c[:4], c) for c in codes]),
        "a": pt.Hierarchy.from_parent_child(
            [("young" if a < 4 else "working" if a < 13 else "old", f"{a:02d}") for a in range(18)]),
        "s": pt.Hierarchy.flat(["F", "M"]),
    }


def run(munis: int, regions: int, check: bool, lu: bool = True) -> dict[str, float]:
    records = munis * 18 * 2 * 5
    with pt.Session(":memory:", progress=False) as s:
        s.con.execute(GEN, [regions, munis, records])
        spec = pt.TableSpec(hierarchies(munis, regions))
        t0 = time.perf_counter()
        X, _, published = s.model_matrix("t", spec)
        t_matrix = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = s.suppress("t", spec, min_frequency=4)
        t_protab = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        t_base = float("nan")
        if lu:
            t0 = time.perf_counter()
            splu((X.T @ X + sparse.identity(X.shape[1])).tocsc())
            t_base = time.perf_counter() - t0
    label = out["suppressed"].to_numpy()
    primary, suppressed = label == "primary", label != "no"
    ok = "-"
    if check:
        ok = "yes" if not derivable(X, suppressed)[primary].any() else "NO"
    return {"published": X.shape[1], "inner": X.shape[0], "primary": int(primary.sum()),
            "secondary": int((label == "secondary").sum()), "matrix_s": t_matrix, "protab_s": t_protab,
            "baseline_s": t_base, "ratio": t_protab / t_base, "protected": ok,
            "peak_rss_gib": peak}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--large", action="store_true", help="also about 6.5e5 published cells")
    ap.add_argument("--lu-large", action="store_true", help="run the LU baseline at 6.5e5 cells too (~10 GiB)")
    ap.add_argument("--register", action="store_true", help="only the business register: modular vs Gauss, ~9e4 cells")
    ap.add_argument("--huge", action="store_true", help="only the business register of ~2.4e6 cells: Gauss + audit")
    ap.add_argument("--time-limit", type=float, default=900.0, help="seconds for the modular mode (--register)")
    args = ap.parse_args()
    if args.register or args.huge:
        from suppression_register import main_register

        main_register(args.huge, args.time_limit)
        return
    sizes = [(110, 10, True, True), (1450, 40, True, True)] + ([(9800, 40, False, args.lu_large)] if args.large else [])
    print(f"{'published':>10}{'inner':>9}{'primary':>9}{'secondary':>10}{'X s':>8}{'suppress s':>11}"
          f"{'LU s':>8}{'ratio':>8}{'protected':>10}{'peak GiB':>9}")
    for munis, regions, check, lu in sizes:
        r = run(munis, regions, check, lu)
        print(f"{r['published']:>10,}{r['inner']:>9,}{r['primary']:>9,}{r['secondary']:>10,}{r['matrix_s']:>8.2f}"
              f"{r['protab_s']:>11.2f}{r['baseline_s']:>8.2f}{r['ratio']:>8.1f}{r['protected']:>10}"
              f"{r['peak_rss_gib']:>9.2f}", flush=True)


if __name__ == "__main__":
    main()
