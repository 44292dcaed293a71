"""The simple roundings: conventional, random (unbiased, by cell key), small cell adjustment,
Barnardisation and semi-controlled rounding (ESSnet Handbook on SDC, frequency tables;
docs/methods.md §2 and §3).

The value-dependent ones are p-tables (docs/methods.md §3), so they run in SQL as the same join
as the cell key method:

* random rounding to base b, every published cell (margins on their own) rounded by its cell
  key, so the same cell rounds the same way in every table::

      s.cell_key("persons", spec, random_rounding_ptable(3))

* small cell adjustment and Barnardisation perturb the *inner* cells by their own cell keys
  and publish margins as sums (additive)::

      s.perturb_inner("persons", spec, small_cell_adjustment_ptable(3))
      s.perturb_inner("persons", spec, barnardisation_ptable(0.2))

The numeric functions here do the same on arrays that are already tabulated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
from scipy import sparse

from protab.errors import InputError, PTableError
from protab.ptable import PTable
from protab.rounding._rounding_inputs import (
    as_frame,
    check_base,
    check_seed,
    counts,
    prepare,
    xty,
)

__all__ = [
    "SemiControlledResult",
    "barnardisation_ptable",
    "barnardise",
    "conventional",
    "random",
    "random_rounding_ptable",
    "semi_controlled",
    "small_cell_adjustment",
    "small_cell_adjustment_ptable",
]


def _values_in(values: Any, column: str, what: str) -> tuple[np.ndarray, pl.DataFrame | None]:
    """Counts from an array-like, a polars Series or a frame (its ``column``)."""
    if isinstance(values, (pl.DataFrame, pl.LazyFrame)) or type(values).__module__.startswith(
        ("pandas.core.frame", "pyarrow")
    ):
        frame = as_frame(values, what)
        if column not in frame.columns:
            raise InputError(f"{what}: the frame has no column {column!r}; pass column=")
        return counts(frame[column], f"{what}: column {column!r}"), frame
    return counts(values, what), None


def _values_out(out: np.ndarray, frame: pl.DataFrame | None) -> Any:
    if frame is None:
        return out
    return frame.with_columns(pl.Series("rounded", out.ravel(), dtype=pl.Int64))


# --------------------------------------------------------------------------- conventional


def conventional(values: Any, base: int, *, column: str = "n") -> Any:
    """Conventional rounding: every cell, inner and margin alike, to the nearest multiple of
    ``base``, independently (ESSnet Handbook on SDC; not additive).

    Ties (residual exactly base/2, even bases only) round *up*: 5 → 10 for base 10. With
    base 5: 1 → 0, 3 → 5, 12 → 10, 16 → 15, 23 → 25. Counts must be non-negative integers.
    An array (any shape) gives an array; a polars/pandas/pyarrow frame gives the polars frame
    with a column ``rounded`` beside ``column``.
    """
    b = check_base(base)
    n, frame = _values_in(values, column, "conventional rounding")
    q, r = np.divmod(n, b)
    out = b * (q + (2 * r >= b))
    return _values_out(out.astype(np.int64), frame)


# --------------------------------------------------------------------------- random rounding


def random_rounding_ptable(base: int) -> PTable:
    """Unbiased random rounding to ``base`` as a p-table with period b (docs/methods.md §3).

    A count n with residual r = n mod b moves by −r with probability 1 − r/b and by b − r
    with probability r/b; multiples of b stay. Rows i = 1..b, imax = b, period = b, so the
    row of n ≥ 1 is ((n − 1) mod b) + 1: the row of residual r is i = r, and i = b serves
    the multiples; zeros have no row and stay 0. (Rows 0..b−1 with imax = b−1 would say the
    same, but PTable requires the repeated rows to start at i ≥ 1.) Intervals are exact
    integers over den = b: unbiased exactly when the cell-key modulus is a multiple of b,
    within 1/modulus otherwise.

    Used as ``Session.cell_key(table, spec, random_rounding_ptable(b))`` it rounds every
    published cell by its cell key — margins independently — so a cell rounds the same way
    in every table.
    """
    b = check_base(base)
    i, v, lo, hi = [], [], [], []
    for row in range(1, b + 1):
        r = row % b
        if r == 0:
            i += [row]
            v += [0]
            lo += [0]
            hi += [b]
        else:
            i += [row, row]
            v += [-r, b - r]
            lo += [0, b - r]
            hi += [b - r, b]
    frame = pl.DataFrame({"i": i, "v": v, "lb_n": lo, "ub_n": hi}, schema={c: pl.Int64 for c in ("i", "v", "lb_n", "ub_n")})
    return PTable(frame, den=b, imax=b, period=b)


def random(
    values: Any,
    base: int,
    cell_keys: Any = None,
    modulus: int | None = None,
    *,
    column: str = "n",
    key_column: str = "cell_key",
) -> Any:
    """Unbiased random rounding of tabulated counts driven by their integer cell keys.

    Each count n rounds up to the next multiple of ``base`` when its cell key k (u = k /
    modulus) falls in the top r/b of [0, 1), r = n mod b, else down (the p-table of
    :func:`random_rounding_ptable` through :meth:`PTable.lookup`): the same cell key gives
    the same rounding in every table. ``values`` is an array (then ``cell_keys`` is an array
    of the same shape) or a frame with ``column`` and ``key_column`` (as
    ``Session.tabulate(..., cell_keys=True)`` returns); a frame gives the polars frame with a
    column ``rounded``. ``modulus`` is the key modulus (2^bits, or 10^d for decimal keys).

    On microdata, ``Session.cell_key(table, spec, random_rounding_ptable(b))`` does the same
    in SQL.
    """
    b = check_base(base)
    n, frame = _values_in(values, column, "random rounding")
    if cell_keys is None:
        if frame is None or key_column not in frame.columns:
            raise InputError(
                "random rounding needs cell keys: pass cell_keys= (integers in [0, modulus)) "
                f"or a frame with a {key_column!r} column (Session.tabulate(..., cell_keys=True))"
            )
        keys = counts(frame[key_column], f"random rounding: column {key_column!r}")
    else:
        keys = counts(cell_keys, "random rounding: cell_keys")
    if modulus is None:
        raise InputError("random rounding needs the cell-key modulus (2**bits, or 10**digits)")
    if keys.shape != n.shape:
        raise InputError(f"random rounding: {keys.size} cell keys for {n.size} counts; give one per count")
    out = random_rounding_ptable(b).lookup(n, keys, int(modulus))
    return _values_out(np.asarray(out, dtype=np.int64).reshape(n.shape), frame)


# --------------------------------------------------------------------------- small cell adjustment


def small_cell_adjustment_ptable(base: int) -> PTable:
    """Small cell adjustment to ``base`` as a p-table (ESSnet Handbook on SDC).

    Only small values 1..b−1 move: n goes to b with probability n/b, else to 0 (unbiased);
    values ≥ b stay (imax = b, row b stays, period 1); zeros have no row and stay 0. Used as
    ``Session.perturb_inner(table, spec, small_cell_adjustment_ptable(b))``: inner cells move
    by their own cell keys and margins are sums of adjusted inner cells (additive, not
    consistent across tables with different inner cells).
    """
    b = check_base(base)
    i, v, lo, hi = [], [], [], []
    for n in range(1, b):
        i += [n, n]
        v += [-n, b - n]
        lo += [0, b - n]
        hi += [b - n, b]
    i += [b]
    v += [0]
    lo += [0]
    hi += [b]
    frame = pl.DataFrame({"i": i, "v": v, "lb_n": lo, "ub_n": hi}, schema={c: pl.Int64 for c in ("i", "v", "lb_n", "ub_n")})
    return PTable(frame, den=b, imax=b, period=1)


def small_cell_adjustment(values: Any, base: int, *, seed: int | np.random.SeedSequence) -> np.ndarray:
    """Small cell adjustment of inner counts: each n in 1..b−1 becomes b with probability
    n/b, else 0 (unbiased); other values stay (ESSnet Handbook on SDC). Sum the result for
    margins (additive). Draws from ``numpy.random.default_rng(seed)``; for keyed, reproducible
    adjustment of microdata use :func:`small_cell_adjustment_ptable` with
    ``Session.perturb_inner``."""
    b = check_base(base)
    n = counts(values, "small cell adjustment")
    rng = np.random.default_rng(check_seed(seed, "small_cell_adjustment"))
    u = rng.integers(0, b, size=n.shape)  # P(u < n) = n/b exactly
    small = (n > 0) & (n < b)
    return np.where(small, np.where(u < n, b, 0), n).astype(np.int64)


# --------------------------------------------------------------------------- Barnardisation

_BARN_DIGITS = 8


def _check_p(p: Any) -> int:
    """p in [0, 1] with at most 8 decimals, as an integer over 10^8."""
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise PTableError("Barnardisation: p must be a number in [0, 1]")
    pf = float(p)
    if not np.isfinite(pf) or not 0.0 <= pf <= 1.0:
        raise PTableError("Barnardisation: p must lie in [0, 1]")
    pn = round(pf * 10**_BARN_DIGITS)
    if abs(pn / 10**_BARN_DIGITS - pf) > 1e-12:
        raise PTableError("Barnardisation: give p with at most 8 decimals")
    return pn


def barnardisation_ptable(p: float) -> PTable:
    """Barnardisation as a p-table: every non-zero count gets −1, 0, +1 with probabilities
    p/2, 1 − p, p/2 (ESSnet Handbook on SDC). One row i = 1 serves every n ≥ 1 (imax = 1,
    period 1), so a 1 may become 0; zeros have no row and stay 0. Exact over den = 2·10^8
    (p with up to 8 decimals). Used as ``Session.perturb_inner(table, spec,
    barnardisation_ptable(p))``: inner cells by their own cell keys, margins as sums."""
    pn = _check_p(p)
    den = 2 * 10**_BARN_DIGITS
    frame = pl.DataFrame(
        {"i": [1, 1, 1], "v": [-1, 0, 1], "lb_n": [0, pn, den - pn], "ub_n": [pn, den - pn, den]},
        schema={c: pl.Int64 for c in ("i", "v", "lb_n", "ub_n")},
    )
    return PTable(frame, den=den, imax=1, period=1)


def barnardise(values: Any, p: float, *, seed: int | np.random.SeedSequence) -> np.ndarray:
    """Barnardisation of inner counts: each non-zero n gets +1, 0, −1 with probabilities
    p/2, 1 − p, p/2; zeros stay (ESSnet Handbook on SDC). Sum the result for margins. Draws
    from ``numpy.random.default_rng(seed)``; for keyed noise on microdata use
    :func:`barnardisation_ptable` with ``Session.perturb_inner``."""
    pn = _check_p(p)
    n = counts(values, "Barnardisation")
    rng = np.random.default_rng(check_seed(seed, "barnardise"))
    den = 2 * 10**_BARN_DIGITS
    u = rng.integers(0, den, size=n.shape)
    v = np.where(u < pn, -1, np.where(u >= den - pn, 1, 0))
    return np.where(n > 0, n + v, 0).astype(np.int64)


# --------------------------------------------------------------------------- semi-controlled


@dataclass(frozen=True)
class SemiControlledResult:
    """Semi-controlled rounding of a table: rounded inner cells and margins as their sums."""

    inner: pl.DataFrame  # dims, n, rounded
    published: pl.DataFrame  # dims, levels, n, rounded
    base: int
    preserve: str
    X: sparse.csc_matrix = field(repr=False)


def _systematic(n: np.ndarray, b: int, groups: np.ndarray | None, rng: np.random.Generator) -> np.ndarray:
    """Unbiased rounding by systematic selection (Madow) on the residuals r = n mod b.

    Cells are put in a random order (grouped by ``groups``, groups themselves in random
    order); the residuals are laid end to end on [0, Σr) and every point U + kb (U uniform
    on 0..b−1) rounds up the cell whose stretch holds it. Each cell rounds up with
    probability r/b exactly; every contiguous run of cells — a group, the whole table — gets
    ⌊Σr/b⌋ or ⌈Σr/b⌉ round-ups, so its total goes to one of the two adjacent multiples of b
    (exactly preserved when it is a multiple of b)."""
    q, r = np.divmod(n, b)
    key = rng.permutation(n.size)
    if groups is None:
        order = np.argsort(key, kind="stable")
    else:
        ug, inv = np.unique(groups, return_inverse=True)
        gperm = rng.permutation(ug.size)
        order = np.lexsort((key, gperm[inv]))
    rs = r[order]
    hi = np.cumsum(rs)
    lo = hi - rs
    u = int(rng.integers(0, b))
    up_sorted = np.floor_divide(hi - 1 - u, b) - np.floor_divide(lo - 1 - u, b)
    up = np.empty_like(up_sorted)
    up[order] = up_sorted
    return (b * (q + up)).astype(np.int64)


def semi_controlled(
    values_or_inner: Any,
    spec: Any = None,
    base: int = 3,
    *,
    preserve: str = "grand_total",
    seed: int | np.random.SeedSequence,
    freq: str = "n",
) -> np.ndarray | SemiControlledResult:
    """Semi-controlled rounding: unbiased random rounding of the inner cells that controls the
    grand total — or each total of one dimension (e.g. each area) — and publishes margins as
    sums of the rounded inner cells (ESSnet Handbook on SDC, docs/methods.md §2).

    Method: systematic selection on the residuals (see ``_systematic``): every inner cell
    rounds up with probability r/b exactly (unbiased), and the number rounded up in the whole
    table, and with ``preserve=<dimension>`` in each code of that dimension, is the floor or
    the ceiling of its residual sum over b. So each controlled total is kept exactly when it
    is a multiple of b and otherwise goes to one of its two adjacent multiples (the sum of
    multiples of b can be nothing else), with expectation the original total. With
    ``preserve=<dimension>`` the grand total is controlled as well.

    ``values_or_inner``: an array of inner counts (then ``spec`` is None and only
    ``preserve="grand_total"``; an array comes back) or a frame of inner cells with the
    dimensions of ``spec`` and ``freq`` (a :class:`SemiControlledResult` comes back).
    """
    b = check_base(base)
    rng = np.random.default_rng(check_seed(seed, "semi_controlled"))
    if spec is None:
        if isinstance(values_or_inner, (pl.DataFrame, pl.LazyFrame)):
            raise InputError("semi_controlled: a frame of inner cells needs its TableSpec (spec=)")
        if preserve != "grand_total":
            raise InputError(
                f"semi_controlled: preserve={preserve!r} needs a frame of inner cells and its "
                "TableSpec; an array only supports preserve='grand_total'"
            )
        n = counts(values_or_inner, "semi-controlled rounding")
        return _systematic(n.ravel(), b, None, rng).reshape(n.shape)
    prep = prepare(values_or_inner, spec, freq, "semi_controlled")
    if preserve == "grand_total":
        groups = None
    elif preserve in prep.spec.columns:
        groups = prep.inner[preserve].rank("dense").to_numpy()
    else:
        raise InputError(
            f"semi_controlled: preserve must be 'grand_total' or a dimension of the table "
            f"({', '.join(prep.spec.columns)}), not {preserve!r}"
        )
    rounded = _systematic(prep.y, b, groups, rng)
    inner = prep.inner.with_columns(pl.Series("rounded", rounded, dtype=pl.Int64))
    published = prep.published.with_columns(pl.Series("rounded", xty(prep.X, rounded), dtype=pl.Int64))
    return SemiControlledResult(inner, published, b, preserve, prep.X)

