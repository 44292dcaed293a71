"""Protected tables written as JSON-stat 2.0 datasets (protab.exchange, docs/exchange.md), read
back: the sizes multiply to the number of positions, each published value lands at its
row-major position (last dimension fastest), withheld cells are null with a status, cells a
formula does not publish are empty positions, and ``protab protect``'s batch writes the file."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

import protab as pt
from protab.cli.protect_tables import write_all
from protab.errors import SpecError
from protab.exchange import json_stat, write_json_stat

P = pt.PTable.maximum_entropy(D=3, V=1.5, js=1)


def read_back(ds: dict) -> pl.DataFrame:
    """The cells of a JSON-stat dataset as a frame: one column per dimension, value, status."""
    assert ds["version"] == "2.0" and ds["class"] == "dataset"
    ids, size = ds["id"], ds["size"]
    assert len(ids) == len(size) and list(ds["dimension"]) == ids
    for i, n in zip(ids, size):
        index = ds["dimension"][i]["category"]["index"]
        assert isinstance(index, list) and len(index) == n == len(set(index))
    total = int(np.prod(size))
    value = ds["value"]
    if isinstance(value, list):
        assert len(value) == total
        filled = {p: v for p, v in enumerate(value)}
    else:
        filled = {int(p): v for p, v in value.items()}
        assert all(0 <= p < total for p in filled)
    status = {int(p): s for p, s in ds.get("status", {}).items()}
    rows = []
    for p in sorted(set(filled) | set(status)):
        codes, rest = [], p
        for i, n in zip(reversed(ids), reversed(size)):  # row-major: the last dimension is fastest
            codes.append(ds["dimension"][i]["category"]["index"][rest % n])
            rest //= n
        rows.append((*reversed(codes), filled.get(p), status.get(p)))
    return pl.DataFrame(rows, schema=[*ids, "value", "status"], orient="row")


def total_codes(frame: pl.DataFrame, dims: list[str]) -> pl.DataFrame:
    """``frame`` with each dimension's total (level 0) as SDMX's total code ``_T``."""
    return frame.with_columns(pl.when(pl.col(f"{d}_level") == 0).then(pl.lit("_T")).otherwise(pl.col(d)).alias(d)
                              for d in dims)


@pytest.fixture
def keyed(session, persons):
    session.register("persons", persons)
    session.add_record_keys("persons", id_column="pid", seed="jsonstat")
    return session


def test_values_land_at_their_positions(keyed, h_muni):
    spec = pt.TableSpec({"municipality": h_muni, "sex": None, "age": None})
    frame = keyed.cell_key("persons", spec, P, threshold=4)
    ds = json_stat(frame, "MUNI_SEX_AGE")
    assert ds["id"] == ["MUNICIPALITY", "SEX", "AGE"]
    assert ds["size"] == [frame[c].n_unique() for c in ("municipality", "sex", "age")]
    assert isinstance(ds["value"], list)  # the full cube is published: a dense array
    back = read_back(ds).rename({"MUNICIPALITY": "municipality", "SEX": "sex", "AGE": "age"})
    joined = total_codes(frame, ["municipality", "sex", "age"]).join(back, on=["municipality", "sex", "age"],
                                                                      how="full", coalesce=True)
    assert joined.height == frame.height == int(np.prod(ds["size"]))
    assert joined["value"].to_list() == joined["n_pert"].to_list()
    blank = joined["n_pert"].is_null()
    assert blank.any() and (joined.filter(blank)["status"] == "C").all()
    assert joined.filter(~blank)["status"].is_null().all()


def test_unpublished_crossings_are_empty_positions(keyed, h_muni):
    spec = pt.TableSpec({"municipality": h_muni, "sex": None, "age": None},
                        formula="municipality*sex + municipality*age")
    frame = keyed.cell_key("persons", spec, P)
    ds = json_stat(frame, "T")
    back = read_back(ds)
    assert int(np.prod(ds["size"])) > frame.height  # a sparse cube
    published = back.filter(pl.col("value").is_not_null())
    assert published.height == frame.height
    dims = ["municipality", "sex", "age"]
    want = total_codes(frame, dims).select(*[pl.col(d).alias(d.upper()) for d in dims], pl.col("n_pert").alias("value"))
    assert sorted(published.drop("status").rows()) == sorted(want.rows())


def test_a_sparse_cube_is_an_object_of_positions():
    codes = [f"C{k}" for k in range(40)]
    frame = pl.DataFrame({"a": codes, "b": codes, "n_pert": list(range(40))})  # the diagonal only
    ds = json_stat(frame, "DIAG")
    assert isinstance(ds["value"], dict) and ds["size"] == [40, 40]
    assert {int(p): v for p, v in ds["value"].items()} == {k * 40 + k: k for k in range(40)}


def test_several_measures_are_a_metric_dimension(keyed, h_muni):
    spec = pt.TableSpec({"municipality": h_muni}, weight="weight")
    frame = keyed.cell_key("persons", spec, P, original=True)
    ds = json_stat(frame, "W")
    assert ds["id"] == ["MUNICIPALITY", "MEASURE"] and ds["role"] == {"metric": ["MEASURE"]}
    assert ds["dimension"]["MEASURE"]["category"]["index"] == ["N_PERT", "W_PERT"]  # never the originals
    back = read_back(ds)
    w = back.filter(pl.col("MEASURE") == "W_PERT")["value"].to_list()
    assert w == pytest.approx(frame["w_pert"].to_list())


def test_invalid_dataset_id_is_refused_and_nothing_written(tmp_path):
    frame = pl.DataFrame({"sex": ["F", "M"], "n_pert": [3, 4]})
    with pytest.raises(SpecError, match="table 'bad id'"):
        write_json_stat(frame, tmp_path / "x.stat.json", "bad id")
    assert list(tmp_path.iterdir()) == []


def test_the_protect_batch_writes_exchange_formats(tmp_path, keyed, h_muni):
    frame = keyed.cell_key("persons", pt.TableSpec({"municipality": h_muni, "sex": None}), P)
    out = tmp_path / "out"
    write_all({"muni_sex": frame}, out, ["parquet", "sdmx-csv", "json-stat"])
    assert sorted(p.name for p in out.iterdir()) == ["muni_sex.parquet", "muni_sex.sdmx.csv", "muni_sex.stat.json", "protab_run.json"]
    ds = json.loads((out / "muni_sex.stat.json").read_text(encoding="utf-8"))
    assert ds["label"] == "muni_sex" and ds["id"] == ["MUNICIPALITY", "SEX"]
    assert read_back(ds)["value"].to_list() == pl.read_parquet(out / "muni_sex.parquet")["n_pert"].to_list()
    # a table the format refuses stops the batch before any file is written
    with pytest.raises(SpecError):
        write_all({"muni_sex": frame, "9bad": frame}, tmp_path / "out2", ["csv", "json-stat"])
    assert not (tmp_path / "out2").exists() or not any((tmp_path / "out2").iterdir())


def test_labels_are_the_category_labels_in_the_language_asked_for():
    frame = pl.DataFrame({"region": ["Total", "R1", "R2"], "region_level": [0, 1, 1], "n_pert": [9, 4, 5]})
    labels = {"region": {"en": {"Total": "All", "R1": "North"}, "nb": {"Total": "Alle", "R1": "Nord"}}}
    names = {"region": {"en": "Region", "nb": "Område"}}
    nb = json_stat(frame, "R", labels=labels, names=names, language="nb")["dimension"]["REGION"]
    assert nb["label"] == "Område"
    assert nb["category"]["label"] == {"_T": "Alle", "R1": "Nord", "R2": "R2"}
    first = json_stat(frame, "R", labels=labels)["dimension"]["REGION"]  # no language: the first given
    assert first["category"]["label"] == {"_T": "All", "R1": "North", "R2": "R2"} and first["label"] == "REGION"
