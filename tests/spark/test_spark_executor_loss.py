"""Killing an executor in the middle of a request on a two-executor cluster
(``local-cluster[2,1,1024]``: a master, two workers and their executors on this machine, the
executors JVMs of their own, children of this test's driver JVM): with checkpoint="replicated"
or "reliable" the request still finishes, with DuckDB's cells (docs/spark.md, "Temporary
relations and executor loss")."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from spark_fixtures import keyed_cell_key, require_spark

import protab as pt

require_spark()
pytestmark = pytest.mark.slow  # a cluster of two executor JVMs: tens of seconds to start

RECORDS = pl.DataFrame({"pid": list(range(1, 401)), "region": [f"R{i % 4}" for i in range(400)],
                        "sex": ["f" if i % 5 < 3 else "m" for i in range(400)],
                        "age": [i % 3 for i in range(400)]})
SPEC = pt.TableSpec({"region": pt.Hierarchy.from_code_lengths(["R0", "R1", "R2", "R3"], [1, 1]),
                     "sex": None, "age": None})
def _cell_key(s: pt.Session) -> pl.DataFrame:
    return keyed_cell_key(s, RECORDS, SPEC, "executor-loss")


def _children(pid: int) -> list[int]:
    """Every process descending from ``pid`` (read from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, parent in parents.items() if parent == p]
        found += kids
        todo += kids
    return found


def _executors() -> list[int]:
    """This test's executor JVMs: descendants of this process whose command line is Spark's executor."""
    pids = []
    for pid in _children(os.getpid()):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"CoarseGrainedExecutorBackend" in cmd:
            pids.append(pid)
    return pids


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from spark_fixtures import own_spark

    if not sys.platform.startswith("linux"):
        pytest.skip("finds the executor processes in /proc")
    import pyspark

    folder = tmp_path_factory.mktemp("spark-checkpoints")
    work = Path(pyspark.__file__).parent / "work"  # where local-cluster's workers run their executors
    # the peers a block's second copy may go to are looked up again every second (Spark's
    # default is a minute): the executor the master starts in place of a killed one is known soon
    conf = {"spark.checkpoint.dir": str(folder), "spark.executor.memory": "768m", "spark.storage.cachedPeersTtl": "1000"}
    for s in own_spark(conf,
                       master="local-cluster[2,1,1024]"):
        app = s.sparkContext.applicationId
        yield s
    shutil.rmtree(work / app, ignore_errors=True)  # this test's executors' folder, nothing else
    if work.is_dir() and not any(work.iterdir()):
        work.rmdir()


@pytest.fixture(scope="module")
def expected() -> pl.DataFrame:
    with pt.Session(":memory:") as duck:
        return _cell_key(duck)


def test_an_executor_lost_with_local_checkpoints_is_a_protab_error_naming_what_to_set(spark):
    with pt.Session.spark(spark, checkpoint="local") as s:
        _wait_for_two_executors()
        made = s.engine.checkpoint
        calls = []

        def kill_after_three(frame):
            kept = made(frame)
            calls.append(1)
            if len(calls) == 3:
                os.kill(_executors()[0], signal.SIGKILL)
            return kept

        s.engine.checkpoint = kill_after_three
        with pytest.raises(pt.ProtabError, match=r"lost an executor.*checkpoint='local'.*spark\.checkpoint\.dir"):
            _cell_key(s)


def _wait_for_two_executors() -> None:
    """Both executors up (the master replaces one killed by an earlier test)."""
    for _ in range(60):
        if len(_executors()) == 2:
            return
        time.sleep(1)
    assert len(_executors()) == 2


@pytest.mark.parametrize("mode", ["replicated", "reliable"])
def test_a_request_survives_the_loss_of_an_executor(spark, expected, mode):
    with pt.Session.spark(spark, checkpoint=mode) as s:
        _wait_for_two_executors()
        time.sleep(2)  # the peer lists of both executors name each other (cachedPeersTtl)
        _cell_key(s)  # both executors warm
        made = s.engine.checkpoint
        calls = []

        def kill_after_three(frame):
            kept = made(frame)
            calls.append(1)
            if len(calls) == 3:  # relations made before it are held (in part) by the executor killed
                os.kill(_executors()[0], signal.SIGKILL)
            return kept

        s.engine.checkpoint = kill_after_three
        got = _cell_key(s)
        assert len(calls) > 3
        assert_frame_equal(got, expected)
