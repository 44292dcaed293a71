"""The roll-up's two forms on DuckDB give the same tables: the rows after a level-by-level step
read where they lie (a union of SELECTs, ``Engine.union_pieces``) or written out as one common
table expression per step (the form Spark gets)."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import protab as pt
from protab.engines import DuckDBEngine


@st.composite
def level_tree(draw, prefix: str):
    """A tree whose leaves all sit on one level (1 to 3 levels below the root): the
    level-by-level roll-up."""
    depth = draw(st.integers(1, 3))
    level = ["Total"]
    pairs = []
    for d in range(depth):
        below = []
        for parent in level:
            for j in range(draw(st.integers(1, 3))):
                child = f"{prefix}{d}_{len(pairs)}_{j}"
                pairs.append((parent, child))
                below.append(child)
        level = below
    return pt.Hierarchy.from_parent_child(pairs, root="Total")


@st.composite
def uneven_tree(draw, prefix: str):
    """Leaves on different levels: the bridge roll-up, between level-by-level steps."""
    n = draw(st.integers(3, 7))
    parents = [None] + [draw(st.integers(0, k - 1)) if draw(st.booleans()) else None for k in range(1, n)]
    return pt.Hierarchy.from_parent_child(
        [("Total" if p is None else f"{prefix}{p}", f"{prefix}{k}") for k, p in enumerate(parents)], root="Total")


def both_forms(monkeypatch: pytest.MonkeyPatch, run) -> tuple[pl.DataFrame, pl.DataFrame]:
    outs = []
    for pieces in (True, False):
        monkeypatch.setattr(DuckDBEngine, "union_pieces", pieces)
        outs.append(run())
    return outs[0], outs[1]


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ha=level_tree("a"), hb=uneven_tree("b"), hc=level_tree("c"), data=st.data(),
       formula=st.sampled_from([None, "a*b + c", "a*c + b*c", "a + b + c"]), drop=st.booleans())
def test_pieces_and_one_cte_per_step_agree(monkeypatch, ha, hb, hc, data, formula, drop):
    n = data.draw(st.integers(1, 60))
    rows = [(data.draw(st.sampled_from(ha.leaves)), data.draw(st.sampled_from(hb.leaves)),
             data.draw(st.sampled_from(hc.leaves)), data.draw(st.sampled_from(["f", "m"])),
             data.draw(st.integers(-5, 50)), i) for i in range(n)]
    frame = pl.DataFrame(rows, schema=["a", "b", "c", "sex", "x", "pid"], orient="row")
    dims = {"a": ha, "b": hb, "c": hc}
    if formula is None:
        dims["sex"] = None
    spec = pt.TableSpec(dims, formula=formula, drop_empty=drop)
    sums = pt.TableSpec(dims, formula=formula, drop_empty=drop, weight="x", sums=["x"])
    p = pt.PTable.maximum_entropy(D=5, V=3, js=2)
    with pt.Session(":memory:", progress=False) as s:
        s.register("t", frame.with_columns(pl.col("x").abs().alias("x")))
        s.add_record_keys("t", id_column="pid", seed="pieces")
        new, old = both_forms(monkeypatch, lambda: s.cell_key("t", spec, p, original=True, threshold=2))
        assert new.equals(old)
        assert new.height > 0
        new, old = both_forms(monkeypatch, lambda: s.tabulate("t", sums, cell_keys=True))
        assert new.equals(old)


def test_a_spec_of_level_trees_is_read_in_pieces(session, monkeypatch):
    """The levels of a uniform tree are SELECTs of the step's sums, not one CTE per step."""
    from protab import rollup as _rollup

    h = pt.Hierarchy.from_parent_child([("Total", "A"), ("Total", "B"), ("A", "A1"), ("B", "B1")])
    session.register("t", pl.DataFrame({"g": ["A1", "B1", "B1"], "sex": ["f", "m", "f"]}))
    spec = pt.TableSpec({"g": h, "sex": None})
    texts = []
    real = _rollup.TableRun._rollup_ctes

    def spy(self, *a, **k):
        out = real(self, *a, **k)
        texts.append(out[0])
        return out

    monkeypatch.setattr(_rollup.TableRun, "_rollup_ctes", spy)
    for pieces in (True, False):
        monkeypatch.setattr(DuckDBEngine, "union_pieces", pieces)
        session.tabulate("t", spec)
    assert "_step0 AS" not in texts[0] and "_step0 AS" in texts[1]
