"""Protected tables written as SDMX-CSV 2.0 data messages (protab.exchange, docs/exchange.md):
the columns the SDMX-CSV 2.0 field guide prescribes, in its order; every published value as it
is in the frame; withheld cells empty with flags that say why (CL_OBS_STATUS, CL_CONF_STATUS);
originals never written; an invalid dataflow id refused by name; ``protab protect`` writes the
format with the other files of its atomic batch."""

from __future__ import annotations

import csv
import io
import re

import polars as pl
import pytest

import protab as pt
from protab import cli
from protab.errors import InputError, SpecError
from protab.exchange import sdmx_csv, write_sdmx_csv

P = pt.PTable.maximum_entropy(D=3, V=1.5, js=1)
OBS_STATUS = {"A", "M", "Q"}  # normal; missing, cannot exist; missing, suppressed
CONF_STATUS = {"F", "C", "D", "N"}


def check_sdmx_csv(text: str, dims: list[str], structure_id: str) -> list[dict[str, str]]:
    """The rows of an SDMX-CSV 2.0 message, checked against the field guide's column rules."""
    assert "\r\n" in text and text.endswith("\r\n")  # RFC 4180 line ends
    rows = list(csv.reader(io.StringIO(text, newline="")))
    header, body = rows[0], rows[1:]
    assert header == ["STRUCTURE", "STRUCTURE_ID", "ACTION", *dims, "OBS_VALUE", "OBS_STATUS", "CONF_STATUS"]
    assert all(len(r) == len(header) for r in body)
    out = [dict(zip(header, r)) for r in body]
    for r in out:
        assert r["STRUCTURE"] == "dataflow"
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*:[A-Za-z][A-Za-z0-9_-]*\([0-9]+(\.[0-9]+)+\)", r["STRUCTURE_ID"])
        assert r["STRUCTURE_ID"] == structure_id
        assert r["ACTION"] == "I"
        assert all(r[d] != "" for d in dims), r
        assert r["OBS_STATUS"] in OBS_STATUS and r["CONF_STATUS"] in CONF_STATUS
        if r["OBS_VALUE"] == "":  # empty only with a flag that says why
            assert r["OBS_STATUS"] in ("M", "Q") and (r["OBS_STATUS"] == "M" or r["CONF_STATUS"] in ("C", "D"))
        else:
            float(r["OBS_VALUE"])
            assert r["OBS_STATUS"] == "A" and r["CONF_STATUS"] == "F"
    return out


def _as_frame(rows: list[dict[str, str]], dims: list[str]) -> pl.DataFrame:
    return pl.DataFrame(rows).select(*dims, "OBS_VALUE", "OBS_STATUS", "CONF_STATUS")


@pytest.fixture
def keyed(session, persons):
    session.register("persons", persons)
    session.add_record_keys("persons", id_column="pid", seed="sdmx")
    return session


def test_cell_key_table_with_blanks(keyed, h_muni):
    spec = pt.TableSpec({"municipality": h_muni, "sex": None, "age": None})
    frame = keyed.cell_key("persons", spec, P, threshold=4)
    assert frame["n_pert"].null_count() > 0  # some blanks to flag
    dims = ["MUNICIPALITY", "SEX", "AGE"]
    rows = check_sdmx_csv(sdmx_csv(frame, "MUNI_SEX"), dims, "PROTAB:MUNI_SEX(1.0)")
    got = _as_frame(rows, dims)
    assert got.height == frame.height
    # publication order kept; a total (level 0, the root "Total") is SDMX's _T
    want_codes = frame.select(pl.when(pl.col("municipality_level") == 0).then(pl.lit("_T"))
                              .otherwise(pl.col("municipality")).alias("m"))["m"].to_list()
    assert "Total" in frame["municipality"].to_list() and got["MUNICIPALITY"].to_list() == want_codes
    want = frame["n_pert"].cast(pl.String).fill_null("").to_list()
    assert got["OBS_VALUE"].to_list() == want
    blank = frame["n_pert"].is_null()
    assert set(got.filter(blank).select("OBS_STATUS", "CONF_STATUS").unique().rows()) == {("Q", "C")}


def test_originals_are_never_written(keyed, h_muni):
    spec = pt.TableSpec({"municipality": h_muni, "sex": None}, weight="weight")
    frame = keyed.cell_key("persons", spec, P, original=True)
    assert {"n", "w"} <= set(frame.columns)
    rows = check_sdmx_csv(sdmx_csv(frame, "T"), ["MUNICIPALITY", "SEX", "MEASURE"], "PROTAB:T(1.0)")
    assert {r["MEASURE"] for r in rows} == {"N_PERT", "W_PERT"}
    counts = [r["OBS_VALUE"] for r in rows if r["MEASURE"] == "N_PERT"]
    assert counts == frame["n_pert"].cast(pl.String).to_list()


def test_suppressed_cells_carry_primary_and_secondary_flags(keyed, h_muni):
    spec = pt.TableSpec({"municipality": h_muni, "sex": None, "age": None})
    frame = keyed.suppress("persons", spec, min_frequency=3)
    labels = set(frame["suppressed"])
    assert {"primary", "secondary", "no"} <= labels
    rows = check_sdmx_csv(sdmx_csv(frame, "SUPP", agency="ESTAT", version="2.1.0"),
                          ["MUNICIPALITY", "SEX", "AGE"], "ESTAT:SUPP(2.1.0)")
    got = _as_frame(rows, ["MUNICIPALITY", "SEX", "AGE"]).with_columns(frame["suppressed"])
    flags = dict(got.select("suppressed", "CONF_STATUS").unique().rows())
    assert flags == {"primary": "C", "secondary": "D", "no": "F"}
    kept = got.filter(pl.col("suppressed") == "no")
    assert kept["OBS_VALUE"].to_list() == frame.filter(pl.col("suppressed") == "no")["n"].cast(pl.String).to_list()
    assert (got.filter(pl.col("suppressed") != "no")["OBS_VALUE"] == "").all()


def test_structural_zeros_are_missing_that_cannot_exist(keyed, h_muni):
    spec = pt.TableSpec({"municipality": h_muni, "sex": None})
    frame = keyed.cell_key("persons", spec, P)
    zeros = pl.DataFrame({"municipality": ["R1001"], "sex": ["M"]})
    rows = check_sdmx_csv(sdmx_csv(frame, "Z", structural_zeros=zeros), ["MUNICIPALITY", "SEX"], "PROTAB:Z(1.0)")
    flagged = [(r["MUNICIPALITY"], r["SEX"]) for r in rows if r["OBS_STATUS"] == "M"]
    assert flagged == [("R1001", "M")]


def test_aggregated_dimensions_are_the_sdmx_total():
    frame = pl.DataFrame({"region": ["R1", None], "n": [4, 9]})
    rows = check_sdmx_csv(sdmx_csv(frame, "ANSWER"), ["REGION"], "PROTAB:ANSWER(1.0)")
    assert [r["REGION"] for r in rows] == ["R1", "_T"]


@pytest.mark.parametrize("bad", ["1table", "muni sex", "", "ä"])
def test_an_invalid_dataflow_id_is_refused_by_name(tmp_path, bad):
    frame = pl.DataFrame({"sex": ["F", "M"], "n_pert": [3, 4]})
    target = tmp_path / "t.sdmx.csv"
    with pytest.raises(SpecError, match=f"table {re.escape(repr(bad))}.*SDMX"):
        write_sdmx_csv(frame, target, bad)
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def test_bad_tables_are_clear_errors():
    with pytest.raises(InputError, match="table 'T'.*share their codes"):
        sdmx_csv(pl.DataFrame({"sex": ["F", "F"], "n": [1, 2]}), "T")
    with pytest.raises(InputError, match="table 'T'.*empty codes"):
        sdmx_csv(pl.DataFrame({"sex": ["F", ""], "n": [1, 2]}), "T")
    with pytest.raises(SpecError, match="column 'my sex'"):
        sdmx_csv(pl.DataFrame({"my sex": ["F", "M"], "n": [1, 2]}), "T")


def _database(tmp_path, persons) -> str:
    db = str(tmp_path / "x.duckdb")
    with pt.Session(db) as s:
        s.register("persons", persons)
        s.add_record_keys("persons", id_column="pid", seed="x")
    return db


def test_protect_writes_sdmx_csv_and_json_stat(tmp_path, persons):
    db = _database(tmp_path, persons)
    req = tmp_path / "r.toml"
    req.write_text('formats = ["csv", "sdmx-csv", "json-stat"]\n[ptable]\nmaximum_entropy = { D = 3, V = 1.5, js = 1 }\n'
                   '[[tables]]\nname = "muni_sex"\nsource = "persons"\ndims = ["municipality", "sex", "age"]\n'
                   'threshold = 4\n', encoding="utf-8")
    out = tmp_path / "out"
    assert cli.main(["protect", str(req), "--db", db, "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["muni_sex.csv", "muni_sex.sdmx.csv", "muni_sex.stat.json", "protab_run.json"]
    plain = pl.read_csv(out / "muni_sex.csv", schema_overrides={"municipality": pl.String})
    rows = check_sdmx_csv((out / "muni_sex.sdmx.csv").read_bytes().decode("utf-8"), ["MUNICIPALITY", "SEX", "AGE"],
                          "PROTAB:MUNI_SEX(1.0)")
    assert [r["OBS_VALUE"] for r in rows] == plain["n_pert"].cast(pl.String).fill_null("").to_list()


def test_protect_refuses_a_table_name_that_is_no_sdmx_id_before_protecting(tmp_path, persons, capsys):
    db = _database(tmp_path, persons)
    req = tmp_path / "r.toml"
    req.write_text('formats = ["sdmx-csv"]\n[ptable]\nmaximum_entropy = { D = 3, V = 1.5, js = 1 }\n'
                   '[[tables]]\nname = "2021_sex"\nsource = "persons"\ndims = ["sex"]\n', encoding="utf-8")
    out = tmp_path / "out"
    assert cli.main(["protect", str(req), "--db", db, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "'2021_sex'" in err and "SDMX" in err
    assert not out.exists() or not any(out.iterdir())


def test_a_labelled_suppressed_cell_never_writes_its_value():
    # e.g. a suppressed frame joined back to its original counts by mistake
    frame = pl.DataFrame({"region": ["R1", "R2", "R3"], "n": [7, 1, 5],
                          "suppressed": ["no", "primary", "secondary"]})
    rows = check_sdmx_csv(sdmx_csv(frame, "T"), ["REGION"], "PROTAB:T(1.0)")
    assert [(r["OBS_VALUE"], r["CONF_STATUS"]) for r in rows] == [("7", "F"), ("", "C"), ("", "D")]
