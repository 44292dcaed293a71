"""Shared fixtures: small in-memory sessions with known microdata."""

from __future__ import annotations

import os

import polars as pl
import pytest
from hypothesis import settings

import protab as pt

# Property tests draw the same examples on every run (CI must not be flaky); set
# HYPOTHESIS_PROFILE=explore to draw new ones.
settings.register_profile("protab", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "protab"))


@pytest.fixture
def session():
    with pt.Session(":memory:") as s:
        yield s


@pytest.fixture
def persons() -> pl.DataFrame:
    """A small population: municipality (two regions), sex, age group, weight, income."""
    rows = []
    muni = ["R1001", "R1002", "R2001", "R2002", "R2003"]
    sexes = ["F", "M"]
    ages = ["young", "middle", "old"]
    pid = 0
    for m_i, m in enumerate(muni):
        for s_i, s in enumerate(sexes):
            for a_i, a in enumerate(ages):
                # a deterministic, uneven number of persons per inner cell (some empty)
                for _ in range((m_i * 7 + s_i * 3 + a_i * 5) % 6):
                    pid += 1
                    rows.append((pid, m, s, a, 1.0 + (pid % 5) / 10, 1000.0 * (pid % 7)))
    return pl.DataFrame(
        rows, schema=["pid", "municipality", "sex", "age", "weight", "income"], orient="row"
    )


@pytest.fixture
def h_muni() -> pt.Hierarchy:
    return pt.Hierarchy.from_code_lengths(
        ["R1001", "R1002", "R2001", "R2002", "R2003"], [2, 3]
    )
