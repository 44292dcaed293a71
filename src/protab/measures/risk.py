"""Risk measures: small and changed cells, noise per original value, entropy-based risks."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import scipy.sparse as sp
from numpy.typing import ArrayLike

from protab.errors import InputError
from protab.measures._measure_inputs import _entropy, _pair, _vec

if TYPE_CHECKING:  # pragma: no cover
    from protab.ptable import PTable

__all__ = [
    "conditional_entropy_risk",
    "entropy_risk",
    "entropy_risk_perturbed",
    "noise_by_value",
    "percent_changed",
    "ptable_noise_by_value",
    "share_changed",
    "share_small_cells",
    "small_cells_unchanged",
]


# --------------------------------------------------------------------------------------------
# risk: small cells, changed cells, noise per original value


def share_changed(original: ArrayLike, protected: ArrayLike) -> float:
    """Share of cells whose protected value differs from the original (0 … 1)."""
    f, g = _pair(original, protected)
    return float(np.mean(f != g)) if f.size else 0.0


def percent_changed(original: ArrayLike, protected: ArrayLike, tol: float = 0.0) -> float:
    """Percent of cells whose protected value differs from the original by more than ``tol``
    (ESSnet Handbook; 0 … 100). Use a small ``tol`` for fitted (non-integer) values."""
    f, g = _pair(original, protected)
    return float(100.0 * np.mean(np.abs(f - g) > tol)) if f.size else 0.0


def share_small_cells(values: ArrayLike, k: int = 2) -> float:
    """Share of cells with a value in 1…k (ESSnet Handbook: identification risk of small
    frequencies). Fitted (non-integer) values count when 0.5 ≤ value < k + 0.5."""
    v = _vec(values, "values")
    if v.size == 0:
        return 0.0
    return float(np.mean((v >= 0.5) & (v < k + 0.5)))


def small_cells_unchanged(
    original: ArrayLike, protected: ArrayLike, k: int = 2, tol: float = 1e-9
) -> float:
    """Share of the original small cells (1…k) that are published with their true value
    (Shlomo & Young 2006: the disclosure risk of the R-U map). 1 for the original table; NaN
    when the original has no small cell."""
    f, g = _pair(original, protected)
    small = (f >= 1) & (f <= k)
    if not small.any():
        return float("nan")
    return float(np.mean(np.abs(g[small] - f[small]) <= tol))


def noise_by_value(
    original: ArrayLike, protected: ArrayLike, max_value: int | None = None
) -> pl.DataFrame:
    """Empirical noise v = g − f per original value, from (original, protected) pairs.

    One row per distinct original value (up to ``max_value``): ``cells``, ``p_stay`` =
    P(v = 0 | f), ``mean`` and ``var`` (divisor cells) of v, and ``inv_var`` = 1/Var(v | f),
    a risk (ESSnet Handbook; inf where the noise never varies).
    """
    f, g = _pair(original, protected)
    keep = np.ones(f.shape, dtype=bool) if max_value is None else f <= max_value
    d = pl.DataFrame({"value": f[keep], "v": g[keep] - f[keep]})
    out = (
        d.group_by("value")
        .agg(
            pl.len().cast(pl.Int64).alias("cells"),
            (pl.col("v") == 0).mean().alias("p_stay"),
            pl.col("v").mean().alias("mean"),
            pl.col("v").var(ddof=0).alias("var"),
        )
        .sort("value")
    )
    return out.with_columns(
        pl.when(pl.col("var") > 0).then(1.0 / pl.col("var")).otherwise(float("inf")).alias("inv_var")
    )


def ptable_noise_by_value(ptable: PTable, values: ArrayLike | None = None) -> pl.DataFrame:
    """P(v = 0 | n) and 1/Var(v | n) for original values n, from a p-table (ESSnet Handbook).

    ``values`` defaults to 0…imax. A value uses its p-table row class (values past imax
    repeat the last rows); values below the smallest row are never perturbed (p_stay 1, var
    0). Columns: value, p_stay, mean, var, inv_var (inf where var = 0).
    """
    vals = np.arange(ptable.imax + 1) if values is None else np.asarray(values).ravel()
    vals = vals.astype(np.int64)
    cls = ptable.row_class(vals)
    f = ptable.frame
    w = (f["ub_n"] - f["lb_n"]).to_numpy().astype(float) / ptable.den
    v = f["v"].to_numpy().astype(float)
    i = f["i"].to_numpy()
    n_cls = ptable.imax + 1
    m0 = np.bincount(i, weights=w, minlength=n_cls)
    m1 = np.bincount(i, weights=w * v, minlength=n_cls)
    m2 = np.bincount(i, weights=w * v * v, minlength=n_cls)
    stay = np.bincount(i, weights=w * (v == 0), minlength=n_cls)
    has = m0[cls] > 0
    mean = np.where(has, m1[cls], 0.0)
    var = np.where(has, m2[cls] - m1[cls] ** 2, 0.0)
    var = np.where(np.abs(var) < 1e-12, 0.0, var)
    with np.errstate(divide="ignore"):
        inv = np.where(var > 0, 1.0 / np.where(var > 0, var, 1.0), np.inf)
    return pl.DataFrame(
        {"value": vals, "p_stay": np.where(has, stay[cls], 1.0), "mean": mean, "var": var,
         "inv_var": inv}
    )

# --------------------------------------------------------------------------------------------
# risk: entropy measures (Antal, Shlomo & Elliot 2014; Shlomo, Krenzke & Li 2019)

_W3 = (1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0)


def _weights(weights: Sequence[float]) -> tuple[float, float, float]:
    w = tuple(float(x) for x in weights)
    if len(w) != 3 or any(x < 0 for x in w) or abs(sum(w) - 1.0) > 1e-9:
        raise InputError("entropy risk weights must be three numbers ≥ 0 that sum to 1")
    return w


def _size_term(N: float) -> float:
    # −(1/√N)·log(1/(e·√N)) = (1 + ½ log N)/√N: 1 at N = 1, decreasing to 0
    return (1.0 + 0.5 * math.log(N)) / math.sqrt(N)


def _uniformity_term(F: np.ndarray) -> float:
    K, N = F.size, float(F.sum())
    if K < 2:
        return 1.0
    return 1.0 - _entropy(F / N) / math.log(K)


def _population(values: ArrayLike, name: str) -> np.ndarray:
    F = _vec(values, name)
    if (F < 0).any():
        raise InputError(f"{name}: population counts must be ≥ 0; {int((F < 0).sum())} are negative")
    if F.sum() <= 0:
        raise InputError(f"{name}: the table is empty (its counts sum to 0)")
    return F


def entropy_risk(values: ArrayLike, weights: Sequence[float] = _W3) -> float:
    """Entropy-based disclosure risk of a population frequency table (Antal, Shlomo & Elliot
    2014; ESSnet Handbook):

        r = w1·|D|/K + w2·(1 − H/log K) − w3·(1/√N)·log(1/(e·√N))

    with K the cells, D the zero cells, N = Σ F and H = −Σ (F/N) log(F/N). Each term lies in
    [0, 1]; so does r for weights ≥ 0 summing to 1 (default ⅓ each). Use the inner cells.
    """
    w1, w2, w3 = _weights(weights)
    F = _population(values, "values")
    K, N = F.size, float(F.sum())
    return w1 * float(np.sum(F == 0)) / K + w2 * _uniformity_term(F) + w3 * _size_term(N)


def _joint_from_pairs(f: np.ndarray, g: np.ndarray, weight: np.ndarray | None) -> np.ndarray:
    """Joint distribution p(a, b) of the (original, protected) value pairs of the cells, as
    a sparse count matrix over distinct a (rows) and b (columns)."""
    _, ai = np.unique(f, return_inverse=True)
    _, bi = np.unique(g, return_inverse=True)
    w = np.ones(f.size) if weight is None else weight
    return sp.coo_array((w, (ai.ravel(), bi.ravel()))).tocsr()


def _conditional_entropy(J: sp.sparray | sp.spmatrix) -> tuple[float, float]:
    """(H(A|B), H(A)) from a joint count matrix J[a, b] (rows A, columns B)."""
    J = sp.coo_array(J)
    tot = float(J.sum())
    if tot <= 0:
        raise InputError("the joint distribution is empty (it sums to 0)")
    pa = np.asarray(J.sum(axis=1)).ravel() / tot
    pb = np.asarray(J.sum(axis=0)).ravel() / tot
    keep = J.data > 0
    pab = J.data[keep] / tot
    h_ab = float(-np.sum(pab * np.log(pab / pb[J.col[keep]])))
    return max(h_ab, 0.0), _entropy(pa)


def conditional_entropy_risk(
    original: ArrayLike | None = None,
    protected: ArrayLike | None = None,
    *,
    joint: Any = None,
    unit_weighted: bool = False,
) -> float:
    """Conditional-entropy disclosure risk RM = 1 − H(A|B)/H(A) (Antal, Shlomo & Elliot 2014;
    Shlomo, Krenzke & Li 2019, §3.5).

    A is the original and B the protected value of a cell; their joint distribution is the
    empirical one of the (f, g) pairs over the cells: p(a, b) = #{cells with f = a, g = b}/K,
    H(A) = −Σ_a p(a) log p(a) and H(A|B) = −Σ_{a,b} p(a, b) log(p(a, b)/p(b)). RM is 1 when
    the protected value determines the original (no perturbation, or a one-to-one recoding)
    and 0 when it carries no information about it. With ``unit_weighted`` every cell counts
    with its original value f (a person's view: the cell a unit is in) instead of 1.
    ``joint`` instead gives the joint counts directly: a (sparse) matrix J[i, j] of units in
    original category i and protected category j (record-level methods such as PRAM or
    swapping). RM = 1 when H(A) = 0 (the original value is known without the table).
    """
    if joint is not None:
        h_ab, h_a = _conditional_entropy(joint)
    else:
        if original is None or protected is None:
            raise InputError("conditional_entropy_risk needs original and protected values, or joint=")
        f, g = _pair(original, protected)
        if f.size == 0:
            return float("nan")
        w = None
        if unit_weighted:
            if (f < 0).any():
                raise InputError("unit_weighted needs original counts ≥ 0")
            w = f
        h_ab, h_a = _conditional_entropy(_joint_from_pairs(f, g, w))
    if h_a <= 0:
        return 1.0
    return float(min(max(1.0 - h_ab / h_a, 0.0), 1.0))


def entropy_risk_perturbed(
    original: ArrayLike,
    protected: ArrayLike,
    weights: Sequence[float] = _W3,
    *,
    joint: Any = None,
) -> float:
    """Entropy-based risk r# of a perturbed population table (Antal, Shlomo & Elliot 2014;
    ESSnet Handbook):

        r# = w1·(|D|/K)^(|D∪Q|/|D∩Q|) + w2·(1 − H/log K)·(1 − H#/H_A) − w3·(1/√N)·log(1/(e·√N))

    D the original zero cells, Q the protected zero cells (|g| < 0.5), H and N of the
    original table as in :func:`entropy_risk`, and 1 − H#/H_A the conditional-entropy factor
    :func:`conditional_entropy_risk` (H# = H(A|B), from the (f, g) pairs of the cells, or
    from ``joint`` — units moving between cells — as the handbook writes it). The first term
    is 0 when no true zero stays zero (|D∩Q| = 0). r# = r when protected equals original.
    """
    w1, w2, w3 = _weights(weights)
    F = _population(original, "original")
    f, g = _pair(F, protected)
    K, N = F.size, float(F.sum())
    D = f == 0
    Q = np.abs(g) < 0.5
    inter, union = int(np.sum(D & Q)), int(np.sum(D | Q))
    if D.sum() == 0 or inter == 0:
        t1 = 0.0
    else:
        t1 = (float(D.sum()) / K) ** (union / inter)
    rm = conditional_entropy_risk(f, g, joint=joint)
    return w1 * t1 + w2 * _uniformity_term(F) * rm + w3 * _size_term(N)
