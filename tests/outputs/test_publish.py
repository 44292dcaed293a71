"""protab publish: a DuckDB file of protected tables only, written atomically."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest

from protab import cli
from protab.errors import InputError

_HERE = Path(sys.executable).parent / "duckdb"
DUCKDB = str(_HERE) if _HERE.exists() else shutil.which("duckdb")

REQUEST = '''
database = "m.duckdb"
output = "out"
formats = ["csv"]
[ptable]
maximum_entropy = {{ D = 3, V = 1 }}
[[tables]]
name = "m_sex"
source = "persons"
dims = ["municipality", "sex"]
[[tables]]
name = "age_weighted"
source = "persons"
dims = ["{age}"]
weight = "weight"
'''


@pytest.fixture()
def micro(tmp_path, persons):
    db = str(tmp_path / "m.duckdb")
    persons.write_parquet(tmp_path / "persons.parquet")
    assert cli.main(["register", "persons", str(tmp_path / "persons.parquet"), "--db", db, "--materialize"]) == 0
    assert cli.main(["keys", "persons", "--id", "pid", "--seed-file", str(_seed(tmp_path)), "--db", db]) == 0
    (tmp_path / "req.toml").write_text(REQUEST.format(age="age"), encoding="utf-8")
    return tmp_path


def _seed(tmp_path: Path) -> Path:
    p = tmp_path / "seed.txt"
    p.write_text("publish-secret-seed\n", encoding="utf-8")
    return p


def test_publish_holds_the_protected_tables_only(micro, capsys):
    assert cli.main(["protect", str(micro / "req.toml")]) == 0
    target = micro / "protected.duckdb"
    assert cli.main(["publish", str(micro / "req.toml"), "--to", str(target)]) == 0
    printed = capsys.readouterr().out
    assert "publish-secret-seed" not in printed
    with duckdb.connect(str(target), read_only=True) as con:
        tables = sorted(r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall())
        assert tables == ["age_weighted", "m_sex", "protab_published", "protab_run"]
        views = [r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()]
        assert views == ["protab_catalog"]
        assert con.execute("SELECT * FROM protab_catalog").fetchall() == [
            ("age_weighted", 4, "ckm"), ("m_sex", 18, "ckm")]
        cols = {r[0] for r in con.execute("SELECT column_name FROM duckdb_columns()").fetchall()}
        assert not cols & {"n", "w", "rkey", "pid", "weight"}  # no originals, keys, ids or records
        published = pl.from_arrow(con.sql("SELECT * FROM m_sex").to_arrow_table())
        macros = con.execute("SELECT count(*) FROM duckdb_functions() WHERE function_name = 'ckm'").fetchall()[0][0]
        assert macros == 0  # no p-table and no protab macros
    # the same numbers as `protab protect` writes
    csv = pl.read_csv(micro / "out" / "m_sex.csv", schema_overrides={"municipality": pl.Utf8})
    assert published.select(csv.columns).sort(["municipality", "sex"]).equals(
        csv.sort(["municipality", "sex"]).cast(published.select(csv.columns).schema))


@pytest.mark.skipif(DUCKDB is None, reason="the duckdb CLI (pip package duckdb-cli) is not installed")
def test_the_plain_duckdb_cli_opens_it(micro):
    target = micro / "p.duckdb"
    assert cli.main(["publish", str(micro / "req.toml"), "--to", str(target)]) == 0
    out = subprocess.run([DUCKDB, str(target), "-readonly", "-csv", "-noheader", "-c",
                          "SELECT table_name, cells FROM protab_catalog"],
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["age_weighted,4", "m_sex,18"]


def test_publish_refuses_and_writes_nothing(micro):
    target = micro / "p.duckdb"
    # a request that fails while protecting: no file, no temporary left behind
    (micro / "bad.toml").write_text(REQUEST.format(age="no_such_column"), encoding="utf-8")
    with pytest.raises(InputError, match="no_such_column"):
        cli.publish(str(micro / "bad.toml"), str(target))
    assert sorted(p.name for p in micro.iterdir() if "p.duckdb" in p.name) == []
    cli.publish(str(micro / "req.toml"), str(target))
    before = target.read_bytes()
    with pytest.raises(InputError, match="exists; pass --replace"):
        cli.publish(str(micro / "req.toml"), str(target))
    with pytest.raises(InputError, match="microdata database"):
        cli.publish(str(micro / "req.toml"), str(micro / "m.duckdb"), replace=True)
    assert target.read_bytes() == before
    cli.publish(str(micro / "req.toml"), str(target), replace=True)
    assert not [p for p in micro.iterdir() if p.name.startswith(".p.duckdb")]


def test_publish_never_replaces_the_default_microdata_database(micro):
    """A request without ``database`` reads protab.duckdb beside it: that file is refused as a
    target too, before anything is protected."""
    (micro / "m.duckdb").rename(micro / "protab.duckdb")
    text = REQUEST.format(age="age").replace('database = "m.duckdb"\n', "")
    (micro / "nodb.toml").write_text(text, encoding="utf-8")
    before = (micro / "protab.duckdb").read_bytes()
    with pytest.raises(InputError, match="microdata database"):
        cli.publish(str(micro / "nodb.toml"), str(micro / "protab.duckdb"), replace=True)
    assert (micro / "protab.duckdb").read_bytes() == before
    cli.publish(str(micro / "nodb.toml"), str(micro / "p.duckdb"))  # the default database is read
    assert (micro / "p.duckdb").exists()

