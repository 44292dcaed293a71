"""Every CSV protab writes is safe to open in a spreadsheet (OWASP, "CSV Injection"): a text cell
beginning with =, +, -, @, a tab or a carriage return gets a leading single quote — in protect's
CSV and SDMX-CSV files, grid CSV, a programme's files and summary, the service's CSV and
SDMX-CSV answers — while numbers stay numbers: numeric columns are untouched, and a text cell
that is a plain number (-5, +3, -0.5, 1e3) is left as it is. Parquet, JSON-stat, JSON and Arrow
carry the codes as they are."""

from __future__ import annotations

import csv
import io
import json
import re

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

import protab as pt
from protab import cli
from protab._io import frame_writer, write_frame
from protab.exchange import sdmx_csv, spreadsheet_safe, write_grid_csv
from protab.serve.formats import render

HOSTILE = ['=HYPERLINK("http://evil.example","click")', "+cmd|' /C calc'!A0", "@SUM(1+1)*cmd", "\tx", "\rx",
           "-1+1", "-2-3", "=1", "-", "+"]
NUMBERS = ["-5", "+3", "-0.5", "1e3", "-1.5E-3", ".5", "-.5", "12", "0"]
SAFE = ["plain", "R1", "a=b", "x-1", " =not first", "'=already"]
DANGER = tuple("=+-@\t\r")
# a plain decimal number, as the test reads it (independently of protab's pattern)
NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def _cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def test_hostile_cells_get_a_quote_numbers_and_safe_text_do_not():
    frame = pl.DataFrame({"code": HOSTILE + NUMBERS + SAFE + [None],
                          "n": list(range(-3, len(HOSTILE + NUMBERS + SAFE) - 2)),
                          "x": [-1.5] * (len(HOSTILE + NUMBERS + SAFE) + 1)})
    out = spreadsheet_safe(frame)
    assert out["code"].to_list() == ["'" + v for v in HOSTILE] + NUMBERS + SAFE + [None]
    assert out["n"].to_list() == frame["n"].to_list() and out.schema["n"] == pl.Int64  # numbers stay numbers
    assert out["x"].to_list() == frame["x"].to_list() and out.schema["x"] == pl.Float64
    rows = _cells(out.write_csv())
    assert [r[1] for r in rows[1:4]] == ["-3", "-2", "-1"]  # a negative count is written as a number


def test_categorical_cells_and_column_names_are_neutralised_too():
    frame = pl.DataFrame({"=cmd": ["=1+2", "ok"], "c": ["@x", "-4"]}).with_columns(pl.col("c").cast(pl.Categorical))
    out = spreadsheet_safe(frame)
    assert out.columns == ["'=cmd", "c"]
    assert out.rows() == [("'=1+2", "'@x"), ("ok", "-4")]


_TEXT = st.text(alphabet=st.sampled_from(list("=+-@\t\r0123456789.eE xA'")), max_size=8)


@given(st.lists(st.one_of(st.none(), _TEXT), min_size=1, max_size=30))
def test_no_text_cell_starts_dangerously_unless_it_is_a_number(values):
    out = spreadsheet_safe(pl.DataFrame({"v": values}, schema={"v": pl.String}))["v"].to_list()
    for before, after in zip(values, out):
        if before is None:
            assert after is None
            continue
        assert not after.startswith(DANGER) or NUMBER.fullmatch(after)
        # nothing is lost: a changed cell is the original behind one quote
        assert after == before or after == "'" + before
        if after != before:
            assert before.startswith(DANGER) and not NUMBER.fullmatch(before)


@pytest.fixture
def hostile_db(tmp_path):
    """Microdata whose region codes are hostile, plain numbers or NULL (named by null_code)."""
    codes = HOSTILE[:6] + ["-5", "+3", "plain", None]
    rows = [(i, codes[i % len(codes)], "FM"[i % 2]) for i in range(200)]
    db = str(tmp_path / "hostile.duckdb")
    with pt.Session(db) as s:
        s.register("persons", pl.DataFrame(rows, schema=["pid", "region", "sex"], orient="row"))
        s.add_record_keys("persons", id_column="pid", seed="hostile")
    return db, codes


def test_protect_writes_neutralised_csv_and_sdmx_csv_and_raw_parquet_and_json_stat(tmp_path, hostile_db):
    db, codes = hostile_db
    req = tmp_path / "r.toml"
    req.write_text('formats = ["csv", "parquet", "sdmx-csv", "json-stat"]\n[ptable]\n'
                   'maximum_entropy = { D = 3, V = 1.5, js = 1 }\n'
                   '[[tables]]\nname = "region_sex"\nsource = "persons"\ndims = ["region", "sex"]\n'
                   'null_code = "@SUM(9)"\n', encoding="utf-8")
    out = tmp_path / "out"
    assert cli.main(["protect", str(req), "--db", db, "--out", str(out)]) == 0
    raw = set(pl.read_parquet(out / "region_sex.parquet")["region"].to_list())
    given_codes = {c for c in codes if c is not None} | {"@SUM(9)"}
    assert given_codes <= raw  # Parquet: the codes as they are
    danger = {c for c in given_codes if c.startswith(DANGER) and not NUMBER.fullmatch(c)}
    assert danger == set(HOSTILE[:6]) | {"@SUM(9)"}
    want = {("'" + c if c in danger else c) for c in raw}
    text = (out / "region_sex.csv").read_bytes().decode("utf-8")
    assert {r[0] for r in _cells(text)[1:]} == want
    sdmx = _cells((out / "region_sex.sdmx.csv").read_bytes().decode("utf-8"))
    col = sdmx[0].index("REGION")
    assert {r[col] for r in sdmx[1:]} == {("_T" if c == "Total" else c) for c in want}
    values = [r[sdmx[0].index("OBS_VALUE")] for r in sdmx[1:]]
    assert all(v == "" or NUMBER.fullmatch(v) for v in values)
    stat = json.loads((out / "region_sex.stat.json").read_bytes().decode("utf-8"))
    assert given_codes <= set(stat["dimension"]["REGION"]["category"]["index"])  # JSON-stat: as they are


def test_grid_csv_neutralises_its_text_columns_and_keeps_grd_id(tmp_path):
    frame = pl.DataFrame({"grid1km": ["1kmN2689E4337", "1kmN2690E4337"], "grid1km_level": [1, 1],
                          "label": ["=cmd()", "-7"], "n_pert": [-1, 4]})
    path = write_grid_csv(frame, tmp_path / "grid.csv", "grid1km")
    rows = _cells(path.read_bytes().decode("utf-8"))
    assert rows[0] == ["GRD_ID", "label", "n_pert"]
    assert rows[1:] == [["CRS3035RES1000mN2689000E4337000", "'=cmd()", "-1"],
                        ["CRS3035RES1000mN2690000E4337000", "-7", "4"]]


def test_write_frame_and_batch_writers_of_csv_are_neutralised_parquet_is_not(tmp_path):
    frame = pl.DataFrame({"hypercube": ["+HC", "HC02"], "cells": [3, -3]})
    write_frame(frame, tmp_path / "a.csv")
    frame_writer(frame, "csv")(tmp_path / "b.csv")
    for name in ("a.csv", "b.csv"):
        assert _cells((tmp_path / name).read_bytes().decode("utf-8"))[1:] == [["'+HC", "3"], ["HC02", "-3"]]
    frame_writer(frame, "parquet")(tmp_path / "c.parquet")
    assert pl.read_parquet(tmp_path / "c.parquet").equals(frame)


def test_the_services_csv_and_sdmx_csv_answers_are_neutralised():
    frame = pl.DataFrame({"region": ["=1+1", "-5", None], "n_pert": [4, -2, 9]})
    rows = _cells(render(frame, "csv").decode("utf-8"))
    assert rows[1:] == [["'=1+1", "4"], ["-5", "-2"], ["", "9"]]
    sdmx = _cells(render(frame, "sdmx-csv").decode("utf-8"))
    assert [(r[3], r[4]) for r in sdmx[1:]] == [("'=1+1", "4"), ("-5", "-2"), ("_T", "9")]
    assert pl.read_parquet(io.BytesIO(render(frame, "parquet"))).equals(frame)  # as it is
    assert json.loads(render(frame, "json"))["rows"][0] == ["=1+1", 4]


def test_a_programme_writes_neutralised_csv(tmp_path):
    rows = [(i, ["=x", "-1+1", "ok"][i % 3], "FM"[i % 2]) for i in range(120)]
    db = tmp_path / "p.duckdb"
    with pt.Session(str(db)) as s:
        s.register("persons", pl.DataFrame(rows, schema=["pid", "kind", "sex"], orient="row"))
        s.add_record_keys("persons", id_column="pid", seed="prog")
    (tmp_path / "p.toml").write_text(
        'database = "p.duckdb"\nsource = "persons"\nformats = ["csv", "sdmx-csv"]\n'
        '[ptable]\nmaximum_entropy = { D = 3, V = 1.5, js = 1 }\n'
        '[classifications.kind]\nflat = true\n[classifications.sex]\ncodes = ["F", "M"]\n'
        '[[hypercubes]]\nname = "HC01"\ndims = { kind = "kind", sex = "sex" }\n', encoding="utf-8")
    pt.Programme(tmp_path / "p.toml").run(out=tmp_path / "out", quiet=True)
    table = _cells((tmp_path / "out" / "HC01.HC01.csv").read_bytes().decode("utf-8"))
    kinds = {r[table[0].index("kind")] for r in table[1:]}
    assert {"'=x", "'-1+1", "ok"} <= kinds and "=x" not in kinds
    sdmx = _cells((tmp_path / "out" / "HC01.sdmx.csv").read_bytes().decode("utf-8"))
    assert {"'=x", "'-1+1", "ok", "_T"} == {r[sdmx[0].index("KIND")] for r in sdmx[1:]}
    summary = _cells((tmp_path / "out" / "summary.csv").read_bytes().decode("utf-8"))
    assert summary[1][0] == "HC01"


def test_sdmx_csv_of_a_python_frame_is_neutralised():
    text = sdmx_csv(pl.DataFrame({"sex": ["\tF", "M"], "n_pert": [1, 2]}), "T")
    assert [r[3] for r in _cells(text)[1:]] == ["'\tF", "M"]


def test_a_reports_measures_csv_is_neutralised(tmp_path):
    """A version label of the report's request is a text cell of measures.csv."""
    from protab.report import compare

    original = pl.DataFrame({"region": ["Total", "a", "b"], "n": [30, 10, 20]})
    versions = {"=cmd|' /C calc'!A0": pl.DataFrame({"region": ["Total", "a", "b"], "n_pert": [31, 10, 21]})}
    compare(original, versions, dims=["region"], out_dir=tmp_path / "report")
    rows = _cells((tmp_path / "report" / "measures.csv").read_bytes().decode("utf-8"))
    methods = [r[rows[0].index("method")] for r in rows[1:]]
    assert "'=cmd|' /C calc'!A0" in methods and not any(m.startswith(DANGER) for m in methods)
