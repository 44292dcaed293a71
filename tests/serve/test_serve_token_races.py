"""The tokens file of the query service under concurrent ``protab serve-token`` commands, and the
running service's reload of it.

Sixteen commands at once (real processes of the installed command line, eight ``add`` and
eight ``revoke``) must lose no change: every token printed is in the file and lets its user in,
every token revoked is refused by the running service. The service reloads every new version
of the file, even one of the same size and times, and keeps the tokens it had when a version
cannot be read (a file edited by hand, half saved).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import serve_fixtures as F

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")

from protab.errors import InputError  # noqa: E402
from protab.serve import auth  # noqa: E402
from protab.serve.config import load_config  # noqa: E402

N = 8  # adds and revokes each: 16 processes at once


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    yield from F.serve(tmp_path_factory, name="token_races")


def _command(config: Path, *argv: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "protab.cli", "serve-token", *argv, "--config", str(config)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=config.parent)


def _status(served, token: str) -> int:
    return httpx.get(served["url"] + "/v1/catalog", headers={"Authorization": f"Bearer {token}"}, timeout=30).status_code


@pytest.mark.slow
def test_concurrent_add_and_revoke_lose_nothing(served):
    config = served["config"]
    cfg = load_config(config, database=":memory:")
    doomed = [auth.add_token(cfg, "bob") for _ in range(N)]  # (id, token) to revoke
    for _, token in doomed:
        assert _status(served, token) == 200
    procs = [_command(config, "add", "--user", "bob") for _ in range(N)]
    procs += [_command(config, "revoke", "--id", ident) for ident, _ in doomed]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    printed = [out.strip() for out, _ in outs[:N]]
    assert len(set(printed)) == N and all(t.startswith(auth.TOKEN_PREFIX) for t in printed)
    assert all("revoked 1 token(s)" in out for out, _ in outs[N:])

    entries = {e.sha256: e for e in auth.read_tokens(served["tokens_file"])}
    for token in printed:  # every token printed is kept, active
        assert auth.token_hash(token) in entries and not entries[auth.token_hash(token)].revoked
    for _, token in doomed:  # every revocation is kept
        assert entries[auth.token_hash(token)].revoked
    assert [_status(served, t) for t in printed] == [200] * N
    assert [_status(served, t) for _, t in doomed] == [401] * N
    # the file is its owner's only, and no temporary file is left beside it
    assert stat.S_IMODE(os.stat(served["tokens_file"]).st_mode) == 0o600
    assert not list(served["folder"].glob(".tokens.json.*"))


@pytest.fixture
def store(tmp_path):
    """A token store on the fixture's serve.toml and tokens file (alice's token active, one of
    her tokens revoked), with bob's new token; returns (store, tokens, config)."""
    config, tokens = F.write_setup(tmp_path, ":memory:")
    cfg = load_config(config, database=":memory:")
    ident, tokens["bob_new"] = auth.add_token(cfg, "bob")
    tokens["bob_new_id"] = ident
    return auth.TokenStore(cfg), tokens, cfg


def _bearer(token: str) -> str:
    return f"Bearer {token}"


def test_a_version_of_the_same_size_and_times_is_reloaded(store):
    """A revocation written within one tick of the file system's clock, in a file of the same size:
    the service must not keep the old version for its equal size and modification time."""
    tokens_store, tokens, cfg = store
    path = cfg.tokens_file
    assert tokens_store.authenticate(_bearer(tokens["bob_new"])).name == "bob"
    before = os.stat(path)
    entries = auth.read_tokens(path)
    # revoked: true is one character shorter than false; a created text one longer keeps the size
    changed = [auth.TokenEntry(e.id, e.user, e.sha256, e.created + " ", e.expires, True)
               if e.id == tokens["bob_new_id"] else e for e in entries]
    auth.write_tokens(path, changed)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    with pytest.raises(auth.AuthError, match="revoked"):
        tokens_store.authenticate(_bearer(tokens["bob_new"]))


def test_a_version_that_cannot_be_read_keeps_the_tokens_read_before(store):
    tokens_store, tokens, cfg = store
    path = cfg.tokens_file
    assert tokens_store.authenticate(_bearer(tokens["alice"])).name == "alice"
    entries = auth.read_tokens(path)
    whole = path.read_text(encoding="utf-8")
    path.write_text(whole[: len(whole) // 2], encoding="utf-8")  # saved half-way, not through write_tokens
    assert tokens_store.authenticate(_bearer(tokens["alice"])).name == "alice"
    with pytest.raises(auth.AuthError, match="revoked"):
        tokens_store.authenticate(_bearer(tokens["alice_revoked"]))
    with pytest.raises(auth.AuthError, match="invalid token"):
        tokens_store.authenticate(_bearer("ptk_not-a-token"))
    auth.write_tokens(path, entries)  # a whole version again, with bob's token revoked: read at once
    auth.revoke_tokens(cfg, token_id=tokens["bob_new_id"])
    with pytest.raises(auth.AuthError, match="revoked"):
        tokens_store.authenticate(_bearer(tokens["bob_new"]))
    assert tokens_store.authenticate(_bearer(tokens["alice"])).name == "alice"


def test_a_broken_tokens_file_still_stops_the_start_up(store):
    _, _, cfg = store
    cfg.tokens_file.write_text('{"tokens": [', encoding="utf-8")
    with pytest.raises(InputError, match="cannot read the tokens file"):
        auth.TokenStore(cfg)
