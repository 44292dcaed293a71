"""Targeted record swapping wired in: Session.swap keeps the record keys (TRS then the cell
key method), and the [swap] section of protect requests."""

from __future__ import annotations

import polars as pl
import pytest

import protab as pt
from protab import cli
from protab.errors import InputError

POPULATION = """
CREATE TABLE persons AS SELECT i AS pid, i // 3 AS hid,
    ['R1', 'R2', 'R3'][(i // 3) % 3 + 1] AS region,
    ['R1', 'R2', 'R3'][(i // 3) % 3 + 1] || '-' || ((i // 3) % 5)::VARCHAR AS municipality,
    ['a', 'b', 'c', 'd', 'e'][(i // 3 * 7) % 5 + 1] AS citizenship,
    ((i // 3) % 4)::VARCHAR AS hsize, ['F', 'M'][i % 2 + 1] AS sex
FROM range(6000) t(i)
"""
SPEC = dict(household="hid", geography=["region", "municipality"], risk_variables=["citizenship", "sex"],
            similar=[["hsize"]], swap_rate=0.05)
P = pt.PTable.maximum_entropy(D=3, V=1)


@pytest.fixture()
def db(tmp_path):
    path = str(tmp_path / "s.duckdb")
    with pt.Session(path) as s:
        s.con.execute(POPULATION)
        s.add_record_keys("persons", id_column="pid", seed="record-key-seed")
    return path


def test_swapped_records_keep_their_keys_and_feed_the_cell_key_method(db):
    with pt.Session(db) as s:
        summary = s.swap("persons", pt.SwapSpec(**SPEC), seed="swap-seed", out="swapped", log="swap_log")
        assert summary["swapped_households"] >= 100 and summary["achieved_swap_rate"] >= 0.05
        assert s.record_key("swapped") == s.record_key("persons")
        spec = pt.TableSpec({"municipality": None, "citizenship": None})
        before = s.cell_key("persons", spec, P, original=True)
        after = s.cell_key("swapped", spec, P, original=True)
    # national counts by citizenship are unchanged (swapping moves geography only), with the
    # same noise (same records, same keys); municipalities by citizenship change
    national = pl.col("municipality_level") == 0
    assert after.filter(national).equals(before.filter(national))
    inner = pl.col("municipality_level") == 1
    assert (after.filter(inner)["n"] != before.filter(inner)["n"]).sum() > 0


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
replace = true
household = "hid"
geography = ["region", "municipality"]
risk_variables = ["citizenship", "sex"]
similar = [["hsize"]]
swap_rate = 0.05
{seed}
[[tables]]
name = "region_sex"
source = "persons_swapped"
dims = ["region", "sex"]
"""


def test_swap_section_runs_trs_then_ckm(db, tmp_path, capsys):
    (tmp_path / "swap.seed").write_text("request-swap-seed\n", encoding="utf-8")
    (tmp_path / "r.toml").write_text(REQUEST.format(seed='seed_file = "swap.seed"'), encoding="utf-8")
    assert cli.main(["protect", str(tmp_path / "r.toml")]) == 0
    printed = capsys.readouterr()
    assert "swapped" in printed.err and "request-swap-seed" not in printed.out + printed.err
    first = (tmp_path / "out" / "region_sex.csv").read_bytes()
    assert cli.main(["protect", str(tmp_path / "r.toml")]) == 0  # replace = true: the same swap again
    assert (tmp_path / "out" / "region_sex.csv").read_bytes() == first
    with pt.Session(db, read_only=True) as s:
        assert {"persons_swapped", "swap_log"} <= set(s.tables())


def test_swap_section_without_a_seed_writes_nothing(db, tmp_path, monkeypatch):
    monkeypatch.delenv("NO_SUCH_SWAP_SEED", raising=False)
    (tmp_path / "r.toml").write_text(REQUEST.format(seed='seed_env = "NO_SUCH_SWAP_SEED"'), encoding="utf-8")
    with pytest.raises(InputError, match="NO_SUCH_SWAP_SEED"):
        cli.protect(str(tmp_path / "r.toml"))
    with pt.Session(db, read_only=True) as s:
        assert s.tables() == ["persons"]
    assert not (tmp_path / "out").exists()
