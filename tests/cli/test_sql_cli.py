"""sql/protab.sql in the plain duckdb command line (`.read`), as an analyst would use it."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from refdata import HANDBOOK

import protab as pt
from protab import sql_text
from protab.engines.duckdb_ptable import _CREATE, lookup_layout

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"
# the duckdb CLI of the environment running the tests (a venv's bin need not be on PATH)
_HERE = Path(sys.executable).parent / "duckdb"
DUCKDB = str(_HERE) if _HERE.exists() else shutil.which("duckdb")

pytestmark = pytest.mark.skipif(DUCKDB is None, reason="the duckdb CLI (pip package duckdb-cli) is not installed")


def run_cli(*statements: str) -> str:
    args = [DUCKDB, ":memory:", "-csv", "-noheader", "-c", f".read {SQL_DIR / 'protab.sql'}"]
    for s in statements:
        args += ["-c", s]
    res = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def install_statements(ptable: pt.PTable, modulus: int) -> list[str]:
    """The tables and the row install_ptable writes for ckm(), as SQL (numbers only)."""
    row = lookup_layout(ptable, modulus)
    lists = ", ".join("[" + ", ".join(str(x) for x in row[k].tolist()) + "]" for k in ("lo", "hi", "ends", "noise"))
    return [
        _CREATE,  # the tables `protab ptable install` creates
        f"INSERT INTO protab_ptable_lookup VALUES ({row['imin']}, {row['imax']}, {row['period']}, {modulus}, "
        f"{row['width']}, {row['classes']}, {lists})"
    ]


def test_sql_file_is_shipped_with_the_package():
    assert sql_text() == (SQL_DIR / "protab.sql").read_text(encoding="utf-8")


def test_handbook_example_in_the_duckdb_cli():
    p = pt.PTable.from_frame(HANDBOOK)
    out = run_cli(
        *install_statements(p, 10**8),
        "CREATE TABLE micro AS SELECT * FROM (VALUES ('A', 'male', 90000000), ('B', 'male', 30000000), "
        "('C', 'male', 60000000)) t(id, sex, rkey)",
        "SELECT sex, ckm(count(*), sum(rkey)) FROM micro GROUP BY ALL",
    )
    assert out == "male,4"


def test_cli_macros_agree_with_the_python_session():
    with pt.Session(":memory:") as s:
        s.con.execute(sql_text("demo_population.sql"))
        s.con.execute("CREATE TABLE persons AS SELECT * FROM protab_demo_population(3000)")
        s.add_record_keys("persons", id_column="pid", seed="cli-seed", bits=16)
        p = pt.PTable.maximum_entropy(D=5, V=3, js=2)
        out = s.cell_key("persons", pt.TableSpec({"region": None, "sex": None}), p)
        want = {(r, x): n for r, x, n in out.filter(
            (out["region_level"] == 1) & (out["sex_level"] == 1)).select("region", "sex", "n_pert").rows()}
    got = run_cli(
        *install_statements(p, 2**16),
        f".read {SQL_DIR / 'demo_population.sql'}",
        "CREATE TABLE persons AS SELECT *, protab_record_key('cli-seed', pid, 16) AS rkey "
        "FROM protab_demo_population(3000)",
        "SELECT region, sex, ckm(count(*), sum(rkey)) FROM persons GROUP BY ALL ORDER BY ALL",
    )
    rows = [line.split(",") for line in got.splitlines()]
    assert {(r, x): int(n) for r, x, n in rows} == want


def test_record_key_macro_matches_the_documented_hash():
    out = run_cli("SELECT protab_record_key('s', 42, 32), protab_record_key('s', 'abc', 8)")
    a, b = (int(x) for x in out.split(","))
    assert a == int(hashlib.sha256(b"s\x1f42").hexdigest()[:8], 16)
    assert b == int(hashlib.sha256(b"s\x1fabc").hexdigest()[:8], 16) % 256


CKM_BY_SEX = "SELECT sex, ckm(count(*), sum(rkey)) AS n FROM persons GROUP BY ALL ORDER BY 1"


def _keyed_demo_database(db, persons: int):
    """A database file with the demo population, record keys and an installed p-table;
    returns the protected counts by sex that the Session's macros give."""
    with pt.Session(db) as s:
        s.con.execute(sql_text("demo_population.sql"))
        s.con.execute("CREATE TABLE persons AS SELECT * FROM protab_demo_population(?)", [persons])
        s.add_record_keys("persons", id_column="pid", seed="file-seed")
        s.install_ptable(pt.PTable.maximum_entropy(D=5, V=3, js=2), table="persons")
        return s.sql(CKM_BY_SEX)


def test_the_cli_opens_a_database_file_written_by_the_session(tmp_path):
    """The duckdb CLI from PyPI may be older than the Python package: the file must open."""
    db = tmp_path / "census.duckdb"
    want = _keyed_demo_database(db, 2000).rows()
    res = subprocess.run(
        [DUCKDB, str(db), "-csv", "-noheader", "-c", f".read {SQL_DIR / 'protab.sql'}",
         "-c", "SELECT sex, ckm(count(*), sum(rkey)) FROM persons GROUP BY ALL ORDER BY 1"],
        capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    got = [tuple(line.split(",")) for line in res.stdout.strip().splitlines()]
    assert [(s, int(n)) for s, n in got] == want


def test_a_read_only_session_uses_the_installed_ptable(tmp_path):
    """Analysts open the published database read-only: ckm must see the stored p-table."""
    db = tmp_path / "ro.duckdb"
    want = _keyed_demo_database(db, 500)
    with pt.Session(db, read_only=True) as s:
        got = s.sql(CKM_BY_SEX)
    assert got.rows() == want.rows()
    # a read-only database without one still refuses to give unprotected counts
    empty = tmp_path / "empty.duckdb"
    with pt.Session(empty) as s:
        s.con.execute("CREATE TABLE t AS SELECT 1 AS k")
        s.con.execute("DROP TABLE protab_ptable")
        s.con.execute("DROP TABLE protab_ptable_meta")
    with pt.Session(empty, read_only=True) as s, pytest.raises(Exception, match="no p-table is installed"):
        s.sql("SELECT ckm(count(*), sum(k)) FROM t")
