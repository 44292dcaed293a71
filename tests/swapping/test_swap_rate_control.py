"""Record swapping's rate control: when the risky households alone take the achieved swap rate
past the requested one, swap warns (SwapRateWarning) and the summary says so (requested rate,
risky share, achieved rate); SwapSpec(max_swap_rate=...) caps the achieved rate, swapping the
riskiest households first and logging the rest (reason 'cap'). Risk and swap levels are
recomputed here independently of protab."""

from __future__ import annotations

import math
import warnings
from collections import Counter, defaultdict

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from protab.errors import SpecError
from protab.swapping import SwapRateWarning, SwapSpec, swap

SEED = "not-a-real-secret-5e2b"
GEO = ("region", "muni", "grid")


def population(seed: int, n_hh: int) -> pa.Table:
    """Households of 1-4 persons in 3 regions > 4 municipalities > 4 squares."""
    rng = np.random.default_rng(seed)
    size = rng.integers(1, 5, n_hh)
    reg = rng.integers(3, size=n_hh)
    mun = reg * 10 + rng.integers(4, size=n_hh)
    grid = mun * 10 + rng.integers(4, size=n_hh)
    rep = np.repeat(np.arange(n_hh), size)
    n = int(size.sum())
    return pa.table({
        "hid": 1000 + rep, "region": reg[rep], "muni": mun[rep], "grid": grid[rep], "hsize": size[rep],
        "sex": rng.integers(2, size=n), "age": rng.integers(4, size=n), "inc": rng.integers(5, size=n),
    })


def spec(risk_variables=("sex", "age", "inc"), **kw) -> SwapSpec:
    args = dict(household="hid", geography=GEO, risk_variables=risk_variables, similar=[("hsize",)],
                swap_rate=0.1, k_anonymity=3)
    args.update(kw)
    return SwapSpec(**args)


def run(data: pa.Table, s: SwapSpec, seed: str = SEED) -> tuple[duckdb.DuckDBPyConnection, dict]:
    con = duckdb.connect()
    con.register("_src", data)
    con.execute("CREATE TABLE persons AS SELECT * FROM _src")
    con.unregister("_src")
    summary = swap(con, "persons", s, seed=seed, out="out", log="log")
    return con, summary


def levels_and_risk(data: pa.Table, s: SwapSpec) -> tuple[dict[int, int], dict[tuple[int, int], float]]:
    """Independently: each household's swap level (first level where a member's count of its
    risk-variable combination in its area is below k; len(geography) if none) and its risk
    (1 / smallest member count) per level."""
    cols = data.to_pydict()
    L = len(s.geography)
    level: dict[int, int] = defaultdict(lambda: L)
    risk: dict[tuple[int, int], float] = defaultdict(float)
    for h in range(L):
        keys = list(zip(*(cols[c] for c in (*s.risk_variables, *s.geography[: h + 1]))))
        count = Counter(keys)
        for hid, key in zip(cols["hid"], keys):
            risk[hid, h] = max(risk[hid, h], 1.0 / count[key])
            if count[key] < s.k_anonymity:
                level[hid] = min(level[hid], h)
    return {hid: level[hid] for hid in cols["hid"]}, risk


def test_risky_households_beyond_the_rate_warn_and_the_summary_says_so():
    data = population(5, 500)
    s = spec()
    with pytest.warns(SwapRateWarning, match=r"requested swap rate 0\.1 became 0\.\d+ .* of the households .* "
                      r"are risky .*max_swap_rate") as rec:
        _, summary = run(data, s)
    levels, _ = levels_and_risk(data, s)
    risky = sum(1 for v in levels.values() if v < len(GEO))
    assert summary["risky_share"] == pytest.approx(risky / len(levels))
    assert summary["risky_share"] > 0.5  # the situation of the report: most households risky
    assert summary["requested_swap_rate"] == 0.1
    assert summary["achieved_swap_rate"] == pytest.approx(summary["swapped_households"] / len(levels))
    assert summary["achieved_swap_rate"] > 0.5
    assert summary["max_swap_rate"] is None and summary["cap_households"] is None
    assert summary["risky_over_cap"] == 0
    text = str(rec[0].message)
    assert f"{summary['achieved_swap_rate']:.3f}" in text and f"{summary['risky_share']:.1%}" in text
    assert SEED not in text


def test_no_warning_when_the_rate_is_what_was_asked():
    data = population(5, 500)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SwapRateWarning)
        _, summary = run(data, spec(k_anonymity=0))  # nobody risky: the rate alone
        assert summary["risky_share"] == 0.0
        assert summary["swapped_households"] <= summary["target_households"] + 1
        _, capped = run(data, spec(max_swap_rate=0.2))  # many risky, but capped as asked
        assert capped["risky_over_cap"] > 0


@pytest.mark.parametrize("cap", [0.1, 0.25])
def test_the_cap_limits_the_rate_and_swaps_the_riskiest_first(cap):
    data = population(5, 500)
    s = spec(max_swap_rate=cap)
    con, summary = run(data, s)
    levels, risk = levels_and_risk(data, s)
    n = len(levels)
    assert summary["cap_households"] == math.ceil(cap * n)
    assert summary["cap_households"] - 1 <= summary["swapped_households"] <= summary["cap_households"]
    log = con.execute("SELECT hid, partner, level, reason, role, swapped FROM log").fetchall()
    capped = {r[0]: r[2] for r in log if r[3] == "cap"}
    assert all(r[1] is None and not r[5] and r[4] is None for r in log if r[3] == "cap")
    assert len(capped) == summary["risky_over_cap"] > 0
    risky = {hid for hid, v in levels.items() if v < len(GEO)}
    assert summary["risky_households"] == len(risky)
    assert summary["risky_swapped"] + summary["risky_without_donor"] + summary["risky_over_cap"] == len(risky)
    # households left by the cap are risky, logged at their own swap level; no household risky at
    # a coarser level is left by the cap, and at the level where the cap bit, every recipient swapped
    # for risk is at least as risky as every household left
    assert all(levels[hid] == lv for hid, lv in capped.items())
    first = min(capped.values())
    assert {hid for hid in risky if levels[hid] < first} <= {r[0] for r in log if r[3] == "risk"}
    recipients = [r[0] for r in log if r[3] == "risk" and r[4] == "recipient" and r[2] == first]
    assert recipients
    assert min(risk[h, first] for h in recipients) >= max(risk[h, first] for h in capped if capped[h] == first)
    # households left by the cap keep their geography; swapped ones took their partner's
    before = {r[0]: r[1:] for r in con.execute("SELECT DISTINCT hid, region, muni, grid FROM persons").fetchall()}
    after = {r[0]: r[1:] for r in con.execute("SELECT DISTINCT hid, region, muni, grid FROM out").fetchall()}
    assert len(after) == n  # every household moved whole
    assert all(after[h] == before[h] for h in capped)
    partners = {r[0]: r[1] for r in log if r[5]}
    assert all(after[h] == before[p] for h, p in partners.items())


def test_a_cap_equal_to_the_rate_swaps_that_share_of_households():
    data = population(8, 400)
    _, summary = run(data, spec(max_swap_rate=0.1))
    target = math.ceil(0.1 * 400)
    assert summary["cap_households"] == target == summary["target_households"]
    assert target - 1 <= summary["swapped_households"] <= target
    assert summary["risky_over_cap"] > 0 and summary["top_up_pairs"] == 0  # risky households fill the cap


def test_the_capped_swap_is_deterministic_under_the_seed():
    data = population(9, 400)
    s = spec(max_swap_rate=0.15)
    got = []
    for seed in (SEED, SEED, SEED + "x"):
        con, _ = run(data, s, seed)
        got.append((con.execute("FROM out").fetchall(), con.execute("FROM log ORDER BY hid").fetchall()))
    assert got[0] == got[1]
    assert got[0][1] != got[2][1]


def test_a_cap_that_does_not_bind_changes_nothing():
    # few risky households (sex and hsize only): twice their number stays below the cap, so the
    # capped run makes the very same swaps as the uncapped one
    data = population(5, 500)
    base = dict(risk_variables=("sex",), swap_rate=0.05)
    con0, s0 = run(data, spec(**base))
    con1, s1 = run(data, spec(**base, max_swap_rate=0.9))
    assert 0 < 2 * s0["risky_households"] < s1["cap_households"]
    assert con0.execute("FROM out").fetchall() == con1.execute("FROM out").fetchall()
    assert con0.execute("FROM log").fetchall() == con1.execute("FROM log").fetchall()
    assert s1["risky_over_cap"] == 0
    assert {k: v for k, v in s0.items() if k not in ("max_swap_rate", "cap_households")} == {
        k: v for k, v in s1.items() if k not in ("max_swap_rate", "cap_households")
    }


@pytest.mark.parametrize("cap", [0.05, 1.2, -1, float("nan"), True, "0.5"])
def test_max_swap_rate_must_lie_between_the_rate_and_1(cap):
    with pytest.raises(SpecError, match="max_swap_rate"):
        spec(swap_rate=0.1, max_swap_rate=cap)
