"""Linked tables in the lighter modes (Session.suppress(linked=...), protab.suppression.linked)
against GaussSuppression 1.2.3's linked-tables vignette (tests/data/gauss_rules/levels): its
Table 1 (local), Table 3 (super-consistent) and the global run; and invariants."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from linked_vignette import LEVELS, T1, T2, reference_cells, suppressed_cells
from scipy import sparse

import protab as pt
from protab.suppression import derivable
from protab.suppression.linked import _table_rows, block_diagonal, copies_by_records


def _vignette(mode: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The vignette's tables age × eu × year and geo × year, counts 1 and 2 primary, zeros
    structural (extend0 = FALSE, no empty cells); the package's SuppressSmallCounts has no
    singletons then (they are the zeros), so neither here."""
    data = pl.read_csv(LEVELS / "input_example1_linked.csv").with_columns(pl.col("year").cast(pl.String))
    with pt.Session(":memory:") as s:
        s.register("d", data)
        return s.suppress("d", [pt.TableSpec(T1, freq="freq", drop_empty=True),
                                pt.TableSpec(T2, freq="freq", drop_empty=True)],
                          min_frequency=3, extend0=False, singleton_method="none", linked=mode)


@pytest.mark.parametrize("mode, name", [("local", "lk_vignette_local"),
                                        ("super-consistent", "lk_vignette_super_consistent")])
def test_linked_modes_reproduce_the_vignette_tables(mode, name):
    """Table 1 (local: Iceland-2014 suppressed in one table, nonEU-2014 published in the other)
    and Table 3 (super-consistent), cell for cell in both tables."""
    one, two = _vignette(mode)
    assert (one.height, two.height) == (29, 16)
    assert suppressed_cells(one, T1) == reference_cells(f"{name}__table_1", T1)
    assert suppressed_cells(two, T2) == reference_cells(f"{name}__table_2", T2)


def test_global_mode_is_the_combined_table_and_equals_the_package():
    one, two = _vignette("global")
    ref = pl.read_csv(LEVELS / "lk_vignette_global.csv", infer_schema_length=None).with_columns(
        pl.col("year").cast(pl.String))
    want = sorted(tuple(r) for r in ref.filter(pl.col("suppressed")).select("age", "geo", "year").rows())
    # the package's global table names nonEU in the geo column
    got = [(a, e, y) for a, e, y in suppressed_cells(one, T1)] + [("Total", g, y) for g, y in suppressed_cells(two, T2)]
    assert sorted(set(got)) == want


def test_local_mode_is_inconsistent_where_super_consistent_is_not():
    """Iceland × 2014 and nonEU × 2014 hold the same records: local suppresses one only,
    super-consistent treats them as one cell."""
    for mode, consistent in (("local", False), ("super-consistent", True)):
        one, two = _vignette(mode)
        a = one.filter((pl.col("age") == "Total") & (pl.col("eu") == "nonEU") & (pl.col("year") == "2014"))
        b = two.filter((pl.col("geo") == "Iceland") & (pl.col("year") == "2014"))
        assert (a["suppressed"].item() == b["suppressed"].item()) == consistent


def test_super_consistent_hides_every_primary_cell_in_the_joint_equations():
    """No primary cell is derivable from the published cells of both tables and the equality of
    their common cells (the block-diagonal system with the copies' differences published)."""
    data = pl.read_csv(LEVELS / "input_example1_linked.csv").with_columns(pl.col("year").cast(pl.String))
    specs = [pt.TableSpec(T1, freq="freq", drop_empty=True), pt.TableSpec(T2, freq="freq", drop_empty=True)]
    with pt.Session(":memory:") as s:
        s.register("d", data)
        frames = s.suppress("d", specs, min_frequency=3, extend0=False, singleton_method="none",
                            linked="super-consistent")
        combined = pt.TableSpec(["age", "eu", "geo", "year"], freq="freq", drop_empty=True,
                                formula="age*eu*year + geo*year")
        X, inner, pub = s.model_matrix("d", combined, extend0=False)
    keys = ["age", "eu", "geo", "year"]
    cells = pub.with_row_index("_c")
    members, supp = [], np.zeros(pub.height, dtype=bool)
    for f, own in zip(frames, (T1, T2)):
        j = cells.join(f.select(*own, "suppressed"), on=own, how="left")
        other = [k for k in keys if k not in own]
        j = j.filter(pl.all_horizontal(pl.col(k) == "Total" for k in other) & pl.col("suppressed").is_not_null())
        m = np.zeros(pub.height, dtype=bool)
        m[j["_c"].to_numpy()] = True
        members.append(m)
        supp[j.filter(pl.col("suppressed") != "no")["_c"].to_numpy()] = True
    members = copies_by_records(X, members)
    blocks = [(np.flatnonzero(m), *_table_rows(X.tocsc()[:, np.flatnonzero(m)], np.zeros(X.shape[0], bool)))
              for m in members]
    Xbd, orig, _, D = block_diagonal(blocks)
    full = sparse.hstack([Xbd, D], format="csc")
    mask = np.concatenate([supp[orig], np.zeros(D.shape[1], dtype=bool)])
    primary = (cells["n"] > 0) & (cells["n"] < 3)
    prim_bd = np.concatenate([primary.to_numpy()[orig], np.zeros(D.shape[1], dtype=bool)])
    assert prim_bd.any() and not derivable(full, mask)[prim_bd].any()


def test_linked_mode_arguments_are_checked():
    data = pl.DataFrame({"a": ["x", "y", "y", "z"], "b": ["p", "p", "q", "q"]})
    with pt.Session(":memory:") as s:
        s.register("t", data)
        specs = [pt.TableSpec(["a"]), pt.TableSpec(["a", "b"])]
        with pytest.raises(pt.SpecError, match="linked must be"):
            s.suppress("t", specs, min_frequency=2, linked="back-tracking")
        with pytest.raises(pt.SpecError, match="linked must be"):
            s.suppress("t", specs, min_frequency=2, linked="loose")
        with pytest.raises(pt.SpecError, match="list of TableSpecs"):
            s.suppress("t", specs[0], min_frequency=2, linked="local")
        with pytest.raises(NotImplementedError, match="interval protection"):
            s.suppress("t", specs, min_frequency=2, linked="local", interval_protection=True)
        with pytest.raises(pt.SpecError, match="extend0"):
            s.suppress("t", specs[0], min_frequency=2, extend0=False, protect_zeros=True)
