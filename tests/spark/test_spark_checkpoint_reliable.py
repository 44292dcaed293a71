"""With ``spark.checkpoint.dir`` set (a setting Spark takes only when it starts, hence a
SparkSession of this module's own), protab's temporary relations are files under that folder
by default (checkpoint="reliable": they outlive an executor), and the cells are DuckDB's."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from spark_fixtures import keyed_cell_key, require_spark

import protab as pt

require_spark()

RECORDS = pl.DataFrame({"pid": list(range(1, 201)), "region": [f"R{i % 4}" for i in range(200)],
                        "sex": ["f" if i % 5 < 3 else "m" for i in range(200)]})
def _cell_key(s: pt.Session) -> pl.DataFrame:
    return keyed_cell_key(s, RECORDS, pt.TableSpec({"region": None, "sex": None}), "reliable-checkpoints")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("spark-checkpoints")


@pytest.fixture(scope="module")
def spark(folder):
    from spark_fixtures import own_spark

    yield from own_spark({"spark.checkpoint.dir": str(folder)})


def test_a_checkpoint_folder_makes_temporary_relations_files_there_with_duckdbs_cells(spark, folder):
    with pt.Session(":memory:") as duck:
        expected = _cell_key(duck)
    assert not list(folder.rglob("part-*"))
    with pt.Session.spark(spark) as s:
        assert s.engine.checkpoint_mode == "reliable"
        assert_frame_equal(_cell_key(s), expected)
    assert list(folder.rglob("rdd-*/part-*"))  # Spark's reliable checkpoint files, one folder per relation


def test_reliable_is_accepted_when_asked_for(spark):
    with pt.Session.spark(spark, checkpoint="reliable") as s:
        assert s.engine.checkpoint_mode == "reliable"
