"""``protab protect``, ``protab programme`` and ``protab publish`` carry a run fingerprint in
their outputs: a random run id, the protab version, the time and the SHA-256 of every file
(or published table), written in the same all-or-nothing step as the tables; nothing secret."""

from __future__ import annotations

import hashlib
import json
import uuid

import duckdb
import pytest

from protab import cli
from protab._run_manifest import table_digest

REQUEST = '''
[ptable]
maximum_entropy = { D = 3, V = 1 }
[[tables]]
name = "region_sex"
source = "persons"
dims = ["region", "sex"]
'''

PROGRAMME = '''
database = "{db}"
formats = ["csv", "parquet"]
source = "persons"
[ptable]
maximum_entropy = {{ D = 3, V = 1 }}
[classifications.sex]
codes = ["F", "M"]
[[hypercubes]]
name = "HC01"
dims = {{ sex = "sex" }}
'''


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("fingerprint")
    db = root / "d.duckdb"
    assert cli.main(["demo", "--persons", "200", "--db", str(db), "--out", str(root / "demo"),
                     "--seed", "fingerprint-secret-seed"]) == 0
    (root / "req.toml").write_text(REQUEST, encoding="utf-8")
    return root, db


def _manifest(folder):
    text = (folder / "protab_run.json").read_text(encoding="utf-8")
    assert "fingerprint-secret-seed" not in text
    return json.loads(text)


def _check(folder, manifest, command):
    assert set(manifest) == {"protab_run", "run_id", "protab_version", "created", "command", "files"}
    assert manifest["command"] == command and uuid.UUID(hex=manifest["run_id"]).version == 4
    written = sorted(p.name for p in folder.iterdir() if p.name != "protab_run.json")
    assert sorted(manifest["files"]) == written
    for name, entry in manifest["files"].items():
        assert set(entry) == {"sha256", "bytes", "run_id"} and entry["run_id"] == manifest["run_id"]
        assert entry["sha256"] == hashlib.sha256((folder / name).read_bytes()).hexdigest()


def test_protect_writes_the_digest_of_every_file_and_a_new_run_id_each_run(demo):
    root, db = demo
    ids = []
    for _ in range(2):
        assert cli.main(["protect", str(root / "req.toml"), "--db", str(db), "--out", str(root / "out")]) == 0
        manifest = _manifest(root / "out")
        _check(root / "out", manifest, "protect")
        ids.append(manifest["run_id"])
    assert ids[0] != ids[1]  # same records, keys and p-table: the id is random, not derived from them


def test_a_programme_writes_the_digest_of_every_file(demo):
    root, db = demo
    path = root / "programme.toml"
    path.write_text(PROGRAMME.format(db=db), encoding="utf-8")
    assert cli.main(["programme", str(path), "--out", str(root / "prog")]) == 0
    manifest = _manifest(root / "prog")
    _check(root / "prog", manifest, "programme")
    assert {"summary.csv", "HC01.HC01.csv", "HC01.HC01.parquet"} <= set(manifest["files"])


def test_publish_records_the_run_and_the_digest_of_every_table(demo):
    root, db = demo
    target = root / "p.duckdb"
    assert cli.main(["publish", str(root / "req.toml"), "--db", str(db), "--to", str(target), "--replace"]) == 0
    with duckdb.connect(str(target), read_only=True) as con:
        rows = con.execute("SELECT run_id, protab_version, table_name, sha256 FROM protab_run").fetchall()
        assert [r[2] for r in rows] == ["region_sex"]
        assert uuid.UUID(hex=rows[0][0]).version == 4
        import polars as pl

        frame = pl.from_arrow(con.sql("SELECT * FROM region_sex").to_arrow_table())
        assert rows[0][3] == table_digest(frame)
