"""The Session's modular suppression (``Session.suppress(method="modular")``): the table's codes
and hierarchies handed to :func:`protab.suppression.modular` with the costs and levels of the
optimal mode (docs/methods.md §6.4)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import polars as pl

from protab.errors import ConvergenceWarning
from protab.session.suppress_optimal import _Labels, cell_costs


def table_structure(spec: Any, published: pl.DataFrame) -> tuple[np.ndarray, list[np.ndarray]]:
    """(codes, parent) of :func:`protab.suppression.subtables`: per dimension the published
    codes' ids and each code's parent id (a flat dimension's codes under its total)."""
    if not spec.full:
        raise NotImplementedError("suppress: method='modular' needs the full crossing of the dimensions "
                                  "(subtables along the hierarchies); use method='optimal' or 'gauss'")
    codes, parents = [], []
    for dim in spec.dimensions:
        col = published[dim.column].cast(pl.String)
        uniq = col.unique(maintain_order=True)
        ids = dict(zip(uniq.to_list(), range(uniq.len()), strict=True))
        codes.append(col.replace_strict(ids, return_dtype=pl.Int64).to_numpy())
        h = dim.hierarchy
        if h is not None and not h.is_tree:
            raise NotImplementedError(f"suppress: method='modular' needs tree hierarchies; {dim.column!r} has "
                                      "codes with several parents or signs")
        if h is None:
            up = {c: (None if c == dim.total else dim.total) for c in uniq.to_list()}
        else:
            frame = h.to_frame()
            up = dict(zip(frame["code"].to_list(), frame["parent"].to_list(), strict=True))
        parents.append(np.array([ids.get(up.get(c), -1) if up.get(c) is not None else -1
                                 for c in uniq.to_list()], dtype=np.int64))
    return np.column_stack(codes), parents


def modular_pattern(spec: Any, rules: Any, X: Any, published: pl.DataFrame, facts: Any, primary: np.ndarray,
                    forced: np.ndarray, never: np.ndarray, cost: Any, protection_range: Any, levels: Any,
                    time_limit: Any, requirements: Any) -> np.ndarray:
    """The suppressed cells of the modular pattern; a ConvergenceWarning when the time limit
    stopped the subtable passes or the final audit added Gauss-mode secondaries."""
    from protab.suppression.modular import modular

    value_col = spec.sums[0] if spec.sums else "n"
    z = published[value_col].fill_null(0).to_numpy().astype(float)
    req = requirements(spec, rules, facts, z, primary | forced, protection_range, levels)
    codes, parent = table_structure(spec, published)
    res = modular(X, z, primary | forced, codes=codes, parent=parent, cost=cell_costs(cost, spec, published),
                  never=never, time_limit=time_limit, labels=_Labels(published, list(spec.columns)), **req)
    if not res.complete:
        why = "its time limit stopped the subtable passes" if res.timed_out else "a subtable search was cut short" \
            if res.subtable_gap else "the subtables left some primary cells short in the whole table"
        warnings.warn(
            f"suppress: the modular pattern is not optimal: {why}; {res.fallback} Gauss-mode secondary cells were "
            f"added so that every protection level is met (cost {res.cost:.6g}; largest subtable gap "
            f"{100 * res.subtable_gap:.3g} %; the whole table's gap is not known)",
            ConvergenceWarning, stacklevel=4,
        )
    return res.suppressed
