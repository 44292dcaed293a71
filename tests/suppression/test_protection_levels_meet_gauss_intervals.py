"""Protection levels (protab.ProtectionLevels, rule_levels) and interval protection in candidate
order (protect_in_order, Session.suppress(interval_protection="gauss")) against GaussSuppression
1.2.3's IntervalLimits examples (tests/data/gauss_rules/levels, made by make_reference_levels.R
with lpSolve; Rglpk gives the same files), and invariants on random tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import sparse

import protab as pt
from protab.magnitude import SensitivityRules
from protab.suppression import (
    ProtectionLevels,
    audit_pattern,
    candidates_default,
    candidates_num,
    intervals,
    protect_in_order,
    rule_levels,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "gauss_rules"
LEVELS = DATA / "levels"
KEYS = ["geo", "sector4"]


def _ref(case: str) -> pl.DataFrame:
    return pl.read_csv(LEVELS / f"{case}.csv", infer_schema_length=None)


def _formula_x(ref: pl.DataFrame, counts: bool):
    """X of the reference's cells (~sector2*geo + sector4*eu over magnitude1): those columns of
    protab's full hierarchical table, rows in the input's order; and the rows the package's
    candidate function saw (one per inner cell and company)."""
    data = pl.read_csv(LEVELS / "input_magnitude1_num2.csv")
    with pt.Session(":memory:") as s:
        s.register("m", data)
        dims = {"sector4": s.hierarchy_from_columns("m", ["sector2", "sector4"]),
                "geo": s.hierarchy_from_columns("m", ["eu", "geo"])}
        spec = pt.TableSpec(dims) if counts else pt.TableSpec(dims, sums=["value"])
        X, inner, published = s.model_matrix("m", spec, extend0=counts)
    first = data.with_row_index("_r").group_by(KEYS).agg(pl.col("_r").min())
    inner = inner.with_row_index("_i").join(first, on=KEYS, how="left").sort("_r", nulls_last=True,
                                                                                maintain_order=True)
    X = sparse.csc_matrix(X)[inner["_i"].to_numpy(), :]
    perm = ref.with_row_index("_k").join(published.with_row_index("_j"), on=KEYS, how="left").sort("_k")["_j"]
    assert perm.null_count() == 0
    X = X[:, perm.to_numpy()]
    rows = data.select(*KEYS, "company").unique(maintain_order=True)
    at = inner.select(KEYS).with_row_index("_p")
    Xpkg = X[rows.join(at, on=KEYS, how="left", maintain_order="left")["_p"].to_numpy(), :]
    return X, Xpkg


def _required(ref: pl.DataFrame, var: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The package's requirement columns as protab's distances L, U, R (0 where absent)."""
    z = ref[var].to_numpy().astype(float)

    def col(name: str) -> np.ndarray:
        return ref[name].fill_null(np.nan).to_numpy().astype(float) if name in ref.columns else np.full(z.size, np.nan)

    lomax, upmin, rlim = col(f"lomax_{var}"), col(f"upmin_{var}"), col(f"rlim_{var}")
    return (np.nan_to_num(z - lomax), np.nan_to_num(upmin - z), np.nan_to_num(rlim))


# --------------------------------------------------------------- the requirements themselves


def test_levels_as_shares_and_limits_equal_interval_limits():
    """IntervalLimits example 1: protectionPercent 3, protectionLimit 5, loProtectionLimit 4,
    rangePercent 10, rangeMin 1 give the package's lomax/upmin/rlim on every primary cell."""
    ref = _ref("il_ex1_dom_k80_99")
    z, prim = ref["value"].to_numpy(), ref["primary"].to_numpy()
    L, U, R = ProtectionLevels(percent=3, limit=5, lower_limit=4, range_percent=10, range_min=1).distances(z, prim)
    assert prim.sum() == 5
    np.testing.assert_allclose(np.maximum(0, z - L)[prim], ref["lomax_value"].to_numpy()[prim], rtol=1e-12)
    np.testing.assert_allclose((z + U)[prim], ref["upmin_value"].to_numpy()[prim], rtol=1e-12)
    np.testing.assert_allclose(R[prim], ref["rlim_value"].to_numpy()[prim], rtol=1e-12)
    assert (L[~prim] == 0).all() and (U[~prim] == 0).all() and (R[~prim] == 0).all()


def test_range_levels_per_variable_equal_interval_limits():
    """IntervalLimits example 2: rangePercent 10 / rangeMin 1 on value, 10 / 0.2222 on freq."""
    ref = _ref("il_ex2_pp10_three_vars")
    prim = ref["primary"].to_numpy()
    for var, lev in (("value", ProtectionLevels(range_percent=10, range_min=1)),
                     ("freq", ProtectionLevels(range_percent=10, range_min=0.2222)),
                     ("num2", ProtectionLevels(range_percent=30, range_min=2.222))):
        _, _, R = lev.distances(ref[var].to_numpy(), prim)
        np.testing.assert_allclose(R[prim], ref[f"rlim_{var}"].to_numpy()[prim], rtol=1e-12)


def test_p_percent_levels_equal_protection_intervals():
    """IntervalLimits example 3 (MagnitudeRule protectionIntervals, p% = 10 over companies):
    rule_levels from the rule's shares d1, d2 gives lomax = max(0, z − PL), upmin = z + PL."""
    ref = _ref("il_ex3_pp10_protectionIntervals")
    shares = pl.read_csv(DATA / "primary" / "mag_pp_form_p10_company.csv").select(*KEYS, "dominant1", "dominant2")
    j = ref.join(shares, on=KEYS, how="left", maintain_order="left")
    z, prim = j["value"].to_numpy(), j["primary"].to_numpy()
    pl_ = rule_levels(SensitivityRules(p_percent=10), z, {1: j["dominant1"].to_numpy(), 2: j["dominant2"].to_numpy()})
    has = j["upmin_value"].is_not_null().to_numpy()
    assert has.sum() == 10 and (has == prim).all()
    np.testing.assert_allclose((z + pl_)[has], j["upmin_value"].to_numpy()[has], rtol=1e-9)
    np.testing.assert_allclose(np.maximum(0, z - pl_)[has], j["lomax_value"].to_numpy()[has], rtol=1e-9)
    assert (pl_[~prim] == 0).all(), "a cell the rule does not flag needs no protection"


def test_dominance_levels_are_tau_argus_upper_protection():
    """(n, k): the n largest must not learn they hold k %: U = (100/k)·(x1 + … + xn) − X."""
    z = np.array([100.0, 100.0, 60.0])
    d1 = np.array([0.85, 0.5, 1.0])
    d2 = np.array([0.95, 0.9, 1.0])
    got = rule_levels(SensitivityRules(dominance=[(1, 80), (2, 99)]), z, {1: d1, 2: d2})
    want = np.maximum.reduce([np.zeros(3), 100 / 80 * d1 * z - z, 100 / 99 * d2 * z - z])
    np.testing.assert_allclose(got, want)
    assert got[1] == 0 and got[0] == pytest.approx(6.25)


@pytest.mark.parametrize("case", ["il_ex4_small_protectionIntervals", "il_ex5_small_protectionIntervals_pct50"])
def test_frequency_protection_intervals_are_levels(case):
    """PrimaryDefault's protectionIntervals (upmin = freq + 1, rlim = 2) is
    ProtectionLevels(limit=1, lower_limit=0, range_min=2); example 5 adds protectionPercent 50."""
    ref = _ref(case)
    pct = 50.0 if case.endswith("pct50") else 0.0
    z, prim = ref["freq"].to_numpy().astype(float), ref["primary"].to_numpy()
    L, U, R = ProtectionLevels(percent=pct, limit=1, lower_limit=0, range_min=2).distances(z, prim)
    want_L, want_U, want_R = _required(ref, "freq")
    np.testing.assert_allclose(L[prim], want_L[prim])
    np.testing.assert_allclose(U[prim], want_U[prim])
    np.testing.assert_allclose(R[prim], want_R[prim])


# --------------------------------------------------------------- interval protection in order


@pytest.mark.parametrize("case, var", [
    ("il_ex5_small_protectionIntervals_pct50_lpSolve", "freq"),  # adds 3 cells, then the duplicate of one
    ("il_ex4_small_protectionIntervals_lpSolve", "freq"),  # levels met by the first pattern
    ("il_ex1_dom_k80_99_lpSolve", "value"),
    ("il_ex3_pp10_protectionIntervals_lpSolve", "value"),
])
def test_protect_in_order_gives_gauss_suppression_pattern_and_intervals(case, var):
    """From the package's first pattern (suppressed_integer 1, 2), its candidate order and its
    requirements: the same added cells (3 and 4) and the same intervals [lo_1, up_1], [lo, up]."""
    ref = _ref(case)
    counts = var == "freq"
    X, Xpkg = _formula_x(ref, counts)
    z = ref[var].to_numpy().astype(float)
    primary = ref["primary"].to_numpy()
    first = ref["suppressed_integer"].is_in([1, 2]).to_numpy()
    freq = ref["freq"].to_numpy().astype(float)
    order = candidates_default(X, freq) if counts else candidates_num(Xpkg, z, freq)
    L, U, R = _required(ref, var)
    req = dict(protection_lower=L, protection_upper=U, protection_range=R)
    got = protect_in_order(X, z, first, primary, candidates=order, **req)
    np.testing.assert_array_equal(np.flatnonzero(got), np.flatnonzero(ref["suppressed"].to_numpy()))
    has = ref["lo"].is_not_null().to_numpy()
    for supp, c_lo, c_up in ((first, "lo_1", "up_1"), (got, "lo", "up")):
        lo, up = intervals(X, z, supp)
        np.testing.assert_allclose(lo[has], ref[c_lo].to_numpy()[has], atol=1e-6)
        np.testing.assert_allclose(up[has], ref[c_up].to_numpy()[has], atol=1e-6)
    assert audit_pattern(X, z, got, primary=primary, **req)["protected"].all()


def test_session_interval_protection_in_order_reproduces_vignette_table_10():
    """The magnitude vignette's Table 10 (p% = 30, rangePercent 70, rangeMin 80): from the
    microdata, Session.suppress adds Portugal:private, as GaussSuppression, with its intervals."""
    ref = pl.read_csv(DATA / "secondary" / "sec_intervals_pp30_range_lpSolve.csv")
    with pt.Session(":memory:") as s:
        s.register("m", pl.read_csv(DATA / "inputs" / "magnitude1.csv"))
        spec = pt.TableSpec({"geo": None, "sector4": s.hierarchy_from_columns("m", ["sector2", "sector4"])},
                            sums=["value"])
        out = s.suppress("m", spec, rules=SensitivityRules(p_percent=30),
                         levels=pt.ProtectionLevels(range_percent=70, range_min=80), interval_protection="gauss")
        plain = s.suppress("m", spec, rules=SensitivityRules(p_percent=30),
                           levels=pt.ProtectionLevels(range_percent=70, range_min=80))
    j = ref.join(out, on=["geo", "sector4"], suffix="_p")
    assert (j["suppressed"] == (j["suppressed_p"] != "no")).all()
    added = j.filter(pl.col("suppressed_integer") == 3)
    assert added.select("geo", "sector4").rows() == [("Portugal", "private")]
    assert added["suppressed_p"].to_list() == ["secondary"]
    has = j.filter(pl.col("lo").is_not_null())
    np.testing.assert_allclose(has["lo"], has["lo_p"], atol=1e-6)
    np.testing.assert_allclose(has["up"], has["up_p"], atol=1e-6)
    assert out["protected"].all()
    assert not plain["protected"].all(), "without interval protection the audit says which cells miss their levels"


def test_levels_from_rules_hold_after_protection():
    """ProtectionLevels(rules=True) on the hierarchical vignette table: the dominance levels are
    met after interval protection, the audit agrees, and each primary interval reaches z ± PL."""
    with pt.Session(":memory:") as s:
        s.register("m", pl.read_csv(DATA / "inputs" / "magnitude1.csv"))
        spec = pt.TableSpec({"sector4": s.hierarchy_from_columns("m", ["sector2", "sector4"]),
                             "geo": s.hierarchy_from_columns("m", ["eu", "geo"])}, sums=["value"])
        rules = SensitivityRules(dominance=[(1, 60)])
        out = s.suppress("m", spec, rules=rules, levels=pt.ProtectionLevels(rules=True), interval_protection="gauss")
        facts = s.sensitivity("m", spec, rules, diagnostics=True)
    j = out.join(facts.select("sector4", "geo", "value_dominance_1", pl.col("value").alias("v")),
                 on=["sector4", "geo"])
    prim = j.filter(pl.col("suppressed") == "primary")
    assert prim.height > 0 and out["protected"].all()
    pl_ = prim["v"] * (prim["value_dominance_1"] * 100 / 60 - 1)
    assert (prim["up"] >= prim["v"] + pl_ - 1e-6).all()
    assert (prim["lo"] <= (prim["v"] - pl_).clip(lower_bound=0) + 1e-6).all()


# --------------------------------------------------------------- bad input


def test_levels_no_pattern_can_meet_are_refused():
    """A one-way table a, b and a total that stays published: a ∈ [0, 7] at best, so a range
    wider than the total cannot be had (a message, no pattern); a range of 7 is met with b."""
    X = sparse.csc_matrix(np.array([[1, 0, 1], [0, 1, 1]]))
    z = np.array([3.0, 4.0, 7.0])
    a, total = [True, False, False], [False, False, True]
    with pytest.raises(pt.InputError, match="cannot be met"):
        protect_in_order(X, z, a, a, never=total, protection_range=8.0)
    got = protect_in_order(X, z, a, a, never=total, protection_range=7.0)
    assert got.tolist() == [True, True, False]


def test_levels_arguments_are_checked():
    for bad in ({"percent": -1}, {"limit": float("nan")}, {"range_min": "1"}, {"rules": 1}):
        with pytest.raises(pt.SpecError, match="ProtectionLevels"):
            ProtectionLevels(**bad)
    counts = pl.DataFrame({"a": ["x", "x", "y", "z", "z", "z"]})
    with pt.Session(":memory:") as s:
        s.register("t", counts)
        with pytest.raises(pt.SpecError, match="levels must be"):
            s.suppress("t", pt.TableSpec(["a"]), min_frequency=2, levels={"percent": 10})
        with pytest.raises(pt.SpecError, match="rules=True"):
            s.suppress("t", pt.TableSpec(["a"]), min_frequency=2, levels=ProtectionLevels(rules=True))
        with pytest.raises(pt.SpecError, match="interval_protection"):
            s.suppress("t", pt.TableSpec(["a"]), min_frequency=2, interval_protection="best")


# --------------------------------------------------------------- invariants


def _linear_walk(X, z, supp, primary, order, R):
    """The definition, without bisection: each published cell in order is suppressed when
    publishing it after those kept before leaves a primary cell short of its range."""
    out = supp.copy()
    pub = np.zeros(z.size, dtype=bool)
    for c in order:
        if out[c]:
            continue
        pub[c] = True
        lo, up = intervals(X, z, ~pub)
        if ((up - lo)[primary] < R[primary] - 1e-7).any():
            pub[c] = False
            out[c] = True
    return out


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 4), st.integers(2, 4), st.integers(0, 2**31 - 1))
def test_protect_in_order_is_the_greedy_in_order_and_meets_levels(r, c, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 9, size=(r, c)).astype(float)
    n = r * c
    cols = [np.eye(n), np.kron(np.eye(r), np.ones((c, 1))), np.kron(np.ones((r, 1)), np.eye(c)), np.ones((n, 1))]
    X = sparse.csc_matrix(np.hstack(cols))
    z = X.T @ y.ravel()
    primary = np.zeros(X.shape[1], dtype=bool)
    primary[rng.choice(n, size=max(1, n // 4), replace=False)] = True
    R = np.where(primary, rng.uniform(0, 6, X.shape[1]), 0.0)
    start = pt.suppression.gauss(X, z, primary, candidates=candidates_default(X, z), singleton_method="none")
    order = candidates_default(X, z)
    try:
        got = protect_in_order(X, z, start, primary, candidates=order, protection_range=R)
    except pt.InputError:
        every = ~np.zeros(X.shape[1], dtype=bool)
        lo, up = intervals(X, z, every)
        assert ((up - lo)[primary] < R[primary] - 1e-7).any(), "refused though suppressing all would do"
        return
    assert (got >= start).all()
    assert audit_pattern(X, z, got, primary=primary, protection_range=R)["protected"].all()
    walk = _linear_walk(X, z, start, primary, [int(k) for k in order], R)
    final = pt.suppression.gauss(X, z, walk, candidates=order, singleton_method="none")
    np.testing.assert_array_equal(got, final)
