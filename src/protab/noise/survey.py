"""Survey-weighted counts after count perturbation, and additivity restoration.

Shlomo, Krenzke & Li (2019, §2) perturb the *sample* count of a cell through the p-table and
move its weighted count along with it (docs/methods.md §3):

- "Avg": W' = W + v·w̄, w̄ the overall mean weight (total weight / sample size);
- "Avg cell": W' = W + v·W/n = n'·W/n, the cell's own mean weight.

:meth:`protab.Session.cell_key` with a weight in the TableSpec already publishes ``w_pert`` =
n'·W/n ("Avg cell", 0 for an empty cell), as do R cellKey and tau-ARGUS;
:meth:`protab.Session.perturb_inner` applies "Avg cell" to the inner cells and sums them.
:func:`weighted` recomputes ``w_pert`` by either rule from ``original=True`` output (n, w,
n_pert); :func:`weighted_counts` does the same on arrays.

Perturbed tables are not additive (margins are perturbed on their own). :func:`restore_additivity`
runs the pipeline of docs/methods.md §4 (Langsrud 2019): least-squares fit with non-negativity
(``fit.lsfit_nonneg``) so the published values are consistent, IPF to those values
(``fit.ipf``: expected inner frequencies), then, for counts, unbiased integer rounding
(``fit.integerise``); the published cells are then sums of the inner cells.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import polars as pl
from numpy.typing import ArrayLike, NDArray

from protab._frames import as_polars, require_columns
from protab.errors import InputError, show_values

__all__ = ["AdditiveTable", "restore_additivity", "weighted", "weighted_counts"]

Method = Literal["avg", "avg_cell"]
_METHODS = ("avg", "avg_cell")


def _array(x: ArrayLike, name: str, *, nullable: bool = False) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64).ravel()
    except (TypeError, ValueError) as exc:
        raise InputError(f"weighted_counts: {name} must hold numbers") from exc
    bad = ~np.isfinite(a) if not nullable else np.isinf(a)
    if bad.any():
        raise InputError(
            f"weighted_counts: {name} has {int(bad.sum())} missing or infinite values "
            f"(cells {show_values(np.flatnonzero(bad).tolist())})"
        )
    if (a < 0).any():
        raise InputError(
            f"weighted_counts: {name} must be >= 0; {int((a < 0).sum())} values are negative"
        )
    return a


def weighted_counts(
    n: ArrayLike,
    w: ArrayLike,
    n_pert: ArrayLike,
    method: Method = "avg",
    *,
    mean_weight: float | None = None,
) -> NDArray[np.float64]:
    """Perturbed weighted counts from sample counts ``n``, weighted counts ``w`` and perturbed
    sample counts ``n_pert`` (Shlomo, Krenzke & Li 2019): with v = n_pert − n,

    - ``"avg"``: w + v·w̄ with w̄ = ``mean_weight`` or Σw/Σn over the cells given — the overall
      mean weight when every record lies in the same number of the cells (the inner cells, or
      a full crossing with all its margins; not a formula with uneven crossings, where
      :func:`weighted` takes w̄ from the grand total cell);
    - ``"avg_cell"``: w + v·w/n = n_pert·w/n; an empty cell moved by the noise (n = 0,
      n_pert > 0) takes w̄, having no mean weight of its own (the Session publishes 0 there).

    A cell perturbed to n_pert = 0 gets 0 (no sample record, no weighted count), and "avg" is
    cut at 0 where the overall mean weight would take it below. NaN in n_pert (a threshold
    blanked it) stays NaN.
    """
    if method not in _METHODS:
        raise InputError(f"weighted_counts: method must be 'avg' or 'avg_cell', not {method!r}")
    nn, ww, npert = _array(n, "n"), _array(w, "w"), _array(n_pert, "n_pert", nullable=True)
    if not (nn.size == ww.size == npert.size):
        raise InputError(
            f"weighted_counts: n, w and n_pert must be aligned ({nn.size}, {ww.size} and "
            f"{npert.size} cells)"
        )
    empty_w = np.flatnonzero((nn == 0) & (ww != 0))
    if empty_w.size:
        raise InputError(
            "weighted_counts: cells with no sample record have a non-zero weighted count "
            f"(cells {show_values(empty_w.tolist())}); n and w do not belong together"
        )
    if mean_weight is None:
        if nn.sum() <= 0:
            raise InputError("weighted_counts: every count is 0; pass mean_weight= to use 'avg'")
        wbar = float(ww.sum() / nn.sum())
    else:
        if isinstance(mean_weight, bool) or not np.isfinite(mean_weight) or mean_weight <= 0:
            raise InputError("weighted_counts: mean_weight must be a positive number")
        wbar = float(mean_weight)
    v = npert - nn
    if method == "avg":
        out = np.maximum(ww + v * wbar, 0.0)
    else:
        cell_mean = np.where(nn > 0, ww / np.where(nn > 0, nn, 1.0), wbar)
        out = ww + v * cell_mean
    out = np.where(npert == 0, 0.0, out)
    return np.where(np.isnan(npert), np.nan, out)


def weighted(
    frame: Any,
    method: Method = "avg",
    *,
    mean_weight: float | None = None,
    n: str = "n",
    w: str = "w",
    n_pert: str = "n_pert",
    name: str = "w_pert",
) -> pl.DataFrame:
    """``frame`` (e.g. ``Session.cell_key(..., original=True)``: n, w, n_pert) with the column
    ``name`` (``w_pert`` by default, replacing the Session's "Avg cell" values) holding the
    perturbed weighted counts by ``method`` ("avg" or "avg_cell"), as :func:`weighted_counts`.
    w̄ defaults to the mean weight w/n of the grand total cell (the row whose ``*_level``
    columns are all 0), else Σw/Σn over the frame's rows; pass ``mean_weight`` for a filtered
    part without its grand total."""
    frame = as_polars(frame, "weighted")
    require_columns(
        frame, (n, w, n_pert), "weighted", hint="; use Session.cell_key(..., original=True) with a "
        "weight in the TableSpec, or name the columns with n=, w=, n_pert=",
    )
    levels = [c for c in frame.columns if c.endswith("_level")]
    if mean_weight is None and levels:
        top = frame.filter(pl.all_horizontal([pl.col(c) == 0 for c in levels]))
        if top.height == 1 and top[n][0] > 0:
            mean_weight = float(top[w][0]) / float(top[n][0])
    npert = frame[n_pert].cast(pl.Float64).fill_null(float("nan")).to_numpy()
    values = weighted_counts(
        frame[n].cast(pl.Float64).to_numpy(),
        frame[w].cast(pl.Float64).to_numpy(),
        npert,
        method,
        mean_weight=mean_weight,
    )
    return frame.with_columns(pl.Series(name, values, dtype=pl.Float64).fill_nan(None))


@dataclass(frozen=True, eq=False)
class AdditiveTable:
    """Result of :func:`restore_additivity`. ``z``: published values, ``X.T @ y`` exactly;
    ``y``: inner values (integers when ``integer=True``); ``z_fit``: the consistent,
    non-negative least-squares fit of the perturbed values; ``y_expected``: IPF's expected
    inner frequencies (``X.T @ y_expected`` ≈ ``z_fit``); ``converged``: IPF met its tolerance."""

    z: NDArray[np.float64]
    y: NDArray[Any]
    z_fit: NDArray[np.float64]
    y_expected: NDArray[np.float64]
    converged: bool


def restore_additivity(
    X: Any,
    z_perturbed: ArrayLike,
    *,
    integer: bool = True,
    seed: int | np.random.SeedSequence | None = None,
    rounding: Literal["multinomial", "uniform"] = "multinomial",
    tol: float = 1e-10,
    max_iter: int = 1000,
) -> AdditiveTable:
    """An additive table from perturbed published values (docs/methods.md §4; Langsrud 2019).

    ``X``: the inner × published dummy matrix (``Session.model_matrix`` or
    ``protab.model_matrix``), ``z_perturbed`` the perturbed values of the published cells in
    the same order (``cell_key`` n_pert, or weighted values with ``integer=False``).
    Pipeline: ``fit.lsfit_nonneg`` (consistent, non-negative published values) → ``fit.ipf``
    to them (expected inner frequencies) → with ``integer``, ``fit.integerise`` (``rounding``:
    "multinomial" keeps the total to the nearest integer, "uniform" keeps each cell unbiased;
    ``seed`` is then required). Published values are recomputed as ``X.T @ y``.
    The alternative is to publish the perturbed margins as they are (``Session.cell_key``):
    consistent across tables but not additive.
    """
    from protab.fit.integerising import integerise
    from protab.fit.lsq import lsfit_nonneg
    from protab.fit.proportional import ipf

    if integer and seed is None:
        raise InputError(
            "restore_additivity: integer rounding is random and needs an explicit seed "
            "(seed=...), or pass integer=False for the real-valued fit"
        )
    ls = lsfit_nonneg(X, z_perturbed)
    res = ipf(X, ls.z, tol=tol, max_iter=max_iter)
    Xc = X.tocsc() if hasattr(X, "tocsc") else np.asarray(X, dtype=np.float64)
    if integer:
        y: NDArray[Any] = integerise(res.y, rounding, seed=seed)
    else:
        y = res.y
    z = np.asarray(Xc.T @ y, dtype=np.float64).ravel()
    return AdditiveTable(
        z=z, y=y, z_fit=np.asarray(ls.z), y_expected=np.asarray(res.y), converged=bool(res.converged)
    )
