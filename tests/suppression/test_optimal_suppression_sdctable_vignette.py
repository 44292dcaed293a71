"""method="optimal" on sdcTable's vignette table (168 cells: V1 with subtotal B, V2, V3; 15 primary
cells of count 10 or less; sliding protection 1): no more secondary cells than sdcTable's OPT (22)
and its GAUSS (23), every primary cell protected by the exact audit. The table's cells and the
peers' counts are copied in tests/data/sdctable_vignette.csv."""

from __future__ import annotations

import polars as pl
import pytest
from sdctable_vignette import vignette_inputs

import protab as pt

SDCTABLE = {"OPT": 22, "GAUSS": 23, "HITAS": 13}  # secondary suppressions in the vignette


@pytest.fixture(scope="module")
def vignette():
    table, inner, spec = vignette_inputs()
    with pt.Session(":memory:") as s:
        s.register("t", inner)
        levels = pt.ProtectionLevels(range_min=1)
        out = {cost: s.suppress("t", spec, min_frequency=11, method="optimal", cost=cost, levels=levels)
               for cost in ("cells", "frequency")}
        out["gauss"] = s.suppress("t", spec, min_frequency=11, levels=levels, interval_protection="gauss")
    return table, out


def test_the_vignette_table_has_168_cells_and_15_primary(vignette):
    table, out = vignette
    assert table.height == 168 and int((table["Freq"] <= 10).sum()) == 15
    for frame in out.values():
        assert frame.height == 168 and int((frame["suppressed"] == "primary").sum()) == 15


def test_optimal_suppresses_no_more_cells_than_sdctable_opt_and_every_primary_is_protected(vignette):
    _, out = vignette
    cells = out["cells"]
    assert cells["protected"].all()
    n_sec = int((cells["suppressed"] == "secondary").sum())
    assert n_sec <= SDCTABLE["OPT"] <= SDCTABLE["GAUSS"]
    assert n_sec <= int((out["gauss"]["suppressed"] == "secondary").sum())
    prim = cells.filter(pl.col("suppressed") == "primary")
    assert ((prim["up"] - prim["lo"]) >= 1 - 1e-9).all()


def test_optimal_by_frequency_suppresses_no_more_frequency_than_gauss(vignette):
    table, out = vignette
    keys = ["V1", "V2", "V3"]

    def suppressed_frequency(frame: pl.DataFrame) -> int:
        sec = frame.filter(pl.col("suppressed") == "secondary").select(keys)
        # the flat dimensions' total is "Total" in protab, "Tot" in the vignette
        codes = table.with_columns(pl.col("V2").replace({"Tot": "Total"}), pl.col("V3").replace({"Tot": "Total"}))
        joined = sec.join(codes, on=keys)
        assert joined.height == sec.height > 0
        return int(joined["Freq"].sum())

    freq = out["frequency"]
    assert freq["protected"].all()
    assert suppressed_frequency(freq) <= suppressed_frequency(out["gauss"])
    assert suppressed_frequency(freq) <= suppressed_frequency(out["cells"])
