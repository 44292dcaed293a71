"""Labels of a classification's codes (``labels = { en = {…}, nb = {…} }``) and its name
(``name = { en = … }``), in a protect request's [hierarchies.…] and a programme's
[classifications.…] (protab.vocabulary.labels, docs/vocabulary.md): checked with the file
(languages, label types), every labelled code a code of the classification (an error naming the
file, the classification and the code, before any file is written); used as the code names of
the SDMX structure message, as JSON-stat's category labels, and as protect's label columns."""

from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import write

import protab as pt
from protab import cli
from protab.errors import SpecError

REGION_EN = {"Total": "All regions", "R1": "North", "R2": "South"}
REGION_NB = {"Total": "Alle regioner", "R1": "Nord"}
SEX_EN = {"F": "Female", "M": "Male"}

REQUEST = """
formats = {formats}
{extra}
[ptable]
maximum_entropy = {{ D = 3, V = 1.5, js = 1 }}

[hierarchies.region]
columns = ["region"]
name = {{ en = "Region", nb = "Region" }}
labels = {labels}

[hierarchies.sex]
columns = ["sex"]
labels = {{ en = {{ F = "Female", M = "Male" }} }}

[[tables]]
name = "region_sex"
source = "persons"
dims = ["region", "sex"]
"""
LABELS = ('{ en = { Total = "All regions", R1 = "North", R2 = "South" }, '
          'nb = { Total = "Alle regioner", R1 = "Nord" } }')


def _protect(workdir, formats: str, labels: str = LABELS, extra: str = "") -> tuple[int, object]:
    req = write(workdir, "r.toml", REQUEST.format(formats=formats, labels=labels, extra=extra))
    out = workdir / "out"
    return cli.main(["protect", str(req), "--db", str(workdir / "demo.duckdb"), "--out", str(out)]), out


def test_protect_writes_label_columns_in_each_language_asked_for(workdir):
    code, out = _protect(workdir, '["csv", "parquet"]', extra='label_columns = ["en", "nb"]')
    assert code == 0
    for t in (pl.read_csv(out / "region_sex.csv", infer_schema=False), pl.read_parquet(out / "region_sex.parquet")):
        cols = t.columns
        assert cols[cols.index("region") + 1:cols.index("region") + 3] == ["region_label_en", "region_label_nb"]
        assert cols[cols.index("sex") + 1] == "sex_label_en" and "sex_label_nb" not in cols  # no nb labels
        for row in t.select("region", "region_label_en", "region_label_nb", "sex", "sex_label_en").iter_rows():
            region, en, nb, sex, sex_en = row
            assert (en, nb, sex_en) == (REGION_EN.get(region), REGION_NB.get(region), SEX_EN[sex] if sex in SEX_EN
                                        else None)


def test_protect_writes_no_label_column_unless_asked(workdir):
    code, out = _protect(workdir, '["csv"]')
    assert code == 0
    assert not any("label" in c for c in pl.read_csv(out / "region_sex.csv").columns)


def test_labels_name_the_sdmx_codes_and_the_json_stat_categories(workdir):
    sdmx = pytest.importorskip("sdmx")
    code, out = _protect(workdir, '["sdmx-structure", "json-stat"]', extra='label_columns = ["nb"]')
    assert code == 0
    msg = sdmx.read_sdmx(out / "region_sex.structure.xml")
    names = {c.id: c.name.localizations for c in msg.codelist["CL_REGION_SEX_REGION"]}
    assert names["_T"] == {"en": REGION_EN["Total"], "nb": REGION_NB["Total"]}
    assert names["R1"] == {"en": "North", "nb": "Nord"} and names["R2"] == {"en": "South"}
    assert names["R3"] == {"en": "R3"}  # no label: the code
    assert msg.concept_scheme["CS_REGION_SEX"]["REGION"].name.localizations == {"en": "Region", "nb": "Region"}
    ds = json.loads((out / "region_sex.stat.json").read_text(encoding="utf-8"))
    region = ds["dimension"]["REGION"]
    assert region["label"] == "Region"
    assert region["category"]["label"]["_T"] == REGION_NB["Total"]  # label_columns' first language
    assert region["category"]["label"]["R1"] == "Nord" and region["category"]["label"]["R2"] == "R2"


@pytest.mark.parametrize(("labels", "says"), [
    ('{ en = { R1 = "North", R99 = "Nowhere" } }', "'R99'"),
    ('{ en = { R1 = "North" }, nb = { Totalt = "Alle" } }', "'Totalt'"),
])
def test_a_label_of_no_code_is_refused_naming_file_classification_and_code(workdir, capsys, labels, says):
    code, out = _protect(workdir, '["csv"]', labels=labels)
    assert code == 2
    err = capsys.readouterr().err
    assert "r.toml" in err and "[hierarchies.region]" in err and says in err
    assert not out.exists()


@pytest.mark.parametrize(("labels", "says"), [
    ('{ english = { R1 = "North" } }', "not a language tag"),
    ('{ en = { R1 = 3 } }', "labels.en.R1"),
    ('{ en = { R1 = "" } }', "must not be empty"),
    ('{ en = "North" }', "labels.en"),
])
def test_malformed_labels_are_refused_with_the_file(workdir, capsys, labels, says):
    code, _ = _protect(workdir, '["csv"]', labels=labels)
    assert code == 2
    assert says in capsys.readouterr().err


def test_label_columns_must_be_language_tags(workdir, capsys):
    code, _ = _protect(workdir, '["csv"]', extra='label_columns = ["en", "not a language"]')
    assert code == 2
    assert "not a language tag" in capsys.readouterr().err


PROGRAMME = """
database = "demo.duckdb"
source = "persons"
formats = ["sdmx-structure", "json-stat"]
[ptable]
maximum_entropy = {{ D = 3, V = 1.5, js = 1 }}
[classifications.sex]
codes = ["F", "M"]
root = "Both"
name = {{ en = "Sex" }}
labels = {labels}
[[hypercubes]]
name = "SEX"
dims = {{ sex = "sex" }}
"""


def test_a_programme_names_its_codes_by_its_classifications_labels(workdir):
    prog = write(workdir, "p.toml", PROGRAMME.format(labels='{ en = { Both = "Both sexes", F = "Female" } }'))
    pt.Programme(prog).run(out=workdir / "out", quiet=True)
    ds = json.loads((workdir / "out" / "SEX.stat.json").read_text(encoding="utf-8"))
    assert ds["dimension"]["SEX"]["label"] == "Sex"
    assert ds["dimension"]["SEX"]["category"]["label"] == {"_T": "Both sexes", "F": "Female", "M": "M"}
    sdmx = pytest.importorskip("sdmx")
    msg = sdmx.read_sdmx(workdir / "out" / "SEX.structure.xml")
    assert {c.id: str(c.name) for c in msg.codelist["CL_SEX_SEX"]} == {"_T": "Both sexes", "F": "Female", "M": "M"}


def test_a_programme_label_of_no_code_is_refused_naming_file_classification_and_code(workdir):
    prog = write(workdir, "p.toml", PROGRAMME.format(labels='{ en = { X = "Unknown" } }'))
    with pytest.raises(SpecError, match=r"p\.toml.*\[classifications\.sex\].*'X'"):
        pt.Programme(prog).run(out=workdir / "out", quiet=True)
    assert not (workdir / "out" / "SEX.stat.json").exists()


@pytest.mark.parametrize(("labelled", "codes", "hint"), [
    ("0301", ["301", "1103"], r"'0301' and '301' differ only by leading zeros"),
    ("301", ["0301", "1103"], r"'301' and '0301' differ only by leading zeros"),
])
def test_a_labelled_code_that_differs_by_leading_zeros_is_refused_saying_so(labelled, codes, hint):
    from protab.vocabulary import check_labels

    with pytest.raises(SpecError, match=r"r\.toml: \[hierarchies\.municipality\] labels\.en labels '" + labelled
                       + r"'.*" + hint):
        check_labels({"labels": {"en": {labelled: "Oslo"}}}, [*codes, "Total"], "r.toml", "[hierarchies.municipality]")
