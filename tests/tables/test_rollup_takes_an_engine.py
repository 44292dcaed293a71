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
