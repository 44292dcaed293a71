"""The "consistent" mode of linked tables (Session.suppress(linked="consistent"),
protab.suppression._linked_consistent) against GaussSuppression 1.2.3's linked-tables vignette
(tests/data/gauss_rules/levels): its Table 2 by SuppressLinkedTables and by the formula list;
and the mode's invariants on random linked tables."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from linked_vignette import LEVELS, T1, T2, reference_cells, suppressed_cells
from scipy import sparse

import protab as pt
from protab.suppression import derivable
from protab.suppression._linked_consistent import consistent_elimination
from protab.suppression.linked import _table_rows, block_diagonal, copies_by_records, gauss_linked


def _vignette(mode: str = "consistent", **kw) -> list[pl.DataFrame]:
    data = pl.read_csv(LEVELS / "input_example1_linked.csv").with_columns(pl.col("year").cast(pl.String))
    with pt.Session(":memory:") as s:
        s.register("d", data)
        return s.suppress("d", [pt.TableSpec(T1, freq="freq", drop_empty=True),
                                pt.TableSpec(T2, freq="freq", drop_empty=True)],
                          min_frequency=3, extend0=False, singleton_method="none", linked=mode, **kw)


def test_consistent_mode_reproduces_the_vignette_table_2():
    """SuppressLinkedTables(linkedGauss = "consistent"): 8 cells of each table, cell for cell."""
    one, two = _vignette()
    assert suppressed_cells(one, T1) == reference_cells("lk_vignette_consistent__table_1", T1)
    assert suppressed_cells(two, T2) == reference_cells("lk_vignette_consistent__table_2", T2)
    assert len(suppressed_cells(one, T1)) == 8 and len(suppressed_cells(two, T2)) == 8


def test_consistent_mode_equals_the_formula_list_run_of_the_package():
    """SuppressSmallCounts(formula = list(...), linkedGauss = "consistent"), one global order."""
    one, two = _vignette()
    ref = pl.read_csv(LEVELS / "lk_vignette_formulas_consistent.csv", infer_schema_length=None).with_columns(
        pl.col("year").cast(pl.String))
    want = sorted(tuple(r) for r in ref.filter(pl.col("suppressed")).select("age", "geo", "year").rows())
    got = [(a, e, y) for a, e, y in suppressed_cells(one, T1)] + [("Total", g, y) for g, y in suppressed_cells(two, T2)]
    assert sorted(set(got)) == want


def test_consistent_mode_suppresses_a_common_cell_in_every_table_or_none():
    """Total x year of both tables and nonEU x year = Iceland x year (the same records)."""
    one, two = _vignette()
    a = one.filter((pl.col("age") == "Total") & (pl.col("eu") != "EU")).select("eu", "year", "suppressed")
    b = two.filter(pl.col("geo").is_in(["Total", "Iceland"])).select("geo", "year", "suppressed")
    a = a.with_columns(pl.col("eu").replace({"nonEU": "Iceland"}).alias("geo")).drop("eu")
    j = a.join(b, on=["geo", "year"], suffix="_2")
    assert j.height == 8
    assert ((j["suppressed"] == "no") == (j["suppressed_2"] == "no")).all()


def _random_linked(seed: int):
    rng = np.random.default_rng(seed)
    n = 60
    data = pl.DataFrame({"a": rng.choice(list("pqrs"), n), "b": rng.choice(list("uvw"), n),
                         "c": rng.choice(list("xyz"), n)})
    return data


@pytest.mark.parametrize("seed", range(6))
def test_consistent_mode_leaves_no_primary_derivable_and_groups_common_cells(seed):
    """Random tables a x b and b x c: every common cell has one decision, and no primary cell is
    derivable from the tables side by side (the exact rank test on the block-diagonal system)."""
    data = _random_linked(seed)
    specs = [pt.TableSpec(["a", "b"]), pt.TableSpec(["b", "c"])]
    with pt.Session(":memory:") as s:
        s.register("d", data)
        one, two = s.suppress("d", specs, min_frequency=4, singleton_method="none", linked="consistent")
        combined = pt.TableSpec(["a", "b", "c"], formula="a*b + b*c")
        X, _, pub = s.model_matrix("d", combined)
    common = one.filter(pl.col("a") == "Total").join(two.filter(pl.col("c") == "Total"), on="b", suffix="_2")
    assert ((common["suppressed"] == "no") == (common["suppressed_2"] == "no")).all()
    cells = pub.with_row_index("_c")
    members, masks = [], []
    for f, own, other in ((one, ["a", "b"], "c"), (two, ["b", "c"], "a")):
        j = cells.filter(pl.col(f"{other}_level") == 0).join(f.select(*own, "suppressed"), on=own)
        m = np.zeros(pub.height, bool)
        m[j["_c"].to_numpy()] = True
        members.append(m)
        masks.append(dict(zip(j["_c"].to_list(), (j["suppressed"] != "no").to_list())))
    members = copies_by_records(X, members)
    W = X.tocsc()
    blocks = [(np.flatnonzero(m), *_table_rows(W[:, np.flatnonzero(m)], np.zeros(X.shape[0], bool)))
              for m in members]
    Xbd, orig, tab, _ = block_diagonal(blocks)
    supp = np.array([masks[t].get(int(o), masks[1 - t].get(int(o))) for t, o in zip(tab, orig)])
    primary = ((pub["n"] > 0) & (pub["n"] < 4)).to_numpy()[orig]
    assert primary.any() and supp[~primary].any()
    assert not derivable(Xbd, supp)[primary].any()


def test_consistent_elimination_publishes_a_group_only_as_a_whole():
    """Two one-way tables of the same three cells side by side: publishing a copy of a cell
    in one table only would be inconsistent; its group is published or suppressed together."""
    t = sparse.csc_matrix(np.array([[1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 0, 1]]))
    X = sparse.csc_matrix(sparse.block_diag([t, t]))
    group = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    protect = np.zeros(8, bool)
    protect[[1]] = True
    order = np.array([0, 4, 2, 6, 3, 7])
    got = consistent_elimination(X, protect, np.zeros(8, bool), order, group)
    assert got[[1, 5]].all()  # the primary and its copy
    assert got[2] == got[6] and got[3] == got[7] and got[0] == got[4]
    assert got[2:4].sum() == 1  # one more cell protects a in each table


def test_consistent_mode_refuses_singleton_methods():
    X = sparse.csc_matrix(np.eye(3, dtype=np.int64))
    with pytest.raises(NotImplementedError, match="singleton"):
        gauss_linked(X, np.ones(3), np.array([True, False, False]), [np.ones(3, bool)], mode="consistent",
                     candidates=np.arange(3), singleton=np.ones(3, bool), singleton_method="anySum")


def test_consistent_mode_refuses_tables_past_its_dense_limit(monkeypatch):
    """The residuals are dense: past the limit a SpecError names the size and the other modes."""
    import protab.suppression._linked_consistent as lc

    monkeypatch.setattr(lc, "_MAX_ENTRIES", 50)
    with pytest.raises(pt.SpecError, match="super-consistent"):
        _vignette()
