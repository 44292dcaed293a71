"""The SQL of a table request (protab.rollup, floor 4) runs on the engine object it is handed:
it imports no engine and no session (docs/design.md, the floors of the house), and a raw DuckDB
connection is refused rather than wrapped."""

from __future__ import annotations

import subprocess
import sys

import duckdb
import pytest

import protab as pt
from protab.engines import DuckDBEngine
from protab.rollup import TableRun


def test_a_request_runs_on_the_engine_it_is_handed():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES ('a', 1), ('b', 2), ('a', 3)) v(g, x)")
    spec = pt.TableSpec({"g": None})
    with TableRun(DuckDBEngine(con), "t", spec) as run:
        out = run.published()
    # Total = 3 records, a = 2, b = 1, in publication order
    assert out["g"].to_list() == ["Total", "a", "b"]
    assert out["n"].to_list() == [3, 2, 1]
    with pytest.raises(TypeError, match="engine"):
        TableRun(con, "t", spec)


def test_the_sql_of_a_request_imports_no_engine_nor_session():
    code = ("import sys, protab.rollup, protab.magnitude; "
            "print(sorted(m for m in sys.modules if m.startswith(('protab.engines', 'protab.session'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_run_without_a_session_cache_leaves_no_table_behind():
    """The tables a Session keeps beyond a run (a hierarchy's codes and bridge, the p-table's
    lookup) are dropped when the run closes if nobody handed it a cache to keep them in."""
    with pt.Session(":memory:", progress=False) as s:
        s.con.execute("CREATE TABLE t AS SELECT ['a', 'b', 'c'][i % 3 + 1] AS g, i AS id FROM range(40) r(i)")
        s.add_record_keys("t", id_column="id", seed="no-cache")
        before = set(s.sql("SELECT table_name FROM duckdb_tables()")["table_name"])
        spec = pt.TableSpec({"g": pt.Hierarchy.flat(["a", "b", "c"])})
        with TableRun(DuckDBEngine(s.con), "t", spec, key=s.record_key("t")) as run:
            out = run.perturb(pt.PTable.maximum_entropy(D=2, V=0.9), original=True, threshold=None)
            during = set(s.sql("SELECT table_name FROM duckdb_tables()")["table_name"]) - before
        assert out is not None and out["n"].to_list() == [40, 14, 13, 13]
        assert during  # the run made tables (codes, bridge, lookup) ...
        assert set(s.sql("SELECT table_name FROM duckdb_tables()")["table_name"]) == before  # ... and dropped them
