"""Session: registering microdata and record keys."""

from __future__ import annotations

import hashlib

import polars as pl
import pytest

import protab as pt


def expected_key(seed: str, pid: object, bits: int = 32) -> int:
    """The documented record key: first 32 bits of SHA-256(seed ‖ U+001F ‖ id), mod 2^bits."""
    digest = hashlib.sha256(f"{seed}\x1f{pid}".encode()).hexdigest()
    return int(digest[:8], 16) % 2**bits


# -- register ------------------------------------------------------------------------------
def test_register_sources(session, tmp_path, persons):
    persons.write_parquet(tmp_path / "a.parquet")
    persons.head(10).write_parquet(tmp_path / "b.parquet")
    persons.write_csv(tmp_path / "p.csv")
    session.register("pq", tmp_path / "a.parquet")
    session.register("glob", str(tmp_path / "*.parquet"))
    session.register("lst", [tmp_path / "a.parquet", tmp_path / "b.parquet"])
    session.register("csv", str(tmp_path / "p.csv"))
    session.register("arrow", persons.to_arrow())
    session.register("polars", persons)
    session.register("lazy", persons.lazy())
    session.register("pandas", persons.to_pandas())
    session.register("alias", "polars")
    n = persons.height
    counts = {t: session.sql(f'SELECT count(*) AS c FROM "{t}"')["c"][0]
              for t in ["pq", "glob", "lst", "csv", "arrow", "polars", "lazy", "pandas", "alias"]}
    assert counts == {"pq": n, "glob": n + 10, "lst": n + 10, "csv": n, "arrow": n, "polars": n,
                      "lazy": n, "pandas": n, "alias": n}
    # files are views: nothing copied unless asked
    assert session.engine.kind("pq") == "view"
    session.register("copy", tmp_path / "a.parquet", materialize=True)
    assert session.engine.kind("copy") == "table"
    # names are identifiers, never parsed as SQL: a dot or a quote is part of the name
    for odd in ('sch.tbl', 'say "hi"'):
        session.register(odd, tmp_path / "a.parquet", materialize=True)
        assert session.engine.kind(odd) == "table"
        assert session.tabulate(odd, pt.TableSpec({"sex": None}))["n"][0] == n


def test_register_errors(session, persons, tmp_path):
    session.register("p", persons)
    with pytest.raises(pt.InputError, match="exists already"):
        session.register("p", persons)
    session.register("p", persons.head(3), replace=True)
    assert session.sql('SELECT count(*) AS c FROM p')["c"][0] == 3
    with pytest.raises(pt.InputError, match="neither an existing file nor a table"):
        session.register("q", "no_such_table")
    with pytest.raises(pt.InputError, match="cannot read"):
        session.register("q", str(tmp_path / "missing*.parquet"))
    with pytest.raises(pt.InputError, match="unsupported source"):
        session.register("q", {"a": [1]})
    assert not session.exists("q")


def test_database_file_and_default_path(tmp_path, persons, monkeypatch):
    db = tmp_path / "census.duckdb"
    with pt.Session(db) as s:
        s.register("persons", persons)
        s.add_record_keys("persons", id_column="pid", seed="secret")
    with pt.Session(db) as s:  # keys and their modulus survive in the file
        assert s.record_key("persons") == ("rkey", 2**32)
    monkeypatch.chdir(tmp_path)
    with pt.Session() as s:
        assert s.database == pt.DEFAULT_DATABASE == "protab.duckdb"
    assert (tmp_path / "protab.duckdb").exists()


# -- record keys ---------------------------------------------------------------------------
@pytest.mark.parametrize("bits", [32, 8, 12])
def test_hash_keys_match_documented_formula(session, persons, bits):
    session.register("p", persons)
    session.add_record_keys("p", id_column="pid", seed="s3cr3t", bits=bits)
    got = session.sql("SELECT pid, rkey FROM p ORDER BY pid")
    want = [expected_key("s3cr3t", pid, bits) for pid in got["pid"]]
    assert got["rkey"].to_list() == want
    assert session.record_key("p") == ("rkey", 2**bits)
    assert max(want) < 2**bits


def test_hash_keys_string_ids_and_determinism(session):
    ids = pl.DataFrame({"id": ["a", "b", "ü-7", "x'y"]})
    session.register("p", ids)
    session.register("q", ids)
    session.add_record_keys("p", id_column="id", seed="12345")
    session.add_record_keys("q", id_column="id", seed="12345")
    p = session.sql("SELECT id, rkey FROM p ORDER BY id")
    assert p.equals(session.sql("SELECT id, rkey FROM q ORDER BY id"))
    assert p["rkey"].to_list() == [expected_key("12345", i) for i in p["id"]]
    session.register("r", ids)
    session.add_record_keys("r", id_column="id", seed="12346")
    assert session.sql("SELECT rkey FROM r ORDER BY id")["rkey"].to_list() != p["rkey"].to_list()


def test_keys_on_a_parquet_view_copy_it_into_a_table(session, tmp_path, persons):
    persons.write_parquet(tmp_path / "p.parquet")
    session.register("p", tmp_path / "p.parquet")
    session.add_record_keys("p", id_column="pid", seed="x")
    assert session.engine.kind("p") == "table"
    assert session.sql("SELECT count(rkey) AS c FROM p")["c"][0] == persons.height


def test_missing_or_duplicate_ids(session):
    session.register("p", pl.DataFrame({"pid": [1, 2, None, 4], "x": [1, 2, 3, 4]}))
    with pytest.raises(pt.InputError, match=r"1 record\(s\).*missing"):
        session.add_record_keys("p", id_column="pid", seed="s")
    session.register("d", pl.DataFrame({"pid": [1, 2, 2, 3, 3, 3]}))
    with pytest.raises(pt.InputError, match=r"2 value\(s\) occur more than once, e\.g\. 3 \(3×\), 2 \(2×\)"):
        session.add_record_keys("d", id_column="pid", seed="s")
    # nothing half-written: the tables are as they were
    assert "rkey" not in session.columns("p") and "rkey" not in session.columns("d")
    with pytest.raises(pt.InputError, match="no id column 'nope'"):
        session.add_record_keys("d", id_column="nope", seed="s")
    with pytest.raises(pt.InputError, match="seed"):
        session.add_record_keys("d", id_column="pid", seed="")
    with pytest.raises(pt.InputError, match="bits"):
        session.add_record_keys("d", id_column="pid", seed="s", bits=40)


def test_seed_never_in_errors(session):
    session.register("d", pl.DataFrame({"pid": [1, 1]}))
    with pytest.raises(pt.InputError) as err:
        session.add_record_keys("d", id_column="pid", seed="TOPSECRET-SEED")
    assert "TOPSECRET" not in str(err.value)


def test_existing_integer_and_decimal_keys(session):
    session.register("ons", pl.DataFrame({"k": [0, 255, 17]}))
    session.add_record_keys("ons", record_key_column="k", bits=8)
    assert session.record_key("ons") == ("rkey", 256)
    assert session.sql("SELECT rkey FROM ons")["rkey"].to_list() == [0, 255, 17]
    # decimal keys as R cellKey / tau-ARGUS make them, held exactly as integers below 10^8
    session.register("ck", pl.DataFrame({"u": [0.9, 0.3, 0.6, 0.12345678, 1.0]}))
    session.add_record_keys("ck", record_key_column="u", decimals=8)
    assert session.record_key("ck") == ("rkey", 10**8)
    assert session.sql("SELECT rkey FROM ck")["rkey"].to_list() == [90000000, 30000000, 60000000, 12345678, 100000000]
    # the key column itself may be used when it already holds integer keys
    session.register("own", pl.DataFrame({"rkey": [1, 2, 3]}))
    session.add_record_keys("own", record_key_column="rkey", bits=4)
    assert session.record_key("own") == ("rkey", 16)


def test_bad_existing_keys(session):
    session.register("a", pl.DataFrame({"k": [0, 256]}))
    with pytest.raises(pt.InputError, match=r"1 key\(s\).*outside 0 … 2\^8"):
        session.add_record_keys("a", record_key_column="k", bits=8)
    session.register("b", pl.DataFrame({"k": [0.5, 0.123456789]}))
    with pytest.raises(pt.InputError, match="at most 8 digits"):
        session.add_record_keys("b", record_key_column="k", decimals=8)
    session.register("c", pl.DataFrame({"k": [0.5, 1.5]}))
    with pytest.raises(pt.InputError, match=r"not decimals in \[0, 1\]"):
        session.add_record_keys("c", record_key_column="k", decimals=8)
    session.register("d", pl.DataFrame({"k": [0.5, None]}))
    with pytest.raises(pt.InputError, match="no key"):
        session.add_record_keys("d", record_key_column="k", decimals=8)
    session.register("e", pl.DataFrame({"k": ["a"]}))
    with pytest.raises(pt.InputError, match="must be numbers"):
        session.add_record_keys("e", record_key_column="k", bits=8)
    with pytest.raises(pt.InputError, match="has no record keys"):
        session.record_key("e")


def test_existing_column_needs_replace(session):
    session.register("p", pl.DataFrame({"pid": [1, 2], "rkey": [5, 6]}))
    with pytest.raises(pt.InputError, match="replace=True"):
        session.add_record_keys("p", id_column="pid", seed="s")
    # replace=True replaces record keys, never a data column of that name
    with pytest.raises(pt.InputError, match="is data, not record keys"):
        session.add_record_keys("p", id_column="pid", seed="s", replace=True)
    session.add_record_keys("p", id_column="pid", seed="t", name="k")
    session.add_record_keys("p", id_column="pid", seed="s", name="k", replace=True)
    assert session.sql("SELECT k FROM p ORDER BY pid")["k"].to_list() == [expected_key("s", 1), expected_key("s", 2)]
    assert session.sql("SELECT rkey FROM p ORDER BY pid")["rkey"].to_list() == [5, 6]


def test_hierarchy_from_columns(session, persons):
    session.register("p", persons.with_columns(region=pl.col("municipality").str.slice(0, 2)))
    h = session.hierarchy_from_columns("p", ["region", "municipality"])
    assert h.root == "Total" and h.parent_of("R2003") == "R2" and h.parent_of("R1") == "Total"
    session.register("bad", pl.DataFrame({"r": ["A", "B"], "m": ["x", "x"]}))
    with pytest.raises(pt.HierarchyError, match="x"):
        session.hierarchy_from_columns("bad", ["r", "m"])


def test_forget_hierarchies_drops_their_tables_and_tables_still_work():
    with pt.Session(":memory:", progress=False) as s:
        s.con.execute("CREATE TABLE t AS SELECT ['a', 'b', 'c'][i % 3 + 1] AS x FROM range(30) r(i)")
        before = set(s.sql("SELECT table_name FROM duckdb_tables()")["table_name"])
        specs = [pt.TableSpec({"x": pt.Hierarchy.flat(codes)}) for codes in (["a", "b", "c"], ["a", "b", "c", "d"])]
        want = [s.tabulate("t", spec) for spec in specs]
        kept = set(s.sql("SELECT table_name FROM duckdb_tables()")["table_name"]) - before
        assert kept  # code and bridge tables of the two hierarchies
        s.con.execute("ALTER TABLE t ADD COLUMN id INTEGER DEFAULT 0")
        s.con.execute("UPDATE t SET id = rowid")
        s.add_record_keys("t", id_column="id", seed="forget")
        for spec in specs:  # the cell key method keeps each codes table's (code, level) frame beside it
            s.cell_key("t", spec, pt.PTable.maximum_entropy(D=3, V=1))  # and the p-table's lookup, once
        kinds = sorted(k[0] if isinstance(k, tuple) else "hierarchy" for k in s._hierarchies)
        assert kinds == ["frame", "frame", "hierarchy", "hierarchy", "relation"]
        s.forget_hierarchies(keep=3)  # 2 hierarchies and a lookup (frames do not count): kept
        assert kept <= set(s.sql("SELECT table_name FROM duckdb_tables()")["table_name"])
        assert len(s._hierarchies) == 5
        s.forget_hierarchies()
        assert set(s.sql("SELECT table_name FROM duckdb_tables()")["table_name"]) == before
        assert [s.tabulate("t", spec) for spec in specs][1].equals(want[1])


def test_a_session_keeps_one_lookup_per_ptable_and_never_mixes_them():
    """The p-table's lookup relation is kept by the session, found again by its content: a
    second p-table in the same session gives what it gives in a fresh one."""
    def run(s, ptable):
        return s.cell_key("t", pt.TableSpec({"x": pt.Hierarchy.flat(["a", "b", "c"])}), ptable)

    def session():
        s = pt.Session(":memory:", progress=False)
        s.con.execute("CREATE TABLE t AS SELECT ['a', 'b', 'c'][i % 3 + 1] AS x, i AS id FROM range(60) r(i)")
        s.add_record_keys("t", id_column="id", seed="kept-lookup")
        return s

    small, wide = pt.PTable.maximum_entropy(D=2, V=0.9), pt.PTable.maximum_entropy(D=5, V=3, js=2)
    with session() as s:
        first, second, again = run(s, small), run(s, wide), run(s, small)
        assert sum(isinstance(k, tuple) and k[0] == "relation" for k in s._hierarchies) == 2
    with session() as fresh:
        assert run(fresh, wide).equals(second)
    assert first.equals(again) and not first.equals(second)
