"""A programme run stopped after its first hypercube leaves the output folder as it was, and the
next run takes that hypercube from the staging folder instead of recomputing it; the result is
the same, byte for byte, as a run that was never stopped. A changed definition is recomputed."""

from __future__ import annotations

import json

import pytest
from conftest import without_grid

import protab as pt
from protab.programme import runner
from protab.programme.state import staging_folder


class Stop(Exception):
    """Raised by the test's hook: the run is interrupted."""


def _stop_after_first(name, row):
    raise Stop(name)


def _count_cubes(monkeypatch) -> list[str]:
    """The names of the hypercubes the runner computes (not resumed from the staging folder)."""
    calls: list[str] = []
    original = runner.protect_cube

    def counting(s, source, cube, *args, **kwargs):
        calls.append(cube.name)
        return original(s, source, cube, *args, **kwargs)

    monkeypatch.setattr(runner, "protect_cube", counting)
    return calls


def _files(folder):
    """The files of a folder; the run manifest (its run id and time differ between runs) as the files it lists."""
    files = {f.name: f.read_bytes() for f in sorted(folder.iterdir()) if f.name != "protab_run.json"}
    files["protab_run.json"] = sorted(json.loads((folder / "protab_run.json").read_text(encoding="utf-8"))["files"])
    return files


def test_a_resumed_run_recomputes_nothing_finished_and_equals_a_clean_run(workdir, monkeypatch):
    path = workdir / "programme.toml"
    without_grid(path)
    path.write_text(path.read_text().replace('formats = ["csv"]', 'formats = ["csv", "parquet"]'))
    prog = pt.Programme(path)
    out = workdir / "out"
    with pytest.raises(Stop):
        prog.run(out=out, on_hypercube=_stop_after_first, quiet=True)
    assert not out.exists()  # nothing written into the output
    staged = staging_folder(out)
    first = {f.name: f.stat().st_ino for f in staged.glob("HC01.*")}
    assert sorted(first) == [f"HC01.{t}.{f}" for t in ("region_age", "region_age_sex", "region_sex")
                             for f in ("csv", "parquet")]

    calls = _count_cubes(monkeypatch)
    prog.run(out=out, quiet=True)
    assert calls == [c.name for c in prog.cubes if c.name != "HC01"]  # HC01 was not computed again
    for name, inode in first.items():  # its files are the staged ones, hard-linked into place
        assert (out / name).stat().st_ino == inode
    assert not staged.exists()

    clean = workdir / "clean"
    prog.run(out=clean, quiet=True)
    resumed, fresh = _files(out), _files(clean)
    assert resumed.keys() == fresh.keys()
    for name in resumed:
        if name != "summary.csv":
            assert resumed[name] == fresh[name], name
    # the summary equals but for the seconds each hypercube took
    drop = lambda b: [line.rsplit(",", 1)[0] for line in b.decode().splitlines()]  # noqa: E731
    assert drop(resumed["summary.csv"]) == drop(fresh["summary.csv"])


CHANGES = {
    "a table's dims": ('name = "region_sex"\ndims = ["municipality", "sex"]',
                       'name = "region_sex"\ndims = ["sex", "municipality"]'),
    "the p-table": ("{ D = 5, V = 3, js = 2 }", "{ D = 5, V = 2, js = 2 }"),
    "the threshold": ("threshold = 3 ", "threshold = 2 "),
    "the swap": ("swap_rate = 0.05", "swap_rate = 0.06"),
    "what a level name means": ('levels = ["nuts2", "lau"]', 'levels = ["lau", "nuts2"]'),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_changed_definition_is_recomputed(workdir, monkeypatch, change):
    without_grid(workdir / "programme.toml")
    out = workdir / "out"
    with pytest.raises(Stop):
        pt.Programme(workdir / "programme.toml").run(out=out, on_hypercube=_stop_after_first, quiet=True)
    path = workdir / "programme.toml"
    old, new = CHANGES[change]
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new, 1))
    calls = _count_cubes(monkeypatch)
    with pytest.raises(Stop):
        pt.Programme(path).run(out=out, on_hypercube=_stop_after_first, quiet=True)
    assert calls == ["HC01"]  # HC01 was computed again


def test_the_state_file_holds_no_secret(workdir):
    without_grid(workdir / "programme.toml")
    out = workdir / "out"
    with pytest.raises(Stop):
        pt.Programme(workdir / "programme.toml").run(out=out, on_hypercube=_stop_after_first, quiet=True)
    text = (staging_folder(out) / "state.json").read_text()
    state = json.loads(text)
    assert list(state["hypercubes"]) == ["HC01"]
    assert set(state["hypercubes"]["HC01"]) == {"digest", "files", "summary"}
    assert "programme-swap-seed" not in text and "maximum_entropy" not in text and "js" not in text


def test_a_killed_process_resumes(workdir):
    """SIGKILL right after the first hypercube (no clean-up runs): the next run keeps it."""
    without_grid(workdir / "programme.toml")
    import os
    import subprocess
    import sys

    out = workdir / "out"
    code = ("import os, signal, sys, protab as pt\n"
            "kill = lambda name, row: os.kill(os.getpid(), signal.SIGKILL)\n"
            "pt.Programme(sys.argv[1]).run(out=sys.argv[2], on_hypercube=kill, quiet=True)\n")
    res = subprocess.run([sys.executable, "-c", code, str(workdir / "programme.toml"), str(out)],
                         capture_output=True, text=True, timeout=120, env={**os.environ})
    assert res.returncode == -9, res.stderr
    assert not out.exists()
    staged = {f.name: f.stat().st_ino for f in staging_folder(out).glob("HC01.*")}
    assert len(staged) == 3
    pt.Programme(workdir / "programme.toml").run(out=out, quiet=True)
    assert {n: (out / n).stat().st_ino for n in staged} == staged
