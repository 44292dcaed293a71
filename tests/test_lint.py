"""The lint gate: ruff (configured in pyproject.toml) finds nothing in the project's code."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    if shutil.which("ruff") is None and subprocess.run(
        [sys.executable, "-m", "ruff", "--version"], capture_output=True, check=False
    ).returncode != 0:
        pytest.fail("ruff is not installed: install the dev extra (pip install -e '.[dev]')")
    cmd = [sys.executable, "-m", "ruff", "check", "src", "tests", "benchmarks", "examples"]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
