"""The Spark engine against the DuckDB engine: every kind of count-table statement, cell for cell.

Table-driven, as sqlglot's dialect tests: each case (a TableSpec, a kind of record key, a
method) runs on a DuckDB Session and on ``Session.spark(...)`` over the same records, and
the polars frames must be equal (values and types). The DuckDB engine is the reference that
the rest of the suite checks against published examples; a few independent checks (counts
from polars, the key sum of a cell) guard the comparison itself. Also: the same errors with
the same messages, ``protab protect --engine spark`` writing byte-identical files, and clear
errors without pyspark or Java.
"""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from decimal import Decimal
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from spark_fixtures import age_hierarchy, engine_pair, engines_under_test, geo_hierarchy, only_on

import protab as pt
from protab.engines import SparkEngine, to_spark
from protab.errors import InputError, ProtabError, SpecError

N = 2000
SEED = "spark-engine-tests"


def _records() -> pl.DataFrame:
    rng = np.random.default_rng(14)
    muni = rng.choice(["0101", "0102", "0201", "0202", "0203"], N)
    return pl.DataFrame({
        "pid": np.arange(1, N + 1) * 7,
        "muni": muni,
        "sex": rng.choice(["f", "m"], N),
        "age": rng.integers(0, 4, N).astype(np.int32),  # integer codes: ordered numerically
        "geo": rng.choice(["Spain", "Iceland", "Portugal"], N),
        "w": np.round(rng.uniform(0.5, 4.0, N), 3),
        "k8": rng.integers(0, 256, N),  # ONS-style keys, bits = 8
        "kdec": np.round(rng.integers(0, 100_000, N) / 100_000, 5),  # decimal keys, 5 digits
        # decimal keys of 12 digits, held exactly (as DECIMAL)
        "kd12": pl.Series([Decimal(int(k)).scaleb(-12) for k in rng.integers(0, 10**12, N)],
                          dtype=pl.Decimal(13, 12)),
    })


RECORDS = _records()
MUNI = pt.Hierarchy.from_code_lengths(RECORDS["muni"].unique().to_list(), [2, 2])
GEO = geo_hierarchy()  # not a tree: Europe = all three, nonEU = Iceland, EU = Europe − nonEU
AGE = age_hierarchy()  # leaves at different depths: rolled up through its bridge, not level by level
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    P = pt.PTable.maximum_entropy(D=3, V=2, js=1)
P_PERIODIC = pt.PTable.from_frame(P.frame, period=3)  # counts above imax served by rows imax-2..imax

SPECS = {
    "flat": pt.TableSpec({"muni": None, "sex": None}),
    "hierarchy": pt.TableSpec({"muni": MUNI, "sex": None, "age": None}),
    "formula": pt.TableSpec({"muni": MUNI, "sex": None, "age": None}, formula="muni*sex + age"),
    "weighted": pt.TableSpec({"muni": MUNI, "sex": None}, weight="w"),
    "nontree": pt.TableSpec({"geo": GEO, "sex": None}),
    "drop_empty": pt.TableSpec({"muni": MUNI, "age": None, "sex": None}, drop_empty=True),
    "where": pt.TableSpec({"muni": None, "age": None}, where=[("sex", "in", ["f"]), ("age", "not in", [0])]),
    "no_margins": pt.TableSpec({"muni": None, "sex": None}, margins=False),
    "uneven": pt.TableSpec({"age": AGE, "sex": None, "geo": GEO}, formula="age*sex + geo"),
}

# (spec, record keys, method, p-table): every kind of statement of a count table request
CASES = [
    ("flat", "sha", "tabulate", None),
    ("flat", "sha", "cell_key", P),
    ("flat", "ons", "cell_key", P),
    ("flat", "decimal", "cell_key", P),
    ("hierarchy", "sha", "cell_key", P_PERIODIC),
    ("hierarchy", "sha", "model_matrix", None),
    ("hierarchy", "decimal12", "cell_key", P),
    ("formula", "sha", "cell_key", P),
    ("formula", "ons", "perturb_inner", P),
    ("weighted", "sha", "cell_key", P),
    ("weighted", "decimal", "perturb_inner", P),
    ("nontree", "sha", "cell_key", P),
    ("nontree", "sha", "model_matrix", None),
    ("drop_empty", "sha", "tabulate", None),
    ("drop_empty", "ons", "cell_key", P_PERIODIC),
    ("where", "sha", "cell_key", P),
    ("where", "decimal", "inner_cells", None),
    ("no_margins", "sha", "cell_key", P),
    ("uneven", "sha", "cell_key", P),
    ("uneven", "ons", "model_matrix", None),
]


def _add_keys(s: pt.Session) -> None:
    s.register("persons", RECORDS, replace=True)
    s.add_record_keys("persons", id_column="pid", seed=SEED, bits=32, name="rk")
    for table in ("persons_ons", "persons_dec", "persons_dec12"):
        s.register(table, "persons")
    s.add_record_keys("persons_ons", record_key_column="k8", bits=8, name="rk8")
    s.add_record_keys("persons_dec", record_key_column="kdec", decimals=5, name="rkd")
    # keys of 12 digits: sums above 2^63 for many records, summed wide on both engines
    s.add_record_keys("persons_dec12", record_key_column="kd12", decimals=12, name="rkd")


TABLES = {"sha": "persons", "ons": "persons_ons", "decimal": "persons_dec", "decimal12": "persons_dec12"}


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from spark_fixtures import spark_fixture

    yield from spark_fixture(tmp_path_factory, "protab-spark-engine", cores=2)


@pytest.fixture(scope="module", params=engines_under_test())
def engines(request, tmp_path_factory):
    yield from engine_pair(request.param, tmp_path_factory, _add_keys, cores=2)


def _run(s: pt.Session, case: tuple) -> list[pl.DataFrame]:
    spec_name, keys, method, p = case
    spec, table = SPECS[spec_name], TABLES[keys]
    if method == "tabulate":
        return [s.tabulate(table, spec, cell_keys=True)]
    if method == "cell_key":
        return [s.cell_key(table, spec, p, original=True, threshold=2 if spec_name == "flat" else None)]
    if method == "perturb_inner":
        return [s.perturb_inner(table, spec, p, original=True)]
    if method == "inner_cells":
        return [s.inner_cells(table, spec, extend0=True)]
    X, inner, published = s.model_matrix(table, spec)
    coo = X.tocoo()
    pairs = pl.DataFrame({"row": coo.row, "col": coo.col, "x": coo.data}).sort("row", "col")
    return [inner, published, pairs]


@pytest.mark.parametrize("case", CASES, ids=["-".join(str(x) for x in c[:3]) for c in CASES])
def test_same_cells_on_both_engines(engines, case):
    duck, sp = engines
    expected = _run(duck, case)
    got = _run(sp, case)
    assert all(f.height > 0 for f in expected)
    for a, b in zip(got, expected, strict=True):
        assert_frame_equal(a, b)


def test_counts_agree_with_an_independent_group_by(engines):
    """The flat table's inner counts and cell keys from Spark equal a polars group-by of the
    records and their DuckDB keys (sum of keys modulo 2^32): the comparison is not of two
    wrong engines."""
    duck, sp = engines
    keyed = duck.sql("SELECT muni, sex, rk FROM persons")
    expected = keyed.group_by("muni", "sex").agg(pl.len().alias("n"), (pl.col("rk").cast(pl.Int64).sum() % 2**32)
                                                 .alias("cell_key"))
    got = sp.tabulate("persons", SPECS["flat"], cell_keys=True).filter(
        (pl.col("muni_level") == 1) & (pl.col("sex_level") == 1)).select("muni", "sex", "n", "cell_key")
    assert_frame_equal(got.sort("muni", "sex"), expected.sort("muni", "sex"), check_dtypes=False)


def test_record_keys_are_the_same(engines):
    duck, sp = engines
    a = duck.sql("SELECT pid, rk FROM persons ORDER BY pid")
    b = sp.sql("SELECT pid, rk FROM persons ORDER BY pid")
    assert a["rk"].to_list() == b["rk"].to_list()
    assert b["rk"].n_unique() > N * 0.99


# -- the same errors, with the same messages ----------------------------------------------------
def _bad_nulls(s: pt.Session) -> None:
    s.register("nulls", RECORDS.with_columns(pl.when(pl.col("pid") < 50).then(None).otherwise(pl.col("sex"))
                                             .alias("sex")), replace=True)
    s.add_record_keys("nulls", id_column="pid", seed=SEED)
    s.tabulate("nulls", SPECS["flat"])


def _bad_codes(s: pt.Session) -> None:
    h = pt.Hierarchy.from_code_lengths(["0101", "0102", "0201"], [2, 2])
    s.tabulate("persons", pt.TableSpec({"muni": h, "sex": None}))


def _bad_ids(s: pt.Session) -> None:
    s.register("dups", RECORDS.with_columns((pl.col("pid") // 14).alias("pid")), replace=True)
    s.add_record_keys("dups", id_column="pid", seed=SEED)


ERRORS = {
    "unknown dimension": lambda s: s.tabulate("persons", pt.TableSpec({"municipality": None})),
    "unknown weight": lambda s: s.cell_key("persons", pt.TableSpec({"sex": None}, weight="wt"), P),
    "null dimension": _bad_nulls,
    "codes missing from a hierarchy": _bad_codes,
    "duplicate ids": _bad_ids,
    "key column as a dimension": lambda s: s.tabulate("persons", pt.TableSpec({"rk": None})),
    "no record keys": lambda s: s.cell_key("nulls_nokeys", SPECS["flat"], P),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_same_errors_on_both_engines(engines, name):
    messages = []
    for s in engines:
        s.register("nulls_nokeys", RECORDS, replace=True)
        with pytest.raises(ProtabError) as info:
            ERRORS[name](s)
        messages.append((type(info.value), str(info.value)))
    assert messages[0] == messages[1]


def test_what_does_not_run_on_spark_is_refused_not_wrong(engines):
    _, sp = engines
    only_on(sp, "spark")
    with pytest.raises(NotImplementedError, match="'w' of type DOUBLE"):  # 1e7 codes differ as text
        sp.tabulate("persons", pt.TableSpec({"w": None}))


# -- key sums: counts and key sums per combination, summed once, then any count table of them
@pytest.mark.parametrize("table", ["persons", "persons_dec12"])
def test_key_sums_on_both_engines(engines, table):
    """A key-sum table gives the records' cells on both engines (12-digit keys: summed wide),
    also when summed again; new keys drop it."""
    duck, sp = engines
    expected = duck.cell_key(table, SPECS["hierarchy"], P)
    for s in engines:
        fine = s.key_sums(table, ["muni", "sex", "age"])
        coarse = s.key_sums(fine, ["muni", "age"])
        assert_frame_equal(s.cell_key(fine, SPECS["hierarchy"], P), expected)
        assert_frame_equal(s.cell_key(coarse, pt.TableSpec({"muni": MUNI, "age": None}), P),
                           duck.cell_key(table, pt.TableSpec({"muni": MUNI, "age": None}), P))
        s.drop_key_sums(coarse)
        assert not s.exists(coarse) and s.exists(fine)
        s.drop_key_sums(fine)
        assert not s.exists(fine)
    if sp.engine.name == "spark":  # sums kept in key sums: DuckDB's list merge, refused on Spark
        with pytest.raises(SpecError, match="made on DuckDB and PostgreSQL only"):
            sp.key_sums(table, ["muni"], sums=["w"])


# -- grid hierarchies: the INSPIRE codes checked in Spark SQL (a Java regex for DuckDB's RE2 one)
def _grid_records(bad: list[str]) -> pl.DataFrame:
    rng = np.random.default_rng(3)
    n, e = rng.integers(2680, 2700, 600), rng.integers(4330, 4345, 600)
    codes = [f"1kmN{a}E{b}" for a, b in zip(n, e)]
    return pl.DataFrame({"pid": np.arange(600), "sex": rng.choice(["f", "m"], 600),
                         "cell": bad + codes[len(bad):]})


def test_grid_tables_on_both_engines(engines):
    out, h = [], []
    for s in engines:
        s.register("grid", _grid_records([]), replace=True)
        s.add_record_keys("grid", id_column="pid", seed=SEED)
        h.append(s.hierarchy_from_grid("grid", "cell", ["10km", "100km"]))
        out.append(s.cell_key("grid", pt.TableSpec({"cell": h[-1], "sex": None}), P))
    assert h[0] == h[1]
    assert_frame_equal(out[1], out[0])
    assert out[0].filter(pl.col("cell_level") == 1).height > 1  # 10 km squares


def test_malformed_grid_codes_give_the_same_error(engines):
    """A code with a newline at its end: Java's $ would take it, RE2's whole match not."""
    messages = []
    for s in engines:
        s.register("grid_bad", _grid_records(["1kmN2689E4337\n", "1kmN2689E4337x", "10kmN26E4"]), replace=True)
        with pytest.raises(ProtabError) as info:
            s.hierarchy_from_grid("grid_bad", "cell")
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert "2 malformed codes in 2 rows: '1kmN2689E4337\\n' (1 row), '1kmN2689E4337x' (1 row)" in messages[0]


# -- protect --engine spark --------------------------------------------------------------------
REQUEST = """
database = "micro.duckdb"
formats = ["csv", "parquet"]
[ptable]
maximum_entropy = {{ D = 3, V = 2, js = 1 }}
[hierarchies.muni]
code_lengths = [2, 2]
[[tables]]
name = "muni_sex"
source = "census"
dims = ["muni", "sex", "age"]
formula = "muni*sex + age"
threshold = 2
[[tables]]
name = "weighted"
source = "census"
dims = ["muni", "sex"]
weight = "w"
[[tables]]
name = "w_sums"
source = "census"
dims = ["muni", "sex", "age"]
sums = ["w"]
[magnitude]
ptable = {{ maximum_entropy = {{ D = 10, V = 3, step = 2, icat = [1, 5, 10], optim = 4 }} }}
small_cells = {{ maximum_entropy = {{ D = 5, V = 1, step = 5, icat = [1, 3, 5] }} }}
fp = 20
epsilon = [1, 0.5]
mu_c = 1
[rules]
p_percent = 10
min_frequency = 3
"""


def _census(tmp_path: Path, request: str) -> None:
    """micro.duckdb with the keyed records as table census, census.parquet, request.toml."""
    with pt.Session(str(tmp_path / "micro.duckdb")) as s:
        s.register("census", RECORDS)
        s.add_record_keys("census", id_column="pid", seed=SEED)
        s.con.execute(f"COPY census TO '{tmp_path / 'census.parquet'}' (FORMAT parquet)")
    (tmp_path / "request.toml").write_text(request)


def test_protect_engine_spark_writes_the_same_files(tmp_path, spark):
    _census(tmp_path, REQUEST.format())
    from protab.cli import protect

    protect(str(tmp_path / "request.toml"), out=str(tmp_path / "duck"))
    protect(str(tmp_path / "request.toml"), out=str(tmp_path / "spark"), engine="spark")
    assert (tmp_path / "spark" / "protab_run.json").is_file()  # each run's fingerprint: its own run id
    files = sorted(p.name for p in (tmp_path / "duck").iterdir() if p.name != "protab_run.json")
    assert files == ["muni_sex.csv", "muni_sex.parquet", "w_sums.csv", "w_sums.parquet", "weighted.csv",
                     "weighted.parquet"]
    assert "w_pert" in (tmp_path / "duck" / "w_sums.csv").read_text().splitlines()[0]
    for name in files:
        assert (tmp_path / "spark" / name).read_bytes() == (tmp_path / "duck" / name).read_bytes(), name
    # Parquet without a DuckDB database: the key column and modulus from --spark-keys
    (tmp_path / "micro.duckdb").rename(tmp_path / "elsewhere.duckdb")
    spark.catalog.dropTempView("census")  # read the Parquet file again
    protect(str(tmp_path / "request.toml"), out=str(tmp_path / "spark2"), engine="spark", spark_keys="rkey:4294967296")
    for name in files:
        assert (tmp_path / "spark2" / name).read_bytes() == (tmp_path / "duck" / name).read_bytes(), name


def test_protect_engine_spark_reads_sources_from_a_uri_and_names_a_missing_one(tmp_path, spark):
    _census(tmp_path, REQUEST.format())
    from protab.cli import protect

    protect(str(tmp_path / "request.toml"), out=str(tmp_path / "duck"))
    (tmp_path / "lake").mkdir()
    (tmp_path / "census.parquet").rename(tmp_path / "lake" / "census.parquet")
    spark.catalog.dropTempView("census")
    protect(str(tmp_path / "request.toml"), out=str(tmp_path / "spark"), engine="spark",
            spark_data=(tmp_path / "lake").as_uri())  # file:///…/lake, as s3a:// or hdfs:// would be
    for name in ("muni_sex.csv", "w_sums.parquet"):
        assert (tmp_path / "spark" / name).read_bytes() == (tmp_path / "duck" / name).read_bytes(), name
    spark.catalog.dropTempView("census")
    missing = (tmp_path / "nowhere").as_uri()
    with pytest.raises(pt.InputError, match=rf"register 'census': cannot read '{re.escape(missing)}/census.parquet'"
                       r": \[PATH_NOT_FOUND\]"):
        protect(str(tmp_path / "request.toml"), out=str(tmp_path / "spark2"), engine="spark", spark_data=missing)
    assert not (tmp_path / "spark2").exists()


SUPPRESSION_REQUEST = """
database = "micro.duckdb"
formats = ["csv", "parquet"]
[hierarchies.muni]
code_lengths = [2, 2]
[[tables]]
name = "suppressed"
source = "census"
dims = ["muni", "sex", "age"]
method = "suppression"
min_frequency = 45
"""


def test_protect_engine_spark_suppresses_the_same_cells(tmp_path, spark):
    _census(tmp_path, SUPPRESSION_REQUEST)
    from protab.cli import protect

    protect(str(tmp_path / "request.toml"), out=str(tmp_path / "duck"))
    spark.catalog.dropTempView("census")
    protect(str(tmp_path / "request.toml"), out=str(tmp_path / "spark"), engine="spark")
    out = pl.read_csv(tmp_path / "duck" / "suppressed.csv")
    assert out["n"].null_count() > 5  # primary and secondary cells blanked
    for name in ("suppressed.csv", "suppressed.parquet"):
        assert (tmp_path / "spark" / name).read_bytes() == (tmp_path / "duck" / name).read_bytes(), name


# -- rendering and missing pieces (no Spark needed) -----------------------------------------------
def test_parameters_keep_their_order_when_sqlglot_repeats_an_expression():
    sql, count = to_spark('SELECT "a?b", ? AS x FROM t, unnest(range(lo // ?, hi // ? + 1)) WHERE y = ?')
    assert count == 4
    assert "`a?b`" in sql and ":p0 AS x" in sql and sql.count(":p1") >= 1 and sql.count(":p2") >= 1
    assert sql.index(":p3") > sql.index(":p2")
    assert "?" not in sql.replace("`a?b`", "")


def test_clear_error_without_java(monkeypatch):
    from protab import engines as engine

    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(InputError, match="Java runtime"):
        engine.require_java()


def test_clear_error_without_pyspark(tmp_path):
    code = ("import sys; sys.modules['pyspark'] = None\n"
            "from protab.engines import require_spark\n"
            "try:\n    require_spark()\nexcept Exception as e:\n    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("InputError") and "pip install 'pyspark>=4.0'" in out and "Java" in out


def test_unknown_engine_option_is_refused(tmp_path):
    from protab.cli import protect

    (tmp_path / "request.toml").write_text(REQUEST.format())
    with pytest.raises(InputError, match="--engine"):
        protect(str(tmp_path / "request.toml"), engine="flink")


def test_a_spark_session_is_a_session_on_the_spark_engine(engines):
    """One Session class; the engine is what differs (no subclass pretends to be DuckDB)."""
    _, sp = engines
    only_on(sp, "spark")
    assert type(sp) is pt.Session and isinstance(sp.engine, SparkEngine)
    with pytest.raises(InputError, match="no DuckDB connection"):
        sp.con  # noqa: B018
    assert "persons" in sp.tables()
    assert sp.columns("persons")["age"] == "INTEGER"
    assert Path(__file__).exists()


def test_key_sums_beyond_64_bits_are_exact(engines):
    """15-digit decimal keys near 1 over 12,000 records add up past 2^63: Spark's BIGINT sum
    would overflow; the scan and roll-up sum them wide, and the total's cell key is the exact
    sum modulo 10^15 (computed here in Python)."""
    rng = np.random.default_rng(7)
    ints = rng.integers(9 * 10**14, 10**15, 12_000)
    frame = pl.DataFrame({"sex": rng.choice(["f", "m"], ints.size, p=[0.95, 0.05]),  # one cell past 2^63
                          "k15": pl.Series([Decimal(int(k)).scaleb(-15) for k in ints], dtype=pl.Decimal(16, 15))})
    f = frame["sex"].to_numpy() == "f"
    assert int(ints[f].sum(dtype=object)) > 2**63
    out = []
    for s in engines:
        s.register("wide", frame, replace=True)
        s.add_record_keys("wide", record_key_column="k15", decimals=15, name="rkw")
        out.append(s.tabulate("wide", pt.TableSpec({"sex": None}), cell_keys=True))
    assert_frame_equal(out[1], out[0])
    total = out[1].filter(pl.col("sex_level") == 0)
    assert total["cell_key"].item() == int(ints.sum(dtype=object)) % 10**15
    assert out[1].filter(pl.col("sex") == "f")["cell_key"].item() == int(ints[f].sum(dtype=object)) % 10**15


def test_hierarchy_from_columns_and_codes_are_the_same(engines):
    duck, sp = engines
    for s in engines:
        s.register("regions", RECORDS.with_columns(pl.col("muni").str.slice(0, 2).alias("region")), replace=True)
    assert sp.hierarchy_from_columns("regions", ["region", "muni"]) == duck.hierarchy_from_columns(
        "regions", ["region", "muni"])
    assert sp.codes("regions", "age") == duck.codes("regions", "age") == ["0", "1", "2", "3"]


def test_ansi_mode_is_required(spark):
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        with pytest.raises(InputError, match="ANSI mode"):
            pt.Session.spark(spark)
    finally:
        spark.conf.set("spark.sql.ansi.enabled", "true")


def test_use_record_keys_declares_keys_made_elsewhere_and_refuses_bad_ones(engines):
    """Keys written by DuckDB, declared on Spark: the same cell keys; a text column, a bad
    modulus, missing or out-of-range keys are clear InputErrors."""
    duck, sp = engines
    keyed = duck.sql("SELECT pid, sex, rk FROM persons")
    sp.register("keyed", keyed, replace=True)
    sp.use_record_keys("keyed", "rk", duck.record_key("persons")[1])
    spec = pt.TableSpec({"sex": None})
    assert_frame_equal(sp.tabulate("keyed", spec, cell_keys=True), duck.tabulate("persons", spec, cell_keys=True),
                       check_exact=True)
    with pytest.raises(InputError, match="has type VARCHAR; keys must be integers"):
        sp.use_record_keys("keyed", "sex", 2**32)
    with pytest.raises(InputError, match="modulus must be a whole number of 2 or more"):
        sp.use_record_keys("keyed", "rk", 1)
    with pytest.raises(InputError, match=r"record\(s\) of table 'keyed' have no key in 'rk' or one outside 0 … 255"):
        sp.use_record_keys("keyed", "rk", 256)
    with pytest.raises(InputError, match="no record key column 'nokey'"):
        sp.use_record_keys("keyed", "nokey", 2**32)


@pytest.mark.parametrize("sql,why", [
    ("SELECT l[0] FROM t", "counts from the end"),
    ("SELECT l[-1] FROM t", "counts from the end"),
    ("SELECT list_slice(l, 0, 2) FROM t", "literal start"),
    ("SELECT list_slice(l, i, 2) FROM t", "literal start"),
    ("SELECT regexp_full_match(x, p) FROM t", "literal pattern"),
    ("SELECT unnest(a) AS e, unnest(b) AS f, x FROM t", "must come last"),
])
def test_list_pieces_spark_would_read_otherwise_are_refused(sql, why):
    """DuckDB forms whose Spark rendering would mean something else are refused, not rendered."""
    to_spark.cache_clear()
    with pytest.raises(ValueError, match=why):
        to_spark(sql)


def test_list_pieces_rendered_for_spark():
    sql = to_spark("SELECT max(x, 6) FILTER (WHERE y) AS t, l[2].x, l[j], list_slice(l, 1, 3), "
                   "regexp_full_match(c, '^a$') FROM t")[0]
    assert "MAX_BY(x, x, 6) FILTER(WHERE y)" in sql
    assert "TRY_ELEMENT_AT(l, 2).x" in sql and "TRY_ELEMENT_AT(l, j)" in sql  # 1-based, as written
    assert "SLICE(l, 1, (3) - (1) + 1)" in sql
    assert "c RLIKE '\\\\A(?:^a$)\\\\z'" in sql
    zipped = to_spark("SELECT x, unnest(r.a) AS e, unnest(r.b) AS f FROM t r")[0]
    assert "INLINE(ARRAYS_ZIP(COALESCE(r.a, ARRAY()), COALESCE(r.b, ARRAY()))) AS (e, f)" in zipped


def test_exact_sums_of_doubles_are_the_same_as_duckdbs(engines):
    """The scan's exact sum of a floating-point column (Engine.decimal8_sum): Spark sums whole
    numbers of 10^-8 and makes the decimal once per group; the DECIMAL(38, 8) must be DuckDB's
    sum of each value's decimal — ninth-decimal ties, negatives, 8 significant decimals on a
    large value, and NULL where no value can be summed (NULL, NaN, ±inf, |x| >= 1e30)."""
    frame = pl.DataFrame({
        "g": ["tie", "tie", "tie", "neg", "neg", "big", "big", "none", "none", "none", "none", "mix", "mix"],
        "x": [1.5e-08, 2.5e-08, 0.1, -2.5e-08, -0.3, 123456789.12345678, 0.2,
              None, float("nan"), float("inf"), 1e30, 2.0, float("-inf")],
    })
    got = []
    for s in engines:
        s.register("doubles", frame, replace=True)
        total, finish = s.engine.decimal8_sum('"x"', True)
        got.append(sorted(s.engine.rows(
            f"SELECT g, {finish.replace('{}', 't')} FROM (SELECT g, {total} AS t FROM doubles GROUP BY g)")))
    assert got[1] == got[0]
    sums = dict(got[0])
    assert sums["none"] is None and sums["mix"] == Decimal("2")
    assert sums["neg"] == Decimal("-0.30000003")  # DuckDB: -2.5e-08 rounds away from zero


def test_an_exact_sum_past_38_digits_is_an_overflow_error_on_spark(engines):
    _, sp = engines
    sp.register("huge_doubles", pl.DataFrame({"g": ["a", "a"], "x": [9e29, 9e29]}), replace=True)
    total, finish = sp.engine.decimal8_sum('"x"', True)
    with pytest.raises(sp.engine.overflow_errors()):
        sp.engine.rows(f"SELECT g, {finish.replace('{}', 't')} FROM (SELECT g, {total} AS t FROM huge_doubles GROUP BY g)")
