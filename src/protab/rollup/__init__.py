"""The SQL of one table request (:class:`TableRun`): scan to inner cells, codes and bridges,
the roll-up, the perturbation as a p-table join, and the pairs that are the model matrix."""

from protab.rollup.cells import output_names, published_filter, value_columns
from protab.rollup.partials import Partials, check_measures, partial_aggregates
from protab.rollup.perturb import keyspace_arrow
from protab.rollup.relations import drop_kept
from protab.rollup.state import RunCache
from protab.rollup.table_run import TableRun

__all__ = ["TableRun", "keyspace_arrow", "output_names", "published_filter", "value_columns"]
__all__ += ["RunCache"]  # the cache a Session and a run share (state.py)
__all__ += ["Partials", "check_measures", "drop_kept", "partial_aggregates"]  # used by protab.session
