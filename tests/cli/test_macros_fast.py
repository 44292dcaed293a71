"""The SQL macros ckm()/ckm_weighted() over the direct-index p-table lookup (issue 13, part 3).

The macro must give exactly the counts of Session.cell_key (a SQL join on key intervals) and
of the ONS package (a pandas merge on (pcv, ckey)), and PTable.lookup (a NumPy search) on keys
the tables do not reach, for every kind of installed p-table.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import protab as pt
from protab import sql_text
from protab.engines.duckdb_ptable import _CREATE, install_ptable, lookup_layout, upgrade_installed
from protab.errors import InputError

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"
_HERE = Path(sys.executable).parent / "duckdb"
DUCKDB = str(_HERE) if _HERE.exists() else shutil.which("duckdb")

# microdata in SQL: three flat dimensions with skewed sizes (empty, small and cells of several
# thousand records), a weight and an id
GEN = """
CREATE OR REPLACE TABLE t AS
SELECT range AS pid,
       'g' || CAST(floor(6 * pow((hash(range * 3) % 10007) / 10007.0, 3)) AS INTEGER) AS g,
       'a' || CAST(floor(9 * pow((hash(range * 3 + 1) % 10007) / 10007.0, 2)) AS INTEGER) AS a,
       'x' || CAST(floor(25 * pow((hash(range * 3 + 2) % 10007) / 10007.0, 4)) AS INTEGER) AS x,
       0.5 + (hash(range * 7) % 100) / 40.0 AS weight
FROM range(?)
"""
DIMS = ["g", "a", "x"]
MACRO = "SELECT g, a, x, count(*) AS n, ckm(count(*), sum(rkey)) AS n_pert FROM t GROUP BY ALL"


def ons_layout() -> pt.PTable:
    """An ONS-layout p-table (pcv 1..750, 8-bit ckeys, period 250) whose noise depends on
    the key differently in every row: a maximum-entropy row with its keys rotated by row."""
    ons = pt.PTable.maximum_entropy(D=3, V=1).to_ons(256)
    ons = ons.with_columns(ckey=(pl.col("ckey") + 37 * pl.col("pcv")) % 256)
    return pt.PTable.from_ons(ons)


def flat_cell_key(s: pt.Session, p: pt.PTable, weight: str | None = None) -> pl.DataFrame:
    spec = pt.TableSpec(dict.fromkeys(DIMS), margins=False, drop_empty=True, weight=weight)
    return s.cell_key("t", spec, p, original=True).select(
        DIMS + ["n", "n_pert"] + (["w_pert"] if weight else []))


def keyed_session(records: int, **keys) -> pt.Session:
    s = pt.Session(":memory:", progress=False)
    s.con.execute(GEN, [records])
    s.add_record_keys("t", **keys)
    return s


def assert_macro_equals_cell_key(s: pt.Session, p: pt.PTable, modulus: int) -> pl.DataFrame:
    install_ptable(s.con, p, modulus)
    want = flat_cell_key(s, p).sort(DIMS)
    got = s.sql(MACRO).sort(DIMS)
    assert got.height == want.height > 20
    assert got["n"].to_list() == want["n"].to_list()
    assert got["n_pert"].to_list() == want["n_pert"].to_list()
    # and the NumPy reference, with its own row-class rule
    keys = s.sql("SELECT g, a, x, CAST(sum(rkey) % ? AS BIGINT) AS k FROM t GROUP BY ALL", [modulus]).sort(DIMS)
    assert got["n_pert"].to_list() == p.lookup(got["n"].to_numpy(), keys["k"].to_numpy(), modulus).tolist()
    assert (got["n_pert"] != got["n"]).any()  # the p-table moved some counts
    return got


@pytest.mark.parametrize("bits", [32, 16])
def test_maximum_entropy_with_integer_keys(bits):
    with keyed_session(4000, id_column="pid", seed="fast-macro", bits=bits) as s:
        assert_macro_equals_cell_key(s, pt.PTable.maximum_entropy(D=5, V=3, js=2), 2**bits)


def test_maximum_entropy_with_decimal_keys():
    with pt.Session(":memory:", progress=False) as s:
        s.con.execute(GEN, [4000])
        s.con.execute("ALTER TABLE t ADD COLUMN u DECIMAL(10, 8)")
        s.con.execute("UPDATE t SET u = CAST((hash(pid * 11) % 100000000) AS DECIMAL(18, 0)) / 100000000")
        s.add_record_keys("t", record_key_column="u", decimals=8)
        assert_macro_equals_cell_key(s, pt.PTable.maximum_entropy(D=5, V=3, js=2), 10**8)


def test_ons_layout_with_8_bit_keys_and_periodic_row_classes():
    """750 row classes, rows 501..750 repeating for counts above 750 (period 250)."""
    p = ons_layout()
    assert (p.imax, p.period) == (750, 250)
    assert lookup_layout(p, 256)["classes"] == 750
    with keyed_session(20000, id_column="pid", seed="ons", bits=8) as s:
        got = assert_macro_equals_cell_key(s, p, 256)
    assert got["n"].max() > 1500 and got["n"].min() < 10  # classes 1..750 and periodic ones


def test_periodic_row_classes_of_a_short_ptable():
    rows = [(i, v, lb, ub) for i in range(5)
            for v, lb, ub in ([(0, 0, 100)] if i == 0 else [(-1, 0, 30 - 5 * i), (0, 30 - 5 * i, 70), (1, 70, 100)])]
    p = pt.PTable(pl.DataFrame(rows, schema=["i", "v", "lb_n", "ub_n"], orient="row"), den=100, period=3)
    assert (p.imax, p.period) == (4, 3)
    with keyed_session(3000, id_column="pid", seed="period", bits=20) as s:
        got = assert_macro_equals_cell_key(s, p, 2**20)
    assert got["n"].max() > 4 * p.imax


def test_against_the_ons_package():
    """ONSdigital cell-key-perturbation 3.1.0 on its own generated data: its 10-5 p-table and
    a key-dependent ONS-layout one, with cells above 750 (periodic rows)."""
    from cell_key_perturbation.create_perturbed_table import create_perturbed_table
    from cell_key_perturbation.utils.generate_test_data import generate_test_data
    from cell_key_perturbation.utils.generate_test_ptable import generate_ptable_10_5_rule

    micro = generate_test_data(size=12000)
    ons_105 = generate_ptable_10_5_rule()
    rotated = ons_layout().to_ons(256).to_pandas()
    with pt.Session(":memory:", progress=False) as s:
        s.register("micro", micro)
        s.add_record_keys("micro", record_key_column="record_key", bits=8)
        for ptable, tab_vars in ((ons_105, ["var5", "var8"]), (rotated, ["var5", "var8"]), (rotated, ["var2"])):
            theirs = create_perturbed_table(data=micro, ptable=ptable, geog=["var1"], tab_vars=tab_vars,
                                            record_key="record_key", threshold=0)
            want = {tuple(str(x) for x in r[:-2]): (int(r[-2]), int(r[-1]))
                    for r in theirs[["var1", *tab_vars, "pre_sdc_count", "count"]].itertuples(index=False)
                    if r[-2] > 0}
            install_ptable(s.con, pt.PTable.from_ons(ptable), 256)
            cols = ", ".join(["var1", *tab_vars])
            got = {tuple(str(x) for x in r[:-2]): (r[-2], r[-1]) for r in s.sql(
                f"SELECT {cols}, count(*), ckm(count(*), sum(rkey)) FROM micro GROUP BY ALL").rows()}
            assert got == want
            assert any(n != m for n, m in got.values())
    assert max(n for n, _ in want.values()) > 750


def test_keys_near_every_interval_boundary_with_crowded_buckets():
    """Many intervals one p-table unit wide (hundreds in one bucket of keys) at a 40-bit
    modulus: the macro against PTable.lookup on keys at, before and after every boundary."""
    rng = np.random.default_rng(13)
    rows = []
    for i in range(6):
        cuts = np.unique(np.concatenate([rng.integers(1, 400, 25), rng.integers(1, 10**8, 15), [5 * 10**7]]))
        bounds = np.concatenate([[0], cuts, [10**8]])
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            rows.append((i, int(rng.integers(-min(i, 2), 3)), int(lo), int(hi)))
    p = pt.PTable(pl.DataFrame(rows, schema=["i", "v", "lb_n", "ub_n"], orient="row"), den=10**8, period=2)
    M = 2**40
    layout = lookup_layout(p, M)
    assert (np.asarray(layout["hi"]) - np.asarray(layout["lo"])).max() > 50  # crowded buckets
    starts = p.keyspace(M)["klo"].unique().to_numpy()
    keys = np.unique(np.concatenate([starts, starts - 1, starts + 1, rng.integers(0, M, 2000), [M - 1]]))
    keys = keys[(keys >= 0) & (keys < M)]
    n = rng.integers(0, 12, keys.size)
    want = p.lookup(n, keys, M)
    with pt.Session(":memory:", progress=False) as s:
        install_ptable(s.con, p, M)
        s.con.register("cells", pl.DataFrame({"n": n, "k": keys}).to_arrow())
        got = s.sql("SELECT n, k, ckm(n, k) AS np FROM cells ORDER BY k")
    order = np.argsort(keys)
    assert got["np"].to_list() == want[order].tolist()
    # a key sum past the modulus is reduced modulo M
    with pt.Session(":memory:", progress=False) as s:
        install_ptable(s.con, p, M)
        big = s.sql("SELECT ckm(7, CAST(? AS HUGEINT)) AS a, ckm(7, ?) AS b",
                    [str(3 * M + int(keys[5])), int(keys[5])]).row(0)
    assert big[0] == big[1] == int(p.lookup([7], [keys[5]], M)[0])


def test_zero_cells_and_counts_below_the_smallest_row():
    """A zero cell (a LEFT JOIN's count 0, key sum NULL) and counts below imin keep their value;
    row 0 of a p-table that has one applies to zeros."""
    ons = ons_layout()  # rows from 1: zeros and NULL key sums stay
    maxent = pt.PTable.maximum_entropy(D=5, V=3, js=2)  # row 0 keeps zeros
    with keyed_session(2000, id_column="pid", seed="zeros", bits=8) as s:
        s.con.execute("CREATE TABLE grid AS SELECT * FROM (SELECT DISTINCT g FROM t), (SELECT DISTINCT x FROM t)")
        q = ("SELECT grid.g, grid.x, count(t.pid) AS n, ckm(count(t.pid), sum(t.rkey)) AS n_pert "
             "FROM grid LEFT JOIN t USING (g, x) GROUP BY ALL ORDER BY ALL")
        for p in (ons, maxent):
            install_ptable(s.con, p, 256)
            got = s.sql(q)
            zeros = got.filter(pl.col("n") == 0)
            assert zeros.height > 0 and (zeros["n_pert"] == 0).all()
            spec = pt.TableSpec({"g": None, "x": None}, margins=False)
            want = s.cell_key("t", spec, p, original=True).sort("g", "x")
            assert got.select("g", "x", "n", "n_pert").rows() == want.select("g", "x", "n", "n_pert").rows()
        assert s.sql("SELECT ckm(0, 17) AS a, ckm(3, NULL) AS b, ckm(3, -5) AS c").row(0) == (0, 3, 3)


def test_weighted_macro_equals_the_weighted_cell_key():
    p = pt.PTable.maximum_entropy(D=5, V=3, js=2)
    with keyed_session(4000, id_column="pid", seed="weights", bits=32) as s:
        install_ptable(s.con, p, 2**32)
        want = flat_cell_key(s, p, weight="weight").sort(DIMS)
        got = s.sql("SELECT g, a, x, ckm_weighted(count(*), sum(rkey), sum(weight)) AS w_pert "
                    "FROM t GROUP BY ALL").sort(DIMS)
    assert got.select(DIMS).rows() == want.select(DIMS).rows()
    np.testing.assert_allclose(got["w_pert"].to_numpy(), want["w_pert"].to_numpy(), rtol=1e-12)


def test_no_ptable_raises_and_install_replaces():
    with keyed_session(500, id_column="pid", seed="none", bits=16) as s:
        with pytest.raises(Exception, match="no p-table is installed"):
            s.sql(MACRO)
        install_ptable(s.con, ons_layout(), 2**16)
        first = s.sql(MACRO).sort(DIMS)
        install_ptable(s.con, pt.PTable.maximum_entropy(D=5, V=3, js=2), 2**16)
        assert s.con.execute("SELECT count(*) FROM protab_ptable_lookup").fetchall() == [(1,)]
        assert s.con.execute("SELECT count(*) FROM protab_ptable_meta").fetchall() == [(1,)]
        assert s.sql(MACRO).sort(DIMS)["n_pert"].to_list() != first["n_pert"].to_list()
        # a p-table written as intervals only (an older installer) is not used: an error
        s.con.execute("DELETE FROM protab_ptable_lookup")
        with pytest.raises(Exception, match="no p-table is installed"):
            s.sql(MACRO)


def test_install_refuses_bad_arguments_and_leaves_the_installed_ptable():
    p = pt.PTable.maximum_entropy(D=3, V=1)
    with pt.Session(":memory:", progress=False) as s:
        install_ptable(s.con, p, 256)
        before = s.con.execute("SELECT * FROM protab_ptable_lookup").fetchall()
        for bad in (1, 2**63, 2.5, True, "256"):
            with pytest.raises(InputError, match="modulus"):
                install_ptable(s.con, p, bad)
        with pytest.raises(InputError, match="count p-table"):
            install_ptable(s.con, p.frame, 256)  # rows, not a PTable
        assert s.con.execute("SELECT * FROM protab_ptable_lookup").fetchall() == before


def test_the_sql_file_creates_no_table_and_reads_the_installed_ones():
    """sql/protab.sql makes temporary macros only (a read-only database takes it); the columns its
    ckm() reads are those of the tables install_ptable and every read-write Session create."""
    text = sql_text()
    statements = [s.strip() for s in re.split(r";\s*\n", re.sub(r"--[^\n]*", "", text)) if s.strip()]
    assert statements and all(s.startswith("CREATE OR REPLACE TEMP MACRO") for s in statements)
    lookup = re.search(r"CREATE TABLE IF NOT EXISTS protab_ptable_lookup \(([^;]*)\);", _CREATE).group(1)
    columns = {c.split()[0] for c in re.sub(r"\s+", " ", lookup).split(", ")}
    read = set(re.findall(r"SELECT (\w+) FROM query_table\(ptable\)", text))
    assert "ptable := 'protab_ptable_lookup'" in text
    assert read and read <= columns
    with pt.Session(":memory:", progress=False) as s:
        kept = {r[0] for r in s.con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT temporary").fetchall()}
    assert {"protab_ptable", "protab_ptable_meta", "protab_ptable_lookup"} <= kept


@pytest.mark.skipif(DUCKDB is None, reason="the duckdb CLI (pip package duckdb-cli) is not installed")
def test_plain_duckdb_cli_on_a_database_file(tmp_path):
    """The analyst's duckdb CLI opens the file, reads sql/protab.sql and gets the session's
    counts; a read-only Session sees the same; an empty database refuses."""
    db = tmp_path / "census.duckdb"
    p = ons_layout()
    with pt.Session(db, progress=False) as s:
        s.con.execute(GEN, [6000])
        s.add_record_keys("t", id_column="pid", seed="cli", bits=8)
        install_ptable(s.con, p, 256)
        want = flat_cell_key(s, p).sort(DIMS)
    query = MACRO + " ORDER BY ALL"
    out = _cli(db, query)
    got = [(g, a, x, int(n), int(m)) for g, a, x, n, m in (line.split(",") for line in out.splitlines())]
    assert got == want.select(DIMS + ["n", "n_pert"]).rows()
    with pt.Session(db, read_only=True, progress=False) as s:
        assert s.sql(query).rows() == got
    # a database that never had protab's tables refuses too (DuckDB's error names the table)
    empty = _cli(":memory:", "SELECT ckm(3, 5)", check=False)
    assert "protab_ptable_lookup does not exist" in empty and "\n8\n" not in empty


def _cli(db: Path | str, query: str, check: bool = True) -> str:
    res = subprocess.run([DUCKDB, str(db), "-csv", "-noheader", "-c", f".read {SQL_DIR / 'protab.sql'}",
                          "-c", query], capture_output=True, text=True, timeout=60)
    if check:
        assert res.returncode == 0, res.stderr
        return res.stdout.strip()
    return res.stdout + res.stderr


def test_a_ptable_installed_as_intervals_only_is_upgraded():
    """A database whose p-table an older protab installed (intervals and meta, no lookup)."""
    p = ons_layout()
    with keyed_session(3000, id_column="pid", seed="upgrade", bits=8) as s:
        ks = p.keyspace(256)
        s.con.register("ks", ks.to_arrow())
        s.con.execute("INSERT INTO protab_ptable SELECT i, v, klo, khi FROM ks")
        s.con.execute("INSERT INTO protab_ptable_meta VALUES (?, ?, ?, ?)", [1, p.imax, p.period, 256])
        with pytest.raises(Exception, match="no p-table is installed"):
            s.sql(MACRO)
        assert upgrade_installed(s.con) is True
        assert upgrade_installed(s.con) is False  # once
        want = flat_cell_key(s, p).sort(DIMS)
        assert s.sql(MACRO).sort(DIMS)["n_pert"].to_list() == want["n_pert"].to_list()
    with pt.Session(":memory:", progress=False) as s:
        assert upgrade_installed(s.con) is False  # nothing installed
        # intervals that are no p-table (a gap in row 1) are left alone, and ckm() refuses
        s.con.execute("INSERT INTO protab_ptable VALUES (0, 0, 0, 255), (1, 0, 0, 99), (1, 1, 120, 255)")
        s.con.execute("INSERT INTO protab_ptable_meta VALUES (0, 1, 1, 256)")
        assert upgrade_installed(s.con) is False
        with pytest.raises(Exception, match="no p-table is installed"):
            s.sql("SELECT ckm(1, 5)")
