"""Least squares: Method A (min_norm), Methods B and C (nnls), additivity restoration (lsfit_nonneg)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy.optimize import lsq_linear
from scipy.optimize import nnls as _dense_nnls
from scipy.sparse.linalg import lsmr, lsqr

from protab._matrices import as_csc as _as_csc
from protab._progress import bar
from protab.errors import ConvergenceWarning, InputError
from protab.fit._exact_reductions import _pattern, _reduce_zeros
from protab.fit._fit_inputs import BoolArray, FloatArray, Solver, _nonneg, _vector

__all__ = ["LSFit", "lsfit_nonneg", "min_norm", "nnls"]

# Dense solvers (exact SVD / active set) are used by solver="auto" below these sizes.
_DENSE_MAX_ELEMENTS = 1_000_000
_DENSE_MAX_DIM = 1_500
_DENSE_NNLS_MAX_INNER = 400


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
    solver: Literal["auto", "active-set", "fista", "newton", "trf"] = "auto",
    tol: float | None = None,
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
    "fista" (otherwise) is sparse, two products with X per iteration: accelerated projected
    gradient with adaptive restart (Beck & Teboulle 2009; O'Donoghue & Candès 2015), stopping
    when the projected gradient is below ``tol`` (default 1e-9) relative to ``|W^½ X z|`` (at
    most ``max_iter`` iterations, default 20,000). Its fitted values Xᵀy converge fast (what
    Method B/C feed to IPF); y itself may still differ from the exact ridge minimiser along
    directions that only the tiny ridge decides (on large tables these are numerically flat
    for every solver: exact y there needs "active-set"). "newton" is sparse too:
    projected-gradient Cauchy steps to find the face and exact
    Newton steps on it (ridge least squares by LSQR), as in TRON (Lin & Moré 1999), stopping when
    a face with a feasible minimiser repeats (KKT up to rounding) or the projected gradient,
    scaled by s², is below ``tol``·max|z|; "trf" is
    ``scipy.optimize.lsq_linear(method="trf")`` on the sparse stack (its fitted values are
    accurate, but y can be off along directions that only the tiny ridge determines; slow).
    A ``ConvergenceWarning`` says when ``max_iter`` stopped a sparse solver first.
    """
    Xc = _as_csc(X)
    zz, w = _nnls_inputs(Xc, z, ridge, weights)
    n_inner = Xc.shape[0]
    if n_inner == 0:
        return np.zeros(0)
    A, b, lam, s2 = _ridge_system(Xc, zz, w, ridge)
    if solver == "auto":
        solver = "active-set" if n_inner <= _DENSE_NNLS_MAX_INNER else "fista"
    if solver == "active-set":
        stacked = np.vstack([A.toarray(), lam * np.eye(n_inner)])
        y, _ = _dense_nnls(stacked, np.concatenate([b, np.zeros(n_inner)]), maxiter=max_iter)
        return np.asarray(y, dtype=np.float64)
    if solver == "fista":
        return _fista_nnls(A, b, lam, tol=1e-9 if tol is None else tol, max_iter=max_iter or 20_000)
    if solver == "newton":
        return _newton_nnls(A, b, lam, s2 if s2 > 0 else 1.0, tol=1e-15 if tol is None else tol,
                            max_iter=max_iter or 500)
    if solver != "trf":
        raise InputError(f"solver must be 'auto', 'active-set', 'fista', 'newton' or 'trf', got {solver!r}")
    return _trf_nnls(A, b, lam, max_iter)


def _nnls_inputs(Xc: sp.csc_array, z: ArrayLike, ridge: float,
                 weights: ArrayLike | None) -> tuple[FloatArray, FloatArray]:
    """The targets and weights (default 1) of :func:`nnls`, checked with its ridge."""
    n_pub = Xc.shape[1]
    zz = _vector(z, n_pub, "z", "published", X_shape=Xc.shape)
    if not np.isfinite(ridge) or ridge < 0:
        raise InputError(f"ridge must be a finite number ≥ 0, got {ridge!r}")
    w = np.ones(n_pub) if weights is None else _vector(weights, n_pub, "weights", "published")
    _nonneg(w, "weights", "published")
    return zz, w


def _ridge_system(Xc: sp.csc_array, zz: FloatArray, w: FloatArray,
                  ridge: float) -> tuple[sp.csc_array, FloatArray, float, float]:
    """``A = W^½Xᵀ``, ``b = W^½z``, the ridge ``lam = ridge·s`` and ``s²`` (the mean square column
    norm of A) of :func:`nnls`."""
    sw = np.sqrt(w)
    A = sp.csc_array(sp.diags_array(sw) @ sp.csr_array(Xc.T))
    s2 = float(np.asarray(A.power(2).sum())) / Xc.shape[0]
    lam = ridge * (np.sqrt(s2) if s2 > 0 else 1.0)
    return A, sw * zz, lam, s2


def _trf_nnls(A: sp.csc_array, b: FloatArray, lam: float, max_iter: int | None) -> FloatArray:
    """The ridge NNLS of :func:`nnls` by ``scipy.optimize.lsq_linear(method="trf")`` on the sparse stack."""
    n_inner = A.shape[1]
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
            stacklevel=3,
        )
    return np.maximum(np.asarray(res.x, dtype=np.float64), 0.0)


def _fista_nnls(A: sp.csc_array, b: FloatArray, lam: float, *, tol: float, max_iter: int) -> FloatArray:
    """min ½||A y − b||² + ½ lam² ||y||² over y ≥ 0 by FISTA with adaptive restart.

    The step is 1/L with L an upper estimate of the largest eigenvalue of AᵀA + lam² (power
    iteration with a margin; doubled, with a restart from the best point, if the objective
    ever rises). Momentum restarts whenever it points against the gradient (O'Donoghue &
    Candès 2015). Vectorised: each iteration is one product with A and one with Aᵀ.
    """
    Ar, At = sp.csr_array(A), sp.csr_array(A.T)
    n = A.shape[1]
    lam2 = lam * lam
    L = 1.1 * _largest_eigenvalue(Ar, At) + lam2
    if L <= 0:
        return np.zeros(n)

    def grad_obj(y: FloatArray) -> tuple[FloatArray, float]:
        r = Ar @ y - b
        return At @ r + lam2 * y, 0.5 * float(r @ r) + 0.5 * lam2 * float(y @ y)

    scale = float(np.linalg.norm(At @ b)) or 1.0
    y = np.zeros(n)
    x = y.copy()
    t = 1.0
    best, best_obj = y, grad_obj(y)[1]
    pg_norm = np.inf
    with bar("nnls (FISTA)", total=max_iter, unit="it") as pb:
        for it in range(1, max_iter + 1):
            g, _ = grad_obj(x)
            y_new = np.maximum(x - g / L, 0.0)
            t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
            if float((x - y_new) @ (y_new - y)) > 0:  # momentum against progress: restart it
                t_new, x = 1.0, y_new.copy()
            else:
                x = y_new + ((t - 1.0) / t_new) * (y_new - y)
            y, t = y_new, t_new
            if it % 25 == 0 or it == max_iter:
                pb.update(25)
                gy, obj = grad_obj(y)
                if obj > best_obj * (1 + 1e-12) + 1e-300:  # the step was too long: shorten, restart
                    L *= 2.0
                    y, x, t = best.copy(), best.copy(), 1.0
                    continue
                best, best_obj = y.copy(), obj
                pg = np.where(y > 0, gy, np.minimum(gy, 0.0))
                pg_norm = float(np.linalg.norm(pg))
                if pg_norm <= tol * scale:
                    return y
    warnings.warn(
        ConvergenceWarning(
            f"nnls (fista) stopped at its iteration limit ({max_iter}) with a relative projected "
            f"gradient of {pg_norm / scale:.3g} (tol {tol:g}); raise max_iter"
        ),
        stacklevel=3,
    )
    return best


def _largest_eigenvalue(Ar: sp.csr_array, At: sp.csr_array) -> float:
    """An estimate of the largest eigenvalue of AᵀA: 60 steps of power iteration from a flat vector."""
    n = Ar.shape[1]
    v = np.ones(n) / np.sqrt(n)
    est = 0.0
    for _ in range(60):
        w_ = At @ (Ar @ v)
        est = float(np.linalg.norm(w_))
        if est == 0.0:
            break
        v = w_ / est
    return est

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


def _search(A: sp.csc_array, mu: float, x: FloatArray, d: FloatArray, g: FloatArray,
            a: float) -> tuple[FloatArray, bool]:
    """Armijo search along the projected path max(x + a·d, 0) for ½||A x − b||² + ½mu||x||²
    (gradient g at x); says if a = 1 was taken."""
    while a > 1e-14:
        step = np.maximum(x + a * d, 0.0) - x
        gs = float(g @ step)
        As = np.asarray(A @ step)
        if gs + 0.5 * float(As @ As) + 0.5 * mu * float(step @ step) <= 1e-4 * gs:
            return np.maximum(x + step, 0.0), a == 1.0
        a *= 0.5
    return x, False

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
        xc, _ = _search(A, mu, x, d, g, float(d @ d) / curv if curv > 0 else 1.0)
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
        x, _ = _search(A, mu, xc, np.where(F, xf - xc, 0.0), gc, 1.0)
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
        A, b = _weighted(Xt, zz, w, rows, cols)
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


def _weighted(Xt: sp.csr_array, zz: FloatArray, w: FloatArray | None, rows: np.ndarray,
              cols: np.ndarray) -> tuple[sp.csr_array, FloatArray]:
    """The least-squares system of :func:`lsfit_nonneg` on the kept published cells ``cols`` and
    inner cells ``rows``, weighted by ``w^½`` when there are weights."""
    A = sp.csr_array(Xt[cols][:, rows])  # published (kept) × inner (kept)
    b = zz[cols]
    if w is not None:
        sw = np.sqrt(w[cols])
        A = sp.csr_array(sp.diags_array(sw) @ A)
        b = sw * b
    return A, b
