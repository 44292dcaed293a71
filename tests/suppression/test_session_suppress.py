"""Session.suppress end to end: primary cells from protab's rules, secondary ones by Gaussian
elimination, against GaussSuppression's own outputs (tests/data/gauss_rules/secondary)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

import protab as pt
from protab.magnitude import SensitivityRules
from protab.suppression import derivable

DATA = Path(__file__).resolve().parents[1] / "data" / "gauss_rules"


def _compare(ref: pl.DataFrame, out: pl.DataFrame, keys: list[str], extra: int = 0) -> None:
    """Primary cells equal; suppressed cells equal, except ``extra`` cells the package
    suppresses more (none in the cases below); protab never suppresses a cell it publishes."""
    j = ref.with_columns(pl.col(k).cast(pl.String) for k in keys).join(out, on=keys, how="left", suffix="_protab")
    assert j["suppressed_protab"].null_count() == 0, "a cell of the reference is missing"
    assert (j["primary"] == (j["suppressed_protab"] == "primary")).all(), "primary cells differ"
    ours = j["suppressed_protab"] != "no"
    assert not (ours & ~j["suppressed"]).any(), "protab suppresses a cell GaussSuppression publishes"
    assert int((j["suppressed"] & ~ours).sum()) == extra


@pytest.mark.parametrize("case, zeros", [("sec_smallcounts_mun_accidents_maxN3", True),
                                         ("sec_smallcounts_mun_accidents_maxN3_pzF", False)])
def test_small_counts_match_gauss_suppression(case, zeros):
    acc = pl.read_csv(DATA / "inputs" / "mun_accidents.csv")
    with pt.Session(":memory:") as s:
        s.register("a", acc)
        out = s.suppress("a", pt.TableSpec(["mun", "inj"], freq="freq"), min_frequency=4, protect_zeros=zeros)
    _compare(pl.read_csv(DATA / "secondary" / f"{case}.csv"), out, ["mun", "inj"])
    # suppressed cells are published as null, the others with their counts
    assert out.filter(pl.col("suppressed") != "no")["n"].null_count() == out.filter(pl.col("suppressed") != "no").height
    assert out.filter(pl.col("suppressed") == "no")["n"].null_count() == 0


def _magnitude1(s: pt.Session, hierarchical: bool) -> pt.TableSpec:
    s.register("m", pl.read_csv(DATA / "inputs" / "magnitude1.csv"))
    if not hierarchical:
        return pt.TableSpec(["sector4", "geo"], sums=["value"])
    return pt.TableSpec({"sector4": s.hierarchy_from_columns("m", ["sector2", "sector4"]),
                         "geo": s.hierarchy_from_columns("m", ["eu", "geo"])}, sums=["value"])


@pytest.mark.parametrize("case, hierarchical, rules, extra", [
    ("sec_vignette_dom_hier_n12k80_99", True, SensitivityRules(dominance=[(1, 80), (2, 99)]), 0),
    ("sec_vignette_dom_d1_n1k80", False, SensitivityRules(dominance=[(1, 80)]), 0),
    ("sec_vignette_fewcontr_d1_maxN1", False, SensitivityRules(min_frequency=2), 0),
])
def test_magnitude_tables_match_gauss_suppression(case, hierarchical, rules, extra):
    with pt.Session(":memory:") as s:
        spec = _magnitude1(s, hierarchical)
        out = s.suppress("m", spec, rules=rules)
        X, _, published = s.model_matrix("m", spec, extend0=False)
    _compare(pl.read_csv(DATA / "secondary" / f"{case}.csv"), out, ["sector4", "geo"], extra)
    suppressed = (out["suppressed"] != "no").to_numpy()
    primary = (out["suppressed"] == "primary").to_numpy()
    assert not derivable(X, suppressed)[primary].any()


def test_no_primary_cell_is_derivable_on_a_larger_table():
    rng = np.random.default_rng(5)
    n = 3000
    frame = pl.DataFrame({"a": rng.choice([f"a{i}" for i in range(12)], n),
                          "b": rng.choice([f"b{i}" for i in range(9)], n, p=np.r_[[0.3, 0.2], np.full(7, 0.5 / 7)]),
                          "c": rng.choice(["x", "y", "z"], n)})
    with pt.Session(":memory:") as s:
        s.register("t", frame)
        spec = pt.TableSpec(["a", "b", "c"])
        out = s.suppress("t", spec, min_frequency=5)
        X, _, _ = s.model_matrix("t", spec)
    suppressed = (out["suppressed"] != "no").to_numpy()
    primary = (out["suppressed"] == "primary").to_numpy()
    assert primary.sum() > 10 and (out["suppressed"] == "secondary").sum() > 0
    assert not derivable(X, suppressed)[primary].any()


def test_forced_and_never_cells():
    acc = pl.read_csv(DATA / "inputs" / "mun_accidents.csv")
    with pt.Session(":memory:") as s:
        s.register("a", acc)
        spec = pt.TableSpec(["mun", "inj"], freq="freq")
        base = s.suppress("a", spec, min_frequency=4)
        free = base.filter(pl.col("suppressed") == "no").select("mun", "inj").head(1)
        out = s.suppress("a", spec, min_frequency=4, forced=free)
        assert out.join(free, on=["mun", "inj"])["suppressed"].item() == "primary"
        with pytest.raises(pt.SpecError, match="does not publish"):
            s.suppress("a", spec, min_frequency=4, forced=pl.DataFrame({"mun": ["k99"], "inj": ["serious"]}))
        with pytest.raises(pt.SpecError, match="both forced"):
            s.suppress("a", spec, min_frequency=4, forced=free, never=free)


@pytest.mark.parametrize("kwargs, message", [
    ({}, "min_frequency"),
    ({"min_frequency": 0}, "min_frequency"),
    ({"min_frequency": True}, "min_frequency"),
    ({"min_frequency": 3, "rules": SensitivityRules(p_percent=10)}, "rules judge sums"),
    ({"min_frequency": 3, "protect_zeros": "yes"}, "protect_zeros"),
])
def test_bad_suppress_arguments(kwargs, message):
    with pt.Session(":memory:") as s:
        s.register("a", pl.DataFrame({"g": ["x", "y"]}))
        with pytest.raises(pt.SpecError, match=message):
            s.suppress("a", pt.TableSpec(["g"]), **kwargs)


def test_magnitude_table_needs_rules():
    with pt.Session(":memory:") as s:
        spec = _magnitude1(s, False)
        with pytest.raises(pt.SpecError, match="needs rules"):
            s.suppress("m", spec, min_frequency=3)


# -- protect requests with method = "suppression" ------------------------------------------------
def _request(tmp_path: Path, body: str, capsys) -> tuple[int, str]:
    from protab import cli

    db = tmp_path / "s.duckdb"
    if not db.exists():
        with pt.Session(str(db)) as s:
            s.register("acc", pl.read_csv(DATA / "inputs" / "mun_accidents.csv"))
            s.register("firms", pl.read_csv(DATA / "inputs" / "magnitude1.csv"))
    (tmp_path / "req.toml").write_text(f'database = "{db.as_posix()}"\n' + body)
    capsys.readouterr()
    rc = cli.main(["protect", str(tmp_path / "req.toml")])
    return rc, capsys.readouterr().err


FREQ_TABLE = ('[[tables]]\nname = "acc"\nsource = "acc"\ndims = ["mun", "inj"]\nmethod = "suppression"\n'
              'min_frequency = 4\nfreq = "freq"\n')


def test_protect_request_with_suppression(tmp_path, capsys):
    rc, err = _request(tmp_path, FREQ_TABLE + "protect_zeros = true\n" + '[[tables]]\nname = "firms"\nsource = "firms"\n'
                       'dims = ["sector4", "geo"]\nmethod = "suppression"\nsums = ["value"]\n'
                       "[rules]\ndominance = [[1, 80]]\n", capsys)
    assert rc == 0, err
    out = pl.read_csv(tmp_path / "protab_output" / "acc.csv")
    assert "suppressed" not in out.columns  # no labels: they would tell which cells are sensitive
    ref = pl.read_csv(DATA / "secondary" / "sec_smallcounts_mun_accidents_maxN3.csv")
    j = ref.join(out, on=["mun", "inj"], suffix="_out")
    assert (j["suppressed"] == j["n"].is_null()).all()
    firms = pl.read_csv(tmp_path / "protab_output" / "firms.csv")
    assert firms["value"].null_count() > 0 and firms["value"].null_count() == firms["n"].null_count()


@pytest.mark.parametrize("body, message", [
    (FREQ_TABLE.replace("min_frequency = 4\n", ""), "needs min_frequency"),
    (FREQ_TABLE + "threshold = 3\n", "threshold"),
    (FREQ_TABLE.replace('method = "suppression"\n', "").replace('freq = "freq"\n', "")
     .replace("min_frequency = 4\n", ""), "[ptable]"),
    (FREQ_TABLE.replace('method = "suppression"\n', "").replace("min_frequency = 4\n", ""), "freq"),
    (FREQ_TABLE.replace('"suppression"', '"supression"'), "method"),
    (FREQ_TABLE + 'sums = ["freq"]\n', "[rules]"),
])
def test_protect_request_with_suppression_bad_input(tmp_path, capsys, body, message):
    rc, err = _request(tmp_path, body, capsys)
    assert rc == 2 and message in err, err
    assert not (tmp_path / "protab_output").exists()


def test_linked_tables_share_their_common_cells():
    """Two tables of the same records, region × sex and region × age: the region totals are
    common cells, suppressed in both or in neither; no primary cell of either table is
    derivable from the cells both publish together."""
    rng = np.random.default_rng(11)
    n = 400
    frame = pl.DataFrame({"region": rng.choice([f"r{i}" for i in range(6)], n, p=[.3, .3, .2, .1, .07, .03]),
                          "sex": rng.choice(["F", "M"], n), "age": rng.choice(["0", "1", "2", "3"], n)})
    a = pt.TableSpec(["region", "sex"])
    b = pt.TableSpec(["region", "age"])
    with pt.Session(":memory:") as s:
        s.register("t", frame)
        ta, tb = s.suppress("t", [a, b], min_frequency=4)
        X, _, published = s.model_matrix("t", pt.TableSpec(["region", "sex", "age"], formula="region*sex + region*age"))
        alone = s.suppress("t", a, min_frequency=4)
    # each linked table has the cells of the table alone: (6 regions + total) × (codes + total)
    assert ta.columns == alone.columns and ta.height == alone.height == 7 * 3 and tb.height == 7 * 5
    # the primary cells of a table do not depend on the tables it is linked with
    joined = alone.join(ta, on=["region", "sex"], suffix="_linked")
    assert ((joined["suppressed"] == "primary") == (joined["suppressed_linked"] == "primary")).all()
    common = ta.filter(pl.col("sex") == "Total").select("region", "suppressed").join(
        tb.filter(pl.col("age") == "Total").select("region", "suppressed"), on="region")
    assert ((common["suppressed"] == "no") == (common["suppressed_right"] == "no")).all()
    both = pl.concat([ta.select("region", pl.col("sex").alias("x"), "suppressed").with_columns(t=pl.lit("a")),
                      tb.select("region", pl.col("age").alias("x"), "suppressed").with_columns(t=pl.lit("b"))])
    assert (both["suppressed"] == "primary").sum() > 0 and (both["suppressed"] == "secondary").sum() > 0
    # the combined table's cells, in the order of X, with the linked decisions
    lab = published.select("region", "sex", "age").join(
        pl.concat([ta.with_columns(age=pl.lit("Total")).select("region", "sex", "age", "suppressed"),
                   tb.with_columns(sex=pl.lit("Total")).select("region", "sex", "age", "suppressed")]).unique(),
        on=["region", "sex", "age"], how="left", maintain_order="left")["suppressed"]
    assert lab.null_count() == 0
    suppressed = (lab != "no").to_numpy()
    assert not derivable(X, suppressed)[(lab == "primary").to_numpy()].any()


def test_linked_tables_take_the_audit():
    rng = np.random.default_rng(2)
    frame = pl.DataFrame({"region": rng.choice(["r1", "r2", "r3"], 90), "sex": rng.choice(["F", "M"], 90),
                          "age": rng.choice(["0", "1", "2"], 90)})
    with pt.Session(":memory:") as s:
        s.register("t", frame)
        ta, tb = s.suppress("t", [pt.TableSpec(["region", "sex"]), pt.TableSpec(["region", "age"])],
                            min_frequency=12, audit=True, protection_range=5, interval_protection=True)
        with pytest.raises(pt.SpecError, match="linked tables take cost"):
            s.suppress("t", [pt.TableSpec(["region", "sex"]), pt.TableSpec(["region", "age"])],
                       min_frequency=12, cost=np.ones(3))
    for t in (ta, tb):
        assert {"lo", "up", "protected"} <= set(t.columns) and t["protected"].all()
        assert (t["suppressed"] == "primary").any()


def test_linked_tables_must_agree():
    with pt.Session(":memory:") as s:
        s.register("t", pl.DataFrame({"g": ["x", "y"], "h": ["a", "b"], "v": [1.0, 2.0]}))
        with pytest.raises(pt.SpecError, match="agree on sums"):
            s.suppress("t", [pt.TableSpec(["g"], sums=["v"]), pt.TableSpec(["h"])],
                       rules=SensitivityRules(p_percent=10))
        with pytest.raises(pt.SpecError, match="different hierarchies"):
            s.suppress("t", [pt.TableSpec({"g": ["x", "y"]}), pt.TableSpec({"g": ["x", "y", "z"]})], min_frequency=2)


def test_audit_reproduces_gauss_suppression_intervals():
    """p% = 30 on magnitude1 (geo × sector2/sector4): the same pattern and the attacker's
    intervals of GaussSuppression's lpSolve run, to 1e-6; every primary cell protected."""
    ref = pl.read_csv(DATA / "secondary" / "sec_intervals_pp30_lpSolve.csv")
    with pt.Session(":memory:") as s:
        s.register("m", pl.read_csv(DATA / "inputs" / "magnitude1.csv"))
        spec = pt.TableSpec({"geo": None, "sector4": s.hierarchy_from_columns("m", ["sector2", "sector4"])},
                            sums=["value"])
        out = s.suppress("m", spec, rules=SensitivityRules(p_percent=30), audit=True)
    _compare(ref, out, ["geo", "sector4"])
    j = ref.filter(pl.col("lo").is_not_null()).join(out, on=["geo", "sector4"], suffix="_protab")
    assert j.height == 14
    assert np.allclose(j["lo"], j["lo_protab"], atol=1e-6) and np.allclose(j["up"], j["up_protab"], atol=1e-6)
    assert out["protected"].all()


def test_interval_protection_adds_suppressions_until_protected():
    rng = np.random.default_rng(3)
    n = 120
    frame = pl.DataFrame({"a": rng.choice(["x", "y", "z"], n), "b": rng.choice(["p", "q", "r", "s"], n)})
    with pt.Session(":memory:") as s:
        s.register("t", frame)
        spec = pt.TableSpec(["a", "b"])
        plain = s.suppress("t", spec, min_frequency=9, audit=True, protection_range=25)
        fixed = s.suppress("t", spec, min_frequency=9, protection_range=25, interval_protection=True)
    assert not plain["protected"].all(), "the test needs a pattern that the range requirement breaks"
    assert fixed["protected"].all()
    assert (fixed["suppressed"] != "no").sum() > (plain["suppressed"] != "no").sum()
    assert ((plain["suppressed"] == "primary") == (fixed["suppressed"] == "primary")).all()


def test_cost_orders_the_candidates():
    acc = pl.read_csv(DATA / "inputs" / "mun_accidents.csv")
    with pt.Session(":memory:") as s:
        s.register("a", acc)
        spec = pt.TableSpec(["mun", "inj"], freq="freq")
        base = s.suppress("a", spec, min_frequency=4)
        assert base.equals(s.suppress("a", spec, min_frequency=4, cost="frequency"))
        # make the former secondary cells the dearest to suppress: they are kept published
        # where another pattern protects the primary cells, and the new pattern is still safe
        was_secondary = (base["suppressed"] == "secondary").to_numpy()
        cheap = np.ones(base.height)
        cheap[was_secondary] = 1000.0
        moved = s.suppress("a", spec, min_frequency=4, cost=cheap)
        assert (moved["suppressed"].to_numpy()[was_secondary] == "no").any()
        X, _, _ = s.model_matrix("a", spec)
        label = moved["suppressed"].to_numpy()
        assert not derivable(X, label != "no")[label == "primary"].any()
        for bad, message in ((np.full(base.height, np.nan), "finite"), (-cheap, "0 or more"), (cheap[:3], "one number"),
                             ("cheap", "cost must be"), ("value", "needs sums")):
            with pytest.raises(pt.SpecError, match=message):
                s.suppress("a", spec, min_frequency=4, cost=bad)


def test_audit_with_negative_values_has_no_lower_bound():
    """A variable with negative values: the attacker has no bound at 0, so the intervals
    hold the true values (they were cut at 0 before)."""
    df = pl.DataFrame({"a": ["a0", "a0", "a0", "a1", "a1", "a1", "a1", "a2", "a2", "a2"],
                       "b": ["b0", "b1", "b1", "b0", "b0", "b1", "b1", "b0", "b0", "b1"],
                       "v": [500.0, 40, 50, -60, 10, 35, 45, 60, 70, 300]})
    with pt.Session(":memory:") as s:
        s.register("t", df)
        spec = pt.TableSpec(["a", "b"], sums=["v"])
        truth = s.tabulate("t", spec)
        out = s.suppress("t", spec, rules=SensitivityRules(min_frequency=2), audit=True)
    j = out.join(truth.select("a", "b", pl.col("v").alias("true")), on=["a", "b"])
    hidden = j.filter(pl.col("suppressed") != "no")
    assert hidden.height > 0
    assert ((hidden["lo"] <= hidden["true"] + 1e-9) & (hidden["true"] <= hidden["up"] + 1e-9)).all()


def test_suppress_with_zero_rule_protects_empty_cells():
    frame = pl.DataFrame({"a": ["x", "x", "y", "y", "z"], "b": ["p", "q", "p", "q", "p"],
                          "v": [5.0, 6.0, 7.0, 8.0, 9.0]})
    with pt.Session(":memory:") as s:
        s.register("t", frame)
        out = s.suppress("t", pt.TableSpec(["a", "b"], sums=["v"]), rules=SensitivityRules(zero=True))
    assert out.filter((pl.col("a") == "z") & (pl.col("b") == "q"))["suppressed"].item() == "primary"


def test_suppress_refuses_unclear_options():
    acc = pl.read_csv(DATA / "inputs" / "mun_accidents.csv")
    with pt.Session(":memory:") as s:
        s.register("a", acc)
        spec = pt.TableSpec(["mun", "inj"], freq="freq")
        for kwargs, message in (({"cost": ["a"] * 35}, "cost must be"), ({"audit": "yes"}, "audit must be"),
                                ({"interval_protection": 1}, "interval_protection must be"),
                                ({"protection_range": 5}, "requirement of the audit")):
            with pytest.raises(pt.SpecError, match=message):
                s.suppress("a", spec, min_frequency=4, **kwargs)
        s.register("m", pl.read_csv(DATA / "inputs" / "magnitude1.csv"))
        with pytest.raises(NotImplementedError, match="holdings"):
            s.suppress("m", pt.TableSpec(["sector4", "geo"], sums=["value"]),
                       rules=SensitivityRules(p_percent=10, holding="company"), audit=True)
        with pytest.raises(pt.SpecError, match="no weight"):
            s.suppress("m", pt.TableSpec(["sector4", "geo"], sums=["value"]),
                       rules=SensitivityRules(p_percent=10, weights="default"))


def test_protect_request_links_the_suppressed_tables_of_a_source(tmp_path, capsys):
    """Three tables of one source (a×b, a×c, b×c): suppressed together, so a cell common to
    two files is empty in both or in neither, and no primary cell follows from the files
    together (the reviewer's reproducer disclosed a1/Total = 2 when each was suppressed alone)."""
    from protab import cli

    rng = np.random.default_rng(69)
    frame = pl.DataFrame({"a": rng.choice([f"a{i}" for i in range(6)], 36), "b": rng.choice([f"b{i}" for i in range(4)], 36),
                          "c": rng.choice(["x", "y", "z"], 36)})
    db = tmp_path / "s.duckdb"
    with pt.Session(str(db)) as s:
        s.register("t", frame)
    body = "".join(f'[[tables]]\nname = "{n}"\nsource = "t"\ndims = {d}\nmethod = "suppression"\nmin_frequency = 4\n'
                   for n, d in (("ab", '["a", "b"]'), ("ac", '["a", "c"]'), ("bc", '["b", "c"]')))
    (tmp_path / "req.toml").write_text(f'database = "{db.as_posix()}"\n' + body)
    capsys.readouterr()
    assert cli.main(["protect", str(tmp_path / "req.toml")]) == 0, capsys.readouterr().err
    files = {n: pl.read_csv(tmp_path / "protab_output" / f"{n}.csv", schema_overrides={"n": pl.Int64})
             for n in ("ab", "ac", "bc")}
    a_ab = files["ab"].filter(pl.col("b") == "Total").select("a", "n")
    a_ac = files["ac"].filter(pl.col("c") == "Total").select("a", "n")
    j = a_ab.join(a_ac, on="a")
    assert (j["n"].is_null() == j["n_right"].is_null()).all()
    # the same cells as Session.suppress of the linked tables
    with pt.Session(str(db)) as s:
        linked = s.suppress("t", [pt.TableSpec(["a", "b"]), pt.TableSpec(["a", "c"]), pt.TableSpec(["b", "c"])],
                            min_frequency=4)
        X, _, published = s.model_matrix("t", pt.TableSpec(["a", "b", "c"], formula="a*b + a*c + b*c"))
    assert (files["ab"]["n"].is_null().to_numpy() == (linked[0]["suppressed"] != "no").to_numpy()).all()
    lab = published.select("a", "b", "c").join(
        pl.concat([linked[0].with_columns(c=pl.lit("Total")).select("a", "b", "c", "suppressed"),
                   linked[1].with_columns(b=pl.lit("Total")).select("a", "b", "c", "suppressed"),
                   linked[2].with_columns(a=pl.lit("Total")).select("a", "b", "c", "suppressed")]).unique(),
        on=["a", "b", "c"], how="left", maintain_order="left")["suppressed"]
    assert not derivable(X, (lab != "no").to_numpy())[(lab == "primary").to_numpy()].any()


def test_protect_request_refuses_mixed_methods_on_one_source(tmp_path, capsys):
    rc, err = _request(tmp_path, FREQ_TABLE + "[ptable]\nmaximum_entropy = { D = 3, V = 1 }\n"
                       '[[tables]]\nname = "acc2"\nsource = "acc"\ndims = ["mun"]\n', capsys)
    assert rc == 2 and "same method" in err
    rc, err = _request(tmp_path, FREQ_TABLE + FREQ_TABLE.replace('name = "acc"', 'name = "acc2"')
                       .replace("min_frequency = 4", "min_frequency = 3"), capsys)
    assert rc == 2 and "agree on min_frequency" in err


def test_fill_suppressed_gives_decimals_for_a_suppressed_table():
    acc = pl.read_csv(DATA / "inputs" / "mun_accidents.csv")
    with pt.Session(":memory:") as s:
        s.register("a", acc)
        spec = pt.TableSpec(["mun", "inj"], freq="freq")
        out = s.suppress("a", spec, min_frequency=4)
    filled = pt.postprocess.fill_suppressed(out, spec)
    hidden = out["n"].is_null().to_numpy()
    assert hidden.any() and filled["filled"].null_count() == 0
    j = out.select("mun", "inj", "n").join(filled.select("mun", "inj", "filled"), on=["mun", "inj"])
    kept = j.filter(pl.col("n").is_not_null())
    assert np.allclose(kept["n"], kept["filled"])  # published cells keep their values


def test_a_table_of_one_inner_cell_cannot_protect_its_primary_cell():
    with pt.Session(":memory:") as s:
        s.register("t", pl.DataFrame({"g": ["x", "x"]}))
        out = s.suppress("t", pt.TableSpec(["g"]), min_frequency=4)
    # x = Total, both with 2 records: both primary and suppressed — nothing is published
    assert out["suppressed"].to_list() == ["primary", "primary"]
    assert out["n"].null_count() == 2
