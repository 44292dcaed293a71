"""``protab serve-token list`` shows each token's effective state — its own and its user's in
serve.toml — and an expiry date as the office gave it; a date stays valid through the end of
that day (UTC)."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

import pytest
import serve_fixtures as F

from protab.serve import auth
from protab.serve import commands as cli
from protab.serve.config import load_config


def _token_cmd(*argv: str) -> None:
    parser = argparse.ArgumentParser(prog="protab")
    cli.add_parsers(parser.add_subparsers(dest="cmd", required=True))
    cli.run(parser.parse_args(list(argv)))


def _listing(config: Path, capsys) -> dict[str, str]:
    """The lines of ``serve-token list`` by token id."""
    _token_cmd("serve-token", "list", "--config", str(config))
    lines = capsys.readouterr().out.splitlines()
    return {line.split()[0]: line for line in lines[1:]}


@pytest.fixture
def setup(tmp_path):
    """The fixture's serve.toml (carol expired, dave revoked there) with a tokens file."""
    config, _ = F.write_setup(tmp_path, ":memory:")
    return config, load_config(config, database=":memory:")


def test_list_shows_the_users_state_from_the_config(setup, capsys):
    config, cfg = setup
    ids = {user: auth.add_token(cfg, user)[0] for user in ("bob", "carol", "dave")}
    listing = _listing(config, capsys)
    assert listing[ids["bob"]].endswith("active")
    assert listing[ids["carol"]].endswith("expired (user)")  # expires = 2020-01-31 in serve.toml
    assert listing[ids["dave"]].endswith("revoked (user)")  # revoked = true in serve.toml
    assert listing["old00001"].endswith("expired") and listing["gone0001"].endswith("revoked")
    assert sum(line.endswith("active") for line in listing.values()) == 2  # bob's and alice's own


def test_expiry_is_listed_as_the_date_given(setup, capsys):
    config, _ = setup
    _token_cmd("serve-token", "add", "--config", str(config), "--user", "bob", "--expires", "2027-06-30")
    token = capsys.readouterr().out.strip()
    listing = _listing(config, capsys)
    line = next(v for v in listing.values() if v.split()[1] == "bob")
    assert "until end of 2027-06-30" in line and "2027-07-01" not in line
    assert token not in line


def test_a_date_is_valid_through_the_end_of_that_day(setup, monkeypatch):
    _, cfg = setup
    _, token = auth.add_token(cfg, "bob", "2027-06-30")
    store = auth.TokenStore(cfg)
    last = dt.datetime(2027, 6, 30, 23, 59, 59, tzinfo=dt.timezone.utc)
    monkeypatch.setattr(auth, "_now", lambda: last)
    assert store.authenticate(f"Bearer {token}").name == "bob"
    monkeypatch.setattr(auth, "_now", lambda: last + dt.timedelta(seconds=1))
    with pytest.raises(auth.AuthError, match="expired .*2027-06-30"):
        store.authenticate(f"Bearer {token}")
