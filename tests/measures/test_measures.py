"""Utility and risk measures (protab.measures) against hand-computed cases and published figures.

Every expected number below is worked out by hand in the comment beside it, from the formula
of docs/methods.md §5 (or the paper named there), not by calling the code under test.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from refdata import HANDBOOK

import protab as pt
from protab import measures as m
from protab.errors import InputError

DATA = Path(__file__).resolve().parents[1] / "data"


def _scr():
    d = json.loads((DATA / "scr_party_age_sex.json").read_text(encoding="utf-8"))
    inner = pl.DataFrame(d["inner"], schema=["party", "age", "sex", "n"], orient="row")
    return d, inner


# -- published figures ------------------------------------------------------------------------


def test_hellinger_utility_of_the_scr_example_matches_smallcountrounding():
    # Langsrud & Lupp (2022) party × age × sex, PLSrounding(~party*age + party*sex, base 3):
    # inner cells B,young,female 1 → 3 and B,old,male 1 → 0; R reports HDutility 0.9456522 of
    # the published table and 0.8828959 of the inner table.
    d, inner = _scr()
    spec = pt.TableSpec({"party": None, "age": None, "sex": None}, formula=d["formula"])
    X, inn, pub = pt.model_matrix(inner, spec)
    rounded = inn["n"].to_numpy().astype(float)
    key = (inn["party"] + "," + inn["age"] + "," + inn["sex"]).to_numpy()
    for cell, (before, after) in d["r_package_result"]["inner_changed"].items():
        assert rounded[key == cell] == before
        rounded[key == cell] = after
    res = d["r_package_result"]
    assert m.hellinger_utility(inn["n"], rounded) == pytest.approx(res["hellinger_utility_inner"], abs=1e-7)
    z, z_rounded = pub["n"].to_numpy(), X.T @ rounded
    assert m.hellinger_utility(z, z_rounded) == pytest.approx(res["hellinger_utility_published"], abs=1e-7)
    # the published rounded table is R's: e.g. party B (young, middle, old | male, female | Total)
    b = pub.with_columns(pl.Series("r", z_rounded)).filter(pl.col("party") == "B")
    got = {(a, s): r for a, s, r in b.select("age", "sex", "r").iter_rows()}
    assert [got[("young", "Total")], got[("middle", "Total")], got[("old", "Total")],
            got[("Total", "male")], got[("Total", "female")], got[("Total", "Total")]] == [3, 8, 0, 3, 8, 11]


SCR_PROBS = {  # Langsrud & Lupp (2022): sensitive = party, quasi = age, sex
    ("young", "male"): (1.0, 1.0),
    ("young", "female"): (0.75, 1.0),
    ("middle", "male"): (0.45, 0.4737),
    ("middle", "female"): (0.4, 0.4286),
    ("old", "male"): (0.5714, 0.6667),
    ("old", "female"): (0.875, 1.0),
}


@pytest.mark.parametrize("know_yourself", [False, True])
def test_disclosure_probabilities_of_the_scr_example(know_yourself):
    _, inner = _scr()
    out = m.disclosure_probabilities(inner, sensitive="party", quasi=["age", "sex"], count="n",
                                     know_yourself=know_yourself)
    assert out.columns == ["age", "sex", "n_total", "probability", "guessed"]
    assert out.height == 6
    for age, sex, _n, p, _guess in out.iter_rows():
        assert p == pytest.approx(SCR_PROBS[(age, sex)][know_yourself], abs=1e-4)
    # by hand: old male A 4, B 1, C 2 → A; all other combinations are won by C
    guesses = {(a, s): g for a, s, _, _, g in out.iter_rows()}
    assert guesses.pop(("old", "male")) == "A"
    assert set(guesses.values()) == {"C"}
    # totals: young male 0+0+2, middle male 8+3+9
    totals = {(a, s): n for a, s, n, _, _ in out.iter_rows()}
    assert totals[("young", "male")] == 2 and totals[("middle", "male")] == 20


def test_disclosure_probabilities_details():
    # one combination with no one in it, and fractional (expected) frequencies
    frame = pl.DataFrame({
        "q": ["x", "x", "y", "y", "z", "z"],
        "s": ["a", "b", "a", "b", "a", "b"],
        "n": [0.0, 0.0, 2.5, 0.4, 1.0, 1.0],
    })
    out = m.disclosure_probabilities(frame, sensitive="s", quasi=["q"], count="n", know_yourself=True)
    rows = {q: (n, p, g) for q, n, p, g in out.iter_rows()}
    assert rows["x"][0] == 0 and rows["x"][1] is None and rows["x"][2] is None
    # y: a = 2.5 / (2.9 − min(1, 0.4)) = 1
    assert rows["y"][1] == pytest.approx(1.0) and rows["y"][2] == "a"
    # z: one person in each category: a member of b removes themself: a = 1/(2 − 1) = 1 (tie → "a")
    assert rows["z"][1] == pytest.approx(1.0) and rows["z"][2] == "a"
    plain = m.disclosure_probabilities(frame, sensitive="s", quasi=["q"], count="n")
    assert dict(zip(plain["q"], plain["probability"]))["z"] == pytest.approx(0.5)
    with pytest.raises(InputError, match="sensitive"):
        m.disclosure_probabilities(frame, sensitive="s", quasi=["s"], count="n")
    with pytest.raises(InputError, match="nope"):
        m.disclosure_probabilities(frame, sensitive="s", quasi=["nope"], count="n")


def test_f_beta_risk_by_hand():
    # original  1, 1, 0.5, empty, 1,          0.2
    # protected 1, 0.5, 1, 1,     1 − 1e-12,  1
    # non-empty originals: 0, 1, 2, 4, 5 → a = exact original {0, 1, 4} = 3,
    # b = exact protected among non-empty {0, 2, 4, 5} = 4 (position 3 is not counted),
    # c = {0, 4} = 2; recall 2/3, precision 2/4, F_0.5 = 1.25·2 / (0.25·3 + 4) = 2.5/4.75
    po = [1, 1, 0.5, np.nan, 1, 0.2]
    pp = [1, 0.5, 1, 1, 1 - 1e-12, 1]
    r = m.f_beta_risk(po, pp)
    assert (r["a"], r["b"], r["c"]) == (3, 4, 2)
    assert r["recall"] == pytest.approx(2 / 3)
    assert r["precision"] == pytest.approx(0.5)
    assert r["f_beta"] == pytest.approx(2.5 / 4.75)
    # β = 1: 2·2/(3 + 4)
    assert m.f_beta_risk(po, pp, beta=1)["f_beta"] == pytest.approx(4 / 7)
    # nothing disclosed anywhere: F = 0, precision and recall undefined
    none = m.f_beta_risk([0.5], [0.5])
    assert none["f_beta"] == 0 and math.isnan(none["precision"]) and math.isnan(none["recall"])


def test_f_beta_risk_on_frames_joins_on_the_quasi_identifiers():
    orig = pl.DataFrame({"q": ["x", "y", "z"], "n_total": [3.0, 2.0, 0.0],
                         "probability": [1.0, 0.5, None], "guessed": ["a", "b", None]})
    # protected in another row order; y exact but not in the original; z empty originally;
    # x exact but guessing another category
    prot = pl.DataFrame({"q": ["z", "x", "y"], "n_total": [1.0, 2.0, 2.0],
                         "probability": [1.0, 1.0, 1.0], "guessed": ["a", "b", "b"]})
    r = m.f_beta_risk(orig, prot)
    assert (r["a"], r["b"], r["c"]) == (1, 2, 1)  # b: x, y (z empty in the original)
    r2 = m.f_beta_risk(orig, prot, match_category=True)
    assert (r2["a"], r2["b"], r2["c"]) == (1, 2, 0)
    assert r2["f_beta"] == 0


# -- utility, by hand ------------------------------------------------------------------------


def test_hellinger_by_hand():
    # f = 4, 1, 0; g = 1, 1, 4: (2−1)² + 0 + (0−2)² = 5, HD = √2.5, utility 1 − √2.5/√5
    assert m.hellinger_distance([4, 1, 0], [1, 1, 4]) == pytest.approx(math.sqrt(2.5))
    assert m.hellinger_utility([4, 1, 0], [1, 1, 4]) == pytest.approx(1 - math.sqrt(0.5))
    # signed: g = −1 enters as −1: (1 − (−1))² = 4, HD = √2
    assert m.hellinger_distance([1, 4], [-1, 4]) == pytest.approx(math.sqrt(2))
    assert m.hellinger_utility([1, 4], [-1, 4]) == pytest.approx(1 - math.sqrt(2) / math.sqrt(5))
    # a protected total above the original can fall below 0: f = 0, 1 against g = 0, 6:
    # HD = (√6 − 1)/√2 ≈ 1.025 > √1
    assert m.hellinger_utility([0, 1], [0, 6]) == pytest.approx(1 - (math.sqrt(6) - 1) / math.sqrt(2))
    with pytest.raises(InputError, match="aligned"):
        m.hellinger_distance([1, 2], [1])
    with pytest.raises(InputError, match="original must be numbers"):
        m.hellinger_utility(["a"], [1])


def test_absolute_differences_by_hand():
    f, g = [1, 2, 3, 4], [1, 4, 0, 4]
    # |0| + |2| + |−3| + |0| = 5 over 4 cells
    assert m.mean_absolute_deviation(f, g) == pytest.approx(1.25)
    assert m.average_absolute_difference(f, g) == pytest.approx(1.25)
    # rows a = cells 1–3 (0 + 2 + 3)/3 = 5/3, b = cell 4: 0 → mean 5/6
    assert m.average_absolute_difference(f, g, ["a", "a", "a", "b"]) == pytest.approx(5 / 6)
    # totals 10 → 12 (20 %), 20 → 19 (5 %), 0 → 3 skipped: 12.5 %
    assert m.relative_difference_of_totals([10, 20, 0], [12, 19, 3]) == pytest.approx(12.5)


def test_percentage_change_by_value_by_hand():
    # value 1: g − f = +1, −1 → mean |d| 1, mean % 0, mean |%| 100; value 2: +1 → 50 %, 50 %
    out = m.percentage_change_by_value([1, 1, 2, 0], [2, 0, 3, 5])
    assert out["value"].to_list() == [1, 2]
    assert out["cells"].to_list() == [2, 1]
    assert out["mean_abs_diff"].to_list() == pytest.approx([1, 1])
    assert out["mean_pct_change"].to_list() == pytest.approx([0, 50])
    assert out["mean_abs_pct_change"].to_list() == pytest.approx([100, 50])


def test_chi2_and_cramers_v_by_hand():
    # [[10, 20], [30, 40]]: N 100, rows 30, 70, columns 40, 60, expected 12, 18, 28, 42;
    # χ² = 4/12 + 4/18 + 4/28 + 4/42; one degree of freedom: p = erfc(√(χ²/2));
    # V = √(χ²/100)
    chi2 = 4 / 12 + 4 / 18 + 4 / 28 + 4 / 42
    r = m.chi2_independence([[10, 20], [30, 40]])
    assert r.chi2 == pytest.approx(chi2)
    assert r.dof == 1
    assert r.p_value == pytest.approx(math.erfc(math.sqrt(chi2 / 2)))
    assert r.cramers_v == pytest.approx(math.sqrt(chi2 / 100))
    # an empty row changes nothing
    assert m.chi2_independence([[10, 20], [0, 0], [30, 40]]).chi2 == pytest.approx(chi2)
    # after: [[10, 20], [30, 30]] (negative → 0 does not arise): independence of a uniform
    # second row: N 90, rows 30, 60, cols 40, 50, expected 13.33, 16.67, 26.67, 33.33
    e = [[30 * 40 / 90, 30 * 50 / 90], [60 * 40 / 90, 60 * 50 / 90]]
    obs = [[10, 20], [30, 30]]
    chi2_after = sum((obs[i][j] - e[i][j]) ** 2 / e[i][j] for i in range(2) for j in range(2))
    ba = m.independence_before_after([[10, 20], [30, 40]], obs)
    assert ba["chi2_before"] == pytest.approx(chi2) and ba["chi2_after"] == pytest.approx(chi2_after)
    v0, v1 = math.sqrt(chi2 / 100), math.sqrt(chi2_after / 90)
    assert ba["cramers_v_change_pct"] == pytest.approx(100 * (v1 - v0) / v0)
    assert math.isnan(m.chi2_independence([[1, 2]]).chi2)
    with pytest.raises(InputError, match="negative"):
        m.chi2_independence([[1, -2], [3, 4]])


def test_two_way_table_sums_other_dimensions():
    frame = pl.DataFrame({"r": ["a", "a", "b", "a"], "c": ["x", "y", "x", "x"],
                          "o": ["1", "1", "1", "2"], "n": [1, 2, 3, 4]})
    t, rows, cols = m.two_way_table(frame, "r", "c", "n")
    assert rows == ["a", "b"] and cols == ["x", "y"]
    assert t.tolist() == [[5, 2], [3, 0]]
    # integer codes sort as numbers: 9 before 10
    t, rows, cols = m.two_way_table(pl.DataFrame({"r": [10, 9], "c": [1, 1], "n": [1, 2]}), "r", "c", "n")
    assert rows == [9, 10] and t.tolist() == [[2], [1]]


def test_spearman_by_hand():
    # ranks (1, 2, 3, 4) against (1, 3, 2, 4): Σd² = 2, ρ = 1 − 6·2/(4·15) = 0.8
    assert m.spearman_correlation([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert math.isnan(m.spearman_correlation([1, 1, 1], [1, 2, 3]))


def test_variance_of_cell_averages_and_anova_by_hand():
    v, grp = [1, 3, 5, 7], ["a", "a", "b", "b"]
    # group means 2 and 6 around 4: variance ((−2)² + 2²)/2 = 4
    assert m.variance_of_cell_averages(v, grp) == pytest.approx(4)
    # every cell its own group: (9 + 1 + 1 + 9)/4 = 5
    assert m.variance_of_cell_averages(v) == pytest.approx(5)
    # SST = 20, SSB = 2·4 + 2·4 = 16 → R² 0.8
    assert m.anova_r2(v, grp) == pytest.approx(0.8)
    # a target variable y (0/1) weighted by counts 3, 1 | 1, 3: group means 0.25, 0.75,
    # overall 0.5; SSB = 4·0.0625 + 4·0.0625 = 0.5, SST = 8·0.25 = 2 → 0.25
    assert m.anova_r2([0, 1, 0, 1], grp, weights=[3, 1, 1, 3]) == pytest.approx(0.25)


def test_binomial_test_of_random_rounding_by_hand():
    # base 3: six cells with residual 1 all rounded up (expected share 1/3): the two-sided
    # exact p-value sums the outcomes no more likely than 6 of 6: P(6) = (1/3)^6 = 1/729
    # (P(5) = 6·(1/3)^5·(2/3) = 12/729 is larger); residual 2: 2 cells, 1 up: P(1) = 4/9 is
    # the most likely outcome, p = 1; 3 and 0 stay.
    f = [1, 1, 1, 1, 1, 1, 2, 2, 3, 0]
    g = [3, 3, 3, 3, 3, 3, 3, 0, 3, 0]
    out = m.binomial_test_rounding(f, g, 3)
    assert out["residual"].to_list() == [1, 2]
    assert out["cells"].to_list() == [6, 2]
    assert out["rounded_up"].to_list() == [6, 1]
    assert out["observed"].to_list() == pytest.approx([1.0, 0.5])
    assert out["expected"].to_list() == pytest.approx([1 / 3, 2 / 3])
    assert out["p_value"].to_list() == pytest.approx([1 / 729, 1.0])
    with pytest.raises(InputError, match="adjacent multiple"):
        m.binomial_test_rounding([1, 4], [3, 9], 3)
    with pytest.raises(InputError, match="adjacent multiple"):
        m.binomial_test_rounding([3], [6], 3)


# -- risk, by hand ---------------------------------------------------------------------------


def test_small_and_changed_cells_by_hand():
    assert m.share_small_cells([0, 1, 2, 3, 5], k=2) == pytest.approx(0.4)  # 1 and 2 of 5
    f, g = [1, 2, 2, 5, 0], [1, 3, 2, 5, 1]
    # original small cells: positions 0, 1, 2; unchanged: 0, 2
    assert m.small_cells_unchanged(f, g, k=2) == pytest.approx(2 / 3)
    assert m.percent_changed(f, g) == pytest.approx(40)  # positions 1 and 4
    assert m.share_changed(f, g) == pytest.approx(0.4)
    assert math.isnan(m.small_cells_unchanged([5, 6], [5, 6]))


def test_noise_by_value_from_pairs_by_hand():
    # value 1: v = 0, 1, −1, 0 → P(v=0) 0.5, mean 0, var 2/4 = 0.5, 1/var 2
    # value 2: v = 0, 2 → P(v=0) 0.5, mean 1, var 1, 1/var 1
    out = m.noise_by_value([1, 1, 1, 1, 2, 2], [1, 2, 0, 1, 2, 4])
    assert out["value"].to_list() == [1, 2]
    assert out["cells"].to_list() == [4, 2]
    assert out["p_stay"].to_list() == pytest.approx([0.5, 0.5])
    assert out["mean"].to_list() == pytest.approx([0, 1])
    assert out["var"].to_list() == pytest.approx([0.5, 1])
    assert out["inv_var"].to_list() == pytest.approx([2, 1])


def test_noise_by_value_from_the_handbook_ptable():
    # handbook p-table: i = 1: ±1 each 0.5 → P(0) 0, var 1; i = 2: 0 (0.8), +1 (0.2) → mean
    # 0.2, var 0.2 − 0.04 = 0.16; i = 3 (and 7, past imax): −1, 0, +1 with 0.3, 0.4, 0.3 →
    # var 0.6; i = 0 stays 0: P(0) = 1, var 0, 1/var infinite
    p = pt.PTable.from_frame(HANDBOOK)
    out = m.ptable_noise_by_value(p, [0, 1, 2, 3, 7])
    assert out["p_stay"].to_list() == pytest.approx([1, 0, 0.8, 0.4, 0.4])
    assert out["mean"].to_list() == pytest.approx([0, 0, 0.2, 0, 0])
    assert out["var"].to_list() == pytest.approx([0, 1, 0.16, 0.6, 0.6])
    assert out["inv_var"].to_list() == pytest.approx([math.inf, 1, 1 / 0.16, 1 / 0.6, 1 / 0.6])


def test_disclosive_cells_by_hand():
    # region r1: A 5, B 0, C 1 (6): with k = 1, A: 6 − 1 ≤ 5 → disclosive; C: 5 > 1 no.
    # r2: 2, 2, 2: none. r3: 0, 1, 0 (1): B: 1 − 1 ≤ 1 → disclosive. With k = 0 only r3 B.
    frame = pl.DataFrame({
        "region": ["r1"] * 3 + ["r2"] * 3 + ["r3"] * 3,
        "party": ["A", "B", "C"] * 3,
        "n": [5, 0, 1, 2, 2, 2, 0, 1, 0],
    })
    out = m.disclosive_cells(frame, sensitive="party", count="n", k=1)
    flagged = {(r, p) for r, p, d in out.select("region", "party", "disclosive").iter_rows() if d}
    assert flagged == {("r1", "A"), ("r3", "B")}
    out0 = m.disclosive_cells(frame, sensitive="party", count="n", k=0)
    assert {(r, p) for r, p, d in out0.select("region", "party", "disclosive").iter_rows() if d} == {("r3", "B")}
    # a published (perturbed) margin of r1 of 7 is what the attacker sees: 7 − 1 > 5
    with_total = pl.concat([frame, pl.DataFrame({"region": ["r1"], "party": ["Total"], "n": [7]})])
    out_t = m.disclosive_cells(with_total, sensitive="party", count="n", k=1)
    assert out_t.height == 9
    assert {(r, p) for r, p, d in out_t.select("region", "party", "disclosive").iter_rows() if d} == {("r3", "B")}
    # C as "unknown": r1 has one unknown → safe; the unknown category itself never is
    out_u = m.disclosive_cells(frame, sensitive="party", count="n", k=1, unknown="C")
    assert {(r, p) for r, p, d in out_u.select("region", "party", "disclosive").iter_rows() if d} == {("r3", "B")}


def test_entropy_risk_by_hand():
    # F = 2, 2, 0, 0: |D|/K = 1/2; H = ln 2, log K = ln 4 → 1 − H/log K = 1/2;
    # N = 4: −(1/2)·log(1/(2e)) = (1 + ln 2)/2; r = (1/2 + 1/2 + (1 + ln 2)/2)/3
    t3 = (1 + math.log(2)) / 2
    assert m.entropy_risk([2, 2, 0, 0]) == pytest.approx((0.5 + 0.5 + t3) / 3)
    assert m.entropy_risk([2, 2, 0, 0], weights=(1, 0, 0)) == pytest.approx(0.5)
    # perturbed 2, 2, 1, 0: D = {2, 3}, Q = {3}: (1/2)^(|D∪Q|/|D∩Q|) = (1/2)^2 = 1/4; the
    # pairs (2,2), (2,2), (0,1), (0,0) let B decide A: H(A|B) = 0, factor 1
    assert m.entropy_risk_perturbed([2, 2, 0, 0], [2, 2, 1, 0]) == pytest.approx((0.25 + 0.5 + t3) / 3)
    # no true zero published as zero: the first term vanishes
    assert m.entropy_risk_perturbed([2, 2, 0, 0], [2, 2, 1, 1], weights=(1, 0, 0)) == 0
    with pytest.raises(InputError, match="sum to 1"):
        m.entropy_risk([1, 2], weights=(0.5, 0.5, 0.5))


def test_conditional_entropy_risk_by_hand():
    # f = 1, 1, 2, 2 against g = 1, 2, 1, 2: each b has A = 1 or 2 equally: H(A|B) = H(A)
    assert m.conditional_entropy_risk([1, 1, 2, 2], [1, 2, 1, 2]) == pytest.approx(0)
    # g = 1, 1, 1, 2: b = 1 (3/4) holds a = 1, 1, 2 → H = (3/4)·H(2/3, 1/3), b = 2 → 0;
    # H(A) = ln 2
    h = -(2 / 3) * math.log(2 / 3) - (1 / 3) * math.log(1 / 3)
    assert m.conditional_entropy_risk([1, 1, 2, 2], [1, 1, 1, 2]) == pytest.approx(1 - 0.75 * h / math.log(2))
    # weighted by units: pairs (1,1) 2 units, (2,1) 2, (2,2) 2: H(A) = H(1/3, 2/3) = h,
    # H(A|B) = (2/3)·ln 2
    assert m.conditional_entropy_risk([1, 1, 2, 2], [1, 1, 1, 2], unit_weighted=True) == pytest.approx(
        1 - (2 / 3) * math.log(2) / h)
    # a joint matrix of units, rows original, columns protected: [[3, 1], [0, 4]]:
    # H(A) = ln 2; H(A|B) = −(1/8)·ln(1/5) − (4/8)·ln(4/5)
    hab = -(1 / 8) * math.log(1 / 5) - 0.5 * math.log(4 / 5)
    assert m.conditional_entropy_risk(joint=np.array([[3, 1], [0, 4]])) == pytest.approx(1 - hab / math.log(2))
    # a one-to-one recoding gives the original away
    assert m.conditional_entropy_risk([1, 2, 3], [5, 7, 9]) == pytest.approx(1)


# -- properties ------------------------------------------------------------------------------

counts = st.lists(st.integers(min_value=0, max_value=40), min_size=2, max_size=30)


@settings(max_examples=60, deadline=None)
@given(counts, st.data())
def test_hellinger_utility_within_unit_interval(f, data):
    # non-negative protected values with a total of at most the original one (any
    # redistribution of the persons, minus some): HD² = ½(Σf + Σg) − Σ√(fg) ≤ Σf
    g = np.array(data.draw(st.lists(st.integers(0, 60), min_size=len(f), max_size=len(f))), float)
    share = data.draw(st.floats(0, 1))
    assume(sum(f) > 0 and g.sum() > 0)
    g = g * share * sum(f) / g.sum()
    u = m.hellinger_utility(f, g)
    assert -1e-12 <= u <= 1 + 1e-12


@settings(max_examples=60, deadline=None)
@given(counts)
def test_protected_equal_to_original_gives_utility_one_and_original_risk(f):
    assume(sum(f) > 0)
    assert m.hellinger_utility(f, f) == 1
    assert m.mean_absolute_deviation(f, f) == 0
    assert m.percent_changed(f, f) == 0
    assert m.conditional_entropy_risk(f, f) == 1
    assert m.entropy_risk_perturbed(f, f) == pytest.approx(m.entropy_risk(f))
    small = m.small_cells_unchanged(f, f)
    assert math.isnan(small) or small == 1
    if len(set(f)) > 1:
        assert m.spearman_correlation(f, f) == pytest.approx(1)
    probs = m.disclosure_probabilities(
        pl.DataFrame({"q": [str(i % 3) for i in range(len(f))], "s": [str(i % 2) for i in range(len(f))],
                      "n": f}), sensitive="s", quasi=["q"], know_yourself=True)
    fb = m.f_beta_risk(probs, probs)
    assert fb["a"] == fb["b"] == fb["c"]
    if fb["a"]:
        assert fb["f_beta"] == 1 and fb["precision"] == 1 and fb["recall"] == 1


@settings(max_examples=40, deadline=None)
@given(counts, st.data())
def test_measures_do_not_depend_on_row_order(f, data):
    g = data.draw(st.lists(st.integers(0, 60), min_size=len(f), max_size=len(f)))
    perm = data.draw(st.permutations(range(len(f))))
    fp, gp = [f[i] for i in perm], [g[i] for i in perm]
    if sum(f) > 0:
        assert m.hellinger_utility(fp, gp) == pytest.approx(m.hellinger_utility(f, g))
        assert m.entropy_risk_perturbed(fp, gp) == pytest.approx(m.entropy_risk_perturbed(f, g))
    assert m.mean_absolute_deviation(fp, gp) == pytest.approx(m.mean_absolute_deviation(f, g))
    assert m.conditional_entropy_risk(fp, gp) == pytest.approx(m.conditional_entropy_risk(f, g))
    s1, s2 = m.spearman_correlation(fp, gp), m.spearman_correlation(f, g)
    assert (math.isnan(s1) and math.isnan(s2)) or s1 == pytest.approx(s2)
    frame = pl.DataFrame({"q": [str(i % 4) for i in range(len(f))],
                          "s": [str(i % 3) for i in range(len(f))], "n": g})
    a = m.disclosure_probabilities(frame, sensitive="s", quasi=["q"], know_yourself=True)
    b = m.disclosure_probabilities(frame[list(perm)], sensitive="s", quasi=["q"], know_yourself=True)
    assert a.equals(b)
