"""Labels read from code files (``labels_file``, protab.vocabulary.label_files): a CSV with
``code`` and ``label_<lang>`` columns, a one-language code list (a KLASS export: ``code;name``),
an SDMX-ML structure message, or a list of these, merged with inline ``labels``; in a protect
request's [hierarchies.…] and a programme's [classifications.…]. Every refusal names the
file, the classification, the labels file and the codes or columns."""

from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import write
from hypothesis import given
from hypothesis import strategies as st

import protab as pt
from protab import cli
from protab.cli.protect_checks import read_request
from protab.errors import SpecError
from protab.vocabulary.label_files import read_labels_file

REQUEST = """
formats = {formats}
{extra}
[ptable]
maximum_entropy = {{ D = 3, V = 1.5, js = 1 }}

[hierarchies.region]
columns = ["region"]
{region}

[[tables]]
name = "region_sex"
source = "persons"
dims = ["region", "sex"]
"""
LABELS_CSV = "code,label_en,label_nb\nTotal,All regions,Alle regioner\nR1,North,Nord\nR2,South,\n"
KLASS_CSV = ('"code";"parentCode";"level";"name";"shortName";"validFrom"\n'
             '"R1";"";"1";"Nord; indre";"";"2024-01-01"\n"R2";"";"1";"Sør";"";"2024-01-01"\n')


def _request(workdir, region: str, formats: str = '["csv"]', extra: str = "", name: str = "r.toml"):
    return write(workdir, name, REQUEST.format(formats=formats, region=region, extra=extra))


def _protect(req, workdir) -> tuple[int, object]:
    out = workdir / "out"
    return cli.main(["protect", str(req), "--db", str(workdir / "demo.duckdb"), "--out", str(out)]), out


def _labels(req) -> dict:
    return read_request(req)["hierarchies"]["region"]["labels"]


# -- the forms -------------------------------------------------------------------------------
def test_a_label_csv_gives_labels_in_each_of_its_languages(workdir):
    write(workdir, "region.csv", LABELS_CSV)
    req = _request(workdir, 'labels_file = "region.csv"', '["csv"]', 'label_columns = ["en", "nb"]')
    assert _labels(req) == {"en": {"Total": "All regions", "R1": "North", "R2": "South"},
                            "nb": {"Total": "Alle regioner", "R1": "Nord"}}  # an empty cell: no nb label
    code, out = _protect(req, workdir)
    assert code == 0
    t = pl.read_csv(out / "region_sex.csv", infer_schema=False).filter(pl.col("region") == "R1")
    assert set(t["region_label_en"]) == {"North"} and set(t["region_label_nb"]) == {"Nord"}


def test_a_semicolon_csv_with_a_bom_is_read_as_well(workdir):
    write(workdir, "region.csv", "\ufeffcode;label_en\nR1;North, upper\n")
    assert _labels(_request(workdir, 'labels_file = "region.csv"')) == {"en": {"R1": "North, upper"}}


def test_a_klass_export_gives_its_names_in_the_language_declared(workdir):
    write(workdir, "klass_131.csv", KLASS_CSV)
    req = _request(workdir, 'labels_file = { file = "klass_131.csv", language = "nb" }')
    assert _labels(req) == {"nb": {"R1": "Nord; indre", "R2": "Sør"}}


def test_code_and_label_name_the_columns_of_any_one_language_code_list(workdir):
    write(workdir, "koder.csv", "kode,tekst,annet\nR1,Nord,x\nR2,Sør,y\n")
    req = _request(workdir, 'labels_file = { file = "koder.csv", language = "nb", code = "kode", label = "tekst" }')
    assert _labels(req) == {"nb": {"R1": "Nord", "R2": "Sør"}}


def test_a_list_of_files_and_inline_labels_are_merged(workdir):
    write(workdir, "en.csv", "code,label_en\nR1,North\nR2,South\n")
    write(workdir, "klass.csv", KLASS_CSV)
    req = _request(workdir, 'labels = { en = { Total = "All regions", R1 = "North" } }\n'
                            'labels_file = ["en.csv", { file = "klass.csv", language = "nb" }]')
    assert _labels(req) == {"en": {"Total": "All regions", "R1": "North", "R2": "South"},
                            "nb": {"R1": "Nord; indre", "R2": "Sør"}}


def test_paths_in_an_included_file_are_relative_to_it(workdir):
    write(workdir, "shared/region.csv", LABELS_CSV)
    write(workdir, "shared/klass.csv", KLASS_CSV)
    write(workdir, "shared/h.toml", '[hierarchies.region]\ncolumns = ["region"]\n'
                                    'labels_file = ["region.csv", { file = "klass.csv", language = "se" }]\n')
    req = write(workdir, "r.toml", 'include = ["shared/h.toml"]\n' + REQUEST.format(
        formats='["csv"]', extra="", region="").replace('[hierarchies.region]\ncolumns = ["region"]\n', ""))
    labels = _labels(req)
    assert labels["en"]["R1"] == "North" and labels["se"] == {"R1": "Nord; indre", "R2": "Sør"}


# -- the SDMX structure message ---------------------------------------------------------------
def test_an_sdmx_structure_protect_wrote_gives_its_labels_back(workdir):
    pytest.importorskip("sdmx")
    labels = ('{ en = { Total = "All regions", R1 = "North", R2 = "South" }, '
              'nb = { Total = "Alle regioner", R1 = "Nord" } }')
    first = _request(workdir, f"labels = {labels}", '["sdmx-structure"]', name="first.toml")
    code, out = _protect(first, workdir)
    assert code == 0
    (out / "region_sex.structure.xml").rename(workdir / "region_sex.structure.xml")
    again = _request(workdir, 'labels_file = { sdmx = "region_sex.structure.xml", codelist = "CL_REGION_SEX_REGION" }',
                     '["sdmx-structure"]', name="again.toml")
    assert _labels(again) == _labels(first)  # _T is the root again; a code named by itself has no label
    code, out = _protect(again, workdir)
    assert code == 0


def test_an_sdmx_message_of_several_code_lists_needs_codelist(workdir):
    pytest.importorskip("sdmx")
    first = _request(workdir, 'labels = { en = { R1 = "North" } }', '["sdmx-structure"]', name="first.toml")
    assert _protect(first, workdir)[0] == 0
    req = _request(workdir, 'labels_file = { sdmx = "out/region_sex.structure.xml" }')
    with pytest.raises(SpecError, match=r"r\.toml.*\[hierarchies\.region\].*structure\.xml.*codelist.*"
                                        r"'CL_REGION_SEX_REGION'"):
        read_request(req)
    req = _request(workdir, 'labels_file = { sdmx = "out/region_sex.structure.xml", codelist = "CL_AREA" }')
    with pytest.raises(SpecError, match=r"no code list 'CL_AREA'.*'CL_REGION_SEX_SEX'"):
        read_request(req)


def _one_code_list(path, codes: dict[str, dict[str, str]]) -> None:
    sdmx = pytest.importorskip("sdmx")
    from sdmx import message
    from sdmx.model import common
    from sdmx.model import v21 as m

    cl = m.Codelist(id="CL_REGION", maintainer=common.Agency(id="SSB"), version="1.0", is_final=True,
                    is_external_reference=False, name=common.InternationalString({"en": "Region"}))
    for code, names in codes.items():
        cl.append(m.Code(id=code, name=common.InternationalString(names)))
    msg = message.StructureMessage(header=message.Header(id="CL", test=False, sender=common.Agency(id="SSB")))
    msg.add(cl)
    path.write_bytes(sdmx.to_xml(msg, pretty_print=True))


def test_the_one_code_list_of_a_message_needs_no_codelist(workdir):
    _one_code_list(workdir / "CL_REGION.xml", {"R1": {"en": "North", "nb": "Nord"}, "R2": {"en": "South"}})
    req = _request(workdir, 'labels_file = { sdmx = "CL_REGION.xml" }')
    assert _labels(req) == {"en": {"R1": "North", "R2": "South"}, "nb": {"R1": "Nord"}}


def test_an_sdmx_code_list_with_codes_the_data_lacks_is_refused_naming_them(workdir, capsys):
    _one_code_list(workdir / "CL_REGION.xml", {"R1": {"en": "North"}, "R99": {"en": "Atlantis"}})
    code, out = _protect(_request(workdir, 'labels_file = { sdmx = "CL_REGION.xml" }'), workdir)
    assert code == 2
    err = capsys.readouterr().err
    assert "r.toml" in err and "[hierarchies.region]" in err and "CL_REGION.xml" in err and "'R99'" in err
    assert not out.exists()


# -- refusals ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("content", "entry", "says"), [
    (None, '"nowhere.csv"', r"nowhere\.csv.*does not exist"),
    ("kode,label_en\nR1,North\n", '"f.csv"', r"no code column 'code'.*'kode', 'label_en'"),
    ("code,name\nR1,North\n", '"f.csv"', r"no label column.*label_<lang>.*'code', 'name'"),
    ("code,label\nR1,North\n", '{ file = "f.csv", language = "nb" }', r"no label column 'name'.*'code', 'label'"),
    ("code,label_en,label_nb\nR1,North,Nord\nR2,,\nR3,,\n", '"f.csv"', r"'R2', 'R3' \(2 in all\).*empty label"),
    ("code;name\nR1;\n", '{ file = "f.csv", language = "nb" }', r"'R1'.*empty label"),
    ("code,label_en\nR1,North\nR1,South\n", '"f.csv"', r"'R1'.*labelled twice differently"),
    ("code,label_english\nR1,North\n", '"f.csv"', r"'label_english'.*name no language"),
    ("code,label_en\n,North\n", '"f.csv"', r"line 2.*no code"),
    ("", '"f.csv"', r"is empty"),
])
def test_a_bad_labels_file_is_refused_naming_request_classification_file_and_what(workdir, content, entry, says):
    if content is not None:
        write(workdir, "f.csv", content)
    req = _request(workdir, f"labels_file = {entry}")
    with pytest.raises(SpecError, match=r"r\.toml.*\[hierarchies\.region\] labels_file '(f|nowhere)\.csv'.*" + says):
        read_request(req)


@pytest.mark.parametrize(("entry", "says"), [
    ('{ file = "f.csv", sdmx = "f.xml" }', "exactly one of file, sdmx"),
    ('{ file = "f.csv", codelist = "CL" }', "unknown key 'codelist'"),
    ('{ file = "f.csv", label = "name" }', "needs the language"),
    ('{ file = "f.csv", language = "norsk" }', "not a language tag"),
    ("[]", "must not be an empty list"),
    ("3", "labels_file"),
])
def test_a_malformed_labels_file_key_is_refused(workdir, entry, says):
    with pytest.raises(SpecError, match=says):
        read_request(_request(workdir, f"labels_file = {entry}"))


def test_a_code_two_sources_label_differently_is_refused_naming_both(workdir):
    write(workdir, "f.csv", "code,label_en\nR1,Northern\n")
    req = _request(workdir, 'labels = { en = { R1 = "North" } }\nlabels_file = "f.csv"')
    with pytest.raises(SpecError, match=r"r\.toml.*\[hierarchies\.region\].*labels_file 'f\.csv' labels 'R1' in "
                                        r"'en' differently from labels\.en"):
        read_request(req)


def test_a_file_label_of_no_code_is_refused_naming_the_labels_file(workdir, capsys):
    write(workdir, "f.csv", "code,label_en\nR1,North\nR99,Nowhere\n")
    code, out = _protect(_request(workdir, 'labels = { en = { R2 = "South" } }\nlabels_file = "f.csv"'), workdir)
    assert code == 2
    err = capsys.readouterr().err
    assert "r.toml" in err and "[hierarchies.region] labels_file 'f.csv' labels 'R99'" in err
    assert not out.exists()


@pytest.mark.parametrize(("region", "says"), [
    ('labels = { en = { R1 = "North" }, nb = { R1 = "Nord" } }', r"'de'.*labels are in: en, nb"),
    ("", r"'de'.*none of them has labels"),
])
def test_label_columns_in_a_language_no_label_has_are_refused(workdir, region, says):
    req = _request(workdir, region, extra='label_columns = ["en", "de"]' if region else 'label_columns = ["de"]')
    with pytest.raises(SpecError, match=r"r\.toml.*label_columns asks for " + says):
        read_request(req)


# -- a programme -------------------------------------------------------------------------------
PROGRAMME = """
database = "demo.duckdb"
source = "persons"
formats = ["json-stat"]
[ptable]
maximum_entropy = {{ D = 3, V = 1.5, js = 1 }}
[classifications.sex]
codes = ["F", "M"]
root = "Both"
{labels}
[[hypercubes]]
name = "SEX"
dims = {{ sex = "sex" }}
"""


def test_a_programme_classification_takes_its_labels_from_a_file(workdir):
    write(workdir, "sex.csv", "code;label_en\nBoth;Both sexes\nF;Female\nM;Male\n")
    prog = write(workdir, "p.toml", PROGRAMME.format(labels='labels_file = "sex.csv"'))
    pt.Programme(prog).run(out=workdir / "out", quiet=True)
    ds = json.loads((workdir / "out" / "SEX.stat.json").read_text(encoding="utf-8"))
    assert ds["dimension"]["SEX"]["category"]["label"] == {"_T": "Both sexes", "F": "Female", "M": "Male"}


def test_a_programme_file_label_of_no_code_is_refused_naming_the_labels_file(workdir):
    write(workdir, "sex.csv", "code,label_en\nF,Female\nX,Unknown\n")
    prog = write(workdir, "p.toml", PROGRAMME.format(labels='labels_file = "sex.csv"'))
    with pytest.raises(SpecError, match=r"p\.toml.*\[classifications\.sex\] labels_file 'sex\.csv' labels 'X'"):
        pt.Programme(prog).run(out=workdir / "out", quiet=True)


def test_a_programme_names_a_missing_labels_file(workdir):
    prog = write(workdir, "p.toml", PROGRAMME.format(labels='labels_file = { file = "klass.csv", language = "nb" }'))
    with pytest.raises(SpecError, match=r"p\.toml.*\[classifications\.sex\] labels_file 'klass\.csv'.*does not exist"):
        pt.Programme(prog)


# -- a property ---------------------------------------------------------------------------------
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=12
                ).map(str.strip).filter(bool)
_LABELS = st.dictionaries(st.sampled_from(["en", "nb", "nn", "se", "en-GB"]),
                          st.dictionaries(_TEXT, _TEXT, min_size=1, max_size=6), min_size=1, max_size=3)


@given(labels=_LABELS, delimiter=st.sampled_from([",", ";"]))
def test_any_labels_written_as_a_label_csv_are_read_back_the_same(tmp_path_factory, labels, delimiter):
    import csv

    path = tmp_path_factory.mktemp("labels") / "labels.csv"
    langs = list(labels)
    codes = list(dict.fromkeys(c for by in labels.values() for c in by))
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, delimiter=delimiter, quoting=csv.QUOTE_ALL)
        w.writerow(["code", *(f"label_{lang}" for lang in langs)])
        w.writerows([c, *(labels[lang].get(c, "") for lang in langs)] for c in codes
                    if any(c in labels[lang] for lang in langs))
    got, listed = read_labels_file(str(path), path.parent, "Total", "test")
    assert got == labels and listed == codes


def test_without_sdmx1_an_sdmx_labels_file_names_the_extra(workdir, monkeypatch):
    import sys

    write(workdir, "CL_REGION.xml", "<Structure/>")
    monkeypatch.setitem(sys.modules, "sdmx", None)  # import sdmx raises ImportError
    with pytest.raises(SpecError, match=r"CL_REGION\.xml.*needs the sdmx1 library: pip install \"protab\[sdmx\]\""):
        read_request(_request(workdir, 'labels_file = { sdmx = "CL_REGION.xml" }'))


def test_a_file_that_is_no_sdmx_message_is_refused_naming_it(workdir):
    pytest.importorskip("sdmx")
    write(workdir, "CL_REGION.xml", "code,label_en\nR1,North\n")
    with pytest.raises(SpecError, match=r"CL_REGION\.xml.*cannot read the file as an SDMX-ML structure message"):
        read_request(_request(workdir, 'labels_file = { sdmx = "CL_REGION.xml" }'))


def test_no_output_may_replace_a_labels_file(workdir):
    from protab._io import protected_form
    from protab.cli.protect_checks import request_inputs

    for name in ("a.csv", "b.csv", "c.xml"):
        write(workdir, name, "code,label_en\nR1,North\n" if name.endswith("csv") else "")
    req = _request(workdir, 'labels_file = ["a.csv", { file = "b.csv", language = "en", label = "label_en" }]')
    cfg = read_request(req)
    cfg["hierarchies"]["region"]["labels_file"].append({"sdmx": "c.xml"})  # as the schema takes it
    guarded = {p for p, _ in request_inputs(req, cfg, str(workdir / "demo.duckdb"))}
    assert {protected_form(str(workdir / n)) for n in ("a.csv", "b.csv", "c.xml")} <= guarded


def test_a_labels_file_that_is_not_utf8_is_refused_naming_it(workdir):
    (workdir / "latin1.csv").write_bytes("code;name\nR1;Sør\n".encode("latin-1"))
    with pytest.raises(SpecError, match=r"r\.toml.*labels_file 'latin1\.csv': the file is not UTF-8 text"):
        read_request(_request(workdir, 'labels_file = { file = "latin1.csv", language = "nb" }'))


# -- odd files and odd labels ---------------------------------------------------------------------
@pytest.mark.parametrize(("content", "says"), [
    ("code,label_en,label_en\nR1,North,South\n", r"the column 'label_en' is in the header twice"),
    ("code,code,label_en\nR1,R2,North\n", r"the column 'code' is in the header twice"),
    ("code,label_en\n", r"only one line \(a header\?\), no codes to label"),
    ("code;label_en\r\n\r\n", r"only one line"),
    ("code,label_EN,label_en\nR1,North,Nord\n", r"'EN' and 'en' are one language written two ways"),
    ("code,label_en\n\n\nR1,North\n,South\n", r"line 5 of the file has labels but no code"),
    ('code,label_en\nR1,"North\nR2,South\nR3,East\n', r"the row starting on line 2.*unexpected end of data"),
    ("code,label_en\nR1,North\nR2,Bell\x07here\n", r"the label of 'R2' in 'en' holds the control character "
                                                    r"'\\x07'"),
], ids=["label-twice", "code-twice", "header-only", "header-only-crlf", "case", "line-after-blanks",
        "open-quote", "control"])
def test_an_odd_labels_file_is_refused_naming_its_line_column_or_code(workdir, content, says):
    write(workdir, "f.csv", content)
    with pytest.raises(SpecError, match=r"r\.toml.*\[hierarchies\.region\] labels_file 'f\.csv'.*" + says):
        read_request(_request(workdir, 'labels_file = "f.csv"'))


@pytest.mark.parametrize(("region", "says"), [
    ('labels = { en = { R1 = "Bell\\u0007" } }', r"hierarchies\.region\.labels\.en\.R1.*control character '\\x07'"),
    ('name = { en = "Re\\u001bgion" }', r"hierarchies\.region\.name\.en.*control character '\\x1b'"),
    ('labels = { en = { R1 = "North" }, EN = { R2 = "South" } }', r"'en' and 'EN' are one language written two ways"),
], ids=["label-control", "name-control", "case"])
def test_odd_inline_labels_are_refused_naming_the_key(workdir, region, says):
    with pytest.raises(SpecError, match=says):
        read_request(_request(workdir, region))


def test_a_language_written_two_ways_by_two_sources_is_refused_naming_both(workdir):
    write(workdir, "f.csv", "code,label_EN\nR2,South\n")
    req = _request(workdir, 'labels = { en = { R1 = "North" } }\nlabels_file = "f.csv"')
    with pytest.raises(SpecError, match=r"r\.toml'?: \[hierarchies\.region\]: labels_file 'f\.csv' labels in 'EN', "
                                        r"labels\.en in 'en': one language written two ways"):
        read_request(req)



@pytest.mark.parametrize("entry", ['"swap.seed"', '{ file = "swap.seed", language = "en" }'])
def test_a_secret_file_named_as_a_labels_file_is_refused_without_showing_it(workdir, entry):
    """A seed file (one line) named by mistake: the refusal names the file, never its content."""
    (workdir / "swap.seed").write_text("s3cr3t-swap-seed-4f1a\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"labels_file 'swap\.seed': the file has only one line") as err:
        read_request(_request(workdir, f"labels_file = {entry}"))
    assert "s3cr3t" not in str(err.value)


def test_a_labels_file_that_is_no_regular_file_is_refused_saying_so(workdir):
    import os

    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes here")
    os.mkfifo(workdir / "pipe.csv")  # read, it would wait for a writer
    with pytest.raises(SpecError, match=r"labels_file 'pipe\.csv': the file .*pipe\.csv' is not a regular file"):
        read_request(_request(workdir, 'labels_file = "pipe.csv"'))
