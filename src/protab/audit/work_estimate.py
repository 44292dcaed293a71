"""How long the audit's linear programs will take, estimated before they are solved, and the
refusal of a run past its budget (docs/audit.md, Limits).

The cost of the audit is the LPs over its blocks (protab.audit.lp_intervals): per block with
rows, at least the two LPs of the block's sum and a few LPs that push every open end at once,
then one LP per end no solution has met. The seconds of one LP grow faster than its size; the
model below was calibrated on a shared two-core machine (benchmarks/audit_scale.py): HiGHS's
interior point method (with crossover) took 0.8 s for one LP of a 20 × 20 × 20 table with all
margins (8 000 cells, 56 000 non-zeros) and 310 s for a 50 × 50 × 40 one (10⁵ cells, 7 × 10⁵
non-zeros); a small LP costs about 20 ms with scipy's overhead. The estimate is a lower bound:
open ends are known only once the first LPs are solved, when the budget is checked again.
"""

from __future__ import annotations

import math

import numpy as np

from protab.errors import InputError

__all__ = ["FIRST_LPS", "Budget", "lp_seconds", "show_estimate"]

FIRST_LPS = 4  # LPs a block with rows takes at least: min and max of its sum, two spreading rounds
_REF_NNZ, _REF_SECONDS, _POWER = 56_000.0, 0.8, 2.35
_FLOOR = 0.02  # seconds of the smallest LP (scipy and HiGHS overhead)
_SHOW = 10.0  # estimates past this many seconds are shown on stderr when progress is on


def lp_seconds(nnz: np.ndarray | float) -> np.ndarray | float:
    """Estimated seconds of one LP over a block of ``nnz`` constraint non-zeros."""
    return np.maximum(_FLOOR, _REF_SECONDS * (np.asarray(nnz, dtype=np.float64) / _REF_NNZ) ** _POWER)


class Budget:
    """The seconds an audit may spend on LPs; None = no limit. ``check`` refuses past it."""

    def __init__(self, seconds: float | None):
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                    or not math.isfinite(seconds) or seconds <= 0):
            raise InputError(f"feasibility audit: budget must be a positive number of seconds or None, not {seconds!r}")
        self.seconds = None if seconds is None else float(seconds)
        self.spent = 0.0
        self.lps = 0  # LPs solved so far

    def check(self, estimate: float, lps: int, cells: int) -> None:
        """Refuse when ``estimate`` more seconds (``lps`` LPs over blocks of up to ``cells`` inner
        cells) would take the run past its budget."""
        if self.seconds is None or self.spent + estimate <= self.seconds:
            return
        left = max(self.seconds - self.spent, 0.0)
        raise InputError(
            f"feasibility audit: the estimated work is at least {_show(estimate)} ({lps:,} linear programs over "
            f"blocks of up to {cells:,} inner cells), past the budget of {_show(self.seconds)}"
            + (f" ({_show(left)} left)" if self.spent else "")
            + "; raise the budget (budget=SECONDS in Python, --budget SECONDS with protab audit, budget=None or "
              "--budget 0 for no limit) or audit fewer or smaller tables (docs/audit.md, Limits)")


def show_estimate(estimate: float, lps: int) -> None:
    """A line on stderr for long runs, when progress is shown (protab._progress)."""
    import sys

    from protab import _progress

    if estimate >= _SHOW and _progress.enabled():
        print(f"feasibility audit: about {_show(estimate)} for at least {lps:,} linear programs", file=sys.stderr)


def _show(seconds: float) -> str:
    return f"{seconds:,.0f} s" if seconds < 120 else f"{seconds / 60:,.0f} min"
