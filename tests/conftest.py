"""Shared fixtures: small in-memory sessions with known microdata."""

from __future__ import annotations

import os
import re

import polars as pl
import pytest
import toy_engine  # noqa: F401  (registers the toy engine of the cross-engine tests)
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


@pytest.fixture(scope="session")
def spark_connect_url(tmp_path_factory):
    """``sc://127.0.0.1:PORT`` of a Spark Connect server for the session (tests/spark_connect_fixtures.py)."""
    from spark_connect_fixtures import serve_connect

    yield from serve_connect(tmp_path_factory)


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


# -- skips that CI must not accept ------------------------------------------------------------
# The README promises tests of Spark (Java), the table builder in a browser (chromium) and
# under node, the PostgreSQL front with psql and JDBC, the duckdb command line, and the R package
# (R with reticulate and testthat). `make test` installs those
# tools when it runs as root (as CI does) and then sets PROTAB_REQUIRE_TOOLS=1: a test that is
# skipped for want of one of them fails the run instead of passing unseen.
_TOOL_SKIP = re.compile(r"not installed|Java runtime|chromium|chromedriver|psql|JDBC|needs node")
_tool_skips: list[str] = []


def pytest_runtest_logreport(report):
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2])
        # a documented block marked not run is the page's choice (its reason may name software), not a missing tool
        if _TOOL_SKIP.search(reason) and not reason.startswith("Skipped: marked not run"):
            _tool_skips.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("PROTAB_REQUIRE_TOOLS") == "1" and _tool_skips and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if os.environ.get("PROTAB_REQUIRE_TOOLS") == "1" and _tool_skips:
        terminalreporter.section("skipped for want of a tool the README promises (PROTAB_REQUIRE_TOOLS=1)")
        for line in _tool_skips:
            terminalreporter.write_line(line)


# -- the fast inner loop (`make check`) -------------------------------------------------------
# Tests of the Spark engine (tests/spark/, or any test using a Spark fixture) are marked
# `spark`, the table builder's browser tests (modules that import browser_fixtures) `browser`;
# the long end-to-end runs, brute forces and large property tests `slow` (marked at the test);
# `make check` leaves the three out (`-m "not spark and not browser and not slow"`), `make test`
# runs all.
def pytest_configure(config):
    config.addinivalue_line("markers", "spark: runs on a local Spark (a JVM); left out by make check")
    config.addinivalue_line("markers", "browser: drives chromium; left out by make check")
    config.addinivalue_line("markers", "slow: a long end-to-end run, brute force or large property test; left out by make check")


def pytest_collection_modifyitems(config, items):
    for item in items:
        parts = item.path.parts
        if "spark" in parts[parts.index("tests") + 1:-1] if "tests" in parts else False:
            item.add_marker(pytest.mark.spark)
        elif any("spark" in name for name in getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.spark)
        if getattr(item, "module", None) is not None and hasattr(item.module, "browser_fixtures"):
            item.add_marker(pytest.mark.browser)
