"""PTable: maximum-entropy generation (R ptable), validation, files, ONS dialect, lookup."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protab.errors import InputError, PTableError, PTableWarning
from protab.ptable import PTable

DATA = Path(__file__).resolve().parents[1] / "data"


def _handbook() -> tuple[pl.DataFrame, dict]:
    doc = json.loads((DATA / "ckm_handbook.json").read_text(encoding="utf-8"))
    return pl.DataFrame(doc["ptable"]), doc


def _quiet_me(*args, **kwargs) -> PTable:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTableWarning)
        return PTable.maximum_entropy(*args, **kwargs)


# ------------------------------------------------------------------ R ptable 1.0.0 references

R_CASES = [
    # D, V, js, file, rows whose variance target is not met (warned)
    (5, 3, 2, "ptable_R_D5_V3_js2.csv", []),
    (5, 3, 1, "ptable_R_D5_V3_js1.csv", [1]),
    (5, 3, 0, "ptable_R_D5_V3_js0.csv", [1]),
    (2, 1, 0, "ptable_R_D2_V1.csv", [1]),
]


@pytest.mark.parametrize(("D", "V", "js", "fname", "missed"), R_CASES)
def test_maximum_entropy_matches_r_ptable(D, V, js, fname, missed):
    """Every probability and interval bound of create_cnt_ptable(D, V, js) to 1e-6."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = PTable.maximum_entropy(D=D, V=V, js=js)
    ours = [w for w in caught if issubclass(w.category, PTableWarning)]
    if missed:
        assert len(ours) == 1
        assert "i = " + ", ".join(map(str, missed)) in str(ours[0].message)
    else:
        assert not ours
    r = pl.read_csv(DATA / fname)
    assert p.frame.height == r.height
    both = r.join(p.frame, on=["i", "j"], how="inner", suffix="_py")
    assert both.height == r.height
    assert (both["v"] == both["v_py"]).all()
    for theirs, mine in [("p", "p_py"), ("p_int_lb", "lb"), ("p_int_ub", "ub")]:
        assert (both[theirs] - both[mine]).abs().max() <= 1e-6
    assert p.den == 10**8 and p.imax == r["i"].max() and p.period == 1
    assert p.interval == "[lb,ub)"
    diag = p.diagnostics
    assert diag.filter(pl.col("var_reached").not_())["i"].to_list() == missed
    assert (diag["p_sum"] == 1.0).all()


def test_d2_v1_warns_for_row_1_without_the_parameters():
    with pytest.warns(PTableWarning) as rec:
        p = PTable.maximum_entropy(D=2, V=1)
    msg = str(rec[0].message)
    assert "i = 1" in msg and "V=" not in msg and "D=" not in msg
    d = p.diagnostics.filter(pl.col("i") == 1)
    assert d["var_reached"].to_list() == [False]
    assert d["p_var"][0] < 0.95  # the R table's row 1 has variance 0.932


def test_d2_v09_is_valid_and_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = PTable.maximum_entropy(D=2, V=0.9)
    assert p.diagnostics["var_reached"].to_list() == [None, True, True]
    assert np.allclose(p.diagnostics["p_var"].to_numpy()[1:], 0.9, atol=1e-6)


def test_maximum_entropy_options():
    """pstay lowers itself by 0.05 until V is met; mono per row; optim 4 meets V exactly."""
    p = _quiet_me(D=5, V=3, pstay=0.5)
    stay = dict(p.diagnostics.select("i", "p_stay").rows())
    assert stay[2] == pytest.approx(0.3, abs=1e-7)  # 0.5 lowered four times
    assert stay[5] == pytest.approx(0.5, abs=1e-7)
    q = _quiet_me(D=2, V=1.05, js=1, mono=[True, True, False, True])  # R's pt_ex_cnts()
    assert q.imax == 4 and 1 not in q.frame.filter(pl.col("i") > 0)["j"].to_list()
    assert np.allclose(q.diagnostics["p_var"].to_numpy()[1:], 1.05, atol=1e-6)
    r = _quiet_me(D=4, V=2, optim=4)
    assert np.allclose(r.diagnostics["p_var"].to_numpy()[2:], 2.0, atol=1e-6)
    for table in (p, q, r):
        f = table.frame.filter(pl.col("i") > 0)
        assert (f["p"] >= 0).all() and (f["j"] >= 0).all()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"D": -7, "V": 3},
        {"D": 2.5, "V": 3},
        {"D": 5, "V": -2.345},
        {"D": 5, "V": float("nan")},
        {"D": 5, "V": 3, "js": -3},
        {"D": 5, "V": 3, "pstay": 1.4321},
        {"D": 5, "V": 3, "pstay": [0.4321] * 3},
        {"D": 5, "V": 3, "optim": 7},
        {"D": 5, "V": 3, "mono": "yes"},
    ],
)
def test_bad_parameters_raise_without_showing_them(kwargs):
    with pytest.raises(PTableError) as exc:
        PTable.maximum_entropy(**kwargs)
    msg = str(exc.value)
    for secret in ("-7", "2.5", "-2.345", "-3", "1.4321", "0.4321"):
        assert secret not in msg


def test_repr_and_warnings_do_not_show_secrets():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = PTable.maximum_entropy(D=3, V=2.765, js=1, pstay=0.4321)
    text = repr(p) + str(p) + " ".join(str(w.message) for w in caught)
    for secret in ("2.765", "0.4321", "D=", "V=", "js=", "pstay="):
        assert secret not in text
    assert repr(p) == f"PTable({p.frame.height} rows)"


def test_infeasible_rows_raise_naming_them():
    # D = 1 with js = 3: row i = 2 has no allowed outcome left
    with pytest.raises(PTableError, match=r"i = 1, 2, 3, 4 "):
        PTable.maximum_entropy(D=1, V=1, js=3)


# ------------------------------------------------------------------ the handbook example


@pytest.mark.parametrize("interval", ["[lb,ub)", "(lb,ub]"])
def test_handbook_cell_key_lookup(interval):
    frame, doc = _handbook()
    p = PTable.from_frame(frame, interval=interval)
    keys = [round(r["record_key"] * 10**8) for r in doc["microdata"]]
    assert keys == [90_000_000, 30_000_000, 60_000_000]
    ck = sum(keys) % 10**8
    assert ck == 80_000_000  # cell key 0.8
    assert p.lookup(np.array([3]), np.array([ck]), 10**8).tolist() == [doc["expected"]["perturbed"]]
    # any count >= 3 uses the rows of i = 3
    assert p.lookup(np.array([5, 100]), np.array([ck, ck]), 10**8).tolist() == [6, 101]
    # zeros stay zero through row 0
    assert p.lookup(np.array([0, 0]), np.array([0, ck]), 10**8).tolist() == [0, 0]


def test_interval_conventions_differ_exactly_on_a_bound():
    frame, _ = _handbook()
    left = PTable.from_frame(frame, interval="[lb,ub)")
    right = PTable.from_frame(frame, interval="(lb,ub]")
    n = np.array([3, 3, 1, 2, 3])
    k = np.array([70_000_000, 30_000_000, 50_000_000, 80_000_000, 0])  # 0.7, 0.3, 0.5, 0.8, 0
    assert left.lookup(n, k, 10**8).tolist() == [4, 3, 2, 3, 2]
    assert right.lookup(n, k, 10**8).tolist() == [3, 2, 0, 2, 2]
    # one key past the bound: both agree
    assert left.lookup(n, k + 1, 10**8).tolist() == right.lookup(n, k + 1, 10**8).tolist()


def test_from_frame_accepts_pandas_pyarrow_j_only_and_p_only():
    frame, _ = _handbook()
    base = PTable.from_frame(frame)
    assert PTable.from_frame(frame.to_pandas()) == base
    assert PTable.from_frame(frame.to_arrow()) == base
    assert PTable.from_frame(pa.table(frame.to_dict(as_series=False))) == base
    assert PTable.from_frame(frame.drop("v")) == base
    assert PTable.from_frame(frame.select("i", "j", "p")) == base
    assert PTable.from_frame(frame.select("i", "v", "ub")) == base
    r = pl.read_csv(DATA / "ptable_R_D5_V3_js2.csv")  # R names p_int_lb/p_int_ub and 'type'
    rp = PTable.from_frame(r)
    assert rp == PTable.from_frame(r.select("i", "j", "p"))
    assert rp == PTable.from_frame(r.select("i", "v", "p_int_ub"))
    assert PTable(rp.frame.select("i", "v", "lb_n", "ub_n"), den=rp.den) == rp
    assert PTable.from_frame(rp.frame.select("i", "v", "lb_n", "ub_n"), den=10**8) == rp
    assert base.frame.columns == ["i", "j", "p", "v", "lb", "ub", "lb_n", "ub_n"]
    assert base.frame.schema["lb_n"] == pl.Int64 and base.frame.schema["p"] == pl.Float64


def test_bounds_digits_and_den():
    frame = pl.DataFrame({"i": [0, 1, 1], "v": [0, -1, 1], "lb": [0.0, 0.0, 0.123456789], "ub": [1.0, 0.123456789, 1.0]})
    assert PTable.from_frame(frame).den == 10**9  # nine decimals kept exactly
    long = frame.with_columns(pl.col("lb", "ub").replace(0.123456789, 0.1234567890123456))
    with pytest.raises(PTableError, match="decimals"):
        PTable.from_frame(long)
    p = PTable.from_frame(long, digits=8)
    assert p.den == 10**8 and p.frame["ub_n"].to_list() == [10**8, 12345679, 10**8]


def test_adjacent_equal_noise_merges_and_zero_width_drops():
    frame = pl.DataFrame(
        {"i": [0, 1, 1, 1, 1, 1], "v": [0, -1, -1, 0, 1, 1], "lb": [0.0, 0.0, 0.2, 0.5, 0.5, 0.6], "ub": [1.0, 0.2, 0.5, 0.5, 0.6, 1.0]}
    )
    p = PTable.from_frame(frame)
    assert p.frame.select("i", "v", "lb", "ub").rows() == [(0, 0, 0.0, 1.0), (1, -1, 0.0, 0.5), (1, 1, 0.5, 1.0)]


# ------------------------------------------------------------------ bad input


def _good() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "i": [0, 1, 1, 2, 2, 3, 3, 3],
            "v": [0, -1, 1, 0, 1, -1, 0, 1],
            "lb": [0.0, 0.0, 0.5, 0.0, 0.8, 0.0, 0.3, 0.7],
            "ub": [1.0, 0.5, 1.0, 0.8, 1.0, 0.3, 0.7, 1.0],
        }
    )


def _with(frame: pl.DataFrame, row: int, **values) -> pl.DataFrame:
    return frame.with_row_index("_r").with_columns(
        [pl.when(pl.col("_r") == row).then(pl.lit(val)).otherwise(pl.col(col)).alias(col) for col, val in values.items()]
    ).drop("_r")


@pytest.mark.parametrize(
    ("make", "pattern"),
    [
        (lambda f: f.with_columns(p=pl.col("ub") - pl.col("lb")).drop("lb", "ub").pipe(_with, 4, p=0.1), r"do not sum to 1 .*i = 2"),
        (lambda f: _with(f, 2, lb=0.6), r"gaps .*i = 1"),
        (lambda f: _with(f, 6, ub=0.75), r"overlapping .*i = 3"),
        (lambda f: _with(f, 7, ub=0.9), r"do not end at 1 .*i = 3"),
        (lambda f: _with(f, 1, v=-2), r"negative outcomes .*i = 1"),
        (lambda f: f.filter(pl.col("i") != 2), r"lacks rows for i = 2"),
        (lambda f: f.with_columns(pl.col("v").cast(pl.Float64)).pipe(_with, 4, v=0.5), r"integers.*i = 2"),
        (lambda f: _with(f, 3, ub=float("nan")), r"NaN.*i = 2"),
        (lambda f: _with(f, 3, lb=0.9), r"negative width.*i = 2"),
    ],
)
def test_bad_tables_raise_naming_i(make, pattern):
    with pytest.raises(PTableError, match=pattern):
        PTable.from_frame(make(_good()))


def test_bad_rules_raise():
    with pytest.raises(PTableError, match="interval"):
        PTable.from_frame(_good(), interval="[lb,ub]")
    with pytest.raises(PTableError, match="period"):
        PTable.from_frame(_good(), period=4)
    with pytest.raises(PTableError, match="imax"):
        PTable.from_frame(_good(), imax=5)
    with pytest.raises(PTableError, match="'i'"):
        PTable.from_frame(_good().drop("i"))
    with pytest.raises(PTableError, match="p does not equal"):
        PTable.from_frame(_good().with_columns(p=pl.Series([1.0, 0.5, 0.5, 0.8, 0.2, 0.4, 0.3, 0.3])))
    assert PTable.from_frame(_good(), period=3).period == 3  # rows 1..3 repeat
    with pytest.raises(PTableError, match="ckey"):
        PTable.from_ons(pl.DataFrame({"pcv": [1, 1, 2], "ckey": [0, 1, 0], "pvalue": [0, 0, 0]}))


# ------------------------------------------------------------------ files


@pytest.mark.parametrize("fmt", ["ptable", "tauargus", "ons"])
def test_write_read_round_trips(tmp_path, fmt):
    if fmt == "ons":
        rng = np.random.default_rng(5)
        p = PTable.from_ons(_random_ons(rng, ckeys=16))
    else:
        p = PTable.maximum_entropy(D=5, V=3, js=2)
    path = tmp_path / f"p.{fmt}"
    p.write(path, format=fmt)
    assert PTable.read(path, format=fmt) == p
    assert PTable.read(path) == p  # format detected from the header
    assert [x.name for x in tmp_path.iterdir()] == [path.name]  # no temporary file left


def test_file_layouts(tmp_path):
    p = PTable.maximum_entropy(D=5, V=3, js=2)
    p.write(tmp_path / "r.csv", format="ptable")
    lines = (tmp_path / "r.csv").read_text().splitlines()
    assert lines[0] == '"i","j","p","v","p_int_lb","p_int_ub","type"'
    assert lines[1] == '0,0,1,0,0,1,"all"'
    assert lines[-1].endswith(',1,"all"')
    p.write(tmp_path / "t.txt", format="tauargus")
    tau = (tmp_path / "t.txt").read_text().splitlines()
    assert tau[0] == "i;j;p;v;p_int_ub"
    for line in tau[1:]:
        digits = [c for c in line.split(";")[4].replace(".", "").lstrip("0")]
        assert len(digits) <= 8
    # the SAS variant i;j;p;v;p_int_lb;p_int_ub is read too
    sas = ["i;j;p;v;p_int_lb;p_int_ub"] + [
        f"{i};{j};{pp};{v};{lb};{ub}" for i, j, pp, v, lb, ub in p.frame.select("i", "j", "p", "v", "lb", "ub").rows()
    ]
    (tmp_path / "s.txt").write_text("\n".join(sas) + "\n")
    assert PTable.read(tmp_path / "s.txt") == p
    # the reference file written by R reads as it is
    assert PTable.read(DATA / "ptable_R_D5_V3_js2.csv") == PTable.from_frame(pl.read_csv(DATA / "ptable_R_D5_V3_js2.csv"))


def test_r_table_as_ons_table_keeps_its_lookup(tmp_path):
    p = PTable.maximum_entropy(D=5, V=3, js=2)
    p.write(tmp_path / "o.csv", format="ons", modulus=256)
    q = PTable.read(tmp_path / "o.csv")
    assert (q.den, q.imax, q.period) == (256, 750, 250)
    n = np.repeat(np.arange(0, 1600), 256)
    k = np.tile(np.arange(256), 1600)
    assert np.array_equal(p.lookup(n, k, 256), q.lookup(n, k, 256))


def test_failed_write_leaves_nothing(tmp_path):
    p = PTable.from_frame(_good())
    with pytest.raises(PTableError):
        p.write(tmp_path / "x.csv", format="sdmx")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ ONS dialect


def _random_ons(rng: np.random.Generator, ckeys: int = 256, top: int = 750) -> pl.DataFrame:
    pcv = np.repeat(np.arange(1, top + 1), ckeys)
    ckey = np.tile(np.arange(ckeys), top)
    pvalue = np.maximum(rng.integers(-2, 3, pcv.size), -pcv)  # j = pcv + pvalue >= 0
    return pl.DataFrame({"pcv": pcv, "ckey": ckey, "pvalue": pvalue})


def _cells(micro: pd.DataFrame, dims: list[str], modulus: int) -> pd.DataFrame:
    g = micro.groupby(dims).agg(n=("record_key", "size"), ksum=("record_key", "sum")).reset_index()
    g["ckey"] = g["ksum"] % modulus
    return g


def test_ons_10_5_table_matches_the_ons_package(capsys):
    from cell_key_perturbation.create_perturbed_table import create_perturbed_table
    from cell_key_perturbation.utils.generate_test_data import generate_test_data
    from cell_key_perturbation.utils.generate_test_ptable import generate_ptable_10_5_rule

    micro = generate_test_data()
    ons = generate_ptable_10_5_rule()
    p = PTable.from_ons(ons)
    assert p.frame.height == 750 and (p.den, p.imax, p.period) == (256, 750, 250)
    dims = ["var1", "var5", "var8"]
    theirs = create_perturbed_table(
        data=micro, ptable=ons, geog=["var1"], tab_vars=["var5", "var8"], record_key="record_key", threshold=0
    )
    mine = theirs[dims + ["count"]].merge(_cells(micro, dims, 256), on=dims, how="left")
    mine["n"] = mine["n"].fillna(0).astype(int)
    mine["ckey"] = mine["ckey"].fillna(0).astype(int)
    got = p.lookup(mine["n"].to_numpy(), mine["ckey"].to_numpy(), 256)
    assert np.array_equal(got, mine["count"].astype(int).to_numpy())
    assert (mine["n"] == 0).any()  # empty cells were compared too
    assert PTable.from_ons(p.to_ons()) == p
    assert p.to_ons().sort("pcv", "ckey").equals(pl.from_pandas(ons).cast(pl.Int64).sort("pcv", "ckey"))


def test_ons_random_table_with_large_counts_matches_the_ons_package(capsys):
    from cell_key_perturbation.create_perturbed_table import create_perturbed_table

    rng = np.random.default_rng(20240601)
    ons = _random_ons(rng)
    p = PTable.from_ons(ons)
    assert 750 * 150 < p.frame.height < 750 * 256  # adjacent equal pvalues merged
    # non-monotone noise: some row has the same v in two separate intervals
    assert p.frame.group_by("i", "v").len()["len"].max() > 1
    sizes = rng.integers(0, 2600, 240)
    a = np.repeat(np.arange(240) // 6, sizes)
    b = np.repeat(np.arange(240) % 6, sizes)
    micro = pd.DataFrame({"a": a, "b": b, "record_key": rng.integers(0, 256, a.size)})
    theirs = create_perturbed_table(
        data=micro, ptable=ons.to_pandas(), geog=[], tab_vars=["a", "b"], record_key="record_key", threshold=0
    )
    mine = theirs[["a", "b", "count"]].merge(_cells(micro, ["a", "b"], 256), on=["a", "b"], how="left")
    mine["n"] = mine["n"].fillna(0).astype(int)
    mine["ckey"] = mine["ckey"].fillna(0).astype(int)
    assert (mine["n"] > 750).sum() > 100  # the period-250 rule is exercised
    got = p.lookup(mine["n"].to_numpy(), mine["ckey"].to_numpy(), 256)
    assert np.array_equal(got, mine["count"].astype(int).to_numpy())
    assert PTable.from_ons(p.to_ons()) == p


def test_ons_fill_missing_and_row_zero():
    small = pl.DataFrame({"pcv": [1, 1, 3, 3], "ckey": [0, 1, 0, 1], "pvalue": [-1, 1, 0, 1]})
    with pytest.raises(PTableError, match=r"i = 2"):
        PTable.from_ons(small, period=1)
    p = PTable.from_ons(small, period=1, fill_missing=True)
    assert p.lookup(np.array([0, 1, 2, 3, 9]), np.array([1, 1, 1, 1, 1]), 2).tolist() == [0, 2, 2, 4, 10]
    # a row 0 (pcv 0) moves zeros, as the ONS package would
    z = pl.concat([pl.DataFrame({"pcv": [0, 0], "ckey": [0, 1], "pvalue": [0, 1]}), small])
    q = PTable.from_ons(z, period=1, fill_missing=True)
    assert q.lookup(np.array([0, 0]), np.array([0, 1]), 2).tolist() == [0, 1]
    back = PTable.from_ons(q.to_ons())  # as the ONS package would read it
    n, k = np.repeat(np.arange(0, 1200), 2), np.tile([0, 1], 1200)
    assert np.array_equal(back.lookup(n, k, 2), q.lookup(n, k, 2))
    with pytest.raises(PTableError, match="ONS rule"):
        PTable.from_frame(_good(), period=3).to_ons(modulus=10)


# ------------------------------------------------------------------ lookup, rules, views


def test_row_class_rules():
    p = PTable.from_frame(_good(), period=3)
    n = np.array([0, 1, 2, 3, 4, 5, 6, 7, 100])
    assert p.row_class(n).tolist() == [0, 1, 2, 3, 1, 2, 3, 1, 1]
    assert PTable.from_frame(_good()).row_class(n).tolist() == [0, 1, 2, 3, 3, 3, 3, 3, 3]
    with pytest.raises(InputError):
        p.lookup(np.array([1.5]), np.array([0]), 10)
    with pytest.raises(InputError):
        p.lookup(np.array([1]), np.array([10]), 10)


def test_views():
    p = _quiet_me(D=5, V=3, js=2)
    m = p.transition_matrix()
    assert m.shape == (9, 14) and np.allclose(m.sum(axis=1), 1.0)
    assert np.all(m[1:, 1:3] == 0)  # js = 2 blocks j = 1, 2
    d = p.distribution()
    assert d.columns == ["i", "j", "p"] and d.height == p.frame.height
    q = PTable.from_ons(_random_ons(np.random.default_rng(1), ckeys=8, top=4), period=1)
    mq = q.transition_matrix()
    assert mq[0, 0] == 1.0 and np.allclose(mq.sum(axis=1), 1.0)
    assert q.distribution()["p"].sum() == pytest.approx(4.0)


def test_lookup_with_wide_keys_uses_the_class_by_class_path():
    p = _quiet_me(D=5, V=3, js=2)
    M = 2**61
    rng = np.random.default_rng(3)
    n = rng.integers(0, 40, 500)
    k = rng.integers(0, M, 500, dtype=np.int64)
    assert np.array_equal(p.lookup(n, k, M), _brute_lookup(p, n, k, M))


# ------------------------------------------------------------------ properties


def _brute_lookup(p: PTable, n: np.ndarray, k: np.ndarray, M: int) -> np.ndarray:
    """Cell by cell with exact integers: lb <= k/M < ub (or lb < k/M <= ub)."""
    rows = p.frame.select("i", "v", "lb_n", "ub_n").rows()
    imin = min(r[0] for r in rows)
    out = []
    for nn, kk in zip(n.tolist(), k.tolist()):
        c = int(p.row_class(np.array([nn]))[0])
        if c < imin:
            out.append(nn)
            continue
        for i, v, lo, hi in rows:
            if i != c:
                continue
            if p.interval == "[lb,ub)":
                hit = lo * M <= kk * p.den < hi * M
            else:
                hit = (lo * M < kk * p.den or (lo == 0 and kk == 0)) and kk * p.den <= hi * M
            if hit:
                out.append(nn + v)
                break
    return np.array(out)


@st.composite
def ptables(draw) -> PTable:
    den = draw(st.sampled_from([1, 3, 10, 256, 10**8, 10**12]))
    imin = draw(st.integers(0, 1))
    imax = draw(st.integers(imin, imin + 5))
    parts = []
    for i in range(imin, imax + 1):
        cuts = sorted(draw(st.lists(st.integers(1, max(den - 1, 1)), max_size=4, unique=True))) if den > 1 else []
        bounds = [0, *cuts, den]
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            parts.append((i, draw(st.integers(-i, 3)), lo, hi))
    frame = pl.DataFrame(parts, schema=["i", "v", "lb_n", "ub_n"], orient="row")
    low = max(imin, 1)
    period = draw(st.integers(1, imax - low + 1)) if imax >= low else 1
    interval = draw(st.sampled_from(["[lb,ub)", "(lb,ub]"]))
    return PTable(frame, den=den, period=period, interval=interval)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=ptables(), M=st.one_of(st.integers(1, 5000), st.sampled_from([2**32, 10**8, 10**15, 2**62])))
def test_keyspace_covers_every_key_once_per_row(p, M):
    ks = p.keyspace(M).sort("i", "klo")
    assert ks.schema == pl.Schema({"i": pl.Int64, "v": pl.Int64, "klo": pl.Int64, "khi": pl.Int64})
    for _i, g in ks.group_by("i", maintain_order=True):
        lo, hi = g["klo"].to_list(), g["khi"].to_list()
        assert lo[0] == 0 and hi[-1] == M - 1
        assert all(h + 1 == nxt for h, nxt in zip(hi[:-1], lo[1:]))
        assert all(h >= lw for lw, h in zip(lo, hi))
    assert sorted(ks["i"].unique().to_list()) == sorted(p.frame["i"].unique().to_list())


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=ptables(), M=st.integers(1, 3000))
def test_noise_frequencies_match_probabilities(p, M):
    keys = np.arange(M)
    for i in p.frame["i"].unique().to_list():
        noise = p.lookup(np.full(M, i), keys, M) - i
        vals, counts = np.unique(noise, return_counts=True)
        freq = dict(zip(vals.tolist(), counts.tolist()))
        rows = p.frame.filter(pl.col("i") == i).group_by("v").agg(pl.col("p").sum(), pl.len())
        for v, prob, nrows in rows.rows():
            assert abs(freq.get(v, 0) / M - prob) <= nrows / M + 1e-12


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=ptables(), M=st.sampled_from([7, 256, 10**8, 2**40]), seed=st.integers(0, 2**32 - 1))
def test_lookup_equals_brute_force(p, M, seed):
    rng = np.random.default_rng(seed)
    n = rng.integers(0, 3 * p.imax + 3, 60)
    k = rng.integers(0, M, 60, dtype=np.int64)
    got = p.lookup(n, k, M)
    assert np.array_equal(got, _brute_lookup(p, n, k, M))
    assert (got >= 0).all()
    # the row class rule: n -> key(n) stays within the table and repeats with the period
    c = p.row_class(n)
    assert (c <= p.imax).all()
    big = n > p.imax
    assert np.array_equal((c[big] - n[big]) % p.period, np.zeros(big.sum(), dtype=np.int64))


# -- summary, plot, large D ---------------------------------------------------------------


def test_summary_describes_each_row_and_its_variance_is_v_where_reached():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTableWarning)
        p = PTable.maximum_entropy(D=5, V=3, js=2)
    s = p.summary()
    assert s.columns == ["i", "n_rows", "mean", "variance", "p_stay", "v_min", "v_max", "D", "V"]
    assert s["i"].to_list() == list(range(p.imax + 1))
    assert set(s["D"].to_list()) == {5} and set(s["V"].to_list()) == {3.0}
    reached = p.diagnostics.filter(pl.col("var_reached").fill_null(False))["i"].to_list()
    assert reached  # the rows i >= 1 of this table all reach V
    rows = s.filter(pl.col("i").is_in(reached))
    np.testing.assert_allclose(rows["variance"].to_numpy(), 3.0, atol=1e-6)
    np.testing.assert_allclose(s["mean"].to_numpy(), 0.0, atol=1e-6)
    np.testing.assert_allclose(s["p_stay"].to_numpy(), p.diagnostics["p_stay"].to_numpy())
    # row 0 keeps zeros; row i cannot go below −i; blocked j = 1, 2 leave no v = 0 for i = 1, 2
    assert s.row(0, named=True)["n_rows"] == 1 and s.row(0, named=True)["p_stay"] == 1.0
    assert s.filter(pl.col("i") == 4)["v_min"].item() == -4 and s["v_max"].max() == 5
    assert s.filter(pl.col("i").is_in([1, 2]))["p_stay"].to_list() == [0.0, 0.0]
    assert s.filter(pl.col("i") == 5)["n_rows"].item() == 9  # v = −5..5 without j = 1, 2
    # a table read back has no target V: V is then the variance of row imax
    back = PTable.from_frame(p.frame.select("i", "v", "p"))
    assert back.summary()["V"][0] == pytest.approx(s["variance"][-1])


def test_plot_writes_a_png(tmp_path):
    p = PTable.maximum_entropy(D=3, V=1)
    out = tmp_path / "noise.png"
    p.plot(out)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    p.plot(tmp_path / "two.png", rows=[1, 3])
    assert (tmp_path / "two.png").stat().st_size > 0
    with pytest.raises(InputError, match="no row"):
        p.plot(tmp_path / "bad.png", rows=[99])


def test_maximum_entropy_sparse_newton_solve_equals_the_dense_one(monkeypatch):
    from protab.ptable import _maxent

    dense = _maxent.maximum_entropy_rows(20, 5, 2, None, True, 1)
    monkeypatch.setattr(_maxent, "_DENSE_MAX_N", 0)  # every row through the O(n) solve
    sparse = _maxent.maximum_entropy_rows(20, 5, 2, None, True, 1)
    assert sparse[0].equals(dense[0]) and sparse[2] == dense[2]


def test_maximum_entropy_refuses_d_above_its_limit_without_showing_d():
    from protab.ptable._maxent import MAX_D

    with pytest.raises(PTableError, match=f"limit of {MAX_D}") as err:
        PTable.maximum_entropy(D=MAX_D + 1, V=3)
    assert str(MAX_D + 1) not in str(err.value)


def test_maximum_entropy_long_row_with_a_thin_interior_reaches_the_optimum():
    # row i = 145 of D = 150, V = 3, js = 2: the phase-I start has slack 1.5e-8 and the O(n)
    # solve cannot leave it; the row must still get the maximum-entropy distribution
    from protab.ptable import _maxent

    D, V, js, i = 150, 3.0, 2, 145
    j = np.arange(max(0, i - D), i + D + 1)
    v = (j[(j < 1) | (j > js)] - i).astype(float)
    lower = np.full(v.size, 1e-8)
    p = _maxent._maxent_row(v, V, lower, True, 1)
    q = _maxent._maxent_row(v, V, lower, True, 1, dense=True)
    assert p is not None and q is not None
    np.testing.assert_allclose(np.cumsum(p), np.cumsum(q), atol=1e-9)
    assert p.min() == pytest.approx(1e-8, rel=1e-6)  # not the phase-I point (min 2.4e-8)


def test_long_rows_raise_no_numpy_warnings():
    """The interior-point steps that reach the boundary are caught by the solver's own checks;
    users see no divide-by-zero RuntimeWarnings (D = 50 has rows long enough to hit them)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        PTable.maximum_entropy(D=50, V=3, js=2)
