"""The summary of a programme: one row per hypercube (tables, cells, share blanked, share
changed, Hellinger utility, seconds) printed as a table and written as summary.csv, with the
numbers the published files and the original counts give."""

from __future__ import annotations

import polars as pl
from conftest import read_outputs

import protab as pt
from protab import cli


def test_summary_rows_match_the_published_files(workdir, capsys):
    assert cli.main(["programme", str(workdir / "programme.toml"), "--out", str(workdir / "out")]) == 0
    printed = capsys.readouterr().out
    summary = pl.read_csv(workdir / "out" / "summary.csv")
    assert summary.columns == ["hypercube", "tables", "cells", "blanked", "changed", "hellinger_utility", "seconds"]
    assert summary["hypercube"].to_list() == ["HC01", "HC02", "HC03", "HC04"]
    frames = read_outputs(workdir / "out")
    for row in summary.iter_rows(named=True):
        mine = [f for (cube, _), f in frames.items() if cube == row["hypercube"]]
        assert row["tables"] == len(mine)
        assert row["cells"] == sum(f.height for f in mine)
        blank = sum(f["n_pert"].is_null().sum() for f in mine)
        assert abs(row["blanked"] - blank / row["cells"]) < 1e-12
        assert 0 < row["hellinger_utility"] <= 1 and 0 <= row["changed"] <= 1
        assert row["hypercube"] in printed
    assert "hellinger" in printed.lower()


def test_share_changed_and_utility_are_those_of_the_original_counts(workdir):
    """HC03's measures recomputed from the original counts of its cells (tabulated from the
    swapped records) and the published ones."""
    from protab.measures import hellinger_utility, share_changed

    summary = pt.Programme(workdir / "programme.toml").run(out=workdir / "out", quiet=True)
    frames = read_outputs(workdir / "out")
    with pt.Session(str(workdir / "demo.duckdb"), read_only=True) as s:
        h = s.hierarchy_from_columns("persons", ["region", "municipality"])
        originals, published = [], []
        for name, dims in (("region_citizenship_sex", ["municipality", "citizenship", "sex"]),
                           ("citizenship_sex", ["citizenship", "sex"])):
            spec = pt.TableSpec({d: h if d == "municipality" else None for d in dims})
            counts = s.tabulate("persons_swapped", spec)
            if "municipality" in dims:
                counts = counts.filter(pl.col("municipality_level") <= 1)
            pub = frames["HC03", name].with_columns(pl.col("n_pert").cast(pl.Int64))
            joined = pub.join(counts.select(*dims, "n").cast({d: pl.String for d in dims}), on=dims, how="left")
            assert joined["n"].null_count() == 0 and joined.height == pub.height
            originals.append(joined["n"])
            published.append(joined["n_pert"].fill_null(0))
    n, p = pl.concat(originals).to_numpy(), pl.concat(published).to_numpy()
    row = summary.filter(pl.col("hypercube") == "HC03").row(0, named=True)
    assert abs(row["changed"] - share_changed(n, p)) < 1e-12
    assert abs(row["hellinger_utility"] - hellinger_utility(n, p)) < 1e-12


def test_the_command_lists_programme_with_its_format(capsys):
    import pytest

    with pytest.raises(SystemExit):
        cli.main(["programme", "--help"])
    text = capsys.readouterr().out
    assert "[[hypercubes]]" in text and "classification[:level]" in text
