"""k-disclosure (GaussSuppression's SuppressKDisclosure / KDisclosurePrimary): the difference of a
published cell and a published cell inside it that is ``k`` or less is protected like a primary
cell. Data: the package's example ``mun_accidents`` (``formula = ~mun*inj, coalition = 1``); the
differences were listed by hand from the published definition."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import sparse

import protab as pt
from protab.errors import SpecError
from protab.suppression import derivable
from protab.suppression.disclosure import k_disclosure_columns

ACC = Path(__file__).resolve().parents[1] / "data" / "gauss_rules" / "inputs" / "mun_accidents.csv"
SPEC = pt.TableSpec(["mun", "inj"], freq="freq")

# Totals: k1 4, k2 6, k3 6, k4 9, k5 1, k6 6; serious 23, light 3, none 6, unknown 0.
# Cell inside margin with a difference <= 1 (both counts > 0): k1.serious 4 of k1 (0), k2.serious
# 5 of k2 (1), k5.serious 1 of k5 (0), k6.serious 6 of k6 (0), k3.light 2 of light (1). Each
# difference is the margin's other inner cells.
EXPECTED = {
    frozenset(("k1", j) for j in ("light", "none", "unknown")),
    frozenset(("k2", j) for j in ("light", "none", "unknown")),
    frozenset(("k5", j) for j in ("light", "none", "unknown")),
    frozenset(("k6", j) for j in ("light", "none", "unknown")),
    frozenset((m, "light") for m in ("k1", "k2", "k4", "k5", "k6")),
}


def _matrix(s: pt.Session):
    s.register("a", pl.read_csv(ACC))
    return s.model_matrix("a", SPEC)


def test_differences_of_at_most_k_are_found():
    with pt.Session(":memory:") as s:
        X, inner, published = _matrix(s)
    D = k_disclosure_columns(X, published["n"].to_numpy(), 1).tocsc()
    assert (D.data == 1).all()
    keys = list(zip(inner["mun"], inner["inj"]))
    found = {frozenset(keys[i] for i in D.indices[D.indptr[j]:D.indptr[j + 1]]) for j in range(D.shape[1])}
    assert D.shape[1] == 5 and found == EXPECTED
    # k = 2 adds k4.light 1 of light 3 and k4.none 4 of none 6
    assert k_disclosure_columns(X, published["n"].to_numpy(), 2).shape[1] == 7


def test_suppression_leaves_no_small_difference_derivable():
    with pt.Session(":memory:") as s:
        X, inner, published = _matrix(s)
        out = s.suppress("a", SPEC, k_disclosure=1)
    dims = ["mun", "inj"]
    keyed = published.select(dims).join(out.select([*dims, "suppressed"]), on=dims, how="left", maintain_order="left")
    suppressed = (keyed["suppressed"] != "no").to_numpy()
    # as in the package, the published cells are secondary suppressions; the primary cells are
    # the differences, which the table does not publish
    assert set(out["suppressed"].unique()) == {"no", "secondary"}
    D = k_disclosure_columns(X, published["n"].to_numpy(), 1)
    Xe = sparse.hstack([X, D], format="csc")
    supp_e = np.concatenate([suppressed, np.ones(D.shape[1], dtype=bool)])
    assert not derivable(Xe, supp_e)[X.shape[1]:].any()
    # without protection each difference is derivable from the table: suppression was needed
    assert derivable(Xe, np.concatenate([np.zeros(X.shape[1], dtype=bool), np.ones(D.shape[1], dtype=bool)]))[
        X.shape[1]:].all()
    # k1.serious = k1 exactly (difference 0): one of the two must be hidden, and the same for k5, k6
    hidden = set(zip(out.filter(pl.col("suppressed") != "no")["mun"], out.filter(pl.col("suppressed") != "no")["inj"]))
    for m in ("k1", "k5", "k6"):
        assert (m, "serious") in hidden or (m, "Total") in hidden


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_k_below_one_or_not_whole_is_refused(k):
    with pt.Session(":memory:") as s:
        _matrix(s)
        with pytest.raises(SpecError, match="k_disclosure must be a whole number of 1 or more"):
            s.suppress("a", SPEC, k_disclosure=k)


def test_the_audit_of_k_disclosure_is_not_offered():
    with pt.Session(":memory:") as s:
        _matrix(s)
        with pytest.raises(NotImplementedError, match="audit of k_disclosure"):
            s.suppress("a", SPEC, k_disclosure=1, audit=True)
