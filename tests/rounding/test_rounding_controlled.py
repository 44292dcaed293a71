"""protab.rounding.controlled: the handbook table, brute-force optimality on small tables,
hierarchies, partitioning, infeasible 3-way tables and existence intervals."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import protab as pt
from protab import rounding as rnd

DATA = Path(__file__).resolve().parents[1] / "data"
from refdata import ROUNDING_HANDBOOK as HANDBOOK  # noqa: E402
from refdata import handbook_inner  # noqa: E402


def check_controlled(res: rnd.ControlledResult, spec: pt.TableSpec, base: int, steps: int) -> None:
    """Additive, multiples of the base, within `steps` further multiples of the original."""
    inner, pub = res.inner, res.published
    # additive: the published cells are the roll-up of the rounded inner cells
    _, _, re = pt.model_matrix(inner.select([*spec.columns, "rounded"]), spec, freq="rounded")
    j = pub.join(re, on=spec.columns, suffix="_re")
    assert j.height == pub.height
    np.testing.assert_array_equal(j["rounded"].to_numpy(), j["n_re"].to_numpy())
    for frame in (inner, pub):
        n, a = frame["n"].to_numpy(), frame["rounded"].to_numpy()
        assert np.all(a % base == 0) and np.all(a >= 0)
        lo = base * (n // base - steps)
        hi = base * (-(-n // base) + steps)
        assert np.all((a >= lo) & (a <= hi))
    assert res.objective == int(np.abs(pub["rounded"].to_numpy() - pub["n"].to_numpy()).sum())
    low, up = rnd.existence_intervals(pub["rounded"].to_numpy(), base, steps)
    assert pub["lower"].to_list() == low.tolist() and pub["upper"].to_list() == up.tolist()
    n = pub["n"].to_numpy()
    assert np.all((low <= n) & (n <= up))  # the original lies in its existence interval


def brute_force(inner: pl.DataFrame, spec: pt.TableSpec, base: int) -> int | None:
    """Smallest Σ|A − z| over all zero-restricted roundings of the inner cells (None: none)."""
    X, inn, pub = pt.model_matrix(inner, spec)
    y, z = inn["n"].to_numpy(), pub["n"].to_numpy()
    free = np.flatnonzero(y % base)
    best = None
    low = y - y % base
    for bits in itertools.product([0, base], repeat=free.size):
        a = low.copy()
        a[free] += np.array(bits, dtype=int)
        A = np.rint(X.T @ a).astype(int)
        ok = np.all((A >= z - z % base) & (A <= z - z % base + base * (z % base > 0)))
        if ok:
            cost = int(np.abs(A - z).sum())
            best = cost if best is None else min(best, cost)
    return best


def test_handbook_controlled_rounding():
    b = HANDBOOK["base"]
    spec = pt.TableSpec({"area": None, "sex": None})
    res = rnd.controlled(handbook_inner(), spec, b)
    check_controlled(res, spec, b, 0)
    assert res.status == "optimal" and res.bound is not None
    # the handbook's own controlled rounding, scored the same way: ours is no worse
    orig = np.array(HANDBOOK["original"])
    theirs = np.array(HANDBOOK["one_controlled_rounding"])
    assert np.array_equal(theirs[:3, :2].sum(axis=1), theirs[:3, 2])  # it is additive
    assert np.array_equal(theirs[:3].sum(axis=0), theirs[3])
    handbook_cost = int(np.abs(theirs - orig).sum())
    assert res.objective <= handbook_cost
    # and both are the same size of table: 3×2 inner + 3 + 2 + 1 margins
    assert res.published.height == orig.size
    assert res.objective == brute_force(handbook_inner(), spec, b)


def test_existence_intervals_follow_methods():
    low, up = rnd.existence_intervals([0, 5, 10], 5, 0)
    assert low.tolist() == [0, 1, 6] and up.tolist() == [4, 9, 14]
    # K steps: docs/methods.md's [0, (K+1)b − 1] for 0 < a < (K+1)b is too narrow (z = 14 may
    # round to a = 5 with one step: adjacent multiples 10, 15, one more each way 5, 20)
    low, up = rnd.existence_intervals([0, 5, 10, 15], 5, 1)
    assert low.tolist() == [0, 0, 1, 6] and up.tolist() == [9, 14, 19, 24]
    assert low[1] <= 14 <= up[1]


@st.composite
def small_tables(draw):
    """2- and 3-way tables of at most 12 inner cells (brute force: at most 2^12 roundings)."""
    nd = draw(st.integers(2, 3))
    sizes = [draw(st.integers(2, 3)) for _ in range(nd)]
    if nd == 3:
        sizes[1] = sizes[2] = 2
    dims = [f"d{k}" for k in range(nd)]
    cells = list(itertools.product(*[[f"c{j}" for j in range(s)] for s in sizes]))
    values = draw(st.lists(st.integers(0, 12), min_size=len(cells), max_size=len(cells)))
    frame = pl.DataFrame([(*c, v) for c, v in zip(cells, values)], schema=[*dims, "n"], orient="row")
    return frame, pt.TableSpec({d: None for d in dims})


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(small_tables(), st.sampled_from([2, 3, 5]))
def test_controlled_is_optimal_against_brute_force(table, base):
    frame, spec = table
    best = brute_force(frame, spec, base)
    if best is None:  # no zero-restricted rounding exists: the error, and one step more solves it
        with pytest.raises(rnd.RoundingError, match="steps=1"):
            rnd.controlled(frame, spec, base)
        res = rnd.controlled(frame, spec, base, steps=1)
        check_controlled(res, spec, base, 1)
    else:
        res = rnd.controlled(frame, spec, base)
        check_controlled(res, spec, base, 0)
        assert res.status == "optimal"
        assert res.objective == best


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(small_tables(), st.sampled_from([3, 5]), st.integers(1, 2))
def test_controlled_k_steps(table, base, steps):
    frame, spec = table
    res = rnd.controlled(frame, spec, base, steps=steps)
    check_controlled(res, spec, base, steps)
    # more freedom never costs more than zero restriction
    if brute_force(frame, spec, base) is not None:
        assert res.objective <= rnd.controlled(frame, spec, base).objective


def test_zero_restricted_3way_table_without_solution():
    # a 2×2×2 table for which no zero-restricted controlled rounding to base 2 exists
    # (brute force over all 2^k roundings below); one step more each way solves it
    values = [3, 2, 1, 1, 3, 2, 2, 1]
    cells = list(itertools.product(["a0", "a1"], ["b0", "b1"], ["c0", "c1"]))
    frame = pl.DataFrame([(*c, v) for c, v in zip(cells, values)], schema=["a", "b", "c", "n"], orient="row")
    spec = pt.TableSpec({"a": None, "b": None, "c": None})
    assert brute_force(frame, spec, 2) is None
    with pytest.raises(pt.ProtabError, match="steps=1"):
        rnd.controlled(frame, spec, 2)
    res = rnd.controlled(frame, spec, 2, steps=1)
    check_controlled(res, spec, 2, 1)
    assert res.status == "optimal"


def test_controlled_hierarchical_2_and_3_dimensions(persons, h_muni):
    inner = persons.group_by("municipality", "sex", "age").agg(pl.len().alias("n"))
    spec2 = pt.TableSpec({"municipality": h_muni, "sex": None})
    inner2 = persons.group_by("municipality", "sex").agg(pl.len().alias("n"))
    res2 = rnd.controlled(inner2, spec2, 3)
    check_controlled(res2, spec2, 3, 0)
    spec3 = pt.TableSpec({"municipality": h_muni, "sex": None, "age": None})
    res3 = rnd.controlled(inner, spec3, 3, steps=1)
    check_controlled(res3, spec3, 3, 1)
    assert res3.status == "optimal" and res3.mip_gap <= 1e-6 + 1e-9


def test_controlled_partitioned_by_hierarchy_and_by_artificial_blocks(persons, h_muni):
    inner = persons.group_by("municipality", "sex", "age").agg(pl.len().alias("n"))
    spec = pt.TableSpec({"municipality": h_muni, "sex": None, "age": None})
    whole = rnd.controlled(inner, spec, 2, steps=1)
    part = rnd.controlled(inner, spec, 2, steps=1, partition="municipality")
    check_controlled(part, spec, 2, 1)
    assert part.blocks == 2 and part.status == "feasible" and part.bound is None
    assert part.objective >= whole.objective  # the whole problem's optimum is a lower bound
    flat = pt.TableSpec({"age": None, "sex": None, "municipality": None})
    part2 = rnd.controlled(inner, flat, 2, steps=1, partition="municipality", partition_blocks=2)
    check_controlled(part2, flat, 2, 1)
    assert part2.blocks == 2


def test_controlled_first_feasible_and_formula():
    spec = pt.TableSpec({"area": None, "sex": None})
    res = rnd.controlled(handbook_inner(), spec, 5, stop="first_feasible")
    check_controlled(res, spec, 5, 0)
    inner = handbook_inner().with_columns(pl.lit("x").alias("k"))
    spec_f = pt.TableSpec({"area": None, "sex": None, "k": None}, formula="area*sex + k")
    check_controlled(rnd.controlled(inner, spec_f, 5), spec_f, 5, 0)


def random_3way(seed: int = 0, shape: tuple[int, int, int] = (6, 5, 4)) -> tuple[pl.DataFrame, pt.TableSpec]:
    """A 120-cell 3-way table: large enough that HiGHS' first rounding is not its best."""
    rng = np.random.default_rng(seed)
    cells = list(itertools.product(*[[f"c{j}" for j in range(s)] for s in shape]))
    values = rng.integers(0, 30, len(cells))
    frame = pl.DataFrame([(*c, int(v)) for c, v in zip(cells, values)], schema=["a", "b", "c", "n"], orient="row")
    return frame, pt.TableSpec({"a": None, "b": None, "c": None})


def test_stop_first_feasible_keeps_an_unproven_rounding():
    frame, spec = random_3way()
    best = rnd.controlled(frame, spec, 5, steps=1)
    first = rnd.controlled(frame, spec, 5, steps=1, stop="first_feasible")
    check_controlled(first, spec, 5, 1)
    assert best.status == "optimal" and best.mip_gap <= 1e-6
    # the first rounding found is valid but worse, and reported as not proven optimal
    assert first.status == "feasible" and first.objective > best.objective and first.mip_gap > 0.1


def test_mip_rel_gap_stops_the_search_at_that_gap():
    frame, spec = random_3way()
    best = rnd.controlled(frame, spec, 5, steps=1)
    loose = rnd.controlled(frame, spec, 5, steps=1, mip_rel_gap=0.9)
    check_controlled(loose, spec, 5, 1)
    # the search stops at the first rounding proven within 90% of the bound: worse, unproven
    assert loose.status == "feasible" and loose.objective > best.objective
    assert 0 < loose.mip_gap <= 0.9
    assert loose.bound is not None and loose.objective - loose.bound >= 1
    with pytest.raises(pt.ProtabError, match="mip_rel_gap"):
        rnd.controlled(frame, spec, 5, mip_rel_gap=2)


def test_controlled_bad_input():
    spec = pt.TableSpec({"area": None, "sex": None})
    with pytest.raises(pt.ProtabError, match="base"):
        rnd.controlled(handbook_inner(), spec, 0)
    with pytest.raises(pt.ProtabError, match="steps"):
        rnd.controlled(handbook_inner(), spec, 5, steps=-1)
    with pytest.raises(pt.ProtabError, match="negative"):
        rnd.controlled(handbook_inner().with_columns(pl.col("n") - 2), spec, 5)
    with pytest.raises(pt.ProtabError, match="fractions"):
        rnd.controlled(handbook_inner().with_columns(pl.col("n") + 0.5), spec, 5)
    with pytest.raises(pt.ProtabError, match="region"):
        rnd.controlled(handbook_inner(), pt.TableSpec({"region": None}), 5)
    with pytest.raises(pt.ProtabError, match="partition"):
        rnd.controlled(handbook_inner(), spec, 5, partition="region")
    with pytest.raises(pt.ProtabError, match="time_limit"):
        rnd.controlled(handbook_inner(), spec, 5, time_limit=0)


def test_brute_force_examples_include_tables_without_zero_restricted_solution():
    # guards the hypothesis test above: its "no solution" branch is reachable
    cells = list(itertools.product(["a0", "a1"], ["b0", "b1"], ["c0", "c1"]))
    frame = pl.DataFrame([(*c, v) for c, v in zip(cells, [1, 3, 4, 3, 4, 3, 3, 1])], schema=["d0", "d1", "d2", "n"], orient="row")
    assert brute_force(frame, pt.TableSpec({"d0": None, "d1": None, "d2": None}), 2) is None
