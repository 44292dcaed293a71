"""The cell key method through the Session (SQL join) and the SQL macros."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from refdata import HANDBOOK, HANDBOOK_RECORDS

import protab as pt


@pytest.fixture
def handbook_session(session):
    session.register("micro", HANDBOOK_RECORDS)
    session.add_record_keys("micro", record_key_column="record_key", decimals=8)
    return session


@pytest.mark.parametrize("interval", ["[lb,ub)", "(lb,ub]"])
def test_handbook_example_python_api(handbook_session, interval):
    p = pt.PTable.from_frame(HANDBOOK, interval=interval)
    out = handbook_session.cell_key("micro", pt.TableSpec({"sex": None}), p, original=True)
    cells = out.filter(pl.col("sex") == "male")
    assert cells["n"].to_list() == [3]
    assert cells["n_pert"].to_list() == [4]
    keys = handbook_session.tabulate("micro", pt.TableSpec({"sex": None}), cell_keys=True)
    assert keys["cell_key"].to_list() == [80_000_000, 80_000_000]  # 0.8 exactly, at 8 digits


def test_handbook_example_sql_macro(handbook_session):
    p = pt.PTable.from_frame(HANDBOOK)
    handbook_session.install_ptable(p, table="micro")
    rows = handbook_session.sql(
        "SELECT sex, ckm(count(*), sum(rkey)) AS n FROM micro GROUP BY ALL"
    ).rows()
    assert rows == [("male", 4)]


def test_macro_without_ptable_refuses(session):
    session.register("t", pl.DataFrame({"g": [1, 1], "rkey": [3, 4]}))
    with pytest.raises(Exception, match="no p-table is installed"):
        session.sql("SELECT g, ckm(count(*), sum(rkey)) FROM t GROUP BY ALL")


def test_interval_conventions_differ_only_on_a_boundary(session):
    """A cell key exactly on an interval bound: [lb, ub) takes the upper piece, (lb, ub] the lower."""
    # row i = 1 of the handbook table has the bound 0.5; one record with key 0.5 → cell key 0.5
    session.register("m", pl.DataFrame({"g": ["x"], "u": [0.5]}))
    session.add_record_keys("m", record_key_column="u", decimals=8)
    spec = pt.TableSpec({"g": None})
    left = session.cell_key("m", spec, pt.PTable.from_frame(HANDBOOK, interval="[lb,ub)"))
    right = session.cell_key("m", spec, pt.PTable.from_frame(HANDBOOK, interval="(lb,ub]"))
    assert left.filter(pl.col("g") == "x")["n_pert"].to_list() == [2]   # v = +1
    assert right.filter(pl.col("g") == "x")["n_pert"].to_list() == [0]  # v = −1


def test_original_counts_only_when_asked(session, persons, h_muni):
    session.register("p", persons)
    session.add_record_keys("p", id_column="pid", seed="s")
    spec = pt.TableSpec({"municipality": h_muni, "sex": None}, weight="weight")
    p = pt.PTable.maximum_entropy(D=5, V=3, js=2)
    out = session.cell_key("p", spec, p)
    assert "n" not in out.columns and "w" not in out.columns and "cell_key" not in out.columns
    assert {"n_pert", "w_pert", "municipality_level", "sex_level"} <= set(out.columns)
    full = session.cell_key("p", spec, p, original=True)
    assert {"n", "w"} <= set(full.columns)
    assert full.drop(["n", "w"]).equals(out)


def test_weighted_counts_use_the_cell_mean_weight(session, persons, h_muni):
    session.register("p", persons)
    session.add_record_keys("p", id_column="pid", seed="w")
    spec = pt.TableSpec({"municipality": h_muni, "age": None}, weight="weight")
    out = session.cell_key("p", spec, pt.PTable.maximum_entropy(D=5, V=3, js=2), original=True)
    mean_w = np.where(out["n"].to_numpy() > 0, out["w"].to_numpy() / np.maximum(out["n"].to_numpy(), 1), 0)
    np.testing.assert_allclose(out["w_pert"].to_numpy(), out["n_pert"].to_numpy() * mean_w, rtol=1e-12)


def test_threshold_blanks_small_perturbed_counts(session, persons):
    session.register("p", persons)
    session.add_record_keys("p", id_column="pid", seed="t")
    p = pt.PTable.maximum_entropy(D=5, V=3, js=2)
    spec = pt.TableSpec({"municipality": None, "sex": None, "age": None})
    plain = session.cell_key("p", spec, p)
    blanked = session.cell_key("p", spec, p, threshold=5)
    small = plain["n_pert"] < 5
    assert blanked["n_pert"].is_null().to_list() == small.to_list()
    assert blanked.filter(~small)["n_pert"].equals(plain.filter(~small)["n_pert"])


def test_sql_join_equals_numpy_lookup(session, persons, h_muni):
    """Two implementations of the lookup — the SQL join and PTable.lookup — agree cell for cell."""
    session.register("p", persons)
    session.add_record_keys("p", id_column="pid", seed="j", bits=12)
    spec = pt.TableSpec({"municipality": h_muni, "sex": None, "age": None})
    cells = session.tabulate("p", spec, cell_keys=True)
    for ptable in [pt.PTable.maximum_entropy(D=2, V=0.9), pt.PTable.maximum_entropy(D=5, V=3, js=2),
                   pt.PTable.from_frame(HANDBOOK, interval="(lb,ub]")]:
        out = session.cell_key("p", spec, ptable)
        want = ptable.lookup(cells["n"].to_numpy(), cells["cell_key"].to_numpy(), 2**12)
        assert out["n_pert"].to_list() == list(want)


def test_cell_key_is_the_key_sum_modulo(session, persons):
    session.register("p", persons)
    session.add_record_keys("p", id_column="pid", seed="k", bits=16)
    keys = session.sql("SELECT sex, rkey FROM p")
    out = session.tabulate("p", pt.TableSpec({"sex": None}), cell_keys=True)
    got = dict(zip(out["sex"], out["cell_key"]))
    for sex in ("F", "M"):
        assert got[sex] == keys.filter(pl.col("sex") == sex)["rkey"].sum() % 2**16
    assert got["Total"] == keys["rkey"].sum() % 2**16


def test_cell_key_needs_keys_and_a_ptable(session, persons):
    session.register("p", persons)
    with pytest.raises(pt.InputError, match="has no record keys"):
        session.cell_key("p", pt.TableSpec({"sex": None}), pt.PTable.from_frame(HANDBOOK))
    session.add_record_keys("p", id_column="pid", seed="x")
    with pytest.raises(pt.InputError, match="PTable"):
        session.cell_key("p", pt.TableSpec({"sex": None}), HANDBOOK)


def test_same_seed_gives_identical_output_files(tmp_path, persons, h_muni):
    outs = []
    for k in range(2):
        with pt.Session(tmp_path / f"db{k}.duckdb", threads=1 + k) as s:
            s.register("p", persons)
            s.add_record_keys("p", id_column="pid", seed="same")
            spec = pt.TableSpec({"municipality": h_muni, "sex": None}, weight="weight")
            frame = s.cell_key("p", spec, pt.PTable.maximum_entropy(D=5, V=3, js=2))
        path = tmp_path / f"out{k}.csv"
        frame.write_csv(path)
        outs.append(path.read_bytes())
    assert outs[0] == outs[1]


# -- properties ----------------------------------------------------------------------------
codes = st.sampled_from(["a", "b", "c", "d"])


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    recs=st.lists(st.tuples(codes, codes, codes), min_size=1, max_size=120),
    seed=st.text(min_size=1, max_size=8).filter(str.strip),  # whitespace-only seeds are refused
    bits=st.sampled_from([8, 16, 32]),
)
def test_same_cell_same_value_in_every_table_and_never_negative(recs, seed, bits):
    frame = pl.DataFrame(recs, schema=["x", "y", "z"], orient="row").with_row_index("pid")
    p = pt.PTable.maximum_entropy(D=5, V=3, js=2)
    hx = pt.Hierarchy.from_parent_child([("ab", "a"), ("ab", "b"), ("cd", "c"), ("cd", "d")], root="Total")
    with pt.Session(":memory:") as s:
        s.register("t", frame)
        s.add_record_keys("t", id_column="pid", seed=seed, bits=bits)
        one = s.cell_key("t", pt.TableSpec({"x": hx, "y": None}), p, original=True)
        two = s.cell_key("t", pt.TableSpec({"x": hx, "z": None}, formula="x + z"), p, original=True)
        three = s.cell_key("t", pt.TableSpec({"y": None, "x": hx, "z": None}), p, original=True)
    for f in (one, two, three):
        assert f["n_pert"].min() >= 0
        assert (f.filter(pl.col("n") == 0)["n_pert"] == 0).all()  # zeros stay zero
    # cells over x alone (the other dimensions at their totals) hold the same records in all
    def x_cells(f, others):
        cond = pl.all_horizontal([pl.col(f"{o}_level") == 0 for o in others])
        return dict(f.filter(cond).select("x", "n_pert").rows())
    a, b, c = x_cells(one, ["y"]), x_cells(two, ["z"]), x_cells(three, ["y", "z"])
    assert a == b == c


def test_ons_package_reproduced_cell_for_cell_through_the_session(session):
    """ONSdigital cell-key-perturbation 3.1.0 on its own example data and 10-5 p-table."""
    import pandas as pd
    from cell_key_perturbation.create_perturbed_table import create_perturbed_table
    from cell_key_perturbation.utils.generate_test_data import generate_test_data
    from cell_key_perturbation.utils.generate_test_ptable import generate_ptable_10_5_rule

    micro = generate_test_data()
    ons_ptable = generate_ptable_10_5_rule()
    theirs = create_perturbed_table(data=micro, ptable=ons_ptable, geog=["var1"],
                                    tab_vars=["var5", "var8"], record_key="record_key")
    session.register("micro", micro)
    session.add_record_keys("micro", record_key_column="record_key", bits=8)
    p = pt.PTable.from_ons(ons_ptable)
    ours = session.cell_key("micro", pt.TableSpec({"var1": None, "var5": None, "var8": None}), p,
                            threshold=10, original=True)
    inner = ours.filter((pl.col("var1_level") == 1) & (pl.col("var5_level") == 1) & (pl.col("var8_level") == 1))
    want = {(str(a), str(b), str(c)): (int(n), None if pd.isna(m) else int(m))
            for a, b, c, n, m in theirs[["var1", "var5", "var8", "pre_sdc_count", "count"]]
            .astype(object).itertuples(index=False)}
    got = {(a, b, c): (n, m) for a, b, c, n, m in inner.select("var1", "var5", "var8", "n", "n_pert").rows()}
    assert len(want) == 5 * 10 * 4
    assert got == want


def test_perturb_inner_is_additive_and_consistent_for_inner_cells(session, persons, h_muni):
    session.register("p", persons)
    session.add_record_keys("p", id_column="pid", seed="inner")
    p = pt.PTable.from_frame(HANDBOOK)
    spec = pt.TableSpec({"municipality": h_muni, "sex": None}, weight="weight")
    out = session.perturb_inner("p", spec, p, original=True)
    X, inner, published = session.model_matrix("p", spec, extend0=False)
    assert out.select("municipality", "sex").equals(published.select("municipality", "sex"))
    inner_out = out.filter((pl.col("municipality_level") == 2) & (pl.col("sex_level") == 1))
    by_cell = dict(zip(zip(inner_out["municipality"], inner_out["sex"]), inner_out["n_pert"]))
    y = np.array([by_cell[(m, s)] for m, s in inner.select("municipality", "sex").rows()])
    np.testing.assert_array_equal(X.T @ y, out["n_pert"].to_numpy())  # margins are sums
    w = dict(zip(zip(inner_out["municipality"], inner_out["sex"]), inner_out["w_pert"]))
    total = out.filter((pl.col("municipality_level") == 0) & (pl.col("sex_level") == 0))
    assert total["w_pert"][0] == pytest.approx(sum(w.values()))
    # inner cells get the same value as the cell key method gives them
    ck = session.cell_key("p", spec, p)
    ck_inner = ck.filter((pl.col("municipality_level") == 2) & (pl.col("sex_level") == 1))
    assert ck_inner["n_pert"].to_list() == inner_out["n_pert"].to_list()
