"""Value-dependent noise for counts as p-tables: DP, PRAM, drop/add-up-to-q; survey weights.

Every mechanism here says "for original count i, move to i + v with probability p", so each
is a :class:`protab.PTable` and runs through the cell key join of ``Session.cell_key`` (the
same cell gets the same noise in every table) or :meth:`PTable.lookup` on arrays (docs/design.md,
idea 3; Shlomo, Krenzke & Li 2019 for the three methods in a flexible table builder).

p-tables (row rule (imax, period) of docs/methods.md §3 in brackets):

- :func:`discrete_laplace` — capped discrete Laplace, the exponential mechanism with l1
  utility; (cap, 1). :func:`dp_delta`, :func:`privacy_delta`, :func:`dp_accounting`.
  :func:`sample_discrete_laplace` draws the uncapped discrete Laplace exactly (integer
  arithmetic), for pure ε-DP noise outside p-tables (``postprocess.laplace_margins``).
- :func:`pram` — PRAM of counts from a small-value matrix and a residue matrix;
  (K + m − 1, m), e.g. (21, 15). :func:`make_invariant` (two-stage invariant PRAM).
- :func:`drop_add_q` — uniform noise on ±ceil(rate·n) capped; (first n at the cap, 1).

Survey weights: :func:`weighted` / :func:`weighted_counts` ("Avg", "Avg cell").
Additivity: :func:`restore_additivity` (lsfit_nonneg → ipf → integerise).

Typical use::

    p = noise.discrete_laplace(epsilon=2, cap=7, negative_to_zero=True)
    out = session.cell_key("persons", spec, p, original=True)   # n, w, n_pert, w_pert
    out = noise.weighted(out, "avg")                             # w_pert by overall mean weight
    print(noise.dp_accounting(2, 7, noise.kway_cells(2)))
"""

from protab.noise.dp import (
    DPAccount,
    discrete_laplace,
    dp_accounting,
    dp_accounting_grid,
    dp_delta,
    dp_noise,
    kway_cells,
    privacy_delta,
    sample_discrete_laplace,
)
from protab.noise.dropadd import drop_add_q, drop_add_width
from protab.noise.pram import make_invariant, pram, read_matrix
from protab.noise.survey import (
    AdditiveTable,
    restore_additivity,
    weighted,
    weighted_counts,
)

__all__ = [
    "AdditiveTable",
    "DPAccount",
    "discrete_laplace",
    "dp_accounting",
    "dp_accounting_grid",
    "dp_delta",
    "dp_noise",
    "drop_add_q",
    "drop_add_width",
    "kway_cells",
    "make_invariant",
    "pram",
    "privacy_delta",
    "read_matrix",
    "restore_additivity",
    "sample_discrete_laplace",
    "weighted",
    "weighted_counts",
]
