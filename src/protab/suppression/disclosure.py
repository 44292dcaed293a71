"""Primary cells for attribute disclosure in frequency tables, and an earlier release's pattern.

Two rules of Statistics Norway's GaussSuppression (Lupp & Langsrud) decide which cells of a
frequency table are primary when the concern is not a small count but what a count reveals
about the people it counts (attribute disclosure). This is an independent implementation of
the published definitions; no code of those packages is used.

Direct disclosure (:func:`direct_disclosure`, the package's ``SuppressDirectDisclosure`` /
``FindDisclosiveCells``)
    A *characteristic* dimension is one whose categories would be disclosed, say the diagnosis
    in a table of patients by municipality and diagnosis. Fix every other dimension's code: the
    cells along the characteristic form a *row* whose total is the cell at the
    characteristic's total. A category cell of that row is primary when it holds everyone in
    the row (``n == total``, ``n > 0``), or when it is the largest category cell and at most
    ``coalition`` people of the row are outside it (``total − n <= coalition``): an attacker who
    knows the row and is (or knows) those few others learns the category of all the rest. Rows
    are every combination of the other dimensions' codes the table publishes, margins
    included. The characteristic dimensions must be flat (a total and categories), as the
    package's method has no hierarchies.

k-disclosure (:func:`k_disclosure_columns`, the package's ``SuppressKDisclosure`` /
``KDisclosurePrimary`` with ``mc_hierarchies = NULL``)
    For every published cell ``c`` inside a larger published cell ``p`` (every inner cell of
    ``c`` is under ``p``, and ``p`` has inner cells ``c`` lacks), with ``0 < n_c <=
    upper_bound`` and ``n_p > 0``, the *difference* ``p − c`` is a count of people in ``p``
    but not in ``c``. When it is at most ``k`` (0 included: then everyone in ``p`` is in ``c``),
    a coalition of ``k`` people of ``p`` learns that all the others are in ``c``. Such a
    difference is a primary cell that the table does not publish: its column ``X[:, p] −
    X[:, c]`` is added to ``X`` and protected by the elimination like a primary cell (the
    package's ``xExtraPrimary``); the published cells the elimination suppresses to protect it
    are secondary suppressions (the package marks none of the published cells primary).

Both rules use the package's candidate order for them, ``DirectDisclosureCandidates``
(:func:`disclosure_candidates`): cells in decreasing frequency, except that cells of
frequency ``1..secondary_zeros`` move one down and zero cells take the place of frequency
``secondary_zeros`` (zeros are published before small cells); ties in the order of the
published cells. The package's singleton method for them is ``"anySumNOTprimary"`` with the
inner cells of one record as singletons, and zeros are not protected.

An earlier release (:func:`previous_masks`, the package's ``AdditionalSuppression`` with its
defaults: ``PrimaryFromSuppressedData``, ``NotPrimaryFromSuppressedData``,
``ForcedFromSuppressedData``)
    A frame of cells published before, with a ``suppressed`` column (or without: every cell
    listed was suppressed). Cells suppressed before stay suppressed and are protected as
    primary cells; cells published before stay published, and a rule of the new run cannot
    make them primary (a count released once cannot be withdrawn). Dimensions of the table
    that the frame lacks are matched at their total only, as in the package.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import polars as pl
from scipy import sparse

from protab._frames import as_polars
from protab.errors import InputError, SpecError, show_values
from protab.suppression._suppression_inputs import _as_int_csc

__all__ = ["direct_disclosure", "disclosure_candidates", "k_disclosure_columns", "previous_masks"]


def _whole(value: Any, name: str, minimum: int) -> int:
    """``value`` as an int of at least ``minimum``; SpecError otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise SpecError(f"suppress: {name} must be a whole number of {minimum} or more, not {value!r}")
    return int(value)


def direct_disclosure(published: pl.DataFrame, dims: list[str], characteristic: Any, coalition: int = 1) -> np.ndarray:
    """The directly disclosive cells (bool per row of ``published``), see the module docstring.

    ``published`` has the dimension columns, ``<dim>_level`` (0 = the total) and ``n``;
    ``characteristic`` is a dimension name, a list of them, or True for every dimension (the
    package's default ``primaryDims``)."""
    coalition = _whole(coalition, "coalition", 0)
    chars = list(dims) if characteristic is True else [characteristic] if isinstance(characteristic, str) \
        else list(characteristic)
    unknown = [c for c in chars if c not in dims]
    if not chars or unknown:
        raise SpecError(f"suppress: direct_disclosure names dimensions the table does not have: "
                        f"{show_values(unknown) if unknown else 'none given'} (dimensions: {show_values(dims)})")
    frame = published.select([*dims, *(f"{d}_level" for d in dims), "n"]).with_row_index("_row")
    out = np.zeros(published.height, dtype=bool)
    for c in chars:
        deep = frame[f"{c}_level"].max()
        if deep is not None and int(deep) > 1:  # type: ignore[arg-type]
            raise SpecError(f"suppress: the characteristic dimension {c!r} of direct_disclosure has a hierarchy; "
                            "the rule needs a flat dimension (a total and categories)")
        other = [k for d in dims if d != c for k in (d, f"{d}_level")]
        cats = frame.filter(pl.col(f"{c}_level") > 0)
        total = frame.filter(pl.col(f"{c}_level") == 0).select([*other, pl.col("n").alias("_total")])
        rmax = cats.group_by(other).agg(pl.col("n").max().alias("_max"))
        hit = cats.join(total, on=other, how="inner").join(rmax, on=other, how="inner").filter(
            (pl.col("n") > 0) & ((pl.col("n") == pl.col("_total"))
                                 | ((pl.col("n") == pl.col("_max")) & (pl.col("_total") - pl.col("_max") <= coalition)))
        )
        out[hit["_row"].to_numpy()] = True
    return out


def disclosure_candidates(n: Any, secondary_zeros: int = 1) -> np.ndarray:
    """The package's ``DirectDisclosureCandidates`` order (0-based published-cell indices)."""
    n = np.asarray(n, dtype=float)
    sz = float(secondary_zeros)
    key = np.where(n == 0, sz, np.where(n <= sz, n - 1, n))
    if sz == 0 and key.size:
        key = np.where(n == 0, 0.01 + key.max() + key, key)
    return np.argsort(-key, kind="stable")


def k_disclosure_columns(X: Any, n: Any, k: int, upper_bound: float = np.inf) -> sparse.csc_matrix:
    """The columns (inner × differences) of the differences a coalition of ``k`` would
    disclose, see the module docstring; ``n``: the published frequencies."""
    W = _as_int_csc(X, "k_disclosure")
    n = np.asarray(n, dtype=float)
    size = np.diff(W.indptr)  # inner cells under each published cell
    common = (W.T @ W).tocoo()  # common inner cells of two published cells
    child, parent = common.row, common.col
    inside = (size[child] == common.data) & (size[parent] != common.data)
    child, parent = child[inside], parent[inside]
    keep = (n[parent] > 0) & (n[child] > 0) & (n[child] <= upper_bound) & (n[parent] - n[child] <= k)
    child, parent = child[keep], parent[keep]
    order = np.lexsort((parent, child))
    child, parent = child[order], parent[order]
    D = (W[:, parent] - W[:, child]).tocsc()
    D.eliminate_zeros()
    return D


def _previous_suppressed(frame: pl.DataFrame) -> pl.Series:
    """The ``suppressed`` column of an earlier release as booleans (protab's labels or
    True/False; every row suppressed when the column is absent)."""
    if "suppressed" not in frame.columns:
        return pl.Series("suppressed", [True] * frame.height)
    col = frame["suppressed"]
    if col.dtype == pl.Boolean:
        return col
    if col.dtype == pl.String:
        bad = sorted(set(col.drop_nulls().unique().to_list()) - {"primary", "secondary", "no"})
        if bad:
            raise InputError(f"suppress: previous column 'suppressed' holds {show_values(bad)}; expected True/False "
                             "or protab's labels 'primary', 'secondary', 'no'")
        was = pl.col("suppressed").is_in(["primary", "secondary"])
        return frame.select(pl.when(pl.col("suppressed").is_null()).then(pl.lit(None, dtype=pl.Boolean))
                            .otherwise(was).alias("suppressed")).to_series()
    raise InputError(f"suppress: previous column 'suppressed' must be boolean or protab's labels, not {col.dtype}")


def previous_masks(published: pl.DataFrame, dims: list[str], previous: Any,
                   values: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(suppressed before, published before): bool per row of ``published`` from the frame
    ``previous`` of an earlier release (see the module docstring). ``values``: the value
    columns of protab's output that may be present and are ignored."""
    frame = as_polars(previous, "suppress: previous")
    ignored = {"suppressed", "lo", "up", "protected", *values, *(f"{d}_level" for d in dims)}
    own = [c for c in frame.columns if c not in ignored]
    unknown = [c for c in own if c not in dims]
    if unknown or not own:
        raise InputError(f"suppress: previous has columns that are not dimensions of the table: "
                         f"{show_values(unknown) if unknown else 'no dimension column at all'} "
                         f"(dimensions: {show_values(dims)})")
    sup = _previous_suppressed(frame)
    cells = frame.select([pl.col(d).cast(pl.String) for d in own]).with_columns(sup.alias("_was")).drop_nulls("_was")
    clash = cells.group_by(own).agg(pl.col("_was").n_unique().alias("_k")).filter(pl.col("_k") > 1)
    if clash.height:
        raise InputError(f"suppress: previous lists cells both suppressed and published: "
                         f"{show_values([tuple(r) for r in clash.select(own).rows()])}")
    cells = cells.unique(subset=own)
    at_total = pl.lit(True)
    for d in dims:
        if d not in own:
            at_total = at_total & (pl.col(f"{d}_level") == 0)
    target = published.select([*own, *(f"{d}_level" for d in dims)]).with_row_index("_row").filter(at_total)
    missing = cells.join(target, on=own, how="anti")
    if missing.height:
        where = "" if len(own) == len(dims) else " (with the dimensions it lacks at their total)"
        raise InputError(f"suppress: previous names cells the table does not publish{where}: "
                         f"{show_values([tuple(r) for r in missing.select(own).rows()])}")
    hit = target.join(cells, on=own, how="inner")
    was, rows = hit["_was"].to_numpy(), hit["_row"].to_numpy()
    before_sup = np.zeros(published.height, dtype=bool)
    before_pub = np.zeros(published.height, dtype=bool)
    before_sup[rows[was]] = True
    before_pub[rows[~was]] = True
    return before_sup, before_pub
