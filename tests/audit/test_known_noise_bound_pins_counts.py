"""With the noise bound D known, published cell-key counts can pin true counts exactly (the ESS
guidelines' warning about publishing D): a margin published as 0 over inner cells published
as 1 and 3."""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy import sparse

import protab as pt

# Two inner cells a, b with true count 1 each; their margin (true 2) is published as 0
# (noise −2), a as 1 (noise 0) and b as 3 (noise +2); D = 2, empty cells stay 0.
# By hand: the margin's 0 says a + b ∈ [0 − 2, 0 + 2] ∩ [0, ∞) = [0, 2];
# b's 3 says b ∈ [1, 5]; a's 1 says a ∈ [0, 3], and as a non-zero count comes only from a
# non-empty cell, a ≥ 1. So a ≥ 1, b ≥ 1, a + b ≤ 2: a = b = 1, and the margin = 2.
X = sparse.csc_array(np.array([[1, 0, 1], [0, 1, 1]]))  # inner a, b × published a, b, Total
PUBLISHED = pl.DataFrame({"x": ["a", "b", "Total"], "x_level": [1, 1, 0]})
INNER = pl.DataFrame({"x": ["a", "b"]})
TABLE = pl.DataFrame({"x": ["Total", "a", "b"], "x_level": [0, 1, 1], "n_pert": [0, 1, 3]})


def _cells(out: pl.DataFrame) -> dict[tuple[str | None, str], tuple[int, int, bool]]:
    return {(r["table"], r["x"]): (r["lo"], r["up"], r["disclosed"]) for r in out.iter_rows(named=True)}


def test_both_inner_counts_are_disclosed_as_one():
    got = _cells(pt.audit.feasibility({"t": TABLE}, X, PUBLISHED, INNER, D=2))
    assert got[(None, "a")] == (1, 1, True)
    assert got[(None, "b")] == (1, 1, True)
    assert got[("t", "Total")] == (2, 2, True)  # the margin's true value is disclosed too


def test_if_empty_cells_could_move_the_first_cell_is_not_pinned():
    # a's 1 could then come from an empty cell: a ∈ [0, 1]; b ∈ [1, 2] (b ≥ 3 − 2, a + b ≤ 2).
    got = _cells(pt.audit.feasibility({"t": TABLE}, X, PUBLISHED, INNER, D=2, zeros_perturbed=True))
    assert got[(None, "a")] == (0, 1, False)
    assert got[(None, "b")] == (1, 2, False)


def test_a_pinned_small_count_is_flagged_and_a_wide_interval_is_not():
    out = pt.audit.feasibility({"t": TABLE}, X, PUBLISHED, INNER, D=2, zeros_perturbed=True)
    flags = {(r["table"], r["x"]): (r["small"], r["risky"]) for r in out.iter_rows(named=True)}
    assert flags[(None, "b")] == (True, True)  # b ∈ [1, 2]: a count of 1 or 2 for sure
    assert flags[(None, "a")] == (False, False)  # a ∈ [0, 1] may be empty


def test_a_larger_noise_bound_hides_the_counts():
    # D = 3: a + b ≤ 3, b ∈ [1, 6], a ≥ 1: a ∈ [1, 2], b ∈ [1, 2] (still pinned to 1–2, not exact).
    got = _cells(pt.audit.feasibility({"t": TABLE}, X, PUBLISHED, INNER, D=3))
    assert got[(None, "a")] == (1, 2, False) and got[(None, "b")] == (1, 2, False)


def test_the_support_of_the_ptable_narrows_the_interval():
    # one cell published as 5; deviations −2..+2: true ∈ [3, 7]; only −2, −1, 0: true ∈ [5, 7]
    one = sparse.csc_array(np.array([[1]]))
    frame = pl.DataFrame({"x": ["a"], "x_level": [1]})
    table = frame.with_columns(pl.lit(5).alias("n_pert"))
    both = pt.audit.feasibility({"t": table}, one, frame, frame.select("x"), D=2).filter(pl.col("table") == "t")
    down = pt.audit.feasibility({"t": table}, one, frame, frame.select("x"), D=2, support=[-2, -1, 0])
    assert both.select("lo", "up").row(0) == (3, 7)
    assert down.filter(pl.col("table") == "t").select("lo", "up").row(0) == (5, 7)


def test_linked_tables_disclose_what_each_alone_does_not():
    # the same cells as two tables: the margin alone says Total ∈ [0, 2]; the cells alone say
    # a ∈ [1, 3] (non-zero, 1 + 2) and b ∈ [1, 5]; only together are a = b = 1 and Total = 2.
    tables = {"cells": TABLE.filter(pl.col("x") != "Total"), "total": TABLE.filter(pl.col("x") == "Total")}
    out = pt.audit.feasibility(tables, X, PUBLISHED, INNER, D=2, alone=True).filter(pl.col("table").is_not_null())
    got = {(r["table"], r["x"]): (r["lo"], r["up"], r["lo_alone"], r["up_alone"]) for r in out.iter_rows(named=True)}
    assert got[("cells", "a")] == (1, 1, 1, 3)
    assert got[("cells", "b")] == (1, 1, 1, 5)
    assert got[("total", "Total")] == (2, 2, 0, 2)
