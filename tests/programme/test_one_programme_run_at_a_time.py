"""Two programme runs into one output folder never make a mixed folder (some files of one run,
some of the other) nor leave a staging folder: the run that comes second refuses at once naming
the first (pid, command, start time), or waits for it with --wait / ``wait=True``; a first run
killed with SIGKILL blocks nobody. Real processes: a run paused after its first hypercube (by
the hook ``on_hypercube``) holding the folder, and a second ``protab programme``."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from conftest import EXAMPLE

import protab as pt
from protab._locks import OutputInUse
from protab.programme.state import staging_folder

PAUSED = """\
import os, sys, time
from pathlib import Path
import protab as pt

programme, out, go = sys.argv[1:4]

def pause(name, row):
    if not os.path.exists(go):
        Path(go + ".paused").write_text(name)
        while not os.path.exists(go):
            time.sleep(0.02)

pt.Programme(programme).run(out=out, on_hypercube=pause, quiet=True)
"""


def _env() -> dict[str, str]:
    return dict(os.environ, PROTAB_PROGRESS="0", SWAP_SEED="programme-swap-seed")


def outputs(folder: Path) -> dict[str, object]:
    """A folder's files, summary.csv without its timings (the one column that differs between
    two runs of one programme) and the manifest as the files it lists and the number of runs they
    come from."""
    files: dict[str, object] = {}
    for p in sorted(folder.iterdir()) if folder.exists() else []:
        if p.name == "summary.csv":
            files[p.name] = pl.read_csv(io.BytesIO(p.read_bytes())).drop("seconds").rows()
        elif p.name == "protab_run.json":  # its run id and time differ between runs: the files it lists, of one run
            listed = json.loads(p.read_text(encoding="utf-8"))["files"]
            files[p.name] = (sorted(listed), len({e["run_id"] for e in listed.values()}))
        else:
            files[p.name] = p.read_bytes()
    return files


def beside(folder: Path) -> list[str]:
    """Staging, batch and lock files beside ``folder``."""
    return sorted(p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}."))


def _programme(root: Path, name: str, threshold: int) -> Path:
    text = EXAMPLE.read_text(encoding="utf-8").replace('database = "../../protab.duckdb"', 'database = "demo.duckdb"')
    text = text[: text.index('[[hypercubes]]\nname = "HC04"')]  # without the 1 km grid, for speed
    text = text.replace("threshold = 3 ", f"threshold = {threshold} ")
    path = root / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _run(programme: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "protab.cli", "programme", str(programme), "--out", str(out), *extra],
                          capture_output=True, text=True, env=_env(), timeout=300)


def _paused(root: Path, programme: Path, out: Path) -> tuple[subprocess.Popen, Path]:
    """A programme run paused after its first hypercube, holding ``out``; and its GO file."""
    script = root / "paused.py"
    script.write_text(PAUSED)
    go = root / f"go-{time.monotonic_ns()}"
    proc = subprocess.Popen([sys.executable, str(script), str(programme), str(out), str(go)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env())
    deadline = time.monotonic() + 120
    while not Path(str(go) + ".paused").exists():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "the paused run never paused"
        time.sleep(0.02)
    return proc, go


@pytest.fixture(scope="module")
def setup(tmp_path_factory, demo_database):
    root = tmp_path_factory.mktemp("one_programme")
    shutil.copy(demo_database, root / "demo.duckdb")
    progs = {"a": _programme(root, "a", 3), "b": _programme(root, "b", 0)}
    refs = {}
    for name, prog in progs.items():  # each programme's output, run alone
        res = _run(prog, root / f"ref_{name}")
        assert res.returncode == 0, res.stderr
        refs[name] = outputs(root / f"ref_{name}")
    assert refs["a"] != refs["b"] and set(refs["a"]) == set(refs["b"])
    return root, progs, refs


def test_a_second_run_into_a_folder_in_use_refuses_naming_the_first(setup):
    root, progs, refs = setup
    out = root / "out_refused"
    first, go = _paused(root, progs["a"], out)
    try:
        assert staging_folder(out).is_dir()  # the first run's finished hypercube waits there
        second = _run(progs["b"], out)
        assert first.poll() is None  # refused while the first still runs
        assert second.returncode == 2, second.stderr
        msg = second.stderr
        assert f"pid {first.pid}" in msg and "protab programme" in msg and "a.toml" in msg and "started " in msg
        assert "--wait" in msg
        with pytest.raises(OutputInUse, match=f"pid {first.pid}"):  # from Python too
            pt.Programme(progs["b"]).run(out=out, quiet=True)
        assert not out.exists()
    finally:
        go.write_text("go")
    assert first.wait(120) == 0, first.stderr.read().decode()
    assert outputs(out) == refs["a"]  # entirely the first run's: no file of the second
    assert beside(out) == []  # no staging folder, no lock file


@pytest.mark.slow
def test_two_runs_started_together_leave_one_runs_folder(setup):
    root, progs, refs = setup
    out = root / "out_race"
    for _ in range(2):
        procs = {name: subprocess.Popen([sys.executable, "-m", "protab.cli", "programme", str(prog), "--out", str(out)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env())
                 for name, prog in progs.items()}
        codes = {name: p.wait(300) for name, p in procs.items()}
        errors = {name: p.stderr.read() for name, p in procs.items()}
        assert 0 in codes.values() and set(codes.values()) <= {0, 2}, errors
        state = outputs(out)
        assert state in (refs["a"], refs["b"]), "a mixed folder"
        for name, code in codes.items():
            if code == 2:
                other = "b" if name == "a" else "a"
                assert f"pid {procs[other].pid}" in errors[name]
                assert state == refs[other]
        assert beside(out) == []


@pytest.mark.slow
def test_wait_runs_after_the_first_and_leaves_its_own_folder(setup):
    root, progs, refs = setup
    out = root / "out_wait"
    first, go = _paused(root, progs["a"], out)
    second = subprocess.Popen([sys.executable, "-m", "protab.cli", "programme", str(progs["b"]), "--out", str(out),
                               "--wait"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        time.sleep(3.0)  # time enough to read the programme and find the folder in use
        assert second.poll() is None and not out.exists()
    finally:
        go.write_text("go")
    assert first.wait(120) == 0
    assert second.wait(300) == 0, second.stderr.read()
    assert outputs(out) == refs["b"]
    assert beside(out) == []


@pytest.mark.slow
def test_a_first_run_killed_with_sigkill_blocks_nobody(setup):
    root, progs, refs = setup
    out = root / "out_killed"
    first, _ = _paused(root, progs["a"], out)
    first.send_signal(signal.SIGKILL)
    first.wait(60)
    assert staging_folder(out).is_dir()  # the killed run's finished hypercube
    nxt = _run(progs["b"], out)  # another definition, without --wait
    assert nxt.returncode == 0, nxt.stderr
    assert outputs(out) == refs["b"]  # nothing of the killed run's staged hypercube
    assert beside(out) == []


@pytest.mark.slow
def test_programme_run_with_wait_true_waits_for_the_first(setup, monkeypatch):
    import threading

    monkeypatch.setenv("SWAP_SEED", "programme-swap-seed")
    monkeypatch.setenv("PROTAB_PROGRESS", "0")
    root, progs, refs = setup
    out = root / "out_wait_python"
    first, go = _paused(root, progs["a"], out)
    done: list[object] = []
    waiting = threading.Thread(target=lambda: done.append(pt.Programme(progs["b"]).run(out=out, quiet=True,
                                                                                       wait=True)))
    try:
        waiting.start()
        waiting.join(3.0)
        assert waiting.is_alive() and not out.exists()  # waiting for the paused first run
    finally:
        go.write_text("go")
    assert first.wait(120) == 0
    waiting.join(300)
    assert len(done) == 1 and outputs(out) == refs["b"] and beside(out) == []
