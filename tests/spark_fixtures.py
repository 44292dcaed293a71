"""The cross-engine matrix: every registered engine (``protab.engines.engines()``) but the
reference, DuckDB, runs the differential tests of tests/spark against DuckDB
(:func:`engines_under_test`, :func:`engine_pair`); an engine whose runtime is missing is
skipped with its reason. A local SparkSession for the Spark engine: no UI, few shuffle
partitions, its warehouse in a temporary folder (not the working directory), quiet logs;
and the hierarchies the engine-comparison tests share."""

from __future__ import annotations

import os
import shutil

import polars as pl
import pytest

import protab as pt
from protab.engines import engines

#: the engine the others are compared with
REFERENCE = "duckdb"
#: registered engines that answer only part of the matrix yet, and where their own comparison
#: with DuckDB lives (left out of engines_under_test with that reason)
PARTIAL = {"postgres": "answers count and magnitude tables but no holdings and no swap so far: tests/postgres "
                       "compares them with DuckDB on a server of its own"}


def require_spark() -> None:
    """Skip the calling test module without pyspark or a Java runtime."""
    pytest.importorskip("pyspark", reason="pyspark (in the dev extra) is not installed")
    if shutil.which("java") is None:  # pragma: no cover - CI machines have Java 17 (make java)
        pytest.skip("Spark needs a Java runtime (make java installs Java 17)", allow_module_level=True)


def geo_hierarchy() -> pt.Hierarchy:
    """A hierarchy that is not a tree: Europe = all three, nonEU = Iceland, EU = Europe − nonEU."""
    return pt.Hierarchy.from_frame(pl.DataFrame({
        "mapsFrom": ["Spain", "Iceland", "Portugal", "Iceland", "Europe", "nonEU"],
        "mapsTo": ["Europe", "Europe", "Europe", "nonEU", "EU", "EU"],
        "sign": [1, 1, 1, 1, 1, -1],
        "level": [1, 1, 1, 1, 2, 2],
    }))


def age_hierarchy() -> pt.Hierarchy:
    """A tree whose leaves sit at different depths (rolled up through its bridge)."""
    return pt.Hierarchy.from_parent_child([("Total", "young"), ("young", "0"), ("young", "1"), ("Total", "2"),
                                           ("Total", "3")])


_SHARED: list = []  # one SparkSession (one JVM) per test process, shared by the modules


def local_spark(tmp_path_factory, app: str, cores: int = 1):
    """The process's SparkSession on ``local[2]`` (started once: a JVM costs seconds), with
    ``cores`` shuffle partitions and no temporary views; hand it back with :func:`release`."""
    import atexit

    from pyspark.sql import SparkSession

    if not _SHARED:
        warehouse = tmp_path_factory.mktemp("spark-warehouse")
        # the tests run thousands of tiny queries: compiling each (whole-stage code generation)
        # and re-planning it (adaptive execution) costs more than running it; results are the
        # same either way
        s = (SparkSession.builder.master("local[2]").appName("protab-tests")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.codegen.wholeStage", "false")
             .config("spark.sql.adaptive.enabled", "false")
             .config("spark.sql.warehouse.dir", str(warehouse)).getOrCreate())
        s.sparkContext.setLogLevel("ERROR")
        atexit.register(s.stop)
        _SHARED.append(s)
    s = _SHARED[0]
    s.conf.set("spark.sql.shuffle.partitions", str(cores))
    return s


def release(s) -> None:
    """A module is done with the shared SparkSession: its temporary views dropped, the
    settings a module may change set back."""
    for table in s.catalog.listTables():
        if table.isTemporary:
            s.catalog.dropTempView(table.name)
    s.conf.unset("spark.sql.adaptive.coalescePartitions.enabled")
    s.conf.set("spark.sql.shuffle.partitions", "2")


def own_spark(conf: dict[str, str], master: str = "local[2]"):
    """The body of a module's ``spark`` fixture for a SparkSession of its own, built with the
    settings ``conf`` that a running Spark does not take (``spark.checkpoint.dir``): the
    process's shared session is stopped first (the next module that asks for it starts it
    again, in the same JVM) and this one is stopped after the module."""
    require_spark()
    from pyspark.sql import SparkSession

    while _SHARED:
        _SHARED.pop().stop()
    builder = (SparkSession.builder.master(master).appName("protab-tests-own")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.codegen.wholeStage", "false").config("spark.sql.adaptive.enabled", "false")
               .config("spark.sql.shuffle.partitions", "1"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    s = builder.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    try:
        yield s
    finally:
        s.stop()


def spark_fixture(tmp_path_factory, app: str, cores: int = 1):
    """The body of a module's ``spark`` fixture: ``yield from spark_fixture(...)`` (skipped
    without pyspark or Java)."""
    require_spark()
    s = local_spark(tmp_path_factory, app, cores)
    try:
        yield s
    finally:
        release(s)


#: set (to anything) to run the whole matrix through Spark Connect too ("spark-connect": the Spark
#: engine on a Connect server, tests/spark_connect_fixtures.py); tests/spark/test_spark_connect.py
#: runs a representative part of it on every run
CONNECT_MATRIX = "PROTAB_SPARK_CONNECT"


def engines_under_test() -> list:
    """``params`` of a module's ``engines`` fixture: every registered engine but the reference,
    each skipped (with the reason) where its runtime is missing; with ``PROTAB_SPARK_CONNECT``
    set, the Spark engine through Spark Connect as well."""
    params = []
    for name, cls in engines().items():
        if name == REFERENCE or name in PARTIAL:
            continue
        missing = cls.missing_runtime()
        skip = pytest.mark.skipif(missing is not None, reason=f"engine {name!r} is not installed here: {missing}")
        params.append(pytest.param(name, id=name, marks=skip))
        if name == "spark" and os.environ.get(CONNECT_MATRIX):
            params.append(pytest.param("spark-connect", id="spark-connect", marks=skip))
    return params


def only_on(session: pt.Session, name: str) -> None:
    """Skip a test of one engine's own behaviour (a refusal, a setting) on the other engines."""
    if session.engine.name != name:
        pytest.skip(f"a test of the {name} engine's own behaviour, not of the {session.engine.name} engine")


def open_session(name: str, tmp_path_factory, cores: int = 1):
    """A Session on the registered engine ``name`` and what undoes it: Spark on the process's
    local SparkSession (:func:`local_spark`), "spark-connect" on the process's Spark Connect
    session (tests/spark_connect_fixtures.py), any other engine by its name alone (in memory
    where it takes a ``database``)."""
    if name == "spark-connect":
        from spark_connect_fixtures import connect_spark

        s = connect_spark(tmp_path_factory)
        s.conf.set("spark.sql.shuffle.partitions", str(cores))
        return pt.Session.spark(s), lambda: release(s)
    if name == "spark":
        require_spark()
        s = local_spark(tmp_path_factory, "protab-tests", cores)
        return pt.Session.spark(s), lambda: release(s)
    options = {"database": ":memory:"} if "database" in engines()[name].options else {}
    return pt.Session.from_engine(name, **options), lambda: None


def engine_pair(name, tmp_path_factory, prepare, cores: int = 1):
    """The body of a module's ``engines`` fixture (``params=engines_under_test()``): a DuckDB
    Session and a Session on the engine ``name``, each prepared by ``prepare(session)``;
    yields (duckdb, other) and closes both."""
    duck = pt.Session(":memory:")
    other, undo = open_session(name, tmp_path_factory, cores)
    try:
        for s in (duck, other):
            prepare(s)
        yield duck, other
    finally:
        other.close()
        duck.close()
        undo()


def keyed_cell_key(s: pt.Session, records: pl.DataFrame, spec: pt.TableSpec, seed: str) -> pl.DataFrame:
    """``records`` as table persons with 32-bit record keys of ``seed`` (from pid), and its
    cell-key table ``spec`` (original counts kept) with a small p-table: the one table the
    checkpoint and executor-loss tests compare across engines."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the variance target of i = 1: not what those tests are about
        ptable = pt.PTable.maximum_entropy(D=3, V=2, js=1)
    s.register("persons", records, replace=True)
    s.add_record_keys("persons", id_column="pid", seed=seed, bits=32, name="rk")
    return s.cell_key("persons", spec, ptable, original=True)
