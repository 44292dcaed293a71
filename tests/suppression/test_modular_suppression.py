"""method="modular": subtables along the hierarchies, each solved by the optimal mode, made
consistent, then the exact audit. Its subtables add up, its pattern passes the audit, it costs no
less than the optimal pattern of the whole table, a time limit is flagged and a primary cell its
subtable cannot protect is a clear error."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest
from scipy import sparse
from sdctable_vignette import vignette_inputs

import protab as pt
from protab.errors import ConvergenceWarning, InputError
from protab.session.suppress_modular import table_structure
from protab.suppression import audit_pattern
from protab.suppression.modular import _local_matrix, modular, subtables


@pytest.fixture(scope="module")
def vignette():
    _, inner, spec = vignette_inputs()
    with pt.Session(":memory:") as s:
        s.register("t", inner)
        X, _, published, _ = s._suppression_inputs("t", spec, None, False)
        levels = pt.ProtectionLevels(range_min=1)
        out = {m: s.suppress("t", spec, min_frequency=11, method=m, cost="cells", levels=levels)
               for m in ("modular", "optimal")}
    return spec, X, published, out


def test_every_subtable_adds_up_from_its_inner_cells(vignette):
    spec, _, published, _ = vignette
    codes, parent = table_structure(spec, published)
    parts = subtables(codes, parent)
    assert len(parts) == 2  # V1's total and its subtotal B, the flat V2 and V3 crossed
    z = published["n"].to_numpy().astype(float)
    for cells, roles in parts:
        B = _local_matrix(codes, cells, roles)
        np.testing.assert_allclose(B.T @ z[cells[roles == 0]], z[cells])
    both = np.bincount(np.concatenate([c for c, _ in parts]), minlength=z.size)
    b_rows = published["V1"].is_in(["B"]).to_numpy()
    assert (both[b_rows] == 2).all() and (both[~b_rows] == 1).all()  # B is a child above, the total below


def test_the_modular_pattern_passes_the_audit_and_costs_no_less_than_optimal(vignette):
    _, _, _, out = vignette
    mod = out["modular"]
    assert mod["protected"].all() and int((mod["suppressed"] == "primary").sum()) == 15
    prim = mod.filter(pl.col("suppressed") == "primary")
    assert ((prim["up"] - prim["lo"]) >= 1 - 1e-9).all()
    assert (mod["suppressed"] == "secondary").sum() >= (out["optimal"]["suppressed"] == "secondary").sum()


def _two_level() -> tuple[sparse.csc_array, np.ndarray, np.ndarray, list[np.ndarray]]:
    """A (T → P, Q; P → p1, p2; Q → q1, q2) × (Total → x, y) table with every margin."""
    rows = ["p1", "p2", "q1", "q2"]
    codes1 = ["p1", "p2", "q1", "q2", "P", "Q", "T"]
    under = {"p1": ["p1", "P", "T"], "p2": ["p2", "P", "T"], "q1": ["q1", "Q", "T"], "q2": ["q2", "Q", "T"]}
    cells = [(a, b) for a in codes1 for b in ("x", "y", "Total")]
    inner = [(a, b) for a in rows for b in ("x", "y")]
    X = np.array([[1.0 if c[0] in under[i[0]] and c[1] in (i[1], "Total") else 0.0 for c in cells] for i in inner])
    y = np.array([2.0, 9.0, 8.0, 7.0, 6.0, 12.0, 11.0, 3.0])
    codes = np.array([[codes1.index(a), ("x", "y", "Total").index(b)] for a, b in cells])
    parent = [np.array([4, 4, 5, 5, 6, 6, -1]), np.array([2, 2, -1])]
    return sparse.csc_array(X), X.T @ y, codes, parent


def test_a_time_limit_returns_an_audited_pattern_flagged_incomplete():
    X, z, codes, parent = _two_level()
    prim = np.zeros(z.size, dtype=bool)
    prim[0] = True  # (p1, x) = 2
    res = modular(X, z, prim, codes=codes, parent=parent, cost=np.ones(z.size), time_limit=1e-9)
    assert res.timed_out and not res.complete and res.fallback > 0
    frame = audit_pattern(X, z, res.suppressed, primary=prim)
    assert frame.filter(frame["primary"])["protected"].all()
    full = modular(X, z, prim, codes=codes, parent=parent, cost=np.ones(z.size))
    assert full.complete and not full.timed_out and full.fallback == 0 and full.subtables == 3  # T, P, Q
    frame = audit_pattern(X, z, full.suppressed, primary=prim)
    assert frame.filter(frame["primary"])["protected"].all()


def test_a_primary_its_subtable_cannot_protect_is_named():
    X, z, codes, parent = _two_level()
    prim = np.zeros(z.size, dtype=bool)
    prim[0] = True
    never = np.zeros(z.size, dtype=bool)
    never[[1, 2]] = True  # (p1, y) and (p1, Total) published: (p1, x) is their difference
    labels = [f"cell{i}" for i in range(z.size)]
    with pytest.raises(InputError, match=r"primary cells 'cell0' cannot be protected in their subtable"):
        modular(X, z, prim, codes=codes, parent=parent, cost=np.ones(z.size), never=never, labels=labels)


def test_session_modular_warns_when_stopped_and_still_protects():
    rng = np.random.default_rng(3)
    frame = pl.DataFrame({"a": rng.choice(["a1", "a2", "b1", "b2"], 300, p=[0.5, 0.3, 0.15, 0.05]),
                          "b": rng.choice(list("xyz"), 300, p=[0.6, 0.3, 0.1])})
    spec = pt.TableSpec({"a": pt.Hierarchy.from_code_lengths(["a1", "a2", "b1", "b2"], (1, 1)), "b": None})
    with pt.Session(":memory:") as s:
        s.register("p", frame)
        with pytest.warns(ConvergenceWarning, match="not optimal"):
            out = s.suppress("p", spec, min_frequency=5, method="modular", time_limit=1e-9)
        assert out["protected"].all() and (out["suppressed"] == "primary").any()
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            best = s.suppress("p", spec, min_frequency=5, method="modular", cost="cells")
        assert best["protected"].all()
