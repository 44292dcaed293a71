"""method="optimal": on small tables its pattern costs exactly as little as the cheapest pattern
found by trying every pattern, every pattern it returns passes the exact interval audit, and it
never costs more than Gauss mode with the same protection levels."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from protab.suppression import audit_pattern, gauss, optimal, protect_in_order


def _two_way(r: int, c: int) -> sparse.csc_array:
    """Inner cells r×c; published: the inner cells, row totals, column totals, grand total."""
    eye = np.eye(r * c)
    rows = np.kron(np.eye(r), np.ones((c, 1)))
    cols = np.kron(np.ones((r, 1)), np.eye(c))
    return sparse.csc_array(np.hstack([eye, rows, cols, np.ones((r * c, 1))]))


def _hierarchical() -> sparse.csc_array:
    """One dimension T = A + B, A = a1 + a2, B = b1 + b2, published for each of x and y (no total
    over them): 14 cells."""
    tree = np.array([[1, 1, 0, 1, 0, 0, 0], [1, 1, 0, 0, 1, 0, 0], [1, 0, 1, 0, 0, 1, 0],
                     [1, 0, 1, 0, 0, 0, 1]], dtype=float)  # leaves × codes
    return sparse.csc_array(np.kron(tree, np.eye(2)))


def _width(z: np.ndarray, R: np.ndarray) -> np.ndarray:
    """The width optimal() requires: R, and at least 1 % of |z| and 10⁻⁶ of max |z| (its docs)."""
    return np.maximum(R, np.maximum(0.01 * np.abs(z), 1e-6 * max(1.0, np.abs(z).max())))


def _protects(X, z, supp, prim, L, U, R) -> bool:
    frame = audit_pattern(X, z, supp, primary=prim, protection_lower=L, protection_upper=U, protection_range=R)
    frame = frame.filter(frame["primary"])
    return bool(frame["protected"].all()) and bool(((frame["up"] - frame["lo"]) >= frame["required_range"] - 1e-9).all())


def _brute_force(X, z, prim, cost, L, U, R) -> float:
    """The least cost over every pattern (in order of cost; the first that protects)."""
    free = np.flatnonzero(~prim)
    k = free.size
    masks = (np.arange(2 ** k)[:, None] >> np.arange(k)) & 1
    costs = masks @ cost[free] + cost[prim].sum()
    for i in np.argsort(costs, kind="stable"):
        supp = prim.copy()
        supp[free[masks[i] == 1]] = True
        if _protects(X, z, supp, prim, L, U, R):
            return float(costs[i])
    raise AssertionError("no pattern protects")


def _case(seed: int):
    rng = np.random.default_rng(seed)
    X = [_two_way(2, 3), _two_way(2, 4), _hierarchical()][seed % 3]
    n, m = X.shape
    y = rng.integers(0, 12, n).astype(float)
    y[rng.random(n) < 0.15] = 0.0
    z = X.T @ y
    prim = np.zeros(m, dtype=bool)
    prim[rng.choice(n, size=int(rng.integers(1, 3)), replace=False)] = True  # inner cells
    L = np.where(prim, rng.integers(0, 4, m), 0).astype(float)
    U = np.where(prim, rng.integers(0, 4, m), 0).astype(float)
    R = _width(z, np.where(prim, rng.integers(0, 6, m), 0).astype(float))
    cost = [np.abs(z), np.ones(m), rng.integers(0, 9, m).astype(float)][seed % 3 if seed < 3 else rng.integers(3)]
    return X, z, prim, cost, L, U, R


# seeds 3 and up are the larger brute forces (5: ~20 s): `make test` only
@pytest.mark.parametrize("seed", [*range(3), *(pytest.param(s, marks=pytest.mark.slow) for s in range(3, 9))])
def test_optimal_cost_equals_brute_force_and_its_pattern_passes_the_audit(seed):
    X, z, prim, cost, L, U, R = _case(seed)
    res = optimal(X, z, prim, cost=cost, protection_lower=L, protection_upper=U, protection_range=R)
    assert res.optimal and res.gap == 0.0
    assert res.suppressed[prim].all()
    assert _protects(X, z, res.suppressed, prim, L, U, R)
    assert res.cost == pytest.approx(float(cost[res.suppressed].sum()))
    assert res.cost == pytest.approx(_brute_force(X, z, prim, cost, L, U, R), abs=1e-9)


@pytest.mark.parametrize("seed", range(9))
def test_optimal_costs_no_more_than_gauss_with_the_same_levels(seed):
    X, z, prim, cost, L, U, R = _case(seed)
    order = np.argsort(-cost, kind="stable")
    g = gauss(X, z, prim, candidates=order, singleton_method="none")
    g = protect_in_order(X, z, g, prim, candidates=order, protection_lower=L, protection_upper=U, protection_range=R)
    assert _protects(X, z, g, prim, L, U, R)
    res = optimal(X, z, prim, cost=cost, protection_lower=L, protection_upper=U, protection_range=R)
    assert res.cost <= float(cost[g].sum()) + 1e-9


def test_never_cells_stay_published_and_forced_cells_are_suppressed():
    X = _two_way(3, 3)
    y = np.arange(1.0, 10.0)
    z = X.T @ y
    prim = np.zeros(X.shape[1], dtype=bool)
    prim[4] = True  # the middle inner cell
    never = np.zeros_like(prim)
    never[[3, 5]] = True  # its row neighbours
    forced = np.zeros_like(prim)
    forced[15] = True  # the grand total
    res = optimal(X, z, prim, cost=np.ones(X.shape[1]), never=never, forced=forced)
    assert not res.suppressed[never].any() and res.suppressed[forced].all()
    assert _protects(X, z, res.suppressed, prim, 0.0, 0.0, _width(z, np.zeros(z.size)) * prim)
