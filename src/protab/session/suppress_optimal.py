"""The Session's optimal suppression (``Session.suppress(method="optimal")``): the table's cells,
costs and protection levels handed to :func:`protab.suppression.optimal` (docs/methods.md §6.4)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import polars as pl

from protab.errors import ConvergenceWarning, SpecError

METHODS = ("gauss", "optimal", "modular")


def check_method(method: Any, time_limit: Any, linked: str, interval_protection: Any) -> None:
    """SpecError / NotImplementedError for a ``method`` (and ``time_limit``) of Session.suppress."""
    if method not in METHODS:
        raise SpecError(f"suppress: method must be 'gauss', 'optimal' or 'modular', not {method!r}")
    if time_limit is not None and method == "gauss":
        raise SpecError("suppress: time_limit is for method='optimal' or 'modular'")
    if method != "gauss" and linked != "global":
        raise NotImplementedError(f"suppress: method={method!r} with linked={linked!r} is not implemented; "
                                  "use linked='global' (the linked tables as one)")
    if method != "gauss" and interval_protection:
        raise SpecError(f"suppress: method={method!r} meets the protection levels itself; drop interval_protection")


class _Labels:
    """Names of published cells for error messages, built only for the cells named."""

    def __init__(self, published: pl.DataFrame, dims: list[str]) -> None:
        self.published, self.dims = published, dims

    def __getitem__(self, i: int) -> tuple[Any, ...]:
        return tuple(self.published.row(int(i), named=True)[d] for d in self.dims)


def cell_costs(cost: Any, spec: Any, published: pl.DataFrame) -> np.ndarray:
    """The cost of suppressing each published cell: "value" (default; |value| of the first sums
    variable, the count for a frequency table), "frequency", "cells" (one each) or one number
    per published cell (checked by :func:`protab.suppression.optimal`)."""
    value_col = spec.sums[0] if spec.sums else "n"
    if cost is None or isinstance(cost, str):
        name = "value" if cost is None else cost
        if name == "value":
            out: np.ndarray = np.abs(published[value_col].fill_null(0).to_numpy().astype(float))
            return out
        if name == "frequency":
            return published["n"].fill_null(0).to_numpy().astype(float)
        if name == "cells":
            return np.ones(published.height)
        raise SpecError(f"suppress: cost must be 'value', 'frequency', 'cells' or one number per cell, not {cost!r}")
    try:
        return np.asarray(cost, dtype=float)
    except (TypeError, ValueError):
        raise SpecError("suppress: cost must be 'value', 'frequency', 'cells' or one number per cell") from None


def optimal_pattern(spec: Any, rules: Any, X: Any, published: pl.DataFrame, facts: Any, primary: np.ndarray,
                    forced: np.ndarray, never: np.ndarray, cost: Any, protection_range: Any, levels: Any,
                    time_limit: Any, requirements: Any) -> np.ndarray:
    """The suppressed cells of the least-cost pattern; a ConvergenceWarning (cost, bound, gap)
    when the time limit stopped the search before the proof. ``requirements``: the audit's
    keywords from the table (``suppress._audit_requirements``)."""
    from protab.suppression.optimal import optimal

    value_col = spec.sums[0] if spec.sums else "n"
    z = published[value_col].fill_null(0).to_numpy().astype(float)
    req = requirements(spec, rules, facts, z, primary | forced, protection_range, levels)
    res = optimal(X, z, primary | forced, cost=cell_costs(cost, spec, published), never=never,
                  time_limit=time_limit, labels=_Labels(published, list(spec.columns)), **req)
    if not res.optimal:
        warnings.warn(
            f"suppress: the optimal mode stopped at its time limit; the pattern meets every protection level "
            f"but is not proven optimal: cost {res.cost:.6g}, lower bound {res.bound:.6g}, gap {100 * res.gap:.3g} %",
            ConvergenceWarning, stacklevel=4,
        )
    return res.suppressed
