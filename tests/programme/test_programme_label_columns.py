"""``label_columns = ["en", "nb"]`` on a programme, as on a protect request (docs/vocabulary.md,
"Labels"): its CSV and Parquet tables get a column ``<dim>_label_<lang>`` right after each
labelled dimension, and are the tables protect writes for the same table and classifications,
cell for cell and label column for label column; JSON-stat's labels are in the first language
asked; a language no classification of its hypercubes has is refused before any work, naming
the programme file and the language; and a run with other label columns redoes its hypercubes."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import protab as pt
from protab import cli
from protab.errors import SpecError

GEO = '{ en = { Total = "All regions", R1 = "North", R1001 = "Oslo" }, nb = { Total = "Alle regioner", R1 = "Nord" } }'
SEX = '{ en = { F = "Female", M = "Male" } }'
COMMON = """
database = "demo.duckdb"
formats = ["csv", "parquet"]
LABEL_COLUMNS
[ptable]
maximum_entropy = { D = 5, V = 3, js = 2 }
"""
PROGRAMME = 'source = "persons"\nthreshold = 3' + COMMON + f"""
[classifications.geo]
columns = ["region", "municipality"]
labels = {GEO}
[classifications.sex]
columns = ["sex"]
labels = {SEX}
[[hypercubes]]
name = "HC"
dims = {{ municipality = "geo", sex = "sex" }}
[[hypercubes.tables]]
name = "geo_sex"
"""
REQUEST = COMMON + f"""
[hierarchies.municipality]
columns = ["region", "municipality"]
labels = {GEO}
[hierarchies.sex]
columns = ["sex"]
labels = {SEX}
[[tables]]
name = "geo_sex"
source = "persons"
dims = ["municipality", "sex"]
threshold = 3
"""
BOTH = 'label_columns = ["en", "nb"]'


def _write(folder: Path, name: str, text: str) -> Path:
    (folder / name).write_text(text, encoding="utf-8")
    return folder / name


def _programme(workdir: Path, label_columns: str = BOTH, formats: str = "") -> Path:
    text = PROGRAMME.replace("LABEL_COLUMNS", label_columns)
    return _write(workdir, "p.toml", text.replace('formats = ["csv", "parquet"]', formats, 1) if formats else text)


def test_a_programmes_label_columns_are_protects_for_the_same_table(workdir):
    prog = _programme(workdir)
    pt.Programme(prog).run(out=workdir / "prog_out", quiet=True)
    req = _write(workdir, "r.toml", REQUEST.replace("LABEL_COLUMNS", BOTH))
    assert cli.main(["protect", str(req), "--out", str(workdir / "protect_out")]) == 0
    for fmt, read in (("csv", lambda p: pl.read_csv(p, infer_schema=False)), ("parquet", pl.read_parquet)):
        ours = read(workdir / "prog_out" / f"HC.geo_sex.{fmt}")
        theirs = read(workdir / "protect_out" / f"geo_sex.{fmt}")
        assert ours.columns == theirs.columns, fmt
        assert ours.columns[:5] == ["municipality", "municipality_label_en", "municipality_label_nb", "sex",
                                    "sex_label_en"], fmt
        assert "sex_label_nb" not in ours.columns  # sex has no nb labels: no column, as for protect
        assert ours.sort(ours.columns[:5]).equals(theirs.sort(theirs.columns[:5])), fmt
    labelled = ours.filter(pl.col("municipality").is_in(["Total", "R1", "R1001", "R2"]) & (pl.col("sex") == "F"))
    assert dict(labelled.select("municipality", "municipality_label_nb").iter_rows()) == {
        "Total": "Alle regioner", "R1": "Nord", "R1001": None, "R2": None}
    assert set(labelled["sex_label_en"]) == {"Female"}


def test_a_programme_without_label_columns_writes_none(workdir):
    pt.Programme(_programme(workdir, label_columns="")).run(out=workdir / "out", quiet=True)
    assert not any("label" in c for c in pl.read_csv(workdir / "out" / "HC.geo_sex.csv").columns)


def test_json_stat_labels_are_in_the_first_of_label_columns(workdir):
    for first, total in (("nb", "Alle regioner"), ("en", "All regions")):
        rest = "en" if first == "nb" else "nb"
        prog = _programme(workdir, f'label_columns = ["{first}", "{rest}"]', formats='formats = ["json-stat"]')
        pt.Programme(prog).run(out=workdir / first, quiet=True)
        ds = json.loads((workdir / first / "HC.stat.json").read_text(encoding="utf-8"))
        assert ds["dimension"]["MUNICIPALITY"]["category"]["label"]["_T"] == total


def test_other_label_columns_redo_a_hypercube_an_interrupted_run_finished(workdir):
    """A resumed run keeps a staged hypercube only if its files would be the same: the label
    columns are part of its digest."""
    out = workdir / "out"

    def interrupt(name, row):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pt.Programme(_programme(workdir, 'label_columns = ["en"]')).run(out=out, quiet=True, on_hypercube=interrupt)
    assert not (out / "HC.geo_sex.csv").exists()
    pt.Programme(_programme(workdir, BOTH)).run(out=out, quiet=True)
    assert "municipality_label_nb" in pl.read_csv(out / "HC.geo_sex.csv").columns


@pytest.mark.parametrize(("asked", "says"), [('["de"]', "'de'"), ('["en", "fr", "de"]', "'fr', 'de'")])
def test_a_language_no_classification_has_is_refused_naming_the_file_and_language(workdir, asked, says):
    prog = _programme(workdir, f"label_columns = {asked}")
    with pytest.raises(SpecError, match=r"p\.toml") as refused:
        pt.Programme(prog)
    text = str(refused.value)
    assert "label_columns" in text and says in text and "no classification of its hypercubes" in text
    assert "en, nb" in text  # the languages the labels are in
    assert not (workdir / "out").exists()


def test_the_cli_refuses_it_before_any_work(workdir, capsys):
    prog = _programme(workdir, 'label_columns = ["de"]')
    assert cli.main(["programme", str(prog), "--out", str(workdir / "out")]) == 2
    err = capsys.readouterr().err
    assert "p.toml" in err and "label_columns" in err and "'de'" in err
    assert not (workdir / "out").exists()


def test_label_columns_must_be_language_tags(workdir):
    with pytest.raises(SpecError, match="not a language tag"):
        pt.Programme(_programme(workdir, 'label_columns = ["en", "not a language"]'))
