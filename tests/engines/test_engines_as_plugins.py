"""Engines as declared plug-ins (protab.engines.registry): an abstract contract, a registry of
engines with their option schemas, and one Session constructor per engine that refuses an
option of another engine by name."""

from __future__ import annotations

import duckdb
import pytest

import protab as pt
from protab.engines import SQL_PIECES, DuckDBEngine, Engine, SparkEngine, engines, register_engine, unregister_engine
from protab.errors import InputError


class _FakeSparkSession:
    """Looks like a pyspark SparkSession to the registry (the options are refused before any use)."""


_FakeSparkSession.__module__ = "pyspark.sql.session"
_FakeSparkSession.__name__ = "SparkSession"


def test_an_engine_without_the_contracts_methods_cannot_be_made():
    class Half(Engine):
        name = "half"

    with pytest.raises(TypeError, match="abstract"):
        Half()  # type: ignore[abstract]


def test_the_base_holds_no_engines_sql():
    assert not hasattr(Engine, "templates") and not hasattr(Engine, "dialect")
    for cls in (DuckDBEngine, SparkEngine):
        assert set(SQL_PIECES) <= set(cls.templates)


def test_duckdb_and_spark_are_registered_with_their_options():
    found = engines()
    assert found["duckdb"] is DuckDBEngine and found["spark"] is SparkEngine
    assert {"memory_limit", "threads", "read_only"} <= set(DuckDBEngine.options)
    assert set(SparkEngine.options) == {"spark_session", "checkpoint"}


def test_an_engine_without_a_template_is_refused_at_registration():
    class NoHex(DuckDBEngine):
        name = "no_hex"
        templates = {k: v for k, v in DuckDBEngine.templates.items() if k != "hex_integer"}

    with pytest.raises(TypeError, match="'hex_integer'"):
        register_engine(NoHex)
    assert "no_hex" not in engines()


def test_another_class_under_a_registered_name_is_refused():
    class Impostor(DuckDBEngine):
        name = "spark"

    with pytest.raises(ValueError, match="registered already"):
        register_engine(Impostor)
    assert engines()["spark"] is SparkEngine


def test_a_registered_engine_opens_by_name():
    class Other(DuckDBEngine):
        name = "other_duckdb"

    register_engine(Other)
    try:
        with pt.Session.from_engine("other_duckdb", database=":memory:", threads=1) as s:
            assert type(s.engine) is Other and s.engine.rows("SELECT 41 + 1") == [(42,)]
    finally:
        unregister_engine("other_duckdb")


@pytest.mark.parametrize("make, option, engine", [
    (lambda: pt.Session.spark(_FakeSparkSession(), threads=2), "threads", "spark"),
    (lambda: pt.Session(engine=_FakeSparkSession(), memory_limit="4GB"), "memory_limit", "spark"),
    (lambda: pt.Session(":memory:", engine=_FakeSparkSession()), "database", "spark"),
    (lambda: pt.Session.from_engine("spark", spark_session=None, read_only=True), "read_only", "spark"),
    (lambda: pt.Session.duckdb(":memory:", spark_session=object()), "spark_session", "duckdb"),
    (lambda: pt.Session.from_engine("duckdb", database=":memory:", colour="red"), "colour", "duckdb"),
])
def test_an_option_of_another_engine_is_one_input_error_naming_it(make, option, engine):
    with pytest.raises(InputError) as info:
        make()
    message = str(info.value)
    accepted = ", ".join(repr(o) for o in engines()[engine].options)
    assert f"the {engine} engine takes no option {option!r}" in message and accepted in message


def test_an_open_engine_takes_no_options():
    engine = DuckDBEngine(duckdb.connect(":memory:"))
    try:
        with pytest.raises(InputError, match="'threads'.*open already|open already.*'threads'"):
            pt.Session(engine=engine, threads=2)
        with pt.Session.from_engine(engine) as s:
            assert s.engine is engine
    finally:
        engine.close()


def test_an_unknown_engine_names_the_registered_ones():
    with pytest.raises(InputError, match="no engine named 'flink'.*'duckdb', 'postgres', 'spark'"):
        pt.Session(engine="flink")
    with pytest.raises(InputError, match="registered engine"):
        pt.Session.from_engine(3.5)


def test_session_keeps_opening_duckdb_by_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pt.Session() as s, pt.Session.duckdb(":memory:", threads=1, progress=False) as m:
        assert s.engine.name == m.engine.name == "duckdb"
        assert s.database == "protab.duckdb" and m.database == ":memory:"
    assert (tmp_path / "protab.duckdb").exists()
