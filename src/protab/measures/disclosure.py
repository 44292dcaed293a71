"""Disclosure risk: directly disclosive cells and attribute disclosure from quasi-identifiers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from protab.errors import InputError, show_values
from protab.measures._measure_inputs import _columns

__all__ = ["EXACT_TOL", "disclosive_cells", "disclosure_probabilities", "f_beta_risk"]

#: A disclosure probability within this of 1 counts as an exact disclosure (docs/methods.md §5).
EXACT_TOL = 1e-9


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
    (Langsrud & Lupp 2022; docs/methods.md §5).

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
    _check_quasi(frame, quasi, sensitive, count)
    agg = frame.group_by(*quasi, sensitive, maintain_order=True).agg(
        pl.col(count).cast(pl.Float64).fill_null(0.0).clip(lower_bound=0.0).sum().alias("_f")
    )
    # one integer id per combination: window functions over one integer key are cheap
    combos = agg.select(quasi).unique().with_row_index("_gid")
    agg = agg.join(combos, on=quasi, how="left", nulls_equal=True)
    agg = agg.with_columns(pl.col("_f").sum().over("_gid").alias("n_total"))
    agg, den = _with_denominator(agg, know_yourself)
    agg = agg.with_columns(
        pl.when(den > 0).then(pl.col("_f") / den).otherwise(0.0).alias("probability")
    )
    return _best_guess(agg, quasi, sensitive)


def _check_quasi(frame: pl.DataFrame, quasi: list[str], sensitive: str, count: str) -> None:
    """The columns of :func:`disclosure_probabilities`: quasi-identifiers, not the sensitive one
    and not named as its output columns."""
    if not quasi:
        raise InputError("disclosure_probabilities needs at least one quasi-identifier column")
    if sensitive in quasi:
        raise InputError(f"the sensitive column {sensitive!r} cannot also be a quasi-identifier")
    _columns(frame, [*quasi, sensitive, count], "disclosure_probabilities")
    clash = [c for c in quasi if c in ("n_total", "probability", "guessed")]
    if clash:
        raise InputError(f"rename the quasi-identifier column(s) {show_values(clash)} first")


def _with_denominator(agg: pl.DataFrame, know_yourself: bool) -> tuple[pl.DataFrame, pl.Expr]:
    """The denominator of the probabilities: n, or with ``know_yourself`` n − m_s (m_s the
    largest min(1, f_t) over the other categories t ≠ s; Langsrud & Lupp 2022)."""
    if not know_yourself:
        return agg, pl.col("n_total")
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
    return agg, pl.col("n_total") - other


def _best_guess(agg: pl.DataFrame, quasi: list[str], sensitive: str) -> pl.DataFrame:
    """The best category per combination: the largest probability, ties to the smallest code;
    null where the combination is empty."""
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
    """Risk of exact attribute disclosure as an F-measure (Langsrud & Lupp 2022; docs/methods.md §5).

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
        po, pp, same = _joined_probabilities(original_probs, protected_probs, match_category)
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


def _joined_probabilities(original: pl.DataFrame, protected: pl.DataFrame,
                          match_category: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Frames of :func:`disclosure_probabilities` joined on their quasi-identifiers: original and
    protected probabilities (NaN where missing) and whether the guessed categories agree (all
    True unless ``match_category``)."""
    _columns(original, ["probability", "n_total"], "f_beta_risk (original)")
    _columns(protected, ["probability"], "f_beta_risk (protected)")
    keys = [c for c in original.columns if c not in ("n_total", "probability", "guessed")]
    _columns(protected, keys, "f_beta_risk (protected)")
    left = original.select(*keys, pl.col("probability").alias("_po"),
                           *([pl.col("guessed").cast(pl.String).alias("_go")] if "guessed" in original.columns else []))
    right = protected.select(*keys, pl.col("probability").alias("_pp"),
                             *([pl.col("guessed").cast(pl.String).alias("_gp")] if "guessed" in protected.columns else []))
    j = left.join(right, on=keys, how="left", nulls_equal=True)
    po = j["_po"].cast(pl.Float64).fill_null(float("nan")).to_numpy()
    pp = j["_pp"].cast(pl.Float64).fill_null(float("nan")).to_numpy()
    same = np.ones(po.size, dtype=bool)
    if match_category:
        if "_go" not in j.columns or "_gp" not in j.columns:
            raise InputError("match_category needs a 'guessed' column on both sides")
        same = (j["_go"] == j["_gp"]).fill_null(False).to_numpy()
    return po, pp, same
