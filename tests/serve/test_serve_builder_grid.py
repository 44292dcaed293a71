"""The web table builder's grid map (src/protab/serve/static/grid.js), run under node: INSPIRE codes
of EPSG:3035 read as src/protab/grid reads them (short and long form, strict), a grid dimension
found in an answer, the squares drawn (the finest resolution, the margins of the other
dimensions), north up, and the colour classes (blanked squares apart). The browser test
(tests/serve/test_serve_browser.py) checks the drawn map."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from protab.errors import InputError
from protab.grid import parse_codes

GRID = Path(__file__).resolve().parents[2] / "src" / "protab" / "serve" / "static" / "grid.js"
NODE = shutil.which("node") or shutil.which("nodejs")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs node to run the page's script")


def _run(calls: list[list]) -> list:
    """Call functions of grid.js under node: each call is [name, *arguments]; their results."""
    script = (f"const lib = require({json.dumps(str(GRID))});\n"
              f"const calls = {json.dumps(calls)};\n"
              "process.stdout.write(JSON.stringify(calls.map(([f, ...a]) => lib[f](...a))));\n")
    r = subprocess.run([NODE, "-e", script], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


GOOD = ["1kmN2689E4337", "CRS3035RES1000mN2689000E4337000", "100mN26890E43370", "10kmN268E433", "100kmN26E43", "1kmN0E0"]
BAD = ["1kmN02689E4337", "1kmN2689E4337 ", "2kmN1E1", "CRS3035RES1000mN2689500E4337000", "1kmn2689e4337",
       "Total", "", "1kmN-1E4"]


def test_codes_are_read_as_the_python_grid_module_reads_them():
    parsed = _run([["parseGridCode", c] for c in GOOD])
    frame = parse_codes(GOOD)
    assert [p["res"] for p in parsed] == frame["resolution"].to_list()
    assert [p["n"] for p in parsed] == frame["northing"].to_list()
    assert [p["e"] for p in parsed] == frame["easting"].to_list()
    assert _run([["parseGridCode", c] for c in BAD]) == [None] * len(BAD)
    for code in BAD:
        with pytest.raises(InputError):
            parse_codes([code])


def _answer():
    """A grid by sex answer: squares of 1 km (one blanked) and their 10 km square, with margins."""
    rows = []
    cells = {"Total": 40, "10kmN268E433": 40, "1kmN2689E4337": 12, "1kmN2689E4338": None, "1kmN2688E4337": 25}
    for code, n in cells.items():
        for sex, share in (("Total", 1.0), ("F", 0.5)):
            rows.append([code, sex, None if n is None else int(n * share)])
    return {"columns": ["cell", "sex", "n_pert"], "rows": rows}


def test_squares_are_the_finest_cells_at_the_other_dimensions_margin():
    request = {"dataset": "grid", "dims": ["sex", "cell"]}
    (dim,) = _run([["gridDim", _answer(), request]])
    assert dim == "cell"
    (squares,) = _run([["gridSquares", _answer(), request, "cell", "n_pert"]])
    assert [(s["code"], s["value"]) for s in squares] == [
        ("1kmN2689E4337", 12), ("1kmN2689E4338", None), ("1kmN2688E4337", 25)]
    (layout,) = _run([["mapLayout", squares]])
    # north up: the northern row (N2689) on top, east to the right
    assert layout == {"columns": 2, "rows": 2, "places": [{"x": 0, "y": 0}, {"x": 1, "y": 0}, {"x": 0, "y": 1}]}
    assert _run([["gridDim", {"columns": ["sex", "n_pert"], "rows": [["F", 1]]}, {"dims": ["sex"]}]]) == [None]


def test_no_squares_when_another_dimension_has_no_margin():
    answer = {"columns": ["cell", "sex", "n_pert"], "rows": [["1kmN1E1", "F", 5], ["1kmN1E1", "M", 6]]}
    assert _run([["gridSquares", answer, {"dims": ["cell", "sex"]}, "cell", "n_pert"]]) == [None]


def test_colour_classes_hold_equal_shares_and_blanks_stand_apart():
    values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    (breaks,) = _run([["classBreaks", values, 5]])
    assert breaks == [2, 4, 6, 8, 10]
    classes = _run([["classOf", v, breaks] for v in [1, 2, 3, 10, None]])
    assert classes == [0, 0, 1, 4, -1]
    # repeated values make fewer classes; the colours still run light to dark
    (few,) = _run([["classBreaks", [5, 5, 5, 5, 9], 5]])
    assert few == [5, 9]
    light, dark, grey = _run([["classColour", 0, 2], ["classColour", 1, 2], ["classColour", -1, 2]])
    assert light != dark and grey not in (light, dark)
