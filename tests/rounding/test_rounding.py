"""protab.rounding: conventional, random (p-table), small cell adjustment, Barnardisation,
semi-controlled — worked examples from the ESSnet handbook and property tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

import protab as pt
from protab import rounding as rnd

DATA = Path(__file__).resolve().parents[1] / "data"
from refdata import ROUNDING_HANDBOOK as HANDBOOK  # noqa: E402
from refdata import handbook_inner  # noqa: E402

ALPHA = 1e-6  # binomial tests: a false alarm once in a million runs


# --------------------------------------------------------------------------- conventional


def test_conventional_reproduces_the_handbook_table():
    # the file gives the corrected table (the handbook prints Area C Total as 35, a misprint)
    assert "misprint" in HANDBOOK["note_conventional"]
    out = rnd.conventional(np.array(HANDBOOK["original"]), HANDBOOK["base"])
    assert out.tolist() == HANDBOOK["conventional"]


def test_conventional_ties_go_up_and_frames_get_a_rounded_column():
    assert rnd.conventional([0, 4, 5, 14, 15, 25], 10).tolist() == [0, 0, 10, 10, 20, 30]
    assert rnd.conventional([7, 8], 1).tolist() == [7, 8]
    frame = rnd.conventional(pl.DataFrame({"n": [1, 3, 12]}), 5)
    assert frame["rounded"].to_list() == [0, 5, 10]


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=50), st.integers(1, 12))
def test_conventional_is_the_nearest_multiple(values, base):
    out = rnd.conventional(values, base)
    v = np.asarray(values)
    assert np.all(out % base == 0)
    assert np.all(np.abs(out - v) <= base / 2)


# --------------------------------------------------------------------------- random rounding


def test_random_rounding_ptable_has_the_handbook_probabilities():
    pt3 = rnd.random_rounding_ptable(3)
    assert pt3.period == 3 and pt3.imax == 3
    dist = {(i, j): p for i, j, p in pt3.distribution().iter_rows()}
    probs = HANDBOOK["random_rounding_base3_probabilities"]
    for n, outcomes in probs.items():
        row = int(pt3.row_class(np.array([int(n)]))[0])
        for j, p in outcomes.items():
            # the row of n holds the noise j - n; the file gives p to 4 decimals
            assert dist[(row, row + int(j) - int(n))] == pytest.approx(p, abs=1e-4)
    # multiples of 3 stay
    assert pt3.lookup(np.array([0, 3, 6, 300]), np.array([0, 5, 7, 11]), 12).tolist() == [0, 3, 6, 300]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 7), st.integers(1, 4), st.integers(0, 60))
def test_random_rounding_is_unbiased_over_every_cell_key(base, mult, n):
    # exact enumeration: with a modulus that is a multiple of the base, the share of keys
    # that round n up equals r/b exactly
    M = base * mult * 5
    keys = np.arange(M)
    out = rnd.random(np.full(M, n), base, keys, M)
    r = n % base
    assert set(np.unique(out)) <= {n - r, n - r + base}
    assert np.count_nonzero(out == n - r + base) * base == r * M if r else np.all(out == n)
    assert out.mean() == pytest.approx(n)


def test_random_rounding_frequencies_pass_an_exact_binomial_test():
    rng = np.random.default_rng(20240611)
    M = 2**32  # not a multiple of 3: the bias is below 1/M, far under what the test can see
    probs = HANDBOOK["random_rounding_base3_probabilities"]
    for n, outcomes in probs.items():
        size = 20_000
        out = rnd.random(np.full(size, int(n)), 3, rng.integers(0, M, size), M)
        up = max(int(j) for j in outcomes)
        k = int(np.count_nonzero(out == up))
        assert set(np.unique(out)) <= {int(j) for j in outcomes}
        p_exact = (int(n) % 3) / 3
        assert binomtest(k, size, p_exact).pvalue > ALPHA


def test_random_rounding_of_a_tabulated_frame_and_errors():
    frame = pl.DataFrame({"n": [0, 1, 2, 3], "cell_key": [0, 9, 9, 4]})
    out = rnd.random(frame, 3, modulus=10)
    # key 9/10 lies in the top third for r = 1 and in the top two thirds for r = 2
    assert out["rounded"].to_list() == [0, 3, 3, 3]
    with pytest.raises(pt.ProtabError, match="modulus"):
        rnd.random([1, 2], 3, [0, 1])
    with pytest.raises(pt.ProtabError, match="cell keys"):
        rnd.random([1, 2], 3, modulus=10)


def test_random_rounding_in_sql_is_consistent_across_tables(session, persons, h_muni):
    session.register("p", persons)
    session.add_record_keys("p", id_column="pid", seed="rounding-test")
    b = 3
    ptab = rnd.random_rounding_ptable(b)
    spec1 = pt.TableSpec({"municipality": h_muni, "sex": None})
    spec2 = pt.TableSpec({"municipality": h_muni, "sex": None, "age": None})
    t1 = session.cell_key("p", spec1, ptab, original=True)
    t2 = session.cell_key("p", spec2, ptab, original=True)
    for t in (t1, t2):
        n, r = t["n"].to_numpy(), t["n_pert"].to_numpy()
        assert np.all(r % b == 0)
        assert np.all(np.abs(r - n) < b)
        assert np.all(r[n % b == 0] == n[n % b == 0])
    # the same cell (municipality × sex, any age) rounds the same way in both tables
    j = t1.join(t2.filter(pl.col("age") == "Total"), on=["municipality", "sex"], suffix="_2")
    assert j.height == t1.height
    assert j["n_pert"].to_list() == j["n_pert_2"].to_list()
    # and the numeric route with the tabulated cell keys gives the same values
    tab = session.tabulate("p", spec1, cell_keys=True)
    _, modulus = session.record_key("p")
    assert rnd.random(tab, b, modulus=modulus)["rounded"].to_list() == t1["n_pert"].to_list()


# --------------------------------------------------------------------------- small cell adjustment, Barnardisation


def _additive(frame: pl.DataFrame, spec: pt.TableSpec, value: str) -> None:
    """Every published cell of ``frame`` equals the sum of its inner cells' ``value``."""
    levels = [f"{d}_level" for d in spec.columns]
    deepest = frame.select([pl.col(c).max() for c in levels]).row(0)
    inner = frame.filter(pl.all_horizontal([pl.col(c) == v for c, v in zip(levels, deepest)]))
    _X, _inn, pub = pt.model_matrix(inner.select([*spec.columns, value]), spec, freq=value, extend0=False)
    joined = pub.join(frame, on=spec.columns, how="left")
    assert joined[value].null_count() == 0
    np.testing.assert_array_equal(pub["n"].to_numpy(), joined[value].to_numpy())


def test_small_cell_adjustment_via_perturb_inner_is_additive(session, persons, h_muni):
    session.register("p", persons)
    session.add_record_keys("p", id_column="pid", seed="sca")
    b = 3
    spec = pt.TableSpec({"municipality": h_muni, "sex": None, "age": None})
    out = session.perturb_inner("p", spec, rnd.small_cell_adjustment_ptable(b), original=True)
    _additive(out, spec, "n_pert")
    inner = out.filter(pl.col("age") != "Total", pl.col("sex") != "Total", pl.col("municipality_level") == 2)
    n, v = inner["n"].to_numpy(), inner["n_pert"].to_numpy()
    small = (n > 0) & (n < b)
    assert np.all(np.isin(v[small], [0, b]))
    assert np.all(v[~small] == n[~small])


def test_small_cell_adjustment_ptable_probabilities():
    p = rnd.small_cell_adjustment_ptable(5)
    dist = {(i, j): q for i, j, q in p.distribution().iter_rows()}
    for n in range(1, 5):
        assert dist[(n, 5)] == pytest.approx(n / 5) and dist[(n, 0)] == pytest.approx(1 - n / 5)
    assert dist[(5, 5)] == 1.0 and p.imax == 5
    assert p.lookup(np.array([0, 7, 12]), np.array([3, 3, 3]), 10).tolist() == [0, 7, 12]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 12), min_size=1, max_size=40), st.integers(1, 6), st.integers(0, 2**31))
def test_small_cell_adjustment_numeric(values, base, seed):
    out = rnd.small_cell_adjustment(values, base, seed=seed)
    v = np.asarray(values)
    small = (v > 0) & (v < base)
    assert np.all(np.isin(out[small], [0, base]))
    assert np.all(out[~small] == v[~small])
    assert np.array_equal(out, rnd.small_cell_adjustment(values, base, seed=seed))


def test_small_cell_adjustment_is_unbiased():
    out = rnd.small_cell_adjustment(np.full(30_000, 2), 5, seed=7)
    assert binomtest(int(np.count_nonzero(out == 5)), out.size, 2 / 5).pvalue > ALPHA


def test_barnardisation_via_perturb_inner_is_additive(session, persons, h_muni):
    session.register("p", persons)
    session.add_record_keys("p", id_column="pid", seed="barn")
    spec = pt.TableSpec({"municipality": h_muni, "sex": None})
    out = session.perturb_inner("p", spec, rnd.barnardisation_ptable(0.4), original=True)
    _additive(out, spec, "n_pert")
    inner = out.filter(pl.col("sex") != "Total", pl.col("municipality_level") == 2)
    n, v = inner["n"].to_numpy(), inner["n_pert"].to_numpy()
    assert np.all(np.abs(v - n) <= 1) and np.all(v[n == 0] == 0) and np.all(v >= 0)


def test_barnardisation_ptable_and_numeric():
    p = rnd.barnardisation_ptable(0.2)
    dist = {(i, j): q for i, j, q in p.distribution().iter_rows()}
    assert dist == pytest.approx({(1, 0): 0.1, (1, 1): 0.8, (1, 2): 0.1})
    assert p.imax == 1 and p.period == 1
    v = np.full(40_000, 5)
    out = rnd.barnardise(v, 0.2, seed=3)
    assert set(np.unique(out)) <= {4, 5, 6}
    assert binomtest(int(np.count_nonzero(out == 6)), v.size, 0.1).pvalue > ALPHA
    assert binomtest(int(np.count_nonzero(out == 4)), v.size, 0.1).pvalue > ALPHA
    assert rnd.barnardise([0, 0, 0], 1.0, seed=1).tolist() == [0, 0, 0]
    with pytest.raises(pt.ProtabError):
        rnd.barnardisation_ptable(1.5)
    with pytest.raises(pt.ProtabError, match="seed"):
        rnd.barnardise([1, 2], 0.2, seed=None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- semi-controlled


def test_semi_controlled_keeps_the_grand_total_of_an_array():
    v = np.array([1, 2, 4, 5, 7, 0, 8, 3])  # total 30, a multiple of 3
    for seed in range(20):
        out = rnd.semi_controlled(v, None, 3, seed=seed)
        assert np.all(out % 3 == 0) and np.all(np.abs(out - v) < 3)
        assert out.sum() == 30
    w = np.array([1, 1, 1, 1])  # total 4: rounded total is 3 or 6
    assert {int(rnd.semi_controlled(w, None, 3, seed=s).sum()) for s in range(50)} == {3, 6}


def test_semi_controlled_keeps_each_area_total():
    inner = handbook_inner()
    spec = pt.TableSpec({"area": None, "sex": None})
    res = rnd.semi_controlled(inner, spec, 5, preserve="area", seed=11)
    pub = res.published
    for row in pub.filter(pl.col("sex") == "Total").iter_rows(named=True):
        lo = 5 * (row["n"] // 5)
        assert row["rounded"] in ({lo} if row["n"] % 5 == 0 else {lo, lo + 5})
    X = res.X
    np.testing.assert_array_equal(X.T @ res.inner["rounded"].to_numpy(), pub["rounded"].to_numpy())
    with pytest.raises(pt.ProtabError, match="preserve"):
        rnd.semi_controlled(inner, spec, 5, preserve="region", seed=1)


def test_semi_controlled_is_unbiased_per_cell():
    v = np.array([1, 2, 4, 5, 7, 0, 8, 3, 2, 2])
    outs = np.array([rnd.semi_controlled(v, None, 3, seed=s) for s in range(3000)])
    for k in np.flatnonzero(v % 3):
        ups = int(np.count_nonzero(outs[:, k] > v[k]))
        assert binomtest(ups, outs.shape[0], (v[k] % 3) / 3).pvalue > ALPHA


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("base", [0, -3, 2.5, True, "3", None])
def test_bad_base_is_refused(base):
    with pytest.raises(pt.ProtabError, match="base"):
        rnd.conventional([1, 2], base)
    with pytest.raises(pt.ProtabError, match="base"):
        rnd.random_rounding_ptable(base)


def test_bad_counts_are_refused():
    with pytest.raises(pt.ProtabError, match="negative"):
        rnd.conventional([1, -2], 3)
    with pytest.raises(pt.ProtabError, match="fractions"):
        rnd.small_cell_adjustment([1.5, 2], 3, seed=1)
    with pytest.raises(pt.ProtabError, match="NaN"):
        rnd.conventional([1, np.nan], 3)
    with pytest.raises(pt.ProtabError, match="seed"):
        rnd.semi_controlled([1, 2], None, 3, seed=None)  # type: ignore[arg-type]


@settings(max_examples=8, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["R1001", "R1002", "R2001"]), st.sampled_from(["F", "M"])), min_size=1, max_size=40),
    st.integers(2, 5),
    st.text("abcdef", min_size=1, max_size=6),
)
def test_small_cell_adjustment_is_additive_on_any_microdata(records, base, seed):
    h = pt.Hierarchy.from_code_lengths(["R1001", "R1002", "R2001"], [2, 3])
    micro = pl.DataFrame(records, schema=["municipality", "sex"], orient="row").with_row_index("pid")
    spec = pt.TableSpec({"municipality": h, "sex": None})
    with pt.Session(":memory:") as s:
        s.register("m", micro)
        s.add_record_keys("m", id_column="pid", seed=seed)
        out = s.perturb_inner("m", spec, rnd.small_cell_adjustment_ptable(base), original=True)
    _additive(out, spec, "n_pert")
    inner = out.filter(pl.col("sex") != "Total", pl.col("municipality_level") == 2)
    n, v = inner["n"].to_numpy(), inner["n_pert"].to_numpy()
    small = (n > 0) & (n < base)
    assert np.all(np.isin(v[small], [0, base])) and np.all(v[~small] == n[~small])
