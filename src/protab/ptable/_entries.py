"""What count and magnitude p-tables share as tables of entries: equality across
denominators, the entries for the writers, the moments of each row, and the refusal of
maximum-entropy rows whose variance stays above V."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import polars as pl

from protab.errors import PTableError
from protab.ptable._values import _name_i


def same_entries(
    a: pl.DataFrame, b: pl.DataFrame, cols: Sequence[str], den_a: int, den_b: int
) -> bool:
    """Two p-table frames hold the same entries: equal ``cols`` and the same intervals
    (lb_n/den_a = lb_n/den_b exactly, likewise ub_n)."""
    if a.height != b.height:
        return False
    if any(a[c].to_list() != b[c].to_list() for c in cols):
        return False
    return all(
        x * den_b == y * den_a
        for col in ("lb_n", "ub_n")
        for x, y in zip(a[col].to_list(), b[col].to_list())
    )


class _EntryTable:
    """What PTable and MagnitudePTable share as objects: ``frame`` holds the entries with
    integer bounds lb_n, ub_n over ``den``; len() counts the entries, str() is repr(), and the
    tables are unhashable (``==`` compares contents). Each class's ``__eq__`` checks its own
    type and settings, then :meth:`_same_entries`."""

    frame: pl.DataFrame
    den: int
    #: The columns ``==`` compares besides the intervals.
    _EQ_COLUMNS: tuple[str, ...] = ("i", "v")

    def __len__(self) -> int:
        return self.frame.height

    def __str__(self) -> str:
        return repr(self)

    def _same_entries(self, other: "_EntryTable") -> bool:
        """The same entries: equal _EQ_COLUMNS and intervals (compared exactly across
        denominators)."""
        return same_entries(self.frame, other.frame, self._EQ_COLUMNS, self.den, other.den)

    __hash__ = None  # type: ignore[assignment]


def entries(frame: pl.DataFrame) -> Iterator[tuple[Any, ...]]:
    """The entries (i, j, v, lb_n, ub_n) of a p-table frame, one tuple each, for the writers."""
    return zip(*(frame[c].to_list() for c in ("i", "j", "v", "lb_n", "ub_n")))


def row_moments(frame: pl.DataFrame, den: int, reached: dict[Any, bool] | None) -> pl.DataFrame:
    """Per i of a p-table frame (integer bounds over ``den``): p_mean (Σ p v), p_var (Σ p v²,
    the variance when p_mean = 0, as R ptable's empResults), p_sum, p_stay (p of v = 0) and,
    given ``reached``, var_reached (null where a row has no entry in it)."""
    w = pl.col("ub_n") - pl.col("lb_n")
    out = (
        frame.group_by("i")
        .agg(
            (w * pl.col("v")).sum().alias("m1"),
            (w * pl.col("v") * pl.col("v")).sum().alias("m2"),
            w.sum().alias("m0"),
            (w * (pl.col("v") == 0)).sum().alias("s"),
        )
        .sort("i")
        .select(
            "i",
            (pl.col("m1") / den).alias("p_mean"),
            (pl.col("m2") / den).alias("p_var"),
            (pl.col("m0") / den).alias("p_sum"),
            (pl.col("s") / den).alias("p_stay"),
        )
    )
    if reached is not None:
        out = out.with_columns(
            pl.Series("var_reached", [reached.get(i) for i in out["i"].to_list()], dtype=pl.Boolean)
        )
    return out


def refuse_variance_above(
    frame: pl.DataFrame, den: int, reached: dict[Any, bool], V: float, infeasible: str, what: str, fix: str
) -> None:
    """PTableError naming the rows of a maximum-entropy table whose smallest attainable
    variance is above V (``fix`` says which parameters to change), unless
    ``infeasible='warn'``. R ptable's pt_create_pTable stops for such rows ("The variance
    parameter you set is too small!"). The parameters are secrets: the message names
    neither them nor the smallest V that works, and says where the caller finds it."""
    if infeasible == "warn" or all(reached.values()):
        return
    m = row_moments(frame, den, None)
    above = [i for i, var in zip(m["i"].to_list(), m["p_var"].to_list()) if reached.get(i) is False and var > V]
    if above:
        raise PTableError(
            f"{what}: no distribution of {_name_i(above)} keeps its variance within V (the other "
            f"constraints leave those rows a larger smallest variance; R ptable stops here too). "
            f"{fix}. The smallest V that works is the largest p_var of those rows in the "
            "diagnostics of the table built with infeasible='warn', which keeps those rows at "
            "their smallest variance, above V"
        )
