"""A programme with a mistake is refused with a protab error naming the hypercube and the key,
before anything is computed or written (no output folder, no staging folder)."""

from __future__ import annotations

import pytest

import protab as pt
from protab import cli
from protab.programme.state import staging_folder

HC01_DIMS = 'dims = { municipality = "geo:nuts2", age = "age:5y", sex = "sex" }'

CASES = {
    "unknown classification": (HC01_DIMS, HC01_DIMS.replace('"sex" }', '"gender" }'),
                               pt.SpecError, ["'HC01'", "dims.sex", "'gender'", "not declared"]),
    "unknown level": (HC01_DIMS, HC01_DIMS.replace("geo:nuts2", "geo:nuts3"),
                      pt.SpecError, ["'HC01'", "dims.municipality", "'nuts3'", "nuts2, lau"]),
    "level number too deep": (HC01_DIMS, HC01_DIMS.replace("age:5y", "age:3"),
                              pt.SpecError, ["'HC01'", "dims.age", "'3'"]),
    "unknown dimension of a table": ('name = "region_age"\ndims = ["municipality", "age"]',
                                     'name = "region_age"\ndims = ["municipality", "agegroup"]',
                                     pt.SpecError, ["'HC01'", "'region_age'", "'agegroup'"]),
    "unknown column": ('dims = { grid1km = "grid:1km", sex = "sex" }',
                       'dims = { grid1km = "grid:1km", sex = "sex", tenure = "tenure", hhtype = "sex" }',
                       pt.InputError, ["'HC04'", "dims.hhtype", "'hhtype'"]),
    "one variable, two classifications": ('dims = { grid1km = "grid:1km", sex = "sex" }',
                                          'dims = { grid1km = "grid:1km", sex = "tenure" }',
                                          pt.SpecError, ["'HC04'", "'sex'", "'tenure'", "'HC01'"]),
    "over the cell limit": ("max_cells = 50000", "max_cells = 500",
                            pt.SpecError, ["'HC02'", "max_cells = 500"]),
    "invalid id": ('name = "HC03"', 'name = "3rd-cube"', pt.SpecError, ["'3rd-cube'", "not a valid id"]),
    "invalid table id": ('name = "citizenship_sex"', 'name = "citizenship sex"',
                         pt.SpecError, ["'HC03'", "'citizenship sex'"]),
    "a column as the level's variable": (HC01_DIMS, HC01_DIMS.replace("municipality =", "region ="),
                                         pt.SpecError, ["'HC01'", "dims.region", "'municipality'"]),
    "unknown key": ("max_cells = 50000", "max_cell = 50000", pt.SpecError, ["'max_cell'", "max_cells"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_programme_is_refused_naming_the_hypercube_and_key(workdir, case):
    old, new, error, words = CASES[case]
    path = workdir / "programme.toml"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    out = workdir / "out"
    with pytest.raises(error) as info:
        pt.Programme(path).run(out=out, quiet=True)
    for w in words:
        assert w in str(info.value), (w, str(info.value))
    assert not out.exists() and not staging_folder(out).exists()
    with pt.Session(str(workdir / "demo.duckdb"), read_only=True) as s:
        assert not s.exists("persons_swapped")  # the swap was not run, or not kept


def test_the_command_says_protab_error_and_exits_2(workdir, capsys):
    path = workdir / "programme.toml"
    path.write_text(path.read_text().replace('"geo:nuts2", age', '"geo:nuts9", age'))
    assert cli.main(["programme", str(path), "--out", str(workdir / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("protab: error: programme: hypercube 'HC01'") and "Traceback" not in err
    assert not (workdir / "out").exists()
