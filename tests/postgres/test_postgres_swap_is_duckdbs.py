"""Record swapping on the PostgreSQL engine (issue 39, item 4): the same swapped records, log
and summary as DuckDB's swap of the same data, spec and seed (every random choice is a keyed
hash: sha256 of the same text, the same logarithm), the record keys kept, the cell key method
on the swapped records alike; temporary swaps kept or discarded as on DuckDB."""

from __future__ import annotations

import warnings

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from postgres_fixtures import duckdb_and_postgres
from swap_engine_cases import SEED, SPECS, swap_population

import protab as pt
from protab.errors import InputError, SpecError
from protab.swapping import discard_swap, persist_swap


@pytest.fixture(scope="module")
def engines(pg_dsn):
    def prepare(s: pt.Session) -> None:
        s.register("persons", swap_population(), replace=True)
        s.add_record_keys("persons", id_column="pid", seed=SEED, bits=32, name="rk")

    yield from duckdb_and_postgres(pg_dsn, prepare)


def _swap(s: pt.Session, spec: str, out: str, **options) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pt.SwapRateWarning)
        return s.swap("persons", SPECS[spec], seed="swap-seed", out=out, log=f"{out}_log", replace=True, **options)


def _read(s: pt.Session, name: str) -> pl.DataFrame:
    frame = s.sql(f"SELECT * FROM {name}")
    return frame.sort(frame.columns)


@pytest.mark.parametrize("name", list(SPECS))
def test_postgres_swaps_the_same_households_as_duckdb(engines, name):
    duck, pg = engines
    d_sum, p_sum = (_swap(s, name, f"out_{name}") for s in engines)
    assert d_sum["swapped_households"] > 0 and p_sum == d_sum
    d_out, p_out = _read(duck, f"out_{name}"), _read(pg, f"out_{name}")
    # the record keys are UINTEGER in DuckDB, BIGINT in PostgreSQL (no unsigned types): same values
    assert_frame_equal(p_out, d_out.with_columns(pl.col("rk").cast(pl.Int64)))
    assert_frame_equal(_read(pg, f"out_{name}_log"), _read(duck, f"out_{name}_log"))
    assert (d_out.sort("pid")["muni"] != swap_population().sort("pid")["muni"]).sum() > 0


def test_the_cell_key_method_on_swapped_records_is_duckdbs(engines):
    for s in engines:
        _swap(s, "risk_and_rate", "swapped")
        assert s.record_key("swapped") == ("rk", 2**32)  # the swapped records keep their keys
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = pt.PTable.maximum_entropy(D=3, V=1.0)
    spec = pt.TableSpec({"muni": None, "sex": None})
    duck, pg = (s.cell_key("swapped", spec, p) for s in engines)
    assert_frame_equal(pg, duck)


def test_a_temporary_swap_is_kept_or_discarded_as_on_duckdb(engines):
    for s in engines:
        _swap(s, "carry_along_capped", "kept", temporary=True)
        persist_swap(s.engine, "kept", "kept_log", replace=True)
        _swap(s, "carry_along_capped", "dropped", temporary=True)
        discard_swap(s.engine, "dropped", "dropped_log")
    duck, pg = engines
    assert_frame_equal(_read(pg, "kept_log"), _read(duck, "kept_log"))
    assert {"kept", "kept_log"} <= set(pg.tables()) and not {"dropped", "dropped_log"} & set(pg.tables())
    with pytest.raises(InputError, match="no temporary table named 'kept'"):
        persist_swap(pg.engine, "kept", "kept_log")


def test_a_temporary_swap_over_a_kept_one_needs_replace_to_be_kept(engines):
    _, pg = engines
    _swap(pg, "risk_and_rate", "twice", temporary=False)
    before = _read(pg, "twice")
    _swap(pg, "carry_along_capped", "twice", temporary=True)
    with pytest.raises(InputError, match="a relation named 'twice' exists already; pass replace=True"):
        persist_swap(pg.engine, "twice", "twice_log")
    discard_swap(pg.engine, "twice", "twice_log")
    assert_frame_equal(_read(pg, "twice"), before)  # the kept table is back in view


def test_a_float_household_column_is_refused_before_any_table(engines):
    _, pg = engines
    pg.register("floats", swap_population().with_columns(pl.col("hid").cast(pl.Float64)), replace=True)
    before = pg.tables()
    with pytest.raises(SpecError, match="household column 'hid' of type"):
        pg.swap("floats", SPECS["risk_and_rate"], seed="s", out="f_out")
    assert pg.tables() == before


def test_a_kept_swap_under_the_name_of_a_pending_temporary_one_replaces_the_schemas_table(engines):
    """A swap written while a temporary one of the same name is pending replaces the schema's
    table, not the temporary one; discarding the temporary one shows it, as on DuckDB."""
    results = []
    for s in engines:
        _swap(s, "risk_and_rate", "pending", temporary=False)
        _swap(s, "carry_along_capped", "pending", temporary=True)
        _swap(s, "risk_and_rate", "pending", temporary=False)  # over the kept one, beside the pending one
        discard_swap(s.engine, "pending", "pending_log")
        results.append(_read(s, "pending"))
    duck, pg = results
    assert_frame_equal(pg, duck.with_columns(pl.col("rk").cast(pl.Int64)))
