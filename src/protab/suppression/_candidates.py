"""Candidate orders of the Gaussian-elimination suppression: in which order the non-primary
cells are tried for publication (GaussSuppression's ``CandidatesDefault``, ``CandidatesNum``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse

from protab.errors import InputError, show_values
from protab.suppression._suppression_inputs import _as_int_csc, _float_vector

__all__ = ["candidates_default", "candidates_num"]


def _freq_plus1(freq: np.ndarray) -> np.ndarray:
    """freq + 1, but negative frequencies move away from zero (freq − 1 where freq+1 ≤ 0)."""
    f = freq + 1.0
    nonpos = f <= 0
    f[nonpos] -= 1.0
    return f


def candidates_default(
    X: Any, freq: Any, weight: Any = None, *, secondary_zeros: bool = False
) -> np.ndarray:
    """Candidate order of GaussSuppression's ``CandidatesDefault`` (0-based column indices).

    Cells are tried in decreasing ``|(freq+1)·weight|``; ties go to cells covering much of the
    table (``|XᵀX((freq+1)·weight)|``, scaled to at most 0.99). Unless ``secondary_zeros``,
    zero cells come first (they are never chosen as secondary suppressions when avoidable).
    The sort is stable, as R's ``order``.
    """
    Xc = _as_int_csc(X, "candidates_default").astype(float)
    n = Xc.shape[1]
    freq = _float_vector(freq, n, "freq")
    if weight is None:
        w = np.ones(n)
    else:
        w = _float_vector(weight, n, "weight")
        if (w < 0).any():
            raise InputError(
                f"candidates: weight (cost) must not be negative; negative at cells "
                f"{show_values(np.flatnonzero(w < 0).tolist())}"
            )
        if w.size and w.min() == 0:
            w = w + w.max() * 1e-20
    fw = _freq_plus1(freq) * w
    tie = np.abs(Xc.T @ (Xc @ fw))
    top = tie.max() if tie.size else 0.0
    if top > 0:
        tie = tie / top
    order_key = np.abs(fw) + 0.99 * tie
    if not secondary_zeros and order_key.size:
        zero = freq == 0
        order_key[zero] = 0.01 + order_key.max() + order_key[zero]
    return np.argsort(-order_key, kind="stable")


def candidates_num(
    X: Any, num: Any, freq: Any = None, weight: Any = None, *, secondary_zeros: bool = False
) -> np.ndarray:
    """Candidate order of GaussSuppression's ``CandidatesNum`` (0-based column indices).

    The weight of ``candidates_default`` becomes ``|num|/(freq+1)``, so cells are tried in
    decreasing ``|num|`` (large cells published first), with the same tie-breaking and zeros
    first. ``freq`` defaults to the column sums of ``X`` (the inner cells under each cell); the
    package passes the number of records when it has them. The package computes the order on
    the rows of its data before aggregation to inner cells (records, or inner cell × holding);
    its tie-breaking term counts those rows, so pass ``X`` with one row per such data row
    (``X[inner_of_row]``) to reproduce it exactly. (The package also puts cells made zero only
    by ``removeCodes`` first; protab has no removeCodes here.)
    """
    Xc = _as_int_csc(X, "candidates_num")
    n = Xc.shape[1]
    num = _float_vector(num, n, "num")
    if freq is None:
        freq = np.asarray(Xc.sum(axis=0), dtype=float).ravel()
    freq = _float_vector(freq, n, "freq")
    w = np.abs(num / _freq_plus1(freq))
    if weight is not None:
        w = w * _float_vector(weight, n, "weight")
    return candidates_default(Xc, freq, w, secondary_zeros=secondary_zeros)


def _candidate_order(W0: sparse.csc_matrix, z: np.ndarray, candidates: Any, freq: np.ndarray | None, weight: Any,
                     protect: np.ndarray, never: np.ndarray) -> np.ndarray:
    """The cells to try, in order: the never-suppressed cells first, then ``candidates`` (default
    :func:`candidates_num`) without repeats and without the cells to protect."""
    n = W0.shape[1]
    if candidates is None:
        order = candidates_num(W0, z, freq, weight)
    else:
        order = np.asarray(candidates)
        if order.ndim != 1 or (order.size and order.dtype.kind not in "iu"):
            raise InputError("gauss: candidates must be a sequence of 0-based published-cell indices")
        if order.size and (order.min() < 0 or order.max() >= n):
            raise InputError(f"gauss: candidates must lie in 0..{n - 1}")
        order = order.astype(np.int64)
        _, first = np.unique(order, return_index=True)
        order = order[np.sort(first)]
    return np.concatenate([np.flatnonzero(never), order[~protect[order] & ~never[order]]]).astype(np.int64)
