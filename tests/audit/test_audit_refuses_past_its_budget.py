"""An audit whose linear programs are estimated to take longer than its budget is refused up
front, with the estimate and the budget and how to raise it, instead of an unbounded run;
with the budget raised (or none) the same audit answers."""

from __future__ import annotations

import numpy as np
import pytest
from audit_fixtures import TWO_TABLES, hypercube

import protab as pt
from protab import cli
from protab.errors import InputError


def _bounds(X, D=2):
    rng = np.random.default_rng(3)
    t = X.T @ rng.poisson(3.0, X.shape[0])
    z = np.where(t == 0, 0.0, np.maximum(t + rng.integers(-D, D + 1, t.size), 0)).astype(float)
    return pt.audit.noise_bounds(z, D)


def test_a_tiny_budget_is_refused_with_the_estimate_and_how_to_raise_it():
    X = hypercube((5, 4, 3))
    lower, upper = _bounds(X)
    with pytest.raises(InputError) as err:
        pt.audit.intervals(X, lower, upper, budget=1e-6)
    msg = str(err.value)
    assert "estimated work is at least" in msg and "budget" in msg and "linear programs" in msg
    assert "--budget" in msg and "budget=" in msg
    lo, up = pt.audit.intervals(X, lower, upper, budget=None)
    lo2, up2 = pt.audit.intervals(X, lower, upper, budget=600)
    np.testing.assert_array_equal(lo, lo2)
    np.testing.assert_array_equal(up, up2)
    assert (lo <= up).all()


def test_a_budget_must_be_a_positive_number():
    X = hypercube((3, 3))
    lower, upper = _bounds(X)
    for bad in (0, -1.0, float("nan"), "10", True):
        with pytest.raises(InputError, match="budget"):
            pt.audit.intervals(X, lower, upper, budget=bad)




def test_protab_audit_refuses_past_its_budget_and_writes_nothing(tmp_path, capsys):
    db = tmp_path / "d.duckdb"
    assert cli.main(["demo", "--persons", "300", "--db", str(db), "--out", str(tmp_path / "demo")]) == 0
    req = tmp_path / "req.toml"
    req.write_text(TWO_TABLES, encoding="utf-8")
    assert cli.main(["protect", str(req), "--db", str(db), "--out", str(tmp_path / "out")]) == 0
    report = tmp_path / "risky.csv"
    capsys.readouterr()
    code = cli.main(["audit", str(req), "--db", str(db), "--tables", str(tmp_path / "out"),
                     "--report", str(report), "--budget", "0.000001"])
    err = capsys.readouterr().err
    assert code != 0 and "budget" in err and "estimated work" in err
    assert not report.exists()
    assert cli.main(["audit", str(req), "--db", str(db), "--tables", str(tmp_path / "out"),
                     "--report", str(report), "--budget", "600"]) == 0
    assert report.exists()
