"""The PostgreSQL engine answers count tables as DuckDB does, bit for bit (issue 39, item 4):
the same frames (codes, order, levels, counts, weighted counts, cell keys, perturbed values)
compared exactly, on a database whose default collation is ICU's en-US (not byte order)."""

from __future__ import annotations

import decimal
import warnings

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from postgres_fixtures import duckdb_and_postgres
from spark_fixtures import age_hierarchy, geo_hierarchy

import protab as pt
from protab.errors import ProtabError

N = 300
SEED = "postgres-review"
_rng = np.random.default_rng(3907)
RECORDS = pl.DataFrame({
    "pid": np.arange(1, N + 1) * 7,
    "sex": _rng.choice(["f", "m"], N),
    "geo": _rng.choice(["Spain", "Iceland", "Portugal"], N),
    "age": _rng.choice(["0", "1", "2", "3"], N),
    "muni": _rng.choice(["0101", "0102", "0201", "0202"], N),
    # codes whose order differs between byte order and a language's collation
    "uni": _rng.choice(["Ålesund", "Zürich", "zz", "Århus", "北京", "a'b", 'q"r', "", "B", "_x"], N),
    "num": _rng.choice([-5, 3, 10, 2**40], N),
    "nul": pl.Series([["a", "b", None][k] for k in _rng.integers(0, 3, N)], dtype=pl.String),
    "w_int": _rng.integers(1, 5, N),
    "w_dec": pl.Series([decimal.Decimal(f"{x:.2f}") for x in _rng.uniform(0, 9, N)]).cast(pl.Decimal(10, 2)),
    "w8": _rng.integers(1, 10**9, N) / 10**8,
    "w_tie": np.full(N, 1.5e-08),  # a ninth decimal 5: rounds to 8 decimals as DuckDB's cast does
    "w_big": _rng.uniform(0, 1e7, N),  # doubles with more digits than 8 decimals keep
    "kd": pl.Series([decimal.Decimal(int(x)) / decimal.Decimal(10**12)
                     for x in _rng.integers(0, 10**12, N)]).cast(pl.Decimal(13, 12)),
})
MUNI = pt.Hierarchy.from_code_lengths(["0101", "0102", "0201", "0202"], [2, 2])
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    P = pt.PTable.maximum_entropy(D=3, V=2, js=1)

SPECS = {
    "flat crossing with margins": pt.TableSpec({"sex": None, "geo": None}),
    "codes in byte order, quotes, empty code": pt.TableSpec({"uni": None, "sex": None}),
    "integer codes": pt.TableSpec({"num": None}),
    "code-length hierarchy": pt.TableSpec({"muni": MUNI, "sex": None}),
    "non-tree hierarchy": pt.TableSpec({"geo": geo_hierarchy(), "sex": None}),
    "tree with leaves at different depths": pt.TableSpec({"age": age_hierarchy(), "geo": None}),
    "three hierarchies": pt.TableSpec({"muni": MUNI, "geo": geo_hierarchy(), "age": age_hierarchy()}),
    "formula and drop_empty": pt.TableSpec({"muni": MUNI, "sex": None, "num": None},
                                           formula="muni*sex + num", drop_empty=True),
    "no margins": pt.TableSpec({"sex": None, "geo": None}, margins=False),
    "where filter": pt.TableSpec({"uni": None}, where=[("uni", "not in", ["a'b", 'q"r', ""]),
                                                        ("sex", "in", ["f"])]),
    "NULL codes with null_code": pt.TableSpec({"nul": None, "sex": None}, null_code="missing"),
    "integer weight": pt.TableSpec({"geo": geo_hierarchy(), "sex": None}, weight="w_int"),
    "decimal weight": pt.TableSpec({"muni": MUNI}, weight="w_dec"),
    "8-decimal weight": pt.TableSpec({"geo": None, "sex": None}, weight="w8"),
    "weight with a ninth decimal 5": pt.TableSpec({"sex": None}, weight="w_tie"),
    "double weight, non-tree": pt.TableSpec({"geo": geo_hierarchy(), "age": None}, weight="w_big"),
}


def _prepare(s: pt.Session) -> None:
    s.register("t", RECORDS)
    s.add_record_keys("t", id_column="pid", seed=SEED)
    s.register("td", RECORDS)
    s.add_record_keys("td", record_key_column="kd", decimals=12, name="rkd")


@pytest.fixture(scope="module")
def engines(pg_dsn):
    yield from duckdb_and_postgres(pg_dsn, _prepare)


def _same(engines, fn):
    duck, pg = engines
    assert_frame_equal(fn(pg), fn(duck), check_exact=True)


@pytest.mark.parametrize("name", list(SPECS))
def test_cell_key_of_count_tables_is_duckdbs(engines, name):
    _same(engines, lambda s: s.cell_key("t", SPECS[name], P, original=True, threshold=3))


@pytest.mark.parametrize("name", ["code-length hierarchy", "non-tree hierarchy", "8-decimal weight"])
def test_tabulate_with_cell_keys_is_duckdbs(engines, name):
    _same(engines, lambda s: s.tabulate("t", SPECS[name], cell_keys=True))


def test_decimal_record_keys_give_duckdbs_cells(engines):
    spec = pt.TableSpec({"muni": MUNI, "sex": None})
    _same(engines, lambda s: s.tabulate("td", spec, cell_keys=True))
    _same(engines, lambda s: s.perturb_inner("td", spec, P, original=True))


def test_the_record_keys_are_duckdbs(engines):
    _same(engines, lambda s: s.sql("SELECT pid, CAST(rkey AS BIGINT) AS rkey FROM t ORDER BY pid"))


def test_a_sum_past_38_digits_fails_alike(engines):
    """A weight whose sum overflows DECIMAL(38, 8) is the same protab error on both engines."""
    frame = RECORDS.select("pid", "sex", pl.lit(9e29).alias("huge"))
    messages = []
    for s in engines:
        s.register("th", frame, replace=True)
        s.add_record_keys("th", id_column="pid", seed=SEED, replace=True)
        with pytest.raises(ProtabError) as info:
            s.cell_key("th", pt.TableSpec({"sex": None}, weight="huge"), P)
        messages.append(type(info.value).__name__)
    assert messages[0] == messages[1]


@pytest.mark.parametrize("linked", [False, True])
def test_count_suppression_is_duckdbs(engines, linked):
    """Primary cells by a minimum frequency, secondary ones by elimination (in Python) on the
    cells the engine counted; linked tables too."""
    specs = [SPECS["code-length hierarchy"], pt.TableSpec({"muni": MUNI, "geo": None})] if linked else \
        SPECS["three hierarchies"]
    duck, pg = engines
    got, expected = pg.suppress("t", specs, min_frequency=8), duck.suppress("t", specs, min_frequency=8)
    for a, b in zip(got, expected) if linked else [(got, expected)]:
        assert_frame_equal(a, b, check_exact=True)


def test_sums_through_a_non_tree_without_top_k_are_duckdbs(engines):
    """Magnitude sums (no top-k lists) through the coefficients of a non-tree hierarchy."""
    _same(engines, lambda s: s.tabulate("t", pt.TableSpec({"geo": geo_hierarchy(), "sex": None},
                                                          sums=["w_big", "w_dec"], weight="w_int")))


def test_a_parquet_file_is_copied_in_with_duckdbs_types(engines, tmp_path):
    path = tmp_path / "persons.parquet"
    RECORDS.write_parquet(path)
    for s in engines:
        s.register("tp", str(path), replace=True)
        s.add_record_keys("tp", id_column="pid", seed=SEED, replace=True)
    _same(engines, lambda s: s.cell_key("tp", SPECS["decimal weight"], P, original=True))
