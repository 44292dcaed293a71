"""Published perturbed sums and means: rounded to the declared decimals after perturbation, and
the mean divides by the perturbed count of the records that hold a value (docs/methods.md §1.8).

- ``MagnitudeCKM(decimals=d)``: ``<s>_pert`` and ``<s>_mean_pert`` are the unrounded values
  (``decimals=None``) rounded half away from zero to d decimals; the mean is the unrounded sum
  over the denominator, rounded once.
- the denominator: every record under ``null_sums='error'`` and ``'zero'`` (``n_pert``); under
  ``'omit'`` the records holding a value, perturbed by the count p-table with their own cell key:
  a whole number within the p-table's noise bound D of their exact count, equal to ``n_pert``
  where every record holds a value, the same in every table (and from key sums).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import protab as pt
from protab.errors import SpecError
from protab.magnitude import MagnitudeCKM
from protab.ptable.magnitude_ptable import MagnitudePTable

ALL = MagnitudePTable.maximum_entropy(10, 3, step=2, icat=[1, 5, 10], optim=[4, 1, 1])
D = 3
COUNTS = pt.PTable.maximum_entropy(D=D, V=1.0)


def _frame(n: int = 500, seed: int = 4, nulls: float = 0.2) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    v = np.round(rng.pareto(1.2, n) * 100, 2)
    missing = rng.random(n) < nulls
    return pl.DataFrame({
        "id": np.arange(n), "a": rng.choice(["x", "y", "z"], n), "b": rng.choice(["p", "q", "r", "s"], n),
        "v": pl.Series(np.where(missing, np.nan, v)).fill_nan(None), "w": rng.uniform(1, 4, n).round(3),
        "e": np.round(rng.exponential(50, n), 1),
    })


def _session(frame: pl.DataFrame) -> pt.Session:
    s = pt.Session(":memory:")
    s.register("t", frame)
    s.add_record_keys("t", id_column="id", seed="rounding tests")
    return s


def _half_away(x: pl.Series, places: int) -> np.ndarray:
    scale = 10.0 ** places
    a = x.to_numpy().astype(float)
    return np.trunc(a * scale + np.copysign(0.5, a)) / scale


@pytest.mark.parametrize("places", [0, 1, 2, 5])
def test_sums_and_means_are_the_unrounded_values_rounded_to_the_declared_decimals(places):
    frame = _frame(nulls=0.0)
    with _session(frame) as s:
        spec = pt.TableSpec({"a": None, "b": None}, sums=["v", "e"])
        raw = s.cell_key("t", spec, COUNTS, magnitude=MagnitudeCKM(ALL, fp=100, decimals=None))
        out = s.cell_key("t", spec, COUNTS, magnitude=MagnitudeCKM(ALL, fp=100, decimals=places))
    for v in ("v", "e"):
        for col in (f"{v}_pert", f"{v}_mean_pert"):
            assert np.array_equal(out[col].to_numpy(), _half_away(raw[col], places)), col
        assert (raw[f"{v}_pert"] != out[f"{v}_pert"]).any() or places == 5, "nothing was rounded"


def test_decimals_per_column_and_the_default():
    frame = _frame(nulls=0.0)
    with _session(frame) as s:
        spec = pt.TableSpec({"a": None}, sums=["v", "e"])
        raw = s.cell_key("t", spec, COUNTS, magnitude=MagnitudeCKM(ALL, fp=100, decimals=None))
        mixed = s.cell_key("t", spec, COUNTS, magnitude=MagnitudeCKM(ALL, fp=100, decimals={"e": 0}))
        default = s.cell_key("t", spec, COUNTS, magnitude=MagnitudeCKM(ALL, fp=100))
    assert np.array_equal(mixed["e_pert"].to_numpy(), _half_away(raw["e_pert"], 0))
    assert np.array_equal(mixed["v_pert"].to_numpy(), _half_away(raw["v_pert"], 2))  # not named: the default, 2
    assert np.array_equal(default["v_pert"].to_numpy(), _half_away(raw["v_pert"], 2))  # the default: 2 decimals
    assert np.array_equal(default["e_mean_pert"].to_numpy(), _half_away(raw["e_mean_pert"], 2))


@pytest.mark.parametrize("bad", [-1, 9, 2.5, True, "2", {"v": -1}, {"": 1}])
def test_bad_decimals_are_refused(bad):
    with pytest.raises(SpecError, match="decimals"):
        MagnitudeCKM(ALL, fp=100, decimals=bad)


def _holders(frame: pl.DataFrame, dims: list[str]) -> pl.DataFrame:
    """Exact count (and weight sum) of the records holding a value of v, per cell, margins included."""
    held = frame.filter(pl.col("v").is_not_null())
    parts = []
    for keep in ([], ["a"], ["b"], ["a", "b"]):
        g = held.group_by(keep).agg(pl.len().alias("holders"), pl.col("w").sum().alias("wsum")) if keep else \
            held.select(pl.len().alias("holders"), pl.col("w").sum().alias("wsum"))
        for d in dims:
            if d not in keep:
                g = g.with_columns(pl.lit("Total").alias(d))
        parts.append(g.select(*dims, "holders", "wsum"))
    return pl.concat(parts)


def test_omit_means_divide_by_the_perturbed_count_of_the_records_holding_a_value():
    frame = _frame(nulls=0.25)
    dims = ["a", "b"]
    with _session(frame) as s:
        spec = pt.TableSpec({"a": None, "b": None}, sums=["v"], null_sums="omit")
        out = s.cell_key("t", spec, COUNTS, magnitude=MagnitudeCKM(ALL, fp=100, decimals=None), original=True)
        other = s.cell_key("t", pt.TableSpec({"a": None}, sums=["v"], null_sums="omit"), COUNTS,
                           magnitude=MagnitudeCKM(ALL, fp=100, decimals=None))
    j = out.join(_holders(frame, dims), on=dims, how="left").with_columns(pl.col("holders").fill_null(0))
    j = j.filter(pl.col("v_mean_pert").is_not_null())
    den = (j["v_pert"] / j["v_mean_pert"]).to_numpy()
    assert np.allclose(den, np.round(den), atol=1e-6), "the denominator is a perturbed count: a whole number"
    exact = j["holders"].to_numpy()
    assert np.all(np.abs(np.round(den) - exact) <= D), "within the p-table's noise bound of the exact count"
    assert (j["n"] > j["holders"]).all(), "every cell has a record without a value here"
    assert (np.round(den) != j["n_pert"].to_numpy()).any(), "the records without a value are not counted"
    # the mean of a cell is the same in every table that publishes it (its own cell key)
    mine = out.filter(pl.col("b") == "Total").select("a", "v_mean_pert").sort("a")
    assert mine.equals(other.select("a", "v_mean_pert").sort("a"))


def test_without_missing_values_the_omit_mean_is_the_mean_over_n_pert():
    frame = _frame(nulls=0.0)
    with _session(frame) as s:
        m = MagnitudeCKM(ALL, fp=100, decimals=None)
        omit = s.cell_key("t", pt.TableSpec({"a": None, "b": None}, sums=["v"], null_sums="omit"), COUNTS, magnitude=m)
        error = s.cell_key("t", pt.TableSpec({"a": None, "b": None}, sums=["v"]), COUNTS, magnitude=m)
    assert omit.select("a", "b", "n_pert", "v_pert", "v_mean_pert").equals(
        error.select("a", "b", "n_pert", "v_pert", "v_mean_pert"))


def test_zero_means_divide_by_every_record():
    frame = _frame(nulls=0.25)
    with _session(frame) as s:
        out = s.cell_key("t", pt.TableSpec({"a": None, "b": None}, sums=["v"], null_sums="zero"), COUNTS,
                         magnitude=MagnitudeCKM(ALL, fp=100, decimals=None))
    j = out.filter(pl.col("v_mean_pert").is_not_null())
    assert np.allclose((j["v_mean_pert"] * j["n_pert"]).to_numpy(), j["v_pert"].to_numpy(), rtol=1e-12)


def test_weighted_omit_means_divide_by_the_holders_weight_scaled_by_their_perturbed_count():
    frame = _frame(nulls=0.25)
    dims = ["a", "b"]
    with _session(frame) as s:
        spec = pt.TableSpec({"a": None, "b": None}, sums=["v"], null_sums="omit", weight="w")
        out = s.cell_key("t", spec, COUNTS, magnitude=MagnitudeCKM(ALL, fp=100, decimals=None))
    j = out.join(_holders(frame, dims), on=dims).filter(pl.col("v_mean_pert").is_not_null())
    den = (j["v_pert"] / j["v_mean_pert"]).to_numpy()
    count = den / (j["wsum"] / j["holders"]).to_numpy()  # the perturbed count of holders
    assert np.allclose(count, np.round(count), atol=1e-6)
    assert np.all(np.abs(np.round(count) - j["holders"].to_numpy()) <= D)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.integers(5, 120), st.sampled_from([0.0, 0.3, 0.9]))
def test_key_sums_give_the_same_omit_means_and_rounding_as_the_records(seed, n, nulls):
    frame = _frame(n=n, seed=seed, nulls=nulls)
    spec = pt.TableSpec({"a": None, "b": None}, sums=["v"], null_sums="omit")
    m = MagnitudeCKM(ALL, fp=100, decimals=1)
    with _session(frame) as s:
        direct = s.cell_key("t", spec, COUNTS, magnitude=m)
        s.key_sums("t", ["a", "b"], name="ks", sums=["v"], top_k=m.top_k, null_sums="omit")
        from_sums = s.cell_key("ks", spec, COUNTS, magnitude=m)
    assert direct.equals(from_sums)
