"""`protab ptable ... --magnitude`: the option's name for p-tables of magnitudes (MagnitudePTable),
with `--numeric`, R ptable's word, as its other name: both give the same files and the same
answers, and the help of generate, show and convert names both."""

from __future__ import annotations

import pytest

from protab import cli

ARGS = ["--D", "10", "--V", "3", "--step", "2", "--icat", "1", "5", "10", "--optim", "4", "1", "1"]


def _run(capsys, *argv: str) -> str:
    capsys.readouterr()
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


@pytest.mark.filterwarnings("ignore::protab.errors.PTableWarning")
def test_generate_magnitude_writes_what_numeric_writes(tmp_path, capsys):
    by_name = tmp_path / "magnitude.csv"
    by_alias = tmp_path / "numeric.csv"
    _run(capsys, "ptable", "generate", "--magnitude", *ARGS, "--out", str(by_name))
    _run(capsys, "ptable", "generate", "--numeric", *ARGS, "--out", str(by_alias))
    assert by_name.read_bytes() == by_alias.read_bytes()
    assert by_name.read_text().splitlines()[0] == "i,j,p,v,p_int_lb,p_int_ub,type"  # a magnitude p-table
    shown = _run(capsys, "ptable", "show", str(by_name), "--magnitude")
    assert shown == _run(capsys, "ptable", "show", str(by_name), "--numeric")
    assert "numeric (magnitude) p-table" in shown
    converted = tmp_path / "converted.txt"
    assert _run(capsys, "ptable", "convert", str(by_name), str(converted), "--magnitude") == f"wrote {converted}\n"


def test_magnitude_refuses_a_count_p_table_like_numeric(tmp_path, capsys):
    counts = tmp_path / "counts.csv"
    _run(capsys, "ptable", "generate", "--D", "3", "--V", "1", "--out", str(counts))
    assert cli.main(["ptable", "show", str(counts), "--magnitude"]) == 2
    assert "is a count p-table" in capsys.readouterr().err


@pytest.mark.parametrize("action", ["generate", "show", "convert"])
def test_help_names_magnitude_and_numeric(capsys, action):
    with pytest.raises(SystemExit):
        cli.main(["ptable", action, "--help"])
    out = capsys.readouterr().out
    assert "--magnitude, --numeric" in out and "R ptable's word" in out
