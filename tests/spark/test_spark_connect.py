"""The Spark engine through Spark Connect (a client of pyspark's own Connect server,
tests/spark_connect_fixtures.py): the same frames as DuckDB for a representative part of the
cross-engine matrix — counts through hierarchies, weighted counts, magnitudes with rules, cell
suppression, record swapping (its temporary output hiding a view, given back) — and
``protab protect --spark-remote`` writes the same files; a server that does not answer is one
protab error, as a setting (``--spark-conf``) it refuses, named by its key. The whole matrix
runs through Connect with PROTAB_SPARK_CONNECT=1 (tests/spark_fixtures.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from spark_connect_fixtures import free_port, require_connect
from spark_fixtures import engine_pair, geo_hierarchy

import protab as pt
from protab.errors import InputError
from protab.magnitude import MagnitudeCKM, SensitivityRules
from protab.ptable.magnitude_ptable import MagnitudePTable

require_connect()

N = 400
SEED = "spark-connect-tests"


def _records() -> pl.DataFrame:
    """Persons in households of 1-3 in region > municipality, with a skewed positive magnitude."""
    rng = np.random.default_rng(21)
    size = rng.integers(1, 4, N // 2)
    hid = np.repeat(np.arange(N // 2) * 11 + 3, size)[:N]
    muni = np.repeat(rng.choice(["0101", "0102", "0201", "0202"], N // 2), size)[:N]
    n = len(hid)
    return pl.DataFrame({
        "pid": np.arange(n) * 7 + 1, "hid": hid, "region": [m[:2] for m in muni], "muni": muni,
        "hsize": np.repeat(size, size)[:n], "sex": rng.choice(["f", "m"], n), "age": rng.integers(0, 4, n),
        "geo": rng.choice(["Spain", "Iceland", "Portugal"], n), "w": np.round(rng.uniform(0.5, 3.0, n), 3),
        "v": np.round(rng.lognormal(3, 1.2, n), 2),
    })


RECORDS = _records()
MUNI = pt.Hierarchy.from_code_lengths(RECORDS["muni"].unique().to_list(), [2, 2])
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    P = pt.PTable.maximum_entropy(D=3, V=2)
    ALL = MagnitudePTable.maximum_entropy(10, 3, step=2, icat=[1, 5, 10], optim=[4, 1, 1])
SPECS = {
    "hierarchy": pt.TableSpec({"muni": MUNI, "sex": None, "age": None}),
    "nontree_weighted": pt.TableSpec({"geo": geo_hierarchy(), "sex": None}, weight="w"),
}
SWAP = pt.SwapSpec(household="hid", geography=["region", "muni"], risk_variables=["sex", "age"],
                   similar=[["hsize"], []], swap_rate=0.1, k_anonymity=3)


def _prepare(s: pt.Session) -> None:
    s.register("persons", RECORDS, replace=True, materialize=True)
    s.add_record_keys("persons", id_column="pid", seed=SEED, bits=32, name="rk")


@pytest.fixture(scope="module")
def engines(spark_connect_url, tmp_path_factory):
    yield from engine_pair("spark-connect", tmp_path_factory, _prepare, cores=2)


def test_a_connect_session_is_a_session_on_the_spark_engine(engines):
    from pyspark.sql.connect.session import SparkSession

    _, sp = engines
    assert sp.engine.name == "spark" and isinstance(sp.engine.spark, SparkSession)
    assert sp.engine.spark.conf.get("spark.sql.shuffle.partitions") == "2"  # the server's setting kept
    assert sp.record_key("persons") == ("rk", 2**32)


@pytest.mark.parametrize("spec", list(SPECS))
def test_count_tables_are_duckdbs(engines, spec):
    frames = [s.cell_key("persons", SPECS[spec], P, original=True) for s in engines]
    assert frames[0].height > 10
    assert_frame_equal(frames[1], frames[0])


def test_magnitudes_with_rules_are_duckdbs(engines):
    spec = pt.TableSpec({"muni": None, "sex": None}, sums=["v"])
    magnitude = MagnitudeCKM(ALL, fp=100, p=(0.25, 0.05), q=3, epsilon=[1, 0.5, 0.2])
    rules = SensitivityRules(min_frequency=3, dominance=[(1, 60), (2, 85)], p_percent=15)
    frames = [s.cell_key("persons", spec, P, magnitude=magnitude, rules=rules, original=True) for s in engines]
    assert frames[0]["v_pert"].null_count() < frames[0].height
    assert_frame_equal(frames[1], frames[0])


def test_suppression_is_duckdbs(engines):
    spec = pt.TableSpec({"muni": MUNI, "age": None, "sex": None})
    frames = [s.suppress("persons", spec, min_frequency=20) for s in engines]
    assert (frames[0]["suppressed"] == "secondary").any()
    assert_frame_equal(frames[1], frames[0])


def test_swap_is_duckdbs_and_a_temporary_output_gives_back_what_it_hid(engines):
    from protab.swapping import discard_swap

    results = []
    for s in engines:
        s.register("swapped", RECORDS.head(5), replace=True)  # hidden by the temporary output, then back
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pt.SwapRateWarning)
            summary = s.swap("persons", SWAP, seed="swap-seed", out="swapped", log="swap_log", replace=True,
                             temporary=True)
        results.append((summary, s.sql("SELECT * FROM swapped ORDER BY pid"), s.sql("SELECT * FROM swap_log ORDER BY ALL")))
        discard_swap(s.engine, "swapped", "swap_log")
        assert s.sql("SELECT count(*) AS n FROM swapped")["n"][0] == 5
    (d_sum, d_out, d_log), (s_sum, s_out, s_log) = results
    assert d_sum["swapped_households"] > 0 and s_sum == d_sum
    assert_frame_equal(s_out, d_out.with_columns(pl.col("rk").cast(s_out.schema["rk"])))  # UINTEGER in DuckDB
    assert_frame_equal(s_log, d_log)


def test_ckm_in_spark_sql_over_connect_is_duckdbs_macro(engines):
    """install_ptable over Connect: the temporary views and SQL functions of the session."""
    for s in engines:
        s.install_ptable(P, table="persons")
    query = "SELECT sex, count(*), ckm(count(*), sum(rk)) FROM persons GROUP BY sex ORDER BY sex"
    duck, sp = engines
    assert sp.sql(query).rows() == duck.sql(query).rows()


REQUEST = """
database = "micro.duckdb"
formats = ["csv", "parquet"]
[ptable]
maximum_entropy = { D = 3, V = 2 }
[hierarchies.muni]
code_lengths = [2, 2]
[[tables]]
name = "muni_sex"
source = "census"
dims = ["muni", "sex"]
"""


def _protect(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("SPARK_REMOTE", None)
    return subprocess.run([sys.executable, "-m", "protab.cli", "protect", str(tmp_path / "request.toml"), *args],
                          env=env, capture_output=True, text=True, timeout=600)


def _census(tmp_path: Path) -> None:
    """micro.duckdb with the keyed records as table census, census.parquet, request.toml."""
    with pt.Session(str(tmp_path / "micro.duckdb")) as s:
        s.register("census", RECORDS)
        s.add_record_keys("census", id_column="pid", seed=SEED)
        s.con.execute(f"COPY census TO '{tmp_path / 'census.parquet'}' (FORMAT parquet)")
    (tmp_path / "request.toml").write_text(REQUEST)


def test_protect_spark_remote_writes_duckdbs_files(tmp_path, spark_connect_url):
    _census(tmp_path)
    assert _protect(tmp_path, "--out", str(tmp_path / "duck")).returncode == 0
    run = _protect(tmp_path, "--out", str(tmp_path / "connect"), "--engine", "spark", "--spark-remote", spark_connect_url,
                   "--spark-conf", "spark.sql.shuffle.partitions=3")
    assert run.returncode == 0, run.stderr
    # the server was started with shuffle partitions and adaptive execution set: only the limit is protab's
    assert "protab set spark.sql.codegen.hugeMethodLimit=8000 (left unset;" in run.stderr
    files = sorted(p.name for p in (tmp_path / "duck").iterdir() if p.name != "protab_run.json")
    assert files == ["muni_sex.csv", "muni_sex.parquet"]
    for name in files:
        assert (tmp_path / "connect" / name).read_bytes() == (tmp_path / "duck" / name).read_bytes(), name


def test_a_server_that_does_not_answer_is_one_protab_error(tmp_path):
    _census(tmp_path)
    url = f"sc://127.0.0.1:{free_port()}"  # nobody listens there
    run = _protect(tmp_path, "--engine", "spark", "--spark-remote", url)
    assert run.returncode != 0
    assert "--spark-remote" in run.stderr and url in run.stderr and "server" in run.stderr
    assert "Traceback" not in run.stderr and "StatusCode" not in run.stderr  # no gRPC error of pyspark's client
    assert not (tmp_path / "protab_output").exists()


def test_spark_master_and_spark_remote_exclude_each_other(tmp_path, monkeypatch):
    from protab.cli import protect

    (tmp_path / "request.toml").write_text(REQUEST)
    with pytest.raises(InputError, match="--spark-master 'local\\[1\\]' and --spark-remote"):
        protect(str(tmp_path / "request.toml"), engine="spark", spark_master="local[1]",
                spark_remote="sc://127.0.0.1:15002")
    monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:15002")  # the environment's server counts too
    with pytest.raises(InputError, match="SPARK_REMOTE"):
        protect(str(tmp_path / "request.toml"), engine="spark", spark_master="local[1]")
    with pytest.raises(InputError, match="need --engine spark"):
        protect(str(tmp_path / "request.toml"), spark_remote="sc://127.0.0.1:15002")


def test_spark_conf_reaches_the_connect_session(tmp_path_factory, spark_connect_url):
    from spark_connect_fixtures import connect_spark

    from protab.engines import remote_session

    spark = connect_spark(tmp_path_factory)  # the process's client: remote_session gives it back
    try:
        assert remote_session(spark_connect_url, conf={"spark.sql.shuffle.partitions": "3"}) is spark
        assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "2")


def test_a_static_setting_the_server_refuses_is_named_by_its_key(tmp_path_factory, spark_connect_url):
    from spark_connect_fixtures import connect_spark

    from protab.engines import remote_session

    connect_spark(tmp_path_factory)
    secret = "/tmp/ptk_s3cr3t-warehouse"
    with pytest.raises(InputError) as err:
        remote_session(spark_connect_url, "protect: --spark-remote", conf={"spark.sql.warehouse.dir": secret})
    message = str(err.value)
    assert message.startswith("protect: --spark-remote: Spark refused the setting spark.sql.warehouse.dir: "
                              "[CANNOT_MODIFY_STATIC_CONFIG]")
    assert "start-connect-server.sh --conf KEY=VALUE" in message and secret not in message
    with pytest.raises(InputError, match="Spark refused the setting spark.sql.shuffle.partitions: "
                                         "\\[INVALID_CONF_VALUE.TYPE_MISMATCH\\] The value '<value>'"):
        remote_session(spark_connect_url, conf={"spark.sql.shuffle.partitions": "abc"})  # short: where it stands alone
