"""A local SparkSession for the Spark tests: no UI, few shuffle partitions, its warehouse in
a temporary folder (not the working directory), quiet logs."""

from __future__ import annotations


def local_spark(tmp_path_factory, app: str, cores: int = 1):
    """A SparkSession on ``local[cores]`` named ``app`` (stop it when done)."""
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp(f"{app}-warehouse")
    s = (SparkSession.builder.master(f"local[{cores}]").appName(app)
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", str(cores))
         .config("spark.sql.warehouse.dir", str(warehouse)).getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    return s


def spark_fixture(tmp_path_factory, app: str, cores: int = 1):
    """The body of a module's ``spark`` fixture: ``yield from spark_fixture(...)``."""
    s = local_spark(tmp_path_factory, app, cores)
    try:
        yield s
    finally:
        s.stop()
