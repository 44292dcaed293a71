"""From a protected table back to additive values and expected inner frequencies.

Pipelines over :mod:`protab.fit` that carry the dimension codes (Langsrud 2019; Langsrud &
Lupp 2022; docs/methods.md §4):

- :func:`expected_frequencies` — a protected table (cell key method, rounding, any noise)
  → additivity-restored published values (``lsfit_nonneg``) → expected inner frequencies
  (``ipf``), as polars frames with the table's codes;
- :func:`fill_suppressed` — suppressed cells replaced by decimals: Method A (minimum-norm
  least squares) on the published cells that are not suppressed, optionally plus random
  residuals that leave every published cell unchanged, scaled to a chosen root mean square
  (the RegSDC idea of Langsrud 2019);
- :func:`laplace_margins` — differentially private margins: exact discrete Laplace noise of
  scale Δ/ε on chosen margins (Δ computed from X by :func:`margin_sensitivity`), then
  Method B or C (non-negative, weighted least squares), then IPF.

The model matrix X comes from the SQL roll-up (:func:`protab.model_matrix`), so the cells
and their order are those of protab's published tables.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import ArrayLike
from scipy import sparse

from protab.errors import InputError, show_values
from protab.fit.lsq import lsfit_nonneg, min_norm, nnls
from protab.fit.proportional import ipf
from protab.noise.dp import sample_discrete_laplace
from protab.session import model_matrix
from protab.table import TableSpec


@dataclass(frozen=True)
class PostProcessed:
    """Result of :func:`expected_frequencies`.

    ``published``: the published cells (dims, levels), the protected value, ``additive``
    (the least-squares, non-negative, additive fit of the protected values) and
    ``expected`` (Xᵀŷ of the expected inner frequencies); ``inner``: the inner cells (dims)
    with ``expected`` (ŷ, the log-linear fit for which the additive values are sufficient).
    ``converged``/``max_deviation``: IPF's convergence record.
    """

    published: pl.DataFrame
    inner: pl.DataFrame
    X: sparse.csc_matrix
    converged: bool
    max_deviation: float
    iterations: int


def _inner_grid(published: pl.DataFrame, spec: TableSpec) -> pl.DataFrame:
    """Every combination of the leaf codes of each dimension (Extend0 on the leaf grid)."""
    leaves = []
    for d in spec.dimensions:
        if d.column not in published.columns:
            raise InputError(
                f"the protected table has no column {d.column!r} for dimension {d.column!r}; "
                f"its columns are {show_values(published.columns, 12)}"
            )
        if d.hierarchy is not None:
            leaves.append(d.hierarchy.leaves)
        else:
            codes = published[d.column].cast(pl.String).unique().sort().to_list()
            leaves.append([c for c in codes if c is not None and c != d.root])
    frame = pl.DataFrame({spec.columns[0]: pl.Series(leaves[0], dtype=pl.String)})
    for col, codes in zip(spec.columns[1:], leaves[1:]):  # a cross join per dimension
        frame = frame.join(pl.DataFrame({col: pl.Series(codes, dtype=pl.String)}), how="cross")
    return frame.with_columns(pl.lit(0, dtype=pl.Int64).alias("n"))


def _aligned(published: pl.DataFrame, spec: TableSpec, value: str) -> tuple[sparse.csc_matrix, pl.DataFrame, pl.DataFrame]:
    """X over the full leaf grid, the published cells of X joined to the protected values."""
    if value not in published.columns:
        raise InputError(
            f"the protected table has no value column {value!r}; pass value= (columns: "
            f"{show_values(published.columns, 12)})"
        )
    grid_spec = dataclasses.replace(spec, drop_empty=False, freq=None, weight=None, sums=())
    X, inner, cells = model_matrix(_inner_grid(published, spec), grid_spec, extend0=False)
    keyed = published.select(
        [pl.col(c).cast(pl.String) for c in spec.columns] + [pl.col(value).cast(pl.Float64).alias("_value")]
    )
    dup = keyed.select(spec.columns).is_duplicated()
    if dup.any():
        raise InputError(
            f"the protected table has {int(dup.sum())} rows whose codes occur more than once; "
            "give one row per published cell"
        )
    cells = cells.drop("n").join(keyed, on=spec.columns, how="left", maintain_order="left")
    return X, inner.drop("n"), cells


def expected_frequencies(
    published: pl.DataFrame,
    spec: TableSpec,
    *,
    value: str = "n_pert",
    weights: ArrayLike | None = None,
    tol: float = 1e-10,
    max_iter: int = 1000,
) -> PostProcessed:
    """Additivity-restored values and expected inner frequencies of a protected table.

    ``published`` is a protected table of ``spec`` (e.g. ``Session.cell_key`` output, or
    any additive protected table such as a rounded one) with the protected values in
    ``value``. Cells that are absent or null (suppressed, blanked below a threshold) are not
    used as constraints. Steps: X over every combination of leaf codes (zeros included);
    ``fit.lsfit_nonneg`` (a no-op for values that are already additive and non-negative);
    ``fit.ipf`` to the fitted values, from ones (CKM → lsfit_nonneg → ipf; an additive table
    such as SCR goes to ipf unchanged). ``weights`` per published cell of X (in the order of
    ``result.published``) for a weighted fit.
    """
    X, inner, cells = _aligned(published, spec, value)
    known = cells["_value"].is_not_null().to_numpy()
    if not known.any():
        raise InputError(f"the protected table has no values in {value!r}")
    Xk = X[:, known]
    z = cells["_value"].to_numpy()[known]
    w = None
    if weights is not None:
        w = np.asarray(weights, dtype=float).ravel()
        if w.shape != (cells.height,):
            raise InputError(
                f"expected_frequencies: weights has {w.size} values; give one per published cell "
                f"({cells.height}, in the order of result.published)"
            )
        w = w[known]
    ls = lsfit_nonneg(Xk, z, weights=w)
    res = ipf(Xk, ls.z, tol=tol, max_iter=max_iter)
    additive = np.full(cells.height, np.nan)
    additive[known] = ls.z
    expected = np.asarray(X.T @ res.y).ravel()
    out = cells.rename({"_value": value}).with_columns(
        pl.Series("additive", additive).fill_nan(None), pl.Series("expected", expected)
    )
    return PostProcessed(
        published=out,
        inner=inner.with_columns(pl.Series("expected", res.y)),
        X=X,
        converged=bool(res.converged),
        max_deviation=float(res.max_deviation),
        iterations=int(res.iterations),
    )


def fill_suppressed(
    published: pl.DataFrame,
    spec: TableSpec,
    *,
    value: str = "n",
    suppressed: str | ArrayLike | None = None,
    rms: float | None = None,
    seed: int | None = None,
) -> pl.DataFrame:
    """Replace suppressed cells by decimals (Method A of Langsrud 2019, optionally RegSDC).

    The inner values ŷ = (X_safeᵀ)⁺ z_safe are the minimum-norm solution that reproduces
    every published cell that is not suppressed; each suppressed cell gets X_cellᵀŷ. With
    ``rms``, random residuals e with X_safeᵀe = 0 (so every safe cell keeps its value),
    scaled so that their root mean square over the inner cells is ``rms``, are added first
    (``seed`` required): the filled values then vary as real data would (RegSDC).
    ``suppressed``: a boolean column name or mask; by default the null cells of ``value``.
    Returns the table of X's published cells with ``<value>`` and ``filled``.
    """
    X, _, cells = _aligned(published, spec, value)
    if suppressed is None:
        mask = cells["_value"].is_null().to_numpy()
    elif isinstance(suppressed, str):
        if suppressed not in published.columns:
            raise InputError(f"the protected table has no column {suppressed!r}")
        flags = published.select(
            [pl.col(c).cast(pl.String) for c in spec.columns] + [pl.col(suppressed).cast(pl.Boolean).alias("_s")]
        )
        mask = cells.join(flags, on=spec.columns, how="left", maintain_order="left")["_s"].fill_null(True).to_numpy()
    else:
        mask = np.asarray(suppressed, dtype=bool)
        if mask.shape != (cells.height,):
            raise InputError(f"suppressed: expected {cells.height} flags, one per published cell of X")
    safe = ~mask & cells["_value"].is_not_null().to_numpy()
    if not safe.any():
        raise InputError("fill_suppressed: every cell is suppressed; nothing to fit")
    X_safe = X[:, safe]
    y = min_norm(X_safe, cells["_value"].to_numpy()[safe])
    if rms is not None:
        if seed is None:
            raise InputError("fill_suppressed: random residuals (rms=) need an explicit seed")
        if rms < 0:
            raise InputError("fill_suppressed: rms must be non-negative")
        r = np.random.default_rng(seed).standard_normal(X.shape[0])
        # the part of r orthogonal to the columns of X_safe leaves every safe cell unchanged
        coef = min_norm(X_safe.T.tocsc(), r)
        e = r - X_safe @ coef
        size = float(np.sqrt(np.mean(e**2)))
        if size > 1e-12:
            y = y + e * (rms / size)
    filled = np.where(mask, np.asarray(X.T @ y).ravel(), cells["_value"].to_numpy())
    return cells.rename({"_value": value}).with_columns(pl.Series("filled", filled))


@dataclass(frozen=True)
class LaplaceFit:
    """Result of :func:`laplace_margins`.

    ``z_noisy``: the published values, perturbed cells with their integer noise added;
    ``y_fit``: the fitted inner values of Method B/C; ``y_expected``: the expected inner
    frequencies of IPF to their margins. ``sensitivity``: Δ, the L1 sensitivity of the
    perturbed cells computed from X (or the larger ``k`` given); ``scale``: the noise scale
    b ≥ Δ/ε actually used; ``epsilon``: Δ/b ≤ the ε asked, the privacy parameter the noise
    delivers (see :func:`laplace_margins`).
    """

    z_noisy: np.ndarray
    y_fit: np.ndarray
    y_expected: np.ndarray
    converged: bool
    sensitivity: int
    scale: float
    epsilon: float


def margin_sensitivity(X: Any, perturb: ArrayLike) -> int:
    """L1 sensitivity of the published cells flagged in ``perturb``: the largest number of
    flagged cells one inner cell (so one record) counts in, max over rows of Σ |X[row, flagged]|.

    Adding or removing one record in inner cell r changes flagged cell j by X[r, j], so the
    vector of flagged values moves by exactly that row sum in L1 norm. Example: a 3×3 table
    publishing its row totals, column totals and grand total, all perturbed, has sensitivity 3.
    """
    Xc = sparse.csr_matrix(X)
    flag = np.asarray(perturb, dtype=bool).ravel()
    if flag.shape != (Xc.shape[1],):
        raise InputError(f"perturb has {flag.size} flags for {Xc.shape[1]} published cells (columns of X)")
    if not flag.any():
        return 0
    sums = np.asarray(abs(Xc[:, flag]).sum(axis=1)).ravel()
    return int(np.ceil(sums.max() - 1e-9)) if sums.size else 0


def laplace_margins(X: Any, z: ArrayLike, perturb: ArrayLike, *, epsilon: float, seed: int, k: int | None = None,
                    method: str = "B", ridge: float = 1e-4, exact_weight: float = 1000.0, tol: float = 1e-10,
                    max_iter: int = 1000) -> LaplaceFit:
    """Differentially private margins (exact discrete Laplace), then a non-negative fit and
    expected frequencies (Langsrud & Lupp 2022, docs/methods.md §4).

    ``X`` (inner cells × published cells) and integer counts ``z = Xᵀy`` of the published
    cells; ``perturb`` flags the cells that get noise. Steps: integer noise on the flagged
    cells; Method B (``fit.nnls`` with a ridge) or Method C (the same, the cells not perturbed
    weighted ``exact_weight`` so that the fit reproduces them almost exactly); ``fit.ipf`` to
    the fitted margins. Negative noisy values are kept (clipping would be post-processing too,
    but the fit handles them).

    Privacy guarantee, precisely:

    - Sensitivity. Δ = :func:`margin_sensitivity` (X, perturb): the largest number of flagged
      cells one inner cell counts in (with integer weights, the largest row sum of |X| over
      the flagged columns). Adding or removing one record changes the vector of flagged
      counts by at most Δ in L1 norm. ``k`` may raise Δ (e.g. when one person contributes up
      to m records, pass k = m·Δ); a ``k`` below Δ is refused — it would claim a smaller ε
      than the noise gives.
    - Noise. Each flagged cell gets independent discrete Laplace noise, P(v) ∝ exp(−|v|/b)
      over all integers (not capped), with b = Δ/ε rounded up to a multiple of 2^−20, drawn
      exactly with integer arithmetic (:func:`protab.noise.sample_discrete_laplace`; no
      floating-point Laplace). The noisy flagged counts are then ε′-differentially private
      with ε′ = Δ/b ≤ ε (pure DP, δ = 0) for neighbouring data sets that differ by one record
      added or removed; for "one record changed" neighbours the bound is 2ε′. ``result.epsilon``
      is ε′.
    - Everything after the noise (Method B/C, IPF) uses only the noisy values, X and the
      unflagged cells: post-processing, no further privacy loss.
    - Cells *not* flagged are published exactly and are not protected. The whole output is
      ε′-DP only among data sets that agree on those cells (they act as public invariants,
      e.g. a grand total known anyway); flag every published cell for an unconditional
      guarantee.
    - The guarantee assumes the ``seed`` stays secret (it determines the noise) and treats
      numpy's PCG64 generator as a source of uniform integers; it is not a cryptographic
      generator.
    """
    Xc, z, flag = _laplace_inputs(X, z, perturb, epsilon, method, seed, exact_weight)
    delta = _sensitivity(Xc, flag, k)
    rng = np.random.default_rng(seed)
    scale = Fraction(max(delta, 1)) / Fraction(float(epsilon))
    noise, b = sample_discrete_laplace(scale, int(flag.sum()), rng)
    z_noisy = z.copy()
    z_noisy[flag] += noise
    weights = None if method == "B" else np.where(flag, 1.0, float(exact_weight))
    y = nnls(Xc, z_noisy, ridge=ridge, weights=weights)
    res = ipf(Xc, np.asarray(Xc.T @ y).ravel(), tol=tol, max_iter=max_iter)
    return LaplaceFit(
        z_noisy=z_noisy,
        y_fit=y,
        y_expected=res.y,
        converged=bool(res.converged),
        sensitivity=int(delta),
        scale=float(b),
        epsilon=float(Fraction(delta) / b) if delta else 0.0,
    )


def _laplace_inputs(X: Any, z: ArrayLike, perturb: ArrayLike, epsilon: float, method: str, seed: int,
                    exact_weight: float) -> tuple[sparse.csc_matrix, np.ndarray, np.ndarray]:
    """X, the counts and the flags of :func:`laplace_margins`, checked with its options."""
    if isinstance(epsilon, bool) or not (isinstance(epsilon, (int, float, np.integer, np.floating))
                                         and np.isfinite(epsilon) and epsilon > 0):
        raise InputError("laplace_margins: epsilon must be a positive, finite number")
    if method not in ("B", "C"):
        raise InputError("laplace_margins: method must be 'B' or 'C'")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise InputError("laplace_margins: give an integer seed (the noise must be reproducible)")
    if not (np.isfinite(exact_weight) and exact_weight > 0):
        raise InputError("laplace_margins: exact_weight must be a positive number")
    z = np.asarray(z, dtype=float)
    flag = np.asarray(perturb, dtype=bool)
    if flag.shape != z.shape:
        raise InputError(f"laplace_margins: perturb has {flag.size} flags for {z.size} published cells")
    Xc = sparse.csc_matrix(X)
    if Xc.shape[1] != z.size:
        raise InputError(f"laplace_margins: X has {Xc.shape[1]} published cells (columns) for {z.size} values")
    if not np.array_equal(Xc.data, np.round(Xc.data)):
        raise InputError("laplace_margins: X must have integer entries (counts of records)")
    if not np.array_equal(z[flag], np.round(z[flag])):
        raise InputError("laplace_margins: the perturbed values must be integer counts (the noise is "
                         "integer; non-integer counts would leak through their fractional part)")
    return Xc, z, flag


def _sensitivity(Xc: sparse.csc_matrix, flag: np.ndarray, k: int | None) -> int:
    """The sensitivity of the flagged cells (:func:`margin_sensitivity`), or ``k`` when given
    (refused below it: that would claim a smaller epsilon than the noise gives)."""
    delta = margin_sensitivity(Xc, flag)
    if k is not None:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise InputError("laplace_margins: k (the sensitivity) must be a positive integer")
        if k < delta:
            raise InputError(
                f"laplace_margins: k={k} is below the sensitivity of the perturbed cells, {delta} "
                "(a record counts in that many of them); the noise would give a privacy loss "
                f"{delta / k:g} times the epsilon claimed. Leave k out to use {delta}"
            )
        delta = int(k)
    return delta
