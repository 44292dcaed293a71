"""``include = ["shared.toml"]`` on each of the four fronts (protect request, programme,
serve.toml, report request) gives the same result as the same sections written inline; the
paths inside an included file are relative to that file."""

from __future__ import annotations

import os

from conftest import write

import protab as pt
from protab import cli
from protab.report import run_request
from protab.serve.config import load_config

PTABLE = "[ptable]\nmaximum_entropy = { D = 5, V = 3, js = 2 }\n"
HIERARCHY = '[hierarchies.municipality]\ncolumns = ["region", "municipality"]\n'
TABLE = '[[tables]]\nname = "muni_sex"\nsource = "persons"\ndims = ["municipality", "sex"]\n'


def _protect(request, out) -> bytes:
    assert cli.main(["protect", str(request), "--out", str(out)]) == 0
    return (out / "muni_sex.csv").read_bytes()


def test_protect_request_with_shared_sections_included_gives_the_same_table(workdir):
    inline = write(workdir, "inline.toml", 'database = "demo.duckdb"\nformats = ["csv"]\n' + PTABLE + HIERARCHY + TABLE)
    write(workdir, "office/shared.toml", 'database = "../demo.duckdb"\n' + PTABLE + HIERARCHY)
    included = write(workdir, "included.toml", 'include = ["office/shared.toml"]\nformats = ["csv"]\n' + TABLE)
    assert _protect(included, workdir / "b") == _protect(inline, workdir / "a")


def test_programme_with_classifications_included_gives_the_same_tables(workdir):
    shared = PTABLE + '[classifications.region]\nflat = true\n[classifications.sex]\ncodes = ["F", "M"]\n'
    cube = '[[hypercubes]]\nname = "REGION_SEX"\ndims = { region = "region", sex = "sex" }\n'
    inline = write(workdir, "inline.toml", 'database = "demo.duckdb"\nsource = "persons"\nformats = ["csv"]\n'
                   + shared + cube)
    write(workdir, "shared/classes.toml", 'database = "../demo.duckdb"\n' + shared)
    included = write(workdir, "included.toml", 'include = ["shared/classes.toml"]\nsource = "persons"\n'
                     'formats = ["csv"]\n' + cube)
    pt.Programme(inline).run(out=workdir / "a", quiet=True)
    pt.Programme(included).run(out=workdir / "b", quiet=True)
    name = "REGION_SEX.REGION_SEX.csv"
    assert (workdir / "b" / name).read_bytes() == (workdir / "a" / name).read_bytes()


def test_serve_config_with_ptable_included_is_the_same_config(workdir):
    dataset = '[datasets.persons]\ndims = ["sex"]\ncodes = { sex = ["F", "M"] }\n'
    inline = write(workdir, "serve.toml", 'database = "demo.duckdb"\nthreshold = 3\naudit_log = "audit.jsonl"\n'
                   + PTABLE + dataset)
    write(workdir, "office/protection.toml", 'database = "../demo.duckdb"\nthreshold = 3\n' + PTABLE)
    included = write(workdir, "serve_included.toml", 'include = ["office/protection.toml"]\naudit_log = "audit.jsonl"\n'
                     + dataset)
    a, b = load_config(inline), load_config(included)
    assert (dict(b.ptable), b.threshold, list(b.datasets)) == (dict(a.ptable), a.threshold, list(a.datasets))
    assert os.path.samefile(a.database, b.database)


def test_report_request_with_database_and_hierarchies_included_gives_the_same_report(workdir):
    protect = write(workdir, "protect.toml", 'database = "demo.duckdb"\nformats = ["csv"]\n' + PTABLE + HIERARCHY + TABLE)
    _protect(protect, workdir / "protected")
    dims = 'dims = ["municipality", "sex"]\n'
    body = '[original]\ntable = "persons"\n[[protected]]\nlabel = "ckm"\nfile = "protected/muni_sex.csv"\n'
    inline = write(workdir, "report_inline.toml", dims + 'database = "demo.duckdb"\n' + HIERARCHY + body)
    write(workdir, "office/report_shared.toml", 'database = "../demo.duckdb"\n' + HIERARCHY)
    included = write(workdir, "report_included.toml", 'include = ["office/report_shared.toml"]\n' + dims + body)
    a = run_request(inline, workdir / "report_a")
    b = run_request(included, workdir / "report_b")
    assert a.height > 0
    assert b.equals(a)
