"""Published tables written as Parquet by the engine (``path=`` of cell_key, tabulate,
perturb_inner): the same columns, types and rows in the same order as the frame the call
returns without ``path``; DuckDB writes one file, Spark's executors a folder of part files;
a failed write leaves nothing behind and keeps an older output."""

from __future__ import annotations

import os
import shutil

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import protab as pt
from protab.engines import DuckDBEngine
from protab.errors import InputError, ProtabError

SEED = "parquet-output-tests"
N = 3000

CODES = ["0101", "0102", "0201", "0202", "0203", "0301"]
REGION = pt.Hierarchy.from_code_lengths(CODES, [2, 2])
SPEC = pt.TableSpec({"region": REGION, "age": None}, weight="w")
SPEC_SUMS = pt.TableSpec({"region": REGION, "age": None}, sums=["income"])
P = pt.PTable.maximum_entropy(D=3, V=1.5, js=1)
MAGNITUDE = pt.MagnitudeCKM(
    pt.MagnitudePTable.maximum_entropy(10, 3, step=2, icat=[1, 5, 10], optim=[4, 1, 1]),
    fp=100, p=(0.3, 0.03), q=3, epsilon=[1, 0.5],
)


def _records() -> pl.DataFrame:
    i = pl.int_range(0, N, eager=True)
    return pl.DataFrame({
        "pid": i,
        "region": pl.Series(CODES).gather((i * 7) % len(CODES)),
        "age": ((i * 13) % 9).cast(pl.String),
        "w": (1 + (i % 4) * 0.25).cast(pl.Float64),
        "income": ((i * 37) % 1000).cast(pl.Float64) - 100.0,
    })


RECORDS = _records()


def _calls(s: pt.Session, table: str) -> dict[str, tuple]:
    """name → (method, args, kwargs) of the published tables compared here."""
    calls = {
        "cell_key": (s.cell_key, (table, SPEC, P), {"original": True}),
        "cell_key_threshold": (s.cell_key, (table, SPEC, P), {"threshold": 3}),
        "tabulate": (s.tabulate, (table, SPEC), {"cell_keys": True}),
        "perturb_inner": (s.perturb_inner, (table, SPEC, P), {"original": True}),
    }
    calls["magnitude"] = (s.cell_key, (table, SPEC_SUMS, P), {"magnitude": MAGNITUDE, "original": True})
    calls["tabulate_top"] = (s.tabulate, (table, SPEC_SUMS), {"top_k": 3})
    return calls


def _read(path: str) -> pl.DataFrame:
    """A Parquet file, or Spark's folder of part files in the order of their names."""
    if os.path.isdir(path):
        parts = sorted(f for f in os.listdir(path) if f.endswith(".parquet"))
        return pl.concat([pl.read_parquet(os.path.join(path, f)) for f in parts])
    return pl.read_parquet(path)


@pytest.fixture(scope="module")
def duck():
    s = pt.Session(":memory:", progress=False)
    s.register("persons", RECORDS)
    s.add_record_keys("persons", id_column="pid", seed=SEED)
    yield s
    s.close()


@pytest.mark.parametrize("name", ["cell_key", "cell_key_threshold", "tabulate", "perturb_inner", "magnitude",
                                  "tabulate_top"])
def test_duckdb_writes_what_it_returns(duck, tmp_path, name):
    method, args, kw = _calls(duck, "persons")[name]
    frame = method(*args, **kw)
    target = tmp_path / f"{name}.parquet"
    out = method(*args, **kw, path=target)
    assert out == os.fspath(target)
    assert_frame_equal(_read(out), frame)  # values, types and order
    assert sorted(os.listdir(tmp_path)) == [target.name]  # no temporary file left


def test_duckdb_failed_write_keeps_the_older_file(duck, tmp_path, monkeypatch):
    target = tmp_path / "t.parquet"
    duck.cell_key("persons", SPEC, P, path=target)
    before = target.read_bytes()

    def broken(self, sql, params, path):
        with open(path, "wb") as fh:
            fh.write(b"half")
        raise RuntimeError("disk full")

    monkeypatch.setattr(DuckDBEngine, "write_parquet", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        duck.cell_key("persons", SPEC, P, original=True, path=target)
    assert target.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["t.parquet"]


def test_duckdb_bad_paths_are_clear_errors(duck, tmp_path):
    with pytest.raises(ProtabError, match="is a folder"):
        duck.cell_key("persons", SPEC, P, path=tmp_path)
    with pytest.raises(ProtabError, match="NUL"):
        duck.cell_key("persons", SPEC, P, path=str(tmp_path / "a\x00b.parquet"))
    assert os.listdir(tmp_path) == []


# -- Spark ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    pytest.importorskip("pyspark", reason="pyspark (in the dev extra) is not installed")
    if shutil.which("java") is None:  # pragma: no cover - CI machines have Java 17 (make java)
        pytest.skip("Spark needs a Java runtime (make java installs Java 17)")
    from spark_fixtures import local_spark, release

    s = local_spark(tmp_path_factory, "protab-parquet-output", cores=2)
    # several part files, so that their order is tested: no coalescing of shuffle partitions
    s.conf.set("spark.sql.shuffle.partitions", "4")
    s.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    yield s
    release(s)


@pytest.fixture(scope="module")
def sparks(spark, duck):
    s = pt.Session.spark(spark)
    s.register("persons", RECORDS)
    s.add_record_keys("persons", id_column="pid", seed=SEED)
    yield s
    s.close()


@pytest.mark.parametrize("name", ["cell_key", "cell_key_threshold", "tabulate", "perturb_inner", "magnitude",
                                  "tabulate_top"])
def test_spark_executors_write_what_duckdb_returns(duck, sparks, tmp_path, name):
    method, args, kw = _calls(duck, "persons")[name]
    expected = method(*args, **kw)
    method, args, kw = _calls(sparks, "persons")[name]
    target = tmp_path / name
    out = method(*args, **kw, path=target)
    assert out == os.fspath(target)
    parts = [f for f in os.listdir(target) if f.endswith(".parquet")]
    assert len(parts) > 1  # written by several tasks, read back in the order of their names
    assert_frame_equal(_read(out), expected)
    assert sorted(os.listdir(tmp_path)) == [name]  # the temporary folder renamed into place


def test_spark_replaces_an_older_folder_only_when_whole(duck, sparks, tmp_path, monkeypatch):
    from protab.engines import SparkEngine

    target = tmp_path / "t"
    sparks.cell_key("persons", SPEC, P, path=target)
    assert "n" not in _read(os.fspath(target)).columns
    sparks.cell_key("persons", SPEC, P, original=True, path=target)  # replaced
    second = _read(os.fspath(target))
    assert_frame_equal(second, duck.cell_key("persons", SPEC, P, original=True))

    def broken(self, sql, params, path):
        os.makedirs(path)
        with open(os.path.join(path, "part-00000.parquet"), "wb") as fh:
            fh.write(b"half")
        raise RuntimeError("executor lost")

    monkeypatch.setattr(SparkEngine, "write_parquet", broken)
    with pytest.raises(RuntimeError, match="executor lost"):
        sparks.cell_key("persons", SPEC, P, path=target)
    assert_frame_equal(_read(os.fspath(target)), second)
    assert sorted(os.listdir(tmp_path)) == ["t"]


def test_spark_refuses_a_file_where_it_writes_a_folder(sparks, tmp_path):
    target = tmp_path / "t.parquet"
    target.write_bytes(b"not a folder")
    with pytest.raises(InputError, match="a file of that name exists"):
        sparks.cell_key("persons", SPEC, P, path=target)
    assert target.read_bytes() == b"not a folder"


def test_outputs_never_replace_the_database_or_registered_files(tmp_path):
    src = tmp_path / "persons.parquet"
    RECORDS.write_parquet(src)
    db = tmp_path / "db.duckdb"
    with pt.Session(db, progress=False) as s:
        s.register("persons", src)
        s.add_record_keys("persons", id_column="pid", seed=SEED)
        for bad, what in [(db, "database"), (src, "registered"), (tmp_path, "registered")]:
            with pytest.raises(ProtabError, match=f"would replace .*{what}|is a folder"):
                s.cell_key("persons", SPEC, P, path=bad)
        with pytest.raises(InputError, match="would replace the session's database"):
            s.cell_key("persons", SPEC, P, path=str(db) + ".wal")
        assert_frame_equal(pl.read_parquet(src), RECORDS)
        assert s.cell_key("persons", SPEC, P, path=tmp_path / "out.parquet")


def test_spark_never_replaces_the_parquet_it_reads(spark, tmp_path):
    folder = tmp_path / "lake" / "persons"
    folder.mkdir(parents=True)
    RECORDS.write_parquet(folder / "part-0.parquet")
    s = pt.Session.spark(spark)
    s.register("lake_persons", str(folder / "*.parquet"))
    s.add_record_keys("lake_persons", id_column="pid", seed=SEED)
    for bad in (folder, tmp_path / "lake", folder / "part-0.parquet"):
        with pytest.raises(InputError, match="would replace files registered"):
            s.cell_key("lake_persons", SPEC, P, path=bad)
    assert_frame_equal(pl.read_parquet(folder / "part-0.parquet"), RECORDS)
