"""``pt.Programme`` is a public name of protab (imported on first use), and a programme is read
and checked when it is made, before any database is opened."""

from __future__ import annotations

import subprocess
import sys

import pytest

import protab as pt


def test_programme_is_there_in_a_fresh_interpreter():
    code = "import protab as pt; print(pt.Programme.__name__, 'Programme' in pt.__all__)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["Programme", "True"]


def test_a_programme_is_checked_when_made(tmp_path):
    path = tmp_path / "programme.toml"
    path.write_text('source = "persons"\n[ptable]\nmaximum_entropy = { D = 5, V = 3 }\n'
                    '[classifications.sex]\ncodes = ["F", "M"]\n'
                    '[[hypercubes]]\nname = "HC01"\ndims = { sex = "sex" }\n'
                    '[[hypercubes]]\nname = "HC01"\ndims = { sex = "sex" }\n')
    with pytest.raises(pt.SpecError, match="two hypercubes are named 'HC01'"):
        pt.Programme(path)
    path.write_text(path.read_text().replace('name = "HC01"', 'name = "HC02"', 1))
    prog = pt.Programme(path)
    assert prog.names == ["HC02", "HC01"] and "HC02" in repr(prog)
