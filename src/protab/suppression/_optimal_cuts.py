"""The cuts of the optimal suppression (:mod:`protab.suppression.optimal`): for a pattern that
leaves a primary cell under-protected, the attacker's LPs of that cell and, from their duals, a
linear inequality in the suppression variables that every protecting pattern satisfies and the
current pattern violates (Fischetti and Salazar-González 2001, *Solving the cell suppression
problem on tabular data with linear constraints*, Management Science 47(7); their capacity
constraints).

The attacker's problem with suppression variables x (1 = suppressed) is, for the lower end of
cell p,

    min x_pᵀy  subject to  z_r − M⁻_r·x_r ≤ x_rᵀy ≤ z_r + M⁺_r·x_r  (every published cell r),
                           lower ≤ y ≤ upper,

with M⁻_r = z_r − cmin_r and M⁺_r = cmax_r − z_r the most a cell can move within the bounds
alone (cmin, cmax: its smallest and largest value under the bounds), so a suppressed cell's
row is no constraint at all and the LP is the audit's. For any row multipliers w, Lagrangian
duality bounds the minimum from below by

    L(w) − Σ_r k_r·x_r,   k_r = w_r·M⁻_r if w_r > 0 else −w_r·M⁺_r,

where L(w) is the bound with every row an equality. With the optimal duals w of the LP of the
current pattern (rows of its published cells only; the suppressed ones have w_r = 0), L(w) is
the current minimum lo_p. The interval must reach t_lo (the required lower end), so every
protecting pattern has lo_p − Σ k_r x_r ≤ t_lo, i.e.

    Σ_r k_r·x_r ≥ lo_p − t_lo  (> 0 for the current pattern, which has x_r = 0 on w's support).

The upper end gives the same from the LP of −x_p; the required width up − lo ≥ R adds the two
(Σ (k_r + k'_r) x_r ≥ R − (up_p − lo_p)). Each cut Σ k_r x_r ≥ b is kept in the equivalent
strengthened form Σ min(1, k_r/b)·x_r ≥ 1 (k_r = ∞ where the cell is unbounded: one such cell
suppressed is enough), which also keeps the master's coefficients in [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from protab.errors import InputError
from protab.suppression._attacker_system import _linprog


@dataclass
class _Cut:
    cell: int  # the primary cell whose requirement it states
    cols: np.ndarray  # published cells with a coefficient
    coef: np.ndarray  # in (0, 1]; Σ coef·x[cols] ≥ 1


class _Attacker:
    """The attacker's LPs of the primary cells for one pattern (rows: its published cells)."""

    def __init__(self, A: sparse.csc_array, z: np.ndarray, suppressed: np.ndarray, lo: np.ndarray,
                 up: np.ndarray, cmin: np.ndarray, cmax: np.ndarray) -> None:
        self.A, self.z = A, z
        self.pub = np.flatnonzero(~suppressed)
        self.A_eq = sparse.csr_array(A[:, self.pub].T)
        self.bounds = np.column_stack([lo, up])
        with np.errstate(invalid="ignore"):
            self.m_down = np.maximum(z - cmin, 0.0)  # M⁻: how far a cell can fall
            self.m_up = np.maximum(cmax - z, 0.0)  # M⁺: how far it can rise

    def end(self, p: int, sense: float) -> tuple[float, np.ndarray | None]:
        """min sense·x_pᵀy: (value, row duals) or (−inf, None) when unbounded."""
        c = sense * self.A[:, [p]].toarray().ravel()
        if self.pub.size == 0:
            res = _linprog(c, bounds=self.bounds)
        else:
            res = _linprog(c, A_eq=self.A_eq, b_eq=self.z[self.pub], bounds=self.bounds)
        if res.status == 0:
            w = np.asarray(res.eqlin.marginals, dtype=np.float64) if self.pub.size else np.zeros(0)
            return float(res.fun), w
        if res.status in (2, 3):  # the system is feasible (the data are), so this is unbounded
            return -np.inf, None
        raise InputError(f"optimal suppression: the attacker's LP of cell {p} failed in HiGHS "
                         f"(status {res.status}): {res.message}")

    def capacities(self, w: np.ndarray) -> np.ndarray:
        """k_r per published row for row duals w (module docstring); 0 where w is 0."""
        w = np.where(np.abs(w) <= 1e-9 * max(1.0, float(np.abs(w).max(initial=0.0))), 0.0, w)
        pos = np.where(w > 0, w, 0.0)
        neg = np.where(w < 0, -w, 0.0)
        with np.errstate(invalid="ignore"):
            k = np.where(pos > 0, pos * self.m_down[self.pub], 0.0) + np.where(neg > 0, neg * self.m_up[self.pub], 0.0)
        return k

    def cut(self, p: int, k: np.ndarray, need: float) -> _Cut | None:
        """The strengthened cut Σ min(1, k/need)·x ≥ 1 on the published rows (None: no row can
        help, the requirement cannot be met while these rows' duals hold)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            coef = np.minimum(1.0, k / need)
        keep = coef > 1e-9
        if not keep.any():
            return None
        return _Cut(p, self.pub[keep], coef[keep])


def cuts_for(att: _Attacker, cells: np.ndarray, t_lo: np.ndarray, t_hi: np.ndarray, R: np.ndarray,
             tol: float) -> tuple[list[_Cut], list[int]]:
    """Cuts for the under-protected primary ``cells`` of the attacker's pattern: per cell one
    for each end that misses its target and one for a width under ``R``; and the cells for
    which no cut exists (no published cell's row limits them: no pattern can help)."""
    out: list[_Cut] = []
    stuck: list[int] = []
    for p in cells.tolist():
        lo, w_lo = att.end(p, 1.0)
        neg_up, w_up = att.end(p, -1.0)
        up = -neg_up
        k_lo = att.capacities(w_lo) if w_lo is not None else None
        k_up = att.capacities(w_up) if w_up is not None else None
        made = 0
        if k_lo is not None and lo > t_lo[p] + tol:
            made += _add(out, att.cut(p, k_lo, lo - t_lo[p]))
        if k_up is not None and up < t_hi[p] - tol:
            made += _add(out, att.cut(p, k_up, t_hi[p] - up))
        if k_lo is not None and k_up is not None and up - lo < R[p] - tol:
            made += _add(out, att.cut(p, k_lo + k_up, R[p] - (up - lo)))
        if not made:
            stuck.append(p)
    return out, stuck


def _add(out: list[_Cut], cut: _Cut | None) -> int:
    if cut is None:
        return 0
    out.append(cut)
    return 1
