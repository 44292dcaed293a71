"""A programme writes each hypercube as one SDMX-CSV 2.0 dataflow and one JSON-stat 2.0 dataset:
every cell of every table of the hypercube once, a dimension a table leaves out (or its total)
as ``_T``, the hypercube's name as the dataflow id (checked as an SDMX id when the programme is read:
nothing is written for an invalid one)."""

from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import without_grid

import protab as pt
from protab.errors import SpecError

SDMX_HEAD = ["STRUCTURE", "STRUCTURE_ID", "ACTION"]
SDMX_TAIL = ["OBS_VALUE", "OBS_STATUS", "CONF_STATUS"]


def _formats(path, formats: str) -> None:
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('formats = ["csv"]', f"formats = {formats}", 1), encoding="utf-8")


@pytest.fixture
def run(workdir):
    without_grid(workdir / "programme.toml")
    _formats(workdir / "programme.toml", '["csv", "sdmx-csv", "json-stat"]')
    out = workdir / "out"
    prog = pt.Programme(workdir / "programme.toml")
    prog.run(out=out, quiet=True)
    return prog, out


def _table_cells(out, cube, dims: list[str]) -> pl.DataFrame:
    """The cells of the hypercube's CSV tables, over all its dimensions, totals as _T."""
    parts = []
    for f in sorted(out.glob(f"{cube.name}.*.csv")):
        if f.name.endswith(".sdmx.csv"):
            continue
        t = pl.read_csv(f, infer_schema=False)
        parts.append(t.select(
            *[(pl.when(pl.col(f"{d}_level") == "0").then(pl.lit("_T")).otherwise(pl.col(d)) if d in t.columns
               else pl.lit("_T")).alias(d.upper()) for d in dims],
            pl.col("n_pert").fill_null("").alias("OBS_VALUE"),
        ))
    return pl.concat(parts).unique(maintain_order=True)


def test_each_hypercube_is_one_sdmx_dataflow_of_all_its_cells(run):
    prog, out = run
    for cube in prog.cubes:
        dims = [d.variable for d in cube.dims]
        sdmx = pl.read_csv(out / f"{cube.name}.sdmx.csv", infer_schema=False)
        assert sdmx.columns == SDMX_HEAD + [d.upper() for d in dims] + SDMX_TAIL
        assert set(sdmx["STRUCTURE"]) == {"dataflow"} and set(sdmx["STRUCTURE_ID"]) == {f"PROTAB:{cube.name}(1.0)"}
        keys = [d.upper() for d in dims]
        assert not sdmx.select(keys).is_duplicated().any()  # one row per cell
        want = _table_cells(out, cube, dims)
        got = sdmx.select(*keys, pl.col("OBS_VALUE").fill_null(""))
        assert want.height == got.height and want.sort(keys).equals(got.sort(keys))
        blank = sdmx.filter(pl.col("OBS_VALUE").is_null())
        assert blank.height and set(blank["OBS_STATUS"]) == {"Q"}  # the blanked counts


def test_each_hypercube_is_one_json_stat_dataset(run):
    prog, out = run
    for cube in prog.cubes:
        ds = json.loads((out / f"{cube.name}.stat.json").read_text(encoding="utf-8"))
        dims = [d.variable.upper() for d in cube.dims]
        assert ds["version"] == "2.0" and ds["class"] == "dataset" and ds["id"] == dims
        assert ds["size"] == [len(ds["dimension"][d]["category"]["index"]) for d in dims]
        sdmx = pl.read_csv(out / f"{cube.name}.sdmx.csv", infer_schema=False)
        values = ds["value"].values() if isinstance(ds["value"], dict) else ds["value"]
        published = sorted(float(v) for v in sdmx["OBS_VALUE"].drop_nulls())
        assert sorted(v for v in values if v is not None) == published


def test_an_invalid_dataflow_id_is_refused_before_any_work(workdir):
    without_grid(workdir / "programme.toml")
    _formats(workdir / "programme.toml", '["sdmx-csv"]')
    path = workdir / "programme.toml"
    path.write_text(path.read_text(encoding="utf-8").replace('name = "HC02"', 'name = "HC 02"', 1), encoding="utf-8")
    out = workdir / "out"
    with pytest.raises(SpecError, match=r"hypercubes\[1\].name = 'HC 02' is not a valid id.*SDMX"):
        pt.Programme(path).run(out=out, quiet=True)
    assert not out.exists()
    with pt.Session(str(workdir / "demo.duckdb"), read_only=True) as s:
        assert "persons_swapped" not in s.tables()
