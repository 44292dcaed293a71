"""Custom groups on Spark: the cells of a grouped table and the perturbed counts the differencing
rule judges (protab.serve.groups.set_counts) come from Session methods, so a Spark Session gives
what the service's DuckDB sessions give, cell for cell (the census of tests/serve/groups_data.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from spark_fixtures import require_spark

import protab as pt
from protab.serve.atom_ledger import Ledger
from protab.serve.broker import Broker
from protab.serve.caching import state_folder
from protab.serve.config import load_config
from protab.serve.groups import classification_of, set_counts

require_spark()
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))
import groups_data as G  # noqa: E402

GROUPS = {"young": G.ages(0, 14), "working": G.ages(15, 64), "old": G.ages(65, 90)}


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from spark_fixtures import spark_fixture

    yield from spark_fixture(tmp_path_factory, "protab-spark-serve-groups")


@pytest.fixture(scope="module")
def served(tmp_path_factory, spark):
    """The service's answer to a grouped table, its broker's p-table and dataset, and a Spark
    Session holding the same records with the same record keys."""
    folder = tmp_path_factory.mktemp("spark-groups")
    config, db = G.build(folder)
    (state_folder(load_config(config)) / Ledger.file).unlink(missing_ok=True)
    broker = Broker(load_config(config))
    try:
        body = {"dataset": "flat", "dims": ["age", "sex"], "groups": {"age": GROUPS}}
        frame = broker.table(body, broker.config.users["bob"]).frame
        ds = broker.datasets["flat"]
        with pt.Session(db, read_only=True) as duck:
            key, modulus = duck.record_key("persons")
            records = duck.sql("SELECT * FROM persons")
            cls = classification_of(ds.conf, "age")
            masks = np.vstack([cls.mask("age", ages) for ages in GROUPS.values()] + [cls.published])
            counts = set_counts(duck, "persons", cls, ["sex"], [], None, broker.ptable, masks)
        sp = pt.Session.spark(spark)
        sp.register("persons", records)
        sp.use_record_keys("persons", key, modulus)
        yield {"frame": frame, "ptable": broker.ptable, "cls": cls, "masks": masks, "counts": counts, "spark": sp}
        sp.close()
    finally:
        broker.close()


def test_the_services_grouped_table_is_sparks(served):
    codes = sorted(a for ages in GROUPS.values() for a in ages)
    spec = pt.TableSpec({"age": None, "sex": ["F", "M"]}, where=[("age", "in", codes)])
    frame = served["frame"]
    on_spark = served["spark"].cell_key_groups("persons", spec, "age", GROUPS, served["ptable"], threshold=3)
    on_spark = on_spark.filter(pl.col("age_level") <= 1).select(frame.columns)
    assert frame.height == 12
    assert_frame_equal(on_spark.sort(["age", "sex"]), frame.sort(["age", "sex"]), check_exact=True)


def test_the_differencing_rules_counts_are_sparks(served):
    frame, layers = served["counts"]
    on_spark, spark_layers = set_counts(served["spark"], "persons", served["cls"], ["sex"], [], None,
                                        served["ptable"], served["masks"])
    assert layers == spark_layers == 3  # the population, and each sex
    key = ["set", "q"]
    assert frame.height > 0
    assert_frame_equal(on_spark.sort(key), frame.sort(key), check_exact=True)
