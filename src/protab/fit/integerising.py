"""Integerising: unbiased random rounding of fitted inner frequencies (integerise)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from protab.errors import InputError, show_values
from protab.fit._fit_inputs import FloatArray

__all__ = ["integerise"]


def integerise(
    y: ArrayLike,
    method: Literal["uniform", "multinomial"] = "uniform",
    *,
    seed: int | np.random.SeedSequence | None,
) -> NDArray[np.int64]:
    """Random rounding of fitted inner frequencies to integers (Langsrud 2019; docs/methods.md §4).

    ``"uniform"``: keep ``floor(y)`` and add 1 where the fractional part exceeds an independent
    U(0,1) draw, so every cell is unbiased: E[out] = y.
    ``"multinomial"``: keep ``floor(y)`` and give +1 to exactly ``k = round(Σ remainders)``
    distinct cells (half rounds up), so the total is preserved to the nearest integer and no
    cell gains more than 1. The k cells are drawn without replacement with inclusion
    probabilities ∝ remainders (``π = r·k/Σr``, capped at 1 with the excess redistributed) by
    systematic πps sampling on a random permutation of the cells (Madow 1949): when the
    remainders sum to an integer, π equals the remainder and every cell stays unbiased.
    ``seed`` is required (``numpy.random.default_rng(seed)``) so results are reproducible.
    """
    if seed is None:
        raise InputError("integerise needs an explicit seed (an int), e.g. seed=20240101")
    a = np.asarray(y, dtype=np.float64)
    if a.ndim != 1:
        a = a.reshape(-1)
    bad = np.flatnonzero(~np.isfinite(a))
    if bad.size:
        raise InputError(
            f"y has {bad.size} NaN/inf values at inner cells {show_values(bad.tolist())}"
        )
    neg = np.flatnonzero(a < 0)
    if neg.size:
        raise InputError(
            f"y has {neg.size} negative values at inner cells {show_values(neg.tolist())}; "
            "integerise rounds non-negative fitted frequencies (fit them with nnls or lsfit_nonneg)"
        )
    rng = np.random.default_rng(seed)
    fl = np.floor(a)
    r = a - fl
    out = fl.astype(np.int64)
    if method == "uniform":
        out += (rng.random(a.size) < r).astype(np.int64)
        return out
    if method != "multinomial":
        raise InputError(f"method must be 'uniform' or 'multinomial', got {method!r}")
    total = float(np.sum(r))
    k = int(np.floor(total + 0.5))
    if k <= 0:
        return out
    pi = _capped_inclusion(r, k)
    perm = rng.permutation(a.size)
    cum = np.cumsum(pi[perm])
    cum *= k / cum[-1]  # exact total k despite rounding
    u = rng.random()
    # cell perm[j] is selected when an integer-offset point u + m falls in (cum[j-1], cum[j]]
    upper = np.floor(cum - u)
    lower = np.concatenate([[np.floor(-u)], upper[:-1]])
    hit = (upper - lower) > 0
    out[perm[hit]] += 1
    return out


def _capped_inclusion(r: FloatArray, k: int) -> FloatArray:
    """Inclusion probabilities ∝ r summing to k, each ≤ 1 (iterative capping; loops over caps)."""
    pi = np.zeros_like(r)
    capped = np.zeros(r.size, dtype=bool)
    pos = r > 0
    for _ in range(r.size + 1):
        rest = pos & ~capped
        need = k - int(capped.sum())
        denom = float(r[rest].sum())
        if need <= 0 or denom <= 0:
            break
        pi[rest] = r[rest] * (need / denom)
        over = rest & (pi >= 1.0)
        if not over.any():
            break
        capped |= over
        pi[capped] = 1.0
    pi[capped] = 1.0
    return pi
