"""The web table builder's crosstab layout (src/protab/serve/static/pivot.js), run under node: the
flat cells of a /v1/table answer placed on rows, columns and wafers, each cell where its codes
say, totals (the answer's own margins) at the edges and never added up in the browser, subtotal
levels after the codes they hold, spanning column headings, and the items of the bar view. The
browser test (tests/serve/test_serve_browser.py) checks the drawn page."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

PIVOT = Path(__file__).resolve().parents[2] / "src" / "protab" / "serve" / "static" / "pivot.js"
NODE = shutil.which("node") or shutil.which("nodejs")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs node to run the page's script")

REQUEST = {"dataset": "persons", "dims": ["region", "sex", "agegroup"]}
REGIONS, SEXES, AGES = ["Total", "R1", "R2"], ["Total", "F", "M"], ["Total", "young", "old"]


def _answer() -> dict:
    """A /v1/table answer in the service's order (margins first); each count is a number whose
    digits name its codes (region, sex, agegroup: 1 + index), so a cell out of place shows; the
    margins are deliberately not the sums of their cells (perturbed values are not additive)."""
    rows = []
    for r, region in enumerate(REGIONS):
        for s, sex in enumerate(SEXES):
            for a, age in enumerate(AGES):
                count = 100 * (r + 1) + 10 * (s + 1) + (a + 1)
                rows.append([region, sex, age, int(r > 0), int(s > 0), int(a > 0), None if count == 222 else count])
    return {"columns": ["region", "sex", "agegroup", "region_level", "sex_level", "agegroup_level", "n_pert"],
            "rows": rows}


def _expected(region, sex, age):
    count = 100 * (REGIONS.index(region) + 1) + 10 * (SEXES.index(sex) + 1) + AGES.index(age) + 1
    return None if count == 222 else count


def _run(calls: list[list]) -> list:
    """Call functions of pivot.js under node: each call is [name, *arguments]; their results."""
    script = (f"const lib = require({json.dumps(str(PIVOT))});\n"
              f"const calls = {json.dumps(calls)};\n"
              "process.stdout.write(JSON.stringify(calls.map(([f, ...a]) => lib[f](...a))));\n")
    r = subprocess.run([NODE, "-e", script], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_cells_go_where_their_codes_say_with_totals_at_the_edges():
    places = {"region": "rows", "sex": "cols", "agegroup": "wafers"}
    (tables,) = _run([["pivot", _answer(), REQUEST, places, "n_pert"]])
    # one table per agegroup, the margin (Total) last
    assert [t["wafer"] for t in tables] == [[["agegroup", "young"]], [["agegroup", "old"]], [["agegroup", "Total"]]]
    for t in tables:
        age = t["wafer"][0][1]
        assert t["rowDims"] == ["region"] and t["colDims"] == ["sex"]
        assert t["rowKeys"] == [["R1"], ["R2"], ["Total"]] and t["colKeys"] == [["F"], ["M"], ["Total"]]
        for (region,), line in zip(t["rowKeys"], t["cells"]):
            assert [c["value"] for c in line] == [_expected(region, sex, age) for (sex,) in t["colKeys"]]
    # the grand total is the answer's margin cell, not a sum of the cells in the browser
    assert tables[-1]["cells"][-1][-1]["value"] == 111


def test_two_dimensions_on_the_columns_nest_and_span():
    places = {"region": "cols", "sex": "cols", "agegroup": "rows"}
    (tables,) = _run([["pivot", _answer(), REQUEST, places, "n_pert"]])
    (t,) = tables
    assert t["colKeys"][:3] == [["R1", "F"], ["R1", "M"], ["R1", "Total"]] and t["colKeys"][-1] == ["Total", "Total"]
    assert t["cells"][0][1]["value"] == _expected("R1", "M", "young")
    (runs,) = _run([["headerRuns", t["colKeys"], 2]])
    assert [(r["code"], r["span"]) for r in runs[0]] == [("R1", 3), ("R2", 3), ("Total", 3)]
    assert [r["code"] for r in runs[1]] == ["F", "M", "Total"] * 3 and {r["span"] for r in runs[1]} == {1}
    assert [r["total"] for r in runs[0]] == [False, False, True]


def test_blanked_cell_keeps_its_null_and_its_place():
    (tables,) = _run([["pivot", _answer(), REQUEST, {"region": "rows", "sex": "cols", "agegroup": "wafers"}, "n_pert"]])
    young = tables[0]
    r1, f = young["rowKeys"].index(["R1"]), young["colKeys"].index(["F"])
    assert young["cells"][r1][f] == {"value": None, "count": None}  # the answer's null (count 222 above)
    assert young["cells"][r1][f + 1]["value"] == _expected("R1", "M", "young")


def test_hierarchy_levels_finest_first_then_subtotals_then_total():
    answer = {"columns": ["municipality", "municipality_level", "n_pert"],
              "rows": [["Total", 0, 50], ["R1", 1, 30], ["R2", 1, 20], ["R1-0", 2, 10], ["R1-1", 2, 20], ["R2-0", 2, 20]]}
    assert _run([["dimCodes", answer, "municipality"]]) == [["R1-0", "R1-1", "R2-0", "R1", "R2", "Total"]]
    (tables,) = _run([["pivot", answer, {"dims": ["municipality"]}, {"municipality": "rows"}, "n_pert"]])
    assert tables[0]["subtotals"] == [False, False, False, True, True, False]  # regions; Total is the margin
    (bars,) = _run([["barItems", answer, "municipality", "n_pert"]])
    assert [(i["code"], i["level"], i["value"]) for i in bars["items"]] == [
        ("R1-0", 2, 10), ("R1-1", 2, 20), ("R2-0", 2, 20), ("R1", 1, 30), ("R2", 1, 20)]
    assert bars["total"] == {"value": 50, "count": 50}


def test_combinations_missing_from_the_answer_are_left_out():
    # a filter of several codes: agegroup has no margin, and R2 x young is not in this answer
    answer = {"columns": ["region", "agegroup", "n_pert", "income_mean_pert"],
              "rows": [["Total", "young", 9, 1.5], ["Total", "old", 8, None], ["R1", "young", 5, 2.5],
                       ["R1", "old", 4, None], ["R2", "old", None, None]]}
    request = {"dataset": "persons", "dims": ["region", "agegroup"], "measure": "income"}
    (tables,) = _run([["pivot", answer, request, {"region": "rows", "agegroup": "cols"}, "income_mean_pert"]])
    (t,) = tables
    assert t["rowKeys"] == [["R1"], ["R2"], ["Total"]] and t["colKeys"] == [["young"], ["old"]]
    assert t["cells"][1][0] is None  # no such cell: not a blank, not a zero
    assert t["cells"][0] == [{"value": 2.5, "count": 5}, {"value": None, "count": 4}]


def test_places_by_default_and_the_layout_of_a_request():
    assert _run([["defaultPlaces", ["a", "b", "c", "d"]]]) == [{"a": "rows", "b": "cols", "c": "wafers", "d": "wafers"}]
    (layout,) = _run([["layoutOf", REQUEST, {"region": "wafers", "sex": "rows", "agegroup": "bogus"}]])
    assert layout == {"rows": ["sex", "agegroup"], "cols": [], "wafers": ["region"]}
    (tables,) = _run([["pivot", _answer(), REQUEST, {"region": "rows", "sex": "rows", "agegroup": "rows"}, "n_pert"]])
    assert len(tables) == 1 and tables[0]["colKeys"] == [[]] and len(tables[0]["rowKeys"]) == 27
