"""An earlier release's pattern kept (``previous=``, as GaussSuppression's AdditionalSuppression
with its defaults): cells suppressed before stay suppressed, cells published before stay
published and cannot become primary, new cells are protected around them."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import protab as pt
from protab.errors import InputError, SpecError
from protab.suppression import derivable

ACC = Path(__file__).resolve().parents[1] / "data" / "gauss_rules" / "inputs" / "mun_accidents.csv"
SPEC = pt.TableSpec(["mun", "inj"], freq="freq")
DIMS = ["mun", "inj"]


def _hidden(frame: pl.DataFrame, dims: list[str] = DIMS) -> set[tuple[str, ...]]:
    return {tuple(r) for r in frame.filter(pl.col("suppressed") != "no").select(dims).rows()}


@pytest.fixture()
def session():
    with pt.Session(":memory:") as s:
        s.register("a", pl.read_csv(ACC))
        yield s


def test_zeros_published_before_stay_published_when_zeros_become_primary(session):
    before = session.suppress("a", SPEC, min_frequency=4)
    fresh = session.suppress("a", SPEC, min_frequency=4, protect_zeros=True)
    zeros = {tuple(r) for r in before.filter((pl.col("n") == 0) & (pl.col("suppressed") == "no")).select(DIMS).rows()}
    assert zeros and zeros <= _hidden(fresh)  # without previous= the zeros would now be suppressed
    kept = session.suppress("a", SPEC, min_frequency=4, protect_zeros=True, previous=before)
    assert _hidden(kept) == _hidden(before)
    # the earlier suppressions are protected as primary cells; nothing is secondary any more
    assert set(kept.filter(pl.col("suppressed") != "no")["suppressed"].unique()) == {"primary"}


def test_a_finer_table_keeps_the_released_margins(session):
    acc = pl.read_csv(ACC)
    by_sex = pl.concat([acc.with_columns(sex=pl.lit("f"), freq=pl.col("freq") // 2),
                        acc.with_columns(sex=pl.lit("m"), freq=pl.col("freq") - pl.col("freq") // 2)])
    session.register("x", by_sex)
    before = session.suppress("a", SPEC, min_frequency=4)
    spec = pt.TableSpec(["mun", "inj", "sex"], freq="freq")
    out = session.suppress("x", spec, min_frequency=3, previous=before)
    at_total = out.filter(pl.col("sex_level") == 0)
    assert at_total.height == before.height
    assert _hidden(at_total) == _hidden(before)  # sex = Total is the earlier table, cell for cell
    X, _, published = session.model_matrix("x", spec)
    dims = [*DIMS, "sex"]
    keyed = published.select(dims).join(out.select([*dims, "suppressed"]), on=dims, how="left", maintain_order="left")
    supp = (keyed["suppressed"] != "no").to_numpy()
    small = ((published["n"] > 0) & (published["n"] < 3)).to_numpy()
    fresh_small = small & (published["sex_level"] > 0).to_numpy()
    assert supp[fresh_small].all()  # the new small cells are suppressed ...
    assert not (derivable(X, supp) & (keyed["suppressed"] == "primary").to_numpy()).any()  # ... and protected


def test_previous_without_a_suppressed_column_lists_suppressed_cells(session):
    listed = pl.DataFrame({"mun": ["k1", "k2"], "inj": ["serious", "serious"]})
    out = session.suppress("a", SPEC, min_frequency=1, previous=listed)
    assert {("k1", "serious"), ("k2", "serious")} <= _hidden(out)
    assert len(_hidden(out)) > 2  # and they are protected by secondary cells


def test_boolean_suppressed_column_and_missing_dimensions_at_their_total(session):
    # a release of the mun margin only: inj is matched at its total
    margin = pl.DataFrame({"mun": ["k5", "k4", "Total"], "suppressed": [True, False, False]})
    out = session.suppress("a", SPEC, min_frequency=1, previous=margin)
    row = {(m, j): v for m, j, v in out.select([*DIMS, "suppressed"]).rows()}
    assert row[("k5", "Total")] == "primary" and row[("k4", "Total")] == "no" and row[("Total", "Total")] == "no"


@pytest.mark.parametrize("frame, error, message", [
    (pl.DataFrame({"mun": ["k1"], "age": ["old"], "suppressed": [True]}), InputError, "not dimensions of the table: 'age'"),
    (pl.DataFrame({"suppressed": [True]}), InputError, "no dimension column at all"),
    (pl.DataFrame({"mun": ["k9"], "inj": ["serious"], "suppressed": [True]}), InputError,
     r"does not publish: \('k9', 'serious'\)"),
    (pl.DataFrame({"mun": ["k1", "k1"], "inj": ["light", "light"], "suppressed": [True, False]}), InputError,
     "both suppressed and published"),
    (pl.DataFrame({"mun": ["k1"], "inj": ["light"], "suppressed": ["maybe"]}), InputError, "holds 'maybe'"),
    (pl.DataFrame({"mun": ["k1"], "inj": ["light"], "suppressed": [1.5]}), InputError, "must be boolean"),
])
def test_bad_previous_frames_are_refused(session, frame, error, message):
    with pytest.raises(error, match=message):
        session.suppress("a", SPEC, min_frequency=4, previous=frame)


def test_previous_contradicting_forced_is_refused(session):
    before = pl.DataFrame({"mun": ["k1"], "inj": ["serious"], "suppressed": [False]})
    with pytest.raises(SpecError, match="previous contradicts forced"):
        session.suppress("a", SPEC, min_frequency=4, previous=before, forced=before.select(DIMS))
