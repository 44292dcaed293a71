"""The query service answers as SDMX-CSV 2.0 (``format=sdmx-csv`` or its Accept type) and as
JSON-stat 2.0 (``format=json-stat``), with the same cells as its JSON answer: aggregated
dimensions are the SDMX total ``_T``, blanked counts empty with their flags; a column that is no
SDMX identifier is a 400 that names it (docs/exchange.md, docs/serve.md)."""

from __future__ import annotations

import csv
import io
import json

import httpx
import numpy as np
import polars as pl
import pytest
import serve_fixtures as F


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    yield from F.serve(tmp_path_factory)


def _sql(served, sql, *, params=None, headers=None):
    h = {"Authorization": f"Bearer {served['token']}", **(headers or {})}
    return httpx.post(served["url"] + "/v1/query", json={"sql": sql}, headers=h, params=params, timeout=60)


SQL = "SELECT region, sex, count(*) AS n FROM persons GROUP BY CUBE(region, sex)"


def _json_frame(served) -> pl.DataFrame:
    r = _sql(served, SQL)
    assert r.status_code == 200, r.text
    a = r.json()
    return pl.DataFrame(a["rows"], schema=a["columns"], orient="row", infer_schema_length=None)


def test_sdmx_csv_answer_has_the_json_answers_cells(served):
    want = _json_frame(served)
    r = _sql(served, SQL, params={"format": "sdmx-csv"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/vnd.sdmx.data+csv;version=2.0.0")
    rows = list(csv.reader(io.StringIO(r.content.decode("utf-8"), newline="")))
    assert rows[0] == ["STRUCTURE", "STRUCTURE_ID", "ACTION", "REGION", "SEX", "OBS_VALUE", "OBS_STATUS",
                       "CONF_STATUS"]
    body = rows[1:]
    assert {tuple(r[:3]) for r in body} == {("dataflow", "PROTAB:ANSWER(1.0)", "I")}
    got = [(r[3], r[4], r[5]) for r in body]
    expect = [(reg or "_T", sex or "_T", "" if n is None else str(n)) for reg, sex, n in want.iter_rows()]
    assert got == expect
    for row in body:
        assert (row[6], row[7]) == (("Q", "C") if row[5] == "" else ("A", "F"))
    by_accept = _sql(served, SQL, headers={"Accept": "application/vnd.sdmx.data+csv; version=2.0.0"})
    assert by_accept.content == r.content


def test_json_stat_answer_places_every_cell(served):
    want = _json_frame(served)
    r = _sql(served, SQL, params={"format": "json-stat"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    ds = json.loads(r.content)
    assert ds["class"] == "dataset" and ds["version"] == "2.0" and ds["id"] == ["REGION", "SEX"]
    regions = ds["dimension"]["REGION"]["category"]["index"]
    sexes = ds["dimension"]["SEX"]["category"]["index"]
    assert ds["size"] == [len(regions), len(sexes)]
    value = ds["value"]
    dense = np.full(int(np.prod(ds["size"])), None, dtype=object)
    if isinstance(value, list):
        assert len(value) == dense.size
        dense[:] = value
    else:
        for p, v in value.items():
            dense[int(p)] = v
    for reg, sex, n in want.iter_rows():
        assert dense[regions.index(reg or "_T") * len(sexes) + sexes.index(sex or "_T")] == n


def test_a_column_that_is_no_sdmx_id_is_a_400_naming_it(served):
    sql = 'SELECT region, count(*) AS "2n" FROM persons GROUP BY region'
    assert _sql(served, sql).status_code == 200, _sql(served, sql).text
    r = _sql(served, sql, params={"format": "sdmx-csv"})
    assert r.status_code == 400
    assert "'2n'" in r.text and "SDMX" in r.text
