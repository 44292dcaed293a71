"""Session.key_sums(..., sums=...): magnitude tables over the kept parts of the sums (exact
DECIMAL sums, non-zero contributors and their key sum, the top and bottom lists, the checks)
equal the same tables over the records byte for byte — perturbed sums and means, sensitivity
rules, tabulate with top lists — and what the parts cannot give is refused."""

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import protab as pt
from protab.errors import InputError, SpecError
from protab.magnitude import MagnitudeCKM, SensitivityRules
from protab.ptable.magnitude_ptable import MagnitudePTable

COUNTS = pt.PTable.maximum_entropy(D=3, V=1.0)
ALL = MagnitudePTable.maximum_entropy(10, 3, step=2, icat=[1, 5, 10], optim=[4, 1, 1])
SMALL = MagnitudePTable.maximum_entropy(5, 1, step=5, icat=[1, 3, 5], optim=[4, 1, 1], type="small_cells")
MAGNITUDES = [
    MagnitudeCKM(ALL, fp=100, p=(0.25, 0.05), q=3, epsilon=[1, 0.5, 0.2]),
    MagnitudeCKM(ALL, fp=50, small_cells=SMALL, epsilon=[1, 0.6]),
    MagnitudeCKM(ALL, fp=100, variant="range", small_cells=SMALL),
    MagnitudeCKM(ALL, fp=100, variant="sum", same_key=False, zero_keys=True),
]


def _frame(n: int, seed: int) -> pl.DataFrame:
    """n records: region, sex, age band; income ≥ 0 with zeros, a signed balance with NULLs."""
    rng = np.random.default_rng(seed)
    income = np.where(rng.random(n) < 0.15, 0.0, np.round(rng.pareto(1.3, n) * 1000, 2))
    balance = np.round(rng.normal(0, 500, n), 3)
    return pl.DataFrame({
        "id": np.arange(n), "region": rng.choice(["N", "S", "E"], n), "sex": rng.choice(["1", "2"], n),
        "age": rng.choice(["0-14", "15-64", "65+"], n), "income": income,
        "balance": pl.Series(balance).set(pl.Series(np.arange(n) % 11 == 0), None),
    })


def _session(frame: pl.DataFrame) -> pt.Session:
    s = pt.Session(":memory:", progress=False)
    s.register("p", frame)
    s.add_record_keys("p", id_column="id", seed="key-sums-magnitudes")
    return s


SPECS = [
    pt.TableSpec({"region": None, "sex": None}, sums=["income", "balance"], null_sums="omit"),
    pt.TableSpec({"region": None, "age": None, "sex": None}, formula="region*age + sex", sums=["balance"], null_sums="omit"),
    pt.TableSpec({"age": None}, sums=["income"], null_sums="omit", where=[("region", "in", ["N", "E"])]),
]


@pytest.mark.parametrize("m", MAGNITUDES, ids=range(len(MAGNITUDES)))
def test_perturbed_magnitudes_equal_the_records(m):
    with _session(_frame(3000, 1)) as s:
        ks = s.key_sums("p", ["region", "sex", "age"], sums=["income", "balance"], top_k=m.top_k, null_sums="omit")
        assert s.sql(f'SELECT count(*) AS n FROM "{ks}"')["n"][0] == 18  # one row per combination of codes
        for spec in SPECS:
            want = s.cell_key("p", spec, COUNTS, magnitude=m, original=True)
            got = s.cell_key(ks, spec, COUNTS, magnitude=m, original=True)
            assert got.equals(want)
            assert got.filter(pl.col(f"{spec.columns[0]}_level") == 0).height > 0  # margins are merged too


def test_rules_and_top_lists_equal_the_records():
    rules = SensitivityRules(min_frequency=3, dominance=[(1, 60), (2, 85)], p_percent=10)
    with _session(_frame(2000, 2)) as s:
        ks = s.key_sums("p", ["region", "sex", "age"], sums=["income"], top_k=6, null_sums="omit")
        spec = pt.TableSpec({"region": None, "sex": None, "age": None}, sums=["income"], null_sums="omit")
        assert s.sensitivity(ks, spec, rules, diagnostics=True).equals(s.sensitivity("p", spec, rules, diagnostics=True))
        assert s.tabulate(ks, spec, top_k=4, cell_keys=True).equals(s.tabulate("p", spec, top_k=4, cell_keys=True))
        assert s.tabulate(ks, spec).equals(s.tabulate("p", spec))
        m = MAGNITUDES[0]
        both = s.cell_key(ks, spec, COUNTS, magnitude=m, rules=rules, original=True)
        assert both.equals(s.cell_key("p", spec, COUNTS, magnitude=m, rules=rules, original=True))


@pytest.mark.parametrize("null_sums", ["zero", "omit"])
def test_null_rules_are_kept_as_made(null_sums):
    with _session(_frame(800, 3)) as s:
        ks = s.key_sums("p", ["region", "sex"], sums=["balance"], null_sums=null_sums, top_k=6)
        spec = pt.TableSpec({"region": None, "sex": None}, sums=["balance"], null_sums=null_sums)
        want = s.cell_key("p", spec, COUNTS, magnitude=MAGNITUDES[1], original=True)
        assert s.cell_key(ks, spec, COUNTS, magnitude=MAGNITUDES[1], original=True).equals(want)
        other = "omit" if null_sums == "zero" else "zero"
        with pytest.raises(SpecError, match=f"null_sums={null_sums!r}"):
            s.cell_key(ks, pt.TableSpec({"region": None}, sums=["balance"], null_sums=other), COUNTS,
                       magnitude=MAGNITUDES[1])


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 200), seed=st.integers(0, 10_000),
       dims=st.lists(st.sampled_from(["region", "sex", "age"]), min_size=1, max_size=3, unique=True),
       keep=st.sampled_from(["N", "S", "E"]), m=st.sampled_from(range(len(MAGNITUDES))))
def test_property_any_table_of_the_kept_columns(n, seed, dims, keep, m):
    """Any flat magnitude table of the kept columns, filtered or not, on any number of records."""
    mag = MAGNITUDES[m]
    with _session(_frame(n, seed)) as s:
        ks = s.key_sums("p", ["region", "sex", "age"], sums=["income", "balance"], top_k=6, null_sums="omit")
        for spec in (pt.TableSpec(dict.fromkeys(dims), sums=["income", "balance"], null_sums="omit"),
                     pt.TableSpec(dict.fromkeys(dims), sums=["balance"], null_sums="omit",
                                  where=[("region", "not in", [keep])], drop_empty=True)):
            try:
                want = s.cell_key("p", spec, COUNTS, magnitude=mag, original=True)
            except InputError as exc:  # no record passes the filter: the same error from the key sums
                with pytest.raises(type(exc), match="no record"):
                    s.cell_key(ks, spec, COUNTS, magnitude=mag)
                continue
            assert s.cell_key(ks, spec, COUNTS, magnitude=mag, original=True).equals(want)


def test_what_the_parts_cannot_give_is_refused():
    with _session(_frame(300, 4)) as s:
        ks = s.key_sums("p", ["region", "sex"], sums=["income"], top_k=2, null_sums="omit")
        m = MAGNITUDES[0]  # top_k 3 > 2 kept
        with pytest.raises(SpecError, match="top_k=3"):
            s.cell_key(ks, pt.TableSpec({"region": None}, sums=["income"], null_sums="omit"), COUNTS, magnitude=m)
        with pytest.raises(SpecError, match="'balance'.*need the records"):
            s.tabulate(ks, pt.TableSpec({"region": None}, sums=["balance"], null_sums="omit"))
        with pytest.raises(SpecError, match="where condition"):
            s.tabulate(ks, pt.TableSpec({"region": None}, sums=["income"], null_sums="omit",
                                        where=[("income", "in", [0])]))
        with pytest.raises(SpecError, match="weights"):
            s.tabulate(ks, pt.TableSpec({"region": None}, sums=["income"], null_sums="omit", weight="income"))
        counts = pt.TableSpec({"region": None, "sex": None})  # counts only: the null rule of sums does not matter
        assert s.cell_key(ks, counts, COUNTS, original=True).equals(s.cell_key("p", counts, COUNTS, original=True))
        with pytest.raises(SpecError, match="'protab_m0_kz' of table .* neither a dimension nor a filter"):
            s.tabulate(ks, pt.TableSpec({"protab_m0_kz": None}))  # key sums are secret
        with pytest.raises(SpecError, match="'protab_m0_top' of table .* neither a dimension nor a filter"):
            s.tabulate(ks, pt.TableSpec({"region": None}, where=[("protab_m0_top", "in", [1])]))
        with pytest.raises(SpecError, match="keeps sums of 'income', not its values: a dimension"):
            s.tabulate(ks, pt.TableSpec({"income": None}))
        counts_only = s.key_sums("p", ["region", "sex"])
        with pytest.raises(SpecError, match="sums it was not made with"):
            s.tabulate(counts_only, pt.TableSpec({"region": None}, sums=["income"], null_sums="omit"))


def test_values_no_table_could_hold_are_refused_when_made():
    frame = _frame(300, 5)
    with _session(frame.with_columns(pl.Series("bad", [float("nan")] + [1.0] * 299), pl.lit("x").alias("text"))) as s:
        with pytest.raises(InputError, match=r"sums column 'bad' of table 'p' is NaN or infinite in 1 record"):
            s.key_sums("p", ["region"], sums=["bad"], null_sums="omit")
        with pytest.raises(InputError, match=r"'balance' of table 'p' is missing \(NULL\) in 28 record"):
            s.key_sums("p", ["region"], sums=["balance"])  # null_sums='error' by default
        with pytest.raises(InputError, match="type VARCHAR; sums must be numeric"):
            s.key_sums("p", ["region"], sums=["text"])
        with pytest.raises(SpecError, match="both kept as a code and summed"):
            s.key_sums("p", ["region", "income"], sums=["income"])
        with pytest.raises(SpecError, match="record key"):
            s.key_sums("p", ["region"], sums=["rkey"])
        with pytest.raises(SpecError, match="top_k must be a whole number from 1 to 6"):
            s.key_sums("p", ["region"], sums=["income"], top_k=7)
        with pytest.raises(SpecError, match="null_sums must be"):
            s.key_sums("p", ["region"], sums=["income"], null_sums="drop")
        with pytest.raises(SpecError, match="list of column names"):
            s.key_sums("p", ["region"], sums="income")
        ks = s.key_sums("p", ["region", "sex"], sums=["income"], null_sums="omit")
        with pytest.raises(SpecError, match="key-sum table"):
            s.key_sums(ks, ["region"], sums=["income"], null_sums="omit")
        assert s.sql("SELECT count(*) AS n FROM duckdb_tables() WHERE temporary")["n"][0] == 1  # nothing half-made
