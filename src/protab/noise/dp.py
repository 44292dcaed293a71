"""Differential privacy for counts: the capped discrete Laplace as a p-table, and accounting.

The exponential mechanism with l1 utility u(a, b) = −|a − b| draws the published count b with
probability ∝ exp(−ε|b − a|/Δ) (Rinott, O'Keefe, Shlomo & Skinner 2018; Shlomo, Krenzke & Li
2019, §3.2): a discretised Laplace. Capping the noise at ±cap and renormalising makes the
mechanism (ε, δ)-differentially private with δ = the probability mass at the cap (a
neighbouring count can reach an outcome the other cannot only there). ε = 2, cap 7 gives
P(0) = 0.76159, P(±1) = 0.10307, P(±7) = 6.33e−7 (docs/methods.md §3).

A record that lies in c published cells, each perturbed by its own cell key, is protected by
basic composition at (c·ε, c·δ); c = 2^k − 1 when every margin of a k-way table is perturbed
(docs/methods.md §3).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import polars as pl

from protab.errors import InputError, PTableError, PTableWarning
from protab.noise._noise_ptables import (
    DIGITS,
    integer,
    lost_mass,
    positive_number,
    ptable_from_rows,
)
from protab.ptable import PTable

__all__ = [
    "DPAccount",
    "discrete_laplace",
    "dp_accounting",
    "dp_accounting_grid",
    "dp_delta",
    "dp_noise",
    "kway_cells",
    "privacy_delta",
    "sample_discrete_laplace",
]

_LARGE_EPSILON = 10.0  # per-cell ε above this protects next to nothing: warn (as OpenDP does)


def dp_noise(epsilon: float, cap: int, sensitivity: float = 1) -> tuple[np.ndarray, np.ndarray]:
    """The capped discrete Laplace: noise values v = −cap…cap and P(v) ∝ exp(−ε|v|/Δ),
    renormalised over the cap (Rinott et al. 2018). Returns (v, p)."""
    eps = positive_number(epsilon, "epsilon")
    c = integer(cap, "cap (the largest noise)", minimum=1)
    delta_u = positive_number(sensitivity, "sensitivity")
    v = np.arange(-c, c + 1, dtype=np.int64)
    w = np.exp(-eps * np.abs(v) / delta_u)
    return v, w / w.sum()


def dp_delta(epsilon: float, cap: int, sensitivity: float = 1) -> float:
    """δ of the capped discrete Laplace: the probability of the noise +cap (equally −cap),
    the mass an outcome has under one count and not under its neighbour (Rinott et al. 2018).
    ε = 2, cap 7 → 6.33e−7."""
    _, p = dp_noise(epsilon, cap, sensitivity)
    return float(p[-1])


def discrete_laplace(
    epsilon: float,
    cap: int,
    sensitivity: float = 1,
    *,
    negative_to_zero: bool = True,
    imax: int | None = None,
    digits: int = DIGITS,
) -> PTable:
    """The capped discrete Laplace (exponential mechanism, l1 utility) as a p-table.

    Rows i = 0…imax (imax = cap unless larger), period 1: every count n >= cap uses the
    symmetric row, P(v) ∝ exp(−ε|v|/Δ) for |v| <= cap. Counts n < cap cannot take the noise
    v < −n; two rules:

    - ``negative_to_zero=True`` (default): the symmetric mechanism, then max(0, n + v) — a
      post-processing, so the (ε, δ) guarantee is kept; row i has P(j = 0) = P(v <= −i).
    - ``negative_to_zero=False`` (truncate): row i draws v in {−i, …, cap} with
      P(v | i) ∝ exp(−ε|v|/Δ), renormalised over that range. The normalising constant then
      depends on i, so rows below cap are *not* (ε, δ)-DP with the δ of :func:`dp_delta`
      (see :func:`privacy_delta`); use it where small counts matter more than the guarantee.

    Both rules move zeros upward in the p-table. Through a Session an empty cell is never
    moved: it has no records, so its cell key is 0 and it takes the first interval of row 0,
    v = 0 (the cell key method cannot randomise a cell without records).
    ``digits``: decimals of the interval bounds (12 by default, so that tails of 1e−7 keep
    three significant digits). δ is :func:`dp_delta`; accounting :func:`dp_accounting`.
    """
    v, p = dp_noise(epsilon, cap, sensitivity)
    c = int(v[-1])
    if not isinstance(negative_to_zero, (bool, np.bool_)):
        raise PTableError("negative_to_zero must be True or False")
    top = c if imax is None else integer(imax, "imax", minimum=0)
    if top < c:
        raise PTableError(
            "imax must be at least cap: rows below the cap are not symmetric, and the row "
            "imax serves every larger count"
        )
    _warn_weak(epsilon, p, digits)
    i, vv, pp = _laplace_rows(v, p, top, negative_to_zero)
    return ptable_from_rows(i, vv, pp, imax=top, period=1, digits=digits)


def _warn_weak(epsilon: float, p: np.ndarray, digits: int) -> None:
    """PTableWarning for an epsilon that protects next to nothing, or noise probabilities below
    the resolution of the interval bounds."""
    if float(epsilon) > _LARGE_EPSILON:
        warnings.warn(
            "discrete_laplace: a very large epsilon gives almost no protection (most cells are "
            "published unchanged); check the privacy budget",
            PTableWarning,
            stacklevel=3,
        )
    if lost_mass(p, digits):
        warnings.warn(
            "discrete_laplace: some noise probabilities are below the resolution of the "
            "interval bounds and round to zero, so the effective cap is smaller than asked; "
            "pass a larger digits= or a smaller cap",
            PTableWarning,
            stacklevel=3,
        )


def _laplace_rows(v: np.ndarray, p: np.ndarray, top: int,
                  negative_to_zero: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(i, v, p) rows i = 0…top of the capped discrete Laplace (noise ``v`` = −cap…cap with
    probabilities ``p``): rows below the cap move v < −i to 0 or renormalise over v ≥ −i."""
    c = int(v[-1])
    w = p / p[c]  # exp(−ε|v|/Δ), as p[c] = P(v = 0): the unnormalised weights
    rows_i, rows_v, rows_p = [], [], []
    for i in range(top + 1):  # loop over p-table rows (cap + 1 of them)
        if i >= c:
            vi, pi = v, p
        elif negative_to_zero:
            vi = v[v >= -i]
            pi = p[v >= -i].copy()
            pi[0] = p[v <= -i].sum()
        else:
            keep = v >= -i
            vi, pi = v[keep], w[keep] / w[keep].sum()
        rows_i.append(np.full(vi.size, i))
        rows_v.append(vi)
        rows_p.append(pi)
    return np.concatenate(rows_i), np.concatenate(rows_v), np.concatenate(rows_p)


#: The noise scale of :func:`sample_discrete_laplace` is rounded up to a multiple of 2^-20.
_SCALE_GRID = 2**20


def _bernoulli_exp_fraction(num: np.ndarray, den: int, rng: np.random.Generator) -> np.ndarray:
    """Exact Bernoulli(exp(−num/den)) per element, for integers 0 <= num <= den.

    Canonne, Kamath & Steinke (2020), Algorithm 1 for γ = num/den in [0, 1]: draw
    A_K ~ Bernoulli(γ/K) for K = 1, 2, … until the first A_K = 0; the result is 1 when that
    K is odd. γ/K is drawn as Bernoulli(num/den) and Bernoulli(1/K), both uniform integer
    comparisons, so no floating point is involved. The loop runs over K (a few rounds: the
    chance of reaching round K is below 1/(K−1)!), never over elements.
    """
    out = np.zeros(num.shape, dtype=bool)
    active = np.arange(num.size)
    k = 1
    while active.size:
        a = rng.integers(0, den, size=active.size) < num[active]
        if k > 1:
            a &= rng.integers(0, k, size=active.size) == 0
        out[active[~a]] = k % 2 == 1
        active = active[a]
        k += 1
    return out


def sample_discrete_laplace(
    scale: float | Fraction, size: int, rng: np.random.Generator
) -> tuple[np.ndarray, Fraction]:
    """Exact draws of the discrete Laplace distribution on all integers (not capped).

    P(Z = z) = (e^{1/b} − 1)/(e^{1/b} + 1) · e^{−|z|/b} for every integer z, with the scale b
    = ``scale`` rounded *up* to a multiple of 2^−20 (so b is an exact rational; a larger scale
    only adds noise). Sampled by the rejection algorithm of Canonne, Kamath & Steinke (2020,
    "The discrete Gaussian for differential privacy", Algorithm 2) with integer arithmetic
    only: every random choice is a uniform integer from ``rng.integers`` compared with an
    integer, so the output has exactly this distribution given a uniform integer source (no
    floating-point Laplace with its gaps in the low bits). Vectorised: each loop is a round
    of rejection over all pending draws. Returns (int64 draws, the scale b used).
    """
    b = Fraction(scale) if not isinstance(scale, Fraction) else scale
    if b <= 0:
        raise InputError("sample_discrete_laplace: the scale must be positive")
    b = Fraction(math.ceil(b * _SCALE_GRID), _SCALE_GRID)
    if b > 2**40:
        raise InputError("sample_discrete_laplace: the scale is too large (above 2^40)")
    t, s = b.numerator, b.denominator  # b = t/s with s <= 2^20 (CKS's Lap_Z(t/s))
    n = int(size)
    out = np.zeros(n, dtype=np.int64)
    pending = np.arange(n)
    while pending.size:
        m = pending.size
        u = rng.integers(0, t, size=m)  # U uniform on {0, …, t − 1}
        d = _bernoulli_exp_fraction(u, t, rng)  # accept U with probability exp(−U/t)
        v = np.zeros(m, dtype=np.int64)  # V geometric: successes of Bernoulli(e^−1) until a failure
        alive = np.arange(m)
        while alive.size:
            go = _bernoulli_exp_fraction(np.ones(alive.size, dtype=np.int64), 1, rng)
            v[alive[go]] += 1
            alive = alive[go]
        y = (u + t * v) // s
        sign = rng.integers(0, 2, size=m)
        ok = d & ~((sign == 1) & (y == 0))  # reject −0 so that 0 is not counted twice
        out[pending[ok]] = np.where(sign[ok] == 1, -y[ok], y[ok])
        pending = pending[~ok]
    return out, b


def _outcome_matrix(ptable: PTable, counts: np.ndarray) -> np.ndarray:
    """Dense P(j | n) for the given counts (rows) and j = 0…max reachable (columns)."""
    f = ptable.frame
    imin = int(f["i"].min())  # type: ignore[arg-type]
    cls = ptable.row_class(counts)
    left = pl.DataFrame({"row": np.arange(counts.size), "n": counts, "i": cls})
    rows = left.join(f.select("i", "v", "p"), on="i", how="inner")
    j = (rows["n"] + rows["v"]).to_numpy()
    width = int(max(int(j.max()) if j.size else 0, int(counts.max()))) + 1
    out = np.zeros((counts.size, width))
    np.add.at(out, (rows["row"].to_numpy(), j), rows["p"].to_numpy())
    low = cls < imin  # counts below the first row are published unchanged
    out[np.flatnonzero(low), counts[low]] = 1.0
    return out


def privacy_delta(ptable: PTable, epsilon: float) -> float:
    """The smallest δ for which perturbing one count through ``ptable`` is (ε, δ)-DP, for
    neighbouring counts n and n + 1 (one record more or less).

    δ(ε) = max over n, both directions, of Σ_j max(0, P(j | n) − e^ε P(j | n + 1)) — the
    hockey-stick divergence (Dwork & Roth 2014, §3.5; Balle & Wang 2018). It is exact for the
    p-table as stored (interval widths, rounded to its decimals): all counts n are covered
    by n = 0 … imax + period, past which the row rule repeats. For
    :func:`discrete_laplace` with ``negative_to_zero=True`` it equals :func:`dp_delta` up to
    the rounding of the bounds; other p-tables (PRAM, drop/add, CKM) are not designed for DP
    and usually give a large δ.
    """
    eps = positive_number(epsilon, "epsilon")
    if not isinstance(ptable, PTable):
        raise InputError(f"privacy_delta needs a protab.PTable, not {type(ptable).__name__}")
    counts = np.arange(ptable.imax + ptable.period + 2, dtype=np.int64)
    P = _outcome_matrix(ptable, counts)
    a, b = P[:-1], P[1:]
    e = math.exp(eps)
    fwd = np.clip(a - e * b, 0.0, None).sum(axis=1)
    bwd = np.clip(b - e * a, 0.0, None).sum(axis=1)
    return float(max(fwd.max(), bwd.max()))


def kway_cells(k: int) -> int:
    """Published cells a record lies in when every margin of a k-way table is perturbed but
    the grand total: 2^k − 1 (docs/methods.md §3)."""
    kk = integer(k, "k (the number of dimensions)", minimum=1, error=InputError)
    return 2**kk - 1


@dataclass(frozen=True)
class DPAccount:
    """Privacy of a table perturbed by the capped discrete Laplace, by basic composition:
    a record in ``cells_per_record`` published cells, each (ε, δ)-DP, is protected at
    (cells·ε, cells·δ) (Dwork & Roth 2014, Thm 3.16).

    The fields are privacy parameters meant to be published with a DP table; do not log
    them where the noise parameters of non-DP p-tables would be secret.
    """

    epsilon: float
    delta: float
    cap: int
    sensitivity: float
    cells_per_record: int
    epsilon_total: float
    delta_total: float

    def summary(self) -> str:
        """A few lines to print with the table."""
        return "\n".join(
            [
                (
                    "Differential privacy of the perturbed table (capped discrete Laplace, "
                    "basic composition)"
                ),
                (
                    f"  per cell      epsilon = {self.epsilon:g}, delta = {self.delta:.3g} "
                    f"(noise capped at +/-{self.cap}, sensitivity {self.sensitivity:g})"
                ),
                f"  cells/record  {self.cells_per_record} published cells per record",
                (
                    f"  per record    epsilon = {self.epsilon_total:g}, "
                    f"delta = {self.delta_total:.3g}"
                ),
            ]
        )

    def __str__(self) -> str:
        return self.summary()


def dp_accounting(
    epsilon: float, cap: int, cells_per_record: int, sensitivity: float = 1
) -> DPAccount:
    """(ε, δ) of one cell (δ = :func:`dp_delta`) and of a record that lies in
    ``cells_per_record`` published cells, by basic composition: (c·ε, c·δ). Use
    :func:`kway_cells` (2^k − 1) when every margin of a k-way table is perturbed, or count the
    cells of a hierarchy (one per published level combination)."""
    delta = dp_delta(epsilon, cap, sensitivity)
    c = integer(cells_per_record, "cells_per_record", minimum=1, error=InputError)
    eps = float(epsilon)
    return DPAccount(
        epsilon=eps,
        delta=delta,
        cap=int(cap),
        sensitivity=float(sensitivity),
        cells_per_record=c,
        epsilon_total=c * eps,
        delta_total=min(1.0, c * delta),
    )


def dp_accounting_grid(
    epsilon: float, caps: Sequence[int], cells_per_record: Sequence[int], sensitivity: float = 1
) -> pl.DataFrame:
    """:func:`dp_accounting` over every cap × cells_per_record: columns cap, cells_per_record,
    delta, epsilon_total, delta_total."""
    rows = [
        dp_accounting(epsilon, c, k, sensitivity) for c in caps for k in cells_per_record
    ]
    return pl.DataFrame(
        {
            "cap": [r.cap for r in rows],
            "cells_per_record": [r.cells_per_record for r in rows],
            "delta": [r.delta for r in rows],
            "epsilon_total": [r.epsilon_total for r in rows],
            "delta_total": [r.delta_total for r in rows],
        }
    )
