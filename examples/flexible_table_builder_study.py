"""The simulation study of Shlomo, Krenzke & Li (2019), §3.4, run through protab's p-tables.

"Comparison of three post-tabular confidentiality approaches for survey weighted frequency
tables" (Transactions on Data Privacy 12, 2019) compares differential privacy (capped
discrete Laplace, ε = 2, cap 7), PRAM of counts and drop/add-up-to-q on survey-weighted 7 × 7
tables, with the weighted counts adjusted by the overall mean weight ("Avg") or by the cell's
mean weight ("Avg cell"). This script

- draws each replication's population table as Poisson counts with
  log-mean η + α_i + β_j + Const·γ_ij, η = 6.5 and α, β, γ ~ Uniform(−0.5, 0.5) drawn anew for
  every replication (the paper prints "Uniform(0.5, 0.5)"; the symmetric range is used and
  the population size it gives is printed — the paper reports about 44,000 people a table);
  Const = 0.02 (rows and columns nearly independent) and 0.2 (dependent);
- gives each cell a weight Uniform(20, 40) and the sample count round(population/weight),
  so the weighted count is n·w;
- perturbs the 49 inner sample counts through each method's p-table by cell keys. Each cell's
  key is drawn uniformly from [0, 2^32) with a seeded generator: that is the distribution of
  the sum of its records' keys modulo 2^32 when record keys are independent and uniform, as
  ``Session.add_record_keys`` makes them, and one key serves every method (same records, same
  key). A DuckDB Session per replication would give the same numbers in distribution but is
  too slow for 1,000 tables; ``PTable.lookup`` is the vectorised reference of its SQL join;
- publishes the margins as sums of the perturbed inner cells (totals are additive);
- prints the quantities of the paper's Tables 4 and 5 and saves the χ² boxplots and the R-U
  map as PNG files.

Methods: "DP" (negative results set to 0, which keeps the DP guarantee), "PRAM" (the
published matrices made invariant to each table's distribution of counts by the two-stage
method of Willenborg & de Waal, as the paper does: one p-table per table), "PRAM plain" (the
published matrices as they are, not invariant), "PRAM residues" (invariant per part: the
small values and the residues mod 15) and "Drop/add q" (rate 1%, cap 7).

Percent of cells perturbed: DP and drop/add-up-to-q reproduce the paper (23.8% and 66.7%
against 24% and 67%). The paper's 28% for PRAM is the *invariant* PRAM: the published
matrices alone keep a count with probability 0.7616, i.e. perturb 23.8%; made invariant to
each table's counts they perturb about 29% at η = 6.5 (about 35,000 people a table) and
about 27% at η = 6.72 (the paper's 44,000 people a table), so the paper's figure lies between.

Run:  python examples/flexible_table_builder_study.py [--reps 500] [--seed 2019] [--out DIR]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from protab import measures, noise
from protab.ptable import PTable

MODULUS = 2**32  # cell keys: integers below 2^32 (32-bit record keys)
ETA = 6.5
SIZE = 7
CONSTS = {"independent": 0.02, "dependent": 0.2}
#: percent of cells perturbed reported by Shlomo, Krenzke & Li (2019), Table 4 (their PRAM is
#: the invariant one), and the number of replications behind each figure
PAPER_REPS = 500
PAPER_PCT = {"DP": 24.0, "PRAM": 28.0, "Drop/add q": 67.0}
ALL_METHODS = ("DP", "PRAM", "PRAM plain", "PRAM residues", "Drop/add q")
ADJUSTMENTS = ("avg", "avg_cell")
_DATA = Path(__file__).resolve().parents[1] / "tests" / "data"


@dataclass
class Tables:
    """One Const's replications: population N, sample counts n, weights w (reps × 7 × 7)."""

    N: np.ndarray
    n: np.ndarray
    w: np.ndarray
    keys: np.ndarray

    @property
    def W(self) -> np.ndarray:
        return self.n * self.w


@dataclass
class Perturbed:
    """A method's perturbed counts and, per cell, the probability that its count changes
    (from the p-table it went through: 1 − P(v = 0 | n))."""

    n_pert: np.ndarray
    p_change: np.ndarray
    weighted: dict[str, np.ndarray] = field(default_factory=dict)


def draw_tables(rng: np.random.Generator, const: float, reps: int, eta: float = ETA) -> Tables:
    """Population tables Poisson(exp(η + α_i + β_j + Const·γ_ij)), cell weights U(20, 40),
    sample counts round(N/w), and one uniform cell key per cell (all reps × 7 × 7)."""
    a = rng.uniform(-0.5, 0.5, (reps, SIZE, 1))
    b = rng.uniform(-0.5, 0.5, (reps, 1, SIZE))
    g = rng.uniform(-0.5, 0.5, (reps, SIZE, SIZE))
    N = rng.poisson(np.exp(eta + a + b + const * g))
    w = rng.uniform(20.0, 40.0, (reps, SIZE, SIZE))
    n = np.rint(N / w).astype(np.int64)
    keys = rng.integers(0, MODULUS, size=(reps, SIZE, SIZE), dtype=np.int64)
    return Tables(N=N, n=n, w=w, keys=keys)


def _p_change(ptable: PTable, n: np.ndarray) -> np.ndarray:
    """1 − P(v = 0 | n) for each count, from the p-table's interval widths."""
    d = ptable.diagnostics.select("i", "p_stay")
    stay = np.ones(int(ptable.imax) + 1)
    stay[d["i"].to_numpy()] = d["p_stay"].to_numpy()
    return 1.0 - stay[ptable.row_class(n)]


def _fixed(ptable: PTable) -> Callable[[np.ndarray, np.ndarray], Perturbed]:
    def run(n: np.ndarray, keys: np.ndarray) -> Perturbed:
        out = ptable.lookup(n.reshape(-1), keys.reshape(-1), MODULUS).reshape(n.shape)
        return Perturbed(out, _p_change(ptable, n))

    return run


def _per_table(make: Callable[[np.ndarray], PTable]) -> Callable[[np.ndarray, np.ndarray], Perturbed]:
    def run(n: np.ndarray, keys: np.ndarray) -> Perturbed:
        out = np.empty_like(n)
        pc = np.empty(n.shape)
        for r in range(n.shape[0]):  # a loop over replications: one data-dependent p-table each
            p = make(n[r].reshape(-1))
            out[r] = p.lookup(n[r].reshape(-1), keys[r].reshape(-1), MODULUS).reshape(n[r].shape)
            pc[r] = _p_change(p, n[r])
        return Perturbed(out, pc)

    return run


def methods(data: Path = _DATA) -> dict[str, Callable[[np.ndarray, np.ndarray], Perturbed]]:
    """The perturbation of each method, as a function of (counts, cell keys)."""
    small, large = data / "pram_small.csv", data / "pram_large.csv"
    S, L = noise.read_matrix(small), noise.read_matrix(large)
    return {
        "DP": _fixed(noise.discrete_laplace(2, 7, negative_to_zero=True)),
        "PRAM": _per_table(lambda c: noise.pram(S, L, invariant_to=c)),
        "PRAM plain": _fixed(noise.pram(S, L)),
        "PRAM residues": _per_table(
            lambda c: noise.pram(S, L, invariant_to=c, invariant="residues")
        ),
        "Drop/add q": _fixed(noise.drop_add_q(0.01, 7)),
    }


def simulate(
    reps: int = 500,
    seed: int = 2019,
    which: Sequence[str] = ALL_METHODS,
    eta: float = ETA,
    data: Path = _DATA,
) -> tuple[dict[str, Tables], dict[tuple[str, str], Perturbed]]:
    """Run the study: per Const, ``reps`` tables, each perturbed by every method in ``which``
    and weighted by both adjustments. Deterministic for a given seed."""
    run = methods(data)
    unknown = [m for m in which if m not in run]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; choose from {list(run)}")
    tables: dict[str, Tables] = {}
    results: dict[tuple[str, str], Perturbed] = {}
    seeds = np.random.SeedSequence(seed).spawn(len(CONSTS))
    for (name, const), ss in zip(CONSTS.items(), seeds):
        t = draw_tables(np.random.default_rng(ss), const, reps, eta)
        tables[name] = t
        n2, w2 = t.n.reshape(reps, -1), t.W.reshape(reps, -1)
        for m in which:
            res = run[m](t.n, t.keys)
            p2 = res.n_pert.reshape(reps, -1)
            for adj in ADJUSTMENTS:
                res.weighted[adj] = np.stack(
                    [noise.weighted_counts(n2[r], w2[r], p2[r], adj) for r in range(reps)]
                ).reshape(t.n.shape)
            results[(name, m)] = res
    return tables, results


# ------------------------------------------------------------------------------- measures


def percent_perturbed(t: Tables, res: Perturbed) -> tuple[float, float, float]:
    """(observed %, expected % from the p-tables, binomial standard error of the observed %).

    Cells are independent given their counts (independent cell keys), so the number changed
    is Poisson-binomial with variance Σ p(1 − p)."""
    changed = res.n_pert != t.n
    k = changed.size
    p = res.p_change
    return (
        100.0 * float(changed.mean()),
        100.0 * float(p.mean()),
        100.0 * math.sqrt(float(np.sum(p * (1 - p)))) / k,
    )


def paper_tolerance(se: float, paper_pct: float) -> float:
    """How far (in percentage points) an observed percent may lie from the paper's: half a
    point for the paper's rounding to whole percents, plus four standard errors of the
    difference of two binomial estimates (ours, ``se``, and the paper's over
    PAPER_REPS × 49 cells)."""
    p = paper_pct / 100.0
    se_paper = 100.0 * math.sqrt(p * (1 - p) / (PAPER_REPS * SIZE * SIZE))
    return 0.5 + 4.0 * math.sqrt(se**2 + se_paper**2)


def _totals(x: np.ndarray) -> np.ndarray:
    """Row totals, column totals and grand total of each table: reps × 15."""
    return np.concatenate([x.sum(axis=2), x.sum(axis=1), x.sum(axis=(1, 2))[:, None]], axis=1)


def _chi2(x: np.ndarray) -> np.ndarray:
    """Pearson χ² of independence of each weighted table (measures.chi2_independence on the
    weighted counts, the estimated population table: 36 degrees of freedom)."""
    return np.array([measures.chi2_independence(x[r]).chi2 for r in range(x.shape[0])])


def table4(tables: dict[str, Tables], results: dict[tuple[str, str], Perturbed]) -> pl.DataFrame:
    """Risk (the paper's Table 4): percent of cells perturbed (observed, expected from the
    p-tables, binomial s.e., the paper's value and whether the observed one agrees with it
    within :func:`paper_tolerance`) and RM = 1 − H(A|B)/H(A) (measures.conditional_entropy_risk
    over the 49 cells of a table), averaged over the tables."""
    rows = []
    for (const, m), res in results.items():
        t = tables[const]
        obs, exp, se = percent_perturbed(t, res)
        reps = t.n.shape[0]
        rm = np.mean(
            [
                measures.conditional_entropy_risk(t.n[r].ravel(), res.n_pert[r].ravel())
                for r in range(reps)
            ]
        )
        paper = PAPER_PCT.get(m)
        rows.append(
            {
                "const": const,
                "method": m,
                "pct_perturbed": obs,
                "expected_pct": exp,
                "binomial_se": se,
                "paper_pct": paper,
                "agrees": None if paper is None else abs(obs - paper) <= paper_tolerance(se, paper),
                "RM": float(rm),
            }
        )
    return pl.DataFrame(rows)


def table5(
    tables: dict[str, Tables], results: dict[tuple[str, str], Perturbed]
) -> tuple[pl.DataFrame, dict[str, dict[str, np.ndarray]]]:
    """Utility (the paper's Table 5) per Const × method × weight adjustment: mean and standard
    deviation over replications of the weighted grand total, mean and s.e. of its change,
    the percent relative absolute difference of the 15 totals (rows, columns, grand;
    measures.relative_difference_of_totals), the average Hellinger distance of the 49 weighted
    cells (measures.hellinger_distance) and the mean χ² of independence. Also returns the χ²
    values per replication for the boxplots."""
    rows = []
    chi2: dict[str, dict[str, np.ndarray]] = {}
    for const, t in tables.items():
        W = t.W
        reps = W.shape[0]
        chi2[const] = {"Original": _chi2(W)}
        tot0 = W.sum(axis=(1, 2))
        rows.append(
            {
                "const": const,
                "method": "Original",
                "weights": "",
                "total_mean": float(tot0.mean()),
                "total_sd": float(tot0.std(ddof=1)),
                "change_mean": 0.0,
                "change_se": 0.0,
                "prad_totals_pct": 0.0,
                "hellinger": 0.0,
                "chi2_mean": float(chi2[const]["Original"].mean()),
            }
        )
        T0 = _totals(W)
        for (c, m), res in results.items():
            if c != const:
                continue
            for adj in ADJUSTMENTS:
                Wp = res.weighted[adj]
                tot = Wp.sum(axis=(1, 2))
                d = tot - tot0
                Tp = _totals(Wp)
                prad = np.mean(
                    [measures.relative_difference_of_totals(T0[r], Tp[r]) for r in range(reps)]
                )
                hd = np.mean(
                    [measures.hellinger_distance(W[r].ravel(), Wp[r].ravel()) for r in range(reps)]
                )
                x2 = _chi2(Wp)
                chi2[const][f"{m} {adj}"] = x2
                rows.append(
                    {
                        "const": const,
                        "method": m,
                        "weights": "Avg" if adj == "avg" else "Avg cell",
                        "total_mean": float(tot.mean()),
                        "total_sd": float(tot.std(ddof=1)),
                        "change_mean": float(d.mean()),
                        "change_se": float(d.std(ddof=1) / math.sqrt(reps)),
                        "prad_totals_pct": float(prad),
                        "hellinger": float(hd),
                        "chi2_mean": float(x2.mean()),
                    }
                )
    return pl.DataFrame(rows), chi2


# ------------------------------------------------------------------------------- plots


def save_plots(
    t4: pl.DataFrame, t5: pl.DataFrame, chi2: dict[str, dict[str, np.ndarray]], out: Path
) -> list[Path]:
    """χ² boxplots (one panel per Const) and the R-U map (RM against the Hellinger distance,
    reversed so that utility grows to the right), as PNG files in ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    fig, axes = plt.subplots(1, len(chi2), figsize=(7 * len(chi2), 5), squeeze=False)
    for ax, (const, series) in zip(axes[0], chi2.items()):
        labels = list(series)
        ax.boxplot([series[k] for k in labels], showfliers=False)
        ax.set_xticks(range(1, len(labels) + 1), labels, rotation=60, ha="right", fontsize=8)
        ax.set_title(f"χ² of independence, {const} (Const = {CONSTS[const]})")
        ax.set_ylabel("Pearson χ² of the weighted table (36 df)")
    fig.tight_layout()
    p = out / "chi2_boxplots.png"
    fig.savefig(p, dpi=120)
    plt.close(fig)
    paths.append(p)

    j = t5.filter(pl.col("method") != "Original").join(
        t4.select("const", "method", "RM"), on=["const", "method"]
    )
    colours = {m: plt.get_cmap("tab10")(k) for k, m in enumerate(dict.fromkeys(j["method"]))}
    markers = {"Avg": "o", "Avg cell": "^"}
    fig, axes = plt.subplots(1, len(CONSTS), figsize=(6 * len(CONSTS), 4.8), squeeze=False)
    for ax, const in zip(axes[0], CONSTS):
        for row in j.filter(pl.col("const") == const).iter_rows(named=True):
            ax.scatter(
                row["hellinger"],
                row["RM"],
                color=colours[row["method"]],
                marker=markers[row["weights"]],
                s=50,
                label=f"{row['method']}, {row['weights']}",
            )
        ax.invert_xaxis()
        ax.set_xlabel("average Hellinger distance (reversed: utility grows to the right)")
        ax.set_ylabel("RM = 1 − H(A|B)/H(A) (risk)")
        ax.set_title(f"R-U map, {const} (Const = {CONSTS[const]})")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    p = out / "ru_map.png"
    fig.savefig(p, dpi=120)
    plt.close(fig)
    paths.append(p)
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=500, help="replications per Const (500)")
    ap.add_argument("--seed", type=int, default=2019, help="seed of every random draw")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "output")
    ap.add_argument("--data", type=Path, default=_DATA, help="folder of pram_small/large.csv")
    args = ap.parse_args(argv)
    if args.reps < 2:
        ap.error("--reps must be at least 2")

    t0 = time.perf_counter()
    tables, results = simulate(args.reps, args.seed, data=args.data)
    pl.Config.set_tbl_rows(100)
    pl.Config.set_tbl_cols(20)
    pl.Config.set_tbl_width_chars(200)
    print(f"Shlomo, Krenzke & Li (2019) §3.4: {args.reps} replications per Const\n")
    for name, t in tables.items():
        pop, smp = t.N.sum(axis=(1, 2)), t.n.sum(axis=(1, 2))
        print(
            f"  Const = {CONSTS[name]} ({name}): population per table {pop.mean():,.0f} on "
            f"average ({pop.min():,}–{pop.max():,}; the paper reports about 44,000), sample "
            f"{smp.mean():,.0f}, sample counts per cell {t.n.min()}–{t.n.max()}"
        )
    print()
    print(noise.dp_accounting(2, 7, 1))
    print(
        "  (inner cells only are perturbed here; with every margin of the 2-way table "
        f"perturbed a record lies in {noise.kway_cells(2)} cells:)"
    )
    with pl.Config(float_precision=None, fmt_float="mixed"):
        print(noise.dp_accounting_grid(2, [5, 7, 10], [1, noise.kway_cells(2)]))
    print()
    t4 = table4(tables, results)
    print("Table 4 — risk: percent of cells perturbed and RM (sample counts)")
    with pl.Config(float_precision=3):
        print(t4)
    print()
    t5, chi2 = table5(tables, results)
    print("Table 5 — utility of the weighted counts (totals over replications)")
    with pl.Config(float_precision=3):
        print(t5)
    paths = save_plots(t4, t5, chi2, args.out)
    print()
    for p in paths:
        print(f"saved {p}")
    print(f"({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
