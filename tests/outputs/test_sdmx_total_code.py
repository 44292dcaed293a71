"""The SDMX total code is ``_T`` in every SDMX output: a dimension's total — its level-0 code,
whatever the hierarchy's root is called, or a null code of a query answer — is ``_T`` in
SDMX-CSV and in JSON-stat (which labels it with the root's own name); a code ``_T`` that is not
a total is refused, since readers would take it for the total."""

from __future__ import annotations

import csv
import io

import polars as pl
import pytest

import protab as pt
from protab.errors import InputError
from protab.exchange import json_stat, sdmx_csv
from protab.serve.formats import render

P = pt.PTable.maximum_entropy(D=3, V=1.5, js=1)


@pytest.fixture
def keyed(session, persons):
    session.register("persons", persons)
    session.add_record_keys("persons", id_column="pid", seed="total-code")
    return session


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text, newline="")))


def test_a_root_of_any_name_is_the_sdmx_total(keyed):
    sex = pt.Hierarchy.flat(["F", "M"], root="All persons")
    frame = keyed.cell_key("persons", pt.TableSpec({"sex": sex, "age": None}), P)
    assert {"All persons", "Total"} <= set(frame["sex"]) | set(frame["age"])
    rows = _rows(sdmx_csv(frame, "T"))
    level0 = frame.select((pl.col("sex_level") == 0).alias("s"), (pl.col("age_level") == 0).alias("a")).rows()
    assert [(r["SEX"] == "_T", r["AGE"] == "_T") for r in rows] == level0
    assert not {"All persons", "Total"} & ({r["SEX"] for r in rows} | {r["AGE"] for r in rows})


def test_json_stat_uses__T_and_labels_it_with_the_roots_name(keyed):
    sex = pt.Hierarchy.flat(["F", "M"], root="All persons")
    frame = keyed.cell_key("persons", pt.TableSpec({"sex": sex, "age": None}), P)
    ds = json_stat(frame, "T")
    assert ds["dimension"]["SEX"]["category"]["index"][0] == "_T"
    assert ds["dimension"]["SEX"]["category"]["label"]["_T"] == "All persons"
    assert ds["dimension"]["AGE"]["category"]["label"]["_T"] == "Total"
    answer = json_stat(pl.DataFrame({"region": ["R1", None], "n": [4, 9]}), "ANSWER")  # a null code
    assert answer["dimension"]["REGION"]["category"]["label"] == {"R1": "R1", "_T": "Total"}


def test_a_code__T_that_is_not_the_total_is_refused():
    frame = pl.DataFrame({"sex": ["Total", "_T", "M"], "sex_level": [0, 1, 1], "n_pert": [5, 2, 3]})
    for write in (sdmx_csv, json_stat):
        with pytest.raises(InputError, match="table 'T'.*'sex'.*'_T'.*reserves"):
            write(frame, "T")


def test_the_services_table_answers_give__T_for_their_margins():
    frame = pl.DataFrame({"region": ["Total", "R1", "R2"], "region_level": [0, 1, 1], "n_pert": [9, 4, 5]})
    rows = _rows(render(frame, "sdmx-csv").decode("utf-8"))
    assert [(r["REGION"], r["OBS_VALUE"]) for r in rows] == [("_T", "9"), ("R1", "4"), ("R2", "5")]
