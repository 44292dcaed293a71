"""Protection levels of primary cells: how far the attacker's interval of each primary cell must
reach below and above its value, and how wide it must be (tau-ARGUS' lower, upper and sliding
protection levels, Hundepool et al. 2012 §4.2; GaussSuppression's ``IntervalLimits`` and the
``protectionIntervals`` of its primary rules).

A requirement is a triple of distances per primary cell: L (the interval must reach z − L),
U (it must reach z + U) and R (its width up − lo must be at least R; tau-ARGUS' *sliding*
protection: the interval may lie anywhere around z). :class:`ProtectionLevels` gives them as
absolute values and as shares of the cell, as GaussSuppression's ``IntervalLimits`` does
(``percent``/``limit`` = ``protectionPercent``/``protectionLimit``, ``lower_*`` =
``loProtection*``, ``range_percent``/``range_min`` = ``rangePercent``/``rangeMin``), and with
``rules=True`` adds the levels the magnitude rules imply, derived as tau-ARGUS does:

* (n, k) dominance: the n largest contributors, knowing their own values, must not learn that
  they hold k % or more of the cell: the upper bound must reach (100/k)·(x1 + … + xn), so
  U = (100/k)·(x1 + … + xn) − X = X·(d_n·100/k − 1), with d_n the share of the n largest;
* p %: U = p/100·x1 − (X − x1 − x2) = X·(d2 + p/100·d1 − 1) (the second largest contributor
  must not estimate the largest to within p %);
* pq: as p % with p/q in place of p/100.

Each is applied both ways (L = U, symmetric, as tau-ARGUS and GaussSuppression's
``protectionIntervals``) and is 0 for a cell the rule does not flag. Several sources of
requirement are combined by taking the largest distance of each kind (GaussSuppression takes
the smallest lower bound and the largest upper bound and width). Below, the lower target is
capped at the lowest value the cell can take (0 for inner cells of 0 or more), as
GaussSuppression's ``lomax = max(0, z − dev)``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from protab.errors import SpecError

__all__ = ["ProtectionLevels", "rule_levels"]


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        raise SpecError(f"ProtectionLevels: {name} must be a finite number of 0 or more, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class ProtectionLevels:
    """Required protection of every primary cell (distances from its value z).

    Upper: the interval must reach z + max(percent/100·|z|, limit). Lower: it must reach
    z − max(lower_percent/100·|z|, lower_limit) (by default the upper values: symmetric).
    Range (sliding protection): up − lo ≥ max(range_percent/100·|z|, range_min). ``rules``:
    also the levels of the table's p %, pq and dominance rules (module docstring), for
    magnitude tables. All numbers are 0 or more; 0 means no requirement of that kind.
    """

    percent: float = 0.0
    limit: float = 0.0
    lower_percent: float | None = None
    lower_limit: float | None = None
    range_percent: float = 0.0
    range_min: float = 0.0
    rules: bool = False

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "rules":
                if not isinstance(value, bool):
                    raise SpecError(f"ProtectionLevels: rules must be True or False, got {value!r}")
            elif value is not None or not f.name.startswith("lower_"):
                object.__setattr__(self, f.name, _number(value, f.name))

    @property
    def empty(self) -> bool:
        """Whether no requirement is set (beside not being exactly disclosed)."""
        nums = (self.percent, self.limit, self.lower_percent or 0.0, self.lower_limit or 0.0,
                self.range_percent, self.range_min)
        return not self.rules and not any(nums)

    def distances(self, z: Any, primary: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(L, U, R) per cell from the numbers (not the rules): 0 at non-primary cells."""
        zz = np.abs(np.asarray(z, dtype=np.float64))
        prim = np.asarray(primary, dtype=bool)
        lo_pct = self.percent if self.lower_percent is None else self.lower_percent
        lo_lim = self.limit if self.lower_limit is None else self.lower_limit
        up = np.maximum(zz * self.percent / 100.0, self.limit)
        lo = np.maximum(zz * lo_pct / 100.0, lo_lim)
        rng = np.maximum(zz * self.range_percent / 100.0, self.range_min)
        return tuple(np.where(prim, a, 0.0) for a in (lo, up, rng))  # type: ignore[return-value]


def rule_levels(rules: Any, z: Any, shares: dict[int, Any]) -> np.ndarray:
    """The symmetric protection level of the magnitude rules per cell (module docstring).

    ``rules``: a :class:`protab.SensitivityRules`; ``z``: the cells' values; ``shares``: the
    share of the n largest contributions per cell for every n the rules read (``d_n``, as
    ``Session.sensitivity(diagnostics=True)`` gives them in ``<sum>_dominance_<n>``). The level
    of a cell no rule flags is 0."""
    zz = np.abs(np.asarray(z, dtype=np.float64))
    part = np.zeros(zz.shape)

    def share(n: int) -> np.ndarray:
        if n not in shares:
            raise SpecError(f"rule_levels: the share of the {n} largest contributions is needed")
        return np.nan_to_num(np.asarray(shares[n], dtype=np.float64), nan=0.0)

    for n, k in rules.dominance:
        part = np.maximum(part, share(int(n)) * 100.0 / float(k) - 1.0)
    ratios = []
    if rules.p_percent is not None:
        ratios.append(float(rules.p_percent) / 100.0)
    if rules.pq is not None:
        ratios.append(float(rules.pq[0]) / float(rules.pq[1]))
    for r in ratios:
        part = np.maximum(part, share(2) + r * share(1) - 1.0)
    return zz * np.maximum(part, 0.0)
