"""Post-processing of protected tables: additivity restoration and expected inner frequencies.

Everything here works on the relation ``z = X.T @ y`` (docs/methods.md §0, §4): ``X`` is a sparse
matrix of shape (inner cells × published cells), usually 0/1 (a dummy or model matrix), ``y``
the inner frequencies and ``z`` the published values. Arrays and ``scipy.sparse`` matrices go
in and NumPy arrays come out; nothing here knows of DuckDB (docs/design.md).

- :func:`min_norm` — Method A of Langsrud (2019): the minimum-norm least-squares ``(Xᵀ)⁺ z``.
- :func:`nnls` — Methods B and C of Langsrud (2019): non-negative least squares with a small
  ridge, optionally weighted per published cell.
- :func:`lsfit_nonneg` — additivity restoration (SSBtools ``LSfitNonNeg``): project z onto the
  column space of Xᵀ, set negative fits to zero, refit, repeat.
- :func:`ipf` — iterative proportional fitting (Deming & Stephan 1940; SSBtools ``Mipf``):
  expected inner frequencies, the log-linear fit for which z is sufficient (Langsrud & Lupp 2022).
- :func:`integerise` — unbiased random rounding of fitted inner frequencies.

Typical pipeline for a CKM table (docs/methods.md §4)::

    fit = lsfit_nonneg(X, z_perturbed)     # additive, non-negative published values
    res = ipf(X, fit.z)                    # expected inner frequencies
    y_int = integerise(res.y, seed=seed)   # releasable integer inner table
"""

from protab.errors import ConvergenceError
from protab.fit.integerising import integerise
from protab.fit.lsq import LSFit, lsfit_nonneg, min_norm, nnls
from protab.fit.proportional import IPFResult, column_blocks, ipf

__all__ = [
    "ConvergenceError",
    "IPFResult",
    "LSFit",
    "column_blocks",
    "integerise",
    "ipf",
    "lsfit_nonneg",
    "min_norm",
    "nnls",
]
