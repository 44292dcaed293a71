"""Targeted record swapping (protab.swapping): worked examples checked by hand, properties on
random populations checked against an independent Python computation of the risk, and the
bad-input errors."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protab.errors import InputError, SpecError
from protab.swapping import SwapSpec, swap

SEED = "not-a-real-secret-7f3a"
GEO = ("region", "muni", "grid")


def population(seed: int, n_hh: int, n_reg: int = 3, n_mun: int = 3, n_grid: int = 3) -> pa.Table:
    """Households (1-4 persons) in region > municipality > grid, with sex, age, tenure, income."""
    rng = np.random.default_rng(seed)
    rows: dict[str, list[int]] = defaultdict(list)
    for hid in range(n_hh):
        reg = int(rng.integers(n_reg))
        mun = reg * 10 + int(rng.integers(n_mun))
        grid = mun * 10 + int(rng.integers(n_grid))
        size = int(rng.integers(1, 5))
        tenure = int(rng.integers(2))
        inc = int(rng.integers(5))
        for _ in range(size):
            for k, v in (("hid", 1000 + hid), ("region", reg), ("muni", mun), ("grid", grid), ("hsize", size)):
                rows[k].append(v)
            rows["tenure"].append(tenure)
            rows["inc"].append(inc)
            rows["sex"].append(int(rng.integers(2)))
            rows["age"].append(int(rng.integers(4)))
    return pa.table({k: pa.array(v, pa.int64()) for k, v in rows.items()})


def load(con: duckdb.DuckDBPyConnection, data: pa.Table, name: str = "persons") -> None:
    con.register("_src", data)
    con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM _src')
    con.unregister("_src")


def swap_levels(data: pa.Table, spec: SwapSpec) -> dict[int, int]:
    """Independent reference: each household's swap level (first level where some member's
    count of records with the same risk variables in its area is below k; len(geography) if none)."""
    cols = data.to_pydict()
    n = len(cols[spec.household])
    L = len(spec.geography)
    level: dict[int, int] = {}
    counts = []
    for h in range(L):
        keys = [tuple(cols[c][i] for c in (*spec.risk_variables, *spec.geography[: h + 1])) for i in range(n)]
        counts.append((keys, Counter(keys)))
    for i in range(n):
        hid = cols[spec.household][i]
        first = next((h for h in range(L) if counts[h][1][counts[h][0][i]] < spec.k_anonymity), L)
        level[hid] = min(level.get(hid, L), first)
    return level


def households(data: pa.Table, spec: SwapSpec) -> dict[int, dict[str, int]]:
    cols = data.to_pydict()
    return {hid: {c: cols[c][i] for c in cols} for i, hid in enumerate(cols[spec.household])}


def check_swap(con: duckdb.DuckDBPyConnection, data: pa.Table, spec: SwapSpec, summary: dict) -> None:
    """Every property of a swap, checked from the input, the output and the log."""
    out = con.sql("SELECT * FROM out").to_arrow_table()
    log = con.sql("SELECT * FROM log").to_arrow_table().to_pylist()
    before, after = households(data, spec), households(out, spec)
    moved = (*spec.geography, *spec.carry_along)
    stay = [c for c in data.column_names if c not in moved]
    # the same records, non-moved columns untouched (national counts of every other variable kept)
    assert out.num_rows == data.num_rows
    assert sorted(out.select(stay).to_pylist(), key=repr) == sorted(data.select(stay).to_pylist(), key=repr)
    # every household moves whole: one geography per household in the output
    geo_of = defaultdict(set)
    for r in out.select([spec.household, *moved]).to_pylist():
        geo_of[r[spec.household]].add(tuple(r[c] for c in moved))
    assert all(len(v) == 1 for v in geo_of.values())
    # the log: every household at most once; swapped ones in symmetric pairs
    seen = Counter(r[spec.household] for r in log)
    assert max(seen.values(), default=1) == 1
    swapped = {r[spec.household]: r for r in log if r["swapped"]}
    for hid, r in swapped.items():
        b = r["partner"]
        assert swapped[b]["partner"] == hid and {r["role"], swapped[b]["role"]} == {"recipient", "donor"}
        assert r["level"] == swapped[b]["level"] and r["profile"] == swapped[b]["profile"]
        h = r["level"]
        # donor outside the household's area at that level
        assert tuple(before[hid][g] for g in spec.geography[: h + 1]) != tuple(
            before[b][g] for g in spec.geography[: h + 1]
        )
        # donor and recipient agree on the similarity profile used
        prof = spec.similar[r["profile"] - 1]
        assert all(before[hid][c] == before[b][c] for c in prof)
        # the household now has its partner's geography and carry-along values
        assert all(after[hid][c] == before[b][c] for c in moved)
    for hid in before:
        if hid not in swapped:
            assert all(after[hid][c] == before[hid][c] for c in moved)
    # risk, independently: risky households per level, each swapped or logged without donor
    levels = swap_levels(data, spec)
    L = len(spec.geography)
    risky = {hid for hid, lv in levels.items() if lv < L}
    assert summary["households"] == len(before)
    assert summary["risky_households"] == len(risky)
    for h, g in enumerate(spec.geography):
        assert summary["per_level"][g]["risky"] == sum(1 for lv in levels.values() if lv == h)
    failed = {r[spec.household]: r for r in log if not r["swapped"]}
    assert summary["households_without_donor"] == len(failed)
    assert all(hid in swapped or hid in failed for hid in risky)
    assert summary["swapped_households"] == len(swapped)
    assert summary["achieved_swap_rate"] == pytest.approx(len(swapped) / len(before))
    n_risky_swapped = len(risky & set(swapped))
    assert summary["risky_swapped"] == n_risky_swapped
    if risky:
        assert summary["share_risky_swapped"] == pytest.approx(n_risky_swapped / len(risky))
    # a household without donor really had none: every household that could have been its
    # donor (same profile, outside its area) was swapped or without donor itself
    for hid, r in failed.items():
        h = r["level"]
        area = tuple(before[hid][g] for g in spec.geography[: h + 1])
        for other, v in before.items():
            if other == hid or tuple(v[g] for g in spec.geography[: h + 1]) == area:
                continue
            if any(all(v[c] == before[hid][c] for c in prof) for prof in spec.similar):
                assert other in swapped or other in failed, (hid, other)
    # the swap rate: reached, or no household left to swap
    target = math.ceil(spec.swap_rate * len(before) - 1e-9)
    if len(swapped) < target:
        assert set(swapped) | set(failed) == set(before)


# -- worked examples, checked by hand -----------------------------------------------------------

# ten one-person households: R1 (M1: h1-h3, M2: h4-h6), R2 (M3: h7-h10); all aged 30 except h10
# (aged 90, alone in R2 and in the country: count 1 < 3 at region level, so risky at level 0);
# every municipality has 3 or more persons aged 30, so nobody else is risky.
WORKED = pa.table(
    {
        "hid": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        "region": ["R1"] * 6 + ["R2"] * 4,
        "muni": ["M1"] * 3 + ["M2"] * 3 + ["M3"] * 4,
        "age": [30] * 9 + [90],
        "hsize": [1] * 10,
        "tenure": [1, 1, 1, 2, 1, 1, 2, 1, 1, 2],
        "inc": [10, 20, 30, 40, 50, 60, 70, 80, 90, 100],
    }
)


def worked_spec(**kw) -> SwapSpec:
    args = dict(
        household="hid",
        geography=("region", "muni"),
        risk_variables=("age",),
        similar=[("hsize", "tenure")],
        swap_rate=0.05,
        carry_along=("inc",),
    )
    args.update(kw)
    return SwapSpec(**args)


def test_worked_example_the_only_donor_outside_the_region():
    # h10 (tenure 2) must be swapped across regions; the only household with hsize 1 and tenure
    # 2 outside R2 is h4 (h7 is in R2): h10 <-> h4, geography and income exchanged. The rate
    # asks for ceil(0.05 * 10) = 1 household; the pair gives 2, so no top-up.
    con = duckdb.connect()
    load(con, WORKED)
    summary = swap(con, "persons", worked_spec(), seed=SEED, out="out", log="log")
    got = {r[0]: r[1:] for r in con.sql("SELECT hid, region, muni, inc FROM out").fetchall()}
    assert got[10] == ("R1", "M2", 40)
    assert got[4] == ("R2", "M3", 100)
    assert all(
        got[h] == (WORKED["region"][h - 1].as_py(), WORKED["muni"][h - 1].as_py(), 10 * h)
        for h in range(1, 10)
        if h != 4
    )
    assert con.sql("SELECT hid, partner, level, geography, profile, reason, role FROM log ORDER BY hid").fetchall() == [
        (4, 10, 0, "region", 1, "risk", "donor"),
        (10, 4, 0, "region", 1, "risk", "recipient"),
    ]
    assert summary["risky_households"] == 1 and summary["risky_swapped"] == 1
    assert summary["share_risky_swapped"] == 1.0
    assert summary["swapped_households"] == 2 and summary["achieved_swap_rate"] == pytest.approx(0.2)
    assert summary["per_level"]["region"] == {"risky": 1, "pairs": 1, "without_donor": 0}
    assert summary["households_without_donor"] == 0 and summary["top_up_pairs"] == 0
    check_swap(con, WORKED, worked_spec(), summary)


def test_worked_example_fallback_profile():
    # nobody outside R2 has income 100, so the first profile (hsize, tenure, inc) finds no donor;
    # the fallback (hsize, tenure) gives h4 again, and the log names profile 2
    con = duckdb.connect()
    load(con, WORKED)
    spec = worked_spec(similar=[("hsize", "tenure", "inc"), ("hsize", "tenure")], carry_along=())
    summary = swap(con, "persons", spec, seed=SEED, out="out", log="log")
    assert con.sql("SELECT hid, partner, profile FROM log ORDER BY hid").fetchall() == [(4, 10, 2), (10, 4, 2)]
    check_swap(con, WORKED, spec, summary)


def test_worked_example_no_donor_is_logged_and_counted_not_dropped():
    # h10 with tenure 3: no household outside R2 matches; it stays (with its record) in the
    # output, is logged without partner and counted; the rate (1 household) is topped up by a
    # pair of other households swapped across municipalities
    data = WORKED.set_column(5, "tenure", pa.array([1, 1, 1, 2, 1, 1, 2, 1, 1, 3]))
    con = duckdb.connect()
    load(con, data)
    spec = worked_spec()
    summary = swap(con, "persons", spec, seed=SEED, out="out", log="log")
    assert con.sql("SELECT region, muni, inc FROM out WHERE hid = 10").fetchall() == [("R2", "M3", 100)]
    assert con.sql("SELECT partner, swapped, level, reason FROM log WHERE hid = 10").fetchall() == [
        (None, False, 0, "risk")
    ]
    assert summary["households_without_donor"] == 1 and summary["risky_without_donor"] == 1
    assert summary["share_risky_swapped"] == 0.0
    assert summary["top_up_pairs"] == 1 and summary["swapped_households"] == 2
    assert con.sql("SELECT count(*) FROM out").fetchall()[0][0] == 10
    check_swap(con, data, spec, summary)


def test_return_swapped_id_shows_the_partner():
    con = duckdb.connect()
    load(con, WORKED)
    swap(con, "persons", worked_spec(return_swapped_id=True), seed=SEED, out="out")
    ids = dict(con.sql("SELECT hid, hid_swapped FROM out").fetchall())
    assert ids[10] == 4 and ids[4] == 10 and all(ids[h] == h for h in ids if h not in (4, 10))


def test_k_anonymity_zero_swaps_only_to_the_rate():
    con = duckdb.connect()
    load(con, WORKED)
    summary = swap(con, "persons", worked_spec(k_anonymity=0, swap_rate=0.4), seed=SEED, out="out", log="log")
    assert summary["risky_households"] == 0
    assert summary["swapped_households"] >= 4 and summary["top_up_pairs"] >= 2
    assert con.sql("SELECT DISTINCT level, reason FROM log").fetchall() == [(1, "rate")]


def test_given_risk_columns_replace_the_counts():
    # risk per level given (as sdcMicro's risk=): h1 over the threshold at municipality level only
    data = WORKED.append_column("r0", pa.array([0.0] * 10)).append_column("r1", pa.array([0.9] + [0.1] * 9))
    con = duckdb.connect()
    load(con, data)
    spec = worked_spec(risk_variables=(), risk=("r0", "r1"), risk_threshold=0.5, similar=[("hsize",)])
    summary = swap(con, "persons", spec, seed=SEED, out="out", log="log")
    assert summary["risky_households"] == 1 and summary["per_level"]["muni"]["risky"] == 1
    partner, level = con.sql("SELECT partner, level FROM log WHERE hid = 1").fetchall()[0]
    assert level == 1 and partner not in (1, 2, 3)  # outside M1


# -- properties on random populations ------------------------------------------------------------


def random_spec(rate: float, k: int, carry: bool) -> SwapSpec:
    return SwapSpec(
        household="hid",
        geography=GEO,
        risk_variables=("sex", "age"),
        similar=[("hsize", "tenure"), ("hsize",)],
        swap_rate=rate,
        k_anonymity=k,
        carry_along=("inc",) if carry else (),
    )


@pytest.mark.slow
@settings(max_examples=25)
@given(
    data_seed=st.integers(0, 10_000),
    n_hh=st.integers(2, 80),
    n_reg=st.integers(1, 3),
    rate=st.sampled_from([0.01, 0.1, 0.3, 0.6, 0.95]),
    k=st.integers(0, 4),
    carry=st.booleans(),
    seed=st.one_of(st.integers(0, 10**9), st.text(min_size=1, max_size=8)),
)
def test_swap_properties(data_seed, n_hh, n_reg, rate, k, carry, seed):
    data = population(data_seed, n_hh, n_reg=n_reg)
    spec = random_spec(rate, k, carry)
    con = duckdb.connect()
    load(con, data)
    if any(len(set(data[c].to_pylist())) < 2 for c in spec.risk_variables):
        with pytest.raises(InputError, match="one category"):
            swap(con, "persons", spec, seed=seed, out="out", log="log")
        return
    summary = swap(con, "persons", spec, seed=seed, out="out", log="log")
    check_swap(con, data, spec, summary)


def test_larger_population_reaches_the_rate_and_swaps_every_risky_household():
    data = population(7, 600, n_reg=4, n_mun=4, n_grid=4)
    spec = random_spec(0.2, 3, True)
    con = duckdb.connect()
    load(con, data)
    summary = swap(con, "persons", spec, seed=SEED, out="out", log="log")
    check_swap(con, data, spec, summary)
    assert summary["achieved_swap_rate"] >= 0.2
    assert summary["risky_households"] > 50


def _parquet_bytes(con: duckdb.DuckDBPyConnection, name: str, path) -> bytes:
    con.execute(f"COPY {name} TO '{path}' (FORMAT parquet)")
    return path.read_bytes()


def test_same_seed_same_bytes_other_seed_other_result(tmp_path):
    data = population(3, 400, n_reg=3, n_mun=4, n_grid=3)
    spec = random_spec(0.1, 3, True)
    results = []
    for i, seed in enumerate([SEED, SEED, SEED + "x"]):
        con = duckdb.connect()
        load(con, data)
        swap(con, "persons", spec, seed=seed, out="out", log="log")
        results.append((_parquet_bytes(con, "out", tmp_path / f"o{i}.parquet"), con.sql("FROM log").fetchall()))
    assert results[0] == results[1]
    assert results[0][0] != results[2][0] and results[0][1] != results[2][1]
    assert pq.read_table(tmp_path / "o0.parquet").num_rows == data.num_rows


def test_thread_count_does_not_change_the_result():
    data = population(11, 3000, n_reg=4, n_mun=5, n_grid=5)
    spec = random_spec(0.15, 3, True)
    got = []
    for threads in (1, 2):
        con = duckdb.connect()
        con.execute(f"SET threads = {threads}")
        load(con, data)
        summary = swap(con, "persons", spec, seed=SEED, out="out", log="log")
        got.append((con.sql("FROM out").to_arrow_table(), con.sql("FROM log").to_arrow_table(), summary))
    assert got[0][0].equals(got[1][0]) and got[0][1].equals(got[1][1]) and got[0][2] == got[1][2]


def test_seed_is_secret_in_outputs():
    con = duckdb.connect()
    load(con, WORKED)
    summary = swap(con, "persons", worked_spec(), seed=SEED, out="out", log="log")
    text = repr(summary) + repr(con.sql("FROM out").fetchall()) + repr(con.sql("FROM log").fetchall())
    assert SEED not in text
    assert not [t for t in con.sql("SELECT table_name FROM duckdb_tables()").fetchall() if "_protab" in t[0]]


# -- bad input: clear errors, nothing written ------------------------------------------------------


def nothing_written(con: duckdb.DuckDBPyConnection) -> bool:
    names = {r[0] for r in con.sql("SELECT table_name FROM duckdb_tables()").fetchall()}
    return names == {"persons"}


def test_members_disagreeing_on_geography():
    data = WORKED.to_pylist()
    data.append({**data[0], "muni": "M2"})  # a second member of h1 in M2
    data.append({**data[1], "region": "R2", "muni": "M3"})
    con = duckdb.connect()
    load(con, pa.Table.from_pylist(data))
    with pytest.raises(InputError) as err:
        swap(con, "persons", worked_spec(), seed=SEED, out="out", log="log")
    msg = str(err.value)
    assert "2 household(s)" in msg and "household 1: 2 members in 2 areas" in msg and "household 2" in msg
    assert "'region', 'muni'" in msg and SEED not in msg
    assert nothing_written(con)


def test_null_geography():
    con = duckdb.connect()
    load(con, WORKED)
    con.execute("UPDATE persons SET muni = NULL WHERE hid IN (3, 5)")
    with pytest.raises(InputError, match=r"NULL.*'muni' \(2 records\)"):
        swap(con, "persons", worked_spec(), seed=SEED, out="out", log="log")
    assert nothing_written(con)


def test_risk_variable_with_one_category():
    con = duckdb.connect()
    load(con, WORKED)
    with pytest.raises(InputError, match=r"risk variable 'hsize'.*one category only \(1 in all 10 records\)"):
        swap(con, "persons", worked_spec(risk_variables=("hsize", "age")), seed=SEED, out="out", log="log")
    assert nothing_written(con)


@pytest.mark.parametrize("rate", [0, 1, 1.5, -0.1, float("nan"), True, "0.1"])
def test_swap_rate_outside_0_1(rate):
    with pytest.raises(SpecError, match="swap_rate"):
        worked_spec(swap_rate=rate)


def test_unknown_columns():
    con = duckdb.connect()
    load(con, WORKED)
    with pytest.raises(InputError, match=r"no column 'nuts9' \(geography\), 'tenur' \(similarity variable\)"):
        swap(con, "persons", worked_spec(geography=("region", "nuts9"), similar=[("tenur",)]), seed=SEED, out="out")
    with pytest.raises(InputError, match="no table or view named 'people'"):
        swap(con, "people", worked_spec(), seed=SEED, out="out")
    assert nothing_written(con)


def test_out_exists_unless_replace():
    con = duckdb.connect()
    load(con, WORKED)
    con.execute("CREATE TABLE out AS SELECT 1 AS x")
    with pytest.raises(InputError, match="a table named 'out' exists already; pass replace=True"):
        swap(con, "persons", worked_spec(), seed=SEED, out="out", log="log")
    assert con.sql("FROM out").fetchall() == [(1,)]
    assert "log" not in {r[0] for r in con.sql("SELECT table_name FROM duckdb_tables()").fetchall()}
    swap(con, "persons", worked_spec(), seed=SEED, out="out", log="log", replace=True)
    assert con.sql("SELECT count(*) FROM out").fetchall() == [(10,)]
    with pytest.raises(InputError, match="input table"):
        swap(con, "persons", worked_spec(), seed=SEED, out="persons", replace=True)


def test_similar_or_carry_along_not_household_level():
    data = WORKED.to_pylist()
    data.append({**data[0], "inc": 11})  # h1's second member with another income
    con = duckdb.connect()
    load(con, pa.Table.from_pylist(data))
    with pytest.raises(InputError, match=r"column 'inc' \(a carry-along variable\) differs.*households 1"):
        swap(con, "persons", worked_spec(), seed=SEED, out="out", log="log")
    assert nothing_written(con)


def test_spec_validation():
    with pytest.raises(SpecError, match="k_anonymity"):
        worked_spec(k_anonymity=-1)
    with pytest.raises(SpecError, match="risk_threshold applies to given risk columns"):
        worked_spec(risk_threshold=0.2)
    with pytest.raises(SpecError, match="geography must name at least one column"):
        worked_spec(geography=())
    with pytest.raises(SpecError, match="similar profile 1 names 'muni'"):
        worked_spec(similar=[("muni",)])
    with pytest.raises(SpecError, match="more than once"):
        worked_spec(geography=("region", "region"))
    with pytest.raises(SpecError, match="one column per geography level"):
        worked_spec(risk=("r0",), risk_variables=())
    assert worked_spec(similar=("hsize", "tenure")).similar == (("hsize", "tenure"),)
    assert worked_spec(carry_along=("inc", "muni")).carry_along == ("inc",)


def test_bad_seed_and_error_while_writing_leaves_nothing(monkeypatch):
    con = duckdb.connect()
    load(con, WORKED)
    for seed in (None, "", True, 1.5):
        with pytest.raises(InputError, match="seed must be"):
            swap(con, "persons", worked_spec(), seed=seed, out="out", log="log")
    import protab.swapping.record_swap as sw

    monkeypatch.setattr(sw._Run, "log_select", lambda self: "SELECT * FROM no_such_table")
    with pytest.raises(duckdb.Error):
        swap(con, "persons", worked_spec(), seed=SEED, out="out", log="log")
    assert nothing_written(con)


def test_string_ids_null_similarity_values_and_a_view_as_input():
    # household ids as strings, tenure NULL for h4 and h10 only (NULL is a category of its own,
    # so h10's only donor outside R2 is h4 again); the input is a view, so the output is
    # ordered by household
    data = WORKED.set_column(0, "hid", pa.array([f"h{i:02d}" for i in range(1, 11)])).set_column(
        5, "tenure", pa.array([1, 1, 1, None, 1, 1, 2, 1, 1, None], pa.int64())
    )
    con = duckdb.connect()
    load(con, data, "base")
    con.execute("CREATE VIEW persons AS SELECT * FROM base ORDER BY random()")
    spec = worked_spec(similar=[("hsize", "tenure")])
    summary = swap(con, "persons", spec, seed=SEED, out="out", log="log")
    assert con.sql("SELECT hid, partner FROM log ORDER BY hid").fetchall() == [("h04", "h10"), ("h10", "h04")]
    assert [r[0] for r in con.sql("SELECT hid FROM out").fetchall()] == [f"h{i:02d}" for i in range(1, 11)]
    check_swap(con, data, spec, summary)
