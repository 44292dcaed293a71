"""The broker's sessions are handed out by user in turn: when every session is busy, a session
given back goes to the waiting user served least recently, each user's requests in their order;
and one user holds at most ``sessions_per_user`` of them (default one fewer than the sessions),
so another user's small query starts at once. One user's many heavy requests cannot hold up
another user's small one: it is served before the heavy user's queued ones.

Blocking fake workloads (threads and events, no clocks): first the pool alone, then the broker's
own requests, whose scan (``Broker._protect``) is held on an event."""

from __future__ import annotations

import threading

import pytest
import serve_fixtures as F


def _until(condition) -> None:
    """Wait until ``condition()`` holds (threads reaching a wait), without a clock."""
    ready = threading.Event()
    while not condition():
        ready.wait(0.005)


def test_a_given_back_item_goes_to_the_user_served_least_recently():
    from protab.serve.fair_pool import FairPool

    pool: FairPool[str] = FairPool()
    for item in ("s1", "s2"):
        pool.add(item)
    order: list[str] = []
    lock = threading.Lock()

    def take(name: str, user: str, got: threading.Event) -> None:
        item = pool.get(user)
        with lock:
            order.append(name)
        got.set()
        release[name].wait(30)
        pool.put(item, user)

    names = [("a1", "alice"), ("a2", "alice"), ("a3", "alice"), ("a4", "alice"), ("a5", "alice"), ("b1", "bob")]
    release = {n: threading.Event() for n, _ in names}
    got = {n: threading.Event() for n, _ in names}
    threads = {n: threading.Thread(target=take, args=(n, u, got[n])) for n, u in names}
    for n in ("a1", "a2"):  # alice's heavy requests take both items
        threads[n].start()
        got[n].wait(30)
    for k, n in enumerate(("a3", "a4", "a5"), start=1):  # three more of hers wait, in this order
        threads[n].start()
        _until(lambda k=k: pool.waiting("alice") == k)
    threads["b1"].start()  # bob's small request comes last
    _until(lambda: pool.waiting() == 4)
    release["a1"].set()  # one of alice's requests finishes: bob is served, before her queued ones
    got["b1"].wait(30)
    assert order == ["a1", "a2", "b1"]
    for done, nxt in (("b1", "a3"), ("a2", "a4"), ("a3", "a5")):  # one finishes at a time: the next is served
        release[done].set()
        got[nxt].wait(30)
    for n in ("a4", "a5"):
        release[n].set()
    for t in threads.values():
        t.join(30)
    assert order == ["a1", "a2", "b1", "a3", "a4", "a5"]  # and hers in the order they came
    assert pool.free() == 2 and pool.waiting() == 0


def test_users_take_turns_while_both_wait():
    from protab.serve.fair_pool import FairPool

    pool: FairPool[str] = FairPool()
    pool.add("s")
    held = pool.get("alice")
    order: list[str] = []
    done = []

    def take(name: str, user: str) -> None:
        item = pool.get(user)
        order.append(name)
        pool.put(item, user)
        done.append(name)

    queued = [("a2", "alice"), ("a3", "alice"), ("a4", "alice"), ("b1", "bob"), ("b2", "bob"), ("c1", "carol")]
    threads = []
    for k, (n, u) in enumerate(queued, start=1):
        threads.append(threading.Thread(target=take, args=(n, u)))
        threads[-1].start()
        _until(lambda k=k: pool.waiting() == k)
    pool.put(held, "alice")
    for t in threads:
        t.join(30)
    # alice was served last: bob, then carol, then alice, in turn; each user's in order
    assert order == ["b1", "c1", "a2", "b2", "a3", "a4"]


def test_one_user_holds_at_most_per_user_items_and_another_user_takes_the_one_left():
    from protab.serve.fair_pool import FairPool

    pool: FairPool[str] = FairPool(per_user=2)
    for item in ("s1", "s2", "s3"):
        pool.add(item)
    mine = [pool.get("alice"), pool.get("alice")]
    got: list[str] = []
    third = threading.Thread(target=lambda: got.append(pool.get("alice")))
    third.start()
    _until(lambda: pool.waiting("alice") == 1)
    assert pool.free() == 1  # her third request waits although an item is free: it is kept for the others
    theirs = pool.get("bob")  # bob's request takes it at once
    assert pool.free() == 0 and not got
    pool.put(theirs, "bob")  # bob's item back: alice still holds two, so it stays free
    assert pool.free() == 1 and not got
    pool.put(mine[0], "alice")  # one of hers back: her waiting request takes it
    third.join(30)
    assert len(got) == 1 and pool.waiting() == 0
    assert pool.get(None) is not None  # nobody in particular (start-up) is not bounded


@pytest.fixture
def broker(tmp_path):
    from protab.serve.broker import Broker
    from protab.serve.config import load_config

    db = F.build_database(tmp_path / "micro.duckdb", persons=300)
    config, _ = F.write_setup(tmp_path, db, min_population=1, sessions=3, cache_size=0)  # 2 sessions per user
    cfg = load_config(config)
    b = Broker(cfg)
    try:
        yield b, cfg.users
    finally:
        b.close()


def test_another_users_small_query_starts_at_once_while_the_heavy_users_queue(broker):
    """Three sessions, two per user: bob's six heavy queries hold two and queue; alice's small
    query takes the third at once, before any of bob's queued ones and before any of his ends."""
    from protab.serve import broker as broker_module

    b, users = broker
    heavy = "SELECT region, sex, agegroup, age, count(*) AS n FROM persons GROUP BY CUBE(region, sex, agegroup, age)"
    small = "SELECT sex, count(*) AS n FROM persons GROUP BY sex"
    scans: list[str] = []
    lock = threading.Lock()
    gates = {f"bob{k}": threading.Event() for k in range(6)}
    protect = b._protect

    def held_scan(s, ds, spec, sums):  # the scan: bob's are held until the test lets them go
        name = threading.current_thread().name
        with lock:
            scans.append(broker_module._USER.get())
        if name in gates:
            gates[name].wait(30)
        return protect(s, ds, spec, sums)

    b._protect = held_scan
    results: dict[str, object] = {}

    def ask(user: str, sql: str) -> None:
        results[threading.current_thread().name] = b.query(sql, users[user])

    threads = {f"bob{k}": threading.Thread(target=ask, args=("bob", heavy), name=f"bob{k}") for k in range(6)}
    threads["alice"] = threading.Thread(target=ask, args=("alice", small), name="alice")
    for k in (0, 1):  # bob's first two heavy queries hold two sessions
        threads[f"bob{k}"].start()
        _until(lambda k=k: len(scans) == k + 1)
    for k in (2, 3, 4, 5):  # four more wait, although the third session is free
        threads[f"bob{k}"].start()
        _until(lambda k=k: b._pool.waiting("bob") == k - 1)
    assert b._pool.free() == 1
    threads["alice"].start()  # alice's small query: answered while bob's still hold theirs
    threads["alice"].join(60)
    assert scans == ["bob", "bob", "alice"] and "alice" in results, scans
    for gate in gates.values():
        gate.set()
    for t in threads.values():
        t.join(60)
    assert scans == ["bob", "bob", "alice", "bob", "bob", "bob", "bob"]
    assert len(results) == 7 and all(getattr(r, "cells", 0) > 0 for r in results.values())
