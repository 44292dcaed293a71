"""Pipelines from protected tables to additive values and expected inner frequencies."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import protab as pt
from protab import postprocess

# Langsrud (2019), Tables 1-4: the 3 x 3 table and its published results
INNER_3X3 = [[3, 6, 2], [1, 4, 7], [5, 8, 27]]
SUPPRESSED = {("1", "1"): 1.25, ("1", "3"): 3.75, ("2", "1"): 2.75, ("2", "3"): 5.25}
LOGLINEAR = [[1.5714, 3.1429, 6.2857], [1.7143, 3.4286, 6.8571], [5.7143, 11.4286, 22.8571]]
SPEC = pt.TableSpec({"r": None, "c": None})


def table_3x3() -> pl.DataFrame:
    """The published table: 9 inner cells, row and column totals, grand total."""
    inner = pl.DataFrame([(str(i + 1), str(j + 1), INNER_3X3[i][j]) for i in range(3) for j in range(3)],
                         schema=["r", "c", "n"], orient="row")
    _, _, published = pt.model_matrix(inner, SPEC)
    return published


def test_fill_suppressed_method_a_reproduces_langsrud():
    pub = table_3x3().with_columns(
        pl.when(pl.struct("r", "c").map_elements(lambda s: (s["r"], s["c"]) in SUPPRESSED, return_dtype=pl.Boolean))
        .then(None).otherwise(pl.col("n")).alias("n"))
    out = postprocess.fill_suppressed(pub, SPEC, value="n")
    got = {(r, c): f for r, c, f in out.select("r", "c", "filled").rows() if (r, c) in SUPPRESSED}
    assert got == pytest.approx(SUPPRESSED, abs=1e-6)
    safe = out.filter(pl.col("n").is_not_null())
    np.testing.assert_allclose(safe["filled"].to_numpy(), safe["n"].to_numpy())


def test_regsdc_residuals_keep_safe_cells_and_have_the_asked_rms():
    pub = table_3x3().with_columns(
        pl.col("n").cast(pl.Float64),
        ((pl.col("r_level") == 1) & (pl.col("c_level") == 1)).alias("hidden"))
    a = postprocess.fill_suppressed(pub, SPEC, value="n", suppressed="hidden", rms=2.0, seed=7)
    b = postprocess.fill_suppressed(pub, SPEC, value="n", suppressed="hidden", rms=2.0, seed=7)
    plain = postprocess.fill_suppressed(pub, SPEC, value="n", suppressed="hidden")
    assert a.equals(b)  # seeded
    margins = a.filter((pl.col("r_level") == 0) | (pl.col("c_level") == 0))
    np.testing.assert_allclose(margins["filled"].to_numpy(), margins["n"].to_numpy(), atol=1e-9)
    inner_a = a.filter((pl.col("r_level") == 1) & (pl.col("c_level") == 1))["filled"].to_numpy()
    inner_plain = plain.filter((pl.col("r_level") == 1) & (pl.col("c_level") == 1))["filled"].to_numpy()
    assert np.sqrt(np.mean((inner_a - inner_plain) ** 2)) == pytest.approx(2.0, rel=1e-9)
    with pytest.raises(pt.InputError, match="seed"):
        postprocess.fill_suppressed(pub, SPEC, value="n", suppressed="hidden", rms=1.0)


def test_expected_frequencies_from_the_totals_are_the_loglinear_fit():
    margins = table_3x3().filter((pl.col("r_level") == 0) | (pl.col("c_level") == 0))
    res = postprocess.expected_frequencies(margins, SPEC, value="n")
    assert res.converged
    inner = {(r, c): e for r, c, e in res.inner.select("r", "c", "expected").rows()}
    for i in range(3):
        for j in range(3):
            assert inner[(str(i + 1), str(j + 1))] == pytest.approx(LOGLINEAR[i][j], abs=1e-3)
    # the inner cells were not published: no additive value for them, but an expected one
    cells = res.published.filter((pl.col("r_level") == 1) & (pl.col("c_level") == 1))
    assert cells["additive"].null_count() == 9 and cells["expected"].null_count() == 0
    with pytest.raises(pt.InputError, match="weights has 2 values; give one per published cell"):
        postprocess.expected_frequencies(margins, SPEC, value="n", weights=[1.0, 2.0])


def test_additive_input_is_kept_and_ckm_output_made_additive(session, persons, h_muni):
    session.register("p", persons)
    session.add_record_keys("p", id_column="pid", seed="post")
    spec = pt.TableSpec({"municipality": h_muni, "sex": None, "age": None})
    original = session.tabulate("p", spec)
    same = postprocess.expected_frequencies(original, spec, value="n")
    np.testing.assert_allclose(same.published["additive"].to_numpy(), original["n"].to_numpy(), atol=1e-7)
    protected = session.cell_key("p", spec, pt.PTable.maximum_entropy(D=5, V=3, js=2))
    res = postprocess.expected_frequencies(protected, spec)
    additive = res.published["additive"].to_numpy()
    assert additive.min() >= 0
    # additive: every published value is the sum of the fitted inner values under it
    y_add = pt.fit.min_norm(res.X, additive)
    np.testing.assert_allclose(res.X.T @ y_add, additive, atol=1e-6)
    assert res.converged and res.max_deviation < 1e-6
    np.testing.assert_allclose(res.published["expected"].to_numpy(), additive, atol=1e-6)
    assert res.published.height == protected.height


def test_laplace_margins_methods_b_and_c():
    inner = np.array(INNER_3X3, dtype=float).ravel()
    pub = table_3x3()
    X, _, _ = pt.model_matrix(
        pl.DataFrame([(str(i + 1), str(j + 1), INNER_3X3[i][j]) for i in range(3) for j in range(3)],
                     schema=["r", "c", "n"], orient="row"), SPEC)
    z = X.T @ inner
    margins = ((pub["r_level"] == 0) | (pub["c_level"] == 0)).to_numpy()
    rows = (pub["c_level"] == 0).to_numpy() & (pub["r_level"] == 1).to_numpy()
    # only the margins are published; the row totals are perturbed (k = 1 margin)
    Xm, zm = X[:, margins], z[margins]
    perturb = rows[margins]
    b1 = postprocess.laplace_margins(Xm, zm, perturb, epsilon=1.0, k=1, seed=3)
    b2 = postprocess.laplace_margins(Xm, zm, perturb, epsilon=1.0, k=1, seed=3)
    np.testing.assert_array_equal(b1.z_noisy, b2.z_noisy)
    assert (b1.z_noisy[~perturb] == zm[~perturb]).all() and (b1.z_noisy[perturb] != zm[perturb]).any()
    c = postprocess.laplace_margins(Xm, zm, perturb, epsilon=1.0, k=1, seed=3, method="C")
    # Method C keeps the exact (unperturbed) margins almost exactly
    np.testing.assert_allclose((Xm.T @ c.y_fit)[~perturb], zm[~perturb], rtol=1e-3)
    assert c.y_fit.min() >= 0 and b1.y_fit.min() >= 0
    # with almost no noise the expected frequencies are the log-linear fit
    tiny = postprocess.laplace_margins(Xm, zm, perturb, epsilon=1e9, k=1, seed=1)
    np.testing.assert_allclose(tiny.y_expected, np.array(LOGLINEAR).ravel(), atol=2e-3)
    with pytest.raises(pt.InputError, match="epsilon"):
        postprocess.laplace_margins(Xm, zm, perturb, epsilon=0, k=1, seed=1)
    with pytest.raises(pt.InputError, match="integer seed"):
        postprocess.laplace_margins(Xm, zm, perturb, epsilon=1.0, k=1, seed=None)


def margins_3x3() -> tuple:
    """X and z of the 3 x 3 table's margins only (row totals, column totals, grand total)."""
    inner = np.array(INNER_3X3, dtype=float).ravel()
    pub = table_3x3()
    X, _, _ = pt.model_matrix(
        pl.DataFrame([(str(i + 1), str(j + 1), INNER_3X3[i][j]) for i in range(3) for j in range(3)],
                     schema=["r", "c", "n"], orient="row"), SPEC)
    margins = ((pub["r_level"] == 0) | (pub["c_level"] == 0)).to_numpy()
    return X[:, margins], (X.T @ inner)[margins], pub.filter(pl.Series(margins))


def test_laplace_margins_sensitivity_comes_from_x_and_a_smaller_k_is_refused():
    Xm, zm, _ = margins_3x3()
    every = np.ones(zm.size, dtype=bool)
    # a record counts in its row total, its column total and the grand total
    assert postprocess.margin_sensitivity(Xm, every) == 3
    with pytest.raises(pt.InputError, match="k=1 is below the sensitivity of the perturbed cells, 3"):
        postprocess.laplace_margins(Xm, zm, every, epsilon=1.0, k=1, seed=3)
    res = postprocess.laplace_margins(Xm, zm, every, epsilon=0.5, seed=3)
    assert res.sensitivity == 3 and res.scale == 6.0 and res.epsilon == 0.5
    bigger = postprocess.laplace_margins(Xm, zm, every, epsilon=0.5, k=6, seed=3)  # several records a person
    assert bigger.sensitivity == 6 and bigger.scale == 12.0
    # the noise really has scale Δ/ε = 3, not 1/ε: variance 2a/(1 − a)² with a = e^(−1/3)
    draws = np.concatenate([
        postprocess.laplace_margins(Xm, zm, every, epsilon=1.0, seed=s).z_noisy - zm for s in range(300)])
    a = np.exp(-1 / 3)
    assert draws.var() == pytest.approx(2 * a / (1 - a) ** 2, rel=0.15)  # 17.8; scale 1 would give 1.8


def test_laplace_margins_noise_is_integer_and_exactly_discrete_laplace():
    Xm, zm, _ = margins_3x3()
    every = np.ones(zm.size, dtype=bool)
    res = postprocess.laplace_margins(Xm, zm, every, epsilon=1.0, seed=11)
    noise = res.z_noisy - zm
    np.testing.assert_array_equal(noise, np.round(noise))  # no floating-point Laplace
    with pytest.raises(pt.InputError, match="integer counts"):
        postprocess.laplace_margins(Xm, zm + 0.5, every, epsilon=1.0, seed=1)
    # an epsilon that is not a multiple of the scale grid: the scale is rounded up, ε' <= ε
    odd = postprocess.laplace_margins(Xm, zm, every, epsilon=0.7, seed=1)
    assert odd.scale >= 3 / 0.7 and 0.7 - 1e-5 < odd.epsilon <= 0.7


def test_laplace_margins_exact_weight_pulls_method_c_onto_the_exact_cells():
    Xm, zm, pub = margins_3x3()
    perturb = (pub["r_level"] == 1).to_numpy()  # row totals noisy; column totals and total exact
    err = {}
    for w in (1.0, 10.0, 1e4):
        c = postprocess.laplace_margins(Xm, zm, perturb, epsilon=0.2, seed=5, method="C", exact_weight=w)
        err[w] = np.abs((Xm.T @ c.y_fit)[~perturb] - zm[~perturb]).max()
    b = postprocess.laplace_margins(Xm, zm, perturb, epsilon=0.2, seed=5, method="B")
    c1 = postprocess.laplace_margins(Xm, zm, perturb, epsilon=0.2, seed=5, method="C", exact_weight=1.0)
    np.testing.assert_allclose(c1.y_fit, b.y_fit, rtol=1e-9, atol=1e-9)  # weight 1: Method B
    assert err[1.0] > 10 * err[1e4] and err[10.0] > err[1e4]
    with pytest.raises(pt.InputError, match="exact_weight"):
        postprocess.laplace_margins(Xm, zm, perturb, epsilon=0.2, seed=5, method="C", exact_weight=0)
