"""A programme with ``formats = [..., "sdmx-structure"]`` writes beside each hypercube's
SDMX-CSV dataflow its SDMX-ML structure message: read back by sdmx1, the data structure's
dimensions are the CSV's dimension columns and every code the CSV holds is in its code list; a
code that is no SDMX code id (the example's ``85+``) is written as it is and named in a warning."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import without_grid

import protab as pt

sdmx = pytest.importorskip("sdmx")  # the extra protab[sdmx], part of dev


def test_each_hypercube_has_a_structure_message_of_its_dataflow(workdir):
    without_grid(workdir / "programme.toml")
    text = (workdir / "programme.toml").read_text(encoding="utf-8")
    (workdir / "programme.toml").write_text(
        text.replace('formats = ["csv"]', 'formats = ["sdmx-csv", "sdmx-structure"]', 1), encoding="utf-8")
    out = workdir / "out"
    prog = pt.Programme(workdir / "programme.toml")
    with pytest.warns(UserWarning, match=r"dimension 'age' has codes that are no SDMX code ids.*'85\+'"):
        prog.run(out=out, quiet=True)  # the example's open age group: written, and named
    for cube in prog.cubes:
        data = pl.read_csv(out / f"{cube.name}.sdmx.csv", infer_schema=False)
        dims = data.columns[data.columns.index("ACTION") + 1:data.columns.index("OBS_VALUE")]
        msg = sdmx.read_sdmx(out / f"{cube.name}.structure.xml")
        dsd = msg.structure[msg.dataflow[cube.name].structure.id]
        assert [d.id for d in dsd.dimensions] == dims
        for comp in [*dsd.dimensions, *dsd.attributes]:
            codes = {c.id for c in msg.codelist[comp.local_representation.enumerated.id]}
            assert set(data[comp.id]) <= codes, comp.id
