"""Matrices given by the user at the ground floor: the (inner cells × published cells) model
matrix as a checked float CSC array, shared by fit/ and suppression/."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from protab.errors import InputError


def as_csc(X: object, *, nonneg: bool = False, what: str = "X") -> sp.csc_array:
    """X as a float64 CSC array with summed duplicates, checked for finiteness (and sign)."""
    if sp.issparse(X):
        A = sp.csc_array(X, dtype=np.float64)
    elif isinstance(X, np.ndarray) and X.ndim == 2:
        A = sp.csc_array(np.asarray(X, dtype=np.float64))
    else:
        raise InputError(
            f"{what} must be a scipy.sparse matrix (or 2-D numpy array) of shape "
            f"(inner cells × published cells), got {type(X).__name__}"
        )
    A.sum_duplicates()
    A.eliminate_zeros()
    if not np.isfinite(A.data).all():
        raise InputError(f"{what} has {int((~np.isfinite(A.data)).sum())} NaN/inf entries")
    if nonneg and (A.data < 0).any():
        raise InputError(
            f"{what} has {int((A.data < 0).sum())} negative entries; this method needs a "
            "non-negative (0/1) dummy matrix of inner cells × published cells"
        )
    return A
