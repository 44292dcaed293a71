"""Bad includes are refused before anything is read from the database, each with one SpecError
naming the file, the key and what is accepted there: an unknown key, a key of another front, a
section defined twice differently (an identical repeat is fine), a cycle, a missing file. And a
report's database: the top-level key, its old place in [original] still read."""

from __future__ import annotations

import pytest
from conftest import write

import protab as pt
from protab.cli.protect_checks import read_request
from protab.errors import SpecError
from protab.programme.definition import read_programme
from protab.report import run_request
from protab.serve.config import load_config

PTABLE = "[ptable]\nmaximum_entropy = { D = 5, V = 3, js = 2 }\n"
OTHER_PTABLE = "[ptable]\nmaximum_entropy = { D = 4, V = 2, js = 1 }\n"
TABLE = '[[tables]]\nname = "by_sex"\nsource = "persons"\ndims = ["sex"]\n'


def _request(folder, includes: str):
    return write(folder, "request.toml", f"include = {includes}\n" + TABLE)


def test_an_unknown_key_in_an_included_file_is_named_with_the_accepted_keys(tmp_path):
    write(tmp_path, "shared.toml", PTABLE.replace("[ptable]", "[ptabel]"))
    with pytest.raises(SpecError, match=r"shared\.toml.*key 'ptabel' is not accepted.*may hold: .*ptable"):
        read_request(_request(tmp_path, '["shared.toml"]'))


def test_a_key_of_another_front_in_an_included_file_names_the_front(tmp_path):
    write(tmp_path, "shared.toml", '[classifications.sex]\ncodes = ["F", "M"]\n')
    with pytest.raises(SpecError, match=r"'classifications' is a key of a programme, not of a protect request.*"
                                        r"hierarchies"):
        read_request(_request(tmp_path, '["shared.toml"]'))


def test_the_tables_of_a_request_do_not_belong_in_an_included_file(tmp_path):
    write(tmp_path, "shared.toml", PTABLE + TABLE)
    with pytest.raises(SpecError, match=r"shared\.toml.*key 'tables' is not accepted in an included file"):
        read_request(_request(tmp_path, '["shared.toml"]'))


def test_two_includes_defining_a_section_differently_are_refused(tmp_path):
    write(tmp_path, "a.toml", PTABLE)
    write(tmp_path, "b.toml", OTHER_PTABLE)
    with pytest.raises(SpecError, match=r"b\.toml.*ptable is defined differently in .*a\.toml") as exc:
        read_request(_request(tmp_path, '["a.toml", "b.toml"]'))
    assert "D = " not in str(exc.value)  # the p-table's parameters are secret: never in a message


def test_an_include_and_the_file_itself_defining_a_hierarchy_differently_are_refused(tmp_path):
    write(tmp_path, "h.toml", '[hierarchies.municipality]\ncolumns = ["region", "municipality"]\n')
    request = write(tmp_path, "request.toml", 'include = ["h.toml"]\n' + PTABLE + TABLE
                    + '[hierarchies.municipality]\ncode_lengths = [1, 2]\n')
    with pytest.raises(SpecError, match=r"request\.toml.*hierarchies\.municipality is defined differently in .*h\.toml"):
        read_request(request)


def test_identical_repeats_and_distinct_entries_of_a_section_merge(tmp_path):
    write(tmp_path, "a.toml", PTABLE + '[hierarchies.municipality]\ncolumns = ["region", "municipality"]\n')
    write(tmp_path, "b.toml", PTABLE + '[hierarchies.agegroup]\ncode_lengths = [1, 2]\n')
    cfg = read_request(_request(tmp_path, '["a.toml", "b.toml"]'))
    assert sorted(cfg["hierarchies"]) == ["agegroup", "municipality"]
    assert cfg["ptable"] == {"maximum_entropy": {"D": 5, "V": 3, "js": 2}}


def test_an_include_cycle_is_refused(tmp_path):
    write(tmp_path, "a.toml", 'include = ["b.toml"]\n' + PTABLE)
    write(tmp_path, "b.toml", 'include = ["a.toml"]\n')
    with pytest.raises(SpecError, match=r"include forms a cycle"):
        read_request(_request(tmp_path, '["a.toml"]'))


def test_a_missing_include_file_is_named(tmp_path):
    with pytest.raises(SpecError, match=r"request\.toml.*include = 'office/nope\.toml'.*does not exist"):
        read_request(_request(tmp_path, '["office/nope.toml"]'))


def test_include_must_be_a_list_of_file_names(tmp_path):
    with pytest.raises(SpecError, match=r"include must be a list of file names"):
        read_request(_request(tmp_path, '"shared.toml"'))


def test_a_programme_refuses_protect_hierarchies_from_an_include(tmp_path):
    write(tmp_path, "shared.toml", '[hierarchies.sex]\ncolumns = ["sex"]\n')
    programme = write(tmp_path, "programme.toml", 'include = ["shared.toml"]\nsource = "persons"\n' + PTABLE)
    with pytest.raises(SpecError, match=r"'hierarchies' is a key of a protect request, not of a programme.*"
                                        r"\[classifications"):
        read_programme(programme)


def test_serve_refuses_a_dataset_in_an_included_file(tmp_path):
    write(tmp_path, "shared.toml", '[datasets.persons]\ndims = ["sex"]\n')
    config = write(tmp_path, "serve.toml", 'include = ["shared.toml"]\naudit_log = "a.jsonl"\n' + PTABLE)
    with pytest.raises(SpecError, match=r"key 'datasets' is not accepted in an included file; an included file of serve\.toml may hold"):
        load_config(config)


def test_a_programme_include_cycle_through_itself_is_refused(tmp_path):
    programme = write(tmp_path, "programme.toml", 'include = ["programme.toml"]\n')
    with pytest.raises(SpecError, match="include forms a cycle"):
        pt.Programme(programme).run(out=tmp_path / "out", quiet=True)
    assert not (tmp_path / "out").exists()


REPORT = ('dims = ["sex"]\n{top}[original]\ntable = "persons"\n{old}'
          '[[protected]]\nlabel = "ckm"\nexpected = "expected.csv"\n')


def test_report_reads_database_at_the_top_level_and_in_its_old_place(workdir):
    import polars as pl

    pl.DataFrame({"sex": ["F", "M"], "n": [700.0, 800.0]}).write_csv(workdir / "expected.csv")
    top = write(workdir, "top.toml", REPORT.format(top='database = "demo.duckdb"\n', old=""))
    old = write(workdir, "old.toml", REPORT.format(top="", old='database = "demo.duckdb"\n'))
    assert run_request(top, workdir / "a").equals(run_request(old, workdir / "b"))


def test_report_refuses_two_different_databases(workdir):
    request = write(workdir, "both.toml", REPORT.format(top='database = "demo.duckdb"\n',
                                                        old='database = "other.duckdb"\n'))
    with pytest.raises(SpecError, match=r"database = 'demo.duckdb' and original.database = 'other.duckdb' differ"):
        run_request(request, workdir / "out")
