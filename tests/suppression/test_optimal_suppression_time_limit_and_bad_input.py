"""method="optimal" at its limits: a time limit that stops the search returns a pattern that
still meets every level, marked not proven optimal with its gap (and a ConvergenceWarning from
the Session); levels no pattern can meet and bad costs are clear protab errors."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest
from scipy import sparse

import protab as pt
from protab.errors import ConvergenceWarning, InputError, SpecError
from protab.suppression import audit_pattern, optimal


def _three_way() -> tuple[sparse.csc_array, np.ndarray]:
    """A 3×3×3 table with every margin (64 cells), counts from a fixed generator."""
    one = [np.eye(3), np.ones((3, 1))]
    blocks = [np.kron(np.kron(a, b), c) for a in one for b in one for c in one]
    X = sparse.csc_array(np.hstack(blocks))
    y = np.random.default_rng(7).integers(0, 9, 27).astype(float)
    return X, X.T @ y


def test_a_time_limit_returns_a_protecting_pattern_with_its_gap():
    X, z = _three_way()
    prim = np.zeros(X.shape[1], dtype=bool)
    prim[[0, 13, 26]] = True
    res = optimal(X, z, prim, cost=np.ones(X.shape[1]), protection_range=2.0, time_limit=1e-6)
    assert not res.optimal
    assert 0.0 <= res.bound <= res.cost and 0.0 <= res.gap <= 1.0
    assert res.gap == pytest.approx((res.cost - res.bound) / res.cost)
    frame = audit_pattern(X, z, res.suppressed, primary=prim, protection_range=2.0)
    assert frame.filter(frame["primary"])["protected"].all()
    full = optimal(X, z, prim, cost=np.ones(X.shape[1]), protection_range=2.0)
    assert full.optimal and full.cost <= res.cost and res.bound <= full.cost + 1e-9


def test_levels_no_pattern_can_meet_name_the_cell():
    # T = a + b: with b and T published, a is known whatever else is suppressed
    X = sparse.csc_array(np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]))
    z = np.array([3.0, 4.0, 7.0])
    with pytest.raises(InputError, match=r"primary cells 0 miss them"):
        optimal(X, z, [0], cost=np.ones(3), never=[1, 2])
    with pytest.raises(InputError, match=r"primary cells \('a',\) miss them"):
        optimal(X, z, [0], cost=np.ones(3), never=[1, 2], labels=[("a",), ("b",), ("T",)])


@pytest.mark.parametrize("cost, what", [(None, "a cost per published cell"), ([1.0, -1.0, 1.0], "negative at cells 1"),
                                        ([1.0, np.nan, 1.0], "NaN or infinite"), ([1.0, 1.0], "one value per")])
def test_a_missing_or_negative_cost_is_refused(cost, what):
    X = sparse.csc_array(np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]))
    with pytest.raises(InputError, match=what):
        optimal(X, np.array([3.0, 4.0, 7.0]), [0], cost=cost)


def _persons() -> pl.DataFrame:
    rng = np.random.default_rng(3)
    return pl.DataFrame({"a": rng.choice(list("pqrs"), 300, p=[0.5, 0.3, 0.15, 0.05]),
                         "b": rng.choice(list("xyz"), 300, p=[0.6, 0.3, 0.1])})


def test_session_optimal_warns_when_stopped_and_still_protects():
    with pt.Session(":memory:") as s:
        s.register("p", _persons())
        spec = pt.TableSpec(["a", "b"])
        with pytest.warns(ConvergenceWarning, match="not proven optimal"):
            out = s.suppress("p", spec, min_frequency=5, method="optimal", time_limit=1e-6)
        assert out["protected"].all() and (out["suppressed"] == "primary").any()
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            best = s.suppress("p", spec, min_frequency=5, method="optimal", cost="cells")
        assert best["protected"].all()
        assert (best["suppressed"] != "no").sum() <= (out["suppressed"] != "no").sum()


def test_session_refuses_bad_method_cost_and_cells_without_partner():
    with pt.Session(":memory:") as s:
        s.register("p", _persons())
        spec = pt.TableSpec(["a", "b"])
        with pytest.raises(SpecError, match="method must be"):
            s.suppress("p", spec, min_frequency=5, method="best")
        with pytest.raises(NotImplementedError, match="linked='global'"):
            s.suppress("p", [spec], min_frequency=5, method="modular", linked="local")
        with pytest.raises(SpecError, match="cost must be"):
            s.suppress("p", spec, min_frequency=5, method="optimal", cost="price")
        with pytest.raises(SpecError, match="time_limit is for"):
            s.suppress("p", spec, min_frequency=5, time_limit=10)
        with pytest.raises(InputError, match="negative"):
            s.suppress("p", spec, min_frequency=5, method="optimal", cost=-np.ones(20))
        tab = s.suppress("p", spec, min_frequency=5)
        prim = tab.filter(pl.col("suppressed") == "primary").row(0, named=True)
        # every other cell of its row and column published: it is known
        never = tab.filter(((pl.col("a") == prim["a"]) | (pl.col("b") == prim["b"])) & (pl.col("suppressed") != "primary"))
        with pytest.raises(InputError, match=f"'{prim['a']}', '{prim['b']}'"):
            s.suppress("p", spec, min_frequency=5, method="optimal", never=never.select("a", "b"))
