"""A protect request with [swap] is all or nothing: the swapped records are kept in the database
only when every table was protected and written; a failure leaves the database and the output
folder as they were, and the rerun needs no option the command does not have."""

from __future__ import annotations

import pytest

import protab as pt
from protab import cli

POPULATION = """
CREATE TABLE persons AS SELECT i AS pid, i // 3 AS hid,
    ['R1', 'R2', 'R3'][(i // 3) % 3 + 1] AS region,
    ['R1', 'R2', 'R3'][(i // 3) % 3 + 1] || '-' || ((i // 3) % 5)::VARCHAR AS municipality,
    ['a', 'b', 'c', 'd', 'e'][(i // 3 * 7) % 5 + 1] AS citizenship,
    ((i // 3) % 4)::VARCHAR AS hsize, ['F', 'M'][i % 2 + 1] AS sex, (i % 90) AS age
FROM range(3000) t(i)
"""

REQUEST = """
database = "s.duckdb"
output = "out"
formats = ["csv"]
[ptable]
maximum_entropy = {{ D = 3, V = 1 }}
[swap]
source = "persons"
out = "persons_swapped"
log = "swap_log"
household = "hid"
geography = ["region", "municipality"]
risk_variables = ["citizenship", "sex"]
similar = [["hsize"]]
swap_rate = 0.05
seed_file = "swap.seed"
{extra}
[[tables]]
name = "region_sex"
source = "persons_swapped"
dims = ["region", "sex"]
[[tables]]
name = "second"
source = "persons_swapped"
dims = ["{second}"]
"""


@pytest.fixture()
def folder(tmp_path):
    with pt.Session(str(tmp_path / "s.duckdb")) as s:
        s.con.execute(POPULATION)
        s.add_record_keys("persons", id_column="pid", seed="record-key-seed")
    (tmp_path / "swap.seed").write_text("request-swap-seed\n", encoding="utf-8")
    return tmp_path


def _tables(folder) -> list[str]:
    with pt.Session(str(folder / "s.duckdb"), read_only=True) as s:
        return s.tables()


def test_a_failing_table_keeps_no_swapped_records(folder, capsys):
    """The second table names a column the swapped records lack: nothing is kept, nothing written."""
    with pt.Session(str(folder / "s.duckdb")) as s:  # a table the swapped one lacks: age is not carried
        s.con.execute("ALTER TABLE persons DROP COLUMN age")
    (folder / "r.toml").write_text(REQUEST.format(extra="", second="age"), encoding="utf-8")
    assert cli.main(["protect", str(folder / "r.toml")]) == 2
    capsys.readouterr()
    assert _tables(folder) == ["persons"]
    assert not (folder / "out").exists()
    # fixed request: runs without any option to replace what a failed run left
    (folder / "r.toml").write_text(REQUEST.format(extra="", second="citizenship"), encoding="utf-8")
    assert cli.main(["protect", str(folder / "r.toml")]) == 0, capsys.readouterr().err
    assert _tables(folder) == ["persons", "persons_swapped", "swap_log"]
    with pt.Session(str(folder / "s.duckdb"), read_only=True) as s:
        assert s.record_key("persons_swapped") == s.record_key("persons")
    assert sorted(p.name for p in (folder / "out").iterdir()) == ["protab_run.json", "region_sex.csv", "second.csv"]


def test_a_failing_write_keeps_no_swapped_records(folder, capsys, monkeypatch):
    (folder / "r.toml").write_text(REQUEST.format(extra="", second="citizenship"), encoding="utf-8")

    def fail(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("protab.cli.protect_request.write_all", fail)
    assert cli.main(["protect", str(folder / "r.toml")]) == 1
    assert "No space left" in capsys.readouterr().err
    assert _tables(folder) == ["persons"]


def test_the_rerun_names_the_request_option_to_replace(folder, capsys):
    (folder / "r.toml").write_text(REQUEST.format(extra="", second="citizenship"), encoding="utf-8")
    assert cli.main(["protect", str(folder / "r.toml")]) == 0
    capsys.readouterr()
    assert cli.main(["protect", str(folder / "r.toml")]) == 2
    err = capsys.readouterr().err
    assert "replace = true in [swap]" in err and "--replace" not in err
    (folder / "r.toml").write_text(REQUEST.format(extra="replace = true", second="citizenship"), encoding="utf-8")
    assert cli.main(["protect", str(folder / "r.toml")]) == 0, capsys.readouterr().err


def test_the_summary_line_says_requested_and_achieved_rate(folder, capsys):
    (folder / "r.toml").write_text(REQUEST.format(extra="max_swap_rate = 0.2", second="citizenship"),
                                   encoding="utf-8")
    assert cli.main(["protect", str(folder / "r.toml")]) == 0
    err = capsys.readouterr().err
    assert "requested 0.05, capped at 0.2" in err and "risky households" in err
