"""How the Spark engine keeps its temporary relations (docs/spark.md, "Temporary relations and
executor loss"): in executor memory on a local master by default, replicated on two executors
or as files under ``spark.checkpoint.dir`` when asked (the default with that setting); bad
values refused by name; a checkpoint block that is gone is a protab error naming what to set."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from spark_fixtures import keyed_cell_key, require_spark

import protab as pt
from protab.engines.spark_support import checkpoint_mode, lost_checkpoint
from protab.errors import InputError, ProtabError

require_spark()

RECORDS = pl.DataFrame({
    "pid": list(range(1, 301)),
    "region": [f"R{i % 3}" for i in range(300)],
    "sex": ["f" if i % 7 < 4 else "m" for i in range(300)],
})
SPEC = pt.TableSpec({"region": None, "sex": None})
def _cell_key(s: pt.Session) -> pl.DataFrame:
    return keyed_cell_key(s, RECORDS, SPEC, "checkpoint-tests")


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from spark_fixtures import spark_fixture

    yield from spark_fixture(tmp_path_factory, "protab-spark-checkpoint", cores=1)


@pytest.fixture(scope="module")
def duckdb_cells() -> pl.DataFrame:
    with pt.Session(":memory:") as s:
        return _cell_key(s)


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


class _Spark:
    """What checkpoint_mode reads of a SparkSession: its settings."""

    def __init__(self, **values: str) -> None:
        self.conf = _Conf({k.replace("_", "."): v for k, v in values.items()})


def test_a_local_master_keeps_temporary_relations_in_executor_memory_by_default(spark):
    with pt.Session.spark(spark) as s:
        assert s.engine.checkpoint_mode == "local"


def test_a_cluster_master_replicates_by_default_and_a_checkpoint_folder_makes_it_reliable():
    assert checkpoint_mode(_Spark(spark_master="spark://head:7077"), None) == "replicated"
    assert checkpoint_mode(_Spark(spark_master="yarn", spark_checkpoint_dir="hdfs:///ckpt"), None) == "reliable"
    assert checkpoint_mode(_Spark(spark_master="local[4]", spark_checkpoint_dir="/tmp/ckpt"), None) == "reliable"
    assert checkpoint_mode(_Spark(spark_master="yarn", spark_checkpoint_dir="hdfs:///ckpt"), "local") == "local"


def test_an_unknown_checkpoint_mode_is_refused_by_name(spark):
    with pytest.raises(InputError, match=r"checkpoint must be one of 'local', 'replicated', 'reliable'.*'disk'"):
        pt.Session.spark(spark, checkpoint="disk")


def test_reliable_without_a_checkpoint_folder_names_the_setting(spark):
    with pytest.raises(InputError, match=r"checkpoint='reliable'.*spark\.checkpoint\.dir.*has not set"):
        pt.Session.spark(spark, checkpoint="reliable")


def test_replicated_checkpoints_give_duckdbs_cells(spark, duckdb_cells):
    with pt.Session.spark(spark, checkpoint="replicated") as s:
        assert s.engine.checkpoint_mode == "replicated"
        assert_frame_equal(_cell_key(s), duckdb_cells)


def test_a_checkpoint_block_that_is_gone_is_a_protab_error_naming_what_to_set(spark):
    # Spark's message when a block of a local checkpoint is gone: its executor was lost, or
    # (as here) the test removed the checkpoint's blocks through the JVM (protab never does)
    with pt.Session.spark(spark) as s:
        engine = s.engine
        engine.create_table("kept", "SELECT * FROM (VALUES (1), (2), (3)) AS t(x)")
        for rdd in list(spark.sparkContext._jsc.getPersistentRDDs().values()):
            rdd.unpersist(True)
        with pytest.raises(ProtabError, match=r"lost an executor.*checkpoint='local'.*spark\.checkpoint\.dir"
                                              r".*checkpoint='replicated'") as caught:
            engine.rows("SELECT sum(x) FROM kept")
        assert caught.value.__cause__ is None and "rdd_" not in str(caught.value)


def test_other_spark_errors_are_left_as_they_are():
    assert lost_checkpoint(RuntimeError("[DIVIDE_BY_ZERO] Division by zero"), "local") is None
    lost = lost_checkpoint(RuntimeError("[CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND] Checkpoint block rdd_7_0 not found!"),
                           "replicated")
    assert isinstance(lost, ProtabError) and "two copies, on two executors" in str(lost)
