"""Controlled rounding of frequency tables by mixed-integer programming (docs/methods.md §2;
Cox 1987; Salazar-González, Lowthian, Young, Merola, Bond & Brown 2004; tau-ARGUS' CRP).

Every inner cell a_i is a multiple of the base b; every published cell is the sum of its
rounded inner cells (A = Xᵀa), so the table is additive and every published value is a
multiple of b. Zero-restricted (``steps=0``): a value that is a multiple of b stays, any other
goes to one of its two adjacent multiples — for inner cells and for every published cell.
With ``steps=K`` up to K further multiples each way are allowed (never below 0). The rounding
minimises Σ_c |A_c − z_c| over the published cells. Solved with HiGHS through
``scipy.optimize.milp`` under a time limit; the result says whether it is proven optimal
(the objective is an integer, so a gap below 1 is a proof) or only feasible, with the gap.

Formulation. Inner cell i: a_i = b·m_i, m_i integer in [max(0, q_i − K), q_i + K + [r_i > 0]]
(q_i, r_i = divmod(y_i, b)). Published cell c: lo_c ≤ b·(Xᵀm)_c ≤ hi_c with lo_c, hi_c the
allowed multiples around z_c. With K = 0 every A_c takes one of two values, so |A_c − z_c|
is linear in A_c on the feasible set: the objective is linear in m with no extra variables
and the LP relaxation is the convex hull of each cell's cost. With K > 0,
A_c − z_c = p_c − n_c with 0 ≤ p_c ≤ hi_c − z_c, 0 ≤ n_c ≤ z_c − lo_c and cost p_c + n_c.

Partitioning (``partition=<dimension>``), for tables too large to solve whole. The inner
cells are split into blocks by that dimension: the nodes one level below its root when it has
a hierarchy of depth ≥ 2 (e.g. regions over municipalities), otherwise contiguous groups of
its sorted codes (``partition_blocks`` of them, default about √(number of codes)) that act as
artificial intermediate totals, as tau-ARGUS' option "with artificial totals" does.

1. The *subtotal table*: the inner cells summed within blocks (block × the other
   dimensions) with every published cell that does not go below block level in that
   dimension (plus, for artificial blocks, the block-level images of the cells below) is
   rounded first, as its own controlled rounding problem.
2. Each block is then rounded on its own — its inner cells and its published cells below
   block level — with the block's (block × other dimensions) sums fixed to the values
   rounded in step 1.

The union is additive (every cell of step 1 is a sum of block sums, which the blocks
reproduce exactly) and zero-restricted (K steps) everywhere, but Σ|A − z| is only minimised
stage by stage: the result reports the largest gap of the parts and no proof of global
optimality. tau-ARGUS partitions by the first explanatory variable and refuses a
hierarchical one; here any dimension works. A block without a solution raises RoundingError.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import polars as pl
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from protab._progress import track
from protab.errors import InputError, RoundingError, SpecError
from protab.rounding._rounding_inputs import check_base, prepare, xty

__all__ = ["ControlledResult", "controlled", "existence_intervals"]

Stop = Literal["optimal", "first_feasible"]


@dataclass(frozen=True)
class ControlledResult:
    """The outcome of :func:`controlled`.

    ``inner``: dims, ``n``, ``rounded``; ``published``: dims, ``<dim>_level``, ``n``,
    ``rounded`` and the existence interval ``lower``..``upper`` an intruder can compute from
    the rounded value (:func:`existence_intervals`). ``status``: "optimal" (proven: the gap
    is below 1 on an integer objective) or "feasible" (time limit, ``stop="first_feasible"``,
    or a partitioned run); ``mip_gap``: HiGHS' relative gap (largest over the parts when
    partitioned); ``objective``: Σ|rounded − n| over the published cells; ``bound``: a lower
    bound on the objective (None when partitioned).
    """

    inner: pl.DataFrame
    published: pl.DataFrame
    status: str
    mip_gap: float
    objective: int
    bound: float | None
    base: int
    steps: int
    partition: str | None
    blocks: int
    seconds: float
    X: sparse.csc_matrix = field(repr=False)


def existence_intervals(rounded: Any, base: int, steps: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The interval an intruder can infer for the original value of each rounded cell:
    [max(0, a − (K+1)b + 1), a + (K+1)b − 1] for K steps (K = 0: zero-restricted).

    Zero-restricted this is docs/methods.md §2 exactly: a = 0 → [0, b−1], else [a−b+1, a+b−1].
    For K ≥ 1, docs/methods.md gives [0, (K+1)b−1] whenever a < (K+1)b; that upper end is too
    low for 0 < a < (K+1)b (b = 2, K = 1: z = 5 may round to a = 2, outside [0, 3]), so the
    general upper end a + (K+1)b − 1 is used: every rounding this module makes has its
    original value inside the interval."""
    b = check_base(base)
    K = _check_steps(steps)
    a = np.asarray(rounded, dtype=np.int64)
    w = (K + 1) * b
    low = np.maximum(a - w + 1, 0)
    up = a + w - 1
    return low.astype(np.int64), up.astype(np.int64)


def _check_steps(steps: Any) -> int:
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise InputError(f"steps must be an integer >= 0 (0 = zero-restricted), got {steps!r}")
    return int(steps)


@dataclass
class _Solved:
    m: np.ndarray  # rounded inner values / b
    optimal: bool
    gap: float
    bound: float


def _solve(
    X: sparse.csc_matrix,
    y: np.ndarray,
    z: np.ndarray,
    b: int,
    K: int,
    time_limit: float,
    stop: Stop,
    mip_rel_gap: float,
    weight: np.ndarray | None = None,
    eq: tuple[sparse.spmatrix, np.ndarray] | None = None,
    what: str = "the table",
) -> _Solved:
    """One controlled rounding problem: inner counts y, constraint cells z = Xᵀy (with
    objective weights), optional equalities E·a = e (e multiples of b)."""
    n_c = X.shape[1]
    w = np.ones(n_c) if weight is None else weight
    q, r = np.divmod(y, b)
    m_lo = np.maximum(q - K, 0)
    m_hi = q + K + (r > 0)
    zq, zr = np.divmod(z, b)
    lo = b * np.maximum(zq - K, 0)
    hi = b * (zq + K + (zr > 0))
    if K == 0:
        c, lb, ub, integrality, cons, n_extra = _zero_restricted(X, z, b, w, lo, hi, m_lo, m_hi)
    else:
        c, lb, ub, integrality, cons, n_extra = _k_steps(X, z, b, w, lo, hi, m_lo, m_hi)
    constraints = [cons]
    if eq is not None:
        E, e = eq
        E = sparse.csr_matrix(E)
        Ez = sparse.hstack([E, sparse.csr_matrix((E.shape[0], n_extra))]).tocsr()
        constraints.append(LinearConstraint(Ez, e / b, e / b))
    options: dict[str, Any] = {"time_limit": float(time_limit), "disp": False}
    options["mip_rel_gap"] = 1.0 if stop == "first_feasible" else float(mip_rel_gap)
    res = milp(c, integrality=integrality, bounds=Bounds(lb, ub), constraints=constraints, options=options)
    return _solved(res, X.shape[0], K, time_limit, what)


def _zero_restricted(X: sparse.csc_matrix, z: np.ndarray, b: int, w: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                     m_lo: np.ndarray, m_hi: np.ndarray) -> tuple[Any, ...]:
    """The MILP of zero-restricted rounding: |A − z| is linear on {lo, hi}, so the cost is
    (z − lo) + (A − lo)·s with s = (hi + lo − 2z)/b; the constant is a variable fixed at 1, so
    that HiGHS' gap is on the true objective. (c, lb, ub, integrality, constraint, extra
    variables.)"""
    n_in, n_c = X.shape
    coef = np.asarray(X @ (w * (hi + lo - 2 * z)), dtype=np.float64)
    s = np.where(hi > lo, (hi + lo - 2 * z) / b, 0.0)
    const = float(np.sum(w * ((z - lo) - lo * s)))
    c = np.r_[coef, const]
    lb = np.r_[m_lo, 1.0]
    ub = np.r_[m_hi, 1.0]
    integrality = np.r_[np.ones(n_in), 0]
    A = sparse.hstack([sparse.csr_matrix(X.T), sparse.csr_matrix((n_c, 1))]).tocsr()
    return c, lb, ub, integrality, LinearConstraint(A, lo / b, hi / b), 1


def _k_steps(X: sparse.csc_matrix, z: np.ndarray, b: int, w: np.ndarray, lo: np.ndarray, hi: np.ndarray,
             m_lo: np.ndarray, m_hi: np.ndarray) -> tuple[Any, ...]:
    """The MILP of rounding with K steps: A − z = p − n, 0 ≤ p ≤ hi − z, 0 ≤ n ≤ z − lo, cost
    p + n. (c, lb, ub, integrality, constraint, extra variables.)"""
    n_in, n_c = X.shape
    c = np.r_[np.zeros(n_in), w, w]
    lb = np.r_[m_lo, np.zeros(2 * n_c)]
    ub = np.r_[m_hi, hi - z, z - lo]
    integrality = np.r_[np.ones(n_in), np.zeros(2 * n_c)]
    eye = sparse.identity(n_c, format="csr")
    A = sparse.hstack([b * sparse.csr_matrix(X.T), -eye, eye]).tocsr()
    return c, lb, ub, integrality, LinearConstraint(A, z, z), 2 * n_c


def _solved(res: Any, n_in: int, K: int, time_limit: float, what: str) -> _Solved:
    """The rounded inner values of a HiGHS result, whether proven optimal, gap and bound;
    RoundingError when there is none (no solution with K steps, or none in time)."""
    if res.x is None:
        if res.status == 2:
            hint = (
                "zero-restricted controlled rounding does not always exist for tables of three "
                "or more dimensions; allow one more multiple each way with steps=1"
                if K == 0
                else f"try steps={K + 1}"
            )
            raise RoundingError(f"controlled rounding of {what}: no solution exists with steps={K}; {hint}")
        if res.status == 1:
            raise RoundingError(
                f"controlled rounding of {what}: no solution found within time_limit="
                f"{time_limit:g} s; give more time, or split the table with partition=<dimension>"
            )
        raise RoundingError(f"controlled rounding of {what} failed in the solver: {res.message}")
    m = np.rint(res.x[:n_in]).astype(np.int64)
    fun = float(res.fun)
    bound = float(res.mip_dual_bound) if res.mip_dual_bound is not None else -np.inf
    if not np.isfinite(bound):
        bound = -np.inf
    gap = float(res.mip_gap) if res.mip_gap is not None else np.inf
    optimal = fun - bound < 1.0 - 1e-6 if np.isfinite(bound) else False
    return _Solved(m, bool(optimal), gap, bound)


def _blocks_of(prep: Any, dim: str, n_blocks: int | None) -> tuple[np.ndarray, np.ndarray, bool]:
    """Block number of each inner cell and of each published cell (−1: not below block level
    in ``dim``), and whether the blocks are artificial (flat dimension)."""
    spec = prep.spec
    d = spec.dimension(dim)
    inner_codes = prep.inner[dim].cast(pl.String)
    pub_codes = prep.published[dim].cast(pl.String)
    pub_level = prep.published[f"{dim}_level"].to_numpy()
    h = d.hierarchy
    if h is not None and h.depth >= 2:
        rel = pl.from_arrow(h.relation())
        assert isinstance(rel, pl.DataFrame)
        rel = rel.with_columns(pl.col("leaf").cast(pl.String), pl.col("ancestor").cast(pl.String))
        node_of_leaf = rel.filter(pl.col("level") == 1).select("leaf", pl.col("ancestor").alias("_node"))
        # every code at level >= 1 (leaf, node or in between) -> its level-1 ancestor
        code_node = (
            rel.filter(pl.col("level") >= 1)
            .join(node_of_leaf, on="leaf")
            .select(pl.col("ancestor").alias("code"), "_node")
            .unique("code")
        )
        nodes = sorted(set(code_node["_node"].to_list()))
        node_id = {c: k for k, c in enumerate(nodes)}
        lookup = dict(zip(code_node["code"].to_list(), [node_id[c] for c in code_node["_node"].to_list()]))
        ib = inner_codes.replace_strict(lookup, return_dtype=pl.Int64).to_numpy()
        pb = pub_codes.replace_strict(lookup, default=-1, return_dtype=pl.Int64).to_numpy()
        pb = np.where(pub_level >= 2, pb, -1)
        return ib, pb, False
    codes = sorted(set(inner_codes.to_list()))
    k = len(codes)
    nb = n_blocks if n_blocks is not None else max(2, round(np.sqrt(k)))
    nb = max(1, min(nb, k))
    bid = {c: int(j * nb // k) for j, c in enumerate(codes)}
    ib = inner_codes.replace_strict(bid, return_dtype=pl.Int64).to_numpy()
    pb = pub_codes.replace_strict(bid, default=-1, return_dtype=pl.Int64).to_numpy()
    pb = np.where(pub_level >= 1, pb, -1)
    return ib, pb, True


def _partitioned(prep: Any, b: int, K: int, dim: str, n_blocks: int | None, time_limit: float,
                 stop: Stop, mip_rel_gap: float) -> tuple[np.ndarray, float]:
    X, y, z = prep.X, prep.y, prep.z
    dims = prep.spec.columns
    ib, pb, artificial = _blocks_of(prep, dim, n_blocks)
    others = [c for c in dims if c != dim]
    # stage 1: groups = (block, other dims) of inner cells
    gkey = prep.inner.select(others).with_columns(pl.Series("_b", ib))
    gid = gkey.select(pl.struct(["_b", *others]).rank("dense") - 1).to_series().to_numpy().astype(np.int64)
    n_g = int(gid.max()) + 1
    G = sparse.csr_matrix((np.ones(y.size), (np.arange(y.size), gid)), shape=(y.size, n_g))
    # image of each published cell in the subtotal table: (block or its own code, others)
    pub = prep.published
    img_dim = pl.Series(np.where(pb >= 0, pb, -1)).cast(pl.String)
    img_code = pl.when(pl.Series(pb) >= 0).then(pl.lit("\x00") + img_dim).otherwise(pub[dim].cast(pl.String))
    img = pub.select([pl.col(c).cast(pl.String) for c in others] + [f"{c}_level" for c in others]).with_columns(
        img_code.alias("_img")
    )
    iid = img.select(pl.struct(img.columns).rank("dense") - 1).to_series().to_numpy().astype(np.int64)
    n_img = int(iid.max()) + 1
    P = sparse.csr_matrix((np.ones(iid.size), (np.arange(iid.size), iid)), shape=(iid.size, n_img))
    X1 = sparse.csc_matrix(((G.T @ X @ P) > 0).astype(np.float64))
    y1 = xty(G, y)
    z1 = xty(X1, y1)
    # weight: real published cells 1, artificial block cells (only when artificial) 0
    real = np.zeros(n_img)
    real[iid[pb < 0]] = 1.0
    if not artificial:
        real[:] = 1.0
    t0 = time.perf_counter()
    s1 = _solve(X1, y1, z1, b, K, time_limit * 0.25, stop, mip_rel_gap, weight=real,
                what="the subtotal table of the partition")
    a1 = b * s1.m
    gaps = [s1.gap]
    m = np.zeros(y.size, dtype=np.int64)
    blocks = np.unique(ib)
    remaining = max(time_limit - (time.perf_counter() - t0), 1.0)
    Xcsr = X.tocsr()
    for k, blk in enumerate(track(blocks, "controlled rounding: blocks", total=blocks.size, unit="block")):
        rows = np.flatnonzero(ib == blk)
        cols = np.flatnonzero(pb == blk)
        Xb = sparse.csc_matrix(Xcsr[rows][:, cols])
        gb = gid[rows]
        ug, ginv = np.unique(gb, return_inverse=True)
        E = sparse.csr_matrix((np.ones(rows.size), (ginv, np.arange(rows.size))), shape=(ug.size, rows.size))
        share = remaining * rows.size / max(1, int(np.isin(ib, blocks[k:]).sum()))
        sb = _solve(Xb, y[rows], z[cols], b, K, max(share, 1.0), stop, mip_rel_gap,
                    eq=(E, a1[ug]), what=f"block {k + 1} of {blocks.size} of the partition by {dim!r}")
        m[rows] = sb.m
        gaps.append(sb.gap)
        remaining = max(time_limit - (time.perf_counter() - t0), 1.0)
    return b * m, float(max(gaps))


def controlled(
    inner: Any,
    spec: Any,
    base: int,
    *,
    steps: int = 0,
    time_limit: float = 60.0,
    partition: str | None = None,
    partition_blocks: int | None = None,
    stop: Stop = "optimal",
    mip_rel_gap: float = 1e-6,
    freq: str = "n",
) -> ControlledResult:
    """Controlled rounding to ``base`` of a table of inner cells (docs/methods.md §2; see the module
    docstring for the integer programme and the partitioning).

    ``inner``: a frame with the dimension columns of ``spec`` and whole non-negative counts
    ``freq`` (Extend0 zeros are added); ``spec``: a :class:`TableSpec` (hierarchies, formula)
    whose published cells are all rounded to multiples of ``base`` and stay additive.
    ``steps``: 0 for zero-restricted rounding, K to allow K further multiples each way.
    ``time_limit``: seconds for HiGHS (shared among the parts when partitioned). ``stop``:
    "optimal" — search until HiGHS' relative gap (objective − bound)/objective is at most
    ``mip_rel_gap`` (default 1e-6: in effect proven optimal) — or "first_feasible" — keep the
    first rounding HiGHS finds (tau-ARGUS' stop rule 2: faster, usually a larger objective,
    ``status="feasible"``). A ``mip_rel_gap`` such as 0.1 stops once the rounding is proven
    within 10% of the best possible objective; ``result.mip_gap`` reports the gap reached.
    ``partition``: a dimension to split the table by when it is too large to solve whole.
    Raises :class:`RoundingError` when no rounding exists (suggesting ``steps=1``) or none
    was found in time.
    """
    b = check_base(base)
    K = _check_steps(steps)
    _check_solver(stop, mip_rel_gap, time_limit)
    prep = prepare(inner, spec, freq, "controlled")
    if partition is not None and partition not in prep.spec.columns:
        raise SpecError(
            f"controlled: partition must name a dimension of the table ({', '.join(prep.spec.columns)}), "
            f"not {partition!r}"
        )
    t0 = time.perf_counter()
    if partition is None:
        sol = _solve(prep.X, prep.y, prep.z, b, K, time_limit, stop, mip_rel_gap)
        a = b * sol.m
        status, gap, bound, nblocks = ("optimal" if sol.optimal else "feasible"), sol.gap, sol.bound, 1
    else:
        a, gap = _partitioned(prep, b, K, partition, partition_blocks, time_limit, stop, mip_rel_gap)
        status, bound = "feasible", None
        nblocks = int(np.unique(_blocks_of(prep, partition, partition_blocks)[0]).size)
    seconds = time.perf_counter() - t0
    A = xty(prep.X, a)
    lower, upper = existence_intervals(A, b, K)
    inner_f = prep.inner.with_columns(pl.Series("rounded", a, dtype=pl.Int64))
    pub_f = prep.published.with_columns(
        pl.Series("rounded", A, dtype=pl.Int64),
        pl.Series("lower", lower, dtype=pl.Int64),
        pl.Series("upper", upper, dtype=pl.Int64),
    )
    return ControlledResult(inner=inner_f, published=pub_f, status=status, mip_gap=gap,
                            objective=int(np.abs(A - prep.z).sum()), bound=bound, base=b, steps=K,
                            partition=partition, blocks=nblocks, seconds=seconds, X=prep.X)


def _check_solver(stop: Any, mip_rel_gap: Any, time_limit: Any) -> None:
    """The stop rule, relative gap and time limit of :func:`controlled`."""
    if stop not in ("optimal", "first_feasible"):
        raise InputError(f"stop must be 'optimal' or 'first_feasible', not {stop!r}")
    if isinstance(mip_rel_gap, bool) or not (isinstance(mip_rel_gap, (int, float)) and 0 <= mip_rel_gap <= 1):
        raise InputError(f"mip_rel_gap must be a number in [0, 1], got {mip_rel_gap!r}")
    if not (isinstance(time_limit, (int, float)) and time_limit > 0):
        raise InputError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
