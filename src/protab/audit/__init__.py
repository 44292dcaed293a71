"""The feasibility-interval audit of tables protected by the cell key method (docs/audit.md):
the attacker's interval of every true count, from all published tables of a run, knowing the
model matrix X and the p-table's noise bound D.

:func:`feasibility` works on published frames; :func:`intervals` and :func:`noise_bounds` are
its numeric parts (arrays and scipy.sparse in, no database). The X of linked tables whose
dimensions nest (not crossed as if independent) is ``Session.model_matrix(..., nested=True)``."""

from protab.audit.feasibility_audit import feasibility
from protab.audit.lp_intervals import intervals
from protab.audit.noise_bounds import noise_bounds, ptable_noise

__all__ = ["feasibility", "intervals", "noise_bounds", "ptable_noise"]
