"""protab.noise: DP, PRAM and drop/add-up-to-q p-tables, accounting, survey weights, the study.

References: the capped discrete Laplace for ε = 2, cap 7 and the published PRAM matrices of
Shlomo, Krenzke & Li (2019) (tests/data/dp_eps2_cap7.csv, pram_small.csv, pram_large.csv);
the percent of cells perturbed in their simulation (Table 4: DP ≈ 24%, PRAM ≈ 28%,
drop/add-up-to-q ≈ 67%).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import protab as pt
from protab import noise
from protab.errors import InputError, PTableError, PTableWarning
from protab.ptable import PTable

DATA = Path(__file__).resolve().parents[1] / "data"
SMALL, LARGE = DATA / "pram_small.csv", DATA / "pram_large.csv"
M32 = 2**32
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _rows(p: PTable) -> dict[int, dict[int, float]]:
    """{i: {v: p}} of a p-table (probabilities from the exact interval widths)."""
    out: dict[int, dict[int, float]] = {}
    for i, v, lo, hi in p.frame.select("i", "v", "lb_n", "ub_n").iter_rows():
        out.setdefault(i, {})[v] = out.get(i, {}).get(v, 0.0) + (hi - lo) / p.den
    return out


def _padded(p: PTable, width: int) -> np.ndarray:
    """The transition matrix with at least ``width`` columns (outcomes 0 … width − 1)."""
    T = p.transition_matrix()
    return np.pad(T, ((0, 0), (0, max(0, width - T.shape[1]))))


def _published_matrix(path: Path) -> tuple[np.ndarray, list[list[str]]]:
    text = [line.split(",") for line in path.read_text().split()]
    return np.array([[float(x) for x in r[1:]] for r in text[1:]]), text


# ============================================================================ DP


def test_dp_eps2_cap7_equals_the_published_probabilities():
    """Every probability of the symmetric row equals the reference to half a unit of its last
    printed decimal: 1e-6 or better for all but P(0) = 0.76159, printed to 5 decimals (the
    exact value is 0.7615943, so that entry is off by 4.3e-6 from the printed one)."""
    ref = pl.read_csv(DATA / "dp_eps2_cap7.csv", schema_overrides={"p": pl.String})
    p = noise.discrete_laplace(2, 7)
    assert (p.imax, p.period) == (7, 1)
    row = _rows(p)[7]
    for v, text in ref.select("v", "p").iter_rows():
        decimals = len(text.split(".")[1])
        tol = 0.5 * 10.0**-decimals + 1e-12
        assert abs(row[v] - float(text)) <= tol, (v, row[v], text)
        if decimals > 5:
            assert abs(row[v] - float(text)) <= 1e-6
    v, probs = noise.dp_noise(2, 7)
    assert v.tolist() == ref["v"].to_list()
    np.testing.assert_allclose(
        probs[1:] / probs[:-1], np.exp(-2.0 * (np.abs(v[1:]) - np.abs(v[:-1]))), rtol=1e-12
    )


def test_dp_delta_is_the_mass_at_the_cap():
    assert abs(noise.dp_delta(2, 7) - 6.33e-7) <= 5e-10
    _, p = noise.dp_noise(2, 7)
    assert noise.dp_delta(2, 7) == p[-1] == p[0]
    # sensitivity 2 is ε/2 per unit of noise
    assert noise.dp_delta(2, 7, sensitivity=2) == pytest.approx(noise.dp_delta(1, 7), rel=1e-12)


def test_dp_rules_for_counts_below_the_cap():
    v, p = noise.dp_noise(2, 7)
    full = dict(zip(v.tolist(), p.tolist()))
    folded = _rows(noise.discrete_laplace(2, 7, negative_to_zero=True))
    trunc = _rows(noise.discrete_laplace(2, 7, negative_to_zero=False))
    for i in range(7):
        # negative_to_zero: the symmetric mechanism, then max(0, ·)
        assert folded[i][-i] == pytest.approx(sum(full[u] for u in range(-7, -i + 1)), abs=2e-12)
        for u in range(-i + 1, 8):
            assert folded[i][u] == pytest.approx(full[u], abs=2e-12)
        # truncate: exp(−ε|v|) on {−i … cap}, renormalised
        assert sorted(trunc[i]) == list(range(-i, 8))
        w = {u: math.exp(-2 * abs(u)) for u in range(-i, 8)}
        z = sum(w.values())
        for u, weight in w.items():
            assert trunc[i][u] == pytest.approx(weight / z, abs=2e-12)
    # the mechanism moves zeros (upward) under both rules
    assert folded[0][0] < 1 and trunc[0][0] < 1
    # a larger imax repeats the symmetric row: same noise for every count and key
    wide = noise.discrete_laplace(2, 7, imax=10)
    assert wide.imax == 10 and all(_rows(wide)[i] == _rows(wide)[7] for i in range(8, 11))
    n = np.arange(0, 40).repeat(50)
    keys = np.random.default_rng(0).integers(0, M32, n.size)
    np.testing.assert_array_equal(
        wide.lookup(n, keys, M32), noise.discrete_laplace(2, 7).lookup(n, keys, M32)
    )


def test_privacy_delta_keeps_dp_only_for_negative_to_zero():
    d = noise.dp_delta(2, 7)
    folded = noise.privacy_delta(noise.discrete_laplace(2, 7, negative_to_zero=True), 2)
    assert folded == pytest.approx(d, abs=1e-10)  # bounds rounded to 12 decimals
    # truncation renormalises rows below the cap by different constants: far from (2, δ)
    assert noise.privacy_delta(noise.discrete_laplace(2, 7, negative_to_zero=False), 2) > 1e-3
    # a plain CKM p-table is not DP at ε = 2 at all
    assert noise.privacy_delta(noise.drop_add_q(), 2) > 0.1


@FAST
@given(
    eps=st.floats(0.2, 5.0),
    cap=st.integers(1, 10),
    sens=st.sampled_from([1, 2, 3]),
    fold=st.booleans(),
)
def test_dp_ptable_properties(eps, cap, sens, fold):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTableWarning)  # tails below 1e-12 for large ε
        p = noise.discrete_laplace(eps, cap, sens, negative_to_zero=fold)
    assert (p.imax, p.period) == (cap, 1)
    rows = _rows(p)
    top = rows[cap]
    for u in range(-cap, cap):  # ratio of neighbours: exp(−ε/Δ) away from 0
        if min(top.get(u, 0), top.get(u + 1, 0)) > 1e-6:
            ratio = top[u + 1] / top[u] if u < 0 else top[u] / top[u + 1]
            assert ratio == pytest.approx(math.exp(eps / sens), rel=1e-5)
    for i, r in rows.items():
        assert min(r) >= -i and max(r) <= cap
        assert sum(r.values()) == pytest.approx(1.0, abs=1e-12)
    if fold:
        assert noise.privacy_delta(p, eps / sens) <= noise.dp_delta(eps, cap, sens) + 1e-10 * cap


def test_dp_accounting_basic_composition():
    assert [noise.kway_cells(k) for k in (1, 2, 3, 4)] == [1, 3, 7, 15]
    acc = noise.dp_accounting(2, 7, noise.kway_cells(3))
    assert acc.cells_per_record == 7
    assert acc.epsilon_total == 14.0
    assert acc.delta_total == pytest.approx(7 * 6.33e-7, rel=1e-3)
    text = str(acc)
    assert text == acc.summary() and "epsilon = 14" in text and "7 published cells" in text
    grid = noise.dp_accounting_grid(2, [5, 7], [1, 3])
    assert grid.height == 4
    assert grid["delta"].to_list()[::2] == [noise.dp_delta(2, 5), noise.dp_delta(2, 7)]
    d5 = grid.filter((pl.col("cap") == 5) & (pl.col("cells_per_record") == 3))
    assert d5["delta_total"].item() == pytest.approx(3 * noise.dp_delta(2, 5))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": 0, "cap": 7},
        {"epsilon": -1, "cap": 7},
        {"epsilon": float("nan"), "cap": 7},
        {"epsilon": True, "cap": 7},
        {"epsilon": "2", "cap": 7},
        {"epsilon": 2, "cap": 0},
        {"epsilon": 2, "cap": 13.5},
        {"epsilon": 2, "cap": 13, "sensitivity": 0},
        {"epsilon": 2, "cap": 13, "imax": 12},
        {"epsilon": 2, "cap": 13, "negative_to_zero": "yes"},
    ],
)
def test_dp_bad_input_raises_without_showing_parameters(kwargs):
    with pytest.raises(PTableError) as err:
        noise.discrete_laplace(**kwargs)
    assert "13" not in str(err.value)  # p-table parameters are secrets


def test_dp_warns_for_a_very_large_epsilon_and_lost_tails():
    with pytest.warns(PTableWarning) as caught:
        noise.discrete_laplace(12, 3)
    assert any("large epsilon" in str(w.message) for w in caught)
    with pytest.warns(PTableWarning, match="effective cap"):
        noise.discrete_laplace(5, 7)  # P(±7) = e^−35 < 1e−12
    with pytest.raises(InputError):
        noise.dp_accounting(2, 7, 0)
    with pytest.raises(InputError):
        noise.kway_cells(0)


# ============================================================================ PRAM


@pytest.mark.parametrize("scale", [0.4, 1.0, 3.0, 1 / 0.7])
def test_sample_discrete_laplace_has_the_discrete_laplace_law(scale):
    x, b = noise.sample_discrete_laplace(scale, 200_000, np.random.default_rng(2))
    assert x.dtype == np.int64 and b >= Fraction(scale) and float(b) - scale < 2**-20
    a = math.exp(-1 / float(b))
    z = np.arange(-8, 9)
    p = (1 - a) / (1 + a) * a ** np.abs(z)
    observed = np.array([(x == v).sum() for v in z])
    expected = p * x.size
    keep = expected > 20
    chi2 = ((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    assert chi2 < 3 * keep.sum() + 20  # far below what a wrong scale or a lost sign gives
    assert x.mean() == pytest.approx(0, abs=0.05 * (1 + scale))
    same, _ = noise.sample_discrete_laplace(scale, 1000, np.random.default_rng(9))
    again, _ = noise.sample_discrete_laplace(scale, 1000, np.random.default_rng(9))
    np.testing.assert_array_equal(same, again)
    with pytest.raises(InputError, match="scale"):
        noise.sample_discrete_laplace(0, 10, np.random.default_rng(1))


def test_published_pram_matrices_load_as_a_valid_periodic_ptable():
    S, _ = _published_matrix(SMALL)
    L, _ = _published_matrix(LARGE)
    p = noise.pram(SMALL, LARGE)
    assert (p.imax, p.period) == (21, 15)
    T = _padded(p, 40)
    np.testing.assert_allclose(T.sum(axis=1), 1.0, atol=1e-12)
    # rows 0…6: the small matrix (renormalised; the printed rows sum to 1 within 3e-5)
    np.testing.assert_allclose(T[:7, :7], S / S.sum(axis=1, keepdims=True), atol=1e-12)
    np.testing.assert_allclose(T[:7, :7], S, atol=3e-5)
    assert T[:7, 7:].sum() == 0
    # rows 7…21: the residue matrix, the count staying in its block of 15
    Ln = L / L.sum(axis=1, keepdims=True)
    for i in range(7, 22):
        r, base = i % 15, i - i % 15
        np.testing.assert_allclose(T[i, base : base + 15], Ln[r], atol=1e-12)
        assert T[i].sum() == pytest.approx(T[i, base : base + 15].sum(), abs=1e-15)
    # zeros stay zero (S[0, 0] = 1) for every cell key
    keys = np.arange(0, M32, M32 // 997, dtype=np.int64)
    assert (p.lookup(np.zeros_like(keys), keys, M32) == 0).all()


@FAST
@given(n=st.integers(7, 10**9), k=st.integers(0, M32 - 1))
def test_pram_large_counts_follow_their_residue(n, k):
    p = _PRAM
    c = int(p.row_class(np.array([n]))[0])
    assert c % 15 == n % 15 and 7 <= c <= 21
    out = int(p.lookup(np.array([n]), np.array([k]), M32)[0])
    base = n - n % 15
    assert base <= out <= base + 14  # the perturbed residue is a column of the matrix
    # the same key gives the same residue move for every count with that residue
    again = int(p.lookup(np.array([c]), np.array([k]), M32)[0])
    assert out - n == again - c


_PRAM = noise.pram(SMALL, LARGE)


def test_pram_reads_arrays_and_frames_alike():
    S, _ = _published_matrix(SMALL)
    L, _ = _published_matrix(LARGE)
    from_arrays = noise.pram(S, L)
    from_polars = noise.pram(pl.read_csv(SMALL), pl.read_csv(LARGE))
    from_pandas = noise.pram(pd.read_csv(SMALL), pd.read_csv(LARGE))
    assert from_arrays == from_polars == from_pandas == _PRAM


def _stochastic(draw, n: int) -> np.ndarray:
    vals = draw(st.lists(st.floats(0, 1), min_size=n * n, max_size=n * n))
    M = np.array(vals).reshape(n, n) + np.eye(n) * 1e-3  # every row has some mass
    return M / M.sum(axis=1, keepdims=True)


@FAST
@given(data=st.data(), n=st.integers(1, 15))
def test_make_invariant_keeps_t(data, n):
    P = _stochastic(data.draw, n)
    t = np.array(data.draw(st.lists(st.floats(0, 100), min_size=n, max_size=n)))
    if t.sum() <= 0:
        t[0] = 1.0
    R = noise.make_invariant(P, t)
    tn = t / t.sum()
    np.testing.assert_allclose(tn @ R, tn, atol=1e-9)
    assert (R >= 0).all()
    np.testing.assert_allclose(R.sum(axis=1), 1.0, atol=1e-12)
    Rs = noise.make_invariant(sp.csr_array(P), t)
    np.testing.assert_allclose(Rs.toarray(), R, atol=1e-12)


@FAST
@given(t=st.lists(st.integers(0, 50), min_size=15, max_size=15).filter(lambda x: sum(x) > 0))
def test_make_invariant_on_the_published_residue_matrix(t):
    L = noise.read_matrix(LARGE)
    L = L / L.sum(axis=1, keepdims=True)
    tt = np.array(t, float) / sum(t)
    R = noise.make_invariant(L, t)
    np.testing.assert_allclose(tt @ R, tt, atol=1e-9)
    np.testing.assert_allclose(R.sum(axis=1), 1.0, atol=1e-12)
    # the backward step never leaves the block: R moves a residue at most 14 either way
    assert (R >= 0).all()


@FAST
@given(counts=st.lists(st.integers(0, 90), min_size=3, max_size=60))
def test_pram_invariant_to_a_tables_counts(counts):
    c = np.array(counts)
    p = noise.pram(SMALL, LARGE, invariant_to=c)
    T = p.transition_matrix()
    width = max(T.shape[1], c.max() + 1)
    t = np.bincount(c, minlength=width).astype(float)
    after = t[: T.shape[0]] @ T
    np.testing.assert_allclose(after, t[: T.shape[1]], atol=1e-9 * t.sum())
    assert p.period == 15 and p.imax >= c.max()
    # residue level: each part keeps its own distribution
    q = noise.pram(SMALL, LARGE, invariant_to=c, invariant="residues")
    assert (q.imax, q.period) == (21, 15)
    Tq = _padded(q, 40)
    ts = np.bincount(c[c < 7], minlength=7).astype(float)
    np.testing.assert_allclose(ts @ Tq[:7, :7], ts, atol=1e-9 * max(ts.sum(), 1))
    tr = np.bincount(c[c >= 7] % 15, minlength=15).astype(float)
    rows_of = [r + 15 if r < 7 else r for r in range(15)]  # the row of each residue, 7…21
    blocks = np.array([Tq[i, i - i % 15 : i - i % 15 + 15] for i in rows_of])
    np.testing.assert_allclose(tr @ blocks, tr, atol=1e-9 * max(tr.sum(), 1))


@pytest.mark.parametrize(
    "small, large, kwargs, error",
    [
        (np.ones((2, 3)) / 3, None, {}, PTableError),
        (None, np.ones((14, 14)) / 14, {}, PTableError),
        (np.array([[1.0, 0.0], [-0.5, 1.5]]), None, {}, PTableError),
        (np.array([[1.0, 0.0], [0.5, 0.4]]), None, {}, PTableError),
        (np.array([[1.0, np.nan], [0.5, 0.5]]), None, {}, PTableError),
        (None, None, {"modulus": 1}, PTableError),
        (None, None, {"invariant_to": [3, -1]}, InputError),
        (None, None, {"invariant_to": [3.5]}, InputError),
        (None, None, {"invariant_to": [3], "invariant": "cells"}, PTableError),
        (None, None, {"invariant": "cells"}, PTableError),
        ("no_such_file.csv", None, {}, PTableError),
    ],
)
def test_pram_bad_input(small, large, kwargs, error):
    with pytest.raises(error):
        noise.pram(SMALL if small is None else small, LARGE if large is None else large, **kwargs)


def test_make_invariant_bad_input():
    P = np.eye(3)
    with pytest.raises(InputError):
        noise.make_invariant(P, [1, 2])
    with pytest.raises(InputError):
        noise.make_invariant(P, [0, 0, 0])
    with pytest.raises(InputError):
        noise.make_invariant(P, [1, -1, 1])
    with pytest.raises(PTableError):
        noise.make_invariant(np.ones((3, 3)), [1, 1, 1])


# ============================================================================ drop/add


def _q(n: int, rate: str, cap: int) -> int:
    return min(cap, math.ceil(Fraction(rate) * n))


def test_drop_add_q_rows_are_uniform_up_to_q():
    p = noise.drop_add_q()
    assert (p.imax, p.period) == (601, 1)
    rows = _rows(p)
    assert sorted(rows) == list(range(602))
    for i, r in rows.items():
        q = _q(i, "0.01", 7)
        assert sorted(r) == list(range(-q, q + 1)), i
        assert all(abs(x - 1 / (2 * q + 1)) <= 1e-12 for x in r.values()), i
    assert rows[0] == {0: 1.0}  # zeros untouched
    assert [max(rows[i]) for i in (1, 100, 101, 200, 201, 600, 601)] == [1, 1, 2, 2, 3, 6, 7]


@FAST
@given(n=st.integers(0, 10**9))
def test_drop_add_q_every_count_uses_its_q(n):
    c = int(_DROP.row_class(np.array([n]))[0])
    assert _q(c, "0.01", 7) == _q(n, "0.01", 7)


_DROP = noise.drop_add_q()


@FAST
@given(rate=st.sampled_from(["0.01", "0.02", "0.05", "0.1", "0.25", "0.3", "1"]), cap=st.integers(1, 9))
def test_drop_add_q_other_rates_and_caps(rate, cap):
    p = noise.drop_add_q(float(rate), cap)
    first = next(n for n in range(1, 10**6) if _q(n, rate, cap) == cap)
    assert (p.imax, p.period) == (first, 1)
    for i, r in _rows(p).items():
        q = _q(i, rate, cap)
        assert sorted(r) == list(range(-q, q + 1))
        assert -q >= -i  # never below zero: q <= n for rate <= 1


def test_drop_add_q_zeros_option():
    keys = np.arange(0, M32, M32 // 1009, dtype=np.int64)
    assert (_DROP.lookup(np.zeros_like(keys), keys, M32) == 0).all()
    z = noise.drop_add_q(zeros=True)
    assert _rows(z)[0] == {0: 0.5, 1: 0.5}
    assert set(z.lookup(np.zeros_like(keys), keys, M32).tolist()) == {0, 1}


@pytest.mark.parametrize(
    "kwargs",
    [{"rate": 0}, {"rate": -0.01}, {"rate": 1.5}, {"rate": float("nan")}, {"cap": 0}, {"cap": 2.5}, {"zeros": 1}],
)
def test_drop_add_q_bad_input(kwargs):
    with pytest.raises(PTableError):
        noise.drop_add_q(**kwargs)


# ============================================================================ through a Session


@pytest.fixture(scope="module")
def micro() -> pl.DataFrame:
    """3,000 records over a (4 codes) × b (5) × c (3), one a × b combination empty: counts
    from 0 to 3,000, so every row rule is exercised (PRAM's period, drop/add's q = 7)."""
    rng = np.random.default_rng(20190601)
    a = rng.choice(["a1", "a2", "a3", "a4"], 3000, p=[0.4, 0.3, 0.2, 0.1])
    b = rng.choice(["b1", "b2", "b3", "b4", "b5"], 3000)
    b = np.where((a == "a4") & (b == "b5"), "b1", b)
    c = rng.choice(["c1", "c2", "c3"], 3000, p=[0.5, 0.3, 0.2])
    w = rng.uniform(20, 40, 3000)
    return pl.DataFrame({"pid": np.arange(3000), "a": a, "b": b, "c": c, "wt": w})


def _micro_counts(micro: pl.DataFrame) -> np.ndarray:
    return micro.group_by("a", "b").len()["len"].to_numpy()


PTABLES = {
    "dp truncate": lambda m: noise.discrete_laplace(2, 7, negative_to_zero=False),
    "dp negative_to_zero": lambda m: noise.discrete_laplace(2, 7, negative_to_zero=True),
    "pram": lambda m: noise.pram(SMALL, LARGE),
    "pram invariant": lambda m: noise.pram(SMALL, LARGE, invariant_to=_micro_counts(m)),
    "drop_add_q": lambda m: noise.drop_add_q(),
    "drop_add_q zeros": lambda m: noise.drop_add_q(zeros=True),
}


@pytest.mark.parametrize("name", list(PTABLES))
def test_same_cell_same_noise_in_two_tables(session, micro, name):
    p = PTABLES[name](micro)
    session.register("m", micro)
    session.add_record_keys("m", id_column="pid", seed="noise-test")
    ab = pt.TableSpec({"a": None, "b": None}, weight="wt")
    ac = pt.TableSpec({"a": None, "c": None}, weight="wt")
    abc = pt.TableSpec({"a": None, "b": None, "c": None}, weight="wt")
    one = session.cell_key("m", ab, p, original=True)
    two = session.cell_key("m", ac, p, original=True)
    three = session.cell_key("m", abc, p, original=True)
    # the a margin (and grand total) of a×b and a×c hold the same records
    left = one.filter(pl.col("b_level") == 0).select("a", "n", "n_pert")
    right = two.filter(pl.col("c_level") == 0).select("a", "n", "n_pert")
    assert left.sort("a").equals(right.sort("a"))
    # the a×b cells of a×b×c (c at its total) are the cells of a×b
    sub = three.filter(pl.col("c_level") == 0).select("a", "b", "n", "n_pert").sort("a", "b")
    assert sub.equals(one.select("a", "b", "n", "n_pert").sort("a", "b"))
    # the SQL join is the p-table's lookup on the cell keys, every row rule included
    keys = session.tabulate("m", abc, cell_keys=True)
    mine = p.lookup(keys["n"].to_numpy(), keys["cell_key"].to_numpy(), M32)
    assert mine.tolist() == three["n_pert"].to_list()
    assert three["n"].max() == 3000 and (three["n_pert"] >= 0).all()
    assert (three["n_pert"] != three["n"]).sum() > 0  # the noise is not trivially zero
    # an empty cell has cell key 0 and takes row 0's first interval: it stays 0
    empty = one.filter(pl.col("n") == 0)
    assert empty.height == 1 and empty["n_pert"].to_list() == [0]


# ============================================================================ survey weights


def test_weighted_avg_cell_is_the_sessions_w_pert_and_avg_uses_the_mean_weight(session, micro):
    session.register("m", micro)
    session.add_record_keys("m", id_column="pid", seed="w")
    spec = pt.TableSpec({"a": None, "b": None}, weight="wt")
    out = session.cell_key("m", spec, noise.drop_add_q(), original=True)
    cell = noise.weighted(out, "avg_cell", name="w_cell")
    pos = cell.filter(pl.col("n") > 0)
    np.testing.assert_allclose(pos["w_cell"].to_numpy(), pos["w_pert"].to_numpy(), rtol=1e-12)
    # Σw/Σn over a whole published table is the overall mean weight (every record lies in the
    # same number of its cells)
    wbar = micro["wt"].sum() / micro.height
    avg = noise.weighted(out, "avg")
    f = avg.filter(pl.col("n_pert") > 0)
    v = (f["n_pert"] - f["n"]).to_numpy()
    np.testing.assert_allclose(f["w_pert"].to_numpy(), f["w"].to_numpy() + v * wbar, rtol=1e-12)
    np.testing.assert_allclose(
        noise.weighted(out, "avg", mean_weight=wbar)["w_pert"].to_numpy(),
        avg["w_pert"].to_numpy(),
        rtol=1e-12,
    )
    # a ragged hierarchy (a1, a2 under G; a3, a4 straight under the total): records lie in
    # different numbers of cells, so Σw/Σn over the cells is not the overall mean weight;
    # the grand total cell gives it
    ragged = pt.Hierarchy.from_parent_child(
        [("Total", "G"), ("G", "a1"), ("G", "a2"), ("Total", "a3"), ("Total", "a4")])
    uneven = pt.TableSpec({"a": ragged, "b": None}, weight="wt")
    out3 = session.cell_key("m", uneven, noise.drop_add_q(), original=True)
    assert out3["w"].sum() / out3["n"].sum() != pytest.approx(wbar, rel=1e-6)
    f3 = noise.weighted(out3, "avg").filter(pl.col("n_pert") > 0)
    v3 = (f3["n_pert"] - f3["n"]).to_numpy()
    np.testing.assert_allclose(f3["w_pert"].to_numpy(), np.maximum(f3["w"].to_numpy() + v3 * wbar, 0), rtol=1e-9)


@FAST
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 40), st.floats(1, 50), st.integers(-3, 3)), min_size=1, max_size=30
    ).filter(lambda r: any(n > 0 for n, _, _ in r))
)
def test_weighted_counts_formulas(rows):
    n = np.array([r[0] for r in rows])
    w = np.array([r[0] * r[1] for r in rows])
    npert = np.maximum(n + np.array([r[2] for r in rows]), 0)
    wbar = w.sum() / n.sum()
    avg = noise.weighted_counts(n, w, npert, "avg")
    cell = noise.weighted_counts(n, w, npert, "avg_cell")
    pos = npert > 0
    np.testing.assert_allclose(avg[pos], np.maximum(w + (npert - n) * wbar, 0)[pos], rtol=1e-12)
    has = pos & (n > 0)
    np.testing.assert_allclose(cell[has], (npert * w / np.where(n > 0, n, 1))[has], rtol=1e-12)
    moved_zero = pos & (n == 0)
    np.testing.assert_allclose(cell[moved_zero], npert[moved_zero] * wbar, rtol=1e-12)
    assert (avg[~pos] == 0).all() and (cell[~pos] == 0).all()


def test_weighted_counts_keeps_blanked_cells_and_refuses_bad_input():
    out = noise.weighted_counts([3, 4], [30.0, 40.0], [np.nan, 5], "avg")
    assert np.isnan(out[0]) and out[1] == pytest.approx(50.0)
    with pytest.raises(InputError, match="method"):
        noise.weighted_counts([1], [1.0], [1], "mean")
    with pytest.raises(InputError, match="aligned"):
        noise.weighted_counts([1, 2], [1.0], [1, 2])
    with pytest.raises(InputError, match="no sample record"):
        noise.weighted_counts([0, 2], [5.0, 2.0], [0, 2])
    with pytest.raises(InputError, match="negative"):
        noise.weighted_counts([1], [-1.0], [1])
    with pytest.raises(InputError, match="mean_weight"):
        noise.weighted_counts([1], [1.0], [1], mean_weight=0)
    with pytest.raises(InputError, match="missing column"):
        noise.weighted(pl.DataFrame({"n": [1], "n_pert": [1]}), "avg")


# ============================================================================ additivity


def test_restore_additivity_of_a_perturbed_table(session, micro):
    session.register("m", micro)
    session.add_record_keys("m", id_column="pid", seed="add")
    spec = pt.TableSpec({"a": None, "b": None})
    out = session.cell_key("m", spec, noise.discrete_laplace(2, 7, negative_to_zero=True))
    X, _, published = session.model_matrix("m", spec)
    assert published.select("a", "b").equals(out.select("a", "b"))
    z = out["n_pert"].to_numpy().astype(float)
    res = noise.restore_additivity(X, z, seed=11)
    np.testing.assert_array_equal(res.z, X.T @ res.y)  # additive by construction
    assert res.y.dtype.kind == "i" and (res.y >= 0).all()
    assert res.converged
    np.testing.assert_allclose(X.T @ res.y_expected, res.z_fit, atol=1e-6)
    # the structural zero (a4, b5) stays empty; the grand total moves by less than the noise cap
    assert abs(res.z[0] - 3000) <= 7 + 1
    again = noise.restore_additivity(X, z, seed=11)
    np.testing.assert_array_equal(again.y, res.y)
    real = noise.restore_additivity(X, z, integer=False)
    np.testing.assert_allclose(real.z, X.T @ real.y_expected)
    # an additive input comes back unchanged by the fit
    exact = noise.restore_additivity(X, published["n"].to_numpy().astype(float), integer=False)
    np.testing.assert_allclose(exact.z_fit, published["n"].to_numpy(), atol=1e-6)
    with pytest.raises(InputError, match="seed"):
        noise.restore_additivity(X, z)


# ============================================================================ the study


@pytest.fixture(scope="module")
def study():
    path = Path(__file__).resolve().parents[2] / "examples" / "flexible_table_builder_study.py"
    spec = importlib.util.spec_from_file_location("flexible_table_builder_study", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_study_percent_perturbed_near_the_papers(study):
    tables, results = study.simulate(
        reps=40, seed=7, which=("DP", "PRAM", "PRAM plain", "Drop/add q"), data=DATA
    )
    for (const, method), res in results.items():
        t = tables[const]
        obs, exp, se = study.percent_perturbed(t, res)
        # the cells follow their p-tables: a Poisson-binomial count of changed cells
        assert abs(obs - exp) <= 4 * se, (const, method, obs, exp, se)
        paper = study.PAPER_PCT.get(method)
        if paper is not None:
            assert abs(obs - paper) <= study.paper_tolerance(se, paper), (const, method, obs)
        if method == "DP":  # counts >= 1: P(v = 0 | n) = P(0) under negative_to_zero
            assert t.n.min() >= 1
            assert exp == pytest.approx(100 * (1 - noise.dp_noise(2, 7)[1][7]), abs=1e-9)
        if method == "Drop/add q":  # counts 1…100: q = 1, so 2 of 3 outcomes move
            assert t.n.max() <= 100
            assert exp == pytest.approx(200 / 3, abs=1e-9)
        if method == "PRAM plain":  # the matrices alone keep a count w.p. 0.7616: not 28%
            assert exp == pytest.approx(100 * (1 - 0.7616), abs=2e-3)


def test_study_is_deterministic_and_writes_its_tables_and_plots(study, tmp_path):
    a = study.simulate(reps=4, seed=3, which=("DP", "PRAM"), data=DATA)
    b = study.simulate(reps=4, seed=3, which=("DP", "PRAM"), data=DATA)
    for k in a[1]:
        np.testing.assert_array_equal(a[1][k].n_pert, b[1][k].n_pert)
        np.testing.assert_array_equal(a[1][k].weighted["avg"], b[1][k].weighted["avg"])
    t4 = study.table4(*a)
    t5, chi2 = study.table5(*a)
    assert t4.height == 4 and t5.height == 2 * (1 + 2 * 2)
    paths = study.save_plots(t4, t5, chi2, tmp_path)
    assert [p.name for p in paths] == ["chi2_boxplots.png", "ru_map.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)


def test_mechanisms_build_ptables_where_they_live():
    """DP, PRAM, drop/add-q, random rounding and Barnardisation build PTables in noise/ and
    rounding/; PTable keeps only the table (no constructor of a mechanism: no import upward)."""
    from protab import rounding

    small = noise.read_matrix(DATA / "pram_small.csv")
    large = noise.read_matrix(DATA / "pram_large.csv")
    for table in (noise.discrete_laplace(2, 7), noise.drop_add_q(0.01, 7), noise.pram(small, large),
                  rounding.random_rounding_ptable(3), rounding.barnardisation_ptable(0.2)):
        assert isinstance(table, pt.PTable) and table.frame.height > 0
    for name in ("discrete_laplace", "pram", "drop_add_q", "random_rounding", "barnardisation"):
        assert not hasattr(pt.PTable, name)
