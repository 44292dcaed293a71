"""The same record keys and cell-key lookup in Spark SQL as in DuckDB (sql/spark/protab.sql)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import polars as pl
import pytest

import protab as pt
from protab import sql_text

pyspark = pytest.importorskip("pyspark", reason="pyspark (in the dev extra) is not installed")
if shutil.which("java") is None:  # pragma: no cover - CI machines have Java 17
    pytest.skip("Spark needs a Java runtime", allow_module_level=True)

SPARK_SQL = Path(__file__).resolve().parents[2] / "sql" / "spark" / "protab.sql"


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from spark_fixtures import local_spark, release

    s = local_spark(tmp_path_factory, "protab-tests")
    text = "\n".join(line for line in SPARK_SQL.read_text().splitlines() if not line.startswith("--"))
    for statement in re.split(r";\s*\n", text):
        if statement.strip():
            s.sql(statement)
    yield s
    release(s)


@pytest.fixture(scope="module")
def population():
    with pt.Session(":memory:") as s:
        s.con.execute(sql_text("demo_population.sql"))
        s.con.execute("CREATE TABLE persons AS SELECT pid, region, sex FROM protab_demo_population(4000)")
        s.add_record_keys("persons", id_column="pid", seed="spark-and-duckdb", bits=32)
        frame = s.sql("SELECT * FROM persons ORDER BY pid")
        p = pt.PTable.maximum_entropy(D=5, V=3, js=2)
        protected = s.cell_key("persons", pt.TableSpec({"region": None, "sex": None}), p)
    return frame, p, protected


def test_record_keys_are_the_same_in_spark(spark, population):
    frame, _, _ = population
    spark.createDataFrame(frame.drop("rkey").to_arrow()).createOrReplaceTempView("persons")
    keys = spark.sql(
        "SELECT pid, protab_record_key('spark-and-duckdb', CAST(pid AS STRING), 32) AS rkey "
        "FROM persons ORDER BY pid").toArrow()
    assert pl.from_arrow(keys)["rkey"].to_list() == frame["rkey"].to_list()


def test_cell_key_table_is_the_same_in_spark(spark, population):
    frame, p, protected = population
    spark.createDataFrame(frame.with_columns(pl.col("rkey").cast(pl.Int64)).to_arrow()).createOrReplaceTempView("persons")
    ks = p.keyspace(2**32).rename({"i": "protab_i", "v": "protab_v", "klo": "protab_klo", "khi": "protab_khi"})
    spark.createDataFrame(ks.to_arrow()).createOrReplaceTempView("protab_ptable")
    imin, imax, period = int(p.frame["i"].min()), p.imax, p.period
    rows = spark.sql(f"""
        WITH cells AS (
            SELECT coalesce(region, 'Total') AS region, coalesce(sex, 'Total') AS sex,
                   count(*) AS n, pmod(sum(rkey), 4294967296) AS ck
            FROM persons GROUP BY GROUPING SETS ((region, sex), (region), (sex), ()))
        SELECT c.region, c.sex, c.n + coalesce(p.protab_v, 0) AS n_pert
        FROM cells c LEFT JOIN protab_ptable p
          ON p.protab_i = protab_row_class(c.n, {imin}, {imax}, {period})
         AND c.ck BETWEEN p.protab_klo AND p.protab_khi""").collect()
    spark_cells = {(r.region, r.sex): r.n_pert for r in rows}
    duck_cells = dict(zip(zip(protected["region"], protected["sex"]), protected["n_pert"]))
    assert len(duck_cells) == 9 * 3
    assert spark_cells == duck_cells
