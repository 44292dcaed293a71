"""protab's error types.

Every input mistake a user can make raises a subclass of :class:`ProtabError` whose message
names the table, column and offending values (the first few, and how many) and says what to
do. Secrets (seeds, record keys, p-table parameters) never appear in a message.
"""

from __future__ import annotations

from collections.abc import Iterable


class ProtabError(Exception):
    """Base class of every error protab raises for bad input or a broken invariant."""


class InputError(ProtabError, ValueError):
    """Bad microdata input: unknown table or column, NULLs, wrong types, bad ids."""


class NoRecordsError(InputError):
    """A table request whose table (or filtered subset, ``TableSpec(where=...)``) has no records."""


class HierarchyError(ProtabError, ValueError):
    """A hierarchy with a real mistake (a cycle, a link given twice with both signs), or that
    does not cover the codes in the data."""


class SpecError(ProtabError, ValueError):
    """A table specification that cannot be published (unknown dimension, bad formula)."""


class PTableError(ProtabError, ValueError):
    """A perturbation table that is not a valid distribution per original value."""


class ConvergenceError(ProtabError):
    """A numerical method asked to be strict did not meet its tolerance (e.g. ``fit.ipf``
    with inconsistent targets)."""


class RoundingError(ProtabError, ValueError):
    """A rounding problem without a solution (e.g. no zero-restricted controlled rounding)."""


class PTableWarning(UserWarning):
    """A p-table that is valid but does not meet what was asked of it (e.g. its variance)."""


class ConvergenceWarning(UserWarning):
    """A numerical method stopped before it met its tolerance."""


def show_values(values: Iterable[object], limit: int = 5) -> str:
    """Format offending values for an error message: the first ``limit`` and how many in all."""
    vals = list(values)
    shown = ", ".join(repr(v) for v in vals[:limit])
    if len(vals) > limit:
        return f"{shown}, … ({len(vals)} in all)"
    return f"{shown} ({len(vals)} in all)" if len(vals) > 1 else shown


class SwapRateWarning(UserWarning):
    """The risky households alone made the achieved swap rate exceed the requested one (every
    risky household is swapped, as sdcMicro's recordSwap does); ``SwapSpec(max_swap_rate=...)``
    caps it."""
