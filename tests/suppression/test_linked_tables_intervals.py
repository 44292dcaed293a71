"""The attacker's intervals of linked tables per mode (Session.suppress(linked=..., audit=True),
protab.suppression.linked.linked_intervals): on the joint system for super-consistent (and
global), per table for local and consistent; against GaussSuppression 1.2.3's vignette Table 4
(tests/data/gauss_rules/levels: its first-round intervals lo_1/up_1 and final lo/up)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

import protab as pt
from protab.suppression import audit_pattern
from protab.suppression.linked import copies_by_records, linked_intervals

LEVELS = Path(__file__).resolve().parents[1] / "data" / "gauss_rules" / "levels"
T1, T2 = ["age", "eu", "year"], ["geo", "year"]
KEYS = ["age", "eu", "geo", "year"]
T4 = "lk_vignette_t4_super_consistent_range4_lpSolve__table_{}"


def _data() -> pl.DataFrame:
    return pl.read_csv(LEVELS / "input_example1_linked.csv").with_columns(pl.col("year").cast(pl.String))


def _specs() -> list[pt.TableSpec]:
    return [pt.TableSpec(T1, freq="freq", drop_empty=True), pt.TableSpec(T2, freq="freq", drop_empty=True)]


def _run(mode: str, **kw) -> list[pl.DataFrame]:
    with pt.Session(":memory:") as s:
        s.register("d", _data())
        return s.suppress("d", _specs(), min_frequency=3, extend0=False, singleton_method="none", linked=mode,
                          audit=True, **kw)


def _ref(t: int) -> pl.DataFrame:
    keys = (T1, T2)[t - 1]
    return pl.read_csv(LEVELS / f"{T4.format(t)}.csv", infer_schema_length=None).with_columns(
        pl.col(k).cast(pl.String) for k in keys)


def test_super_consistent_intervals_equal_the_package_first_round():
    """Table 3's pattern audited on the joint system: the package's lo_1/up_1 of every primary
    cell of both tables (Table 4 before rangeMin's extra cells)."""
    frames = _run("super-consistent")
    for t, (frame, keys) in enumerate(zip(frames, (T1, T2)), start=1):
        ref = _ref(t).filter(pl.col("primary")).select(*keys, "lo_1", "up_1")
        got = frame.filter(pl.col("suppressed") == "primary").select(*keys, "lo", "up", "interval_system")
        j = ref.join(got, on=keys, how="full", coalesce=True)
        assert j.height == ref.height > 0
        assert (j["lo"] == j["lo_1"]).all() and (j["up"] == j["up_1"]).all()
        assert (j["interval_system"] == "joint").all()


def _system(frames: list[pl.DataFrame]):
    """The combined X, the tables' cells (with copies by records) and their patterns."""
    with pt.Session(":memory:") as s:
        s.register("d", _data())
        X, _, pub = s.model_matrix("d", pt.TableSpec(KEYS, freq="freq", drop_empty=True,
                                                     formula="age*eu*year + geo*year"), extend0=False)
    cells = pub.with_row_index("_c")
    members, supp = [], np.zeros((2, pub.height), dtype=bool)
    for t, (f, own) in enumerate(zip(frames, (T1, T2))):
        other = [k for k in KEYS if k not in own]
        if f["suppressed"].dtype == pl.String:
            f = f.with_columns(pl.col("suppressed") != "no")
        j = cells.filter(pl.all_horizontal(pl.col(k) == "Total" for k in other)).join(
            f.select(*own, "suppressed"), on=own)
        m = np.zeros(pub.height, dtype=bool)
        m[j["_c"].to_numpy()] = True
        members.append(m)
        supp[t, j["_c"].to_numpy()] = j["suppressed"].to_numpy()
    members = copies_by_records(X, members)
    # a copy under other codes (the same column of X) takes the decision of its cell
    Xd = X.toarray()
    for t in range(2):
        for c in np.flatnonzero(members[t]):
            same = np.flatnonzero((Xd == Xd[:, [c]]).all(axis=0))
            supp[t, c] = supp[t, same].any()
    return X, cells, members, supp


def test_joint_intervals_of_the_final_pattern_equal_the_package():
    """Table 4's final pattern (with rangeMin = 4's extra cells): the joint system's intervals
    of the primary cells are the package's lo/up."""
    X, cells, members, supp = _system([_ref(1), _ref(2)])
    z = cells["n"].to_numpy().astype(float)
    primary = (z > 0) & (z < 3)
    lo, up, _ = linked_intervals(X, z, supp, members, mode="super-consistent", primary=primary)
    for t, keys in ((1, T1), (2, T2)):
        ref = _ref(t).filter(pl.col("primary"))
        other = [k for k in KEYS if k not in keys]
        c = cells.filter(pl.all_horizontal(pl.col(k) == "Total" for k in other)).join(ref, on=keys)
        idx = c["_c"].to_numpy()
        assert idx.size == ref.height
        np.testing.assert_array_equal(lo[t - 1, idx], c["lo"].to_numpy())
        np.testing.assert_array_equal(up[t - 1, idx], c["up"].to_numpy())


def test_per_table_intervals_are_the_audit_of_each_table_alone():
    """Local mode: table 2's intervals equal the audit of table 2 by itself (its own model
    matrix, built separately), and say "table"."""
    one, two = _run("local")
    assert (one["interval_system"] == "table").all() and (two["interval_system"] == "table").all()
    with pt.Session(":memory:") as s:
        s.register("d", _data())
        X, _, pub = s.model_matrix("d", _specs()[1], extend0=False)
    j = pub.with_row_index("_c").join(two.select(*T2, "suppressed", "lo", "up"), on=T2)
    z = j["n"].to_numpy().astype(float)
    supp = (j["suppressed"] != "no").to_numpy()
    ref = audit_pattern(X[:, j["_c"].to_numpy()], z, supp, primary=(z > 0) & (z < 3))
    got = j.with_row_index("cell").join(ref.select(pl.col("cell").cast(pl.UInt32), "lo", "up"), on="cell",
                                        suffix="_alone")
    assert got.height == int(supp.sum()) > 0
    assert (got["lo"] == got["lo_alone"]).all() and (got["up"] == got["up_alone"]).all()


@pytest.mark.parametrize("mode", ["consistent", "super-consistent"])
def test_per_table_intervals_contain_the_joint_ones(mode):
    """The same pattern: one table's equations are fewer than both tables' and the copies'
    equality, so every per-table interval contains the joint one, and contains the value."""
    X, cells, members, supp = _system(_run(mode))
    z = cells["n"].to_numpy().astype(float)
    primary = (z > 0) & (z < 3)
    lo_t, up_t, _ = linked_intervals(X, z, supp, members, mode="consistent", primary=primary)
    lo_j, up_j, _ = linked_intervals(X, z, supp, members, mode="super-consistent", primary=primary)
    hit = supp & ~np.isnan(lo_j)
    assert hit.sum() >= 9 and (~np.isnan(lo_t[hit])).all()
    assert (lo_t[hit] <= lo_j[hit] + 1e-9).all() and (up_t[hit] >= up_j[hit] - 1e-9).all()
    zz = np.broadcast_to(z, supp.shape)
    assert (lo_t[hit] <= zz[hit]).all() and (up_t[hit] >= zz[hit]).all()


def test_linked_levels_mark_an_unmet_range_unprotected_in_every_mode():
    """protection_range = 5: Portugal x 2014 ([0, 3] jointly) is not protected in the joint
    modes; the global mode's intervals come from the combined table ("joint")."""
    seen = {}
    for mode in ("global", "super-consistent", "consistent", "local"):
        _one, two = _run(mode, protection_range=5.0)
        row = two.filter((pl.col("geo") == "Portugal") & (pl.col("year") == "2014"))
        assert row["interval_system"].item() == ("table" if mode in ("local", "consistent") else "joint")
        assert row["up"].item() - row["lo"].item() >= 3
        assert row["protected"].item() == (row["up"].item() - row["lo"].item() >= 5)
        seen[mode] = row["protected"].item()
    assert seen["super-consistent"] is False and seen["global"] is False


def test_interval_protection_of_lighter_linked_modes_is_refused():
    with pt.Session(":memory:") as s:
        s.register("d", _data())
        with pytest.raises(NotImplementedError, match="interval protection"):
            s.suppress("d", _specs(), min_frequency=3, extend0=False, singleton_method="none", linked="local",
                       interval_protection=True)
