"""``protab protect --engine spark --spark-conf KEY=VALUE`` (repeatable): each a ``spark.`` setting
given once, refused by its key (never its value: it may hold a token) and without --engine
spark; the settings reach the session, win over protab's recommended ones, and what protab
filled in is named on stderr (docs/spark.md, "Your own settings")."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import protab as pt
from protab.cli import main, protect
from protab.errors import InputError

SECRET = "ptk_s3cr3t-token"
REQUEST = """
database = "micro.duckdb"
formats = ["csv"]
[ptable]
maximum_entropy = { D = 3, V = 1 }
[[tables]]
name = "region_sex"
source = "conf_census"
dims = ["region", "sex"]
"""
RECORDS = pl.DataFrame({"pid": list(range(1, 61)), "region": ["north", "south", "east"] * 20,
                        "sex": ["f", "m"] * 30})


@pytest.fixture
def request_file(tmp_path: Path) -> Path:
    """micro.duckdb with the keyed records (also as conf_census.parquet) and request.toml."""
    with pt.Session(str(tmp_path / "micro.duckdb")) as s:
        s.register("conf_census", RECORDS)
        s.add_record_keys("conf_census", id_column="pid", seed="spark-conf-tests")
        s.con.execute(f"COPY conf_census TO '{tmp_path / 'conf_census.parquet'}' (FORMAT parquet)")
    (tmp_path / "request.toml").write_text(REQUEST)
    return tmp_path / "request.toml"


def _refusal(request_file: Path, *conf: str) -> str:
    with pytest.raises(InputError) as err:
        protect(str(request_file), out=str(request_file.parent / "out"), engine="spark", spark_conf=list(conf))
    assert not (request_file.parent / "out").exists()
    return str(err.value)


# -- parsing: before any Spark starts -----------------------------------------------------------
def test_a_setting_without_equals_is_refused_by_its_key(request_file):
    message = _refusal(request_file, "spark.sql.shuffle.partitions")
    assert message.startswith("protect: --spark-conf 'spark.sql.shuffle.partitions' is not KEY=VALUE")


def test_a_setting_without_equals_that_is_no_setting_name_is_not_shown(request_file):
    message = _refusal(request_file, "spark.sql.adaptive.enabled=true", SECRET)  # the token without its key
    assert "--spark-conf number 2 (not shown" in message and "is not KEY=VALUE" in message
    assert SECRET not in message


def test_a_key_outside_spark_is_named_and_its_value_is_not(request_file):
    message = _refusal(request_file, f"sql.shuffle.partitions={SECRET}")
    assert "key 'sql.shuffle.partitions' is not a Spark setting" in message
    assert "did you mean 'spark.sql.shuffle.partitions'?" in message
    assert SECRET not in message


def test_a_key_with_a_space_is_refused(request_file):
    message = _refusal(request_file, f"spark.hadoop.fs.s3a.secret.key ={SECRET}")
    assert "is not a Spark setting" in message and "without spaces" in message and SECRET not in message


def test_an_empty_value_and_a_key_given_twice_are_refused(request_file):
    assert "spark.sql.shuffle.partitions has an empty value" in _refusal(request_file, "spark.sql.shuffle.partitions=")
    message = _refusal(request_file, f"spark.hadoop.token={SECRET}", f"spark.hadoop.token={SECRET}x")
    assert "spark.hadoop.token is given twice" in message and SECRET not in message


def test_spark_conf_needs_engine_spark(request_file, capsys):
    with pytest.raises(InputError, match="and --spark-conf need --engine spark"):
        protect(str(request_file), spark_conf=["spark.sql.shuffle.partitions=3"])
    assert main(["protect", str(request_file), "--spark-conf", "spark.sql.shuffle.partitions=3"]) == 2
    assert "--spark-conf need --engine spark" in capsys.readouterr().err
    assert not (request_file.parent / "protab_output").exists()


# -- on a local Spark ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from spark_fixtures import spark_fixture

    yield from spark_fixture(tmp_path_factory, "protab-spark-conf", cores=1)


@pytest.fixture
def local(spark):
    """The tests' SparkSession (protect's builder finds it running and sets its settings on it),
    without protab's huge-method limit, its settings as before and its view of the source dropped after."""
    keys = ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled", "spark.sql.codegen.hugeMethodLimit")
    before = {k: spark.conf.get(k, None) for k in keys}
    spark.conf.unset("spark.sql.codegen.hugeMethodLimit")
    yield spark
    spark.catalog.dropTempView("conf_census")
    for key, value in before.items():
        spark.conf.unset(key) if value is None else spark.conf.set(key, value)


def _spark_protect(request_file: Path, *conf: str) -> int:
    argv = ["protect", str(request_file), "--engine", "spark", "--out", str(request_file.parent / "spark")]
    for setting in conf:
        argv += ["--spark-conf", setting]
    return main(argv)


def test_the_settings_reach_the_session_and_the_files_stay_duckdbs(request_file, local):
    protect(str(request_file), out=str(request_file.parent / "duck"))
    assert _spark_protect(request_file, "spark.sql.shuffle.partitions=3", "spark.sql.adaptive.enabled=true") == 0
    assert local.conf.get("spark.sql.shuffle.partitions") == "3"
    assert local.conf.get("spark.sql.adaptive.enabled") == "true"
    written = (request_file.parent / "spark" / "region_sex.csv").read_bytes()
    assert written == (request_file.parent / "duck" / "region_sex.csv").read_bytes()


def _open(*conf: str):
    """The session ``protect --engine spark --spark-conf ...`` opens (protab.cli.protect_sources)."""
    from protab.cli.protect_sources import open_spark, spark_options

    return open_spark(spark_options(None, None, None, None, conf))


def test_what_protab_filled_in_is_named_on_stderr(local, capsys):
    assert _open() is local
    err = capsys.readouterr().err
    # the tests' session has its shuffle partitions and adaptive execution set: only the limit is protab's
    assert err == ("protect --engine spark: protab set spark.sql.codegen.hugeMethodLimit=8000 "
                   "(left unset; --spark-conf KEY=VALUE sets your own)\n")
    assert local.conf.get("spark.sql.codegen.hugeMethodLimit") == "8000"


def test_a_users_value_wins_over_protabs_and_nothing_is_said(local, capsys):
    _open("spark.sql.codegen.hugeMethodLimit=65535")
    assert local.conf.get("spark.sql.codegen.hugeMethodLimit") == "65535"
    assert capsys.readouterr().err == ""


def test_every_setting_protab_fills_in_is_named(local, capsys):
    local.conf.unset("spark.sql.adaptive.enabled")  # as a session nobody configured
    local.conf.unset("spark.sql.shuffle.partitions")
    _open("spark.sql.shuffle.partitions=5")
    err = capsys.readouterr().err
    assert "protab set spark.sql.adaptive.enabled=true, spark.sql.codegen.hugeMethodLimit=8000 (left unset" in err
    assert "spark.sql.shuffle.partitions" not in err
    assert local.conf.get("spark.sql.shuffle.partitions") == "5"  # the user's, not the cores


def test_a_value_spark_refuses_is_named_by_its_key_not_shown(request_file, local, capsys):
    assert _spark_protect(request_file, f"spark.sql.shuffle.partitions={SECRET}") == 2
    err = capsys.readouterr().err
    assert "protab: error: protect: --spark-conf: Spark refused the setting spark.sql.shuffle.partitions:" in err
    assert "INVALID_CONF_VALUE" in err and "'<value>'" in err
    assert SECRET not in err and "Traceback" not in err
    assert not (request_file.parent / "spark").exists()


# -- the rule of protab's recommended settings ---------------------------------------------------
class _Conf:
    """``spark.conf`` of a session of a cluster master: what was set, by whom."""

    def __init__(self, given: dict[str, str]) -> None:
        self.values = dict(given)

    @property
    def getAll(self) -> dict[str, str]:  # pyspark's name (a property)
        return dict(self.values)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value


class _ClusterSession:
    """A session whose master is a cluster's (no ``sql``: counting cores would fail)."""

    def __init__(self, **given: str) -> None:
        self.conf = _Conf({"spark.master": "yarn", **given})


def test_on_a_cluster_protab_sets_adaptive_execution_and_the_limit_but_not_shuffle_partitions():
    from protab.engines import local_defaults, recommended_settings

    cluster = _ClusterSession()
    assert local_defaults(cluster) == {}  # the library's Session.spark leaves a cluster as it is
    assert recommended_settings(cluster) == {"spark.sql.adaptive.enabled": "true",
                                             "spark.sql.codegen.hugeMethodLimit": "8000"}
    assert "spark.sql.shuffle.partitions" not in cluster.conf.values  # left to Spark and adaptive execution


def test_on_a_cluster_a_users_setting_is_kept():
    from protab.engines import recommended_settings

    cluster = _ClusterSession(**{"spark.sql.adaptive.enabled": "false"})
    assert recommended_settings(cluster) == {"spark.sql.codegen.hugeMethodLimit": "8000"}
    assert cluster.conf.values["spark.sql.adaptive.enabled"] == "false"
