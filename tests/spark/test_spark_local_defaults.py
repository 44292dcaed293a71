"""On a local master protab sets the shuffle partitions to the cores, adaptive execution on and
the huge-method limit of whole-stage code generation to HotSpot's 8,000 bytes, but only the
settings the user left unset (docs/spark.md, "Settings on a local master")."""

from __future__ import annotations

import pytest
from spark_fixtures import require_spark

import protab as pt

require_spark()


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from spark_fixtures import spark_fixture

    yield from spark_fixture(tmp_path_factory, "protab-spark-defaults", cores=1)


def test_unset_settings_get_local_defaults_and_set_ones_stay(spark):
    # a new session of the same Spark context: the runtime settings of the tests' session
    # (shuffle partitions) are not its own; the builder's (adaptive execution off) are
    fresh = spark.newSession()
    assert fresh.conf.get("spark.sql.shuffle.partitions") == "200"  # Spark's own default
    assert fresh.conf.get("spark.sql.adaptive.enabled") == "false"  # set when the tests' Spark was built
    with pt.Session.spark(fresh):
        assert fresh.conf.get("spark.sql.shuffle.partitions") == str(fresh.sparkContext.defaultParallelism)
        assert fresh.conf.get("spark.sql.adaptive.enabled") == "false"  # the user's choice stays
        assert fresh.conf.get("spark.sql.codegen.hugeMethodLimit") == "8000"


def test_a_users_shuffle_partitions_are_kept(spark):
    fresh = spark.newSession()
    fresh.conf.set("spark.sql.shuffle.partitions", "200")  # said explicitly, even if it is the default
    with pt.Session.spark(fresh):
        assert fresh.conf.get("spark.sql.shuffle.partitions") == "200"


def test_local_defaults_reports_what_it_set(spark):
    from protab.engines import local_defaults

    fresh = spark.newSession()
    assert local_defaults(fresh) == {"spark.sql.shuffle.partitions": str(fresh.sparkContext.defaultParallelism),
                                     "spark.sql.codegen.hugeMethodLimit": "8000"}
    assert local_defaults(fresh) == {}  # set now: nothing more to choose


def test_a_users_huge_method_limit_is_kept(spark):
    fresh = spark.newSession()
    fresh.conf.set("spark.sql.codegen.hugeMethodLimit", "65535")  # Spark's default, said explicitly
    with pt.Session.spark(fresh):
        assert fresh.conf.get("spark.sql.codegen.hugeMethodLimit") == "65535"
