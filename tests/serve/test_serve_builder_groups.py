"""The web table builder's custom groups and job list, their pure functions under node
(src/protab/serve/static/groups.js, jobs.js): the request's "groups" (by name while saved groups
are unchanged, else inline with sorted codes, none for a dimension not in the table), the codes
other groups hold, the service's rules on a group's name, and what the job list shows of a job
(its table request, a summary, the file name of each format). The browser test
(tests/serve/test_serve_builder_groups_jobs.py) checks the same on the real page."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

STATIC = Path(__file__).resolve().parents[2] / "src" / "protab" / "serve" / "static"
NODE = shutil.which("node") or shutil.which("nodejs")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs node to run the page's script")

EDIT = {"dim": "age", "groups": [{"name": "young", "codes": ["9", "10"]}, {"name": "old", "codes": ["70"]}],
        "saved": None}
JOB = {"id": "0123456789abcdef", "request": json.dumps({"dataset": "persons", "dims": ["region", "sex"],
                                                        "groups": {"region": {"north": ["R1"]}}})}


def _run(script: str, calls: list[list]) -> list:
    """Call functions of a page script under node: each call is [name, *arguments]; their results."""
    code = (f"const app = require({json.dumps(str(STATIC / script))});\n"
            f"const calls = {json.dumps(calls)};\n"
            "process.stdout.write(JSON.stringify(calls.map(([f, ...a]) => app[f](...a) ?? null)));\n")
    r = subprocess.run([NODE, "-e", code], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_the_requests_groups():
    inline, by_name, not_in_table, none = _run("groups.js", [
        ["groupsBody", EDIT, ["age", "sex"]],
        ["groupsBody", {**EDIT, "saved": "bands"}, ["age"]],
        ["groupsBody", EDIT, ["sex"]],
        ["groupsBody", {"dim": "age", "groups": [], "saved": None}, ["age"]],
    ])
    assert inline == {"age": {"young": ["10", "9"], "old": ["70"]}}  # codes as text, sorted as text
    assert by_name == {"age": "bands"}
    assert not_in_table is None and none is None


def test_codes_of_other_groups_and_group_names():
    taken, problems = _run("groups.js", [["takenBy", EDIT["groups"], 0]]), _run("groups.js", [
        ["groupNameProblem", "", EDIT["groups"], ["9"]],
        ["groupNameProblem", "Total", EDIT["groups"], ["9"]],
        ["groupNameProblem", "9", EDIT["groups"], ["9"]],
        ["groupNameProblem", "young", EDIT["groups"], ["9"]],
        ["groupNameProblem", "n" * 61, EDIT["groups"], ["9"]],
        ["groupNameProblem", "middle", EDIT["groups"], ["9"]],
    ])
    assert taken == [{"70": "old"}]  # the codes of the other groups, not of group 0
    empty, total, code, twice, long, ok = problems
    assert "name" in empty and "Total" in total and "code" in code and "already" in twice and "60" in long
    assert ok == ""


def test_editor_state_from_saved_groups():
    (edit,) = _run("groups.js", [["editFrom", "age", {"young": [9, "10"]}, "bands"]])
    assert edit == {"dim": "age", "groups": [{"name": "young", "codes": ["9", "10"]}], "saved": "bands"}


def test_what_the_job_list_shows():
    request, sql, summary, sql_summary, names = _run("jobs.js", [
        ["jobRequest", JOB],
        ["jobRequest", {"id": "x", "request": "SELECT region, count(*) FROM persons GROUP BY region"}],
        ["jobSummary", JOB],
        ["jobSummary", {"id": "x", "request": "SELECT region FROM persons GROUP BY region"}],
        ["jobFileName", JOB, "sdmx-csv"],
    ])
    assert request == json.loads(JOB["request"]) and sql is None
    assert summary == "persons: region \u00d7 sex (region grouped)"
    assert sql_summary == "SELECT region FROM persons GROUP BY region"
    assert names == "persons_region_sex.sdmx.csv"
    (formats,) = _run("jobs.js", [["jobFileName", {"id": "abcdef0123", "request": "SELECT 1"}, "parquet"]])
    assert formats == "job-abcdef01.parquet"


def test_every_format_of_the_api_is_offered():
    from protab.serve import formats

    script = f"process.stdout.write(JSON.stringify(require({json.dumps(str(STATIC / 'jobs.js'))}).JOB_FORMATS))"
    r = subprocess.run([NODE, "-e", script], capture_output=True, text=True, timeout=30)
    offered = {f: suffix for f, _, suffix in json.loads(r.stdout)}
    assert offered == formats.SUFFIXES
