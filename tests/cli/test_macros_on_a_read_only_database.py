"""sql/protab.sql in the duckdb command line on a database opened read-only (`duckdb -readonly`):
`.read` succeeds (the file makes temporary macros and no table), ckm() and ckm_weighted() read
the p-table installed in the file and give the Session's counts, and the file is not changed. A
read-write Session still keeps the macros and the p-table tables in the database."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import protab as pt
from protab import sql_text
from protab.cli.macros import macro_path

_HERE = Path(sys.executable).parent / "duckdb"
DUCKDB = str(_HERE) if _HERE.exists() else shutil.which("duckdb")
pytestmark = pytest.mark.skipif(DUCKDB is None, reason="the duckdb CLI (pip package duckdb-cli) is not installed")

BY_SEX = "SELECT sex, ckm(count(*), sum(rkey)) FROM persons GROUP BY ALL ORDER BY 1"
WEIGHTED = "SELECT region, ckm_weighted(count(*), sum(rkey), sum(weight)) FROM persons GROUP BY ALL ORDER BY 1"


def _cli(db: Path, *commands: str) -> subprocess.CompletedProcess:
    args = [DUCKDB, "-readonly", str(db), "-csv", "-noheader"]
    for c in commands:
        args += ["-c", c]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def _digest(db: Path) -> str:
    return hashlib.sha256(db.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    """A database file with persons, record keys and an installed p-table; the Session's counts."""
    db = tmp_path_factory.mktemp("readonly") / "census.duckdb"
    with pt.Session(db, progress=False) as s:
        s.con.execute(sql_text("demo_population.sql"))
        s.con.execute("CREATE TABLE persons AS SELECT * FROM protab_demo_population(2000)")
        s.add_record_keys("persons", id_column="pid", seed="read-only-seed")
        s.install_ptable(pt.PTable.maximum_entropy(D=5, V=3, js=2), table="persons")
        want = {"by_sex": s.sql(BY_SEX).rows(), "weighted": s.sql(WEIGHTED).rows()}
    return db, want


def test_read_succeeds_and_ckm_uses_the_installed_ptable(keyed):
    db, want = keyed
    before = _digest(db)
    res = _cli(db, f".read {macro_path()}", BY_SEX, WEIGHTED)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    lines = res.stdout.strip().splitlines()
    by_sex = [(s, int(n)) for s, n in (line.split(",") for line in lines[: len(want["by_sex"])])]
    assert by_sex == want["by_sex"]
    weighted = [(r, float(w)) for r, w in (line.split(",") for line in lines[len(want["by_sex"]):])]
    assert [r for r, _ in weighted] == [r for r, _ in want["weighted"]]
    assert all(abs(w - v) <= 1e-9 * max(1.0, abs(v)) for (_, w), (_, v) in zip(weighted, want["weighted"]))
    assert _digest(db) == before  # a read-only session changed nothing


def test_the_line_protab_macros_prints_works_read_only(keyed, capsys):
    from protab import cli

    db, want = keyed
    assert cli.main(["macros", "--read"]) == 0
    line = capsys.readouterr().out.strip()
    res = _cli(db, line, BY_SEX)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert [(s, int(n)) for s, n in (x.split(",") for x in res.stdout.split())] == want["by_sex"]


def test_a_read_write_session_keeps_the_macros_in_the_database(keyed):
    """As before: the analyst's CLI finds ckm() in a file a Session wrote, even without `.read`."""
    db, want = keyed
    res = _cli(db, BY_SEX)
    assert res.returncode == 0, res.stderr
    assert [(s, int(n)) for s, n in (x.split(",") for x in res.stdout.split())] == want["by_sex"]


def test_read_succeeds_on_a_read_only_database_without_protab(tmp_path):
    """A database protab never opened: the macros load; record keys work; ckm() refuses."""
    db = tmp_path / "plain.duckdb"
    subprocess.run([DUCKDB, str(db), "-c", "CREATE TABLE t AS SELECT range AS id FROM range(10)"],
                   check=True, capture_output=True, timeout=60)
    res = _cli(db, f".read {macro_path()}", "SELECT protab_record_key('s', 7, 8)")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    with pt.Session(":memory:", progress=False) as s:
        assert int(res.stdout.strip()) == s.sql("SELECT protab_record_key('s', 7, 8) AS k")["k"][0]
    refused = _cli(db, f".read {macro_path()}", "SELECT ckm(count(*), sum(id)) FROM t")
    assert refused.returncode != 0 and "protab_ptable_lookup" in refused.stderr and refused.stdout.strip() == ""
