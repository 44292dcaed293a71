"""Session.suppress(..., protect_zeros=True) where a hierarchy or a code list names a code the
data lack: its cells are zeros with no records, and they are protected like the other zeros
(GaussSuppression's extend0 = "all": the codes of the hierarchies beside those of the data),
instead of stopping with "build X with extend0".

Records (a, b): x p, x q, y p, y q, y q, so

         p   q   Total
    x    1   1   2
    y    1   2   3
    z    0   0   0        (z: listed, no record)
  Total  2   3   5
"""

from __future__ import annotations

import polars as pl
import pytest

import protab as pt
from protab.magnitude import SensitivityRules

FRAME = pl.DataFrame({"a": ["x", "x", "y", "y", "y"], "b": ["p", "q", "p", "q", "q"],
                      "v": [5.0, 7.0, 1.0, 2.0, 3.0]})
TREE = pt.Hierarchy.from_parent_child([("Total", "x"), ("Total", "y"), ("Total", "z")])


def _suppress(spec: pt.TableSpec, **kw) -> pl.DataFrame:
    with pt.Session(":memory:") as s:
        s.register("t", FRAME)
        return s.suppress("t", spec, **kw)


def _check(out: pl.DataFrame) -> None:
    z = out.filter(pl.col("a") == "z")
    assert z.height == 3 and (z["suppressed"] == "primary").all()  # z × p, q, Total: zeros
    assert z["n"].is_null().all()
    # every primary zero is protected: the row z cannot be had as Total − x − y, so some
    # cell of x or y in the same column is suppressed as well, and so are the cells with n = 1
    hidden = out.filter(pl.col("suppressed") != "no")
    for col in ("p", "q", "Total"):
        others = hidden.filter((pl.col("b") == col) & pl.col("a").is_in(["x", "y", "Total"]))
        assert others.height >= 1, col
    ones = out.filter(pl.col("suppressed") == "primary").filter(pl.col("a") != "z")
    assert ones.height > 0


@pytest.mark.parametrize("dim", [TREE, ["x", "y", "z"]], ids=["hierarchy", "code list"])
def test_listed_code_without_records_is_protected(dim):
    out = _suppress(pt.TableSpec({"a": dim, "b": None}), min_frequency=2, protect_zeros=True)
    _check(out)
    # the published counts of the other cells are the data's
    kept = out.filter(pl.col("suppressed") == "no")
    truth = {("x", "Total"): 2, ("y", "Total"): 3, ("Total", "p"): 2, ("Total", "q"): 3, ("Total", "Total"): 5,
             ("y", "q"): 2}
    for a, b, n in kept.select("a", "b", "n").iter_rows():
        assert truth[(a, b)] == n


def test_without_protect_zeros_the_empty_row_is_published_as_zeros():
    out = _suppress(pt.TableSpec({"a": TREE, "b": None}), min_frequency=2)
    z = out.filter(pl.col("a") == "z")
    assert z["n"].to_list() == [0, 0, 0] and (z["suppressed"] == "no").all()


def test_magnitude_zero_rule_on_a_listed_code():
    rules = SensitivityRules(min_frequency=2, zero=True)
    out = _suppress(pt.TableSpec({"a": TREE, "b": None}, sums=["v"]), rules=rules)
    z = out.filter(pl.col("a") == "z")
    assert (z["suppressed"] == "primary").all() and z["v"].is_null().all()
    assert (out["suppressed"] == "secondary").any()
