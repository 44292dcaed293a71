"""The columns of compare's frame: the measures (MEASURES: meaning and source), why one can be
empty (WHY_EMPTY), their types (SCHEMA); and the options of one comparison (Options)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl


#: The columns of :func:`compare`'s frame after method/view/cells: name → (meaning, source).
def _doc(meaning: str, source: str) -> tuple[str, str]:
    return meaning, source


MEASURES: dict[str, tuple[str, str]] = {
    "hellinger_utility": _doc("Hellinger utility 1 − HD/√Σf: 1 = unchanged, lower = more damage "
                          "(signed √ for negative values).", "Langsrud & Heldal 2018"),
    "hellinger_distance": _doc("Hellinger distance HD = √(½Σ(√f − √g)²): 0 = unchanged.",
                           "Shlomo & Young 2006"),
    "mean_abs_dev": _doc("Mean absolute deviation Σ|f − g|/K over all cells compared.",
                     "ESSnet Handbook"),
    "aad": _doc("Average absolute difference per cell, averaged over the rows of the `groups` "
            "dimension (inner cells); = mean_abs_dev of the inner cells without groups.",
            "Shlomo & Young 2006"),
    "total_rel_diff_pct": _doc("Percent relative absolute difference of the totals (margins; the "
                           "grand total of an inner table), mean of 100·|g − f|/f.",
                           "Shlomo & Young 2006"),
    "spearman": _doc("Spearman rank correlation of the cells before and after: 1 = ranking kept.",
                 "ESSnet Handbook"),
    "var_cell_avg_change_pct": _doc("Relative change (%) of the variance of the average cell value "
                                "per row of `groups` (inner cells; of the cell values without "
                                "groups).", "Shlomo & Young 2006"),
    "anova_r2_before": _doc("One-way ANOVA R² of the inner cell values across the rows of "
                        "`groups`, original.", "Shlomo & Young 2006"),
    "anova_r2_after": _doc("The same R² on the protected values.", "Shlomo & Young 2006"),
    "chi2_before": _doc("Pearson χ² of independence of the `two_way` crossing, original.",
                    "ESSnet Handbook"),
    "chi2_after": _doc("Pearson χ² of the same crossing, protected (negatives set to 0).",
                   "ESSnet Handbook"),
    "p_before": _doc("p-value of χ² before.", ""),
    "p_after": _doc("p-value of χ² after.", ""),
    "cramers_v_before": _doc("Cramér's V of the `two_way` crossing, original.", "ESSnet Handbook"),
    "cramers_v_after": _doc("Cramér's V after protection.", "ESSnet Handbook"),
    "pct_changed": _doc("Risk/utility: percent of cells whose value changed (by more than 1e-9).",
                    "ESSnet Handbook"),
    "small_share": _doc("Risk: share of cells published with a value in 1…small.",
                    "ESSnet Handbook"),
    "small_unchanged": _doc("Risk: share of the original small cells (1…small) published with "
                        "their true value (1 for the original).", "Shlomo & Young 2006"),
    "rm": _doc("Risk: conditional-entropy measure 1 − H(A|B)/H(A) of the inner cells, A the "
           "original and B the protected value of a cell: 1 = the published value gives the "
           "original away, 0 = it tells nothing. A table published by a formula without the full "
           "crossing (e.g. a*b + a*c) has no inner cells: there the cells of its finest "
           "published crossings (a×b and a×c).", "Shlomo, Krenzke & Li 2019"),
    "entropy_risk": _doc("Risk: entropy risk of the inner population table, r for the original "
                     "and r# for a protected version (weights ⅓ each).",
                     "Antal, Shlomo & Elliot 2014"),
    "disclosive_share": _doc("Risk: share of the cells of the `sensitive` categories that are "
                         "directly disclosive for a k-coalition (|p_c| − k ≤ |c|) as published.",
                         "Lupp & Langsrud 2021"),
    "f_beta": _doc("Risk: F_β of exact attribute disclosures (probability 1 of guessing the "
               "`sensitive` category from the `quasi` identifiers) against the original.",
               "Langsrud & Lupp 2022"),
    "precision": _doc("c/b: share of the disclosures seen in the protected data that are true.",
                  "Langsrud & Lupp 2022"),
    "recall": _doc("c/a: share of the original's disclosures still seen.", "Langsrud & Lupp 2022"),
    "disclosures_original": _doc("a: exact disclosures in the original.", ""),
    "disclosures_protected": _doc("b: exact disclosures in the protected data (where the original "
                              "combination is non-empty).", ""),
    "disclosures_both": _doc("c: exact disclosures in both.", ""),
}

#: Why a measure column can be empty (null in every row): shown on an empty R-U map.
WHY_EMPTY: dict[str, str] = {
    "small_unchanged": "no original cell has a value in 1…small",
    "rm": "no cells at the finest level of every published crossing",
    "entropy_risk": "no inner cells (every dimension at its finest level); a table published by "
                    "a formula has none: compare expected inner frequencies (view expected)",
    "f_beta": "needs sensitive and quasi (the [measures] of a request)",
    "precision": "needs sensitive and quasi, and disclosures in the protected table",
    "recall": "needs sensitive and quasi, and disclosures in the original",
    "disclosive_share": "needs a sensitive dimension",
    "aad": "no inner cells (every dimension at its finest level)",
    "var_cell_avg_change_pct": "no inner cells (every dimension at its finest level)",
    "anova_r2_before": "needs groups and inner cells",
    "anova_r2_after": "needs groups and inner cells",
    **{k: "needs two_way (two dimensions)" for k in ("chi2_before", "chi2_after", "p_before",
                                                     "p_after", "cramers_v_before",
                                                     "cramers_v_after")},
}

SCHEMA: dict[str, Any] = {"method": pl.String, "view": pl.String, "cells": pl.Int64}
SCHEMA.update({name: pl.Float64 for name in MEASURES})
for _int_col in ("disclosures_original", "disclosures_protected", "disclosures_both"):
    SCHEMA[_int_col] = pl.Int64


@dataclass
class Options:
    dims: list[str]
    total: str
    small: int
    sensitive: str | None
    quasi: list[str] | None
    know_yourself: bool
    beta: float
    coalition: int
    two_way: tuple[str, str] | None
    groups: str | None
