"""Numeric (magnitude) p-tables on the command line: `protab ptable generate --numeric`, `show`
and `convert` of numeric files (one table or an even/odd pair), and that count p-tables keep
working as before. Errors of these commands are rows of tests/cli/test_bad_input.py."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from protab import cli
from protab.errors import PTableWarning
from protab.ptable import MagnitudePTable, PTable

DATA = Path(__file__).resolve().parents[1] / "data"
NUM = DATA / "ptable_num"

# the R reference case "all" of tests/data/ptable_num/cases.csv, as arguments and as the API's
ALL_ARGS = ["--D", "10", "--V", "3", "--step", "2", "--icat", "1", "5", "10", "--optim", "4", "1", "1"]
ALL_API = dict(D=10, V=3, step=2, icat=[1, 5, 10], optim=[4, 1, 1])


def _table(**kw) -> MagnitudePTable:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTableWarning)
        return MagnitudePTable.maximum_entropy(**kw)


def _run(capsys, *argv: str) -> str:
    capsys.readouterr()
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


def _same_to_8_decimals(a: MagnitudePTable, b: MagnitudePTable) -> None:
    assert a.type == b.type and a.rows == b.rows
    for c in ("i", "j", "v"):
        assert a.frame[c].to_list() == b.frame[c].to_list()
    for c in ("p", "lb", "ub"):
        assert np.array_equal(np.round(a.frame[c].to_numpy(), 8), np.round(b.frame[c].to_numpy(), 8)), c


@pytest.mark.parametrize("layout", ["ptable", "tauargus"])
def test_generate_show_convert_round_trip_equals_maximum_entropy(tmp_path, capsys, layout):
    first = tmp_path / f"num.{'csv' if layout == 'ptable' else 'txt'}"
    out = _run(capsys, "ptable", "generate", "--numeric", *ALL_ARGS, "--out", str(first), "--format", layout)
    assert out == f"wrote {first}\n"
    expected = _table(**ALL_API)
    got = MagnitudePTable.read(first)
    assert got == expected  # exact: the file's 8 decimals are the table's bounds over 10**8
    _same_to_8_decimals(got, expected)
    # the file is R ptable's own table (tests/data/ptable_num/all.csv, created by R), to R's 1e-6
    r = MagnitudePTable.read(NUM / "all.csv")
    assert r.rows == got.rows and np.abs(r.frame["ub"].to_numpy() - got.frame["ub"].to_numpy()).max() <= 1e-6
    if layout == "ptable":
        assert first.read_text().splitlines()[0] == "i,j,p,v,p_int_lb,p_int_ub,type"
    else:
        assert first.read_text().splitlines()[0] == "i;j;p;v;p_int_ub;type"

    # show --reveal-parameters: the summary of the file, nothing else about the parameters
    shown = _run(capsys, "ptable", "show", str(first), "--reveal-parameters")
    assert "numeric (magnitude) p-table" in shown and "type all" in shown and "internal" not in shown
    assert "3 ratio classes and row 0, 96 entries" in shown
    summary = expected.summary()
    for n in summary["n_entries"].to_list():
        assert f" {n} " in shown
    for word in ("D =", "V =", "step =", "icat", "optim", "mono"):
        assert word not in shown
    assert _run(capsys, "ptable", "show", str(first), "--numeric", "--reveal-parameters") == shown

    # convert to the other layout and back: the same table, the same bytes
    other = "tauargus" if layout == "ptable" else "ptable"
    second, third = tmp_path / "second", tmp_path / "third"
    assert _run(capsys, "ptable", "convert", str(first), str(second), "--to", other) == f"wrote {second}\n"
    assert _run(capsys, "ptable", "convert", str(second), str(third), "--to", layout, "--numeric") == f"wrote {third}\n"
    assert MagnitudePTable.read(second) == expected == MagnitudePTable.read(third)
    assert third.read_bytes() == first.read_bytes()


def test_generate_takes_every_option_of_maximum_entropy(tmp_path, capsys):
    path = tmp_path / "even.csv"
    _run(capsys, "ptable", "generate", "--numeric", "--D", "6", "--V", "3", "--step", "2", "--icat", "1", "2", "4", "6",
         "--mono", "false", "TRUE", "true", "True", "--optim", "1", "--type", "even", "--out", str(path))
    expected = _table(D=6, V=3, step=2, icat=[1, 2, 4, 6], mono=[False, True, True, True], optim=1, type="even")
    got = MagnitudePTable.read_set(path)
    assert list(got) == ["even"] and got["even"] == expected
    # the R reference of the same parameters (case mono_false), to R's 1e-6
    r = MagnitudePTable.read(NUM / "mono_false.csv")
    assert np.abs(r.frame["ub"].to_numpy() - expected.frame["ub"].to_numpy()).max() <= 1e-6
    # defaults: step 2, optim 1, mono true, type all; one --mono/--optim serves every class
    _run(capsys, "ptable", "generate", "--numeric", "--D", "5", "--V", "1.5", "--icat", "5", "1",
         "--out", str(tmp_path / "d.csv"))
    assert MagnitudePTable.read(tmp_path / "d.csv") == _table(D=5, V=1.5, icat=[1, 5])
    _run(capsys, "ptable", "generate", "--numeric", "--D", "4", "--V", "1.2", "--step", "3", "--icat", "1", "2", "4",
         "--optim", "4", "--mono", "true", "--type", "small_cells", "--out", str(tmp_path / "s.csv"))
    assert MagnitudePTable.read(tmp_path / "s.csv", type="small_cells") == _table(
        D=4, V=1.2, step=3, icat=[1, 2, 4], optim=4, type="small_cells")


def test_an_even_odd_pair_is_shown_and_converted_as_a_pair(tmp_path, capsys):
    source = NUM / "argus_even_odd.txt"
    pair = MagnitudePTable.read_set(source)
    shown = _run(capsys, "ptable", "show", str(source), "--reveal-parameters")
    assert "2 tables (type even, odd)" in shown
    assert shown.index("type even:") < shown.index("type odd:")
    assert "3 ratio classes and row 0, 80 entries" in shown and "2 ratio classes and row 0, 65 entries" in shown
    r_csv, back = tmp_path / "pair.csv", tmp_path / "pair.txt"
    _run(capsys, "ptable", "convert", str(source), str(r_csv), "--to", "ptable")
    assert MagnitudePTable.read_set(r_csv) == pair
    _run(capsys, "ptable", "convert", str(r_csv), str(back))  # default: --to tauargus
    assert MagnitudePTable.read_set(back) == pair
    types = [line.rsplit(";", 1)[1] for line in back.read_text().splitlines()[1:]]
    assert types == ["even"] * 80 + ["odd"] * 65  # even first, as tau-ARGUS needs
    # R's own CSVs of each type, and R's SAS layout, convert too
    _run(capsys, "ptable", "convert", str(NUM / "odd.csv"), str(tmp_path / "odd.txt"), "--from", "ptable")
    assert MagnitudePTable.read_set(tmp_path / "odd.txt") == {"odd": MagnitudePTable.read(NUM / "odd.csv")}
    _run(capsys, "ptable", "convert", str(NUM / "sas_all.txt"), str(tmp_path / "sas.csv"), "--to", "ptable",
         "--from", "tauargus")
    assert MagnitudePTable.read(tmp_path / "sas.csv") == MagnitudePTable.read(NUM / "sas_all.txt")


def test_numeric_files_with_integer_noise_are_told_apart_by_their_classes(tmp_path, capsys):
    # step 1 has integer noise; the classes 1, 3, 5 leave gaps a count p-table cannot have
    shown = _run(capsys, "ptable", "show", str(NUM / "step1.csv"), "--reveal-parameters")
    assert "numeric (magnitude) p-table" in shown and "3 ratio classes" in shown
    _run(capsys, "ptable", "convert", str(NUM / "step1.csv"), str(tmp_path / "s1.txt"))
    assert MagnitudePTable.read(tmp_path / "s1.txt") == MagnitudePTable.read(NUM / "step1.csv")


def test_count_p_tables_work_as_before(tmp_path, capsys):
    path = tmp_path / "count.csv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTableWarning)
        expected = PTable.maximum_entropy(D=5, V=3, js=2)
    _run(capsys, "ptable", "generate", "--D", "5", "--V", "3", "--js", "2", "--out", str(path))
    shown = _run(capsys, "ptable", "show", str(path), "--reveal-parameters")
    assert "D = 5, V = 3" in shown and "numeric" not in shown
    _run(capsys, "ptable", "convert", str(path), str(tmp_path / "c.txt"))
    assert PTable.read(tmp_path / "c.txt").frame.equals(expected.frame)
    # R ptable's count CSV (type column "all", integer noise) is a count p-table
    assert "D = 5, V = 3" in _run(capsys, "ptable", "show", str(DATA / "ptable_R_D5_V3_js2.csv"), "--reveal-parameters")


def test_warnings_and_errors_speak_command_line(tmp_path, capsys):
    capsys.readouterr()
    # the variance cannot be reached: a one-line warning that points to `protab ptable show --reveal-parameters`
    assert cli.main(["ptable", "generate", "--numeric", "--D", "2", "--V", "3", "--icat", "1", "2",
                     "--out", str(tmp_path / "w.csv")]) == 0
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("protab: warning: magnitude p-table")
    assert "`protab ptable show --reveal-parameters`" in err and "MagnitudePTable" not in err
    assert cli.main(["ptable", "generate", "--numeric", "--D", "10", "--V", "3", "--icat", "1", "5",
                     "--out", str(tmp_path / "e.csv")]) == 2
    err = capsys.readouterr().err
    assert "--icat 1" in err and "icat = [" not in err and not (tmp_path / "e.csv").exists()


def test_help_documents_numeric_p_tables(capsys):
    for argv, words in [
        (["ptable", "--help"], ["numeric (magnitude)", "even", "small_cells", "--numeric", "tauargus"]),
        (["ptable", "generate", "--help"], ["--numeric", "--icat", "--step", "--optim", "--mono", "--type",
                                            "create_num_ptable", "small_cells"]),
        (["ptable", "show", "--help"], ["--numeric", "ratio class"]),
        (["ptable", "convert", "--help"], ["--numeric", "even/odd pair"]),
        (["ptable", "install", "--help"], ["count p-table"]),
    ]:
        capsys.readouterr()
        with pytest.raises(SystemExit):
            cli.main(argv)
        out = " ".join(capsys.readouterr().out.split())
        for word in words:
            assert word in out, (argv, word)
