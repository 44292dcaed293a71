"""Progress bars: shown on a terminal or with PROTAB_PROGRESS=1, silent otherwise, and the
iteration itself unchanged either way."""

from __future__ import annotations

import pytest

from protab import _progress


@pytest.mark.parametrize("value, shown", [("0", False), ("off", False), ("1", True), ("yes", True)])
def test_environment_switch(monkeypatch, value, shown):
    monkeypatch.setenv("PROTAB_PROGRESS", value)
    assert _progress.enabled() is shown


def test_off_a_terminal_bars_are_silent(monkeypatch, capsys):
    monkeypatch.delenv("PROTAB_PROGRESS", raising=False)
    assert not _progress.enabled()  # pytest captures stderr: not a terminal
    assert list(_progress.track(range(5), "work")) == [0, 1, 2, 3, 4]
    with _progress.bar("work", total=3) as b:
        b.update(3)
    assert capsys.readouterr().err == ""


def test_forced_bars_draw_on_stderr_and_keep_the_items(monkeypatch, capsys):
    monkeypatch.setenv("PROTAB_PROGRESS", "1")
    assert list(_progress.track(iter(range(4)), "tables", total=4, unit="table")) == [0, 1, 2, 3]
    with _progress.bar("sweeps", total=2) as b:
        b.update(2)
    err = capsys.readouterr().err
    assert "tables" in err and "sweeps" in err
