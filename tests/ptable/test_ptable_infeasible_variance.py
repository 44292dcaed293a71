"""A maximum-entropy p-table whose variance cap V no distribution of a row can keep is an
error, as in R ptable ("The variance parameter you set is too small!"), unless asked for
with ``infeasible="warn"``; the message names the rows and no secret parameter.

D = 5, js = 3 blocks the outcomes 1..3; row i = 2 can then only move to 0 or to 4 and more
(v = −2 or v >= 2), so each of its distributions has variance Σ p·v² >= 4 (the smallest:
p(−2) = p(+2) = 1/2), above V = 3.
"""

from __future__ import annotations

import re
import warnings

import polars as pl
import pytest

from protab import cli
from protab.errors import PTableError, PTableWarning
from protab.ptable import PTable
from protab.ptable import magnitude_ptable as numeric_module
from protab.ptable.magnitude_ptable import MagnitudePTable
from protab.request.loaders import load_ptable


def test_variance_below_what_the_blocked_rows_allow_is_an_error():
    with pytest.raises(PTableError) as exc:
        PTable.maximum_entropy(D=5, V=3, js=3)
    msg = str(exc.value)
    assert "i = 2 " in msg and "Raise V, or lower js" in msg and "infeasible='warn'" in msg
    assert re.findall(r"\d+", msg) == ["2"]  # the row; no D, V, js, nor a variance


def test_warn_keeps_the_smallest_variance_rows():
    with pytest.warns(PTableWarning, match="i = 2"):
        p = PTable.maximum_entropy(D=5, V=3, js=3, infeasible="warn")
    row2 = p.frame.filter(pl.col("i") == 2)
    # p(-2) = p(+2) = 1/2, the floors of 1e-8 on the other outcomes aside
    assert row2.filter(pl.col("v").abs() == 2)["p"].to_list() == pytest.approx([0.5, 0.5], abs=1e-6)
    var = p.diagnostics.filter(pl.col("i") == 2)["p_var"].item()
    assert var == pytest.approx(4.0, abs=1e-5)
    # the message's advice: that variance is a V that works
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTableWarning)
        PTable.maximum_entropy(D=5, V=var, js=3)


def test_rows_that_cannot_reach_v_still_only_warn():
    with pytest.warns(PTableWarning, match="i = 1"):
        PTable.maximum_entropy(D=2, V=1)  # R ptable's table: row 1 stays below V


def test_bad_option_is_named():
    with pytest.raises(PTableError, match="infeasible must be 'error' or 'warn'"):
        PTable.maximum_entropy(D=3, V=1, infeasible="ignore")
    with pytest.raises(PTableError, match="infeasible must be 'error' or 'warn'"):
        MagnitudePTable.maximum_entropy(4, 1, icat=[1, 4], infeasible=True)


def test_request_and_cli_get_the_protab_error(tmp_path, capsys):
    with pytest.raises(PTableError, match="i = 2"):
        load_ptable({"maximum_entropy": {"D": 5, "V": 3, "js": 3}}, tmp_path)
    out = tmp_path / "p.csv"
    rc = cli.main(["ptable", "generate", "--D", "5", "--V", "3", "--js", "3", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and err.splitlines()[-1].startswith("protab: error: p-table: no distribution of i = 2")
    assert "Traceback" not in err and not out.exists()


def test_numeric_rows_above_v_follow_the_same_rule(monkeypatch):
    """Every numeric row holds v = 0, so only a V near 0 meets this (D = 49, V = 1e-5 does, in
    minutes): here the row solver is made to return rows of variance 1 for V = 0.5."""
    real = numeric_module.row_bounds

    def rows_of_variance_one(v, V, *args, **kwargs):
        lb_n, ub_n, _ = real(v, 1.0, *args, **kwargs)
        return lb_n, ub_n, False

    monkeypatch.setattr(numeric_module, "row_bounds", rows_of_variance_one)
    with pytest.raises(PTableError, match=r"magnitude p-table: no distribution of i = 1\.0, 2\.0 "):
        MagnitudePTable.maximum_entropy(2, 0.5, step=2, icat=[1, 2])
    with pytest.warns(PTableWarning, match="2 of the 2 classes"):
        t = MagnitudePTable.maximum_entropy(2, 0.5, step=2, icat=[1, 2], infeasible="warn")
    assert (t.diagnostics["p_var"].to_numpy()[1:] > 0.5).all()  # the rows are above V
