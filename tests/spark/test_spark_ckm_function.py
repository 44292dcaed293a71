"""ckm() in Spark SQL (issue 39, item 5): after ``install_ptable`` an analyst's own
``SELECT sex, ckm(count(*), sum(rkey)) FROM t GROUP BY sex`` in the SparkSession gives the
perturbed counts of DuckDB's macro and of ``Session.cell_key`` on the same records and p-table;
literal, negative and NULL key sums, weighted counts and keys at every interval start of a
crowded p-table as on DuckDB; without a p-table no count."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest
from ckm_function_cases import CROWDED_MODULUS, crowded_ptable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spark_fixtures import engine_pair, engines_under_test

import protab as pt

N = 2000
SEED = "spark-ckm"
_rng = np.random.default_rng(3906)
RECORDS = pl.DataFrame({
    "pid": np.arange(1, N + 1) * 3,
    "sex": _rng.choice(["f", "m"], N),
    "region": _rng.choice(["r1", "r2", "r3", "r4"], N, p=[0.6, 0.3, 0.09, 0.01]),
    "age": _rng.choice([str(a) for a in range(30)], N, p=np.arange(30, 0, -1) / 465),
    "kd": _rng.integers(0, 10**8, N) / 10**8,
    "weight": _rng.uniform(0.5, 3.0, N),
})

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    MAXENT = pt.PTable.maximum_entropy(D=3, V=2, js=1)  # a row 0
    ONS = pt.PTable.from_ons(pt.PTable.maximum_entropy(D=3, V=1).to_ons(256).with_columns(
        ckey=(pl.col("ckey") + 37 * pl.col("pcv")) % 256))  # rows 1..750 with a period, 8-bit keys

DIMS = {"sex": ["sex"], "age by region": ["age", "region"]}
CASES = [("maximum entropy", "t32"), ("maximum entropy", "tdec"), ("ONS layout", "t8")]


def _prepare(s: pt.Session) -> None:
    s.register("t32", RECORDS, replace=True)
    s.add_record_keys("t32", id_column="pid", seed=SEED)
    s.register("t8", RECORDS, replace=True)
    s.add_record_keys("t8", id_column="pid", seed=SEED, bits=8)
    s.register("tdec", RECORDS, replace=True)
    s.add_record_keys("tdec", record_key_column="kd", decimals=8)


@pytest.fixture(scope="module", params=engines_under_test())
def engines(request, tmp_path_factory):
    yield from engine_pair(request.param, tmp_path_factory, _prepare)


def _install(engines, ptable: pt.PTable, **where) -> None:
    for s in engines:
        s.install_ptable(ptable, **where)


def _rows(s: pt.Session, query: str) -> list[tuple]:
    return [tuple(r) for r in s.sql(query).rows()]


@pytest.mark.parametrize(("pname", "table"), CASES)
@pytest.mark.parametrize("dname", list(DIMS))
def test_the_analysts_group_by_is_duckdbs_macro_and_cell_key(engines, pname, table, dname):
    ptable = MAXENT if pname == "maximum entropy" else ONS
    _install(engines, ptable, table=table)
    cols = ", ".join(DIMS[dname])
    query = f"SELECT {cols}, count(*), ckm(count(*), sum(rkey)) FROM {table} GROUP BY {cols} ORDER BY {cols}"
    duck, other = engines
    got = _rows(other, query)
    assert got == _rows(duck, query)
    spec = pt.TableSpec(dict.fromkeys(DIMS[dname]), margins=False, drop_empty=True)
    cell_key = duck.cell_key(table, spec, ptable, original=True).sort(DIMS[dname])
    assert got == cell_key.select(*DIMS[dname], "n", "n_pert").rows()
    assert any(r[-1] != r[-2] for r in got) or dname == "sex"  # the p-table moved some counts


def test_ckm_of_literal_keys_is_duckdbs(engines):
    """A count of 0, a NULL key sum, a negative one, one past the modulus, as on DuckDB."""
    _install(engines, MAXENT, table="t32")
    query = ("SELECT ckm(0, 17), ckm(3, NULL), ckm(3, -5), ckm(5, 12345), ckm(5, 3 * 4294967296 + 12345), "
             "ckm(9, 4294967296 + 99)")
    duck, other = engines
    got = _rows(other, query)
    assert got == _rows(duck, query) and got[0][1] == 3 and got[0][2] == 3


def test_weighted_ckm_is_duckdbs(engines):
    _install(engines, MAXENT, table="t32")
    query = ("SELECT region, ckm_weighted(count(*), sum(rkey), sum(weight)) AS w FROM t32 "
             "GROUP BY region ORDER BY region")
    duck, other = engines
    got, want = _rows(other, query), _rows(duck, query)
    assert [r[0] for r in got] == [r[0] for r in want]
    np.testing.assert_allclose([r[1] for r in got], [r[1] for r in want], rtol=1e-12)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=st.lists(st.tuples(st.integers(0, 800), st.integers(0, 2**40 - 1)), min_size=1, max_size=40))
def test_ckm_of_any_count_and_key_is_the_ptables_lookup(engines, cells):
    """ckm(n, k) equals PTable.lookup for counts and keys anywhere (keys reduced modulo 256)."""
    _install(engines, ONS, table="t8")
    n, k = (np.array(c, dtype=np.int64) for c in zip(*cells))
    values = ", ".join(f"({int(a)}, {int(b)})" for a, b in cells)
    query = f"SELECT k, n, ckm(n, k) FROM (VALUES {values}) AS c(n, k)"
    got = sorted(_rows(engines[1], query))
    want = sorted(zip(k.tolist(), n.tolist(), ONS.lookup(n, k % 256, 256).tolist()))
    assert got == want


def test_keys_at_and_beside_every_interval_start_of_a_crowded_ptable(engines):
    """Intervals one p-table unit wide beside wide ones at a 40-bit modulus (over 150 segment
    starts): ckm(n, k) equals PTable.lookup on keys at, before and after every start."""
    p, n, keys, starts = crowded_ptable()
    M = CROWDED_MODULUS
    _install(engines, p, modulus=M)
    values = ", ".join(f"({int(a)}, {int(b)})" for a, b in zip(n, keys))
    query = f"SELECT ckm(n, k) FROM (VALUES {values}) AS c(n, k) ORDER BY k"
    got = [r[0] for r in _rows(engines[1], query)]
    assert got == p.lookup(n, keys, M).tolist() == [r[0] for r in _rows(engines[0], query)]
    assert starts.size > 150 and any(g != c for g, c in zip(got, n))


def test_the_ptable_is_published_as_views(engines):
    _install(engines, MAXENT, table="t32")
    duck, other = engines
    query = "SELECT imin, imax, period, modulus FROM protab_ptable_meta"
    assert _rows(other, query) == _rows(duck, query)
    count = "SELECT count(*), sum(protab_khi - protab_klo + 1) FROM protab_ptable"
    assert _rows(other, count) == _rows(duck, count)


def test_install_without_record_keys_or_with_bad_arguments_is_refused_as_on_duckdb(engines):
    from protab.errors import InputError

    messages = []
    for s in engines:
        s.register("nokeys", RECORDS.select("sex"), replace=True)
        with pytest.raises(InputError) as info:
            s.install_ptable(MAXENT, table="nokeys")
        messages.append(str(info.value))
    assert messages[0] == messages[1] and "nokeys" in messages[0]
    other = engines[1]
    for bad in (1, 2**63):
        with pytest.raises(InputError, match="modulus"):
            other.install_ptable(MAXENT, modulus=bad)
    with pytest.raises(InputError, match="count p-table"):
        other.install_ptable(MAXENT.frame, modulus=256)
