"""Linked tables over nested dimensions (municipality × sex and county × sex, every
municipality in one county): the audit's inner cells are the municipalities' (the county a
grouping of them, found in the records), not municipality × county × sex; the intervals are
those of the crossed audit told that the impossible combinations are empty, and no wider than
the crossed audit told nothing."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
import pytest

import protab as pt
from protab.table import union_spec

MUNIS, PER_COUNTY = 12, 4


@pytest.fixture(scope="module")
def linked(tmp_path_factory):
    path = tmp_path_factory.mktemp("nested") / "d.duckdb"
    rng = np.random.default_rng(11)
    n = 400
    muni = rng.integers(0, MUNIS, n)
    persons = pl.DataFrame({"muni": [f"m{m:02d}" for m in muni], "county": [f"c{m // PER_COUNTY}" for m in muni],
                            "sex": rng.choice(["f", "m"], n), "pid": np.arange(n)})
    con = duckdb.connect(str(path))
    con.register("p", persons.to_arrow())
    con.execute("CREATE TABLE persons AS SELECT * FROM p")
    con.close()
    with pt.Session(str(path)) as s:
        s.add_record_keys("persons", "pid", seed="test seed")
    p = pt.PTable.maximum_entropy(D=3, V=1)
    a, b = pt.TableSpec({"muni": None, "sex": None}), pt.TableSpec({"county": None, "sex": None})
    with pt.Session(str(path), read_only=True) as s:
        tables = {"a": s.cell_key("persons", a, p), "b": s.cell_key("persons", b, p)}
        spec = union_spec([a, b])
        nested = s.model_matrix("persons", spec, extend0="all", nested=True)
        crossed = s.model_matrix("persons", spec, extend0="all")
        codes = [pl.DataFrame({"muni": [f"m{m:02d}" for m in range(MUNIS)]}),
                 pl.DataFrame({"county": [f"c{c}" for c in range(MUNIS // PER_COUNTY)]}),
                 pl.DataFrame({"sex": ["f", "m"]})]
        all_cells = codes[0].join(codes[1], how="cross").join(codes[2], how="cross")
        empty = all_cells.filter(pl.col("county") != pl.format("c{}", (pl.col("muni").str.slice(1).cast(pl.Int64)
                                                                        // PER_COUNTY)))
        told = s.model_matrix("persons", spec, extend0=True, structural_zeros=empty)
    return tables, nested, crossed, told, pt.audit.ptable_noise(p)


def _audit(tables, parts, noise):
    X, inner, published = parts
    out = pt.audit.feasibility(tables, X, published, inner, **noise)
    return out.filter(pl.col("table").is_not_null()).sort("table", "muni", "county", "sex")


def test_the_inner_cells_are_the_finer_dimensions(linked):
    _, (X, inner, _), (Xc, _, _), _, _ = linked
    assert X.shape[0] == MUNIS * 2 == inner.height
    assert Xc.shape[0] == MUNIS * (MUNIS // PER_COUNTY) * 2
    pairs = inner.select("muni", "county").unique()
    assert pairs.height == MUNIS  # one county per municipality


def test_intervals_equal_the_crossed_audit_told_the_empty_combinations(linked):
    tables, nested, crossed, told, noise = linked
    got = _audit(tables, nested, noise)
    want = _audit(tables, told, noise)
    assert got.select("table", "muni", "county", "sex", "lo", "up").equals(
        want.select("table", "muni", "county", "sex", "lo", "up"))
    naive = _audit(tables, crossed, noise)
    both = got.join(naive, on=["table", "muni", "county", "sex"], suffix="_naive", nulls_equal=True)
    assert both.height == got.height
    assert (both["lo"] >= both["lo_naive"]).all()
    assert (both["up"].fill_null(10**9) <= both["up_naive"].fill_null(10**9)).all()


def test_dimensions_a_table_crosses_are_never_taken_as_nested(tmp_path):
    # every municipality of these records holds one sex only, by chance: sex is a function of
    # municipality in the records, but table a crosses the two, so its empty cells stay
    path = tmp_path / "d.duckdb"
    persons = pl.DataFrame({"muni": ["m1", "m1", "m2", "m3"], "county": ["c1", "c1", "c1", "c2"],
                            "sex": ["f", "f", "m", "f"]})
    con = duckdb.connect(str(path))
    con.register("p", persons.to_arrow())
    con.execute("CREATE TABLE persons AS SELECT * FROM p")
    con.close()
    spec = union_spec([pt.TableSpec({"muni": None, "sex": None}), pt.TableSpec({"county": None, "sex": None})])
    with pt.Session(str(path), read_only=True) as s:
        X, inner, _ = s.model_matrix("persons", spec, extend0="all", nested=True)
    assert X.shape[0] == inner.height == 3 * 2  # every municipality × both sexes, counties by grouping
    assert inner.select("muni", "county").unique().height == 3
