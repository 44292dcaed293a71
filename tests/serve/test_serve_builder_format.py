"""The web table builder's display rules (src/protab/serve/static/format.js), run under node: counts
as whole numbers, sums and means with thousands separators and fewer decimals the larger they
are, blanked cells marked, a dimension shown at a chosen level named by that level, the active
filters in the caption, and a refusal's message, rule and advice. The browser test
(tests/serve/test_serve_browser.py) checks the same on the real page."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[2] / "src" / "protab" / "serve" / "static" / "format.js"
NODE = shutil.which("node") or shutil.which("nodejs")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs node to run the page's script")

REQUEST = {"dataset": "persons", "dims": ["municipality", "sex"], "levels": {"municipality": "region"},
           "filters": {"agegroup": ["15-19", "20-24"], "region": "R1"}, "measure": "income"}


def _run(calls: list[list]) -> list:
    """Call functions of format.js under node: each call is [name, *arguments]; their results."""
    script = (f"const app = require({json.dumps(str(APP))});\n"
              f"const calls = {json.dumps(calls)};\n"
              "process.stdout.write(JSON.stringify(calls.map(([f, ...a]) => app[f](...a))));\n")
    r = subprocess.run([NODE, "-e", script], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("value, kind, locale, shown", [
    (12345, "count", "en-US", "12,345"),
    (7, "count", "en-US", "7"),
    (0, "count", "en-US", "0"),
    (None, "count", "en-US", "x"),
    (1234567.891, "sum", "en-US", "1,234,568"),
    (-4321.5, "sum", "en-US", "-4,322"),
    (512.345, "mean", "en-US", "512.3"),
    (3.14159, "mean", "en-US", "3.14"),
    (25123.4, "mean", "en-US", "25,123"),
    (1234567.891, "sum", "de-DE", "1.234.568"),
    (512.345, "mean", "de-DE", "512,3"),
    (2, "level", "en-US", "2"),
    ("R1001", "code", "en-US", "R1001"),
    (1999, "code", "en-US", "1999"),  # a code that is a number is shown as it is, without separators
])
def test_values_are_formatted_by_kind(value, kind, locale, shown):
    assert _run([["formatValue", value, kind, locale]]) == [shown]


def test_columns_are_named_by_the_chosen_level():
    columns = ["municipality", "sex", "municipality_level", "sex_level", "n_pert", "income_pert", "income_mean_pert"]
    kinds = _run([["columnKind", c, REQUEST] for c in columns])
    headers = _run([["columnHeader", c, REQUEST] for c in columns])
    assert kinds == ["code", "code", "level", "level", "count", "sum", "mean"]
    assert headers == ["region", "sex", "level of region", "level of sex", "count", "sum income", "mean income"]
    plain = {"dataset": "persons", "dims": ["municipality"]}
    assert _run([["columnHeader", "municipality", plain]]) == ["municipality"]


def test_caption_shows_the_active_filters():
    (text,) = _run([["caption", REQUEST, 30]])
    assert text.startswith("persons by municipality (region level) \u00d7 sex, income")
    assert "filters: agegroup = 15-19, 20-24; region = R1" in text and text.endswith("(30 cells)")
    (text,) = _run([["caption", {"dataset": "persons", "dims": ["sex"]}, 3]])
    assert "no filter" in text and "filters:" not in text


def test_marks_tell_a_blanked_cell_from_an_undefined_mean():
    # a null count is blanked (its sum and mean too); a null mean beside a published count has no records
    assert _run([["cellText", None, None, "count", "en-US"], ["cellText", None, None, "mean", "en-US"],
                 ["cellText", None, 0, "mean", "en-US"], ["cellText", 1234.5, 7, "sum", "en-US"],
                 ["cellText", 0, 0, "count", "en-US"]]) == ["x", "x", "..", "1,235", "0"]


def test_refusal_shows_the_message_and_any_rule_and_advice():
    (plain,) = _run([["refusalParts", 400, "Bad Request", {"error": "the filter is refused"}]])
    assert plain == {"title": "The service refused this request (400)", "message": "the filter is refused (400)",
                     "rule": "", "advice": ""}
    (full,) = _run([["refusalParts", 403, "Forbidden",
                     {"error": "you may not use 'age'", "rule": "rights", "advice": "ask the office"}]])
    assert full["title"] == "Outside your rights (403)"
    assert (full["rule"], full["advice"]) == ("rights", "ask the office")
    # an answer that is not JSON (a proxy's page): the status line
    (bare,) = _run([["refusalParts", 502, "Bad Gateway", None]])
    assert bare["message"] == "502 Bad Gateway" and bare["title"] == "The request failed (502)"
