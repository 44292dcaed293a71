"""``protab publish`` of a request with ``label_columns``: each published table is protect's
Parquet table of the same request, its label columns ``<dim>_label_<lang>`` included at the
same places (after each labelled dimension), for a cell key table and a suppressed one (of
another source: one source is protected by one method); without
``label_columns`` no label column; and a language no hierarchy of its tables has is refused
before any file is written, as protect refuses it."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest

from protab import cli

REQUEST = '''
database = "m.duckdb"
output = "out"
formats = ["parquet"]
LABEL_COLUMNS
[ptable]
maximum_entropy = { D = 3, V = 1 }
[hierarchies.municipality]
code_lengths = [2, 3]
labels = { en = { Total = "All", R1 = "North", R2001 = "Bergen" }, nb = { Total = "Alle", R1 = "Nord" } }
[hierarchies.sex]
columns = ["sex"]
labels = { en = { F = "Female", M = "Male" } }
[[tables]]
name = "m_sex"
source = "persons"
dims = ["municipality", "sex"]
[[tables]]
name = "m_age"
source = "people"
dims = ["municipality", "age"]
method = "suppression"
min_frequency = 3
'''


@pytest.fixture()
def micro(tmp_path, persons, monkeypatch):
    monkeypatch.setenv("PROTAB_PROGRESS", "0")
    db = str(tmp_path / "m.duckdb")
    persons.write_parquet(tmp_path / "persons.parquet")
    assert cli.main(["register", "persons", str(tmp_path / "persons.parquet"), "--db", db, "--materialize"]) == 0
    assert cli.main(["register", "people", str(tmp_path / "persons.parquet"), "--db", db, "--materialize"]) == 0
    (tmp_path / "seed.txt").write_text("publish-label-seed\n", encoding="utf-8")
    assert cli.main(["keys", "persons", "--id", "pid", "--seed-file", str(tmp_path / "seed.txt"), "--db", db]) == 0
    return tmp_path


def _request(folder, label_columns: str):
    path = folder / "req.toml"
    path.write_text(REQUEST.replace("LABEL_COLUMNS", label_columns), encoding="utf-8")
    return path


def _published(target, name: str) -> pl.DataFrame:
    with duckdb.connect(str(target), read_only=True) as con:
        return pl.from_arrow(con.sql(f'SELECT * FROM "{name}"').to_arrow_table())  # type: ignore[return-value]


def test_published_tables_are_protects_parquet_with_its_label_columns(micro):
    req = _request(micro, 'label_columns = ["en", "nb"]')
    assert cli.main(["protect", str(req)]) == 0
    assert cli.main(["publish", str(req), "--to", str(micro / "p.duckdb")]) == 0
    for name in ("m_sex", "m_age"):
        parquet = pl.read_parquet(micro / "out" / f"{name}.parquet")
        published = _published(micro / "p.duckdb", name)
        assert published.columns == parquet.columns, name
        assert published.columns[:3] == ["municipality", "municipality_label_en", "municipality_label_nb"]
        keys = [c for c in parquet.columns if not c.endswith(("_en", "_nb"))][:2]
        assert published.sort(keys).equals(parquet.sort(keys).cast(published.schema)), name
    m_sex = _published(micro / "p.duckdb", "m_sex")
    assert m_sex.columns[3:5] == ["sex", "sex_label_en"] and "sex_label_nb" not in m_sex.columns
    got = dict(m_sex.filter(pl.col("sex") == "F").select("municipality", "municipality_label_nb").iter_rows())
    assert got["Total"] == "Alle" and got["R1"] == "Nord" and got["R2001"] is None


def test_published_tables_have_no_label_column_unless_asked(micro):
    req = _request(micro, "")
    assert cli.main(["publish", str(req), "--to", str(micro / "p.duckdb")]) == 0
    assert not any("label" in c for c in _published(micro / "p.duckdb", "m_sex").columns)


def test_publish_refuses_a_language_no_hierarchy_has_before_writing(micro, capsys):
    req = _request(micro, 'label_columns = ["en", "de"]')
    assert cli.main(["publish", str(req), "--to", str(micro / "p.duckdb")]) == 2
    err = capsys.readouterr().err
    assert "req.toml" in err and "label_columns" in err and "'de'" in err
    assert not (micro / "p.duckdb").exists()
