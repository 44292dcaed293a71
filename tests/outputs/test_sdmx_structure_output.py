"""The SDMX-ML structure message beside an SDMX-CSV dataflow (protab.exchange.sdmx_structure,
docs/exchange.md): read back with the sdmx1 library, the dataflow of the CSV's STRUCTURE_ID is
in it, its data structure's dimensions are the CSV's dimension columns, every code and flag the
CSV holds is in the component's code list, the concepts are in the concept scheme; labels name
the codes; ``protab protect`` and a programme write it with their other files; without the
library, asking for it is an error naming the extra; a failing write leaves no file."""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

import polars as pl
import pytest

import protab as pt
from protab import cli
from protab.errors import InputError, SpecError
from protab.exchange import sdmx_csv, sdmx_structure, write_sdmx_structure

sdmx = pytest.importorskip("sdmx")  # the extra protab[sdmx], part of dev

P = pt.PTable.maximum_entropy(D=3, V=1.5, js=1)


def check_structure(xml: str | Path, csv_text: str):
    """The structure message read back by sdmx1, checked against the SDMX-CSV it describes; the
    data structure and its dimensions' code lists by dimension id."""
    rows = list(csv.reader(io.StringIO(csv_text, newline="")))
    header, body = rows[0], rows[1:]
    dims = header[header.index("ACTION") + 1:header.index("OBS_VALUE")]
    msg = sdmx.read_sdmx(xml) if isinstance(xml, Path) else sdmx.read_sdmx(io.BytesIO(xml.encode("utf-8")))
    agency, rest = body[0][header.index("STRUCTURE_ID")].split(":")
    flow_id, version = rest.rstrip(")").split("(")
    flow = msg.dataflow[flow_id]
    assert (flow.maintainer.id, flow.version) == (agency, version)
    dsd = msg.structure[flow.structure.id]
    assert [d.id for d in dsd.dimensions] == dims
    assert [m.id for m in dsd.measures] == ["OBS_VALUE"]
    assert sorted(a.id for a in dsd.attributes) == ["CONF_STATUS", "OBS_STATUS"]
    lists = {}
    for comp in [*dsd.dimensions, *dsd.attributes]:
        cl = comp.local_representation.enumerated
        assert cl.id in msg.codelist  # declared in the message itself
        codes = {c.id for c in msg.codelist[cl.id]}
        column = header.index(comp.id)
        used = {r[column] for r in body}
        assert used <= codes, (comp.id, used - codes)
        assert all(str(c.name) for c in msg.codelist[cl.id])  # every code is named
        lists[comp.id] = msg.codelist[cl.id]
    concepts = {c.id for scheme in msg.concept_scheme.values() for c in scheme}
    assert {c.concept_identity.id for c in [*dsd.dimensions, *dsd.measures, *dsd.attributes]} <= concepts
    return dsd, lists


@pytest.fixture
def keyed(session, persons):
    session.register("persons", persons)
    session.add_record_keys("persons", id_column="pid", seed="sdmx-structure")
    return session


def test_a_weighted_cell_key_table_with_blanks_is_described(keyed, h_muni):
    spec = pt.TableSpec({"municipality": h_muni, "sex": None}, weight="weight")
    frame = keyed.cell_key("persons", spec, P, threshold=4)
    assert frame["n_pert"].null_count() > 0
    _, lists = check_structure(sdmx_structure(frame, "MUNI_SEX"), sdmx_csv(frame, "MUNI_SEX"))
    assert {c.id for c in lists["MEASURE"]} == {"N_PERT", "W_PERT"}
    assert "_T" in {c.id for c in lists["MUNICIPALITY"]}  # the root "Total"


def test_suppression_flags_and_structural_zeros_are_in_the_flag_code_lists(keyed, h_muni):
    spec = pt.TableSpec({"municipality": h_muni, "sex": None, "age": None})
    frame = keyed.suppress("persons", spec, min_frequency=3)
    zeros = pl.DataFrame({"municipality": ["R1001"], "sex": ["M"], "age": ["old"]})
    kw = {"agency": "ESTAT", "version": "2.1.0", "structural_zeros": zeros}
    text = sdmx_csv(frame, "SUPP", **kw)
    assert {"C", "D", "F"} <= set(pl.read_csv(text.encode(), infer_schema=False)["CONF_STATUS"])
    check_structure(sdmx_structure(frame, "SUPP", **kw), text)


def test_labels_name_the_codes_in_each_language_and_the_total_by_its_root():
    frame = pl.DataFrame({"region": ["Total", "R1", "R2"], "region_level": [0, 1, 1], "n_pert": [9, 4, 5]})
    labels = {"region": {"en": {"Total": "All regions", "R1": "North"}, "nb": {"Total": "Alle", "R1": "Nord"}}}
    xml = sdmx_structure(frame, "REG", labels=labels, names={"region": {"en": "Region", "nb": "Region"}})
    _, lists = check_structure(xml, sdmx_csv(frame, "REG"))
    names = {c.id: c.name.localizations for c in lists["REGION"]}
    assert names == {"_T": {"en": "All regions", "nb": "Alle"}, "R1": {"en": "North", "nb": "Nord"},
                     "R2": {"en": "R2"}}  # without a label: the code
    assert lists["REGION"].name.localizations["en"] == "Region"


def test_without_labels_codes_are_their_own_names_and_the_total_is_the_root():
    frame = pl.DataFrame({"sex": ["Alle", "F", "M"], "sex_level": [0, 1, 1], "n_pert": [9, 4, 5]})
    _, lists = check_structure(sdmx_structure(frame, "S"), sdmx_csv(frame, "S"))
    assert {c.id: str(c.name) for c in lists["SEX"]} == {"_T": "Alle", "F": "F", "M": "M"}


def test_an_invalid_dataflow_id_is_refused_and_nothing_is_written(tmp_path):
    frame = pl.DataFrame({"sex": ["F", "M"], "n_pert": [4, 5]})
    path = tmp_path / "s.structure.xml"
    path.write_text("earlier", encoding="utf-8")
    with pytest.raises(SpecError, match="'2BAD'"):
        write_sdmx_structure(frame, path, "2BAD")
    assert path.read_text(encoding="utf-8") == "earlier"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.structure.xml"]  # no temporary left behind


def test_without_the_library_asking_for_a_structure_names_the_extra(monkeypatch, tmp_path, persons):
    monkeypatch.setitem(sys.modules, "sdmx", None)  # import sdmx now fails
    with pytest.raises(InputError, match=r"protab\[sdmx\]"):
        sdmx_structure(pl.DataFrame({"sex": ["F", "M"], "n_pert": [4, 5]}), "S")
    req = _request(tmp_path, persons, '["csv", "sdmx-structure"]')
    assert cli.main(["protect", str(req), "--db", str(tmp_path / "x.duckdb"), "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()  # refused before any work


def _request(tmp_path, persons, formats: str) -> Path:
    with pt.Session(str(tmp_path / "x.duckdb")) as s:
        s.register("persons", persons)
        s.add_record_keys("persons", id_column="pid", seed="x")
    req = tmp_path / "r.toml"
    req.write_text(f'formats = {formats}\n[ptable]\nmaximum_entropy = {{ D = 3, V = 1.5, js = 1 }}\n'
                   '[[tables]]\nname = "muni_sex"\nsource = "persons"\ndims = ["municipality", "sex"]\n'
                   'threshold = 4\n', encoding="utf-8")
    return req


def test_protect_writes_the_structure_beside_the_sdmx_csv(tmp_path, persons):
    req = _request(tmp_path, persons, '["sdmx-csv", "sdmx-structure"]')
    out = tmp_path / "out"
    assert cli.main(["protect", str(req), "--db", str(tmp_path / "x.duckdb"), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["muni_sex.sdmx.csv", "muni_sex.structure.xml",
                                                     "protab_run.json"]
    check_structure(out / "muni_sex.structure.xml", (out / "muni_sex.sdmx.csv").read_bytes().decode("utf-8"))


def test_a_code_that_is_no_sdmx_code_id_is_named_in_a_warning_and_kept():
    frame = pl.DataFrame({"municipality": ["Oslo kommune", "R.1", "Bergen"], "n_pert": [4, 5, 6]})
    with pytest.warns(UserWarning, match=r"'municipality'.*'Oslo kommune'.*'R\.1'") as caught:
        xml = sdmx_structure(frame, "M")
    assert "Bergen" not in str(caught[0].message)
    _, lists = check_structure(xml, sdmx_csv(frame, "M"))  # read back: the codes as the CSV has them
    assert {c.id for c in lists["MUNICIPALITY"]} == {"Oslo kommune", "R.1", "Bergen"}
