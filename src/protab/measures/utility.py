"""Utility measures: Hellinger, absolute and relative differences, χ², rank and ANOVA measures."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import polars as pl
from numpy.typing import ArrayLike
from scipy import stats

from protab.errors import InputError, show_values
from protab.measures._measure_inputs import _columns, _groups, _pair, _signed_sqrt, _vec

__all__ = [
    "Chi2Result",
    "anova_r2",
    "average_absolute_difference",
    "binomial_test_rounding",
    "chi2_independence",
    "hellinger_distance",
    "hellinger_utility",
    "independence_before_after",
    "mean_absolute_deviation",
    "percentage_change_by_value",
    "relative_difference_of_totals",
    "spearman_correlation",
    "two_way_table",
    "variance_of_cell_averages",
]


# --------------------------------------------------------------------------------------------
# utility


def hellinger_distance(original: ArrayLike, protected: ArrayLike) -> float:
    """HD = sqrt(½ Σ (√f − √g)²); negative values enter as sign(x)·√|x| (signed variant)."""
    f, g = _pair(original, protected)
    return float(np.sqrt(0.5 * np.sum((_signed_sqrt(f) - _signed_sqrt(g)) ** 2)))


def hellinger_utility(original: ArrayLike, protected: ArrayLike) -> float:
    """Hellinger utility 1 − HD/√(Σ f) (Langsrud & Heldal 2018; SmallCountRounding's HDutility).

    1 when protected equals original; within [0, 1] for non-negative values whose protected
    total does not exceed the original one (HD² = ½(Σf + Σg) − Σ√(fg) ≤ Σf then; Shlomo,
    Antal & Elliot 2015). A protected table with a larger total can fall slightly below 0.
    Negative protected values (noise methods) use the signed square root.
    """
    f, _ = _pair(original, protected)
    total = float(np.sum(f))
    if total <= 0:
        raise InputError("hellinger_utility needs original values with a positive sum")
    return 1.0 - hellinger_distance(original, protected) / np.sqrt(total)


def mean_absolute_deviation(original: ArrayLike, protected: ArrayLike) -> float:
    """Σ|f − g| / K over the K cells compared (docs/methods.md §5; SmallCountRounding's meanAbsDiff)."""
    f, g = _pair(original, protected)
    return float(np.mean(np.abs(f - g))) if f.size else 0.0


def average_absolute_difference(
    original: ArrayLike, protected: ArrayLike, groups: ArrayLike | None = None
) -> float:
    """Average absolute difference per cell, AAD (Shlomo & Young 2005, 2006).

    For each group r of cells (a row of the table: the cells sharing a code of one dimension)
    AAD_r = Σ_{c∈r} |g − f| / n_r, and AAD is the unweighted mean of AAD_r over the groups.
    Without ``groups`` the table is one group and AAD equals :func:`mean_absolute_deviation`.
    """
    f, g = _pair(original, protected)
    if f.size == 0:
        return 0.0
    if groups is None:
        return float(np.mean(np.abs(f - g)))
    ids, G = _groups(groups, f.size)
    sums = np.bincount(ids, weights=np.abs(f - g), minlength=G)
    counts = np.bincount(ids, minlength=G)
    return float(np.mean(sums / counts))


def relative_difference_of_totals(original_totals: ArrayLike, protected_totals: ArrayLike) -> float:
    """Percent relative absolute difference of totals, mean over totals of 100·|g − f|/f.

    (Shlomo & Young 2006, "relative absolute distance for a total".) Pass the totals (grand
    total, margins) of the original and the protected table; totals with f = 0 are skipped.
    NaN when no total is positive.
    """
    f, g = _pair(original_totals, protected_totals)
    keep = f > 0
    if not keep.any():
        return float("nan")
    return float(np.mean(100.0 * np.abs(g[keep] - f[keep]) / f[keep]))


def percentage_change_by_value(
    original: ArrayLike, protected: ArrayLike, max_value: int | None = None
) -> pl.DataFrame:
    """Average change per original value (Shlomo, Krenzke & Li 2019; cellKey's d1, d2).

    One row per distinct positive original value f (up to ``max_value``): ``cells``,
    ``mean_abs_diff`` = mean |g − f|, ``mean_pct_change`` = mean 100·(g − f)/f (the bias,
    signed) and ``mean_abs_pct_change`` = mean 100·|g − f|/f.
    """
    f, g = _pair(original, protected)
    keep = f > 0
    if max_value is not None:
        keep &= f <= max_value
    d = pl.DataFrame({"value": f[keep], "diff": g[keep] - f[keep]})
    return (
        d.group_by("value")
        .agg(
            pl.len().alias("cells"),
            pl.col("diff").abs().mean().alias("mean_abs_diff"),
            (100.0 * pl.col("diff") / pl.col("value")).mean().alias("mean_pct_change"),
            (100.0 * pl.col("diff").abs() / pl.col("value")).mean().alias("mean_abs_pct_change"),
        )
        .sort("value")
        .with_columns(pl.col("cells").cast(pl.Int64))
    )


class Chi2Result(NamedTuple):
    """Pearson χ² test of independence of a two-way table and Cramér's V."""

    chi2: float
    p_value: float
    dof: int
    cramers_v: float
    n: float


def chi2_independence(table: ArrayLike) -> Chi2Result:
    """Pearson χ² test of independence of a two-way table (no continuity correction) and
    Cramér's V = sqrt(χ² / (N·(min(r, c) − 1))) (Shlomo & Young 2006; ESSnet Handbook).

    Rows and columns that are all zero are dropped first (their expected counts are 0).
    NaN when fewer than two non-empty rows or columns remain. Values must be ≥ 0.
    """
    t = np.asarray(table, dtype=float)
    if t.ndim != 2:
        raise InputError(f"chi2_independence needs a two-way table (2-D array), got {t.ndim}-D")
    if np.isnan(t).any():
        raise InputError("chi2_independence: the table has NaN (missing) cells; fill them first")
    if (t < 0).any():
        raise InputError(
            f"chi2_independence: {int((t < 0).sum())} cells are negative; the χ² test needs "
            "counts ≥ 0 (set negative protected values to 0 first)"
        )
    t = t[t.sum(axis=1) > 0][:, t.sum(axis=0) > 0]
    n = float(t.sum())
    if min(t.shape) < 2:
        return Chi2Result(float("nan"), float("nan"), 0, float("nan"), n)
    res = stats.chi2_contingency(t, correction=False)
    chi2 = float(res.statistic)
    v = math.sqrt(chi2 / (n * (min(t.shape) - 1)))
    return Chi2Result(chi2, float(res.pvalue), int(res.dof), v, n)


def independence_before_after(original: ArrayLike, protected: ArrayLike) -> dict[str, float]:
    """χ², p-value and Cramér's V of a two-way table before and after protection, and the
    relative change of Cramér's V, 100·(V_after − V_before)/V_before (Shlomo & Young 2006).
    Negative protected values are set to 0 for the test."""
    a = chi2_independence(original)
    b = chi2_independence(np.clip(np.asarray(protected, dtype=float), 0, None))
    change = 100.0 * (b.cramers_v - a.cramers_v) / a.cramers_v if a.cramers_v > 0 else float("nan")
    return {
        "chi2_before": a.chi2,
        "chi2_after": b.chi2,
        "p_before": a.p_value,
        "p_after": b.p_value,
        "cramers_v_before": a.cramers_v,
        "cramers_v_after": b.cramers_v,
        "cramers_v_change_pct": change,
    }


def two_way_table(
    frame: pl.DataFrame, rows: str, cols: str, value: str
) -> tuple[np.ndarray, list[Any], list[Any]]:
    """Sum ``value`` over every other column into a dense rows × cols array (missing
    combinations 0). Returns (array, row codes, column codes), codes sorted."""
    _columns(frame, [rows, cols, value], "two_way_table")
    if frame[rows].null_count() or frame[cols].null_count():
        raise InputError(f"two_way_table: the codes of {rows!r} or {cols!r} have nulls; fill them first")
    agg = frame.group_by(rows, cols, maintain_order=True).agg(pl.col(value).cast(pl.Float64).fill_null(0.0).sum())
    rpos = (agg[rows].rank("dense") - 1).cast(pl.Int64).to_numpy()
    cpos = (agg[cols].rank("dense") - 1).cast(pl.Int64).to_numpy()
    rcodes = agg[rows].unique().sort().to_list()
    ccodes = agg[cols].unique().sort().to_list()
    out = np.zeros((len(rcodes), len(ccodes)))
    np.add.at(out, (rpos, cpos), agg[value].to_numpy())
    return out, rcodes, ccodes


def spearman_correlation(original: ArrayLike, protected: ArrayLike) -> float:
    """Spearman rank correlation of the cell values before and after protection (ESSnet
    Handbook; Shlomo & Young 2006): 1 when protection keeps the ranking of the cells. NaN
    when either side is constant."""
    f, g = _pair(original, protected)
    if f.size < 2 or np.all(f == f[0]) or np.all(g == g[0]):
        return float("nan")
    return float(stats.spearmanr(f, g).statistic)


def variance_of_cell_averages(values: ArrayLike, groups: ArrayLike | None = None) -> float:
    """Variance (divisor G) of the average cell value of each group of cells (a row or
    column of the table): Σ_r (ā_r − ā)²/G with ā_r = mean of the cells in group r and ā the
    mean of the ā_r (Shlomo & Young 2006; ESSnet Handbook, "variance of the average cell
    size"). Without ``groups`` every cell is its own group: the variance of the cell values.
    Compare it before and after protection."""
    v = _vec(values, "values")
    if v.size == 0:
        return float("nan")
    ids, G = _groups(groups, v.size)
    means = np.bincount(ids, weights=v, minlength=G) / np.bincount(ids, minlength=G)
    return float(np.var(means))


def anova_r2(values: ArrayLike, groups: ArrayLike, weights: ArrayLike | None = None) -> float:
    """R² of a one-way ANOVA: between-group sum of squares over total sum of squares,
    R² = Σ_r W_r (ȳ_r − ȳ)² / Σ_i w_i (y_i − ȳ)² (Shlomo & Young 2006; ESSnet Handbook).

    Two uses on a table: (a) ``values`` the cell counts and ``groups`` a dimension's codes —
    how much of the spread of the cells lies between rows; (b) ``values`` the numeric code of
    a target dimension (e.g. years of age), ``groups`` another dimension and ``weights`` the
    cell counts — the ANOVA of the target over the persons the table describes. Negative
    weights are set to 0. NaN when the total sum of squares is 0.
    """
    y = _vec(values, "values")
    w = np.ones_like(y) if weights is None else np.clip(_vec(weights, "weights"), 0, None)
    if w.shape != y.shape:
        raise InputError(f"weights must be aligned with values: {w.size} against {y.size}")
    ids, G = _groups(groups, y.size)
    W = np.bincount(ids, weights=w, minlength=G)
    total_w = float(W.sum())
    if total_w <= 0:
        return float("nan")
    ybar = float(np.sum(w * y) / total_w)
    sst = float(np.sum(w * (y - ybar) ** 2))
    if sst <= 0:
        return float("nan")
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.bincount(ids, weights=w * y, minlength=G) / W
    ssb = float(np.sum(np.where(W > 0, W * (means - ybar) ** 2, 0.0)))
    return ssb / sst


def binomial_test_rounding(original: ArrayLike, rounded: ArrayLike, base: int) -> pl.DataFrame:
    """Exact binomial test that a random-rounding realisation follows its probabilities
    (Shlomo & Young 2006; ESSnet Handbook, information loss).

    Unbiased random rounding to base b rounds a count with residual r = n mod b up with
    probability r/b. One row per residual r = 1…b−1 present: ``cells``, ``rounded_up``,
    ``observed`` share rounded up, ``expected`` = r/b and the two-sided ``p_value`` of
    scipy.stats.binomtest. Every rounded value must be an adjacent multiple of b (a count
    that is already a multiple must stay); otherwise InputError.
    """
    f, g = _pair(original, rounded)
    if not isinstance(base, (int, np.integer)) or isinstance(base, bool) or base < 2:
        raise InputError("base must be an integer ≥ 2")
    if (f != np.round(f)).any() or (f < 0).any():
        raise InputError("binomial_test_rounding: original values must be counts (integers ≥ 0)")
    r = np.mod(f, base)
    down = f - r
    up_ = down + base
    is_up = (g == up_) & (r > 0)
    ok = np.where(r > 0, (g == down) | (g == up_), g == f)
    if not ok.all():
        bad = np.flatnonzero(~ok)
        raise InputError(
            f"binomial_test_rounding: {bad.size} cells are not rounded to an adjacent multiple "
            f"of {base} (cell positions {show_values(bad.tolist())})"
        )
    rows = []
    for res in range(1, base):  # a loop over residual classes, not cells
        sel = r == res
        n = int(sel.sum())
        if n == 0:
            continue
        k = int(is_up[sel].sum())
        p = res / base
        rows.append((res, n, k, k / n, p, float(stats.binomtest(k, n, p).pvalue)))
    return pl.DataFrame(
        rows,
        schema={"residual": pl.Int64, "cells": pl.Int64, "rounded_up": pl.Int64,
                "observed": pl.Float64, "expected": pl.Float64, "p_value": pl.Float64},
        orient="row",
    )
