"""The PostgreSQL engine answers magnitude tables with top-k lists as DuckDB does (issue 39,
item 4): ``tabulate(top_k=)``, the sensitivity rules (dominance, p%, (p, q), tau-ARGUS's
weights), the cell key method for magnitudes (weighted and unweighted, flexible and simple
scaling, small cells, even/odd tables, μ_c, binary and decimal keys), key sums with sums and
cell suppression by the rules, holdings (enterprise groups) under the rules and the cell key
method — the same frames, compared exactly (signs of zeros too), on a database whose default
collation is ICU's en-US; the same errors for values no table holds."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from magnitude_engine_cases import COUNTS, MAGNITUDES, RULES, magnitude_records
from polars.testing import assert_frame_equal
from postgres_fixtures import duckdb_and_postgres
from spark_fixtures import age_hierarchy

import protab as pt
from protab.errors import SpecError
from protab.magnitude import SensitivityRules

N = 500
SEED = "postgres-magnitudes"


RECORDS = magnitude_records(N, 3911, firms=100).with_columns(pl.col("age").cast(pl.String))  # codes as text
MUNI = pt.Hierarchy.from_code_lengths(RECORDS["muni"].unique().to_list(), [2, 2])

SPECS = {
    "flat": pt.TableSpec({"muni": None, "sex": None}, sums=["v", "e"]),
    "tree": pt.TableSpec({"muni": MUNI, "sex": None}, sums=["v"]),
    "weighted": pt.TableSpec({"muni": MUNI, "sex": None}, sums=["v", "e"], weight="w"),
    "weighted_nonneg": pt.TableSpec({"muni": MUNI, "age": None}, sums=["e"], weight="w"),
    "uneven": pt.TableSpec({"age": age_hierarchy(), "muni": MUNI, "sex": None}, sums=["e"], formula="age*sex + muni"),
    "nonneg": pt.TableSpec({"muni": MUNI, "age": None}, sums=["e"]),
    # cells where one variable has no value at all: its lists are NULL, the other's not
    "two_omit": pt.TableSpec({"muni": MUNI, "sex": None}, sums=["v", "fn"], null_sums="omit"),
    "two_omit_w": pt.TableSpec({"muni": MUNI, "sex": None}, sums=["fn", "e"], null_sums="omit", weight="w"),
}
TABLES = {"sha": "persons", "ons": "persons_ons", "decimal": "persons_dec"}

# (spec, record keys, method, parameters)
CASES = [
    ("flat", "sha", "tabulate", 2),
    ("weighted", "sha", "tabulate", 3),
    ("uneven", "sha", "tabulate", 2),
    ("two_omit", "sha", "tabulate", 3),
    ("two_omit_w", "sha", "tabulate", 3),
    ("flat", "sha", "sensitivity", "gauss"),
    ("nonneg", "sha", "sensitivity", "argus"),
    ("weighted_nonneg", "sha", "sensitivity", "argus_weights"),
    ("uneven", "sha", "sensitivity", "pq"),
    ("two_omit", "sha", "sensitivity", "gauss"),
    ("tree", "sha", "sensitivity", "holding"),
    ("nonneg", "sha", "sensitivity", "holding"),
    ("tree", "ons", "cell_key", ("small", "holding")),
    ("flat", "sha", "cell_key", "flex"),
    ("tree", "decimal", "cell_key", "flex"),
    ("tree", "ons", "cell_key", "small"),
    ("uneven", "decimal", "cell_key", "simple"),
    ("weighted", "sha", "cell_key", "mean"),
    ("weighted", "decimal", "cell_key", "range"),
    ("tree", "decimal", "cell_key", "sum"),
    ("nonneg", "sha", "cell_key", "evenodd"),
    ("tree", "sha", "cell_key", ("mu", "gauss")),
    ("two_omit_w", "ons", "cell_key", ("flex", "gauss")),
    ("weighted_nonneg", "sha", "cell_key", ("flex", "argus_weights")),
]


def _prepare(s: pt.Session) -> None:
    s.register("persons", RECORDS)
    s.add_record_keys("persons", id_column="pid", seed=SEED, bits=32, name="rk")
    for table in ("persons_ons", "persons_dec"):
        s.register(table, "persons")
    s.add_record_keys("persons_ons", record_key_column="k8", bits=8, name="rk8")
    s.add_record_keys("persons_dec", record_key_column="kdec", decimals=7, name="rkd")


@pytest.fixture(scope="module")
def engines(pg_dsn):
    yield from duckdb_and_postgres(pg_dsn, _prepare)


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


def _signs(frame: pl.DataFrame) -> dict[str, list[bool]]:
    """The sign bit of every number of the float and float-list columns (assert_frame_equal
    takes -0.0 and 0.0 as equal)."""
    out = {}
    for name, dtype in frame.schema.items():
        col = frame[name]
        if dtype == pl.List(pl.Float64):
            col = col.explode()
        elif dtype != pl.Float64:
            continue
        out[name] = np.signbit(col.fill_null(1.0).to_numpy()).tolist()
    return out


def _same(got: pl.DataFrame, expected: pl.DataFrame) -> None:
    assert expected.height > 0
    assert_frame_equal(got, expected, check_exact=True)
    assert _signs(got) == _signs(expected)


def _id(case: tuple) -> str:
    arg = case[3] if not isinstance(case[3], tuple) else "+".join(case[3])
    return "-".join([*case[:3], str(arg)])


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_magnitude_tables_with_top_k_lists_are_duckdbs(engines, case):
    duck, pg = engines
    _same(_run(pg, case), _run(duck, case))


def test_top_k_lists_come_back_as_duckdbs_lists(engines):
    """tabulate(top_k=) publishes the lists themselves: largest first, NULL for no value."""
    duck, pg = engines
    got = pg.tabulate("persons", SPECS["two_omit"], top_k=2)
    assert any(dtype == pl.List(pl.Float64) for dtype in got.schema.values())
    _same(got, duck.tabulate("persons", SPECS["two_omit"], top_k=2))


@pytest.mark.parametrize("spec,rules", [("flat", "gauss"), ("weighted_nonneg", "argus_weights")])
def test_sensitivity_diagnostics_are_duckdbs(engines, spec, rules):
    """The shares of the largest contributions, to the last bit (the rules' sums in list order)."""
    duck, pg = engines
    expected = duck.sensitivity("persons", SPECS[spec], RULES[rules], diagnostics=True)
    assert [c for c in expected.columns if "_dominance_" in c]
    _same(pg.sensitivity("persons", SPECS[spec], RULES[rules], diagnostics=True), expected)


def test_magnitudes_over_key_sums_with_sums_are_duckdbs(engines):
    """Key sums keep the top lists per row; the tables merge them (merged_list) as DuckDB does."""
    spec = pt.TableSpec({"muni": MUNI, "sex": None}, sums=["v", "fn"], null_sums="omit")
    frames = []
    for s in engines:
        ks = s.key_sums("persons", ["muni", "sex", "age"], sums=["v", "fn"], top_k=3, null_sums="omit",
                        name="ks_persons")
        frames.append((s.tabulate(ks, spec, top_k=3),
                       s.cell_key(ks, spec, COUNTS, magnitude=MAGNITUDES["flex"], original=True)))
    (duck_tab, duck_ckm), (pg_tab, pg_ckm) = frames
    _same(pg_tab, duck_tab)
    _same(pg_ckm, duck_ckm)


def test_a_float_holding_column_is_refused_up_front(engines):
    """A holding is grouped by its text, which PostgreSQL writes otherwise for floats."""
    _, pg = engines
    rules = SensitivityRules(min_frequency=3, dominance=[(1, 60)], holding="w")
    with pytest.raises(SpecError, match="holding column 'w' of type DOUBLE"):
        pg.sensitivity("persons", SPECS["tree"], rules)


@pytest.mark.parametrize("spec,rules", [("nonneg", SensitivityRules(dominance=[(1, 8)], convention="argus")),
                                        ("weighted_nonneg", SensitivityRules(dominance=[(1, 8)], p_percent=60))])
def test_magnitude_suppression_is_duckdbs(engines, spec, rules):
    """Primary cells by the rules on the engine's top-k lists, secondary ones by elimination in Python."""
    duck, pg = engines
    expected = duck.suppress("persons", SPECS[spec], rules=rules)
    assert (expected["suppressed"] == "secondary").any()
    assert_frame_equal(pg.suppress("persons", SPECS[spec], rules=rules), expected, check_exact=True)


def _odd(s: pt.Session, **columns: pl.Expr) -> str:
    s.register("odd", RECORDS.with_columns(**columns), replace=True)
    s.add_record_keys("odd", id_column="pid", seed=SEED, replace=True)
    return "odd"


ERRORS = {
    "NULL magnitudes": lambda s: s.tabulate(_odd(s, v=pl.when(pl.col("pid") < 40).then(None).otherwise(pl.col("v"))),
                                            pt.TableSpec({"muni": None}, sums=["v"]), top_k=2),
    "NaN magnitudes": lambda s: s.tabulate(_odd(s, v=pl.when(pl.col("pid") < 40).then(float("nan"))
                                                .otherwise(pl.col("v"))), pt.TableSpec({"muni": None}, sums=["v"]), top_k=2),
    "infinite magnitudes": lambda s: s.cell_key(_odd(s, v=pl.when(pl.col("pid") == 9).then(float("-inf"))
                                                     .otherwise(pl.col("v"))), pt.TableSpec({"muni": None}, sums=["v"]),
                                                COUNTS, magnitude=MAGNITUDES["flex"]),
    "sums too large": lambda s: s.tabulate(_odd(s, v=pl.when(pl.col("pid") < 30).then(9e29).otherwise(pl.col("v"))),
                                           pt.TableSpec({"muni": None}, sums=["v"]), top_k=2),
    "negative values under tau-ARGUS rules": lambda s: s.sensitivity("persons", SPECS["tree"], RULES["argus"]),
    "top_k out of range": lambda s: s.tabulate("persons", SPECS["flat"], top_k=7),
    "holding with NULLs": lambda s: s.sensitivity(_odd(s, firm=pl.when(pl.col("pid") < 30).then(None)
                                                       .otherwise(pl.col("firm"))), SPECS["tree"], RULES["holding"]),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_magnitude_errors_are_duckdbs(engines, name):
    """The same protab error with the same message on both engines."""
    messages = []
    for s in engines:
        with pytest.raises(pt.ProtabError) as info:
            ERRORS[name](s)
        messages.append((type(info.value).__name__, str(info.value)))
    assert messages[0] == messages[1]
