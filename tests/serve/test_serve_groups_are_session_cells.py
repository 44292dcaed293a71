"""The service computes nothing itself for custom groups: a group's cell in an answer is the cell
that a Python user's ``Session.cell_key`` (protect's path) gives for the same grouping written as
a hierarchy by hand, and ``Session.cell_key_groups`` (what the service and its differencing rule
call) gives groups that share codes the cells each has under a hierarchy of its own.

The census: tests/serve/groups_data.py (40 persons of every age 0 to 97, two regions, sex)."""

from __future__ import annotations

import groups_data as G
import polars as pl
import pytest
import serve_fixtures as F
from polars.testing import assert_frame_equal

import protab as pt
from protab.serve.atom_ledger import Ledger
from protab.serve.broker import Broker
from protab.serve.caching import state_folder
from protab.serve.config import load_config

PTABLE = pt.PTable.maximum_entropy(**F.PTABLE)
GROUPS = {"young": G.ages(0, 14), "working": G.ages(15, 64), "old": G.ages(65, 90)}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("session-cells")
    config, db = G.build(folder)
    (state_folder(load_config(config)) / Ledger.file).unlink(missing_ok=True)
    return {"config": config, "db": db}


def _by_hand(groups):
    """Total → groups → ages, as an analyst writes it for protect."""
    pairs = [("Total", g) for g in groups] + [(g, a) for g, ages in groups.items() for a in ages]
    return pt.Hierarchy.from_parent_child(pairs)


def test_a_groups_cell_is_the_cell_protect_gives_for_the_same_hierarchy(setup):
    broker = Broker(load_config(setup["config"]))
    try:
        body = {"dataset": "flat", "dims": ["age", "sex"], "groups": {"age": GROUPS}}
        served = broker.table(body, broker.config.users["bob"]).frame
    finally:
        broker.close()
    codes = sorted(a for ages in GROUPS.values() for a in ages)
    spec = pt.TableSpec({"age": _by_hand(GROUPS), "sex": ["F", "M"]}, where=[("age", "in", codes)])
    with pt.Session(setup["db"], read_only=True) as s:
        protected = s.cell_key("persons", spec, PTABLE, threshold=3)
    protected = protected.filter(pl.col("age_level") <= 1).select(served.columns)
    assert served.height == 4 * 3  # three groups and their total, by sex and in all
    key = ["age", "sex"]
    assert_frame_equal(served.sort(key), protected.sort(key), check_exact=True)


def test_groups_that_share_codes_get_the_cells_each_has_alone(setup):
    """Overlapping groups make a hierarchy that is not a tree: each group's cell (and the total,
    of every record once) is still the cell of its records."""
    shared = {"a": G.ages(10, 30), "b": G.ages(20, 40), "c": G.ages(0, 99)}
    spec = pt.TableSpec({"age": None, "region": None})
    with pt.Session(setup["db"], read_only=True) as s:
        together = s.cell_key_groups("persons", spec, "age", shared, PTABLE, original=True)
        for name, ages in shared.items():
            rest = [a for a in G.AGES if a not in ages]
            alone = s.cell_key_groups("persons", spec, "age", {name: ages, **({"rest": rest} if rest else {})},
                                      PTABLE, original=True)
            mine = together.filter(pl.col("age") == name).sort("region")
            assert mine.height == 3
            assert_frame_equal(mine, alone.filter(pl.col("age") == name).sort("region"), check_exact=True)
        total = together.filter(pl.col("age_level") == 0).sort("region")
        plain = s.cell_key("persons", pt.TableSpec({"region": None}), PTABLE, original=True).sort("region")
    assert total["n"].to_list() == plain["n"].to_list() and total["n_pert"].to_list() == plain["n_pert"].to_list()
    assert total.filter(pl.col("region_level") == 0)["n"].item() == sum(G.PER_AGE.values())
