"""tabulate: one scan to inner cells, roll-up through hierarchies, formulas, errors."""

from __future__ import annotations

import itertools

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import protab as pt


def brute_force(records: pl.DataFrame, spec: pt.TableSpec, value: str | None = None) -> dict:
    """Cell → count (or value sum) by checking every record against every cell's codes."""
    code_sets = []
    for d in spec.dimensions:
        if d.hierarchy is None:
            leaves = sorted(set(records[d.column].cast(pl.String).to_list()))
            sets = {d.root: set(leaves)} | {c: {c} for c in leaves}
        else:
            rel = pl.from_arrow(d.hierarchy.relation())
            sets = {a: set(g["leaf"].to_list()) for (a,), g in rel.group_by("ancestor")}
        code_sets.append(sets)
    cols = [records[d.column].cast(pl.String).to_list() for d in spec.dimensions]
    vals = records[value].to_list() if value else [1] * records.height
    out = {}
    for cell in itertools.product(*[list(s) for s in code_sets]):
        below = [d.column for d, c in zip(spec.dimensions, cell) if c != d.root]
        if not spec.is_published(below):
            continue
        total = 0
        for r in range(records.height):
            if all(cols[k][r] in code_sets[k][cell[k]] for k in range(len(cell))):
                total += vals[r]
        out[cell] = total
    return out


def as_dict(frame: pl.DataFrame, spec: pt.TableSpec, value: str = "n") -> dict:
    keys = frame.select(spec.columns).rows()
    return dict(zip(keys, frame[value].to_list()))


def test_full_crossing_matches_brute_force(session, persons, h_muni):
    session.register("persons", persons)
    spec = pt.TableSpec({"municipality": h_muni, "sex": None, "age": None})
    out = session.tabulate("persons", spec)
    expected = brute_force(persons, spec)
    assert as_dict(out, spec) == expected
    # every combination of codes, each exactly once: (5 + 2 + 1) × (2 + 1) × (3 + 1)
    assert out.height == 8 * 3 * 4 == len(set(out.select(spec.columns).rows()))
    assert out.filter(pl.col("municipality_level") == 0)["municipality"].unique().to_list() == ["Total"]
    grand = out.filter((pl.col("municipality") == "Total") & (pl.col("sex") == "Total") & (pl.col("age") == "Total"))
    assert grand["n"].to_list() == [persons.height]


def test_levels_per_dimension(session, persons, h_muni):
    session.register("persons", persons)
    out = session.tabulate("persons", pt.TableSpec({"municipality": h_muni, "sex": None}))
    levels = dict(zip(out["municipality"], out["municipality_level"]))
    assert levels["Total"] == 0 and levels["R1"] == 1 and levels["R2003"] == 2
    assert set(zip(out["sex"], out["sex_level"])) == {("Total", 0), ("F", 1), ("M", 1)}


def test_formula_publishes_crossings_with_margins_only(session, persons, h_muni):
    session.register("persons", persons)
    spec = pt.TableSpec({"municipality": h_muni, "sex": None, "age": None}, formula="municipality*sex + municipality*age")
    out = session.tabulate("persons", spec)
    assert as_dict(out, spec) == brute_force(persons, spec)
    # no cell has both sex and age below their totals
    assert out.filter((pl.col("sex_level") > 0) & (pl.col("age_level") > 0)).height == 0
    # 8×3 + 8×4 − 8 (the municipality margin counted in both)
    assert out.height == 8 * 3 + 8 * 4 - 8


def test_crossings_list_equals_formula(session, persons, h_muni):
    session.register("persons", persons)
    a = session.tabulate("persons", pt.TableSpec({"municipality": h_muni, "sex": None, "age": None},
                                                 formula="~ municipality*sex + age"))
    b = session.tabulate("persons", pt.TableSpec({"municipality": h_muni, "sex": None, "age": None},
                                                 crossings=[("municipality", "sex"), ("age",)]))
    assert a.equals(b)


def test_weights_and_sums(session, persons, h_muni):
    session.register("persons", persons)
    spec = pt.TableSpec({"municipality": h_muni, "sex": None}, weight="weight", sums=["income"])
    out = session.tabulate("persons", spec)
    w = brute_force(persons, spec, "weight")
    inc = brute_force(persons, spec, "income")
    got_w, got_inc = as_dict(out, spec, "w"), as_dict(out, spec, "income")
    assert got_w.keys() == w.keys()
    for k in w:
        assert got_w[k] == pytest.approx(w[k], abs=1e-9)
        assert got_inc[k] == pytest.approx(inc[k], abs=1e-6)


def test_drop_empty_leaves_out_empty_cells(session, persons, h_muni):
    session.register("persons", persons)
    dims = {"municipality": h_muni, "sex": None, "age": None}
    full = session.tabulate("persons", pt.TableSpec(dims))
    sparse = session.tabulate("persons", pt.TableSpec(dims, drop_empty=True))
    assert (full["n"] == 0).sum() > 0
    assert sparse.height == (full["n"] > 0).sum()
    assert sparse["n"].min() > 0


def test_hierarchy_leaves_absent_from_data_are_zero_cells(session, persons):
    session.register("persons", persons)
    h = pt.Hierarchy.from_code_lengths(["R1001", "R1002", "R2001", "R2002", "R2003", "R3001"], [2, 3])
    out = session.tabulate("persons", pt.TableSpec({"municipality": h}))
    assert dict(zip(out["municipality"], out["n"]))["R3"] == 0
    assert dict(zip(out["municipality"], out["n"]))["R3001"] == 0


def test_fixed_code_list_for_flat_dimension(session, persons):
    session.register("persons", persons)
    out = session.tabulate("persons", pt.TableSpec({"sex": ["F", "M", "X"]}))
    assert dict(zip(out["sex"], out["n"]))["X"] == 0
    with pytest.raises(pt.HierarchyError, match="M"):
        session.tabulate("persons", pt.TableSpec({"sex": ["F"]}))


def test_integer_codes_sort_numerically(session):
    session.register("t", pl.DataFrame({"age": [10, 2, 2, 1]}))
    out = session.tabulate("t", pt.TableSpec({"age": None}))
    assert out["age"].to_list() == ["Total", "1", "2", "10"]
    assert out["n"].to_list() == [4, 1, 2, 1]


def test_nulls_are_an_error_or_an_explicit_category(session):
    session.register("t", pl.DataFrame({"sex": ["F", None, "M", None]}))
    with pytest.raises(pt.InputError, match=r"'sex'.*'t'.*2 record"):
        session.tabulate("t", pt.TableSpec({"sex": None}))
    out = session.tabulate("t", pt.TableSpec({"sex": None}, null_code="Unknown"))
    assert dict(zip(out["sex"], out["n"])) == {"Total": 4, "F": 1, "M": 1, "Unknown": 2}


def test_codes_missing_from_hierarchy_are_listed(session, persons):
    session.register("persons", persons)
    h = pt.Hierarchy.from_code_lengths(["R1001", "R1002", "R2001"], [2, 3])
    with pytest.raises(pt.HierarchyError) as err:
        session.tabulate("persons", pt.TableSpec({"municipality": h}))
    msg = str(err.value)
    assert "R2002" in msg and "R2003" in msg and "2 in all" in msg and "persons" in msg


def test_unknown_column_and_table(session, persons):
    session.register("persons", persons)
    with pytest.raises(pt.InputError, match="no dimension column 'region'"):
        session.tabulate("persons", pt.TableSpec({"region": None}))
    with pytest.raises(pt.InputError, match="no table named 'people'"):
        session.tabulate("people", pt.TableSpec({"sex": None}))
    with pytest.raises(pt.InputError, match="must be numeric"):
        session.tabulate("persons", pt.TableSpec({"sex": None}, weight="age"))


def test_margin_code_clash_in_flat_dimension(session):
    session.register("t", pl.DataFrame({"x": ["Total", "a"]}))
    with pytest.raises(pt.SpecError, match="margin"):
        session.tabulate("t", pt.TableSpec({"x": None}))
    out = session.tabulate("t", pt.TableSpec({"x": None}, total="All"))
    assert out["x"].to_list() == ["All", "Total", "a"]  # the margin first, then codes as text


def test_sql_injection_in_names_is_harmless(session, persons):
    session.register("persons", persons)
    evil = 'sex" FROM persons; DROP TABLE persons; --'
    with pytest.raises(pt.InputError, match="no dimension column"):
        session.tabulate("persons", pt.TableSpec({evil: None}))
    with pytest.raises(pt.InputError):
        session.tabulate('persons"; DROP TABLE persons; --', pt.TableSpec({"sex": None}))
    assert session.exists("persons")
    # a column whose name really contains quotes and SQL works as a dimension
    session.register("odd", pl.DataFrame({evil: ["a", "b", "a"]}))
    out = session.tabulate("odd", pt.TableSpec({evil: None}))
    assert dict(zip(out[evil], out["n"])) == {"Total": 3, "a": 2, "b": 1}


def test_bad_specs():
    with pytest.raises(pt.SpecError, match="not dimensions"):
        pt.TableSpec({"a": None, "b": None}, formula="a*c")
    with pytest.raises(pt.SpecError, match="cannot read"):
        pt.TableSpec({"a": None, "b": None}, formula="a**b")
    with pytest.raises(pt.SpecError, match="either formula or crossings"):
        pt.TableSpec({"a": None}, formula="a", crossings=[("a",)])
    with pytest.raises(pt.SpecError):
        pt.TableSpec({})


def test_no_temporary_tables_left_behind(session, persons, h_muni):
    session.register("persons", persons)

    def tables() -> set[str]:
        return {r[0] for r in session.con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}

    before = tables()
    session.tabulate("persons", pt.TableSpec({"municipality": h_muni, "sex": None}))
    with pytest.raises(pt.HierarchyError):
        session.tabulate("persons", pt.TableSpec({"municipality": pt.Hierarchy.flat(["R1001"])}))
    # only the code and bridge tables of the hierarchy used, kept for the session's next tables
    kept = {name for pair in session._hierarchies.values() for name in pair}
    assert len(kept) == 2
    assert tables() == before | kept
    session.tabulate("persons", pt.TableSpec({"municipality": h_muni, "age": None}))
    assert tables() == before | kept  # the same hierarchy again: reused, nothing new


# -- property: margins are sums of their children, at every level --------------------------
@st.composite
def tree(draw, prefix: str):
    """A random hierarchy: codes p0…pN with random parents among earlier codes (or the root)."""
    n = draw(st.integers(2, 9))
    parents = [None] + [draw(st.integers(0, k - 1)) if k > 1 and draw(st.booleans()) else None for k in range(1, n)]
    pairs = [("Total" if p is None else f"{prefix}{p}", f"{prefix}{k}") for k, p in enumerate(parents)]
    return pt.Hierarchy.from_parent_child(pairs, root="Total")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ha=tree("a"), hb=tree("b"), data=st.data(), formula=st.sampled_from([None, "a + b", "a*b"]))
def test_margins_equal_sums_of_children(ha, hb, data, formula):
    la, lb = ha.leaves, hb.leaves
    recs = data.draw(st.lists(st.tuples(st.sampled_from(la), st.sampled_from(lb)), min_size=1, max_size=40))
    frame = pl.DataFrame(recs, schema=["a", "b"], orient="row")
    spec = pt.TableSpec({"a": ha, "b": hb}, formula=formula)
    with pt.Session(":memory:") as s:
        s.register("t", frame)
        out = s.tabulate("t", spec)
    cells = as_dict(out, spec)
    assert len(cells) == out.height  # each published cell exactly once
    assert cells == brute_force(frame, spec)
    # additivity: a cell at an internal code equals the sum of the cells at its children
    for (ca, cb), n in cells.items():
        for h, pos in ((ha, 0), (hb, 1)):
            code = (ca, cb)[pos]
            kids = h.children_of(code)
            if not kids:
                continue
            child_cells = [(k, cb) if pos == 0 else (ca, k) for k in kids]
            if spec.full:
                assert all(c in cells for c in child_cells)
            if all(c in cells for c in child_cells):  # the formula may leave the children out
                assert n == sum(cells[c] for c in child_cells)


def test_aggregated_input_with_freq_column(session, persons, h_muni):
    session.register("persons", persons)
    spec = pt.TableSpec({"municipality": h_muni, "sex": None}, weight="weight")
    inner = session.inner_cells("persons", spec)
    session.register("inner", inner)
    again = session.tabulate("inner", pt.TableSpec({"municipality": h_muni, "sex": None}, freq="n"))
    direct = session.tabulate("persons", spec)
    assert again["n"].to_list() == direct["n"].to_list()
    assert inner["n"].sum() == persons.height
    with pytest.raises(pt.InputError, match="frequencies must be integers"):
        session.tabulate("inner", pt.TableSpec({"sex": None}, freq="w"))


def test_null_code_that_also_occurs_in_the_data_is_refused(session):
    # the code's records and the missing ones would merge into one cell (more cases in
    # tests/tables/test_null_code_clash.py)
    frame = pl.DataFrame({"a": ["U", None, "x", "x"], "b": ["p", "p", "q", "q"]})
    session.register("t", frame)
    with pytest.raises(pt.SpecError, match="null_code 'U' is also a code of column 'a' of table 't'"):
        session.tabulate("t", pt.TableSpec({"a": None, "b": None}, null_code="U"))


def test_empty_table_is_a_clear_error(session):
    session.register("t", pl.DataFrame({"a": ["x"], "b": ["y"]}).clear())
    with pytest.raises(pt.InputError, match="'t' has no records"):
        session.tabulate("t", pt.TableSpec({"a": None, "b": None}))


def test_null_weights_are_a_clear_error(session):
    frame = pl.DataFrame({"a": ["x", "x", "y"], "w": [1.5, None, 2.0]})
    session.register("t", frame)
    with pytest.raises(pt.InputError, match=r"weight column 'w' of table 't' is missing \(NULL\) in 1 record"):
        session.tabulate("t", pt.TableSpec({"a": None}, weight="w"))


def test_negative_frequencies_are_a_clear_error(session):
    session.register("t", pl.DataFrame({"a": ["x", "y", "y"], "f": [1, -5, 2]}))
    with pytest.raises(pt.InputError, match="frequency column 'f' of table 't' is negative in 1 row"):
        session.tabulate("t", pt.TableSpec({"a": None}, freq="f"))


def test_bad_structural_zeros_and_spec_are_clear_errors():
    data = pl.DataFrame({"a": ["x", "y"], "n": [1, 2]})
    with pytest.raises(pt.InputError, match="structural zeros: expected a table"):
        pt.model_matrix(data, pt.TableSpec({"a": None}), structural_zeros="x")
    with pytest.raises(pt.SpecError, match="expected a protab.TableSpec"):
        pt.model_matrix(data, "a")
