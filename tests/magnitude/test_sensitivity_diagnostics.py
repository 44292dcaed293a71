"""Session.sensitivity(..., diagnostics=True): the shares behind the rules' verdicts.

``<s>_dominance_<n>`` is the share of the n largest contributions in the total X the rules
use (GaussSuppression's dominant1/dominant2), ``<s>_contributors`` what the frequency rule
counts; hand-computed here on four records of cell x:

    v   = 10, 5, 2, 0      w = 0.5, 3, 1, 1      holding h = A, B, A, B

- records, unweighted: X = 17, shares 10/17 and 15/17; 3 non-zero contributors (gauss), 4
  contributors (argus);
- weights="default": the largest by unweighted |x| over X = Σ w·x = 5 + 15 + 2 = 22: 10/22, 15/22;
- weights="tauargus" (each of the n largest counts with its weight until the weights reach
  n): n = 1: 10·0.5 = 5, so 5/22; n = 2: 10·0.5 + 5·1.5 = 12.5, so 12.5/22;
- holdings A = 12, B = 5: 12/17 (two holdings); weights="default": A's 12 over
  Σ|Σ w·x| = |5 + 2| + |15 + 0| = 22.
"""

from __future__ import annotations

import polars as pl
import pytest

import protab as pt
from protab.errors import SpecError
from protab.magnitude import MagnitudeCKM, SensitivityRules
from protab.ptable.magnitude_ptable import MagnitudePTable

FRAME = pl.DataFrame({
    "a": ["x", "x", "x", "x", "y"], "v": [10.0, 5.0, 2.0, 0.0, 3.0], "w": [0.5, 3.0, 1.0, 1.0, 1.0],
    "h": ["A", "B", "A", "B", "C"], "id": [1, 2, 3, 4, 5],
})


def _cell_x(rules: SensitivityRules, weight: str | None = None, **kw) -> dict:
    with pt.Session(":memory:") as s:
        s.register("t", FRAME)
        out = s.sensitivity("t", pt.TableSpec({"a": None}, sums=["v"], weight=weight), rules, **kw)
    return out.filter(pl.col("a") == "x").row(0, named=True)


def test_record_shares_and_contributors():
    rules = SensitivityRules(min_frequency=3, dominance=[(1, 80)], p_percent=10)
    x = _cell_x(rules, diagnostics=True)
    assert x["v_dominance_1"] == pytest.approx(10 / 17)
    assert x["v_dominance_2"] == pytest.approx(15 / 17)
    assert x["v_contributors"] == 3
    argus = _cell_x(SensitivityRules(min_frequency=3, dominance=[(2, 80)], convention="argus"), diagnostics=True)
    assert argus["v_dominance_2"] == pytest.approx(15 / 17) and argus["v_contributors"] == 4
    assert "v_dominance_1" not in argus  # only the shares a rule reads


def test_weighted_shares():
    default = _cell_x(SensitivityRules(p_percent=10, weights="default"), "w", diagnostics=True)
    assert default["v_dominance_1"] == pytest.approx(10 / 22)
    assert default["v_dominance_2"] == pytest.approx(15 / 22)
    tauargus = _cell_x(SensitivityRules(p_percent=10, weights="tauargus"), "w", diagnostics=True)
    assert tauargus["v_dominance_1"] == pytest.approx(5 / 22)
    assert tauargus["v_dominance_2"] == pytest.approx(12.5 / 22)


def test_holding_shares():
    x = _cell_x(SensitivityRules(dominance=[(1, 80)], min_frequency=3, holding="h"), diagnostics=True)
    assert x["v_dominance_1"] == pytest.approx(12 / 17)
    assert x["v_contributors"] == 2
    weighted = _cell_x(SensitivityRules(dominance=[(1, 80)], holding="h", weights="default"), "w", diagnostics=True)
    assert weighted["v_dominance_1"] == pytest.approx(12 / 22)


def test_the_shares_agree_with_the_verdicts():
    rules = SensitivityRules(dominance=[(1, 60)], p_percent=50)
    with pt.Session(":memory:") as s:
        s.register("t", FRAME)
        out = s.sensitivity("t", pt.TableSpec({"a": None}, sums=["v"]), rules, diagnostics=True)
    d1, d2 = out["v_dominance_1"], out["v_dominance_2"]
    expected = (d1 >= 0.6) | ((1 - d2).abs() < 0.5 * d1)
    assert out["v_sensitive"].to_list() == expected.to_list()
    assert out["v_sensitive"].any() and not out["v_sensitive"].all()


def test_never_without_asking_nor_in_published_outputs():
    rules = SensitivityRules(min_frequency=3, dominance=[(1, 80)], p_percent=10)
    spec = pt.TableSpec({"a": None}, sums=["v"])
    magnitude = MagnitudeCKM(MagnitudePTable.maximum_entropy(10, 3, step=2, icat=[1, 5, 10], optim=[4, 1, 1]), fp=100)
    with pt.Session(":memory:") as s:
        s.register("t", FRAME)
        s.add_record_keys("t", id_column="id", seed="diagnostics test")
        plain = s.sensitivity("t", spec, rules)
        published = s.cell_key("t", spec, pt.PTable.maximum_entropy(D=3, V=1), magnitude=magnitude, rules=rules,
                               original=True)
        with pytest.raises(SpecError, match="diagnostics must be True or False"):
            s.sensitivity("t", spec, rules, diagnostics="yes")
    for frame in (plain, published):
        assert not [c for c in frame.columns if "_dominance_" in c or c.endswith("_contributors")]
    assert "v_sensitive" in published.columns
