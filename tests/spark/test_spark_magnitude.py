"""Magnitude tables on the Spark engine against the DuckDB engine, cell for cell.

Table-driven, as tests/spark/test_spark_engine.py: each case (a TableSpec with sums, a method, its
parameters) runs on a DuckDB Session and on ``Session.spark(...)`` over the same records and
record keys, and the polars frames must be equal — values and types, so sums, top-k lists,
rule verdicts and perturbed sums are the same numbers on both engines. The cases cover every
statement kind of a magnitude request: the scan's sums, contributor counts and top-k lists
(weighted structs and unweighted largest/smallest lists), their merge through hierarchies
(trees level by level, uneven trees through their bridges, sums through the bridges of
non-tree hierarchies with coefficients), holdings, the rules' macros, the numeric p-table lookup, key rotation for
binary and decimal keys, the flexible and simple scaling, the small-cells table, μ_c, the
even/odd tables and ``null_sums``. The DuckDB results are checked against R cellKey, R
GaussSuppression and brute force elsewhere (tests/test_magnitude_*.py).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from magnitude_engine_cases import ALL, COUNTS, MAGNITUDES, RULES, magnitude_records
from polars.testing import assert_frame_equal
from spark_fixtures import age_hierarchy, engine_pair, engines_under_test, geo_hierarchy, only_on

import protab as pt
from protab.magnitude import SensitivityRules

N = 1500
SEED = "spark-magnitude-tests"


def _records() -> pl.DataFrame:
    rng = np.random.default_rng(12)
    base = magnitude_records(N, 11, firms=300)  # holdings: enterprise groups of about 5 records
    return base.with_columns(
        geo=pl.Series(rng.choice(["Spain", "Iceland", "Portugal"], N)),
        en=pl.when(pl.Series(rng.random(N) < 0.05)).then(None).otherwise(pl.col("e")),  # NULLs
    )


RECORDS = _records()
MUNI = pt.Hierarchy.from_code_lengths(RECORDS["muni"].unique().to_list(), [2, 2])
GEO = geo_hierarchy()  # not a tree: EU = Europe − nonEU
AGE = age_hierarchy()

SPECS = {
    "flat": pt.TableSpec({"muni": None, "sex": None}, sums=["v", "e"]),
    "tree": pt.TableSpec({"muni": MUNI, "sex": None}, sums=["v"]),
    "weighted": pt.TableSpec({"muni": MUNI, "sex": None}, sums=["v", "e"], weight="w"),
    "weighted_nonneg": pt.TableSpec({"muni": MUNI, "age": None}, sums=["e"], weight="w"),
    "nontree": pt.TableSpec({"geo": GEO, "sex": None}, sums=["v", "e"]),
    "uneven": pt.TableSpec({"age": AGE, "muni": MUNI, "sex": None}, sums=["e"], formula="age*sex + muni"),
    "nonneg": pt.TableSpec({"muni": MUNI, "age": None}, sums=["e"]),
    "nulls_zero": pt.TableSpec({"muni": None}, sums=["en"], null_sums="zero"),
    "nulls_omit": pt.TableSpec({"muni": MUNI}, sums=["en"], null_sums="omit"),
    # inner cells where one variable has no value at all: its lists are NULL, the other's not
    "two_omit": pt.TableSpec({"muni": MUNI, "sex": None}, sums=["v", "fn"], null_sums="omit"),
    "two_omit_w": pt.TableSpec({"muni": MUNI, "sex": None}, sums=["fn", "e"], null_sums="omit", weight="w"),
    "empty": pt.TableSpec({"muni": MUNI, "age": None}, sums=["e"], where=[("sex", "in", ["f"]), ("age", "in", [1])]),
}


# (spec, record keys, method, parameters)
CASES = [
    ("flat", "sha", "tabulate", 6),
    ("weighted", "sha", "tabulate", 3),
    ("nontree", "sha", "tabulate", None),  # sums through coefficients ±1 (no top-k: not a tree)
    ("uneven", "sha", "tabulate", 2),
    ("nonneg", "sha", "tabulate", 6),
    ("nulls_omit", "sha", "tabulate", 3),
    ("two_omit", "sha", "tabulate", 3),
    ("two_omit_w", "sha", "tabulate", 3),
    ("two_omit", "sha", "sensitivity", "gauss"),
    ("two_omit_w", "ons", "cell_key", ("flex", "gauss")),
    ("flat", "sha", "sensitivity", "gauss"),
    ("nonneg", "sha", "sensitivity", "argus"),
    ("weighted_nonneg", "sha", "sensitivity", "argus_weights"),
    ("uneven", "sha", "sensitivity", "pq"),
    ("tree", "sha", "sensitivity", "holding"),
    ("flat", "sha", "cell_key", "flex"),
    ("tree", "decimal", "cell_key", "flex"),
    ("tree", "ons", "cell_key", "small"),
    ("uneven", "decimal", "cell_key", "simple"),
    ("weighted", "sha", "cell_key", "mean"),
    ("weighted", "decimal", "cell_key", "range"),
    ("uneven", "ons", "cell_key", "sum"),
    ("tree", "decimal", "cell_key", "sum"),
    ("nonneg", "sha", "cell_key", "evenodd"),
    ("nulls_zero", "sha", "cell_key", "flex"),
    ("empty", "sha", "cell_key", "flex"),
    ("tree", "sha", "cell_key", ("mu", "gauss")),
    ("weighted_nonneg", "sha", "cell_key", ("flex", "argus_weights")),
    ("tree", "ons", "cell_key", ("small", "holding")),
]

TABLES = {"sha": "persons", "ons": "persons_ons", "decimal": "persons_dec"}


def _add_keys(s: pt.Session) -> None:
    s.register("persons", RECORDS, replace=True)
    s.add_record_keys("persons", id_column="pid", seed=SEED, bits=32, name="rk")
    for table in ("persons_ons", "persons_dec"):
        s.register(table, "persons")
    s.add_record_keys("persons_ons", record_key_column="k8", bits=8, name="rk8")
    s.add_record_keys("persons_dec", record_key_column="kdec", decimals=7, name="rkd")


@pytest.fixture(scope="module", params=engines_under_test())
def engines(request, tmp_path_factory):
    yield from engine_pair(request.param, tmp_path_factory, _add_keys, cores=2)


def _run(s: pt.Session, case: tuple) -> pl.DataFrame:
    spec_name, keys, method, arg = case
    spec, table = SPECS[spec_name], TABLES[keys]
    if method == "tabulate":
        return s.tabulate(table, spec, top_k=arg)
    if method == "sensitivity":
        return s.sensitivity(table, spec, RULES[arg])
    mag, rules = (arg, None) if isinstance(arg, str) else arg
    return s.cell_key(table, spec, COUNTS, magnitude=MAGNITUDES[mag], rules=RULES[rules] if rules else None,
                      original=True)


def _id(case: tuple) -> str:
    arg = case[3] if not isinstance(case[3], tuple) else "+".join(case[3])
    return "-".join([*case[:3], str(arg)])


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_same_magnitude_cells_on_both_engines(engines, case):
    duck, sp = engines
    expected = _run(duck, case)
    got = _run(sp, case)
    assert expected.height > 0
    assert_frame_equal(got, expected)
    assert _signs(got) == _signs(expected)  # -0.0 and 0.0 apart (assert_frame_equal takes them as equal)


def _signs(frame: pl.DataFrame) -> dict[str, list[bool]]:
    """The sign bit of every number of the float and float-list columns."""
    out = {}
    for name, dtype in frame.schema.items():
        col = frame[name]
        if dtype == pl.List(pl.Float64):
            col = col.explode()
        elif dtype != pl.Float64:
            continue
        out[name] = np.signbit(col.fill_null(1.0).to_numpy()).tolist()
    return out


# -- cell suppression: the model matrix, rules and inner cells from Spark, the elimination in Python
SUPPRESSIONS = {
    "counts": ("persons", pt.TableSpec({"muni": MUNI, "age": None, "sex": None}), {"min_frequency": 34}),
    "counts_linked": ("persons", [pt.TableSpec({"muni": MUNI, "sex": None, "age": None}),
                                  pt.TableSpec({"muni": MUNI, "geo": None})], {"min_frequency": 34}),
    "magnitude": ("persons", SPECS["nonneg"], {"rules": SensitivityRules(dominance=[(1, 8)], convention="argus")}),
    "magnitude_audit": ("persons", SPECS["weighted_nonneg"],
                        {"rules": SensitivityRules(dominance=[(1, 8)], p_percent=60), "audit": True}),
}


@pytest.mark.parametrize("name", list(SUPPRESSIONS))
def test_same_suppression_on_both_engines(engines, name):
    table, spec, kw = SUPPRESSIONS[name]
    duck, sp = engines
    expected = duck.suppress(table, spec, **kw)
    got = sp.suppress(table, spec, **kw)
    frames = list(zip(got, expected, strict=True)) if isinstance(expected, list) else [(got, expected)]
    assert any((b["suppressed"] == "secondary").any() for _, b in frames)
    for a, b in frames:
        assert_frame_equal(a, b)


# -- the same errors, with the same messages ----------------------------------------------------
def _with(s: pt.Session, **columns: pl.Expr) -> str:
    s.register("odd", RECORDS.with_columns(**columns), replace=True)
    s.add_record_keys("odd", id_column="pid", seed=SEED)
    return "odd"


def _nulls(s: pt.Session) -> None:
    s.tabulate(_with(s), pt.TableSpec({"muni": None}, sums=["en"]), top_k=2)


def _nan(s: pt.Session) -> None:
    t = _with(s, v=pl.when(pl.col("pid") < 40).then(float("nan")).otherwise(pl.col("v")))
    s.tabulate(t, pt.TableSpec({"muni": None}, sums=["v"]), top_k=2)


def _inf(s: pt.Session) -> None:
    t = _with(s, v=pl.when(pl.col("pid") == 9).then(float("-inf")).otherwise(pl.col("v")))
    s.cell_key(t, pt.TableSpec({"muni": None}, sums=["v"]), COUNTS, magnitude=MAGNITUDES["flex"])


def _huge(s: pt.Session) -> None:
    t = _with(s, v=pl.when(pl.col("pid") < 30).then(9e29).otherwise(pl.col("v")))
    s.tabulate(t, pt.TableSpec({"muni": None}, sums=["v"]), top_k=2)


def _holding_nulls(s: pt.Session) -> None:
    t = _with(s, firm=pl.when(pl.col("pid") < 30).then(None).otherwise(pl.col("firm")))
    s.sensitivity(t, SPECS["tree"], RULES["holding"])


ERRORS = {
    "NULL magnitudes": _nulls,
    "NaN magnitudes": _nan,
    "infinite magnitudes": _inf,
    "sums too large": _huge,
    "negative values under tau-ARGUS rules": lambda s: s.sensitivity("persons", SPECS["tree"], RULES["argus"]),
    "holding with NULLs": _holding_nulls,
    "top_k out of range": lambda s: s.tabulate("persons", SPECS["flat"], top_k=7),
    "non-tree hierarchy with top-k": lambda s: s.tabulate("persons", SPECS["nontree"], top_k=2),
    "unknown sums column": lambda s: s.tabulate("persons", pt.TableSpec({"sex": None}, sums=["turnover"])),
    "text sums column": lambda s: s.tabulate("persons", pt.TableSpec({"sex": None}, sums=["muni"])),
    "sums without magnitude": lambda s: s.cell_key("persons", SPECS["flat"], COUNTS),
    "numeric p-table for counts": lambda s: s.cell_key("persons", SPECS["flat"], ALL),
    "key sums of an unknown column": lambda s: s.key_sums("persons", ["muni", "region"]),
    "key sums with weights": lambda s: s.tabulate(s.key_sums("persons", ["muni"], name="ks_muni"),
                                                  pt.TableSpec({"muni": None}, weight="w")),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_same_magnitude_errors_on_both_engines(engines, name):
    messages = []
    for s in engines:
        with pytest.raises(pt.ProtabError) as info:
            ERRORS[name](s)
        messages.append((type(info.value).__name__, str(info.value)))
    assert messages[0] == messages[1]


def test_an_older_spark_is_named_not_wrong(engines, monkeypatch):
    """Top-k lists need max_by(x, x, k) (Spark 4.2): an older Spark is refused by name."""
    _, sp = engines
    only_on(sp, "spark")
    monkeypatch.setattr(type(sp.engine.spark), "version", property(lambda self: "4.1.1"))
    with pytest.raises(NotImplementedError, match=r"Spark 4\.2 or later.*Spark 4\.1\.1"):
        sp.tabulate("persons", SPECS["flat"], top_k=2)


# the rules' SQL functions, called directly (duckdb CLI and Spark SQL users): DuckDB form, Spark form
MACRO_CALLS = [
    ("protab_largest(NULL, 2)", "protab_largest(NULL, 2)"),
    ("protab_largest([1.0, NULL, 2.0], 3)", "protab_largest(array(1D, NULL, 2D), 3)"),
    ("protab_largest([5.0, 3.0, 1.0], 2)", "protab_largest(array(5D, 3D, 1D), 2)"),
    ("protab_dominance_ratio(NULL, 10, 1)", "protab_dominance_ratio(NULL, 10, 1)"),
    ("protab_dominance_ratio([6.0, 3.0], 10, 1)", "protab_dominance_ratio(array(6D, 3D), 10, 1)"),
    ("protab_dominance_ratio([6.0, 3.0], 0, 2)", "protab_dominance_ratio(array(6D, 3D), 0, 2)"),
    ("protab_weighted_largest(NULL, NULL, 2)", "protab_weighted_largest(NULL, NULL, 2)"),
    ("protab_weighted_largest([5.0, 3.0, 2.0], [0.5, 2.0, 1.0], 2)",
     "protab_weighted_largest(array(5D, 3D, 2D), array(0.5D, 2D, 1D), 2)"),
    ("protab_weighted_largest([5.0, 3.0], [1.0], 2)", "protab_weighted_largest(array(5D, 3D), array(1D), 2)"),
    ("protab_frequency_rule(2, 3)", "protab_frequency_rule(2, 3)"),
    ("protab_frequency_rule(0, 3)", "protab_frequency_rule(0, 3)"),
]


@pytest.mark.parametrize("duck_sql,spark_sql", MACRO_CALLS, ids=[c[0] for c in MACRO_CALLS])
def test_rule_functions_agree_with_the_duckdb_macros(engines, duck_sql, spark_sql):
    duck, sp = engines
    call = {"duckdb": duck_sql, "spark": spark_sql}.get(sp.engine.dialect)
    if call is None:
        pytest.skip(f"no call written in the {sp.engine.dialect} dialect")
    expected = duck.sql(f"SELECT {duck_sql} AS v")["v"][0]
    got = sp.sql(f"SELECT {call} AS v")["v"][0]
    assert got == expected and expected is not None


def test_a_holding_column_spark_would_write_otherwise_is_refused(engines):
    _, sp = engines
    only_on(sp, "spark")
    with pytest.raises(NotImplementedError, match="holding column"):
        sp.sensitivity("persons", SPECS["tree"], SensitivityRules(min_frequency=3, holding="w"))


def test_decimal_key_rotation_keeps_zeros_on_spark(engines):
    """The hand-checked cell of tests/magnitude/test_magnitude_key_rotation.py (its key 0.0871234
    rotates to 0.7123408 and 0.1234087, zeros kept) on Spark too."""
    from cases import rotation_cell

    _, sp = engines
    assert rotation_cell(sp)["v_pert"].item() == pytest.approx(173.5, abs=1e-9)


@pytest.mark.parametrize("spec,rules", [("flat", "gauss"), ("weighted_nonneg", "argus_weights"), ("tree", "holding")])
def test_sensitivity_diagnostics_on_both_engines(engines, spec, rules):
    duck, sp = engines
    expected = duck.sensitivity("persons", SPECS[spec], RULES[rules], diagnostics=True)
    assert [c for c in expected.columns if "_dominance_" in c]
    assert_frame_equal(sp.sensitivity("persons", SPECS[spec], RULES[rules], diagnostics=True), expected)
