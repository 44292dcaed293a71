"""Input checks of the Gaussian-elimination suppression: the integer model matrix, masks over
cells, vectors of values, and the arguments of :func:`protab.suppression.gauss`."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse

from protab.errors import InputError, SpecError, show_values

_IMPLEMENTED = ("none", "anySum", "anySumNOTprimary", "subSum", "subSumAny", "sub2Sum", "numttHTT")
_KNOWN_NOT_IMPLEMENTED = ("subSpace", "subSumSpace", "anySum0")


def _as_int_csc(X: Any, what: str = "gauss") -> sparse.csc_matrix:
    if not sparse.issparse(X):
        if isinstance(X, np.ndarray) and X.ndim == 2:
            X = sparse.csc_matrix(X)
        else:
            raise InputError(f"{what}: X must be a scipy.sparse matrix (inner × published), not {type(X).__name__}")
    X = sparse.csc_matrix(X)
    if X.ndim != 2:
        raise InputError(f"{what}: X must be two-dimensional")
    data = np.asarray(X.data)
    if data.dtype.kind == "b":
        data = data.astype(np.int64)
    if data.dtype.kind not in "iuf":
        raise InputError(f"{what}: X must be numeric, not {data.dtype}")
    if data.dtype.kind == "f":
        if not np.all(np.isfinite(data)):
            raise InputError(f"{what}: X has NaN or infinite coefficients")
        if np.any(data != np.round(data)):
            bad = np.unique(data[data != np.round(data)])
            raise InputError(
                f"{what}: X must have integer coefficients (as a model matrix has); found "
                f"{show_values(bad.tolist())}"
            )
        if data.size and np.abs(data).max() >= 2**53:
            raise InputError(f"{what}: X has coefficients too large to be exact in floating point")
    out = sparse.csc_matrix((data.astype(np.int64), X.indices.copy(), X.indptr.copy()), shape=X.shape)
    out.eliminate_zeros()
    out.sort_indices()
    return out


def _bool_vector(v: Any, n: int, name: str, what: str = "gauss") -> np.ndarray:
    if v is None:
        return np.zeros(n, dtype=bool)
    a = np.asarray(v)
    if a.ndim != 1:
        raise InputError(f"{what}: {name} must be one-dimensional, got shape {a.shape}")
    if a.dtype.kind == "b":
        if a.shape[0] != n:
            raise InputError(f"{what}: {name} has length {a.shape[0]}, expected {n}")
        return a.copy()
    if a.dtype.kind in "iu":
        if a.size and (a.min() < 0 or a.max() >= n):
            raise InputError(f"{what}: {name} indices must lie in 0..{n - 1}")
        out = np.zeros(n, dtype=bool)
        out[a] = True
        return out
    if a.size == 0:
        return np.zeros(n, dtype=bool)
    raise InputError(f"{what}: {name} must be a boolean mask or integer indices, not {a.dtype}")


def _float_vector(v: Any, n: int, name: str) -> np.ndarray:
    a = np.asarray(v, dtype=float)
    if a.ndim != 1 or a.shape[0] != n:
        raise InputError(f"gauss: {name} must be a vector of length {n} (one per published cell), got shape {a.shape}")
    if not np.isfinite(a).all():
        raise InputError(
            f"gauss: {name} has NaN or infinite values at published cells "
            f"{show_values(np.flatnonzero(~np.isfinite(a)).tolist())}"
        )
    return a


def _check_method(singleton_method: Any) -> None:
    """A singleton method of GaussSuppression that protab implements."""
    if not isinstance(singleton_method, str):
        raise SpecError(f"gauss: singleton_method must be a string, not {type(singleton_method).__name__}")
    if singleton_method not in _IMPLEMENTED:
        if singleton_method in _KNOWN_NOT_IMPLEMENTED or singleton_method.startswith("num"):
            raise NotImplementedError(
                f"gauss: singleton_method {singleton_method!r} (a GaussSuppression method) is not implemented "
                f"in protab; available: {', '.join(_IMPLEMENTED)}"
            )
        raise SpecError(f"gauss: unknown singleton_method {singleton_method!r}; use one of {', '.join(_IMPLEMENTED)}")


def _check_cells(n: int, primary: Any, forced: Any, never: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The primary, forced and never-suppressed masks over the ``n`` published cells, which must
    not contradict each other."""
    prim = _bool_vector(primary, n, "primary")
    forc = _bool_vector(forced, n, "forced")
    nev = _bool_vector(never, n, "never")
    if (forc & nev).any():
        raise SpecError(
            f"gauss: cells both forced (must be suppressed) and never (must be published): "
            f"{show_values(np.flatnonzero(forc & nev).tolist())}"
        )
    if (prim & nev).any():
        raise SpecError(
            f"gauss: primary cells marked never-suppress: {show_values(np.flatnonzero(prim & nev).tolist())}; "
            "a primary cell must be suppressed"
        )
    return prim, forc, nev


def _singleton_rows(singleton: Any, m: int, method: str) -> tuple[np.ndarray, np.ndarray | None]:
    """The singleton mask over the ``m`` inner cells and, for numttHTT given integer codes, the
    contributor codes (else None)."""
    sarr = None if singleton is None else np.asarray(singleton)
    if sarr is not None and sarr.dtype.kind in "iu" and method == "numttHTT":
        if sarr.shape != (m,) or (sarr < 0).any():
            raise InputError(
                f"gauss: singleton as contributor codes must be {m} non-negative integers (one per inner cell, "
                "0 = not a singleton)"
            )
        codes = sarr.astype(np.int64)
        return codes > 0, codes
    if sarr is not None and sarr.dtype.kind != "b":
        raise InputError(
            "gauss: singleton must be a boolean mask over the inner cells (rows of X); integer contributor "
            "codes only with singleton_method='numttHTT'"
        )
    return _bool_vector(singleton, m, "singleton"), None


def _check_costs(freq: Any, weight: Any, n: int, tol: float) -> np.ndarray | None:
    """Checked frequencies (returned), costs and tolerance of :func:`protab.suppression.gauss`."""
    if freq is not None:
        freq = _float_vector(freq, n, "freq")
    if weight is not None:
        w = _float_vector(weight, n, "weight")
        if (w < 0).any():
            raise InputError(
                f"gauss: weight (cost) must not be negative; negative at cells {show_values(np.flatnonzero(w < 0).tolist())}"
            )
    if not np.isfinite(tol) or tol <= 0:
        raise InputError(f"gauss: tol must be a positive number, got {tol!r}")
    return freq
