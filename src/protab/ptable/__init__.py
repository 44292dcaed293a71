"""Perturbation tables (p-tables): generate, validate, read, write, look up.

A p-table says, for each original value (row class) ``i``, which noise ``v`` a cell gets for
its cell key: the intervals ``[lb, ub)`` of one ``i`` cut [0, 1) into one piece per outcome
``j = i + v`` (ESSnet Handbook on SDC, chapter on frequency tables; Giessing 2016). protab
holds the bounds as exact integers over a denominator ``den`` so that the lookup of an
integer cell key (docs/design.md, idea 4) is exact arithmetic on every engine.

Two dialects are read and written: the Destatis / R ptable / tau-ARGUS table
``(i, j, p, v, p_int_lb, p_int_ub)`` and the ONS / ABS table ``(pcv, ckey, pvalue)``
(ONSdigital cell-key-perturbation 3.1.0). Values above the last row use the row class rule
``key(n)`` with ``imax`` and ``period`` (docs/methods.md §3).

Magnitude p-tables (R ptable ``create_num_ptable``, fractional noise, types all/even/odd/
small_cells) are :class:`MagnitudePTable` (``NumericPTable``, R ptable's name for the same
class, is a deprecated alias for one release: it warns and gives :class:`MagnitudePTable`).

p-table parameters (D, V, js, pstay) are secrets: no repr, error or warning shows them.
"""


from protab._deprecated import renamed
from protab.ptable.count_ptable import Interval, PTable
from protab.ptable.keyspace import noise_at
from protab.ptable.magnitude_ptable import TYPES, MagnitudePTable

__all__ = ["TYPES", "Interval", "MagnitudePTable", "PTable", "noise_at"]


#: ``NumericPTable``: R ptable's name (create_num_ptable) of :class:`MagnitudePTable`, deprecated.
__getattr__ = renamed("protab.ptable", {"NumericPTable": ("MagnitudePTable", MagnitudePTable)})
