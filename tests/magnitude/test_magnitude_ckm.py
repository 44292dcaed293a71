"""The cell key method for magnitudes: properties, misuse, and the protect request.

The numbers of R cellKey are reproduced in tests/magnitude/test_magnitude_cellkey.py; here the
invariants the method promises (docs/methods.md §1.8) are checked on random tables.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import protab as pt
from protab import cli
from protab.magnitude import MagnitudeCKM, SensitivityRules
from protab.ptable.magnitude_ptable import MagnitudePTable

# R ptable's pt_ex_nums() tables (the parameters of cellKey's examples)
ALL = MagnitudePTable.maximum_entropy(10, 3, step=2, icat=[1, 5, 10], optim=[4, 1, 1])
SMALL = MagnitudePTable.maximum_entropy(5, 1, step=5, icat=[1, 3, 5], optim=[4, 1, 1], type="small_cells")
COUNTS = pt.PTable.maximum_entropy(D=3, V=1.0)


def _session(frame: pl.DataFrame) -> pt.Session:
    s = pt.Session(":memory:")
    s.register("t", frame)
    s.add_record_keys("t", id_column="id", seed="magnitude tests")
    return s


def _frame(n: int = 400, seed: int = 1, negative: bool = True) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    v = rng.pareto(1.2, n) * 100
    if negative:
        v = v - 30
    return pl.DataFrame({
        "id": np.arange(n), "a": rng.choice(["x", "y", "z"], n), "b": rng.choice(["p", "q", "r"], n),
        "c": rng.choice(["u", "v"], n), "v": np.round(v, 2), "w": rng.uniform(1, 4, n).round(3),
        "e": np.round(rng.exponential(50, n), 1),
    })


# unrounded (decimals=None): the invariants are the method's own; rounding has its own tests
# (test_published_sums_are_rounded.py)
PARAMS = [
    MagnitudeCKM(ALL, fp=100, p=(0.25, 0.05), q=3, epsilon=[1, 0.5, 0.2], decimals=None),
    MagnitudeCKM(ALL, fp=50, small_cells=SMALL, epsilon=[1, 0.6], decimals=None),
    MagnitudeCKM(ALL, p=0.1, decimals=None),
    MagnitudeCKM(ALL, fp=100, variant="mean", decimals=None),
    MagnitudeCKM(ALL, fp=100, variant="range", small_cells=SMALL, decimals=None),
    MagnitudeCKM(ALL, fp=100, variant="sum", same_key=False, zero_keys=True, decimals=None),
    MagnitudeCKM({"even": ALL.as_type("even"), "odd": ALL.as_type("odd")}, fp=100, decimals=None),
]


@pytest.mark.parametrize("m", PARAMS, ids=range(len(PARAMS)))
def test_invariants(m):
    """Signs never flip; mean × count = sum; cells with zero value stay zero; a cell gets
    the same perturbed sum in every table it appears in."""
    frame = _frame()
    with _session(frame) as s:
        spec = pt.TableSpec({"a": None, "b": None}, sums=["v", "e"])
        out = s.cell_key("t", spec, COUNTS, magnitude=m, original=True)
        other = s.cell_key("t", pt.TableSpec({"a": None, "c": None}, sums=["v", "e"]), COUNTS, magnitude=m)
    for v in ("v", "e"):
        orig, pert = out[v].to_numpy(), out[f"{v}_pert"].to_numpy()
        assert np.all(np.sign(pert) * np.sign(orig) >= 0), "a perturbed sum changed sign"
        assert np.all(pert[orig == 0] == 0)
        assert np.allclose(out[f"{v}_mean_pert"] * out["n_pert"], pert, rtol=1e-12)
        assert np.abs(pert - orig).max() > 0, "nothing was perturbed"
        # the a × Total cells are in both tables: the same perturbed values
        mine = out.filter(pl.col("b") == "Total").select("a", f"{v}_pert").sort("a")
        theirs = other.filter(pl.col("c") == "Total").select("a", f"{v}_pert").sort("a")
        assert mine.equals(theirs)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.integers(1, 60), st.sampled_from(range(len(PARAMS))))
def test_sign_and_determinism_on_random_tables(seed, n, which):
    frame = _frame(n=n, seed=seed)
    with _session(frame) as s:
        spec = pt.TableSpec({"a": None, "b": None}, sums=["v"])
        out1 = s.cell_key("t", spec, COUNTS, magnitude=PARAMS[which], original=True)
        out2 = s.cell_key("t", spec, COUNTS, magnitude=PARAMS[which], original=True)
    assert out1.equals(out2)
    orig, pert = out1["v"].to_numpy(), out1["v_pert"].to_numpy()
    assert np.all(np.sign(pert) * np.sign(orig) >= 0)


def test_sensitive_cells_get_more_noise():
    frame = _frame(negative=False)
    with _session(frame) as s:
        spec = pt.TableSpec({"a": None, "b": None}, sums=["v"])
        rules = SensitivityRules(dominance=[(1, 30)])
        plain = s.cell_key("t", spec, COUNTS, magnitude=MagnitudeCKM(ALL, fp=100), rules=rules, original=True)
        extra = s.cell_key("t", spec, COUNTS, magnitude=MagnitudeCKM(ALL, fp=100, mu_c=3), rules=rules, original=True)
    sens = plain["v_sensitive"].to_numpy()
    assert sens.any() and not sens.all()
    d0 = np.abs(plain["v_pert"] - plain["v"]).to_numpy()
    d1 = np.abs(extra["v_pert"] - extra["v"]).to_numpy()
    assert np.array_equal(d0[~sens], d1[~sens])
    moved = d0[sens] > 0
    assert np.all(d1[sens][moved] > d0[sens][moved])


def test_weighted_sum_and_mean():
    frame = _frame(negative=False)
    with _session(frame) as s:
        spec = pt.TableSpec({"a": None}, sums=["v"], weight="w")
        out = s.cell_key("t", spec, COUNTS, magnitude=MagnitudeCKM(ALL, fp=100, decimals=None), original=True)
    total = (frame["v"] * frame["w"]).sum()
    assert out.filter(pl.col("a") == "Total")["v_w"].item() == pytest.approx(total, rel=1e-12)
    assert np.allclose(out["v_mean_pert"] * out["w_pert"], out["v_pert"])


def test_threshold_blanks_magnitudes_with_counts():
    frame = _frame(n=60)
    with _session(frame) as s:
        spec = pt.TableSpec({"a": None, "b": None, "c": None}, sums=["v"])
        out = s.cell_key("t", spec, COUNTS, magnitude=MagnitudeCKM(ALL, fp=100), threshold=3)
    blank = out["n_pert"].is_null()
    assert blank.any()
    assert out.filter(blank)["v_pert"].null_count() == blank.sum()
    assert out.filter(blank)["v_mean_pert"].null_count() == blank.sum()


def test_sums_are_never_dropped_silently():
    frame = _frame()
    with _session(frame) as s:
        spec = pt.TableSpec({"a": None}, sums=["v"])
        with pytest.raises(pt.SpecError, match="sums.*no magnitude parameters"):
            s.cell_key("t", spec, COUNTS)
        with pytest.raises(pt.SpecError, match="sums"):
            s.cell_key("t", pt.TableSpec({"a": None}), COUNTS, magnitude=MagnitudeCKM(ALL, fp=100))


def test_perturb_inner_refuses_sums():
    with _session(_frame()) as s:
        with pytest.raises(pt.SpecError, match="perturb_inner perturbs counts"):
            s.perturb_inner("t", pt.TableSpec({"a": None}, sums=["v"]), COUNTS)
        with pytest.raises(pt.PTableError, match="numeric"):
            s.perturb_inner("t", pt.TableSpec({"a": None}), ALL)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_magnitudes_are_refused(bad):
    frame = _frame(n=30).with_columns(pl.when(pl.col("id") == 3).then(bad).otherwise(pl.col("v")).alias("v"))
    with _session(frame) as s:
        with pytest.raises(pt.InputError, match=r"sums column 'v'.*NaN or infinite in 1 record"):
            s.cell_key("t", pt.TableSpec({"a": None}, sums=["v"]), COUNTS, magnitude=MagnitudeCKM(ALL, fp=100))


def test_holding_rules_need_a_holding_column():
    with _session(_frame()) as s:
        with pytest.raises(pt.InputError, match="holding column"):
            s.sensitivity("t", pt.TableSpec({"a": None}, sums=["v"]), SensitivityRules(p_percent=10, holding="firm"))


def test_count_and_numeric_p_tables_are_not_confused():
    frame = _frame()
    with _session(frame) as s:
        with pytest.raises(pt.PTableError, match="numeric"):
            s.cell_key("t", pt.TableSpec({"a": None}), ALL)
    with pytest.raises(pt.SpecError, match="count p-table"):
        MagnitudeCKM(COUNTS, fp=100)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"fp": 0}, "fp"),
        ({"fp": -5}, "fp"),
        ({"fp": 100, "q": 0.5}, "q"),
        ({"fp": 100, "epsilon": [1, 0.5, 0.7]}, "epsilon"),
        ({"fp": 100, "epsilon": [0.5]}, "epsilon"),
        ({"fp": 100, "top_k": 7}, "top_k"),
        ({"fp": 100, "top_k": 0}, "top_k"),
        ({"fp": 100, "top_k": 2, "epsilon": [1]}, "epsilon"),
        ({"fp": 100, "p": (0.05, 0.25)}, "p_small"),
        ({"fp": 100, "variant": "median"}, "variant"),
        ({"fp": 100, "variant": "mean", "top_k": 2, "epsilon": [1, 1]}, "top_k must be 1"),
        ({"p": (0.25, 0.05)}, "simple scaling"),
        ({"fp": 100, "mu_c": -1}, "mu_c"),
        ({"fp": 100, "same_key": "yes"}, "same_key"),
        ({"fp": 100, "variant": "range"}, "needs small_cells"),
        ({}, "give fp="),
    ],
)
def test_bad_magnitude_parameters(kwargs, message):
    with pytest.raises(pt.SpecError, match=message):
        MagnitudeCKM(ALL, **kwargs)


def test_parameters_are_not_shown():
    m = MagnitudeCKM(ALL, fp=1234.5, p=(0.2, 0.07), mu_c=2.5)
    assert not any(x in repr(m) for x in ("1234.5", "0.07", "2.5"))


def test_null_magnitudes_error_unless_told():
    frame = _frame(n=50).with_columns(pl.when(pl.col("id") % 7 == 0).then(None).otherwise(pl.col("v")).alias("v"))
    with _session(frame) as s:
        with pytest.raises(pt.InputError, match=r"sums column 'v'.*NULL.*8 record"):
            s.cell_key("t", pt.TableSpec({"a": None}, sums=["v"]), COUNTS, magnitude=MagnitudeCKM(ALL, fp=100))
        zero = s.tabulate("t", pt.TableSpec({"a": None}, sums=["v"], null_sums="zero"), top_k=6)
        omit = s.tabulate("t", pt.TableSpec({"a": None}, sums=["v"], null_sums="omit"), top_k=6)
    assert zero["v"].to_list() == omit["v"].to_list()
    assert (zero["v_top"].list.len() >= omit["v_top"].list.len()).all()


def test_magnitudes_with_aggregated_rows_are_refused():
    frame = pl.DataFrame({"a": ["x", "y"], "f": [3, 4], "v": [1.0, 2.0]})
    with pt.Session(":memory:") as s:
        s.register("t", frame)
        with pytest.raises(pt.SpecError, match="one row per contributor"):
            s.tabulate("t", pt.TableSpec({"a": None}, sums=["v"], freq="f"), top_k=3)


def test_top_k_out_of_range():
    with pt.Session(":memory:") as s:
        s.register("t", _frame(n=5))
        for k in (0, 7, 2.5, True):
            with pytest.raises(pt.SpecError, match="top_k"):
                s.tabulate("t", pt.TableSpec({"a": None}, sums=["v"]), top_k=k)


def test_non_tree_hierarchies_are_refused_for_magnitudes():
    frame = _frame()
    geo = pt.Hierarchy.from_frame(pl.DataFrame({
        "mapsFrom": ["x", "y", "z", "x", "y"], "mapsTo": ["T", "T", "T", "XY", "XY"], "sign": [1, 1, 1, 1, 1],
        "level": [1, 1, 1, 1, 1]}))
    with _session(frame) as s:
        with pytest.raises(pt.SpecError, match="not a tree"):
            s.cell_key("t", pt.TableSpec({"a": geo}, sums=["v"]), COUNTS, magnitude=MagnitudeCKM(ALL, fp=100))


# -- the protect request ---------------------------------------------------------------------
REQUEST = """
database = "m.duckdb"
[ptable]
maximum_entropy = {{ D = 3, V = 1.0 }}
{magnitude}
[[tables]]
name = "turnover"
source = "firms"
dims = ["a", "b"]
sums = ["v", "e"]
threshold = 2
"""
MAGNITUDE = """
[magnitude]
ptable = { maximum_entropy = { D = 10, V = 3, step = 2, icat = [1, 5, 10], optim = 4 } }
small_cells = { maximum_entropy = { D = 5, V = 1, step = 5, icat = [1, 3, 5] } }
fp = 100
epsilon = [1, 0.5]
mu_c = 1
[rules]
p_percent = 10
"""


def _protect(tmp_path: Path, magnitude: str, capsys) -> tuple[int, str]:
    if not (tmp_path / "m.duckdb").exists():
        with pt.Session(str(tmp_path / "m.duckdb")) as s:
            s.register("firms", _frame())
            s.add_record_keys("firms", id_column="id", seed="protect magnitudes")
    (tmp_path / "req.toml").write_text(REQUEST.format(magnitude=magnitude))
    capsys.readouterr()
    rc = cli.main(["protect", str(tmp_path / "req.toml")])
    return rc, capsys.readouterr().err


def test_protect_request_with_sums(tmp_path, capsys):
    rc, err = _protect(tmp_path, MAGNITUDE, capsys)
    assert rc == 0, err
    path = tmp_path / "protab_output" / "turnover.csv"
    out = pl.read_csv(path)
    # no original values and no sensitivity verdicts in what is published
    assert out.columns == ["a", "b", "a_level", "b_level", "n_pert", "v_pert", "v_mean_pert", "e_pert",
                           "e_mean_pert"]
    first = path.read_bytes()
    rc, err = _protect(tmp_path, MAGNITUDE, capsys)
    assert rc == 0 and path.read_bytes() == first


def test_protect_request_with_sums_needs_magnitude(tmp_path, capsys):
    rc, err = _protect(tmp_path, "", capsys)
    assert rc == 2
    assert "[magnitude]" in err and not (tmp_path / "protab_output").exists()


def test_protect_request_bad_magnitude_is_named(tmp_path, capsys):
    rc, err = _protect(tmp_path, MAGNITUDE.replace("fp = 100", "fp = 100\nq = 0.5"), capsys)
    assert rc == 2 and "magnitude.q" in err
    rc, err = _protect(tmp_path, MAGNITUDE.replace("epsilon = [1, 0.5]", "epsilon = [1, 0.5, 0.9]"), capsys)
    assert rc == 2 and "[magnitude]" in err and "epsilon" in err
    assert not (tmp_path / "protab_output").exists()


def test_top_k_needs_sums():
    with pt.Session(":memory:") as s:
        s.register("t", _frame(n=5))
        with pytest.raises(pt.SpecError, match="top_k lists the largest contributions of sums"):
            s.tabulate("t", pt.TableSpec({"a": None}), top_k=3)


@pytest.mark.parametrize("modulus, key, rotated", [
    (10**8, 12345678, 23456781),   # 0.12345678 → 0.23456781
    (10**8, 12345670, 23456710),   # R writes 0.1234567: the first digit moves behind the 7
    (10**8, 1234567, 12345670),    # 0.01234567 → 0.12345670
    (10**8, 0, 0),
    (2**32, 0x12345678, 0x23456781),  # binary keys: 4 bits (a hexadecimal digit) to the end
    (2**32, 0xF0000000, 0x0000000F),
])
def test_key_rotation(modulus, key, rotated):
    import duckdb

    from protab.rollup.magnitude_ckm import rotate_sql

    got = duckdb.connect().execute(f"SELECT {rotate_sql('k', modulus)} FROM (SELECT CAST(? AS BIGINT) AS k)",
                                   [key]).fetchall()[0][0]
    assert got == rotated
