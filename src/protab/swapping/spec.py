"""The specification of a targeted record swap (``SwapSpec``; sdcMicro ``recordSwap``'s interface
with column names instead of indices, docs/swapping.md). Re-exported by :mod:`protab.swapping`."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from protab.errors import SpecError, show_values


def _names(value: Any, what: str, *, allow_empty: bool = True) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise SpecError(f"SwapSpec: {what} must be a list of column names, not {value!r}")
    names = tuple(value)
    bad = [v for v in names if not isinstance(v, str) or not v]
    if bad:
        raise SpecError(f"SwapSpec: {what} must hold non-empty column names; got {show_values(bad)}")
    dup = sorted({v for v in names if names.count(v) > 1})
    if dup:
        raise SpecError(f"SwapSpec: {what} names {show_values(dup)} more than once")
    if not names and not allow_empty:
        raise SpecError(f"SwapSpec: {what} must name at least one column")
    return names


def _real(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise SpecError(f"SwapSpec: {what} must be a finite number, not {value!r}")
    return float(value)


def _rates(swap_rate: Any, max_swap_rate: Any) -> tuple[float, float | None]:
    """The swap rate in (0, 1) and the optional cap on the achieved rate, in [swap_rate, 1]."""
    rate = _real(swap_rate, "swap_rate")
    if not 0.0 < rate < 1.0:
        raise SpecError(f"SwapSpec: swap_rate must lie strictly between 0 and 1, not {swap_rate!r}")
    if max_swap_rate is None:
        return rate, None
    cap = _real(max_swap_rate, "max_swap_rate")
    if not rate <= cap <= 1.0:
        raise SpecError(
            f"SwapSpec: max_swap_rate (a cap on the share of households swapped) must lie between swap_rate "
            f"({rate!r}) and 1, not {max_swap_rate!r}; leave it out (None) for no cap"
        )
    return rate, cap


def _check_risk(geography: tuple[str, ...], risk_variables: tuple[str, ...], risk: tuple[str, ...],
                threshold: float) -> None:
    if risk:
        if len(risk) != len(geography):
            raise SpecError(
                f"SwapSpec: risk must name one column per geography level ({len(geography)}), not {len(risk)}"
            )
        return
    if not risk_variables:
        raise SpecError("SwapSpec: risk_variables must name at least one column (or give risk columns)")
    if threshold > 0:
        raise SpecError(
            "SwapSpec: risk_threshold applies to given risk columns; with risk_variables the "
            "threshold is 1/k_anonymity (set k_anonymity instead)"
        )


def _check_roles(household: str, geography: tuple[str, ...], risk_variables: tuple[str, ...],
                 risk: tuple[str, ...], profiles: tuple[tuple[str, ...], ...], carry: tuple[str, ...]) -> None:
    ids = {household}
    for what, cols in (("geography", geography), ("risk_variables", risk_variables), ("risk", risk)):
        if ids & set(cols):
            raise SpecError(f"SwapSpec: the household column {household!r} cannot be in {what}")
    both = sorted(set(geography) & set(risk_variables))
    if both:
        raise SpecError(f"SwapSpec: {show_values(both)} cannot be both geography and risk variables")
    for i, p in enumerate(profiles):
        bad = sorted((set(p) & set(geography)) | (set(p) & ids))
        if bad:
            raise SpecError(
                f"SwapSpec: similar profile {i + 1} names {show_values(bad)}, the household id or geography "
                "(which the swap moves)"
            )
    if household in carry:
        raise SpecError(
            f"SwapSpec: the household column {household!r} cannot be carried along "
            "(return_swapped_id=True shows the partner's id)"
        )


def _profiles(similar: Any) -> tuple[tuple[str, ...], ...]:
    if isinstance(similar, str) or not isinstance(similar, Sequence) or not similar:
        raise SpecError(f"SwapSpec: similar must be a list of profiles (lists of column names), not {similar!r}")
    if all(isinstance(s, str) for s in similar):
        similar = (tuple(similar),)  # one profile given as a flat list, as sdcMicro allows
    return tuple(_names(p, f"similar profile {i + 1}") for i, p in enumerate(similar))


@dataclass(frozen=True)
class SwapSpec:
    """What to swap and how (sdcMicro ``recordSwap``'s interface, column names instead of indices).

    ``household``: household id column. ``geography``: area columns, coarsest first (e.g.
    region, municipality, 1 km square). ``risk_variables``: columns whose k-anonymity counts
    inside each area give the risk. ``similar``: similarity profiles, the first preferred; a
    donor agrees with its recipient on every column of the profile used (a flat list of names is
    one profile; an empty profile matches any household). ``swap_rate``: share of households
    swapped, in (0, 1). ``k_anonymity``: a household is risky at a level where some member's
    count is below k (0: none is risky). ``risk``: optional columns of risk per record, one per
    geography level, used instead of the counts (as sdcMicro's ``risk``), with
    ``risk_threshold`` (0: 1/k as sdcMicro). ``carry_along``: household columns moved with the
    geography. ``return_swapped_id``: add ``<household>_swapped``, the id of the household whose
    geography a household now has (its own when not swapped). ``max_swap_rate``: optional cap
    on the share of households swapped, at least ``swap_rate`` (None: no cap, as sdcMicro, where
    every risky household is swapped); when the risky households need more, the riskiest are
    swapped first up to the cap and the rest are logged (reason 'cap').
    """

    household: str
    geography: Sequence[str]
    risk_variables: Sequence[str]
    similar: Sequence[Sequence[str]]
    swap_rate: float = 0.05
    k_anonymity: int = 3
    risk_threshold: float = 0.0
    carry_along: Sequence[str] = ()
    risk: Sequence[str] = ()
    return_swapped_id: bool = False
    max_swap_rate: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.household, str) or not self.household:
            raise SpecError(f"SwapSpec: household must be a column name, not {self.household!r}")
        geography = _names(self.geography, "geography", allow_empty=False)
        risk_variables = _names(self.risk_variables, "risk_variables")
        risk = _names(self.risk, "risk")
        carry = _names(self.carry_along, "carry_along")
        profiles = _profiles(self.similar)
        rate, cap = _rates(self.swap_rate, self.max_swap_rate)
        k = self.k_anonymity
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:
            raise SpecError(f"SwapSpec: k_anonymity must be a whole number >= 0, not {k!r}")
        threshold = _real(self.risk_threshold, "risk_threshold")
        if threshold < 0:
            raise SpecError(f"SwapSpec: risk_threshold must be >= 0, not {self.risk_threshold!r}")
        if not isinstance(self.return_swapped_id, bool):
            raise SpecError(f"SwapSpec: return_swapped_id must be True or False, not {self.return_swapped_id!r}")
        _check_risk(geography, risk_variables, risk, threshold)
        _check_roles(self.household, geography, risk_variables, risk, profiles, carry)
        carry = tuple(c for c in carry if c not in geography)  # geography moves anyway (as sdcMicro)
        object.__setattr__(self, "geography", geography)
        object.__setattr__(self, "risk_variables", risk_variables)
        object.__setattr__(self, "risk", risk)
        object.__setattr__(self, "carry_along", carry)
        object.__setattr__(self, "similar", profiles)
        object.__setattr__(self, "swap_rate", rate)
        object.__setattr__(self, "max_swap_rate", cap)
        object.__setattr__(self, "k_anonymity", int(k))
        object.__setattr__(self, "risk_threshold", threshold)

    @property
    def threshold(self) -> float:
        """The risk above which a household must be swapped (sdcMicro: 1/k; 2 when k = 0)."""
        if self.risk and self.risk_threshold > 0:
            return self.risk_threshold
        return 2.0 if self.k_anonymity == 0 else 1.0 / self.k_anonymity

    def similar_columns(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c for p in self.similar for c in p))
