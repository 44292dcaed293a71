"""The protab command: demo, keys, ptable, protect."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

import protab as pt
from protab import cli

DEMO_TABLES = ["municipality_sex_agegroup", "grid_sex", "region_agegroup_weighted",
               "municipality_agegroup_plus_sex"]


def run_demo(tmp_path, name: str, capsys) -> tuple[dict[str, bytes], str]:
    out = tmp_path / name
    rc = cli.main(["demo", "--persons", "3000", "--db", str(tmp_path / f"{name}.duckdb"),
                   "--out", str(out), "--seed", "demo-secret-seed"])
    assert rc == 0
    printed = capsys.readouterr()
    # the run's manifest (protab_run.json) holds a random run id and the time: every other file is deterministic
    assert (out / "protab_run.json").is_file()
    files = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.name != "protab_run.json"}
    return files, printed.out + printed.err


def test_demo_writes_protected_tables_deterministically(tmp_path, capsys):
    files, printed = run_demo(tmp_path, "a", capsys)
    assert sorted(files) == sorted(f"{t}.{ext}" for t in DEMO_TABLES for ext in ("csv", "parquet"))
    for t in DEMO_TABLES:
        assert t in printed
    assert "demo-secret-seed" not in printed
    grid = pl.read_parquet(tmp_path / "a" / "grid_sex.parquet")
    assert "n" not in grid.columns and "n_pert" in grid.columns
    assert set(grid["grid1km_level"]) == {0, 1, 2}  # Total, 10 km, 1 km
    assert grid.filter(pl.col("grid1km_level") == 1)["grid1km"].str.starts_with("10km").all()
    assert grid.filter(pl.col("grid1km_level") == 2)["grid1km"].str.starts_with("1km").all()
    weighted = pl.read_csv(tmp_path / "a" / "region_agegroup_weighted.csv")
    assert {"n_pert", "w_pert"} <= set(weighted.columns)
    # the same seed gives byte-identical files
    again, _ = run_demo(tmp_path, "b", capsys)
    assert again == files
    # the demo database is ready for the SQL macro
    with pt.Session(tmp_path / "a.duckdb") as s:
        rows = s.sql("SELECT sex, ckm(count(*), sum(rkey)) AS n FROM persons GROUP BY ALL ORDER BY 1").rows()
    assert [r[0] for r in rows] == ["F", "M"] and all(r[1] > 0 for r in rows)


def test_keys_ptable_and_protect_commands(tmp_path, monkeypatch, capsys, persons):
    db = str(tmp_path / "c.duckdb")
    persons.write_parquet(tmp_path / "persons.parquet")
    assert cli.main(["register", "persons", str(tmp_path / "persons.parquet"), "--db", db, "--materialize"]) == 0
    monkeypatch.setenv("PROTAB_SEED", "env-secret")
    assert cli.main(["keys", "persons", "--id", "pid", "--seed-env", "PROTAB_SEED", "--db", db]) == 0
    assert cli.main(["ptable", "generate", "--D", "5", "--V", "3", "--js", "2",
                     "--out", str(tmp_path / "p.csv")]) == 0
    assert cli.main(["ptable", "convert", str(tmp_path / "p.csv"), str(tmp_path / "p.txt"), "--to", "tauargus"]) == 0
    assert cli.main(["ptable", "install", str(tmp_path / "p.txt"), "--db", db, "--table", "persons"]) == 0
    (tmp_path / "req.toml").write_text(
        '''
database = "c.duckdb"
output = "out"
formats = ["csv"]
[ptable]
file = "p.csv"
[hierarchies.municipality]
code_lengths = [2, 3]
[[tables]]
name = "m_sex"
source = "persons"
dims = ["municipality", "sex"]
[[tables]]
name = "m_sex_age"
source = "persons"
dims = ["municipality", "sex", "age"]
formula = "municipality*sex + age"
weight = "weight"
''', encoding="utf-8")
    assert cli.main(["protect", str(tmp_path / "req.toml")]) == 0
    printed = capsys.readouterr().out
    assert "env-secret" not in printed
    m_sex = pl.read_csv(tmp_path / "out" / "m_sex.csv")
    assert m_sex.height == 8 * 3 and "n" not in m_sex.columns
    # the request's p-table file equals the generated one: the protect output matches the API
    with pt.Session(db) as s:
        spec = pt.TableSpec({"municipality": pt.Hierarchy.from_code_lengths(s.codes("persons", "municipality"), [2, 3]),
                             "sex": None})
        api = s.cell_key("persons", spec, pt.PTable.read(tmp_path / "p.csv"))
        via_sql = s.sql("SELECT sex, ckm(count(*), sum(rkey)) AS n FROM persons GROUP BY ALL ORDER BY 1")
    assert m_sex["n_pert"].to_list() == api["n_pert"].to_list()
    sex_margin = api.filter((pl.col("municipality_level") == 0) & (pl.col("sex_level") == 1))
    assert via_sql["n"].to_list() == sex_margin["n_pert"].to_list()
    assert pl.read_csv(tmp_path / "out" / "m_sex_age.csv").filter(
        (pl.col("sex_level") > 0) & (pl.col("age_level") > 0)).height == 0


def test_cli_errors_are_clear_and_write_nothing(tmp_path, capsys, monkeypatch):
    db = str(tmp_path / "e.duckdb")
    monkeypatch.delenv("NO_SUCH_VAR", raising=False)
    assert cli.main(["keys", "persons", "--id", "pid", "--seed-env", "NO_SUCH_VAR", "--db", db]) == 2
    assert "NO_SUCH_VAR is not set" in capsys.readouterr().err
    (tmp_path / "bad.toml").write_text(
        '[ptable]\nmaximum_entropy = { D = 5, V = 3, js = 2 }\n[[tables]]\nname = "x"\nsource = "nope"\ndims = ["a"]\n',
        encoding="utf-8")
    assert cli.main(["protect", str(tmp_path / "bad.toml"), "--db", db, "--out", str(tmp_path / "o")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "e.duckdb").exists()  # a failed request creates no database
    with pt.Session(db):
        pass
    assert cli.main(["protect", str(tmp_path / "bad.toml"), "--db", db, "--out", str(tmp_path / "o")]) == 2
    assert "has no table 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())
    with pytest.raises(SystemExit):
        cli.main(["nonsense"])


def test_ons_layout_from_the_command_line(tmp_path):
    ons = tmp_path / "ons.csv"
    assert cli.main(["ptable", "generate", "--D", "5", "--V", "3", "--js", "2", "--out", str(ons), "--format", "ons"]) == 0
    frame = pl.read_csv(ons)
    assert frame.columns[:3] == ["pcv", "ckey", "pvalue"]
    assert frame["ckey"].min() == 0 and frame["ckey"].max() == 255  # 8-bit keys by default
    # the file reads back as the same mechanism (same noise at every row and 8-bit key)
    back = pt.PTable.read(ons)
    orig = pt.PTable.maximum_entropy(D=5, V=3, js=2)
    n = np.repeat(np.arange(0, 12), 256)
    k = np.tile(np.arange(256), 12)
    assert np.array_equal(back.lookup(n, k, 256), orig.lookup(n, k, 256))
    assert cli.main(["ptable", "convert", str(tmp_path / "ons.csv"), str(tmp_path / "ons4.csv"),
                     "--to", "ons", "--bits", "4"]) == 0
    assert pl.read_csv(tmp_path / "ons4.csv")["ckey"].max() == 15


def test_protect_requests_are_checked_before_anything_is_written(tmp_path, capsys, persons):
    db = str(tmp_path / "r.duckdb")
    with pt.Session(db) as s:
        s.register("persons", persons)
        s.add_record_keys("persons", id_column="pid", seed="x")
    head = '[ptable]\nmaximum_entropy = { D = 5, V = 3, js = 2 }\n'
    good = '[[tables]]\nname = "ok"\nsource = "persons"\ndims = ["sex"]\n'
    cases = {
        '[[tables]]\nname = "../escaped"\nsource = "persons"\ndims = ["sex"]\n': "plain name",
        '[[tables]]\nname = "x"\nsource = "persons"\ndims = "sex"\n': "must be a list",
        good + good: "more than once",
        # the first table is fine, the second fails: neither is written
        good + '[[tables]]\nname = "bad"\nsource = "persons"\ndims = ["nope"]\n': "nope",
        '[ptable]\nmaximum_entropy = { D = 5, V = 3, jss = 2 }\n' + good: "unknown key 'jss'",
        '[hierarchies.sex]\nparent_child = "missing.csv"\n' + good: "hierarchies.sex.parent_child",
    }
    for k, (body, message) in enumerate(cases.items()):
        text = body if body.startswith("[ptable]") else head + body
        req = tmp_path / f"req{k}.toml"
        req.write_text(text, encoding="utf-8")
        out = tmp_path / f"out{k}"
        assert cli.main(["protect", str(req), "--db", db, "--out", str(out)]) == 2, body
        assert message in capsys.readouterr().err, body
        assert not out.exists() or not any(out.iterdir()), body
    assert not (tmp_path / "escaped.csv").exists()


def test_cli_errors_speak_in_flags(tmp_path, capsys, persons, monkeypatch):
    db = str(tmp_path / "k.duckdb")
    with pt.Session(db) as s:
        s.register("persons", persons)
    monkeypatch.setenv("PROTAB_SEED", "s")
    assert cli.main(["keys", "persons", "--id", "pid", "--seed-env", "PROTAB_SEED", "--db", db]) == 0
    assert cli.main(["keys", "persons", "--id", "pid", "--seed-env", "PROTAB_SEED", "--db", db]) == 2
    err = capsys.readouterr().err
    assert "--replace" in err and "replace=True" not in err


def test_the_readme_python_example_runs_after_the_demo(tmp_path, monkeypatch):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    assert cli.main(["demo", "--persons", "3000"]) == 0
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    out, X, published = scope["out"], scope["X"], scope["published"]
    assert "n" not in out.columns and out.height == published.height
    assert np.array_equal(X.T @ scope["inner"]["n"].to_numpy(), published["n"].to_numpy())
