"""Post-processing of protected tables: additivity restoration and expected inner frequencies.

Everything here works on the relation ``z = X.T @ y`` (METHODS.md §0, §4): ``X`` is a sparse
matrix of shape (inner cells × published cells), usually 0/1 (a dummy or model matrix), ``y``
the inner frequencies and ``z`` the published values. Arrays and ``scipy.sparse`` matrices go
in and NumPy arrays come out; nothing here knows of DuckDB (DESIGN.md).

- :func:`min_norm` — Method A of Langsrud (2019): the minimum-norm least-squares ``(Xᵀ)⁺ z``.
- :func:`nnls` — Methods B and C of Langsrud (2019): non-negative least squares with a small
  ridge, optionally weighted per published cell.
- :func:`lsfit_nonneg` — additivity restoration (SSBtools ``LSfitNonNeg``): project z onto the
  column space of Xᵀ, set negative fits to zero, refit, repeat.
- :func:`ipf` — iterative proportional fitting (Deming & Stephan 1940; SSBtools ``Mipf``):
  expected inner frequencies, the log-linear fit for which z is sufficient (Langsrud & Lupp 2022).
- :func:`integerise` — unbiased random rounding of fitted inner frequencies.

Typical pipeline for a CKM table (METHODS.md §4)::

    fit = lsfit_nonneg(X, z_perturbed)     # additive, non-negative published values
    res = ipf(X, fit.z)                    # expected inner frequencies
    y_int = integerise(res.y, seed=seed)   # releasable integer inner table
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import lsq_linear
from scipy.optimize import nnls as _dense_nnls
from scipy.sparse.linalg import lsmr, lsqr

from protab.errors import ConvergenceError, ConvergenceWarning, InputError, show_values

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

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.int64]
Solver = Literal["auto", "dense", "lsqr", "lsmr"]

# Dense solvers (exact SVD / active set) are used by solver="auto" below these sizes.
_DENSE_MAX_ELEMENTS = 1_000_000
_DENSE_MAX_DIM = 1_500
_DENSE_NNLS_MAX_INNER = 400
# ipf's support LP (HiGHS) runs by default up to this many free inner cells (~10 s there).
_LP_MAX_INNER = 10_000


# --------------------------------------------------------------------------------------------
# Result types


@dataclass(frozen=True, eq=False)
class LSFit:
    """Result of :func:`lsfit_nonneg`.

    ``z``: fitted published values, exactly ``X.T @ y`` for the returned ``y`` (additive) and
    ≥ 0 (when ``limit`` is not None). ``y``: the minimum-norm inner vector of the last, reduced
    least-squares problem, 0 on every inner cell under a zeroed published cell. ``z`` is unique;
    ``y`` is not when X has more inner cells than independent published cells, and it may have
    negative entries (``y_nonnegative`` says whether it has, to a tolerance of 1e-9·max|z|).
    ``iterations``: number of least-squares fits. ``zeroed``: published cells forced to zero
    (fitted below ``limit``, or all of whose inner cells were forced to zero).
    """

    z: FloatArray
    y: FloatArray
    iterations: int
    zeroed: BoolArray
    y_nonnegative: bool


@dataclass(frozen=True, eq=False)
class IPFResult:
    """Result of :func:`ipf`.

    ``y``: fitted inner frequencies (≥ 0). ``converged``: every published cell met
    ``|Xᵀy − z| ≤ tol·max(1, |z|)``. ``iterations``: sweeps run. ``max_deviation``:
    ``max |Xᵀy − z|`` over all published cells. ``history``: that maximum after each sweep (on
    the reduced problem). ``status``: ``"converged"``; ``"max_iter"`` (sweep limit reached);
    ``"stalled"`` (the deviation stopped changing above the tolerance: the targets are very
    likely inconsistent); ``"inconsistent"`` (proved: the support LP is infeasible, or the exact
    reductions contradict each other). ``fixed``: inner cells fixed exactly rather than fitted
    (zeros under zero targets or a zero start, cells alone under a published cell, and cells the
    support LP shows are 0 in every solution).
    """

    y: FloatArray
    converged: bool
    iterations: int
    max_deviation: float
    history: list[float] = field(default_factory=list)
    status: str = "converged"
    fixed: BoolArray | None = None


# --------------------------------------------------------------------------------------------
# Validation


def _as_csc(X: object, *, nonneg: bool = False, what: str = "X") -> sp.csc_array:
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


def _vector(
    v: ArrayLike, n: int, name: str, kind: str, *, X_shape: tuple[int, int] | None = None
) -> FloatArray:
    """A finite float vector of length n, or an InputError naming what is wrong."""
    a = np.asarray(v, dtype=np.float64)
    if a.ndim == 2 and 1 in a.shape:
        a = a.reshape(-1)
    if a.ndim != 1:
        raise InputError(f"{name} must be a 1-D vector, got an array of shape {a.shape}")
    if a.size != n:
        hint = ""
        if X_shape is not None and kind == "published" and a.size == X_shape[0]:
            hint = " (is X transposed? it must be inner cells × published cells, z = X.T @ y)"
        raise InputError(
            f"{name} has {a.size} values but X has {n} {kind} cells "
            f"(X has shape {X_shape or '?'}){hint}"
        )
    bad_nan = np.flatnonzero(np.isnan(a))
    if bad_nan.size:
        raise InputError(
            f"{name} has {bad_nan.size} NaN values at {kind} cells {show_values(bad_nan.tolist())}"
        )
    bad_inf = np.flatnonzero(np.isinf(a))
    if bad_inf.size:
        raise InputError(
            f"{name} has {bad_inf.size} infinite values at {kind} cells "
            f"{show_values(bad_inf.tolist())}"
        )
    return a


def _nonneg(a: FloatArray, name: str, kind: str) -> None:
    bad = np.flatnonzero(a < 0)
    if bad.size:
        raise InputError(
            f"{name} has {bad.size} negative values at {kind} cells {show_values(bad.tolist())} "
            f"(e.g. {a[bad[0]]:g}); it must be ≥ 0"
        )


# --------------------------------------------------------------------------------------------
# Least-squares kernels


def _use_dense(A: sp.sparray, solver: Solver) -> bool:
    if solver == "dense":
        return True
    if solver in ("lsqr", "lsmr"):
        return False
    if solver != "auto":
        raise InputError(f"solver must be 'auto', 'dense', 'lsqr' or 'lsmr', got {solver!r}")
    m, n = A.shape
    return m * n <= _DENSE_MAX_ELEMENTS and min(m, n) <= _DENSE_MAX_DIM


def _lstsq_min_norm(
    A: sp.sparray,
    b: FloatArray,
    *,
    solver: Solver,
    atol: float,
    btol: float,
    maxiter: int | None,
    x0: FloatArray | None = None,
) -> FloatArray:
    """Minimum-norm solution of min ||A x − b|| (A is published × inner, i.e. Xᵀ)."""
    m, n = A.shape
    if n == 0:
        return np.zeros(0)
    if m == 0 or A.nnz == 0:
        return np.zeros(n)
    if _use_dense(A, solver):
        x, *_ = np.linalg.lstsq(A.toarray(), b, rcond=None)
        return np.asarray(x, dtype=np.float64)
    if solver == "lsmr":
        out = lsmr(A, b, atol=atol, btol=btol, maxiter=maxiter, x0=x0)
        x, istop, itn = out[0], out[1], out[2]
        limit_hit = istop == 7
    else:
        out = lsqr(A, b, atol=atol, btol=btol, iter_lim=maxiter, x0=x0)
        x, istop, itn = out[0], out[1], out[2]
        limit_hit = istop == 7
    if limit_hit:
        warnings.warn(
            ConvergenceWarning(
                f"sparse least squares stopped at its iteration limit ({itn} iterations) before "
                f"reaching atol={atol:g}, btol={btol:g}; raise maxiter"
            ),
            stacklevel=3,
        )
    return np.asarray(x, dtype=np.float64)


def min_norm(
    X: sp.sparray | sp.spmatrix | np.ndarray,
    z: ArrayLike,
    *,
    atol: float = 1e-12,
    btol: float = 1e-12,
    maxiter: int | None = None,
    solver: Solver = "auto",
) -> FloatArray:
    """Method A of Langsrud (2019): ``y = (Xᵀ)⁺ z``, the minimum-norm least-squares solution.

    Small problems use a dense SVD solve (``numpy.linalg.lstsq``, exact); larger ones LSQR on
    ``A = Xᵀ`` started from 0, whose iterates stay in the row space of A and so converge to the
    minimum-norm solution (Paige & Saunders 1982). ``solver`` forces "dense", "lsqr" or "lsmr".
    A ``ConvergenceWarning`` is issued if LSQR/LSMR hits ``maxiter``.
    """
    Xc = _as_csc(X)
    zz = _vector(z, Xc.shape[1], "z", "published", X_shape=Xc.shape)
    A = sp.csr_array(Xc.T)
    return _lstsq_min_norm(A, zz, solver=solver, atol=atol, btol=btol, maxiter=maxiter)


def nnls(
    X: sp.sparray | sp.spmatrix | np.ndarray,
    z: ArrayLike,
    *,
    ridge: float = 1e-4,
    weights: ArrayLike | None = None,
    solver: Literal["auto", "active-set", "newton", "trf"] = "auto",
    tol: float = 1e-15,
    max_iter: int | None = None,
) -> FloatArray:
    """Methods B and C of Langsrud (2019): non-negative, ridge-stabilised least squares.

    Minimises ``||W^½ (Xᵀy − z)||² + (ridge·s)² ||y||²`` subject to ``y ≥ 0``, where W holds
    ``weights`` per published cell (Method C: give exact margins a large weight, e.g. 1000;
    default all 1, Method B) and ``s = sqrt(mean_r Σ_c w_c x_rc²)`` is the root mean square
    column norm of ``W^½ Xᵀ``. So the penalty adds ``ridge²`` times the average diagonal of the
    normal equations: ``ridge`` is dimensionless and invariant to rescaling z (the solution
    scales with z) or all weights, and ``1e-4`` only picks, among (near-)optimal non-negative
    solutions, the one of smallest norm. ``ridge=0`` is plain NNLS (y then may be non-unique).

    Solvers: "active-set" is the exact Lawson–Hanson NNLS (``scipy.optimize.nnls``) on the
    dense stacked system ``[W^½Xᵀ; ridge·s·I] y ≈ [W^½z; 0]`` ("auto" below 400 inner cells);
    "newton" (otherwise) is sparse: projected-gradient Cauchy steps to find the face and exact
    Newton steps on it (ridge least squares by LSQR), as in TRON (Lin & Moré 1999), stopping when
    a face with a feasible minimiser repeats (KKT up to rounding) or the projected gradient,
    scaled by s², is below ``tol``·max|z|; "trf" is
    ``scipy.optimize.lsq_linear(method="trf")`` on the sparse stack (its fitted values are
    accurate, but y can be off along directions that only the tiny ridge determines; slow).
    A ``ConvergenceWarning`` says when ``max_iter`` stopped a sparse solver first.
    """
    Xc = _as_csc(X)
    n_inner, n_pub = Xc.shape
    zz = _vector(z, n_pub, "z", "published", X_shape=Xc.shape)
    if not np.isfinite(ridge) or ridge < 0:
        raise InputError(f"ridge must be a finite number ≥ 0, got {ridge!r}")
    w = np.ones(n_pub) if weights is None else _vector(weights, n_pub, "weights", "published")
    _nonneg(w, "weights", "published")
    if n_inner == 0:
        return np.zeros(0)
    sw = np.sqrt(w)
    A = sp.csc_array(sp.diags_array(sw) @ sp.csr_array(Xc.T))
    s2 = float(np.asarray(A.power(2).sum())) / n_inner
    lam = ridge * (np.sqrt(s2) if s2 > 0 else 1.0)
    b = sw * zz
    if solver == "auto":
        solver = "active-set" if n_inner <= _DENSE_NNLS_MAX_INNER else "newton"
    if solver == "active-set":
        stacked = np.vstack([A.toarray(), lam * np.eye(n_inner)])
        y, _ = _dense_nnls(stacked, np.concatenate([b, np.zeros(n_inner)]), maxiter=max_iter)
        return np.asarray(y, dtype=np.float64)
    if solver == "newton":
        return _newton_nnls(A, b, lam, s2 if s2 > 0 else 1.0, tol=tol, max_iter=max_iter or 500)
    if solver != "trf":
        raise InputError(
            f"solver must be 'auto', 'active-set', 'newton' or 'trf', got {solver!r}"
        )
    stacked_sp = sp.csr_array(sp.vstack([A, lam * sp.identity(n_inner, format="csr")]))
    res = lsq_linear(
        stacked_sp,
        np.concatenate([b, np.zeros(n_inner)]),
        bounds=(0.0, np.inf),
        method="trf",
        tol=1e-13,
        lsq_solver="lsmr",
        lsmr_tol=1e-12,  # "auto" is too loose to resolve the flat ridge directions
        max_iter=max_iter or 1000,
    )
    if res.status == 0:
        warnings.warn(
            ConvergenceWarning(
                f"nnls (trf) stopped at its iteration limit ({res.nit} iterations), "
                f"cost {res.cost:g}; raise max_iter"
            ),
            stacklevel=2,
        )
    return np.maximum(np.asarray(res.x, dtype=np.float64), 0.0)


def _ridge_ls(
    A: sp.csc_array, rhs: FloatArray, lam: float, F: BoolArray, *, tol: float = 1e-12
) -> FloatArray:
    """argmin_p ||A_F p − rhs||² + lam²||p||² (p = 0 off F), by LSQR with ``damp=lam``."""
    n = A.shape[1]
    out = np.zeros(n)
    idx = np.flatnonzero(F)
    if idx.size:
        out[idx] = lsqr(A[:, idx], rhs, damp=lam, atol=tol, btol=tol, iter_lim=20 * n + 100)[0]
    return out


def _newton_nnls(
    A: sp.csc_array, b: FloatArray, lam: float, h: float, *, tol: float, max_iter: int
) -> FloatArray:
    """min ½||A x − b||² + ½lam²||x||², x ≥ 0: Cauchy point + subspace Newton (TRON-like).

    Each iteration: (1) a projected-gradient step with exact step length and an Armijo search
    along the projected path gives the Cauchy point x_c, whose positive cells are the face F;
    (2) the exact minimiser on F (ridge least squares, LSQR) gives the Newton direction, again
    searched along the projected path. Decreases are computed from the step itself, not as
    differences of large objective values. It stops when a face whose minimiser is feasible
    comes back and that minimiser meets the KKT conditions to rounding (gradient ≥ 0 on the
    zero cells; the Cauchy step then only toggles variables at rounding level), or when the
    projected gradient scaled by the mean curvature ``h`` is below ``tol``·max|b|.
    """
    mu = lam**2
    At = sp.csr_array(A.T)
    bscale = max(1.0, float(np.max(np.abs(b), initial=0.0)))

    def search(x: FloatArray, d: FloatArray, g: FloatArray, a: float) -> tuple[FloatArray, bool]:
        """Armijo search along the projected path max(x + a·d, 0); says if a = 1 was taken."""
        while a > 1e-14:
            step = np.maximum(x + a * d, 0.0) - x
            gs = float(g @ step)
            As = np.asarray(A @ step)
            if gs + 0.5 * float(As @ As) + 0.5 * mu * float(step @ step) <= 1e-4 * gs:
                return np.maximum(x + step, 0.0), a == 1.0
            a *= 0.5
        return x, False

    x = np.maximum(_ridge_ls(A, b, lam, np.ones(A.shape[1], dtype=bool), tol=1e-10), 0.0)
    wk = np.inf
    seen: set[bytes] = set()
    for _ in range(max_iter):
        g = np.asarray(At @ (np.asarray(A @ x) - b)) + mu * x
        wk = float(np.max(np.abs(x - np.maximum(x - g / h, 0.0)), initial=0.0))
        if wk <= tol * bscale:
            return x
        d = -g
        d[(x <= 0) & (g > 0)] = 0.0
        Ad = np.asarray(A @ d)
        curv = float(Ad @ Ad) + mu * float(d @ d)
        xc, _ = search(x, d, g, float(d @ d) / curv if curv > 0 else 1.0)
        F = xc > 0
        gc = np.asarray(At @ (np.asarray(A @ xc) - b)) + mu * xc
        xf = _ridge_ls(A, b, lam, F)  # the minimiser on the face F
        if float(np.min(xf[F], initial=0.0)) >= -1e-12 * bscale:
            key = np.packbits(F).tobytes()
            if key in seen:  # a feasible face came back: accept its minimiser if KKT holds
                xf = np.maximum(xf, 0.0)
                gf = np.asarray(At @ (np.asarray(A @ xf) - b)) + mu * xf
                if float(np.min(gf[~F], initial=0.0)) >= -1e-10 * h * bscale:
                    return xf
            seen.add(key)
        x, _ = search(xc, np.where(F, xf - xc, 0.0), gc, 1.0)
    warnings.warn(
        ConvergenceWarning(
            f"nnls (newton) stopped after {max_iter} iterations with scaled projected "
            f"gradient {wk:.3g} (tolerance {tol * bscale:.3g}); the fit is feasible but not "
            "optimal — raise max_iter"
        ),
        stacklevel=3,
    )
    return x


# --------------------------------------------------------------------------------------------
# Exact reductions (SSBtools Reduce0exact)


def _pattern(X: sp.csc_array) -> sp.csc_array:
    P = X.copy()
    P.data = np.ones_like(P.data)
    return P


def _reduce_zeros(
    X: sp.sparray, zero_cols: BoolArray, zero_rows: BoolArray | None = None
) -> tuple[BoolArray, BoolArray]:
    """The zero step of Reduce0exact: published cells known to be 0 force their inner cells to 0.

    ``X`` is non-negative (inner × published); ``zero_cols`` marks published cells whose value is
    exactly 0, ``zero_rows`` inner cells already known to be 0. Returns ``(rows_zero,
    cols_removed)``: the inner cells forced to 0, and the published cells to drop from the
    reduced problem (the zero ones, plus those left with no free inner cell).
    """
    zc = np.asarray(zero_cols, dtype=bool)
    rows_zero = np.asarray(X @ zc.astype(np.float64)) > 0
    if zero_rows is not None:
        rows_zero |= np.asarray(zero_rows, dtype=bool)
    free_count = np.asarray(X.T @ (~rows_zero).astype(np.float64))
    cols_removed = zc | (free_count <= 0)
    return rows_zero, cols_removed


# --------------------------------------------------------------------------------------------
# Additivity restoration


def lsfit_nonneg(
    X: sp.sparray | sp.spmatrix | np.ndarray,
    z: ArrayLike,
    *,
    weights: ArrayLike | None = None,
    limit: float | None = 1e-10,
    exact_zeros: bool = False,
    solver: Solver = "auto",
    atol: float = 1e-12,
    btol: float = 1e-12,
    maxiter: int | None = None,
) -> LSFit:
    """Restore additivity of perturbed published values (SSBtools ``LSfitNonNeg``; Langsrud 2019).

    Project z onto the column space of ``Xᵀ`` by (weighted) least squares; the fitted values
    ``Xᵀŷ`` are unique even when ŷ is not. Every fitted published value below ``limit`` is set
    to 0, which forces every inner cell under it to 0 (the zero step of Reduce0exact); those
    inner and published cells are removed and the rest refitted; repeat until no new value falls
    below ``limit``. ``limit=None`` gives the plain projection (no non-negativity).
    ``exact_zeros=True`` treats published zeros of z as exact from the start (e.g. when the
    perturbation cannot turn a positive count into 0). ``weights`` (≥ 0, per published cell)
    give weighted least squares. Each fit is the minimum-norm least-squares solution: a dense
    SVD solve for small problems, LSQR (tolerances ``atol``, ``btol``) otherwise; X must be ≥ 0.
    With an additive z (``z = Xᵀy0``, y0 ≥ 0) the result is z itself.
    """
    Xc = _as_csc(X, nonneg=True)
    n_inner, n_pub = Xc.shape
    zz = _vector(z, n_pub, "z", "published", X_shape=Xc.shape)
    w = None
    if weights is not None:
        w = _vector(weights, n_pub, "weights", "published")
        _nonneg(w, "weights", "published")
    P = _pattern(Xc)
    Xt = sp.csr_array(Xc.T)

    zeroed = (zz == 0) if exact_zeros else np.zeros(n_pub, dtype=bool)
    y = np.zeros(n_inner)
    iterations = 0
    while True:
        rows_zero, cols_removed = _reduce_zeros(P, zeroed)
        zeroed = zeroed | cols_removed  # cells left with no free inner cell are 0 as well
        rows = np.flatnonzero(~rows_zero)
        cols = np.flatnonzero(~cols_removed)
        A = sp.csr_array(Xt[cols][:, rows])  # published (kept) × inner (kept)
        b = zz[cols]
        if w is not None:
            sw = np.sqrt(w[cols])
            A = sp.csr_array(sp.diags_array(sw) @ A)
            b = sw * b
        y = np.zeros(n_inner)
        y[rows] = _lstsq_min_norm(A, b, solver=solver, atol=atol, btol=btol, maxiter=maxiter)
        iterations += 1
        z_fit = np.asarray(Xt @ y)
        if limit is None:
            break
        new = (z_fit < limit) & ~zeroed
        if not new.any():
            break
        zeroed = zeroed | new
    scale = max(1.0, float(np.max(np.abs(zz), initial=0.0)))
    y_nonneg = bool(np.min(y, initial=0.0) >= -1e-9 * scale)
    return LSFit(z=z_fit, y=y, iterations=iterations, zeroed=zeroed, y_nonnegative=y_nonneg)


# --------------------------------------------------------------------------------------------
# Iterative proportional fitting


def column_blocks(X: sp.sparray | sp.spmatrix | np.ndarray, *, max_passes: int = 64) -> IntArray:
    """Greedy partition of X's columns into blocks of disjoint columns (no shared inner cell).

    Within a block every inner cell is under at most one published cell, so IPF can update the
    whole block at once. Each block is grown in vectorised passes: an available column joins
    when it has the lowest index among the available columns in each of its rows; columns that
    touch a row already covered stop being available. For a model matrix whose columns come
    term by term (as ModelMatrix/FormulaSums order them) each block is one term. The partition
    depends only on the columns' row sets and order, not on the order of the rows.
    """
    Xc = _as_csc(X)
    n_inner, n_pub = Xc.shape
    P = sp.csr_array(_pattern(Xc))
    P.sort_indices()
    rows = np.repeat(np.arange(n_inner), np.diff(P.indptr))
    cols = P.indices.astype(np.int64)
    colcount = np.bincount(cols, minlength=n_pub)
    block = np.full(n_pub, -1, dtype=np.int64)
    block[colcount == 0] = 0
    unassigned = block < 0
    b = 0
    while unassigned.any():
        avail = unassigned.copy()
        for _ in range(max_passes):
            m = avail[cols]
            r_m, c_m = rows[m], cols[m]
            if r_m.size == 0:
                break
            first = np.ones(r_m.size, dtype=bool)
            first[1:] = r_m[1:] != r_m[:-1]  # entries are sorted by (row, column)
            wins = np.bincount(c_m[first], minlength=n_pub)
            sel = avail & (wins == colcount)
            block[sel] = b
            unassigned &= ~sel
            covered = np.zeros(n_inner, dtype=bool)
            covered[r_m[sel[c_m]]] = True
            touching = np.bincount(c_m[covered[r_m]], minlength=n_pub) > 0
            avail &= ~sel & ~touching
            if not avail.any():
                break
        b += 1
    return block


def _check_blocks(P: sp.csr_array, blocks: ArrayLike, n_pub: int) -> IntArray:
    bl = np.asarray(blocks)
    if bl.shape != (n_pub,) or not np.issubdtype(bl.dtype, np.integer):
        raise InputError(
            f"blocks must be an integer array with one block number per published cell "
            f"({n_pub}), got dtype {bl.dtype} and shape {bl.shape}"
        )
    if n_pub and bl.min() < 0:
        raise InputError("blocks must be ≥ 0")
    bl = bl.astype(np.int64)
    n_inner = P.shape[0]
    rows = np.repeat(np.arange(n_inner, dtype=np.int64), np.diff(P.indptr))
    nb = int(bl.max(initial=-1)) + 1
    key = np.sort(rows * nb + bl[P.indices])
    dup = np.flatnonzero(key[1:] == key[:-1])
    if dup.size:
        k = key[dup[0]]
        r, blk = divmod(int(k), nb)
        raise InputError(
            f"blocks are not disjoint: inner cell {r} is under two published cells of block {blk} "
            f"({dup.size} such clashes); use column_blocks(X) or omit blocks"
        )
    return bl


def _reduce_singletons(
    X: sp.csc_array,
    Xt: sp.csr_array,
    z: FloatArray,
    rows_free: BoolArray,
    cols_active: BoolArray,
    y_fixed: FloatArray,
    rtol: float,
) -> None:
    """Reduce0exact with reduceByColSums, in place: fix inner cells alone under a published cell.

    Repeats: a published cell with one free inner cell fixes that cell to its residual target;
    its contribution is subtracted from every published cell; residual targets that become 0
    force their free inner cells to 0 (zero step). Negative residuals (inconsistent targets) are
    treated as 0; the final deviation on the full problem reveals them.
    """
    n_inner = X.shape[0]
    idx = np.arange(n_inner, dtype=np.float64)
    scale = np.maximum(1.0, np.abs(z))
    P = _pattern(X)
    Pt = sp.csr_array(P.T)
    while True:
        free_f = rows_free.astype(np.float64)
        cnt = np.asarray(Pt @ free_f)
        single = cols_active & (cnt == 1)
        if not single.any():
            break
        r_of = np.rint(np.asarray(Pt @ (free_f * idx))[single]).astype(np.int64)
        c_of = np.flatnonzero(single)
        resid = z - np.asarray(Xt @ y_fixed)
        xval = np.asarray(Xt @ free_f)[c_of]  # the entry x_rc of each singleton column
        val = np.maximum(resid[c_of] / xval, 0.0)
        y_fixed[r_of] = val
        rows_free[r_of] = False
        cols_active[c_of] = False
        resid = z - np.asarray(Xt @ y_fixed)
        free_f = rows_free.astype(np.float64)
        cnt = np.asarray(Pt @ free_f)
        gone = cols_active & (cnt == 0)
        cols_active[gone] = False
        zero_now = cols_active & (resid <= rtol * scale)
        if zero_now.any():
            rz, cr = _reduce_zeros(P, zero_now, ~rows_free)
            rows_free &= ~rz  # newly forced zeros keep y_fixed = 0
            cols_active &= ~cr


def _lp_support(Xr: sp.csc_array, zr: FloatArray) -> BoolArray | None:
    """Inner cells that are positive in some y ≥ 0 with Xᵀy = z (facial reduction by one LP).

    Cells outside this support are 0 in every solution; IPF only approaches them slowly (the
    log-linear fit lies on the boundary of the model), so fixing them to 0 restores its fast
    convergence. The LP (HiGHS) is homogenised so that one solve finds the whole support:
    maximise Σ t_i subject to Xᵀy = s·z, 0 ≤ t_i ≤ min(1, y_i), s ≥ 1. Any y ≥ 0 meeting z can
    be scaled up by s until its positive cells are ≥ 1, so at the optimum t_i = 1 exactly on
    the support and 0 elsewhere (cf. Fienberg & Rinaldo 2012 on extended log-linear MLEs).
    Returns None when the LP is infeasible, which proves that no y ≥ 0 has Xᵀy = z.
    """
    from scipy.optimize import linprog

    n, m = Xr.shape
    A_eq = sp.hstack(
        [sp.csr_array(Xr.T), sp.csr_array((m, n)), sp.csr_array(-zr.reshape(-1, 1))],
        format="csr",
    )
    A_ub = sp.hstack(
        [-sp.identity(n, format="csr"), sp.identity(n, format="csr"), sp.csr_array((n, 1))],
        format="csr",
    )
    c = np.concatenate([np.zeros(n), -np.ones(n), [0.0]])
    lo = np.zeros(2 * n + 1)
    lo[-1] = 1.0
    hi = np.concatenate([np.full(n, np.inf), np.ones(n), [np.inf]])
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(n), A_eq=A_eq, b_eq=np.zeros(m),
                  bounds=np.column_stack([lo, hi]), method="highs")
    if res.status == 2:
        return None
    if res.status != 0 or res.x is None:
        return np.ones(n, dtype=bool)  # undecided: keep every cell
    return np.asarray(res.x[n : 2 * n] > 0.5)


def ipf(
    X: sp.sparray | sp.spmatrix | np.ndarray,
    z: ArrayLike,
    *,
    start: ArrayLike | None = None,
    tol: float = 1e-10,
    max_iter: int = 1000,
    blocks: ArrayLike | None = None,
    reduce_singletons: bool = True,
    stall_tol: float = 1e-13,
    exact_support: bool | None = None,
    lp_after: int = 50,
    strict: bool = False,
) -> IPFResult:
    """Iterative proportional fitting on a sparse X (Deming & Stephan 1940; SSBtools ``Mipf``).

    Starts from ones (or ``start`` ≥ 0) and scales the inner cells under each published cell so
    that they sum to its target, sweeping until every published cell meets
    ``|Xᵀy − z| ≤ tol·max(1, |z|)``. The result is the fit of the log-linear model for which z
    is sufficient (expected inner frequencies; with ``start`` a seed table, its I-projection).
    Targets may be non-integer; a 0/0 update is skipped. First the exact reductions of
    Reduce0exact: zero targets (and zero ``start`` values) fix their inner cells to 0, and, with
    ``reduce_singletons``, a published cell with a single free inner cell fixes it. The updates
    are vectorised per block of disjoint columns (``blocks``, one integer per published cell;
    default :func:`column_blocks`): for each block ``y_r *= z_c / (Xᵀy)_c`` for the one column c
    of the block over row r. X must be ≥ 0 (0/1 in the usual case); inner cells under no
    published cell keep their start value.

    When consistent targets can only be met with inner cells that no zero target forces to 0
    (the log-linear fit lies on the boundary, common in sparse tables), IPF converges only
    slowly. With ``exact_support`` (default: when at most 10,000 inner cells remain free) ipf
    then solves one LP after ``lp_after`` unconverged sweeps, or when the deviation stalls, to
    find the cells that are 0 in every solution (:func:`_lp_support`), fixes them and goes on.

    If the targets are inconsistent (no y ≥ 0 with Xᵀy = z exists, e.g. a margin that is not the
    sum of its children) IPF cannot converge. ipf says so with a ``ConvergenceWarning`` naming
    the max deviation and returns ``converged=False`` with the history: status "inconsistent"
    when the LP proves it, "stalled" when the relative deviation changes by less than
    ``stall_tol`` between sweeps, "max_iter" after ``max_iter`` sweeps. ``strict=True`` raises
    :class:`ConvergenceError` (a ``ProtabError``) instead of warning.
    """
    Xc = _as_csc(X, nonneg=True)
    n_inner, n_pub = Xc.shape
    zz = _vector(z, n_pub, "z", "published", X_shape=Xc.shape)
    _nonneg(zz, "z (ipf targets)", "published")
    if start is None:
        y0 = np.ones(n_inner)
    else:
        y0 = _vector(start, n_inner, "start", "inner")
        _nonneg(y0, "start", "inner")
    if not (tol > 0 and np.isfinite(tol)):
        raise InputError(f"tol must be a positive number, got {tol!r}")
    if max_iter < 0:
        raise InputError(f"max_iter must be ≥ 0, got {max_iter!r}")
    Xt = sp.csr_array(Xc.T)
    P = _pattern(Xc)
    user_blocks = None
    if blocks is not None:
        Pr = sp.csr_array(P)
        Pr.sort_indices()
        user_blocks = _check_blocks(Pr, blocks, n_pub)

    # exact reductions
    rows_zero, cols_removed = _reduce_zeros(P, zz == 0, y0 == 0)
    rows_free = ~rows_zero
    cols_active = ~cols_removed
    y_fixed = np.zeros(n_inner)
    if reduce_singletons:
        _reduce_singletons(Xc, Xt, zz, rows_free, cols_active, y_fixed, rtol=tol)
    resid_z = zz - np.asarray(Xt @ y_fixed)

    rows = np.flatnonzero(rows_free)
    cols = np.flatnonzero(cols_active)
    Xr = sp.csc_array(Xc[rows][:, cols])
    Xrt = sp.csr_array(Xr.T)
    zr = resid_z[cols]
    scale_r = np.maximum(1.0, np.abs(zz[cols]))
    yr = y0[rows].copy()

    if user_blocks is not None:
        bl = user_blocks[cols]
    else:
        bl = column_blocks(Xr) if cols.size else np.zeros(0, dtype=np.int64)
    # per block: the entries (row, local column, value) of its columns
    Xr_coo = sp.coo_array(Xr)
    e_row = Xr_coo.row.astype(np.int64)
    e_col = Xr_coo.col.astype(np.int64)
    e_val = Xr_coo.data
    unit = bool(np.all(e_val == 1.0))
    order = np.argsort(bl[e_col], kind="stable")
    e_blk = bl[e_col][order]
    splits = np.flatnonzero(np.diff(e_blk)) + 1
    local = np.zeros(cols.size, dtype=np.int64)
    plan: list[tuple[IntArray, IntArray, FloatArray | None, FloatArray]] = []
    for part in np.split(order, splits) if order.size else []:
        bcols = np.unique(e_col[part])
        local[bcols] = np.arange(bcols.size)
        plan.append(
            (
                e_row[part],
                local[e_col[part]],
                None if unit else e_val[part],
                zr[bcols],
            )
        )

    history: list[float] = []
    status = "converged"
    it = 0
    lp_zero = np.zeros(rows.size, dtype=bool)
    lp_done = False
    if exact_support is None:
        exact_support = rows.size <= _LP_MAX_INNER
    prev_rel = np.inf
    if cols.size:
        dev = np.asarray(Xrt @ yr) - zr
        rel = float(np.max(np.abs(dev) / scale_r))
        if rel > tol:
            status = "max_iter"
            for it in range(1, max_iter + 1):
                for r_b, c_b, v_b, z_b in plan:
                    yb = yr[r_b]
                    s = np.bincount(c_b, weights=yb if v_b is None else yb * v_b,
                                    minlength=z_b.size)
                    with np.errstate(divide="ignore", invalid="ignore"):
                        f = z_b / s
                    f[~np.isfinite(f)] = 1.0  # 0/0 (or z/0, which cannot be met): skip
                    yr[r_b] = yb * f[c_b]
                dev = np.asarray(Xrt @ yr) - zr
                history.append(float(np.max(np.abs(dev))))
                rel = float(np.max(np.abs(dev) / scale_r))
                if rel <= tol:
                    status = "converged"
                    break
                stalled = abs(prev_rel - rel) <= stall_tol
                if exact_support and not lp_done and (it >= lp_after or stalled):
                    lp_done = True
                    support = _lp_support(Xr, zr)
                    if support is None:
                        status = "inconsistent"
                        break
                    lp_zero = ~support
                    yr[lp_zero] = 0.0
                    prev_rel = np.inf
                    continue
                if stalled:
                    status = "stalled"
                    break
                prev_rel = rel

    y = y0.copy()
    y[rows_zero] = 0.0
    fixed = ~rows_free
    y[fixed & ~rows_zero] = y_fixed[fixed & ~rows_zero]
    y[rows] = yr
    fixed[rows[lp_zero]] = True
    full_dev = np.asarray(Xt @ y) - zz
    abs_dev = np.abs(full_dev)
    max_dev = float(abs_dev.max(initial=0.0))
    rel_full = abs_dev / np.maximum(1.0, np.abs(zz))
    converged = bool(rel_full.max(initial=0.0) <= tol)
    if not converged and status == "converged":
        status = "inconsistent"  # the IPF part met its targets: the exact reductions clash
    if not converged:
        worst = int(np.argmax(rel_full))
        msg = (
            f"ipf did not converge ({status}, {it} sweeps): max |Xᵀy − z| = {max_dev:.6g} "
            f"(published cell {worst}: fitted {zz[worst] + full_dev[worst]:.6g}, "
            f"target {zz[worst]:.6g}); "
            f"{int((rel_full > tol).sum())} published cells miss tol={tol:g}. "
            + {
                "inconsistent": "The targets are inconsistent: no y ≥ 0 has Xᵀy = z (is "
                "every margin the sum of its children? restore additivity with lsfit_nonneg, "
                "or fit with nnls, first).",
                "stalled": "The targets look inconsistent: the deviation stopped changing (is "
                "every margin the sum of its children? restore additivity first).",
            }.get(status, "Raise max_iter, or check that the targets are consistent.")
        )
        if strict:
            raise ConvergenceError(msg)
        warnings.warn(ConvergenceWarning(msg), stacklevel=2)
    return IPFResult(
        y=y,
        converged=converged,
        iterations=it,
        max_deviation=max_dev,
        history=history,
        status=status,
        fixed=fixed,
    )


# --------------------------------------------------------------------------------------------
# Integerising


def integerise(
    y: ArrayLike,
    method: Literal["uniform", "multinomial"] = "uniform",
    *,
    seed: int | np.random.SeedSequence | None,
) -> NDArray[np.int64]:
    """Random rounding of fitted inner frequencies to integers (Langsrud 2019; METHODS.md §4).

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
