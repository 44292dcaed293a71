"""`protab ptable show` keeps a p-table's parameters (D, V, js, pstay) secret unless it is given
--reveal-parameters: without it nothing it prints depends on them (not the rows, the variances
or the noise range either), and --png, which draws them, needs the flag; one sentence states the
policy alike in the README, docs/census.md, `ptable --help`, `show --help` and show's output."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from protab import cli
from protab.cli.ptable_files import PARAMETERS_POLICY
from protab.errors import PTableWarning
from protab.ptable import MagnitudePTable, PTable

ROOT = Path(__file__).resolve().parents[2]
COUNTS = [dict(D=5, V=3, js=2), dict(D=3, V=1), dict(D=8, V=4.5, js=1, pstay=0.4), dict(D=2, V=0.8)]
NUMERIC = [dict(D=10, V=3, step=2, icat=[1, 5, 10]), dict(D=4, V=1.2, step=3, icat=[1, 2, 4], optim=4)]


def _show(capsys, *argv: str) -> str:
    capsys.readouterr()
    assert cli.main(["ptable", "show", *argv]) == 0
    return capsys.readouterr().out


def _count_file(folder: Path, k: int) -> Path:
    path = folder / f"p{k}.csv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTableWarning)
        PTable.maximum_entropy(**COUNTS[k]).write(path)
    return path


def _numeric_file(folder: Path, k: int) -> Path:
    path = folder / f"n{k}.csv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTableWarning)
        MagnitudePTable.maximum_entropy(**NUMERIC[k]).write(path)
    return path


def test_without_the_flag_nothing_shown_depends_on_the_parameters(tmp_path, capsys):
    """Four count p-tables of different D, V, js and pstay print the same text (but their names)."""
    texts = {_show(capsys, str(f)).replace(f.name, "FILE") for f in (_count_file(tmp_path, k)
                                                                      for k in range(len(COUNTS)))}
    assert len(texts) == 1
    text = texts.pop()
    assert "count p-table" in text and "mean 0 in every row" in text and "an empty cell stays 0" in text
    checks = text.split("D, V, js and pstay are not shown")[0]
    assert not re.search(r"D = |V = |variance|p_stay|v_max|rows", checks)


def test_without_the_flag_numeric_p_tables_show_no_parameter_either(tmp_path, capsys):
    texts = {_show(capsys, str(f)).replace(f.name, "FILE") for f in (_numeric_file(tmp_path, k)
                                                                      for k in range(len(NUMERIC)))}
    assert len(texts) == 1
    text = texts.pop()
    assert "numeric (magnitude) p-table" in text and "ratio classes and row 0" not in text
    assert "n_entries" not in text and "variance" not in text.split("Note:")[0].replace("the variances", "")


@pytest.mark.parametrize("k", range(len(COUNTS)))
def test_with_the_flag_the_parameters_are_printed(tmp_path, capsys, k):
    text = _show(capsys, str(_count_file(tmp_path, k)), "--reveal-parameters")
    p = COUNTS[k]
    assert f"D = {p['D']}, V = {p['V']:g}" in text and "variance" in text and "p_stay" in text
    assert "are not shown" not in text


def test_with_the_flag_numeric_classes_are_printed(tmp_path, capsys):
    text = _show(capsys, str(_numeric_file(tmp_path, 0)), "--reveal-parameters")
    assert "3 ratio classes and row 0" in text and "variance" in text and "n_entries" in text


def test_the_png_needs_the_flag(tmp_path, capsys):
    source, png = _count_file(tmp_path, 0), tmp_path / "noise.png"
    capsys.readouterr()
    assert cli.main(["ptable", "show", str(source), "--png", str(png)]) == 2
    err = capsys.readouterr().err
    assert "--reveal-parameters" in err and "D = " not in err and not png.exists()
    assert "wrote" in _show(capsys, str(source), "--reveal-parameters", "--png", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_one_sentence_states_the_policy_everywhere(tmp_path, capsys):
    policy = _flat(PARAMETERS_POLICY)
    # said once in the docs, in the vocabulary (README and census.md link to it), as in the help
    assert policy in _flat((ROOT / "docs/vocabulary.md").read_text(encoding="utf-8"))
    for argv in (["ptable", "--help"], ["ptable", "show", "--help"]):
        capsys.readouterr()
        with pytest.raises(SystemExit):
            cli.main(argv)
        assert policy in _flat(capsys.readouterr().out), argv
    assert policy in _flat(_show(capsys, str(_count_file(tmp_path, 0))))
    assert policy in _flat(_show(capsys, str(_count_file(tmp_path, 0)), "--reveal-parameters"))


def test_no_doc_says_show_prints_or_hides_them_otherwise():
    """Every sentence of README.md, docs/ and the command line's code that says what `ptable show`
    prints of D, V or the rows names the flag; none says it never prints them, or prints them."""
    texts = {"README.md": (ROOT / "README.md").read_text(encoding="utf-8")}
    texts |= {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md")}
    texts |= {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in (ROOT / "src/protab/cli").glob("*.py")}
    mentions = 0
    for name, text in texts.items():
        for flat in re.split(r"(?<=[.;])\s", _flat(text)):
            if "ptable show" not in flat and "`show`" not in flat:
                continue
            mentions += 1
            assert "does not print them" not in flat and "`show` prints them for" not in flat, (name, flat)
            if re.search(r"(?<![-\w])D\b.*(?<![-\w])V\b|variance per row|\brows\b", flat):  # not --D, --V
                assert "--reveal-parameters" in flat, (name, flat)
    assert mentions >= 5
