"""Session.key_sums: counts and key sums per combination of codes give every count table of
those codes byte for byte as the records do (the cell key is the sum of record keys modulo
the modulus, and sums of residues are residues of sums)."""

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import protab as pt
from protab.errors import InputError, SpecError

P = pt.PTable.maximum_entropy(D=3, V=1)
ONS = pt.PTable.maximum_entropy(D=2, V=0.5)


def _population(s, n, keys):
    """n records: region > municipality (with NULLs), sex, age 0..9, a weight and an income."""
    s.con.execute(
        "CREATE OR REPLACE TABLE p AS SELECT i AS id, ['N', 'S', 'E'][i % 3 + 1] AS region, "
        "CASE WHEN i % 17 = 0 THEN NULL ELSE ['N', 'S', 'E'][i % 3 + 1] || (i // 3 % 4) END AS municipality, "
        "['1', '2'][CAST(hash(i) % 2 AS INTEGER) + 1] AS sex, CAST(hash(i, 7) % 10 AS INTEGER) AS age, "
        "1.5 AS w, CAST(i % 100 AS DOUBLE) AS income FROM range(?) t(i)",
        [n],
    )
    s.add_record_keys("p", id_column="id", seed="key-sums-test", **keys)


KEYS = [{}, {"bits": 8}, {"decimals": 5}]


@pytest.mark.parametrize("keys", KEYS, ids=["bits32", "ons8", "decimal5"])
def test_every_count_table_equals_the_records(keys):
    with pt.Session(":memory:", progress=False) as s:
        _population(s, 4000, keys)
        ks = s.key_sums("p", ["region", "municipality", "sex", "age"])
        assert s.sql(f'SELECT count(*) AS n FROM "{ks}"')["n"][0] < 4000 / 4  # fewer rows than records
        h = pt.Hierarchy.from_parent_child(
            pl.DataFrame({"parent": ["Total"] * 3 + [r for r in "NSE" for _ in range(4)] + ["Total"],
                          "child": list("NSE") + [f"{r}{m}" for r in "NSE" for m in range(4)] + ["Unknown"]}))
        specs = [
            pt.TableSpec({"region": None, "sex": None}),
            pt.TableSpec({"municipality": h, "sex": None, "age": None}, formula="municipality*sex + municipality*age",
                         null_code="Unknown"),
            pt.TableSpec({"age": None}, where=[("region", "in", ["N"]), ("sex", "not in", ["2"])]),
            pt.TableSpec({"municipality": h, "age": None}, null_code="Unknown", drop_empty=True,
                         where=[("age", "in", [1, 2, 3])]),
        ]
        for spec in specs:
            assert s.cell_key(ks, spec, P, original=True).equals(s.cell_key("p", spec, P, original=True))
            assert s.cell_key(ks, spec, ONS, threshold=3).equals(s.cell_key("p", spec, ONS, threshold=3))
            assert s.tabulate(ks, spec, cell_keys=True).equals(s.tabulate("p", spec, cell_keys=True))
        X1, inner1, pub1 = s.model_matrix(ks, specs[1])
        X2, inner2, pub2 = s.model_matrix("p", specs[1])
        assert (X1 != X2).nnz == 0 and inner1.equals(inner2) and pub1.equals(pub2)


@pytest.mark.slow
@settings(max_examples=25)
@given(
    n=st.integers(1, 300),
    dims=st.lists(st.sampled_from(["region", "sex", "age"]), min_size=1, max_size=3, unique=True),
    keep=st.sampled_from(["N", "S", "E"]),
    keys=st.sampled_from(KEYS),
)
def test_property_cell_keys_and_counts_equal(n, dims, keep, keys):
    """Any flat table of the kept columns, filtered or not, on any number of records."""
    with pt.Session(":memory:", progress=False) as s:
        _population(s, n, keys)
        ks = s.key_sums("p", ["region", "sex", "age"])
        for spec in (pt.TableSpec(dict.fromkeys(dims)),
                     pt.TableSpec(dict.fromkeys(dims), where=[("region", "not in", [keep])], drop_empty=True)):
            try:
                want = s.tabulate("p", spec, cell_keys=True)
            except InputError as exc:  # e.g. no record passes the filter: the same error from the key sums
                with pytest.raises(type(exc), match="no record"):
                    s.tabulate(ks, spec, cell_keys=True)
                continue
            assert s.tabulate(ks, spec, cell_keys=True).equals(want)


def test_refusals_and_lifecycle():
    with pt.Session(":memory:", progress=False) as s:
        _population(s, 200, {})
        ks = s.key_sums("p", ["region", "sex"], name="cells")
        assert ks == "cells" and s.exists("cells")
        for spec in (pt.TableSpec({"sex": None}, weight="w"), pt.TableSpec({"sex": None}, sums=["income"])):
            with pytest.raises(SpecError, match="'cells' holds record counts and key sums per cell"):
                s.tabulate(ks, spec)
        with pytest.raises(SpecError, match="record keys, which are secret"):
            s.tabulate(ks, pt.TableSpec({"protab_key_sum": None}))
        with pytest.raises(InputError, match="'age'"):  # not kept: not a column of the key sums
            s.tabulate(ks, pt.TableSpec({"age": None}))
        with pytest.raises(SpecError, match="cannot replace 'p' itself"):
            s.key_sums("p", ["sex"], name="p")
        s.con.execute("CREATE TABLE other AS SELECT 1 AS a")
        with pytest.raises(SpecError, match="'other' exists already"):
            s.key_sums("p", ["sex"], name="other")
        with pytest.raises(SpecError, match="name a column twice"):
            s.key_sums("p", ["sex", "sex"])
        with pytest.raises(SpecError, match="non-empty table name"):
            s.key_sums("p", ["sex"], name="")
        with pytest.raises(SpecError, match="neither a dimension nor a filter"):
            s.tabulate(ks, pt.TableSpec({"sex": None}, where=[("protab_records", "in", [1])]))
        with pytest.raises(SpecError, match="record key"):
            s.key_sums("p", [s.record_key("p")[0]])
        with pytest.raises(SpecError, match="at least one column"):
            s.key_sums("p", [])
        s.con.execute("CREATE TABLE nokeys AS SELECT 1 AS a")
        with pytest.raises(InputError, match="no record keys"):
            s.key_sums("nokeys", ["a"])
        again = s.key_sums("p", ["sex"], name="cells")  # made anew
        assert s.columns(again) == {"sex": "VARCHAR", "protab_records": "BIGINT", "protab_key_sum": "BIGINT"}
        s.drop_key_sums("cells")
        assert not s.exists("cells")
        with pytest.raises(SpecError, match="not a key-sum table"):
            s.drop_key_sums("p")
