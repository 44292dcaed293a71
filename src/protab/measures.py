"""Utility and risk measures over aligned original and protected cell values.

Numeric only: arrays, polars Series and frames in, numbers and polars frames out; nothing
here knows of DuckDB (DESIGN.md). Formulas follow ../METHODS.md §5 and its sources: the
ESSnet Handbook on SDC (frequency tables: information loss and disclosure risk measures),
Shlomo & Young (2005, 2006), Antal, Shlomo & Elliot (2014), Shlomo, Krenzke & Li (2019),
Lupp & Langsrud (2021), Langsrud & Heldal (2018) and Langsrud & Lupp (2022).

``f`` is the original and ``g`` the protected value of a cell, over the K cells compared
(two arrays aligned cell by cell). Every function is vectorised (NumPy, SciPy, polars); the
only Python loops run over a handful of classes (residues of a rounding base), never cells.

Utility
    :func:`hellinger_distance`, :func:`hellinger_utility`, :func:`mean_absolute_deviation`,
    :func:`average_absolute_difference`, :func:`relative_difference_of_totals`,
    :func:`percentage_change_by_value`, :func:`chi2_independence`,
    :func:`independence_before_after`, :func:`two_way_table`, :func:`spearman_correlation`,
    :func:`variance_of_cell_averages`, :func:`anova_r2`, :func:`binomial_test_rounding`.
Risk
    :func:`share_small_cells`, :func:`small_cells_unchanged`, :func:`share_changed`,
    :func:`percent_changed`, :func:`noise_by_value`, :func:`ptable_noise_by_value`,
    :func:`disclosive_cells`, :func:`entropy_risk`, :func:`entropy_risk_perturbed`,
    :func:`conditional_entropy_risk`, :func:`disclosure_probabilities`, :func:`f_beta_risk`.

Entropies use the natural logarithm (every measure here is a ratio of entropies, so the
base cancels).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import polars as pl
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy import stats

from protab.errors import InputError, show_values

if TYPE_CHECKING:  # pragma: no cover
    from protab.ptable import PTable

__all__ = [
    "Chi2Result",
    "anova_r2",
    "average_absolute_difference",
    "binomial_test_rounding",
    "chi2_independence",
    "conditional_entropy_risk",
    "disclosive_cells",
    "disclosure_probabilities",
    "entropy_risk",
    "entropy_risk_perturbed",
    "f_beta_risk",
    "hellinger_distance",
    "hellinger_utility",
    "independence_before_after",
    "mean_absolute_deviation",
    "noise_by_value",
    "percent_changed",
    "percentage_change_by_value",
    "ptable_noise_by_value",
    "relative_difference_of_totals",
    "share_changed",
    "share_small_cells",
    "small_cells_unchanged",
    "spearman_correlation",
    "two_way_table",
    "variance_of_cell_averages",
]

#: A disclosure probability within this of 1 counts as an exact disclosure (METHODS.md §5).
EXACT_TOL = 1e-9


# --------------------------------------------------------------------------------------------
# input helpers


def _vec(x: ArrayLike, name: str) -> np.ndarray:
    if isinstance(x, pl.DataFrame):
        raise InputError(f"{name}: give one column (a Series or array), not a whole frame")
    a = np.asarray(x.to_numpy() if isinstance(x, pl.Series) else x, dtype=float).ravel()
    if np.isnan(a).any():
        raise InputError(
            f"{name} must not contain NaN or null (missing) cells; {int(np.isnan(a).sum())} do"
        )
    return a


def _pair(original: ArrayLike, protected: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    f = _vec(original, "original")
    g = _vec(protected, "protected")
    if f.shape != g.shape:
        raise InputError(
            f"original and protected values must be aligned: {f.size} against {g.size} cells"
        )
    return f, g


def _groups(groups: ArrayLike | None, size: int) -> tuple[np.ndarray, int]:
    """Integer group ids 0..G-1 for each cell (each cell its own group when None)."""
    if groups is None:
        return np.arange(size), size
    s = groups if isinstance(groups, pl.Series) else pl.Series("g", np.asarray(groups).ravel())
    if s.len() != size:
        raise InputError(f"groups must label every cell: {s.len()} labels for {size} cells")
    if s.null_count():
        raise InputError(f"groups: {s.null_count()} cells have no group (null); fill them first")
    # ids 0..G-1 in sorted label order (a join to the sorted distinct labels: only the G
    # labels are sorted), so that sums over groups run in the same order on every call
    df = pl.DataFrame({"g": s})
    keys = df.unique().sort("g").with_row_index("_id")
    ids = df.join(keys, on="g", how="left", maintain_order="left")["_id"].cast(pl.Int64).to_numpy()
    return ids, keys.height


def _signed_sqrt(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.sqrt(np.abs(x))


def _entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-np.sum(p * np.log(p)))


def _columns(frame: pl.DataFrame, cols: Sequence[str], what: str) -> None:
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise InputError(
            f"{what}: the frame has no column(s) {show_values(missing)} "
            f"(columns: {show_values(frame.columns, 10)})"
        )


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
    """Σ|f − g| / K over the K cells compared (METHODS.md §5; SmallCountRounding's meanAbsDiff)."""
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


# --------------------------------------------------------------------------------------------
# risk: small cells, changed cells, noise per original value


def share_changed(original: ArrayLike, protected: ArrayLike) -> float:
    """Share of cells whose protected value differs from the original (0 … 1)."""
    f, g = _pair(original, protected)
    return float(np.mean(f != g)) if f.size else 0.0


def percent_changed(original: ArrayLike, protected: ArrayLike, tol: float = 0.0) -> float:
    """Percent of cells whose protected value differs from the original by more than ``tol``
    (ESSnet Handbook; 0 … 100). Use a small ``tol`` for fitted (non-integer) values."""
    f, g = _pair(original, protected)
    return float(100.0 * np.mean(np.abs(f - g) > tol)) if f.size else 0.0


def share_small_cells(values: ArrayLike, k: int = 2) -> float:
    """Share of cells with a value in 1…k (ESSnet Handbook: identification risk of small
    frequencies). Fitted (non-integer) values count when 0.5 ≤ value < k + 0.5."""
    v = _vec(values, "values")
    if v.size == 0:
        return 0.0
    return float(np.mean((v >= 0.5) & (v < k + 0.5)))


def small_cells_unchanged(
    original: ArrayLike, protected: ArrayLike, k: int = 2, tol: float = 1e-9
) -> float:
    """Share of the original small cells (1…k) that are published with their true value
    (Shlomo & Young 2006: the disclosure risk of the R-U map). 1 for the original table; NaN
    when the original has no small cell."""
    f, g = _pair(original, protected)
    small = (f >= 1) & (f <= k)
    if not small.any():
        return float("nan")
    return float(np.mean(np.abs(g[small] - f[small]) <= tol))


def noise_by_value(
    original: ArrayLike, protected: ArrayLike, max_value: int | None = None
) -> pl.DataFrame:
    """Empirical noise v = g − f per original value, from (original, protected) pairs.

    One row per distinct original value (up to ``max_value``): ``cells``, ``p_stay`` =
    P(v = 0 | f), ``mean`` and ``var`` (divisor cells) of v, and ``inv_var`` = 1/Var(v | f),
    a risk (ESSnet Handbook; inf where the noise never varies).
    """
    f, g = _pair(original, protected)
    keep = np.ones(f.shape, dtype=bool) if max_value is None else f <= max_value
    d = pl.DataFrame({"value": f[keep], "v": g[keep] - f[keep]})
    out = (
        d.group_by("value")
        .agg(
            pl.len().cast(pl.Int64).alias("cells"),
            (pl.col("v") == 0).mean().alias("p_stay"),
            pl.col("v").mean().alias("mean"),
            pl.col("v").var(ddof=0).alias("var"),
        )
        .sort("value")
    )
    return out.with_columns(
        pl.when(pl.col("var") > 0).then(1.0 / pl.col("var")).otherwise(float("inf")).alias("inv_var")
    )


def ptable_noise_by_value(ptable: PTable, values: ArrayLike | None = None) -> pl.DataFrame:
    """P(v = 0 | n) and 1/Var(v | n) for original values n, from a p-table (ESSnet Handbook).

    ``values`` defaults to 0…imax. A value uses its p-table row class (values past imax
    repeat the last rows); values below the smallest row are never perturbed (p_stay 1, var
    0). Columns: value, p_stay, mean, var, inv_var (inf where var = 0).
    """
    vals = np.arange(ptable.imax + 1) if values is None else np.asarray(values).ravel()
    vals = vals.astype(np.int64)
    cls = ptable.row_class(vals)
    f = ptable.frame
    w = (f["ub_n"] - f["lb_n"]).to_numpy().astype(float) / ptable.den
    v = f["v"].to_numpy().astype(float)
    i = f["i"].to_numpy()
    n_cls = ptable.imax + 1
    m0 = np.bincount(i, weights=w, minlength=n_cls)
    m1 = np.bincount(i, weights=w * v, minlength=n_cls)
    m2 = np.bincount(i, weights=w * v * v, minlength=n_cls)
    stay = np.bincount(i, weights=w * (v == 0), minlength=n_cls)
    has = m0[cls] > 0
    mean = np.where(has, m1[cls], 0.0)
    var = np.where(has, m2[cls] - m1[cls] ** 2, 0.0)
    var = np.where(np.abs(var) < 1e-12, 0.0, var)
    with np.errstate(divide="ignore"):
        inv = np.where(var > 0, 1.0 / np.where(var > 0, var, 1.0), np.inf)
    return pl.DataFrame(
        {"value": vals, "p_stay": np.where(has, stay[cls], 1.0), "mean": mean, "var": var,
         "inv_var": inv}
    )


# --------------------------------------------------------------------------------------------
# risk: directly disclosive cells (Lupp & Langsrud 2021)


def disclosive_cells(
    frame: pl.DataFrame,
    *,
    sensitive: str,
    count: str = "n",
    k: int = 1,
    total: str = "Total",
    unknown: str | None = None,
) -> pl.DataFrame:
    """Directly disclosive cells for a k-coalition (Lupp & Langsrud 2021; SSBtools
    FindDisclosiveCells).

    ``frame`` holds cells of a table with a flat sensitive dimension ``sensitive`` and any
    other dimension columns (every column except ``count``). A cell c = (other codes,
    sensitive category) with |c| > 0 is directly disclosive when the published margin p_c of
    the same other codes over the sensitive variable has |p_c| − k ≤ |c|: a coalition of k
    contributors can deduce that every other unit of p_c is in c. p_c is the row whose
    sensitive code is ``total`` when the frame has it (a published, possibly perturbed
    margin), else the sum of the categories. With ``unknown`` (a sensitive code meaning
    "unknown"), that category is never disclosive and a margin with unknowns is safe.
    Returns the non-total cells with columns ``margin`` and ``disclosive`` (Boolean).
    """
    _columns(frame, [sensitive, count], "disclosive_cells")
    if k < 0:
        raise InputError("disclosive_cells: the coalition size k must be ≥ 0")
    others = [c for c in frame.columns if c not in (sensitive, count)]
    val = pl.col(count).cast(pl.Float64).fill_null(0.0)
    is_total = pl.col(sensitive).cast(pl.String) == total
    cells = frame.filter(~is_total).with_columns(val.alias(count))
    tot = frame.filter(is_total).select(*others, val.alias("margin"))
    if tot.height:
        if tot.select(others).is_duplicated().any() if others else tot.height > 1:
            raise InputError("disclosive_cells: the frame has duplicate margin rows")
        cells = (
            cells.join(tot, on=others, how="left", nulls_equal=True) if others
            else cells.with_columns(pl.lit(tot["margin"][0]).alias("margin"))
        )
        summed = pl.col(count).sum().over(others) if others else pl.col(count).sum()
        cells = cells.with_columns(pl.col("margin").fill_null(summed))
    else:
        summed = pl.col(count).sum().over(others) if others else pl.col(count).sum()
        cells = cells.with_columns(summed.alias("margin"))
    cond = (pl.col(count) > 0) & (pl.col("margin") - k <= pl.col(count))
    if unknown is not None:
        is_unk = pl.col(sensitive).cast(pl.String) == unknown
        unk_n = pl.when(is_unk).then(pl.col(count)).otherwise(0.0)
        has_unk = (unk_n.sum().over(others) if others else unk_n.sum()) > 0
        cond = cond & ~is_unk & ~has_unk
    return cells.with_columns(cond.alias("disclosive"))


# --------------------------------------------------------------------------------------------
# risk: entropy measures (Antal, Shlomo & Elliot 2014; Shlomo, Krenzke & Li 2019)

_W3 = (1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0)


def _weights(weights: Sequence[float]) -> tuple[float, float, float]:
    w = tuple(float(x) for x in weights)
    if len(w) != 3 or any(x < 0 for x in w) or abs(sum(w) - 1.0) > 1e-9:
        raise InputError("entropy risk weights must be three numbers ≥ 0 that sum to 1")
    return w  # type: ignore[return-value]


def _size_term(N: float) -> float:
    # −(1/√N)·log(1/(e·√N)) = (1 + ½ log N)/√N: 1 at N = 1, decreasing to 0
    return (1.0 + 0.5 * math.log(N)) / math.sqrt(N)


def _uniformity_term(F: np.ndarray) -> float:
    K, N = F.size, float(F.sum())
    if K < 2:
        return 1.0
    return 1.0 - _entropy(F / N) / math.log(K)


def _population(values: ArrayLike, name: str) -> np.ndarray:
    F = _vec(values, name)
    if (F < 0).any():
        raise InputError(f"{name}: population counts must be ≥ 0; {int((F < 0).sum())} are negative")
    if F.sum() <= 0:
        raise InputError(f"{name}: the table is empty (its counts sum to 0)")
    return F


def entropy_risk(values: ArrayLike, weights: Sequence[float] = _W3) -> float:
    """Entropy-based disclosure risk of a population frequency table (Antal, Shlomo & Elliot
    2014; ESSnet Handbook):

        r = w1·|D|/K + w2·(1 − H/log K) − w3·(1/√N)·log(1/(e·√N))

    with K the cells, D the zero cells, N = Σ F and H = −Σ (F/N) log(F/N). Each term lies in
    [0, 1]; so does r for weights ≥ 0 summing to 1 (default ⅓ each). Use the inner cells.
    """
    w1, w2, w3 = _weights(weights)
    F = _population(values, "values")
    K, N = F.size, float(F.sum())
    return w1 * float(np.sum(F == 0)) / K + w2 * _uniformity_term(F) + w3 * _size_term(N)


def _joint_from_pairs(f: np.ndarray, g: np.ndarray, weight: np.ndarray | None) -> np.ndarray:
    """Joint distribution p(a, b) of the (original, protected) value pairs of the cells, as
    a sparse count matrix over distinct a (rows) and b (columns)."""
    _, ai = np.unique(f, return_inverse=True)
    _, bi = np.unique(g, return_inverse=True)
    w = np.ones(f.size) if weight is None else weight
    return sp.coo_array((w, (ai.ravel(), bi.ravel()))).tocsr()


def _conditional_entropy(J: sp.sparray | sp.spmatrix) -> tuple[float, float]:
    """(H(A|B), H(A)) from a joint count matrix J[a, b] (rows A, columns B)."""
    J = sp.coo_array(J)
    tot = float(J.sum())
    if tot <= 0:
        raise InputError("the joint distribution is empty (it sums to 0)")
    pa = np.asarray(J.sum(axis=1)).ravel() / tot
    pb = np.asarray(J.sum(axis=0)).ravel() / tot
    keep = J.data > 0
    pab = J.data[keep] / tot
    h_ab = float(-np.sum(pab * np.log(pab / pb[J.col[keep]])))
    return max(h_ab, 0.0), _entropy(pa)


def conditional_entropy_risk(
    original: ArrayLike | None = None,
    protected: ArrayLike | None = None,
    *,
    joint: Any = None,
    unit_weighted: bool = False,
) -> float:
    """Conditional-entropy disclosure risk RM = 1 − H(A|B)/H(A) (Antal, Shlomo & Elliot 2014;
    Shlomo, Krenzke & Li 2019, §3.5).

    A is the original and B the protected value of a cell; their joint distribution is the
    empirical one of the (f, g) pairs over the cells: p(a, b) = #{cells with f = a, g = b}/K,
    H(A) = −Σ_a p(a) log p(a) and H(A|B) = −Σ_{a,b} p(a, b) log(p(a, b)/p(b)). RM is 1 when
    the protected value determines the original (no perturbation, or a one-to-one recoding)
    and 0 when it carries no information about it. With ``unit_weighted`` every cell counts
    with its original value f (a person's view: the cell a unit is in) instead of 1.
    ``joint`` instead gives the joint counts directly: a (sparse) matrix J[i, j] of units in
    original category i and protected category j (record-level methods such as PRAM or
    swapping). RM = 1 when H(A) = 0 (the original value is known without the table).
    """
    if joint is not None:
        h_ab, h_a = _conditional_entropy(joint)
    else:
        if original is None or protected is None:
            raise InputError("conditional_entropy_risk needs original and protected values, or joint=")
        f, g = _pair(original, protected)
        if f.size == 0:
            return float("nan")
        w = None
        if unit_weighted:
            if (f < 0).any():
                raise InputError("unit_weighted needs original counts ≥ 0")
            w = f
        h_ab, h_a = _conditional_entropy(_joint_from_pairs(f, g, w))
    if h_a <= 0:
        return 1.0
    return float(min(max(1.0 - h_ab / h_a, 0.0), 1.0))


def entropy_risk_perturbed(
    original: ArrayLike,
    protected: ArrayLike,
    weights: Sequence[float] = _W3,
    *,
    joint: Any = None,
) -> float:
    """Entropy-based risk r# of a perturbed population table (Antal, Shlomo & Elliot 2014;
    ESSnet Handbook):

        r# = w1·(|D|/K)^(|D∪Q|/|D∩Q|) + w2·(1 − H/log K)·(1 − H#/H_A) − w3·(1/√N)·log(1/(e·√N))

    D the original zero cells, Q the protected zero cells (|g| < 0.5), H and N of the
    original table as in :func:`entropy_risk`, and 1 − H#/H_A the conditional-entropy factor
    :func:`conditional_entropy_risk` (H# = H(A|B), from the (f, g) pairs of the cells, or
    from ``joint`` — units moving between cells — as the handbook writes it). The first term
    is 0 when no true zero stays zero (|D∩Q| = 0). r# = r when protected equals original.
    """
    w1, w2, w3 = _weights(weights)
    F = _population(original, "original")
    f, g = _pair(F, protected)
    K, N = F.size, float(F.sum())
    D = f == 0
    Q = np.abs(g) < 0.5
    inter, union = int(np.sum(D & Q)), int(np.sum(D | Q))
    if D.sum() == 0 or inter == 0:
        t1 = 0.0
    else:
        t1 = (float(D.sum()) / K) ** (union / inter)
    rm = conditional_entropy_risk(f, g, joint=joint)
    return w1 * t1 + w2 * _uniformity_term(F) * rm + w3 * _size_term(N)


# --------------------------------------------------------------------------------------------
# risk: attribute disclosure from quasi-identifiers (Langsrud & Lupp 2022)


def disclosure_probabilities(
    frame: pl.DataFrame,
    *,
    sensitive: str,
    quasi: Sequence[str],
    count: str = "n",
    know_yourself: bool = False,
) -> pl.DataFrame:
    """Probability of guessing the sensitive category of a person from quasi-identifiers
    (Langsrud & Lupp 2022; METHODS.md §5).

    Counts are summed per (quasi-identifier combination, sensitive category); negative counts
    (noise) count as 0. For each combination with total n > 0 the attacker guesses the
    category s with the largest probability:

    - without ``know_yourself``: f_s / n (the largest share);
    - with ``know_yourself`` (1-coalition: the attacker is a member of the population and
      removes themself): f_s / (n − m_s), m_s = max over the other categories t ≠ s of
      min(1, f_t).

    Returns one row per combination, sorted: the quasi columns, ``n_total``,
    ``probability`` (null where n = 0) and ``guessed`` (the category; ties go to the first
    in sort order). A probability within 1e-9 of 1 is an exact disclosure.
    """
    quasi = list(quasi)
    if not quasi:
        raise InputError("disclosure_probabilities needs at least one quasi-identifier column")
    if sensitive in quasi:
        raise InputError(f"the sensitive column {sensitive!r} cannot also be a quasi-identifier")
    _columns(frame, [*quasi, sensitive, count], "disclosure_probabilities")
    clash = [c for c in quasi if c in ("n_total", "probability", "guessed")]
    if clash:
        raise InputError(f"rename the quasi-identifier column(s) {show_values(clash)} first")
    agg = frame.group_by(*quasi, sensitive, maintain_order=True).agg(
        pl.col(count).cast(pl.Float64).fill_null(0.0).clip(lower_bound=0.0).sum().alias("_f")
    )
    # one integer id per combination: window functions over one integer key are cheap
    combos = agg.select(quasi).unique().with_row_index("_gid")
    agg = agg.join(combos, on=quasi, how="left", nulls_equal=True)
    agg = agg.with_columns(pl.col("_f").sum().over("_gid").alias("n_total"))
    if know_yourself:
        c = pl.min_horizontal(pl.lit(1.0), pl.col("_f"))
        agg = agg.with_columns(c.alias("_c"))
        agg = agg.with_columns(
            pl.col("_c").max().over("_gid").alias("_cmax"),
        ).with_columns(
            (pl.col("_c") == pl.col("_cmax")).sum().over("_gid").alias("_nmax"),
            pl.when(pl.col("_c") < pl.col("_cmax")).then(pl.col("_c")).otherwise(None)
            .max().over("_gid").fill_null(0.0).alias("_c2"),
        )
        other = (
            pl.when((pl.col("_c") < pl.col("_cmax")) | (pl.col("_nmax") > 1))
            .then(pl.col("_cmax")).otherwise(pl.col("_c2"))
        )
        den = pl.col("n_total") - other
    else:
        den = pl.col("n_total")
    agg = agg.with_columns(
        pl.when(den > 0).then(pl.col("_f") / den).otherwise(0.0).alias("probability")
    )
    # the best category per combination: the largest probability, ties to the smallest code
    best = (
        agg.filter(pl.col("probability") == pl.col("probability").max().over("_gid"))
        .group_by("_gid")
        .agg(*[pl.col(q).first() for q in quasi], pl.col(sensitive).min(),
             pl.col("n_total").first(), pl.col("probability").first())
    )
    empty = pl.col("n_total") <= 0
    return best.select(
        *quasi,
        "n_total",
        pl.when(empty).then(None).otherwise(pl.col("probability").clip(upper_bound=1.0)).alias("probability"),
        pl.when(empty).then(None).otherwise(pl.col(sensitive)).alias("guessed"),
    ).sort(quasi, nulls_last=True)


def f_beta_risk(
    original_probs: Any,
    protected_probs: Any,
    beta: float = 0.5,
    *,
    tol: float = EXACT_TOL,
    match_category: bool = False,
) -> dict[str, float]:
    """Risk of exact attribute disclosure as an F-measure (Langsrud & Lupp 2022; METHODS.md §5).

    An exact disclosure is a combination whose disclosure probability is 1 (within ``tol``).
    a = exact disclosures in the original data, b = in the protected (or expected) data,
    counted only where the original combination is non-empty, c = combinations exact in
    both; recall = c/a, precision = c/b, F_β = (1 + β²)·c / (β²·a + b) (0 when a = b = 0).

    The inputs are frames from :func:`disclosure_probabilities` (joined on their
    quasi-identifier columns; a combination missing on one side has no disclosure there) or
    aligned arrays of probabilities (NaN marks an empty combination). With
    ``match_category`` (frames only) c also requires the same guessed category.
    """
    if beta <= 0:
        raise InputError("beta must be > 0")
    if isinstance(original_probs, pl.DataFrame) != isinstance(protected_probs, pl.DataFrame):
        raise InputError("f_beta_risk: give two frames or two arrays, not one of each")
    if isinstance(original_probs, pl.DataFrame):
        _columns(original_probs, ["probability", "n_total"], "f_beta_risk (original)")
        _columns(protected_probs, ["probability"], "f_beta_risk (protected)")
        keys = [c for c in original_probs.columns if c not in ("n_total", "probability", "guessed")]
        _columns(protected_probs, keys, "f_beta_risk (protected)")
        left = original_probs.select(*keys, pl.col("probability").alias("_po"),
                                     *( [pl.col("guessed").cast(pl.String).alias("_go")]
                                        if "guessed" in original_probs.columns else []))
        right = protected_probs.select(*keys, pl.col("probability").alias("_pp"),
                                       *( [pl.col("guessed").cast(pl.String).alias("_gp")]
                                          if "guessed" in protected_probs.columns else []))
        j = left.join(right, on=keys, how="left", nulls_equal=True)
        po = j["_po"].cast(pl.Float64).fill_null(float("nan")).to_numpy()
        pp = j["_pp"].cast(pl.Float64).fill_null(float("nan")).to_numpy()
        same = np.ones(po.size, dtype=bool)
        if match_category:
            if "_go" not in j.columns or "_gp" not in j.columns:
                raise InputError("match_category needs a 'guessed' column on both sides")
            same = (j["_go"] == j["_gp"]).fill_null(False).to_numpy()
    else:
        if match_category:
            raise InputError("match_category needs frames with a 'guessed' column")
        po = np.asarray(original_probs, dtype=float).ravel()
        pp = np.asarray(protected_probs, dtype=float).ravel()
        if po.shape != pp.shape:
            raise InputError(f"probabilities must be aligned: {po.size} against {pp.size}")
        same = np.ones(po.size, dtype=bool)
    nonempty = ~np.isnan(po)
    exact_o = nonempty & (np.abs(np.nan_to_num(po) - 1.0) <= tol)
    exact_p = nonempty & ~np.isnan(pp) & (np.abs(np.nan_to_num(pp) - 1.0) <= tol)
    a = int(exact_o.sum())
    b = int(exact_p.sum())
    c = int((exact_o & exact_p & same).sum())
    b2 = beta * beta
    den = b2 * a + b
    return {
        "a": a,
        "b": b,
        "c": c,
        "recall": c / a if a else float("nan"),
        "precision": c / b if b else float("nan"),
        "f_beta": (1 + b2) * c / den if den else 0.0,
    }

