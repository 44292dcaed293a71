"""Review of the Spark engine (issue 14): inputs on which it must agree with DuckDB bit for bit.

Every comparison is exact (``check_exact=True``): the issue promises identical counts, cell keys
and perturbed values, and polars' default tolerance (rtol 1e-5) would hide a weighted count
rounded to 6 decimals. The defects a review found here (6-decimal weighted counts, ninth-decimal
weights, isfinite on Spark, numeric-looking codes, table names with spaces, unsigned columns)
are fixed; these tests keep them fixed.
"""

from __future__ import annotations

import decimal
import warnings

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from spark_fixtures import engine_pair, engines_under_test

import protab as pt
from protab.errors import ProtabError

N = 240
SEED = "spark-review"
_rng = np.random.default_rng(2614)
RECORDS = pl.DataFrame({
    "pid": np.arange(1, N + 1) * 3,
    "sex": _rng.choice(["f", "m"], N),
    "geo": _rng.choice(["Spain", "Iceland", "Portugal"], N),
    "muni": _rng.choice(["0101", "0102", "0201", "0202"], N),
    # codes that need care in SQL and in ordering
    "uni": _rng.choice(["Ålesund", "Zürich", "zz", "Århus", "北京", "a'b", 'q"r', ""], N),
    "num": _rng.choice([-5, 3, 10, 2**40], N),
    "Sex Col": _rng.choice(["a", "b"], N),
    "select": _rng.choice(["x", "y"], N),
    "we`ird": _rng.choice(["p", "q"], N),
    "nul": _rng.choice(["a", "b", None], N),
    "w_int": _rng.integers(1, 5, N),
    "w_dec": pl.Series([decimal.Decimal(f"{x:.2f}") for x in _rng.uniform(0, 9, N)]).cast(pl.Decimal(10, 2)),
    "w8": _rng.integers(1, 10**9, N) / 10**8,  # weights with 8 decimals: summed exactly as DECIMAL(38, 8)
    "w_tie": np.full(N, 1.5e-08),  # a weight with a 9th decimal 5: rounds to 8 decimals
    "w_nan": np.where(np.arange(N) % 60 == 0, np.nan, 1.0),
    "w_neg": np.where(np.arange(N) % 60 == 0, -1.5, 1.0),
    "kd15": pl.Series([decimal.Decimal(int(x)) / decimal.Decimal(10**15)
                       for x in _rng.integers(0, 10**15, N)]).cast(pl.Decimal(16, 15)),
    "odd": _rng.choice(["1d", "2", "10"], N),  # '1d' is a number to Java (Spark's cast), text to DuckDB
})
GEO = pt.Hierarchy.from_frame(pl.DataFrame({  # not a tree: EU = Europe − nonEU
    "mapsFrom": ["Spain", "Iceland", "Portugal", "Iceland", "Europe", "nonEU"],
    "mapsTo": ["Europe", "Europe", "Europe", "nonEU", "EU", "EU"],
    "sign": [1, 1, 1, 1, 1, -1],
    "level": [1, 1, 1, 1, 2, 2],
}))
MUNI = pt.Hierarchy.from_code_lengths(["0101", "0102", "0201", "0202"], [2, 2])
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    P = pt.PTable.maximum_entropy(D=3, V=2, js=1)


def _prepare(s: pt.Session) -> None:
    s.register("t", RECORDS)
    s.add_record_keys("t", id_column="pid", seed=SEED)
    s.register("td", RECORDS)
    s.add_record_keys("td", record_key_column="kd15", decimals=15, name="rkd")


@pytest.fixture(scope="module", params=engines_under_test())
def engines(request, tmp_path_factory):
    yield from engine_pair(request.param, tmp_path_factory, _prepare)


def _same(engines, fn):
    duck, sp = engines
    assert_frame_equal(fn(sp), fn(duck), check_exact=True)


def _same_error(engines, fn):
    messages = []
    for s in engines:
        with pytest.raises(ProtabError) as info:
            fn(s)
        messages.append((type(info.value).__name__, str(info.value)))
    assert messages[0] == messages[1]


# -- inputs that hold ----------------------------------------------------------------------------
HOLDS = {
    "unicode, quotes, empty code": pt.TableSpec({"uni": None, "sex": None}),
    "columns with a space, a backtick, a reserved name": pt.TableSpec({"Sex Col": None, "we`ird": None,
                                                                        "select": None}),
    "integer codes, negative and > 2^32": pt.TableSpec({"num": None, "sex": None}),
    "where with quotes": pt.TableSpec({"uni": None}, where=[("uni", "not in", ["a'b", 'q"r', ""])]),
    "hierarchy, formula, drop_empty": pt.TableSpec({"muni": MUNI, "sex": None, "num": None},
                                                   formula="muni*sex + num", drop_empty=True),
    "integer weight, non-tree": pt.TableSpec({"geo": GEO, "sex": None}, weight="w_int"),
    "decimal weight, tree": pt.TableSpec({"muni": MUNI}, weight="w_dec"),
    "8-decimal weight, tree": pt.TableSpec({"geo": None, "sex": None}, weight="w8"),
}


@pytest.mark.parametrize("name", list(HOLDS))
def test_cell_key_holds(engines, name):
    _same(engines, lambda s: s.cell_key("t", HOLDS[name], P, original=True, threshold=3))


def test_decimal_keys_of_15_digits(engines):
    """Key sums beyond BIGINT per record (10^15 × records): summed as DECIMAL(38, 0) on Spark."""
    spec = pt.TableSpec({"muni": MUNI, "sex": None})
    _same(engines, lambda s: s.tabulate("td", spec, cell_keys=True))
    _same(engines, lambda s: s.perturb_inner("td", spec, P, original=True))


def test_same_errors_that_hold(engines):
    _same_error(engines, lambda s: s.cell_key("t", pt.TableSpec({"sex": None}, weight="w_neg"), P))
    _same_error(engines, lambda s: s.tabulate("t", pt.TableSpec({"nul": None})))
    # null_code equal to a code of a column with NULLs too: refused, not merged into one cell
    _same_error(engines, lambda s: s.cell_key("t", pt.TableSpec({"nul": None, "sex": None}, null_code="a"), P))
    _same_error(engines, lambda s: s.tabulate("t", pt.TableSpec(
        {"muni": pt.Hierarchy.from_code_lengths(["0101"], [2, 2])})))


# -- defects ------------------------------------------------------------------------------------
def test_weighted_nontree_keeps_8_decimals(engines):
    _same(engines, lambda s: s.cell_key("t", pt.TableSpec({"geo": GEO, "sex": None}, weight="w8"), P,
                                        original=True))


def test_weight_with_a_ninth_decimal(engines):
    _same(engines, lambda s: s.cell_key("t", pt.TableSpec({"sex": None}, weight="w_tie"), P, original=True))


def test_nan_weight_same_error(engines):
    _same_error(engines, lambda s: s.cell_key("t", pt.TableSpec({"sex": None}, weight="w_nan"), P))


def test_code_order_of_numeric_looking_codes(engines):
    _same(engines, lambda s: s.tabulate("t", pt.TableSpec({"odd": None}), cell_keys=True))


def test_table_name_with_a_space(engines):
    def run(s):
        s.register("my table", RECORDS.select("pid", "sex"), replace=True)
        s.add_record_keys("my table", id_column="pid", seed=SEED, replace=True)
        return s.cell_key("my table", pt.TableSpec({"sex": None}), P, original=True)

    _same(engines, run)


def test_unsigned_integer_dimension(engines):
    frame = RECORDS.select("pid", "sex", pl.col("w_int").cast(pl.UInt32).alias("u"))

    def run(s):
        s.register("tu", frame, replace=True)
        s.add_record_keys("tu", id_column="pid", seed=SEED, replace=True)
        return s.cell_key("tu", pt.TableSpec({"u": None, "sex": None}), P, original=True)

    _same(engines, run)
