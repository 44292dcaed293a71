"""Bad input to the feasibility audit: a clear protab error naming the table and column, and
never the noise bound D (a p-table parameter)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import sparse

import protab as pt

X = sparse.csc_array(np.array([[1, 0, 1], [0, 1, 1]]))
PUBLISHED = pl.DataFrame({"x": ["a", "b", "Total"], "x_level": [1, 1, 0]})
INNER = pl.DataFrame({"x": ["a", "b"]})
TABLE = pl.DataFrame({"x": ["Total", "a", "b"], "x_level": [0, 1, 1], "n_pert": [4, 1, 3]})


def _audit(tables=None, X=X, published=PUBLISHED, inner=INNER, D=2, **kw):
    return pt.audit.feasibility(tables or {"t": TABLE}, X, published, inner, D=D, **kw)


def test_a_cell_that_is_not_in_the_matrix_is_named_with_its_table():
    other = TABLE.with_columns(pl.Series("x", ["Total", "a", "c"]))
    with pytest.raises(pt.InputError, match=r"table 'other'.*'c'.*one run"):
        _audit({"other": other})


def test_a_dimension_the_matrix_lacks_is_named():
    other = TABLE.with_columns(pl.lit("m").alias("sex"), pl.lit(1).alias("sex_level"))
    with pytest.raises(pt.InputError, match=r"table 'other'.*'sex'"):
        _audit({"other": other})


def test_a_matrix_of_another_shape_is_refused():
    with pytest.raises(pt.InputError, match="one Session.model_matrix"):
        _audit(inner=pl.DataFrame({"x": ["a", "b", "c"]}))


def test_a_missing_published_column_is_named():
    with pytest.raises(pt.InputError, match=r"table 't' has no column 'n_pert'"):
        _audit({"t": TABLE.drop("n_pert")})
    with pytest.raises(pt.InputError, match=r"column 'n_pert' of table 't' must be numeric"):
        _audit({"t": TABLE.with_columns(pl.col("n_pert").cast(pl.Utf8))})


@pytest.mark.parametrize("D", [-1, float("nan"), float("inf"), True, "2"])
def test_a_bad_noise_bound_is_refused_without_showing_it(D):
    with pytest.raises(pt.InputError, match="D .* must be a finite number of 0 or more") as err:
        _audit(D=D)
    assert "-1" not in str(err.value) and "nan" not in str(err.value)


def test_a_support_outside_the_bound_is_refused_without_showing_it():
    with pytest.raises(pt.InputError, match="within ±D") as err:
        _audit(D=2, support=[-3, 0, 7])
    assert "7" not in str(err.value) and "-3" not in str(err.value)


def test_values_no_true_table_fits_are_called_inconsistent():
    # total published 0, cells 5 and 5, D = 2: a, b ≥ 3 but a + b ≤ 2
    bad = TABLE.with_columns(pl.Series("n_pert", [0, 5, 5]))
    with pytest.raises(pt.InputError, match="inconsistent.*one run") as err:
        _audit({"t": bad})
    assert "D =" not in str(err.value) and " 2" not in str(err.value)


def test_a_cell_listed_twice_is_refused():
    with pytest.raises(pt.InputError, match="table 't' lists a cell more than once"):
        _audit({"t": pl.concat([TABLE, TABLE.head(1)])})
