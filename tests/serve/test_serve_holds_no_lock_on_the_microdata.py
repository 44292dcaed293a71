"""A running service holds no lock on the microdata file: it serves from a snapshot copied into
its state folder at start-up, so ``protab keys`` (which opens the database read-write) succeeds
while the service runs, and so does any writer. The service goes on answering from the data as
of its start; a restart picks up the new data, and its ETags change with it (the fingerprint
follows the snapshot's source). A clean stop removes the snapshot.

The real service (``python -m protab.serve``) and the real ``protab keys`` in subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest
import serve_fixtures as F

import protab as pt

TABLE = {"dataset": "persons", "dims": ["region", "sex"]}


def _table(server, token):
    r = httpx.post(server.url + "/v1/table", json=TABLE, timeout=30, headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    return r


@pytest.mark.slow
def test_protab_keys_writes_the_database_while_the_service_runs(tmp_path):
    db = F.build_database(tmp_path / "micro.duckdb", persons=800)
    config, tokens = F.write_setup(tmp_path, db, min_population=1)
    state = tmp_path / "serve_state"
    server = F.Server(config)
    try:
        before = _table(server, tokens["bob"])
        snapshots = sorted(p.name for p in state.glob("snapshot-*.duckdb"))
        assert len(snapshots) == 1
        env = {**os.environ, "NEW_SEED": "another-seed-3f1a"}
        keys = subprocess.run([sys.executable, "-m", "protab.cli", "keys", "persons", "--db", db, "--id", "pid",
                               "--seed-env", "NEW_SEED", "--replace"], capture_output=True, text=True, env=env,
                              timeout=120)
        assert keys.returncode == 0, keys.stderr  # the service held no lock on the file
        with pt.Session(db) as s:  # and any writer opens it too
            s.con.execute("CREATE TABLE written_while_served AS SELECT 1 AS x")
        same = _table(server, tokens["bob"])  # the service answers from the data as of its start
        assert same.content == before.content and same.headers["ETag"] == before.headers["ETag"]
    finally:
        server.stop()
    assert not list(state.glob("snapshot-*")), "a clean stop removes the snapshot"
    again = F.Server(config)  # a restart: the new keys, so new noise and a new ETag
    try:
        after = _table(again, tokens["bob"])
        assert after.headers["ETag"] != before.headers["ETag"]
        assert after.json()["rows"] != before.json()["rows"]
    finally:
        again.stop()


def test_the_snapshot_keeps_the_record_keys_and_answers_as_the_database_does(tmp_path):
    """Session.cell_key on the database itself gives the service's answer from its snapshot."""
    from protab.serve.broker import Broker
    from protab.serve.config import load_config

    db = F.build_database(tmp_path / "micro.duckdb", persons=800)
    config, _ = F.write_setup(tmp_path, db, min_population=1, sessions=1)
    cfg = load_config(config)
    b = Broker(cfg)
    try:
        assert b.snapshot is not None and b.snapshot.path != db and os.path.exists(b.snapshot.path)
        got = b.table({"dataset": "persons", "dims": ["sex", "agegroup"]}, cfg.users["bob"]).frame
        with pt.Session(db, read_only=True) as s:
            want = s.cell_key("persons", pt.TableSpec({"sex": F.PERSONS_CODES["sex"],
                                                       "agegroup": F.AGEGROUP_CODES}),
                              pt.PTable.maximum_entropy(**F.PTABLE), threshold=F.THRESHOLD)
        key = ["sex", "agegroup"]
        assert got.sort(key).select(want.columns).equals(want.sort(key).cast(dict(got.select(want.columns).schema)))
        with pt.Session(db) as writer:  # read-write, while the broker runs
            writer.con.execute("CREATE TABLE other AS SELECT 1 AS x")
    finally:
        b.close()
    assert not os.path.exists(b.snapshot.path)


def test_a_database_being_written_is_refused_at_start_up_with_a_clear_message(tmp_path):
    from protab.errors import ProtabError
    from protab.serve.broker import Broker
    from protab.serve.config import load_config

    db = F.build_database(tmp_path / "micro.duckdb", persons=200)
    config, _ = F.write_setup(tmp_path, db, min_population=1, sessions=1)
    cfg = load_config(config)
    with pt.Session(db):  # a writer holds the file (as protab keys does while it runs)
        with pytest.raises(ProtabError) as info:
            Broker(cfg)
    assert "cannot read the database" in str(info.value) and "must finish first" in str(info.value)
    assert not list((tmp_path / "serve_state").glob("snapshot-*")), "nothing half-written is left"
