"""The rows of a count p-table checked and laid out: integer intervals (i, v, lb_n, ub_n) over
den that tile [0, 1) for every i from the smallest to imax, adjacent equal noise merged, and
the frame (i, j, p, v, lb, ub, lb_n, ub_n) of :class:`protab.ptable.PTable`."""

from __future__ import annotations

import numpy as np
import polars as pl

from protab.errors import PTableError
from protab.ptable._values import _FRAME_SCHEMA, _INTERVALS, _is_integral, _name_i


def count_frame(
    core: pl.DataFrame, den: int, imax: int | None, period: int, interval: str
) -> tuple[pl.DataFrame, int, int]:
    """Validate (i, v, lb_n, ub_n) over den, merge adjacent equal noise: (frame, imax, period)."""
    if interval not in _INTERVALS:
        raise PTableError(f"interval must be one of {_INTERVALS}, not {interval!r}")
    if not _is_integral(period) or int(period) < 1:
        raise PTableError("period must be an integer >= 1")
    period = int(period)
    if core.height == 0:
        raise PTableError("the p-table has no rows; it needs at least one row per i")
    _refuse_bad_rows(core, den)
    core = core.filter(pl.col("ub_n") > pl.col("lb_n")).sort(["i", "lb_n", "ub_n"], maintain_order=True)
    _refuse_gaps_and_overlaps(core, den)
    imax = _checked_imax(core, imax, period)
    frame = _merged(core).select(
        pl.col("i"),
        (pl.col("i") + pl.col("v")).alias("j"),
        ((pl.col("ub_n") - pl.col("lb_n")) / den).alias("p"),
        pl.col("v"),
        (pl.col("lb_n") / den).alias("lb"),
        (pl.col("ub_n") / den).alias("ub"),
        pl.col("lb_n"),
        pl.col("ub_n"),
    ).cast(_FRAME_SCHEMA)  # type: ignore[arg-type]
    return frame, imax, period


def _refuse_bad_rows(core: pl.DataFrame, den: int) -> None:
    """PTableError for negative outcomes or original values, intervals running downward and
    bounds outside [0, 1], naming the rows' i."""
    bad = core.filter(pl.col("i") + pl.col("v") < 0)
    if bad.height:
        raise PTableError(
            "p-table has negative outcomes j = i + v < 0 for "
            f"{_name_i(bad['i'].to_list())} ({bad.height} rows); "
            "a count must not be perturbed below zero — remove or fix those rows"
        )
    bad = core.filter(pl.col("i") < 0)
    if bad.height:
        raise PTableError(f"p-table has negative original values {_name_i(bad['i'].to_list())}; i >= 0")
    bad = core.filter(pl.col("ub_n") < pl.col("lb_n"))
    if bad.height:
        raise PTableError(
            "p-table has intervals with ub < lb (negative width) for "
            f"{_name_i(bad['i'].to_list())}; each interval must run upward"
        )
    bad = core.filter((pl.col("lb_n") < 0) | (pl.col("ub_n") > den))
    if bad.height:
        raise PTableError(
            "p-table has interval bounds outside [0, 1] for "
            f"{_name_i(bad['i'].to_list())}; bounds must lie in [0, 1]"
        )


def _refuse_gaps_and_overlaps(core: pl.DataFrame, den: int) -> None:
    """PTableError unless the intervals of each i (sorted by lb) tile [0, den)."""
    chk = core.with_columns(
        prev_ub=pl.col("ub_n").shift(1).over("i"),
        last_ub=pl.col("ub_n").last().over("i"),
    )
    not_from_zero = chk.filter(pl.col("prev_ub").is_null() & (pl.col("lb_n") != 0))
    not_to_one = chk.filter(pl.col("last_ub") != den)
    gaps = chk.filter(pl.col("lb_n") > pl.col("prev_ub"))
    overlaps = chk.filter(pl.col("lb_n") < pl.col("prev_ub"))
    for rows, what in (
        (not_from_zero, "intervals that do not start at 0"),
        (not_to_one, "intervals that do not end at 1 (probabilities do not sum to 1)"),
        (gaps, "gaps between intervals"),
        (overlaps, "overlapping intervals"),
    ):
        if rows.height:
            raise PTableError(
                f"p-table intervals are not a partition of [0, 1): {what} for "
                f"{_name_i(rows['i'].to_list())}; the intervals of each i must tile "
                "[0, 1) without gap or overlap (sorted by lb, each ub = next lb)"
            )


def _checked_imax(core: pl.DataFrame, imax: int | None, period: int) -> int:
    """imax (the largest i, or PTableError when given otherwise), checked: rows for every i
    from the smallest to imax, and the ``period`` rows repeated above imax."""
    ivals = np.unique(core["i"].to_numpy())
    imin, top = int(ivals[0]), int(ivals[-1])
    if imax is None:
        imax = top
    elif not _is_integral(imax) or int(imax) != top:
        raise PTableError(
            "imax must equal the largest i of the p-table (rows past imax are not used); "
            "leave imax=None to take it from the table"
        )
    imax = int(imax)
    missing = sorted(set(range(imin, imax + 1)) - set(ivals.tolist()))
    if missing:
        raise PTableError(
            f"p-table lacks rows for {_name_i(missing)}: every i from the smallest to imax needs its rows"
        )
    base = imax - period + 1
    if base < imin or (period > 1 and base < 1):
        raise PTableError(
            "period is too long for this p-table: the repeated rows imax - period + 1 .. "
            "imax must all exist (and start at i >= 1 when period > 1)"
        )
    return imax


def _merged(core: pl.DataFrame) -> pl.DataFrame:
    """Adjacent intervals of one i with the same noise merged into one."""
    run = ((pl.col("v") != pl.col("v").shift(1)) | (pl.col("i") != pl.col("i").shift(1))).fill_null(True).cum_sum()
    return (
        core.with_columns(_run=run)
        .group_by("_run", maintain_order=True)
        .agg(
            pl.col("i").first(),
            pl.col("v").first(),
            pl.col("lb_n").min(),
            pl.col("ub_n").max(),
        )
        .drop("_run")
    )
