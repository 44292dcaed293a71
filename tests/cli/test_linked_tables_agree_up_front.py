"""The suppressed tables of one source are suppressed together (linked), so they must agree on
what their one table of cells is built from — null_code and drop_empty as well as sums, weight,
freq, null_sums, min_frequency, protect_zeros and the optimal mode's keys. A disagreement is refused with the request's
other checks, naming the key and the two tables, before any database is opened."""

from __future__ import annotations

import pytest

from protab import cli
from protab.cli.protect_checks import LINKED_KEYS
from protab.session import Session

TABLE = '[[tables]]\nname = "{name}"\nsource = "persons"\ndims = ["{dim}"]\nmethod = "suppression"\n{extra}\n'

# key -> (the first table's extra lines, the second's, the values the message shows or None)
CASES = {
    "null_code": ('min_frequency = 3\nnull_code = "Unknown"', "min_frequency = 3", ("'Unknown'", "none")),
    "drop_empty": ("min_frequency = 3\ndrop_empty = true", "min_frequency = 3", ("true", "false")),
    "weight": ('min_frequency = 3\nweight = "w"', "min_frequency = 3", ("'w'", "none")),
    "freq": ('min_frequency = 3\nfreq = "n"', "min_frequency = 3", ("'n'", "none")),
    "min_frequency": ("min_frequency = 3", "min_frequency = 4", None),
    "protect_zeros": ("min_frequency = 3\nprotect_zeros = true", "min_frequency = 3", None),
    "direct_disclosure": ("min_frequency = 3\ndirect_disclosure = true", "min_frequency = 3", None),
    "coalition": ("direct_disclosure = true\ncoalition = 2", "direct_disclosure = true", None),
    "k_disclosure": ("k_disclosure = 1", "k_disclosure = 2", None),
    "suppression_method": ('min_frequency = 3\nsuppression_method = "optimal"', "min_frequency = 3", None),
    "suppression_cost": ('min_frequency = 3\nsuppression_cost = "cells"', "min_frequency = 3", None),
    "time_limit": ("min_frequency = 3\ntime_limit = 10", "min_frequency = 3\ntime_limit = 20", None),
}


@pytest.fixture
def request_file(tmp_path, monkeypatch):
    """A request beside a 'database' that is not one: a refusal made after opening it would be
    DuckDB's; and a Session that would fail the test if made."""
    (tmp_path / "protab.duckdb").write_bytes(b"not a database\n" * 10)

    def refuse(*args, **kwargs):
        raise AssertionError("a Session was opened before the linked tables were checked")

    monkeypatch.setattr(Session, "__init__", refuse)

    def write(first: str, second: str) -> str:
        body = TABLE.format(name="by_sex", dim="sex", extra=first) + TABLE.format(name="by_age", dim="age",
                                                                                    extra=second)
        (tmp_path / "r.toml").write_text(body, encoding="utf-8")
        return str(tmp_path / "r.toml")

    return write


def test_every_key_linked_suppression_needs_is_checked():
    assert set(CASES) | {"sums", "null_sums"} == set(LINKED_KEYS)


@pytest.mark.parametrize("key", list(CASES))
def test_a_disagreement_is_refused_naming_the_key_and_both_tables(request_file, capsys, key):
    first, second, shown = CASES[key]
    assert cli.main(["protect", request_file(first, second)]) == 2
    err = capsys.readouterr().err
    assert f"must agree on {key}" in err and "'by_sex'" in err and "'by_age'" in err, err
    assert "cannot open" not in err and "Traceback" not in err
    if shown is not None:
        assert f"table 'by_sex' has {shown[0]}, table 'by_age' has {shown[1]}" in err
    else:  # thresholds are not shown
        assert "3" not in err.split("agree on")[1] and "4" not in err.split("agree on")[1]


def test_publish_refuses_it_as_protect_does(request_file, capsys, tmp_path):
    first, second, _ = CASES["null_code"]
    assert cli.main(["publish", request_file(first, second), "--to", str(tmp_path / "p.duckdb")]) == 2
    assert "must agree on null_code" in capsys.readouterr().err
    assert not (tmp_path / "p.duckdb").exists()


def test_tables_that_agree_pass_to_the_database(request_file, capsys):
    """The same keys on both tables: the check lets the request through, and the next step is
    opening the database (here refused by the stand-in)."""
    with pytest.raises(AssertionError, match="a Session was opened"):
        cli.protect(request_file('min_frequency = 3\nnull_code = "Unknown"', 'min_frequency = 3\nnull_code = "Unknown"'))
