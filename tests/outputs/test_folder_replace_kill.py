"""The folder swap of outputs (a Spark path= output, a batch of tables) killed at any step leaves
the old folder or the whole new one, and the next replacement clears what the killed one left."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from protab._io import recover, replace_folder

CHILD = r"""
import os, sys
from pathlib import Path
from protab import _io

folder, step = Path(sys.argv[1]), int(sys.argv[2])
calls = {"n": 0}
real_rename, real_exchange = os.rename, _io._exchange


def count():
    calls["n"] += 1
    if calls["n"] == step:
        os._exit(9)  # killed: no clean-up of any kind


def rename(a, b):
    count()
    real_rename(a, b)


def exchange(a, b):
    count()
    return real_exchange(a, b) if sys.argv[3] == "exchange" else False


def fill(partial):
    partial.mkdir()
    for k in range(3):
        count()
        (partial / f"part-{k}.parquet").write_text(f"new {k}")


os.rename, _io._exchange = rename, exchange
_io.replace_folder(folder, fill)
"""


def _make_old(folder: Path) -> dict[str, str]:
    folder.mkdir()
    for k in range(2):
        (folder / f"part-{k}.parquet").write_text(f"old {k}")
    return _contents(folder)


def _contents(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


NEW = {f"part-{k}.parquet": f"new {k}" for k in range(3)}


@pytest.mark.parametrize("how", ["exchange", "move aside"])
def test_a_kill_at_any_step_leaves_the_old_folder_or_the_new_one(tmp_path, how):
    outcomes = set()
    for step in range(1, 9):
        work = tmp_path / f"{how.replace(' ', '_')}-{step}"
        work.mkdir()
        folder = work / "out"
        old = _make_old(folder)
        done = subprocess.run([sys.executable, "-c", CHILD, str(folder), str(step), how.split()[0]],
                              capture_output=True, text=True)
        assert done.returncode in (0, 9), done.stderr
        recover(folder)  # what the next replacement does first
        found = _contents(folder)
        assert found in (old, NEW), (step, found)
        assert [p.name for p in work.iterdir()] == ["out"], step  # nothing left beside it
        outcomes.add("new" if found == NEW else "old")
        replace_folder(folder, lambda p: (p.mkdir(), (p / "x").write_text("again")))
        assert _contents(folder) == {"x": "again"}
    assert outcomes == {"old", "new"}  # killed before and after the swap
