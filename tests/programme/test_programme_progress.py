"""A programme shows its progress per hypercube: a bar over the hypercubes (when bars are on)
and a line per hypercube on stderr, saying which ones an earlier run finished; stdout holds the
summary only."""

from __future__ import annotations

import pytest
from conftest import without_grid

from protab import cli


def test_progress_per_hypercube_on_stderr(workdir, monkeypatch, capsys):
    without_grid(workdir / "programme.toml")
    monkeypatch.setenv("PROTAB_PROGRESS", "1")
    import protab as pt

    def stop(name, row):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pt.Programme(workdir / "programme.toml").run(out=workdir / "out", on_hypercube=stop)
    capsys.readouterr()
    assert cli.main(["programme", str(workdir / "programme.toml"), "--out", str(workdir / "out")]) == 0
    captured = capsys.readouterr()
    assert "protecting hypercubes" in captured.err and "hypercube" in captured.err
    assert "hypercube HC01 (1/3): finished by an earlier run, kept" in captured.err
    assert "hypercube HC02 (2/3) …" in captured.err and "hypercube HC03 (3/3) …" in captured.err
    assert "kept" not in captured.out and captured.out.splitlines()[0].startswith("hypercube")
