"""method="optimal" through the Session for a magnitude table (primary cells and levels from the
dominance rule, cost = value) and for linked tables in the global mode: every primary cell
meets its levels, the value suppressed is no more than Gauss mode's, and a cell common to the
linked tables gets one decision."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import protab as pt
from protab.magnitude import SensitivityRules


def _firms() -> pl.DataFrame:
    rng = np.random.default_rng(5)
    n = 120
    return pl.DataFrame({"region": rng.choice(list("ABCDE"), n), "sector": rng.choice(list("xyzw"), n),
                         "size": rng.choice(["s", "l"], n),
                         "turnover": np.round(rng.lognormal(3, 1.2, n), 1)})


def _value(frame: pl.DataFrame, original: pl.DataFrame, keys: list[str]) -> float:
    sec = frame.filter(pl.col("suppressed") == "secondary").select(keys)
    return float(sec.join(original, on=keys)["turnover"].sum())


def test_a_magnitude_table_gets_the_least_value_suppressed():
    rules = SensitivityRules(dominance=[(1, 70)])
    levels = pt.ProtectionLevels(rules=True)
    spec = pt.TableSpec(["region", "sector"], sums=["turnover"])
    with pt.Session(":memory:") as s:
        s.register("f", _firms())
        original = s.tabulate("f", spec).select("region", "sector", "turnover")
        best = s.suppress("f", spec, rules=rules, levels=levels, method="optimal", cost="value")
        gauss = s.suppress("f", spec, rules=rules, levels=levels, interval_protection="gauss")
    assert (best["suppressed"] == "primary").sum() > 0
    assert best["protected"].all() and gauss["protected"].all()
    assert _value(best, original, ["region", "sector"]) <= _value(gauss, original, ["region", "sector"]) + 1e-6


def test_linked_tables_in_the_global_mode_share_one_decision_per_common_cell():
    specs = [pt.TableSpec(["region", "sector"]), pt.TableSpec(["region", "size"])]
    with pt.Session(":memory:") as s:
        s.register("f", _firms())
        a, b = s.suppress("f", specs, min_frequency=4, method="optimal", cost="cells")
        with pytest.raises(NotImplementedError, match="linked='global'"):
            s.suppress("f", specs, min_frequency=4, method="optimal", linked="local")
    assert a["protected"].all() and b["protected"].all()
    common_a = a.filter(pl.col("sector_level") == 0).select("region", "suppressed")
    common_b = b.filter(pl.col("size_level") == 0).select("region", "suppressed")
    j = common_a.join(common_b, on="region")
    assert j.height == 6 and (j["suppressed"] == j["suppressed_right"]).all()
