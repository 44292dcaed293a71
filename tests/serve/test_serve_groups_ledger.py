"""The ledger of the groups answered (protab.serve.atom_ledger): shared by all users, it survives
a restart and a kill -9 of a process that was recording, two requests at once cannot both pass
against a partition the other changes (threads of one service, or another process on the same
state folder), the old per-user ledger is imported, and the number of cells it keeps is bounded.

The census: tests/serve/groups_data.py (2 persons aged 98; ``flat``: age without bands)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import groups_data as G
import numpy as np
import polars as pl
import pytest

import protab.serve.groups as groups_module
from protab.serve.atom_ledger import OLD_FILE, Ledger
from protab.serve.atoms import classification
from protab.serve.broker import Broker
from protab.serve.caching import state_folder
from protab.serve.config import load_config
from protab.serve.query import QueryRefused

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ledger")
    config, _ = G.build(folder)
    return {"config": config, "state": state_folder(load_config(config))}


@pytest.fixture
def fresh(setup):
    """An empty state folder's ledger (and no old one)."""
    for name in (Ledger.file, OLD_FILE):
        (setup["state"] / name).unlink(missing_ok=True)
    return setup


def _ask(broker, groups, user="bob"):
    return broker.table({"dataset": "flat", "dims": ["age"], "groups": {"age": groups}}, broker.config.users[user])


def _ages_class():
    return classification("flat", "age", ("age",), pl.DataFrame({"age": G.AGES}))


def _mask(codes):
    return np.isin(np.array(G.AGES), codes)


def test_a_restart_keeps_every_group_answered(fresh):
    first = Broker(load_config(fresh["config"]))
    try:
        _ask(first, {"to97": G.ages(0, 97)})
    finally:
        first.close()
    again = Broker(load_config(fresh["config"]))  # the service restarted on the same state folder
    try:
        with pytest.raises(QueryRefused, match="group 'to98' holds a part"):
            _ask(again, {"to98": G.ages(0, 98)}, user="alice")
        assert _ask(again, {"to97": G.ages(0, 97)}, user="carol").frame.height == 2
    finally:
        again.close()


CHILD = """
import sys
import numpy as np
import polars as pl
from protab.serve.atom_ledger import Ledger
from protab.serve.atoms import classification

cls = classification("flat", "age", ("age",), pl.DataFrame({"age": [str(a) for a in range(100)]}))
ledger = Ledger(sys.argv[1], most=10**6)
for k in range(1, 10**6):
    mask = np.array([(k >> b) & 1 for b in range(100)], dtype=bool)  # cell k: the bits of k
    ledger.judge(cls, [mask], lambda cells: None, lambda kept: RuntimeError("full"))
    print(k, flush=True)
"""


def test_a_kill_9_while_recording_leaves_a_readable_ledger(tmp_path):
    """A process recording cells as fast as it can is killed (SIGKILL) mid-way: the ledger is the
    last complete one, with every cell the process had recorded (each was fsync'ed first)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        done = 0
        for line in child.stdout:
            done = int(line)
            if done >= 40:
                break
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(30)
        child.stdout.close()
    assert done >= 40
    cells = Ledger(tmp_path).cells(_ages_class())  # reads: not half-written
    kept = {int(sum(1 << b for b in np.flatnonzero(row))) for row in cells}
    # every cell reported recorded is there, and the cells are those of the first writes: nothing
    # half-written (the child may have run a few writes past the last line read)
    assert kept == set(range(1, max(kept) + 1)) and max(kept) >= done
    json.loads((tmp_path / Ledger.file).read_text())


def test_two_requests_at_once_cannot_both_pass(fresh, monkeypatch):
    """Ages 0..97 and 0..98 (two users, two threads of one service) each pass alone, not both:
    the two are judged on the records at the same moment (held at a barrier), then recorded
    under the lock, where the second is judged again against the first and refused."""
    barrier = threading.Barrier(2, timeout=60)
    counts = groups_module.set_counts
    waited = threading.local()

    def held(*args, **kwargs):
        out = counts(*args, **kwargs)
        if not getattr(waited, "done", False):  # the first judgement of each request, outside the lock
            waited.done = True
            barrier.wait()  # both requests have read the records against the empty ledger
        return out

    monkeypatch.setattr(groups_module, "set_counts", held)
    broker = Broker(load_config(fresh["config"]))
    try:
        results = {}

        def ask(user, codes):
            try:
                results[user] = _ask(broker, {user: codes}, user=user).frame.height
            except QueryRefused as exc:
                results[user] = str(exc)

        threads = [threading.Thread(target=ask, args=("bob", G.ages(0, 97))),
                   threading.Thread(target=ask, args=("alice", G.ages(0, 98)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        refused = [u for u, r in results.items() if isinstance(r, str)]
        assert len(results) == 2 and len(refused) == 1, results
        assert "groups.min_difference" in results[refused[0]]
        cls = groups_module.classification_of(broker.config.datasets["flat"], "age")
        assert len(broker._ledger.cells(cls)) == 1  # the refused one recorded nothing
    finally:
        broker.close()


RECORD = """
import sys
import numpy as np
import polars as pl
from protab.serve.atom_ledger import Ledger
from protab.serve.atoms import classification

cls = classification("flat", "age", ("age",), pl.DataFrame({"age": [str(a) for a in range(100)]}))
mask = np.zeros(100, dtype=bool)
mask[:98] = True  # ages 0..97
Ledger(sys.argv[1]).judge(cls, [mask], lambda cells: None, lambda kept: RuntimeError("full"))
"""


def test_a_cell_another_process_recorded_meanwhile_is_judged_too(tmp_path):
    """A request is judged outside the lock; a cell another process (an embedded app on the same
    state folder) recorded meanwhile is judged under the lock before anything is recorded."""
    ledger, cls, seen = Ledger(tmp_path), _ages_class(), []

    def check(cells):
        seen.append(len(cells))
        if len(seen) == 1:  # the other process records its cell while this request is judged
            subprocess.run([sys.executable, "-c", RECORD, str(tmp_path)], check=True, cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
        elif len(cells):
            raise QueryRefused("too close to a cell recorded meanwhile")

    with pytest.raises(QueryRefused, match="recorded meanwhile"):
        ledger.judge(cls, [_mask(G.ages(0, 98))], check, lambda kept: RuntimeError("full"))
    assert seen == [0, 1]
    kept = Ledger(tmp_path).cells(cls)
    assert kept.shape == (1, 100) and (kept[0] == _mask(G.ages(0, 97))).all()


def test_the_old_per_user_ledger_is_imported(fresh):
    """A state folder of an earlier version: its groups were answered, so they judge new ones
    (another user's too); the old file is left as it was; unknown datasets are skipped."""
    old = {"users": {"bob": {"flat": {"age": [G.ages(0, 97)]}, "gone": {"x": [["1"]]}}}}
    (fresh["state"] / OLD_FILE).write_text(json.dumps(old), encoding="utf-8")
    broker = Broker(load_config(fresh["config"]))
    try:
        with pytest.raises(QueryRefused, match="group 'to98' holds a part"):
            _ask(broker, {"to98": G.ages(0, 98)}, user="alice")
        cls = groups_module.classification_of(broker.config.datasets["flat"], "age")
        assert [sorted(np.array(cls.leaves)[row].tolist(), key=int) for row in broker._ledger.cells(cls)] == \
            [G.ages(0, 97)]
    finally:
        broker.close()
    assert json.loads((fresh["state"] / OLD_FILE).read_text()) == old
    assert (fresh["state"] / Ledger.file).exists()


def test_the_ledger_keeps_a_bounded_number_of_cells(fresh):
    broker = Broker(load_config(fresh["config"]))
    try:
        broker._ledger.most = 2
        _ask(broker, {"a": G.ages(0, 49)})
        _ask(broker, {"b": G.ages(50, 99)}, user="alice")
        with pytest.raises(QueryRefused) as info:
            _ask(broker, {"c": G.ages(0, 29)}, user="carol")
        assert "the service has answered as many custom groups of 'age'" in str(info.value)
        assert info.value.rule == "groups.min_difference" and "use groups answered before" in info.value.advice
        assert _ask(broker, {"a again": G.ages(0, 49)}, user="carol").frame.height == 2  # nothing new to keep
    finally:
        broker.close()


def test_datasets_over_one_table_with_other_code_lists_keep_each_others_cells(tmp_path):
    """Two datasets over one table declare different ages (0..99 and 0..109): the ledger keeps
    the cells over every code either declared, and each reads them over its own codes."""
    narrow = classification("a", "age", ("age",), pl.DataFrame({"age": G.AGES}), source="persons")
    wide_codes = [str(a) for a in range(110)]
    wide = classification("b", "age", ("age",), pl.DataFrame({"age": wide_codes}), source="persons")
    ledger, no = Ledger(tmp_path), lambda kept: RuntimeError("full")
    ledger.judge(wide, [np.isin(wide_codes, G.ages(90, 109))], lambda cells: None, no)
    ledger.judge(narrow, [_mask(G.ages(0, 49))], lambda cells: None, no)
    assert {tuple(np.array(wide_codes)[r]) for r in Ledger(tmp_path).cells(wide)} == \
        {tuple(G.ages(90, 109)), tuple(G.ages(0, 49))}
    assert {tuple(np.array(G.AGES)[r]) for r in Ledger(tmp_path).cells(narrow)} == \
        {tuple(G.ages(90, 99)), tuple(G.ages(0, 49))}
