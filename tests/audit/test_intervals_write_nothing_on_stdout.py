"""The audit's LP solver writes nothing on stdout (no solver banner or log), so the output of
`protab audit` and of scripts that pipe it stays theirs: checked in a fresh process, where a
solver would print its banner the first time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import protab

SCRIPT = """
import numpy as np
from scipy import sparse
import protab as pt
X = sparse.csc_array(np.array([[1, 0, 1, 1], [1, 0, 0, 1], [0, 1, 1, 1], [0, 1, 0, 1]], dtype=float))
lo, up = pt.audit.intervals(X, np.array([2., 3., 2., 5.]), np.array([4., 5., 4., 9.]))
assert (lo <= up).all()
"""


def test_intervals_print_nothing_on_stdout():
    src = str(Path(protab.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, check=True)
    assert out.stdout == ""
