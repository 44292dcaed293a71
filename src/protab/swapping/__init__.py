"""Targeted record swapping of whole households (docs/swapping.md), as SQL."""

from protab.swapping.record_swap import SwapRateWarning, swap
from protab.swapping.spec import SwapSpec
from protab.swapping.writing import discard_swap, persist_swap

__all__ = ["SwapRateWarning", "SwapSpec", "discard_swap", "persist_swap", "swap"]
