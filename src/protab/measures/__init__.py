"""Utility and risk measures over aligned original and protected cell values.

Numeric only: arrays, polars Series and frames in, numbers and polars frames out; nothing
here knows of DuckDB (docs/design.md). Formulas follow docs/methods.md §5 and its sources: the
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

from protab.measures.disclosure import (
    EXACT_TOL,  # noqa: F401  (a documented constant, not in __all__)
    disclosive_cells,
    disclosure_probabilities,
    f_beta_risk,
)
from protab.measures.risk import (
    conditional_entropy_risk,
    entropy_risk,
    entropy_risk_perturbed,
    noise_by_value,
    percent_changed,
    ptable_noise_by_value,
    share_changed,
    share_small_cells,
    small_cells_unchanged,
)
from protab.measures.utility import (
    Chi2Result,
    anova_r2,
    average_absolute_difference,
    binomial_test_rounding,
    chi2_independence,
    hellinger_distance,
    hellinger_utility,
    independence_before_after,
    mean_absolute_deviation,
    percentage_change_by_value,
    relative_difference_of_totals,
    spearman_correlation,
    two_way_table,
    variance_of_cell_averages,
)

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
