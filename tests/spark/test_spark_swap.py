"""Record swapping on the Spark engine: the same swapped records, log and summary as DuckDB's
swap of the same data, spec and seed (every random choice is a keyed hash, so the engines
must agree to the byte); then the cell key method on the swapped records, alike too."""

from __future__ import annotations

import warnings

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from spark_fixtures import engine_pair, engines_under_test
from swap_engine_cases import SEED, SPECS, swap_population

import protab as pt


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from spark_fixtures import spark_fixture

    yield from spark_fixture(tmp_path_factory, "protab-spark-swap", cores=2)


@pytest.fixture(scope="module", params=engines_under_test())
def engines(request, tmp_path_factory):
    def prepare(s: pt.Session) -> None:
        s.register("persons", swap_population(), replace=True, materialize=True)
        s.add_record_keys("persons", id_column="pid", seed=SEED, bits=32, name="rk")

    yield from engine_pair(request.param, tmp_path_factory, prepare, cores=2)


@pytest.mark.parametrize("name", list(SPECS))
def test_spark_swaps_the_same_households_as_duckdb(engines, name):
    results = []
    for s in engines:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pt.SwapRateWarning)
            summary = s.swap("persons", SPECS[name], seed="swap-seed", out=f"out_{name}", log=f"log_{name}",
                             replace=True)
        out = s.sql(f'SELECT * FROM out_{name} ORDER BY pid')
        log = s.sql(f'SELECT * FROM log_{name} ORDER BY ALL')
        results.append((summary, out, log))
    (d_sum, d_out, d_log), (s_sum, s_out, s_log) = results
    assert d_sum["swapped_households"] > 0
    assert s_sum == d_sum
    # the record keys are UINTEGER in DuckDB, BIGINT in Spark (no unsigned types): same values
    assert_frame_equal(s_out, d_out.with_columns(pl.col("rk").cast(s_out.schema["rk"])))
    assert_frame_equal(s_log, d_log)
    # the swap moved geography: some records changed municipality
    assert (d_out["muni"] != swap_population().sort("pid")["muni"]).sum() > 0


def test_cell_key_method_on_spark_swapped_records_matches(engines):
    spec = pt.TableSpec({"muni": None, "sex": None})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = pt.PTable.maximum_entropy(D=3, V=2)
    frames = []
    for s in engines:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pt.SwapRateWarning)
            s.swap("persons", SPECS["risk_and_rate"], seed="swap-seed", out="swapped", replace=True)
        assert s.record_key("swapped") == s.record_key("persons")
        frames.append(s.cell_key("swapped", spec, p).sort("muni", "sex"))
    assert_frame_equal(frames[1], frames[0])


SWAP_REQUEST = """
database = "micro.duckdb"
formats = ["csv"]
[ptable]
maximum_entropy = { D = 3, V = 2 }
[swap]
source = "people"
out = "people_swapped"
log = "swap_log"
household = "hid"
geography = ["region", "muni", "grid"]
risk_variables = ["sex", "age"]
similar = [["hsize"]]
swap_rate = 0.1
seed_file = "swap.seed"
[[tables]]
name = "muni_sex"
source = "people_swapped"
dims = ["muni", "sex"]
[[tables]]
name = "region_age"
source = "people"
dims = ["region", "age"]
"""


def test_protect_engine_spark_swaps_then_writes_the_same_files(tmp_path, spark):
    """[swap] on Spark: the source read from Parquet (keys declared from the database), the
    swapped records a view of the Spark session that the tables read; the files are DuckDB's."""
    from protab.cli import protect

    with pt.Session(str(tmp_path / "micro.duckdb")) as s:
        s.register("people", swap_population())
        s.add_record_keys("people", id_column="pid", seed=SEED)
        s.con.execute("COPY people TO ? (FORMAT parquet)".replace("?", repr(str(tmp_path / "people.parquet"))))
    (tmp_path / "swap.seed").write_text("request-swap-seed\n", encoding="utf-8")
    (tmp_path / "request.toml").write_text(SWAP_REQUEST, encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pt.SwapRateWarning)
        protect(str(tmp_path / "request.toml"), out=str(tmp_path / "duck"))
        protect(str(tmp_path / "request.toml"), out=str(tmp_path / "spark"), engine="spark")
    assert (tmp_path / "spark" / "protab_run.json").is_file()  # each run's fingerprint: its own run id
    files = sorted(p.name for p in (tmp_path / "duck").iterdir() if p.name != "protab_run.json")
    assert files == ["muni_sex.csv", "region_age.csv"]
    for name in files:
        assert (tmp_path / "spark" / name).read_bytes() == (tmp_path / "duck" / name).read_bytes(), name
    # the swapped records on Spark are the ones DuckDB kept in the database
    with pt.Session(str(tmp_path / "micro.duckdb"), read_only=True) as s:
        kept = s.sql("SELECT pid, muni FROM people_swapped ORDER BY pid")
    assert_frame_equal(pl.from_arrow(spark.sql("SELECT pid, muni FROM people_swapped ORDER BY pid").toArrow()), kept)


def test_protect_engine_spark_names_a_missing_swap_source(tmp_path, spark):
    """[swap] on Spark whose source is neither a Spark table nor a Parquet file: a protab error
    naming the file it looked for; no output folder, no swapped view."""
    from protab.cli import protect
    from protab.errors import InputError

    spark.catalog.dropTempView("people_swapped")  # the shared session may hold one from an earlier test
    (tmp_path / "swap.seed").write_text("request-swap-seed\n", encoding="utf-8")
    (tmp_path / "request.toml").write_text(SWAP_REQUEST.replace('source = "people"\nout', 'source = "nobody"\nout'),
                                           encoding="utf-8")
    with pytest.raises(InputError, match=r"source 'nobody' is neither a Spark table nor the Parquet file .*nobody\.parquet"):
        protect(str(tmp_path / "request.toml"), out=str(tmp_path / "out"), engine="spark",
                spark_keys="rkey:4294967296")
    assert not (tmp_path / "out").exists()
    assert "people_swapped" not in {t.name for t in spark.catalog.listTables()}
