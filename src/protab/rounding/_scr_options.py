"""The options of small count rounding (:func:`protab.rounding.small_count_matrix`), checked:
SmallCountRounding's parameters max_round, identify_new, zero_candidates, force_inner,
pre_rounded, step and leverage_check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from protab.errors import InputError
from protab.rounding._rounding_inputs import counts

Step = tuple[int, int, int]


@dataclass(frozen=True)
class _Options:
    """Checked options: ``M`` = max_round + 1; ``zc`` zero candidates and ``fi`` forced inner
    cells (masks); ``fixed`` the pre-rounded cells and ``pre_vals`` their values (None: none);
    ``lev_limit`` the leverage limit (None: no leverage check); the steps of the main passes,
    of the re-run (None: none) and of the passes caused by the checks."""

    M: int
    zc: np.ndarray
    fi: np.ndarray
    lev_limit: float | None
    steps_main: Step
    steps_rerun: Step | None
    steps_check: Step
    fixed: np.ndarray
    pre_vals: np.ndarray | None


def _options(yv: np.ndarray, b: int, max_round: Any, small_penalty: float, identify_new: Any, zero_candidates: Any,
             force_inner: Any, leverage_check: Any, step: Any, pre_rounded: Any) -> _Options:
    """The options of small count rounding of the inner counts ``yv`` to base ``b``, checked in
    the order of the parameters (InputError naming the first at fault)."""
    n = yv.size
    mr = b - 1 if max_round is None else max_round
    if isinstance(mr, bool) or not isinstance(mr, (int, np.integer)) or mr < b - 1:
        raise InputError(f"max_round must be an integer >= base - 1 ({b - 1}), got {max_round!r}")
    if small_penalty < 0 or not np.isfinite(small_penalty):
        raise InputError("small_penalty must be a finite number >= 0")
    if identify_new not in (True, False, None):
        raise InputError(f"identify_new must be True, False or None, got {identify_new!r}")
    zc = _mask(zero_candidates, n, "zero_candidates") & (yv % b == 0)
    fi = _mask(force_inner, n, "force_inner")
    lev_limit = _leverage_limit(leverage_check)
    steps_main, steps_rerun, steps_check = _steps(step)
    fixed, pre_vals = _pre_rounded(pre_rounded, n)
    return _Options(int(mr) + 1, zc, fi, lev_limit, steps_main, steps_rerun, steps_check, fixed, pre_vals)


def _leverage_limit(leverage_check: Any) -> float | None:
    """True: 0.999999; False: None (no check); a number > 0: that limit."""
    if isinstance(leverage_check, (bool, np.bool_)):
        return 0.999999 if leverage_check else None
    if isinstance(leverage_check, (int, float, np.floating)) and 0 < leverage_check:
        return float(leverage_check)
    raise InputError(f"leverage_check must be True/False or a leverage limit > 0, got {leverage_check!r}")


def _pre_rounded(pre_rounded: Any, n: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The cells with a predetermined rounded value (not NaN) and those values (None: none)."""
    if pre_rounded is None:
        return np.zeros(n, dtype=bool), None
    pr = np.asarray(pre_rounded, dtype=np.float64).ravel()
    if pr.size != n:
        raise InputError(f"pre_rounded must have one value (or NaN) per inner cell ({n}), got {pr.size}")
    fixed = ~np.isnan(pr)
    return fixed, counts(pr[fixed], "pre_rounded")


def _mask(value: Any, n: int, name: str) -> np.ndarray:
    """A per-inner-cell boolean option: a bool for all cells or a boolean vector of length n."""
    if isinstance(value, (bool, np.bool_)):
        return np.full(n, bool(value))
    a = np.asarray(value)
    if a.shape != (n,) or a.dtype.kind not in "biu":
        raise InputError(f"{name} must be True/False or a boolean vector with one value per inner cell ({n})")
    return a.astype(bool)


def _steps(step: Any) -> tuple[tuple[int, int, int], tuple[int, int, int] | None, tuple[int, int, int]]:
    """R's step parameter: a number or (forward, backward, final) numbers, or a list of up to
    three such settings for the main passes, a final re-run (None: none) and the passes
    caused by easy_check / leverage_check."""

    def one(v: Any) -> tuple[int, int, int]:
        try:
            scalar = np.isscalar(v)  # not in the if: its TypeGuard narrows v to types int() may refuse (caught)
            vals = [int(v)] if scalar else [int(x) for x in v]
        except (TypeError, ValueError) as exc:
            raise InputError(f"step: expected a number >= 0 or up to three of them, got {v!r}") from exc
        if not vals or len(vals) > 3 or any(x < 0 for x in vals):
            raise InputError(f"step: expected a number >= 0 or up to three of them, got {v!r}")
        s1 = max(1, vals[0])
        s2 = vals[1] if len(vals) >= 2 else int(np.round(s1 / 2))
        s3 = vals[2] if len(vals) >= 3 else s1
        return s1, s2, max(1, s3)

    if isinstance(step, list):
        if not 1 <= len(step) <= 3:
            raise InputError("step as a list takes one to three settings (main, re-run, checks)")
        full = [step[k % len(step)] for k in range(3)]  # recycled to three, as R's rep_len
        if full[0] is None:
            raise InputError("step: the first setting of the list cannot be None")
        return one(full[0]), (None if full[1] is None else one(full[1])), one(full[2] if full[2] is not None else full[0])
    return one(step), None, one(step)
