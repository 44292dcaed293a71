"""`protab protect` and a programme publish the same table with the same SDMX total code ``_T``:
the SDMX-CSV rows of one table (region by sex, one p-table, the same record keys) are the same
in both, totals included; only the dataflow's name differs."""

from __future__ import annotations

import csv
import io

import protab as pt
from protab import cli

PTABLE = "[ptable]\nmaximum_entropy = { D = 5, V = 3, js = 2 }\n"


def _rows(path) -> list[tuple[str, ...]]:
    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"), newline="")))
    return sorted((r["REGION"], r["SEX"], r["OBS_VALUE"], r["OBS_STATUS"], r["CONF_STATUS"]) for r in rows)


def test_protect_and_programme_give__t_for_the_same_table(workdir):
    request = workdir / "request.toml"
    request.write_text('database = "demo.duckdb"\nformats = ["sdmx-csv"]\n' + PTABLE +
                       '[[tables]]\nname = "region_sex"\nsource = "persons"\ndims = ["region", "sex"]\n',
                       encoding="utf-8")
    assert cli.main(["protect", str(request), "--out", str(workdir / "protect_out")]) == 0
    programme = workdir / "sdmx_programme.toml"
    programme.write_text('database = "demo.duckdb"\nsource = "persons"\nformats = ["sdmx-csv"]\n' + PTABLE +
                         '[classifications.region]\nflat = true\n[classifications.sex]\ncodes = ["F", "M"]\n'
                         '[[hypercubes]]\nname = "REGION_SEX"\ndims = { region = "region", sex = "sex" }\n',
                         encoding="utf-8")
    pt.Programme(programme).run(out=workdir / "programme_out", quiet=True)
    by_protect = _rows(workdir / "protect_out" / "region_sex.sdmx.csv")
    by_programme = _rows(workdir / "programme_out" / "REGION_SEX.sdmx.csv")
    assert by_protect == by_programme
    totals = [r for r in by_protect if "_T" in r[:2]]
    regions = {r[0] for r in by_protect} - {"_T"}
    assert len(totals) == 1 + len(regions) + 2  # the grand total, each region's and each sex's total
    assert not any("Total" in r[:2] for r in by_protect)
