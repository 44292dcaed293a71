"""Rounding of frequency tables (docs/methods.md §2 and §3).

* :func:`conventional` — every cell to the nearest multiple of the base, independently;
* :func:`random` / :func:`random_rounding_ptable` — unbiased random rounding driven by cell
  keys (a p-table with period b: ``Session.cell_key(table, spec, random_rounding_ptable(b))``);
* :func:`small_cell_adjustment` / :func:`small_cell_adjustment_ptable` and
  :func:`barnardise` / :func:`barnardisation_ptable` — noise on inner cells, margins as sums
  (``Session.perturb_inner``);
* :func:`small_count` — small count rounding (SmallCountRounding's PLSrounding), additive;
* :func:`controlled` — controlled rounding by mixed-integer programming (HiGHS), additive,
  zero-restricted or K steps, with partitioning for large tables;
* :func:`semi_controlled` — unbiased rounding that controls the grand (or each area) total.

Numeric only: frames, arrays and scipy.sparse in; nothing here holds a DuckDB connection
(the model matrix comes from ``protab.model_matrix``).
"""

from protab.errors import RoundingError
from protab.rounding.controlled import ControlledResult, controlled, existence_intervals
from protab.rounding.simple import (
    SemiControlledResult,
    barnardisation_ptable,
    barnardise,
    conventional,
    random,
    random_rounding_ptable,
    semi_controlled,
    small_cell_adjustment,
    small_cell_adjustment_ptable,
)
from protab.rounding.small_count import (
    SmallCountResult,
    small_count,
    small_count_matrix,
)

__all__ = [
    "ControlledResult",
    "RoundingError",
    "SemiControlledResult",
    "SmallCountResult",
    "barnardisation_ptable",
    "barnardise",
    "controlled",
    "conventional",
    "existence_intervals",
    "random",
    "random_rounding_ptable",
    "semi_controlled",
    "small_cell_adjustment",
    "small_cell_adjustment_ptable",
    "small_count",
    "small_count_matrix",
]
