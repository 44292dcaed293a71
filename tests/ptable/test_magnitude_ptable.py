"""MagnitudePTable: magnitude p-tables as R ptable create_num_ptable, files, cellKey's lookup."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import protab
from protab.errors import InputError, PTableError, PTableWarning
from protab.ptable import MagnitudePTable, PTable

DATA = Path(__file__).resolve().parents[1] / "data" / "ptable_num"


def _cases() -> list[dict]:
    return pl.read_csv(DATA / "cases.csv", infer_schema_length=0).to_dicts()


def _params(row: dict) -> tuple[tuple, dict]:
    kw = {
        "step": int(row["step"]),
        "icat": [int(x) for x in row["icat"].split()],
        "optim": [int(x) for x in row["optim"].split()],
        "mono": [x == "TRUE" for x in row["mono"].split()],
        "type": row["type"],
    }
    if row["pstay"]:
        kw["pstay"] = float(row["pstay"])
    return (int(row["D"]), float(row["V"])), kw


def _r_table(case: str) -> pl.DataFrame:
    return pl.read_csv(DATA / f"{case}.csv", infer_schema_length=None).with_columns(
        pl.col("i", "j", "v").cast(pl.Float64)
    )


def _quiet(*args, **kwargs) -> MagnitudePTable:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTableWarning)
        return MagnitudePTable.maximum_entropy(*args, **kwargs)


_TABLES: dict[str, MagnitudePTable] = {}


def _built(case: str) -> MagnitudePTable:
    if case not in _TABLES:
        row = next(r for r in _cases() if r["case"] == case)
        args, kw = _params(row)
        _TABLES[case] = _quiet(*args, **kw)
    return _TABLES[case]


# ------------------------------------------------------------------ R ptable 1.0.0 references


@pytest.mark.parametrize("row", _cases(), ids=lambda r: r["case"])
def test_maximum_entropy_matches_r(row):
    """Every entry of create_num_ptable: i, j, v exact, p and both bounds to 1e-6."""
    args, kw = _params(row)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = MagnitudePTable.maximum_entropy(*args, **kw)
    r = _r_table(row["case"])
    assert t.frame.height == r.height
    assert t.frame.schema == {
        "i": pl.Float64, "j": pl.Float64, "p": pl.Float64, "v": pl.Float64,
        "lb": pl.Float64, "ub": pl.Float64, "lb_n": pl.Int64, "ub_n": pl.Int64, "type": pl.Utf8,
    }
    # same entries in the same order
    assert t.frame["i"].to_list() == r["i"].to_list()
    assert t.frame["j"].to_list() == r["j"].to_list()
    assert t.frame["v"].to_list() == r["v"].to_list()
    for theirs, mine in [("p", "p"), ("p_int_lb", "lb"), ("p_int_ub", "ub")]:
        assert np.abs(r[theirs].to_numpy() - t.frame[mine].to_numpy()).max() <= 1e-6
    assert t.den == 10**8 and t.type == row["type"] == r["type"][0]
    assert t.imax == float(args[0]) and t.rows == tuple(float(x) for x in [0, *kw["icat"]])
    assert (t.frame["ub_n"] - t.frame["lb_n"] >= 0).all()
    # empResults: the same variances, and iter = 1 exactly where the variance is reached
    emp = pl.read_csv(DATA / f"{row['case']}_empResults.csv").with_columns(pl.col("i").cast(pl.Float64))
    both = emp.join(t.diagnostics, on="i", suffix="_py")
    assert both.height == emp.height
    for c in ("p_mean", "p_var", "p_sum", "p_stay"):
        assert (both[c] - both[f"{c}_py"]).abs().max() <= 2e-5, c
    reached = both.filter(pl.col("i") > 0)
    assert reached["var_reached"].to_list() == (reached["iter"] == 1).to_list()
    messages = [str(w.message) for w in caught if issubclass(w.category, PTableWarning)]
    missed = int((reached["iter"] != 1).sum())
    assert any("variance target was not met" in m for m in messages) == bool(missed)
    assert any("pstay is ignored" in m for m in messages) == ("pstay" in kw)
    for m in messages:
        assert str(args[1]) not in m and f"D={args[0]}" not in m


def test_r_reference_files_read_back_equal():
    """R's CSV read by MagnitudePTable.read is the table maximum_entropy builds (to 1e-6)."""
    for row in _cases():
        got = MagnitudePTable.read(DATA / f"{row['case']}.csv")
        mine = _built(row["case"])
        assert got.type == mine.type and got.rows == mine.rows
        assert np.abs(got.frame["ub"].to_numpy() - mine.frame["ub"].to_numpy()).max() <= 1e-6


def test_variance_is_cellkeys_m1sq():
    """variance(): Σ v² p of the last row (cellKey's m1² for the small-cell table)."""
    for case, V in (("all", 3.0), ("small_cells", 1.0), ("even", 1.0), ("odd", 2.0)):
        r = _r_table(case)
        last = r.filter(pl.col("i") == r["i"].max())
        expected = float((last["v"] ** 2 * last["p"]).sum())
        t = MagnitudePTable.read(DATA / f"{case}.csv")
        assert t.variance() == pytest.approx(expected, abs=1e-12)
        assert t.variance() == pytest.approx(V, abs=1e-5)


def test_summary_and_repr_show_no_parameters():
    t = _built("all")
    s = t.summary()
    assert s.columns == ["i", "mean", "variance", "p_stay", "n_entries"]
    assert s["i"].to_list() == [0.0, 1.0, 5.0, 10.0]
    assert s["n_entries"].to_list() == [1, 23, 31, 41]  # 2·D·step + 1 = 41 in the last row
    np.testing.assert_allclose(s["mean"].to_numpy(), 0.0, atol=1e-6)
    np.testing.assert_allclose(s["variance"].to_numpy()[1:], 3.0, atol=1e-5)
    for text in (repr(t), str(t)):
        assert "10" not in text and "3" not in text and "D" not in text and "V" not in text
    assert repr(t) == "MagnitudePTable(type='all', 4 classes)"


# ------------------------------------------------------------------ tau-ARGUS and R files


def _argus_values(path: Path) -> pl.DataFrame:
    raw = pl.read_csv(path, separator=";", infer_schema_length=0)
    return raw.select(
        *(pl.col(c).str.strip_chars().cast(pl.Float64) for c in raw.columns[:-1]),
        pl.col(raw.columns[-1]).str.strip_chars(),
    )


@pytest.mark.parametrize(
    ("fname", "tables"),
    [("argus_all.txt", {"all": "all"}), ("argus_even_odd.txt", {"even": "even", "odd": "odd"})],
)
def test_argus_export_equals_r_value_for_value(tmp_path, fname, tables):
    """write / write_set in tau-ARGUS format give R pt_export's values, header and order
    (R pads its columns with blanks; protab does not)."""
    built = {k: _built(case) for k, case in tables.items()}
    out = tmp_path / "t.txt"
    if len(built) == 1:
        built["all"].write(out, format="argus")
    else:  # given odd first: the file still has even first, as tau-ARGUS requires
        MagnitudePTable.write_set(out, {"odd": built["odd"], "even": built["even"]}, format="argus")
    ours_text = out.read_text()
    assert ours_text.splitlines()[0] == (DATA / fname).read_text().splitlines()[0] == "i;j;p;v;p_int_ub;type"
    assert " " not in ours_text
    theirs, ours = _argus_values(DATA / fname), _argus_values(out)
    assert ours.columns == theirs.columns and ours.height == theirs.height
    assert ours["type"].to_list() == theirs["type"].to_list()
    for c in ("i", "j", "v"):
        assert ours[c].to_list() == theirs[c].to_list()
    for c in ("p", "p_int_ub"):  # our optimum and R's SLSQP point agree to 1e-6
        assert (ours[c] - theirs[c]).abs().max() <= 1e-6
    # the R file's own tables, written again, give R's values exactly (8 significant digits)
    again = tmp_path / "again.txt"
    MagnitudePTable.write_set(again, MagnitudePTable.read_set(DATA / fname), format="argus")
    re_read = _argus_values(again)
    for c in ("i", "j", "v", "p", "p_int_ub"):
        # (R prints a p of 1e-8 computed as ub - lb in floats as 9.9999999e-09)
        np.testing.assert_allclose(re_read[c].to_numpy(), theirs[c].to_numpy(), rtol=1e-12, atol=1e-15)
    assert re_read["type"].to_list() == theirs["type"].to_list()


def test_read_set_and_read_of_the_r_exports():
    pair = MagnitudePTable.read_set(DATA / "argus_even_odd.txt")
    assert list(pair) == ["even", "odd"]
    assert pair["even"] == MagnitudePTable.read(DATA / "even.csv")
    assert pair["odd"] == MagnitudePTable.read(DATA / "odd.csv")
    assert MagnitudePTable.read(DATA / "argus_even_odd.txt", type="odd") == pair["odd"]
    with pytest.raises(PTableError, match="read_set"):
        MagnitudePTable.read(DATA / "argus_even_odd.txt")
    one = MagnitudePTable.read(DATA / "all.csv")
    assert MagnitudePTable.read(DATA / "argus_all.txt") == one
    assert MagnitudePTable.read(DATA / "sas_all.txt") == one  # SAS variant with p_int_lb
    assert MagnitudePTable.read_set(DATA / "all.csv") == {"all": one}


@pytest.mark.parametrize("fmt", ["r", "argus"])
def test_files_round_trip(tmp_path, fmt):
    for case in ("all", "optim4", "small_cells"):  # optim4: j, v with 4 decimals (step 3)
        t = MagnitudePTable.read(DATA / f"{case}.csv")
        t.write(tmp_path / "x.txt", format=fmt)
        assert MagnitudePTable.read(tmp_path / "x.txt") == t
    sets = {
        "all": MagnitudePTable.read(DATA / "all.csv"),
        "small_cells": MagnitudePTable.read(DATA / "small_cells.csv"),  # R labels it "all"
    }
    MagnitudePTable.write_set(tmp_path / "s.txt", {"small_cells": sets["small_cells"], "all": sets["all"]}, format=fmt)
    back = MagnitudePTable.read_set(tmp_path / "s.txt")
    assert list(back) == ["all", "small_cells"]
    assert back["all"] == sets["all"]
    assert back["small_cells"] == sets["small_cells"].as_type("small_cells")


def test_r_csv_layout(tmp_path):
    t = MagnitudePTable.read(DATA / "optim4.csv")
    t.write(tmp_path / "o.csv")
    lines = (tmp_path / "o.csv").read_text().splitlines()
    assert lines[0] == "i,j,p,v,p_int_lb,p_int_ub,type"
    assert lines[1] == "0,0,1,0,0,1,all"
    assert lines[2].startswith("1,0,") and ",-1,0," in lines[2]
    assert lines[3].startswith("1,0.3333,") and ",-0.6667," in lines[3]


def test_write_set_rules(tmp_path):
    a, e = _built("all"), _built("even")
    for bad in ({}, {"all": a, "even": e}, {"even": e}, {"small_cells": a}, {"bogus": a}, {"all": "x"}):
        with pytest.raises(PTableError):
            MagnitudePTable.write_set(tmp_path / "x.txt", bad)


def test_count_and_numeric_files_are_told_apart(tmp_path):
    """A count p-table file read as numeric, or a numeric one read by PTable, says which
    class to use."""
    cnt = PTable.maximum_entropy(D=2, V=0.9)
    for fmt, name in (("tauargus", "c.txt"), ("ptable", "c.csv")):
        cnt.write(tmp_path / name, format=fmt)
    with pytest.raises(PTableError, match=r"count p-table.*PTable\.read"):
        MagnitudePTable.read(tmp_path / "c.txt")
    for name in ("all.csv", "argus_all.txt", "argus_even_odd.txt", "sas_all.txt", "even.csv"):
        with pytest.raises(PTableError, match=r"MagnitudePTable\.read"):
            PTable.read(DATA / name)


# ------------------------------------------------------------------ keyspace and lookup


def _tiny() -> MagnitudePTable:
    """Rows 0 (v 0), 1 (v −1 | 0 | 1 on [0, .25) [.25, .75) [.75, 1)), 3 (v −2 | 2 at .5)."""
    return MagnitudePTable.from_frame(
        pl.DataFrame(
            {
                "i": [0.0, 1, 1, 1, 3, 3],
                "v": [0.0, -1, 0, 1, -2, 2],
                "lb": [0.0, 0, 0.25, 0.75, 0, 0.5],
                "ub": [1.0, 0.25, 0.75, 1, 0.5, 1],
            }
        )
    )


def test_lookup_hand_checked():
    t = _tiny()
    assert t.rows == (0.0, 1.0, 3.0) and t.imax == 3.0
    a = [1, 1, 1, 1, 3, 3, 2, 2, 2, 5, 50, 0.5, 0.25, 0, 0]
    k = [10, 25, 74, 75, 49, 50, 10, 60, 80, 10, 99, 10, 80, 0, 99]
    expect = [
        -1, 0, 0, 1,  # exact row 1, boundaries lb <= u < ub
        -2, 2,  # exact row 3
        -1.5, 1.0, 1.5,  # halfway between rows 1 and 3, the same key in both
        -2, 2,  # above imax: capped at row 3
        -0.5, 0.25,  # between row 0 (v = 0) and row 1
        0, 0,  # row 0
    ]
    np.testing.assert_allclose(t.lookup(a, k, 100), expect, rtol=0, atol=1e-15)
    # broadcasting and shape
    assert t.lookup(np.array([[2.0]]), np.array([[10, 60]]), 100).shape == (1, 2)
    assert t.lookup(2.0, 10, 100) == pytest.approx(-1.5)


def test_lookup_matches_r_cellkey():
    """lookup() against R cellKey's .lookup_v_flex on R's own tables (lookup_reference.csv)."""
    ref = pl.read_csv(DATA / "lookup_reference.csv")
    for case in ("all", "small_cells"):
        t = MagnitudePTable.read(DATA / f"{case}.csv")
        s = ref.filter(pl.col("case") == case)
        got = t.lookup(s["a"].to_numpy(), s["k"].to_numpy(), int(s["modulus"][0]))
        np.testing.assert_allclose(got, s["v"].to_numpy(), rtol=0, atol=1e-12)


def test_lookup_bad_input():
    t = _tiny()
    for a, k, M in (([-1.0], [1], 10), ([np.nan], [1], 10), ([1.0], [10], 10), ([1.0], [-1], 10), ([1.0], [1], 0), ([1.0], [0.5], 10)):
        with pytest.raises(InputError):
            t.lookup(a, k, M)


@pytest.mark.parametrize("case", ["all", "small_cells", "optim4"])
@pytest.mark.parametrize("M", [1, 7, 97, 1000])
def test_keyspace_matches_lookup_for_every_key(case, M):
    t = MagnitudePTable.read(DATA / f"{case}.csv")
    ks = t.keyspace(M)
    assert ks.schema == {"i": pl.Float64, "v": pl.Float64, "klo": pl.Int64, "khi": pl.Int64}
    keys = np.arange(M)
    for i in t.rows:
        rows = ks.filter(pl.col("i") == i)
        # the ranges of one i tile 0..M-1
        assert rows["klo"][0] == 0 and rows["khi"][-1] == M - 1
        assert (rows["klo"][1:].to_numpy() == rows["khi"][:-1].to_numpy() + 1).all()
        want = np.repeat(rows["v"].to_numpy(), (rows["khi"] - rows["klo"] + 1).to_numpy())
        np.testing.assert_array_equal(t.lookup(np.full(M, i), keys, M), want)
    # exact integer arithmetic: u = k/M lies in [lb, ub)
    f = t.frame.join(ks, on=["i", "v"])
    assert ((f["klo"] * t.den >= f["lb_n"] * M) & (f["khi"] * t.den < f["ub_n"] * M)).all()


def test_keyspace_is_shared_with_ptable():
    """The same key ranges as PTable.keyspace for a table that is both (integer noise)."""
    cnt = PTable.maximum_entropy(D=3, V=1)
    num = MagnitudePTable.from_frame(cnt.frame.select("i", "j", "p", "v", "lb", "ub"))
    for M in (10, 12345, 10**8):
        a = cnt.keyspace(M).with_columns(pl.col("i", "v").cast(pl.Float64))
        assert num.keyspace(M).equals(a)


# ------------------------------------------------------------------ from_frame and types


def test_constructor_and_the_smallest_table():
    t = _built("odd")
    assert MagnitudePTable(t.frame.select("i", "v", "lb_n", "ub_n"), den=t.den, type="odd") == t
    assert MagnitudePTable(t.frame.drop("type"), den=t.den, type="odd") == t
    with pytest.raises(PTableError, match="den"):
        MagnitudePTable(t.frame, den=0)
    with pytest.raises(PTableError, match="from_frame"):
        MagnitudePTable(t.frame.drop("lb_n"), den=t.den)
    one = _quiet(1, 0.5, step=1, icat=[1])  # D = 1: rows 0 and 1, j = 0, 1, 2
    assert one.rows == (0.0, 1.0) and one.frame["j"].to_list() == [0.0, 0.0, 1.0, 2.0]


def test_from_frame_layouts():
    r = pl.read_csv(DATA / "all.csv", infer_schema_length=None)
    t = MagnitudePTable.from_frame(r)
    assert MagnitudePTable.from_frame(r.to_pandas()) == t
    assert MagnitudePTable.from_frame(r.drop("p_int_lb")) == t  # upper bounds only
    assert MagnitudePTable.from_frame(r.rename({"p_int_lb": "lb", "p_int_ub": "ub"}).drop("type")) == t
    assert MagnitudePTable.from_frame(r.drop("p_int_lb", "p_int_ub")) == t  # p only
    assert MagnitudePTable.from_frame(r.drop("v")) == t and MagnitudePTable.from_frame(r.drop("j")) == t
    assert MagnitudePTable.from_frame(r, type="all") == t
    assert MagnitudePTable.from_frame(r.drop("type"), type="even").type == "even"
    sc = t.as_type("small_cells")
    assert sc.type == "small_cells" and set(sc.frame["type"]) == {"small_cells"} and t.type == "all"
    assert sc != t and sc.as_type("all") == t
    assert _quiet(5, 1, step=5, icat=[1, 3, 5], optim=[4, 1, 1], type="small_cells").type == "small_cells"


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda f: f.drop("p").with_columns(pl.when(pl.int_range(pl.len()) == 30).then(pl.col("p_int_ub") - 0.001).otherwise(pl.col("p_int_ub")).alias("p_int_ub")), "partition.*gaps"),
        (lambda f: f.filter(pl.col("i") != 0), "row i = 0"),
        (lambda f: f.with_columns(pl.when(pl.col("i") == 1).then(pl.col(c) - 2).otherwise(pl.col(c)).alias(c) for c in ("i", "j")), "negative original"),
        (lambda f: f.with_columns((pl.col("j") - 1.0).alias("j"), (pl.col("v") - 1.0).alias("v")), "negative outcomes"),
        (lambda f: f.with_columns((pl.col("j") + 0.5).alias("j")), "disagree"),
        (lambda f: f.with_columns((pl.col("p") * 0.5).alias("p")), "ub - lb"),
        (lambda f: f.with_columns(pl.lit("bogus").alias("type")), "type"),
        (lambda f: pl.concat([f, f.with_columns(pl.lit("odd").alias("type"))]), "read_set"),
        (lambda f: f.drop("p", "p_int_lb", "p_int_ub"), "bounds"),
        (lambda f: f.drop("i"), "'i'"),
        (lambda f: f.head(0), "no rows"),
    ],
)
def test_from_frame_refuses(change, match):
    r = pl.read_csv(DATA / "all.csv", infer_schema_length=None).with_columns(pl.col("i", "j", "v").cast(pl.Float64))
    with pytest.raises(PTableError, match=match) as exc:
        MagnitudePTable.from_frame(change(r))
    assert "10" not in str(exc.value)  # frame positions, never the i values (imax = D)


# ------------------------------------------------------------------ parameters

SECRET_D, SECRET_V, SECRET_PSTAY = 37, 1.2345, 0.4321


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"D": 0}, "D"),
        ({"D": -SECRET_D}, "D"),
        ({"D": SECRET_D + 0.5}, "D"),
        ({"V": -SECRET_V}, "V"),
        ({"V": 0}, "V"),
        ({"V": float("nan")}, "V"),
        ({"V": "x"}, "V"),
        ({"step": 0}, "step"),
        ({"step": 1.5}, "step"),
        ({"step": 2}, "below 50"),
        ({"icat": None}, "icat"),
        ({"icat": [2, SECRET_D]}, "include 1 and D"),
        ({"icat": [1, 5]}, "include 1 and D"),
        ({"icat": [1, SECRET_D, SECRET_D + 3]}, "largest entry"),
        ({"icat": [1, 2.5, SECRET_D]}, "integers"),
        ({"icat": [0, 1, SECRET_D]}, "from 1 to D"),
        ({"optim": 5}, "optim"),
        ({"optim": [1, 4]}, "optim"),
        ({"mono": "yes"}, "mono"),
        ({"mono": [True]}, "mono"),
        ({"type": "bogus"}, "type"),
        ({"pstay": 1 + SECRET_PSTAY}, "pstay"),
        ({"pstay": 0}, "pstay"),
        ({"pstay": [SECRET_PSTAY]}, "pstay"),
    ],
)
def test_bad_parameters_raise_without_the_secrets(kwargs, match):
    args = {"D": SECRET_D, "V": SECRET_V, "step": 1, "icat": [1, 3, SECRET_D], "pstay": None}
    args.update(kwargs)
    D, V = args.pop("D"), args.pop("V")
    with pytest.raises(PTableError, match=match) as exc:
        MagnitudePTable.maximum_entropy(D, V, **args)
    msg = str(exc.value)
    for secret in (SECRET_D, SECRET_D + 3, SECRET_V, SECRET_PSTAY, 1 + SECRET_PSTAY):
        assert str(secret) not in msg


def test_pstay_is_ignored_as_in_r():
    with pytest.warns(PTableWarning, match="pstay is ignored") as rec:
        a = MagnitudePTable.maximum_entropy(4, 0.8, icat=[1, 4], pstay=SECRET_PSTAY)
    assert len(rec) == 1 and str(SECRET_PSTAY) not in str(rec[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a table that reaches V everywhere warns about nothing
        assert a == MagnitudePTable.maximum_entropy(4, 0.8, icat=[1, 4])


def test_top_level_export():
    assert protab.MagnitudePTable is MagnitudePTable
    assert "MagnitudePTable" in protab.__all__


# ------------------------------------------------------------------ properties


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    D=st.integers(1, 8),
    step=st.integers(1, 5),
    V=st.floats(0.2, 4.0),
    extra=st.lists(st.integers(2, 7), max_size=3),
)
def test_rows_are_unbiased_distributions(D, step, V, extra):
    if D * step >= 50:
        return
    icat = sorted({1, D, *[c for c in extra if c < D]})
    t = _quiet(D, V, step=step, icat=icat)
    f = t.frame
    assert (f["j"] >= 0).all() and (f["p"] >= 0).all()
    assert t.rows == tuple(float(x) for x in [0, *icat])
    s = t.summary()
    assert (s["mean"].abs() < 1e-6).all()
    d = t.diagnostics
    assert (d["p_sum"] == 1.0).all()
    # every noise value is a multiple of 1/step (to 4 decimals) and j = i + v
    assert np.allclose(f["v"].to_numpy() * step, np.round(f["v"].to_numpy() * step), atol=5e-4 * step)
    assert np.allclose(f["i"] + f["v"], f["j"], atol=1e-9)
    # rows that reach V have variance V (bounds rounded to 8 decimals)
    ok = d.filter(pl.col("var_reached"))
    assert ((ok["p_var"] - V).abs() < 1e-3).all()
    # the last row has the full support 2·D·step + 1
    assert s["n_entries"][-1] == 2 * D * step + 1
