"""One run at a time per output folder (protab._locks): a second `protab protect` (or publish,
report) into a folder in use refuses at once naming the holder — pid, command, start time —
and touches nothing; `--wait` waits instead; a holder killed with SIGKILL blocks nobody; and
`recover` never removes or finishes the partial folder of a live run. Each case runs real
processes: a paused run (a protect whose tables are protected, or whose batch is half-built,
waiting for a file to appear) and a second command line."""

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
from protab._io import recover
from protab._locks import OutputInUse, lock_file, output_lock
from protab.errors import ProtabError

REQUEST = """\
database = "{db}"
formats = ["csv", "sdmx-csv"]

[ptable]
maximum_entropy = {{ D = 5, V = 3, js = 2 }}

[hierarchies.municipality]
columns = ["region", "municipality"]

[[tables]]
name = "municipality_sex_agegroup"
source = "persons"
dims = ["municipality", "sex", "agegroup"]
threshold = {threshold}

[[tables]]
name = "region_sex"
source = "persons"
dims = ["region", "sex"]
threshold = {threshold}
"""

# A protect that pauses, holding its output folder, until the file GO exists: after protecting
# (``tables``) or after writing the first file of its batch into the partial folder (``batch``).
PAUSED = """\
import os, sys, time
from pathlib import Path
from protab.cli import protect_request, protect_tables

request, out, go, where = sys.argv[1:5]

def pause():
    Path(go + ".paused").write_text(str(os.getpid()))
    while not os.path.exists(go):
        time.sleep(0.02)

if where in ("tables", "publish"):
    real = protect_request.protect_tables
    def protect(*a, **k):
        result = real(*a, **k)
        pause()
        return result
    protect_request.protect_tables = protect
else:
    real_writer = protect_tables._writer
    def writer(*a, **k):
        inner = real_writer(*a, **k)
        def write(path):
            inner(path)
            if not os.path.exists(go):
                pause()
        return write
    protect_tables._writer = writer
if where == "publish":
    protect_request.publish(request, out, replace=True)
else:
    protect_request.protect(request, out=out)
"""


def snapshot(folder: Path) -> dict[str, object]:
    """A folder's files; the run manifest (a random run id and the time) as the digests it lists."""
    files: dict[str, object] = {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.exists() else {}
    if "protab_run.json" in files:
        listed = json.loads(files["protab_run.json"])["files"]  # type: ignore[arg-type]
        files["protab_run.json"] = {n: e["sha256"] for n, e in listed.items()}
    return files


def beside(folder: Path) -> list[str]:
    """Everything protab may leave beside a folder: batch folders, staging, lock files."""
    return sorted(p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}."))


def _env() -> dict[str, str]:
    return dict(os.environ, PROTAB_PROGRESS="0")


def _paused(root: Path, request: str, out: Path, where: str = "tables") -> tuple[subprocess.Popen, Path]:
    """Start a protect that pauses holding ``out``; return it once it is paused, and its GO file."""
    script = root / "paused.py"
    script.write_text(PAUSED)
    go = root / f"go-{time.monotonic_ns()}"
    proc = subprocess.Popen([sys.executable, str(script), str(root / request), str(out), str(go), where],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env())
    deadline = time.monotonic() + 120
    while not Path(str(go) + ".paused").exists():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "the paused run never paused"
        time.sleep(0.02)
    return proc, go


def _protect(root: Path, request: str, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "protab.cli", "protect", str(root / request), "--out", str(out),
                           *extra], capture_output=True, text=True, env=_env(), timeout=300)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("one_run")
    db = root / "census.duckdb"
    cli.demo(3000, str(db), str(root / "demo_out"), "one-run-seed", formats=("csv",))
    for name, threshold in (("a", 0), ("b", 3)):
        (root / f"{name}.toml").write_text(REQUEST.format(db=db.as_posix(), threshold=threshold))
    refs = {}
    for name in ("a", "b"):  # each request's output, run alone
        assert cli.main(["protect", str(root / f"{name}.toml"), "--out", str(root / f"ref_{name}")]) == 0
        refs[name] = snapshot(root / f"ref_{name}")
    assert refs["a"] != refs["b"]
    return root, refs


def test_a_second_protect_into_a_folder_in_use_refuses_naming_the_holder(setup):
    root, refs = setup
    out = root / "out_refused"
    holder, go = _paused(root, "a.toml", out)
    try:
        link = root / "link_to_out_refused"  # another spelling of the same folder
        link.symlink_to(out, target_is_directory=True)
        second = _protect(root, "b.toml", link)
        assert holder.poll() is None  # refused while the holder still runs: at once, not after it
        assert second.returncode == 2, second.stderr
        msg = second.stderr
        assert f"pid {holder.pid}" in msg and "protab protect" in msg and "a.toml" in msg and "started " in msg
        assert "--wait" in msg and "in use" in msg
        assert not out.exists()  # the refused run wrote nothing, and the holder has not written yet
    finally:
        go.write_text("go")
        assert holder.wait(120) == 0, holder.stderr.read().decode()
    assert snapshot(out) == refs["a"]  # entirely the holder's run
    assert beside(out) == []  # no batch folder and no lock file left


@pytest.mark.slow
def test_two_protects_started_together_leave_one_runs_folder(setup):
    root, refs = setup
    out = root / "out_race"
    for _ in range(3):
        env = _env()
        procs = {name: subprocess.Popen([sys.executable, "-m", "protab.cli", "protect", str(root / f"{name}.toml"),
                                         "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True, env=env)
                 for name in ("a", "b")}
        codes = {name: p.wait(300) for name, p in procs.items()}
        errors = {name: p.stderr.read() for name, p in procs.items()}
        assert 0 in codes.values() and set(codes.values()) <= {0, 2}, errors
        state = snapshot(out)
        assert state in (refs["a"], refs["b"]), "a mixed folder"
        for name, code in codes.items():
            if code == 2:  # refused: names the other run, which wrote the whole folder
                other = "b" if name == "a" else "a"
                assert f"pid {procs[other].pid}" in errors[name] and "in use" in errors[name]
                assert state == refs[other]
        assert beside(out) == []


@pytest.mark.slow
def test_wait_waits_for_the_holder_and_then_runs(setup):
    root, refs = setup
    out = root / "out_wait"
    holder, go = _paused(root, "a.toml", out)
    waiting = subprocess.Popen([sys.executable, "-m", "protab.cli", "protect", str(root / "b.toml"), "--out",
                                str(out), "--wait"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env=_env())
    try:
        time.sleep(3.0)  # time enough to start, check the request and find the folder in use
        assert waiting.poll() is None  # still waiting for the paused holder
        assert not out.exists()
    finally:
        go.write_text("go")
    assert holder.wait(120) == 0
    assert waiting.wait(300) == 0, waiting.stderr.read()
    assert f"pid {holder.pid}" in waiting.stderr.read()  # it said whom it waited for
    assert snapshot(out) == refs["b"]  # the waiting run came last and wrote the whole folder
    assert beside(out) == []


@pytest.mark.slow
def test_a_holder_killed_with_sigkill_blocks_nobody(setup):
    root, refs = setup
    out = root / "out_killed"
    holder, _ = _paused(root, "a.toml", out)
    holder.send_signal(signal.SIGKILL)
    holder.wait(60)
    assert lock_file(out).exists()  # the killed run's lock file stays; its lock does not
    nxt = _protect(root, "b.toml", out)  # without --wait: it would refuse if the dead run still held it
    assert nxt.returncode == 0, nxt.stderr
    assert snapshot(out) == refs["b"]
    assert beside(out) == []


def test_recover_leaves_a_live_runs_partial_folder_alone(setup):
    root, refs = setup
    out = root / "out_partial"
    assert cli.main(["protect", str(root / "b.toml"), "--out", str(out)]) == 0
    holder, _ = _paused(root, "a.toml", out, where="batch")  # its batch is half-built beside out
    try:
        partial = [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.protab-partial-")]
        assert len(partial) == 1 and any(partial[0].iterdir())
        with pytest.raises(OutputInUse, match=f"pid {holder.pid}"):
            recover(out)
        second = _protect(root, "b.toml", out)
        assert second.returncode == 2 and f"pid {holder.pid}" in second.stderr
        assert partial[0].is_dir() and snapshot(out) == refs["b"]  # neither removed nor finished
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(60)
    recover(out)  # the holder is dead: its partial folder goes
    assert snapshot(out) == refs["b"] and beside(out) == []


def test_publish_to_a_file_in_use_refuses_naming_the_holder(setup):
    root, _ = setup
    target = root / "published.duckdb"
    holder, go = _paused(root, "a.toml", target, where="publish")
    try:
        link = root / "published_link.duckdb"
        link.symlink_to(target)
        second = subprocess.run([sys.executable, "-m", "protab.cli", "publish", str(root / "b.toml"), "--to",
                                 str(link), "--replace"], capture_output=True, text=True, env=_env(), timeout=300)
        assert second.returncode == 2 and f"pid {holder.pid}" in second.stderr and "publish" in second.stderr
    finally:
        go.write_text("go")
    assert holder.wait(120) == 0
    assert target.is_file() and not lock_file(target).exists()


def test_a_report_into_a_folder_in_use_refuses(tmp_path):
    """protab report takes its folder's lock before it reads anything."""
    out = tmp_path / "report"
    request = tmp_path / "report.toml"
    (tmp_path / "original.csv").write_text("sex,n\nF,3\nM,4\nTotal,7\n")
    (tmp_path / "protected.csv").write_text("sex,n_pert\nF,3\nM,5\nTotal,7\n")
    request.write_text('dims = ["sex"]\n[original]\nfile = "original.csv"\n'
                       '[[protected]]\nlabel = "ckm"\nfile = "protected.csv"\nvalue = "n_pert"\n')
    hold = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom protab._locks import output_lock\n"
                             f"with output_lock({str(out)!r}, command='protab report other.toml'):\n"
                             "    print('held', flush=True)\n    time.sleep(120)"],
                            stdout=subprocess.PIPE, text=True, env=_env())
    try:
        assert hold.stdout.readline().strip() == "held"
        res = subprocess.run([sys.executable, "-m", "protab.cli", "report", str(request), "--out", str(out)],
                             capture_output=True, text=True, env=_env(), timeout=300)
        assert res.returncode == 2 and f"pid {hold.pid}" in res.stderr and "other.toml" in res.stderr
        assert not out.exists()
    finally:
        hold.kill()
        hold.wait(60)
    res = subprocess.run([sys.executable, "-m", "protab.cli", "report", str(request), "--out", str(out)],
                         capture_output=True, text=True, env=_env(), timeout=300)
    assert res.returncode == 0, res.stderr
    assert (out / "report.html").is_file() and beside(out) == []


def test_the_lock_file_names_its_holder_and_no_secret(tmp_path):
    out = tmp_path / "out"
    with output_lock((out, "the output folder"), command="protab protect r.toml"):
        text = lock_file(out).read_text()
        assert str(os.getpid()) in text and "protab protect r.toml" in text and "started" in text
    assert not lock_file(out).exists()  # let go: removed


def test_a_lock_file_that_is_a_symbolic_link_is_refused(tmp_path):
    out = tmp_path / "out"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    lock_file(out).symlink_to(victim)
    with pytest.raises(ProtabError, match="symbolic link"):
        with output_lock(out):
            pass
    assert victim.read_text() == "keep"
