"""The attribute-disclosure rules in a protect request (``direct_disclosure``, ``coalition``,
``k_disclosure`` in a ``[[tables]]`` entry with ``method = "suppression"``): the request writes
what ``Session.suppress`` with the same keywords publishes; bad keys are refused up front."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import protab as pt
from protab import cli

DATA = Path(__file__).resolve().parents[1] / "data" / "gauss_rules" / "inputs" / "mun_accidents.csv"
TABLE = '[[tables]]\nname = "acc"\nsource = "acc"\ndims = ["mun", "inj"]\nmethod = "suppression"\nfreq = "freq"\n'


def _protect(tmp_path: Path, body: str, capsys) -> tuple[int, str]:
    db = tmp_path / "s.duckdb"
    if not db.exists():
        with pt.Session(str(db)) as s:
            s.register("acc", pl.read_csv(DATA))
    (tmp_path / "req.toml").write_text(f'database = "{db.as_posix()}"\n' + body)
    capsys.readouterr()
    rc = cli.main(["protect", str(tmp_path / "req.toml")])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("keys, kwargs", [
    ('direct_disclosure = ["inj"]\ncoalition = 1\n', dict(direct_disclosure=["inj"], coalition=1)),
    ("direct_disclosure = true\nmin_frequency = 3\n", dict(direct_disclosure=True, min_frequency=3)),
    ("k_disclosure = 1\n", dict(k_disclosure=1)),
])
def test_a_request_publishes_what_the_session_does(tmp_path, capsys, keys, kwargs):
    rc, err = _protect(tmp_path, TABLE + keys, capsys)
    assert rc == 0, err
    out = pl.read_csv(tmp_path / "protab_output" / "acc.csv")
    with pt.Session(str(tmp_path / "s.duckdb")) as s:
        want = s.suppress("acc", pt.TableSpec(["mun", "inj"], freq="freq"), **kwargs)
    j = want.join(out, on=["mun", "inj"], suffix="_out")
    assert j.height == want.height
    assert ((j["suppressed"] != "no") == j["n_out"].is_null()).all()
    assert (j["suppressed"] != "no").any()


@pytest.mark.parametrize("keys, message", [
    ("k_disclosure = 0\n", "k_disclosure"),
    ("coalition = -1\ndirect_disclosure = true\n", "coalition"),
    ('direct_disclosure = "inj"\n', "direct_disclosure"),  # a list of names or true
    ('direct_disclosure = ["age"]\n', "does not have: 'age'"),
    ("", "needs min_frequency"),
])
def test_bad_disclosure_keys_are_refused(tmp_path, capsys, keys, message):
    rc, err = _protect(tmp_path, TABLE + keys, capsys)
    assert rc == 2 and message in err, err
    assert not (tmp_path / "protab_output").exists()


def test_disclosure_keys_belong_to_suppression(tmp_path, capsys):
    body = TABLE.replace('method = "suppression"\n', "").replace('freq = "freq"\n', "") + "k_disclosure = 1\n"
    rc, err = _protect(tmp_path, body, capsys)
    assert rc == 2 and 'k_disclosure belongs to method = "suppression"' in err, err
