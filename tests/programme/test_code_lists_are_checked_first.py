"""A programme's classifications are checked against its records before anything is computed:
a code the records hold that its classification does not declare, or NULLs that a table would
publish without a declared null_code, is refused naming the classification, the column and the
codes, with no hypercube protected, no swap run and no output or staging folder made."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import protab as pt
from protab.programme import classifications as cls
from protab.programme.definition import hypercubes
from protab.programme.state import staging_folder
from protab.session import Session

CITIZENSHIP = 'codes = ["national", "EU", "non-EU"]'


@pytest.fixture
def no_tables(monkeypatch):
    """A run that reaches the first table fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("a table was computed before the records were checked")

    monkeypatch.setattr(Session, "cell_key", refuse)
    monkeypatch.setattr(Session, "key_sums", refuse)


def _edit(workdir: Path, old: str, new: str) -> Path:
    path = workdir / "programme.toml"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


def _sql(workdir: Path, statement: str) -> None:
    with pt.Session(str(workdir / "demo.duckdb")) as s:
        s.con.execute(statement)


def _refused(workdir: Path, path: Path, error: type = pt.SpecError) -> str:
    out = workdir / "out"
    with pytest.raises(error) as info:
        pt.Programme(path).run(out=out, quiet=True)
    assert not out.exists() and not staging_folder(out).exists()
    with pt.Session(str(workdir / "demo.duckdb"), read_only=True) as s:
        assert not s.exists("persons_swapped")  # the swap was not run
    return str(info.value)


def _count(workdir: Path, sql: str) -> int:
    with pt.Session(str(workdir / "demo.duckdb"), read_only=True) as s:
        return int(s.sql(sql).item())


def test_an_undeclared_code_is_refused_before_any_file_or_staging_folder(workdir, no_tables):
    path = _edit(workdir, CITIZENSHIP, 'codes = ["national", "EU"]')
    records = _count(workdir, "SELECT count(*) FROM persons WHERE citizenship = 'non-EU'")
    assert records > 0
    msg = _refused(workdir, path)
    assert "column 'citizenship' of 'persons'" in msg and "[classifications.citizenship]" in msg
    assert "1 code" in msg and "'non-EU'" in msg and f"in {records:,} records" in msg
    assert msg.startswith("programme: ")


def test_many_undeclared_codes_are_shown_first_five_and_counted(workdir, no_tables):
    # municipality classified by a declared list of three of its codes
    with pt.Session(str(workdir / "demo.duckdb"), read_only=True) as s:
        codes = s.sql("SELECT DISTINCT municipality FROM persons ORDER BY 1")["municipality"].to_list()
    kept = codes[:3]
    text = (workdir / "programme.toml").read_text(encoding="utf-8")
    text = text.replace('columns = ["region", "municipality"]\nlevels = ["nuts2", "lau"]',
                        "codes = [" + ", ".join(f'"{c}"' for c in kept) + "]")
    text = text.replace('"geo:nuts2"', '"geo"').replace('"geo:lau"', '"geo"')
    (workdir / "programme.toml").write_text(text, encoding="utf-8")
    msg = _refused(workdir, workdir / "programme.toml")
    undeclared = sorted(set(codes) - set(kept))
    assert f"holds {len(undeclared):,} codes" in msg
    assert ", ".join(repr(c) for c in undeclared[:5]) + f", … ({len(undeclared):,} in all)" in msg
    assert "[classifications.geo]" in msg and "column 'municipality'" in msg


def test_a_margin_code_in_the_records_is_refused(workdir, no_tables):
    _sql(workdir, "UPDATE persons SET sex = 'Total' WHERE pid % 97 = 0")
    msg = _refused(workdir, workdir / "programme.toml")
    assert "'Total'" in msg and "coarser levels (margins)" in msg and "column 'sex'" in msg


def test_nulls_without_a_null_code_are_refused(workdir, no_tables):
    _sql(workdir, "UPDATE persons SET citizenship = NULL WHERE pid % 50 = 0")
    nulls = _count(workdir, "SELECT count(*) FROM persons WHERE citizenship IS NULL")
    msg = _refused(workdir, workdir / "programme.toml")
    assert f"column 'citizenship' of 'persons' (classification 'citizenship') is missing (NULL) in {nulls:,}" in msg
    assert "HC03.region_citizenship_sex" in msg and "without a null_code" in msg


def _null_code(workdir: Path, code: str, declared: str) -> Path:
    _sql(workdir, "UPDATE persons SET citizenship = NULL WHERE pid % 50 = 0")
    text = (workdir / "programme.toml").read_text(encoding="utf-8")
    text = text.replace(CITIZENSHIP, f"codes = {declared}")
    for table in ("region_citizenship_sex", "citizenship_sex"):
        text = text.replace(f'name = "{table}"\n', f'name = "{table}"\nnull_code = "{code}"\n')
    (workdir / "programme.toml").write_text(text, encoding="utf-8")
    return workdir / "programme.toml"


def test_a_null_code_the_classification_lacks_is_refused(workdir, no_tables):
    msg = _refused(workdir, _null_code(workdir, "Unknown", '["national", "EU", "non-EU"]'))
    assert "null_code 'Unknown'" in msg and "does not declare" in msg and "[classifications.citizenship]" in msg


def test_a_null_code_the_records_hold_is_refused(workdir, no_tables):
    msg = _refused(workdir, _null_code(workdir, "EU", '["national", "EU", "non-EU"]'))
    assert "holds the code 'EU' too" in msg


def test_nulls_with_a_declared_null_code_are_published(workdir):
    path = _null_code(workdir, "Unknown", '["national", "EU", "non-EU", "Unknown"]')
    nulls = _count(workdir, "SELECT count(*) FROM persons WHERE citizenship IS NULL")
    pt.Programme(path).run(out=workdir / "out", quiet=True)
    table = pl.read_csv(workdir / "out" / "HC03.citizenship_sex.csv", infer_schema=False)
    assert "Unknown" in table["citizenship"].to_list() and nulls > 0


def test_the_check_reads_the_records_in_one_statement(workdir):
    cfg = pt.Programme(workdir / "programme.toml").cfg
    cubes = hypercubes(cfg)
    seen: list[str] = []
    with pt.Session(str(workdir / "demo.duckdb"), read_only=True) as s:
        built = cls.build(s, cfg, cubes, "persons", workdir)
        for name in ("rows", "arrow", "execute"):
            real = getattr(s.engine, name)

            def spy(sql, params=None, real=real):
                seen.append(sql)
                return real(sql, params)

            setattr(s.engine, name, spy)
        cls.check_records(s, cfg, cubes, "persons", built)
    assert len([q for q in seen if '"persons"' in q]) == 1, seen


# -- the check against an independent reckoning, on records of many shapes -----------------------

CODES = ["a", "b", "c", "d", "e", "f", "g"]


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(records=st.lists(st.tuples(st.sampled_from(CODES + [None]), st.sampled_from(CODES), st.integers(0, 9)),
                        min_size=1, max_size=60),
       declared_x=st.sets(st.sampled_from(CODES), min_size=1), declared_y=st.sets(st.sampled_from(CODES), min_size=1))
def test_refused_exactly_when_a_code_is_undeclared(records, declared_x, declared_y):
    frame = pl.DataFrame(records, schema={"x": pl.String, "y": pl.String, "z": pl.Int64}, orient="row")
    cfg = {"classifications": {"X": {"codes": sorted(declared_x)}, "Y": {"codes": sorted(declared_y)},
                               "Z": {"codes": list(range(10))}},
           "hypercubes": [{"name": "A", "dims": {"x": "X", "y": "Y"}, "tables": [{"name": "t", "null_code": "a"}]},
                          {"name": "B", "dims": {"z": "Z", "y": "Y"}}]}
    cubes = hypercubes(cfg)
    with pt.Session(":memory:") as s:
        s.register("r", frame)
        built = cls.build(s, cfg, cubes, "r", Path("."))
        bad_x = sorted({x for x, _, _ in records if x is not None} - declared_x)
        bad_y = sorted({y for _, y, _ in records} - declared_y)
        nulls = sum(x is None for x, _, _ in records)
        clash = nulls and ("a" not in declared_x or "a" in {x for x, _, _ in records})
        if bad_x or bad_y or clash:
            with pytest.raises(pt.SpecError) as info:
                cls.check_records(s, cfg, cubes, "r", built)
            msg = str(info.value)
            if bad_x:  # x comes first (its hypercube does)
                assert "column 'x'" in msg and f"holds {len(bad_x)} code" in msg and repr(bad_x[0]) in msg
            elif bad_y:
                assert "column 'y'" in msg and f"holds {len(bad_y)} code" in msg and repr(bad_y[0]) in msg
            else:
                assert "column 'x'" in msg and f"(NULL) in {nulls} records" in msg
        else:
            cls.check_records(s, cfg, cubes, "r", built)


def test_a_programme_copied_elsewhere_reads_its_own_records(workdir, tmp_path):
    """The check reads the programme's source, not a table of that name elsewhere: the same
    programme passes on the demo's records and fails on a copy whose codes were changed."""
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(workdir / "programme.toml", other / "programme.toml")
    shutil.copy(workdir / "demo.duckdb", other / "demo.duckdb")
    _sql(other, "UPDATE persons SET sex = 'X' WHERE pid % 10 = 0")
    with pytest.raises(pt.SpecError, match="'X'"):
        pt.Programme(other / "programme.toml").run(out=other / "out", quiet=True)
