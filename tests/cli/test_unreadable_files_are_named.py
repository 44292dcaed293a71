"""Hierarchy and p-table files that cannot be read give a protab error naming the file, and a
count p-table file with a fractional original value i is reported as that (column, row,
value), not as a numeric p-table."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import protab as pt
from protab import cli
from protab.errors import InputError, PTableError
from protab.ptable.magnitude_ptable import MagnitudePTable

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "latin1.hrc").write_bytes("Bergen\n@Årstad\n".encode("latin-1"))
    (tmp_path / "binary.csv").write_bytes(b"\xff\xfe\x00\x81garbage")
    (tmp_path / "folder").mkdir()
    return tmp_path


@pytest.mark.parametrize("name, fragment", [
    ("missing.hrc", "does not exist"),
    ("latin1.hrc", "is not UTF-8 text (invalid continuation byte at byte 8)"),
    ("folder", "is a folder, not a file"),
])
def test_hrc_file_that_cannot_be_read(files, name, fragment):
    with pytest.raises(InputError) as exc:
        pt.Hierarchy.read_hrc(files / name)
    assert str(exc.value) == f"hrc file {str(files / name)!r} {fragment}" + (
        "; save it as UTF-8 or pass encoding= (e.g. 'latin-1')" if "UTF-8" in fragment else "")


def test_hrc_file_in_its_own_encoding(files):
    h = pt.Hierarchy.read_hrc(files / "latin1.hrc", encoding="latin-1")
    assert "Årstad" in h.to_hrc()
    with pytest.raises(InputError, match="unknown encoding 'latin-9x'"):
        pt.Hierarchy.read_hrc(files / "latin1.hrc", encoding="latin-9x")


@pytest.mark.parametrize("reader", [pt.PTable.read, MagnitudePTable.read, MagnitudePTable.read_set])
@pytest.mark.parametrize("name, fragment", [
    ("missing.csv", "does not exist"),
    ("binary.csv", "is not UTF-8 text"),
    ("folder", "is a folder, not a file"),
])
def test_ptable_file_that_cannot_be_read(files, reader, name, fragment):
    with pytest.raises(PTableError, match=f"p-table file '{files / name}' {fragment}"):
        reader(files / name)


def _count_file_with_i(tmp_path: Path, sep: str) -> Path:
    """R ptable's D = 5, V = 3, js = 2 table whose rows of i = 1 say i = 1.5 (v = j − i kept
    consistent, so the noise is fractional as in a numeric p-table)."""
    df = pl.read_csv(DATA / "ptable_R_D5_V3_js2.csv")
    df = df.with_columns(i=pl.when(pl.col("i") == 1).then(1.5).otherwise(pl.col("i"))).with_columns(
        v=pl.col("j") - pl.col("i"))
    path = tmp_path / ("bad.csv" if sep == "," else "bad.txt")
    df.write_csv(path, separator=sep)
    return path


@pytest.mark.parametrize("sep", [",", ";"])
def test_fractional_i_is_named_not_taken_for_a_numeric_table(tmp_path, sep, capsys):
    path = _count_file_with_i(tmp_path, sep)
    # rows: i = 0 (data row 1), then the five rows of i = 1.5
    expected = (f"p-table file '{path.name}': column 'i' must hold whole numbers (the original counts); "
                "data row 2 has '1.5' (and 4 more row(s))")
    with pytest.raises(PTableError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        pt.PTable.read(path)
    with pytest.raises(PTableError, match="column 'i' must hold whole numbers \\(the ratio classes"):
        MagnitudePTable.read_set(path)
    assert cli.main(["ptable", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert expected in err and "numeric" not in err
