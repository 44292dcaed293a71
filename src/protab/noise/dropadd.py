"""Drop/add-up-to-q as a p-table (Shlomo, Krenzke & Li 2019, §3.1; docs/methods.md §3).

A count n gets noise v drawn uniformly from {−q, …, q} with q = ceil(rate·n) capped at
``cap`` (rate 1%, cap 7 in the paper): unbiased, the noise grows with the count, and zeros
are left untouched (q(0) = 0).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from protab.errors import PTableError
from protab.noise._noise_ptables import DIGITS, integer, positive_number, ptable_from_rows
from protab.ptable import PTable

__all__ = ["drop_add_q", "drop_add_width"]


def _rate(rate: float) -> Fraction:
    r = positive_number(rate, "rate")
    if r > 1:
        raise PTableError("rate must be at most 1 (q = ceil(rate·n) must not exceed n)")
    # the decimal the user wrote (0.01, not 0.01000000000000000020816…): exact ceilings
    return Fraction(repr(r))


def drop_add_width(n: np.ndarray, rate: float = 0.01, cap: int = 7) -> np.ndarray:
    """q(n) = min(cap, ceil(rate·n)), computed exactly (rate taken as the decimal written)."""
    fr = _rate(rate)
    c = integer(cap, "cap (the largest noise)", minimum=1)
    a = np.asarray(n, dtype=np.int64)
    num, den = fr.numerator, fr.denominator
    return np.minimum(c, -((-a * num) // den))


def drop_add_q(
    rate: float = 0.01, cap: int = 7, *, zeros: bool = False, digits: int = DIGITS
) -> PTable:
    """Drop/add-up-to-q: v uniform on {−q, …, q}, q = min(cap, ceil(rate·n)).

    Rows i = 0…N, period 1, where N = floor((cap − 1)/rate) + 1 is the smallest count whose q
    reaches the cap (601 for rate 1%, cap 7); row N (q = cap, symmetric) serves every larger
    count. With rate <= 1, q <= n, so no outcome is ever negative and nothing needs clipping.
    Zeros are untouched (row 0: v = 0), as in the paper; ``zeros=True`` is an extension that
    lets an empty cell be *added* to: v uniform on {0, 1} (the drop half is impossible, so
    this noise is biased by +1/2 — only for studies of the risk of published zeros).
    """
    fr = _rate(rate)
    c = integer(cap, "cap (the largest noise)", minimum=1)
    if not isinstance(zeros, (bool, np.bool_)):
        raise PTableError("zeros must be True or False")
    top = int((c - 1) / fr) + 1  # floor((cap − 1)/rate) + 1, exact for Fractions
    n = np.arange(top + 1, dtype=np.int64)
    q = drop_add_width(n, rate, c)
    width = 2 * q + 1
    i = np.repeat(n, width)
    start = np.repeat(np.cumsum(width) - width, width)
    v = np.arange(i.size) - start - np.repeat(q, width)  # −q … q within each row
    p = 1.0 / np.repeat(width, width).astype(np.float64)
    if zeros:
        i = np.concatenate([[0, 0], i[1:]])
        v = np.concatenate([[0, 1], v[1:]])
        p = np.concatenate([[0.5, 0.5], p[1:]])
    return ptable_from_rows(i, v, p, imax=top, period=1, digits=digits)
