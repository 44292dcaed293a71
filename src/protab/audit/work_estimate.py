"""How long the audit's linear programs will take, estimated before they are solved, and the
refusal of a run past its budget (docs/audit.md, Limits).

The cost of the audit is the LPs over its blocks (protab.audit.lp_intervals): per block with
rows, a few LPs that push every open end at once, solved cold by HiGHS's interior point method
(with crossover), then one LP per end no solution has met, solved by the primal simplex from
the block's last optimal basis (a warm start, a fraction of a cold LP). The seconds of one LP
grow faster than its size; the model below was calibrated with highspy on a shared two-core
machine (benchmarks/audit_scale.py): a cold LP took about 0.35 s for a 20 × 20 × 20 table with
all margins (8 000 cells, 56 000 non-zeros) and 12 to 60 s for a 50 × 50 × 40 one (10⁵ cells,
7 × 10⁵ non-zeros), a warm one-end LP some 0.05 s and 2 to 12 s; a small LP costs a few
milliseconds. The estimate is a lower bound: open ends are known only once the first LPs are
solved, when the budget is checked again.
"""

from __future__ import annotations

import math

import numpy as np

from protab.errors import InputError

__all__ = ["FIRST_LPS", "WARM", "Budget", "lp_seconds", "show_estimate"]

FIRST_LPS = 3  # cold LPs a block with rows takes at least in noisy tables: its spreading rounds
WARM = 0.1  # an LP from the last optimal basis (one end), as a fraction of a cold one
_REF_NNZ, _REF_SECONDS, _POWER = 56_000.0, 0.35, 1.75
_FLOOR = 0.005  # seconds of the smallest LP (highspy overhead)
_SHOW = 10.0  # estimates past this many seconds are shown on stderr when progress is on


def lp_seconds(nnz: np.ndarray | float) -> np.ndarray | float:
    """Estimated seconds of one cold LP over a block of ``nnz`` constraint non-zeros."""
    return np.maximum(_FLOOR, _REF_SECONDS * (np.asarray(nnz, dtype=np.float64) / _REF_NNZ) ** _POWER)


class Budget:
    """The seconds an audit may spend on LPs; None = no limit. ``check`` refuses past it."""

    def __init__(self, seconds: float | None):
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                    or not math.isfinite(seconds) or seconds <= 0):
            raise InputError(f"feasibility audit: budget must be a positive, finite number of seconds (None or --budget 0: "
                             f"no limit), not {seconds!r}")
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
    if seconds < 1:
        return f"{seconds:.2g} s"
    return f"{seconds:,.0f} s" if seconds < 120 else f"{seconds / 60:,.0f} min"
