"""All-or-nothing outputs under SIGKILL: `protab protect` killed at many instants leaves its
output folder as it was before the run or complete, and the next run clears what it left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from protab import cli
from protab._io import recover, write_batch

REQUEST = """\
database = "{db}"
formats = ["csv", "parquet"]

[ptable]
maximum_entropy = {{ D = 5, V = 3, js = 2 }}

[hierarchies.municipality]
columns = ["region", "municipality"]

[hierarchies.grid1km]
columns = ["grid10km", "grid1km"]

[[tables]]
name = "municipality_sex_agegroup"
source = "persons"
dims = ["municipality", "sex", "agegroup"]
threshold = {threshold}

[[tables]]
name = "grid_sex_agegroup"
source = "persons"
dims = ["grid1km", "sex", "agegroup"]
drop_empty = true
threshold = {threshold}
"""


def snapshot(folder: Path) -> dict[str, object]:
    """A folder's files; the run manifest (a random run id and the time) as the digests it lists."""
    files: dict[str, object] = {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.exists() else {}
    if "protab_run.json" in files:
        listed = json.loads(files["protab_run.json"])["files"]  # type: ignore[arg-type]
        files["protab_run.json"] = {n: e["sha256"] for n, e in listed.items()}
    return files


def leftovers(folder: Path) -> list[str]:
    """What an interrupted run may leave: sibling staging folders and .tmp files."""
    stray = [p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}.protab-")]
    if folder.exists():
        stray += [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]
    return stray


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("kill")
    db = root / "census.duckdb"
    cli.demo(200_000, str(db), str(root / "demo_out"), "kill-test-seed", formats=("csv",))
    for name, threshold in (("before", 0), ("after", 3)):
        (root / f"{name}.toml").write_text(REQUEST.format(db=db.as_posix(), threshold=threshold))
    # the state before the run: an earlier request's tables plus a file of the user's
    out = root / "out"
    assert cli.main(["protect", str(root / "before.toml"), "--out", str(out)]) == 0
    (out / "notes.txt").write_text("kept")
    before = snapshot(out)
    raw = {p.name: p.read_bytes() for p in sorted(out.iterdir())}  # to put it back
    # the state after a complete run, in a folder of its own
    ref = root / "reference"
    assert cli.main(["protect", str(root / "after.toml"), "--out", str(ref)]) == 0
    after = snapshot(ref)
    after["notes.txt"] = b"kept"
    assert set(after) == set(before) and after != before
    return root, out, before, after, raw


def _start(root: Path, out: Path) -> subprocess.Popen:
    env = dict(os.environ, PROTAB_PROGRESS="0")
    return subprocess.Popen(
        [sys.executable, "-m", "protab.cli", "protect", str(root / "after.toml"), "--out", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )


def _kill_when(proc: subprocess.Popen, out: Path, stage: str | None, delay: float, limit: float = 120) -> bool:
    """SIGKILL ``proc`` ``delay`` s after a sibling folder of ``stage`` appears (or after start)."""
    t0 = time.monotonic()
    if stage is not None:
        while proc.poll() is None and time.monotonic() - t0 < limit:
            if any(p.name.startswith(f".{out.name}.{stage}-") for p in out.parent.iterdir()):
                break
            time.sleep(0.0005)
    time.sleep(delay)
    if proc.poll() is not None:
        return False
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return True


# kills at instants spread over the whole run: by the clock, and as the write phase begins
INSTANTS = [(None, d) for d in (0.5, 2.0)] + [
    ("protab-partial", d) for d in (0.0, 0.005, 0.03)
] + [("protab-ready", 0.0)]


@pytest.mark.slow
def test_protect_killed_at_any_instant_leaves_before_or_after(setup):
    root, out, before, after, raw = setup
    killed = 0
    for stage, delay in INSTANTS:
        assert snapshot(out) == before
        proc = _start(root, out)
        if _kill_when(proc, out, stage, delay):
            killed += 1
        state = snapshot(out)
        assert state in (before, after), f"killed at {stage} + {delay} s: a mixed folder"
        # the next run finishes the job and leaves nothing behind
        assert cli.main(["protect", str(root / "after.toml"), "--out", str(out)]) == 0
        assert snapshot(out) == after
        assert leftovers(out) == []
        # back to the state before, for the next kill
        for p in out.iterdir():
            p.unlink()
        for name, data in raw.items():
            (out / name).write_bytes(data)
    assert killed >= 4, "the kills came too late to test anything"


def test_recover_finishes_a_swap_interrupted_between_its_renames(tmp_path):
    out = tmp_path / "out"
    write_batch(out, {"a.csv": lambda p: p.write_text("old")})
    # as if killed after moving the old folder aside and before renaming the ready one
    ready = tmp_path / ".out.protab-ready-abc"
    ready.mkdir()
    (ready / "a.csv").write_text("new")
    out.rename(tmp_path / ".out.protab-old-abc")
    recover(out)
    assert (out / "a.csv").read_text() == "new"
    assert leftovers(out) == []


def test_a_failing_writer_leaves_the_folder_as_it_was(tmp_path):
    out = tmp_path / "out"
    write_batch(out, {"a.csv": lambda p: p.write_text("old"), "b.csv": lambda p: p.write_text("old")})

    def broken(path: Path) -> None:
        path.write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        write_batch(out, {"a.csv": lambda p: p.write_text("new"), "b.csv": broken})
    assert snapshot(out) == {"a.csv": b"old", "b.csv": b"old"}
    assert leftovers(out) == []


def test_batches_into_one_folder_never_run_together(tmp_path):
    """While one run holds the folder, another batch into it (here from another thread) refuses
    at once, naming the holder, and touches nothing: its clean-up never removes the first run's
    staging folder. Once the first lets go, the batch runs (two runs end complete, never mixed)."""
    import threading

    from protab._locks import OutputInUse, output_lock

    out = tmp_path / "out"
    write_batch(out, {"a.csv": lambda p: p.write_text("a")})
    building = tmp_path / ".out.protab-partial-0123456789ab"  # the holder's batch, being built
    errors: list[str] = []

    def second() -> None:
        try:
            write_batch(out, {"a.csv": lambda p: p.write_text("b")})
        except OutputInUse as exc:
            errors.append(str(exc))

    with output_lock(out, command="protab protect first.toml"):
        building.mkdir()
        t = threading.Thread(target=second)
        t.start()
        t.join(30)
        assert len(errors) == 1 and "protab protect first.toml" in errors[0] and "--wait" in errors[0]
        assert building.is_dir() and (out / "a.csv").read_text() == "a"
        building.rmdir()
    second()
    assert len(errors) == 1 and (out / "a.csv").read_text() == "b"
    assert leftovers(out) == []
