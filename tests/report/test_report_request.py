"""protab report requests: the documented example on the demo database, the schema of a
request, files named by it, formula tables on the R-U map, writing the folder as a whole."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import protab as pt
from protab import cli, report
from protab import measures as m
from protab.errors import InputError, ProtabError, SpecError
from protab.report import render
from protab.report._align import _finest_published
from protab.report.plots import _ru_map_figure


def _documented_blocks() -> tuple[list[str], str]:
    """The shell commands and the report.toml of the example in protab.report's docstring."""
    doc = report.__doc__ or ""
    blocks = re.findall(r"::\n\n((?:    .*\n|\n)+)", doc)
    commands = [line.split("#")[0].strip() for line in textwrap.dedent(blocks[-2]).splitlines()
                if line.strip()]
    return commands, textwrap.dedent(blocks[-1])


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The folder of the documented example: demo database, protected tables, p-table."""
    folder = tmp_path_factory.mktemp("example")
    commands, _ = _documented_blocks()
    assert commands == ["protab demo --persons 20000 --db protab.duckdb --out protab_output"]
    rows = cli.demo(persons=20000, database=str(folder / "protab.duckdb"),
                    out=str(folder / "protab_output"), seed="test", formats=("parquet",))
    return folder, {r["table"]: r for r in rows}


def _write(folder: Path, text: str, name: str = "report.toml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_documented_example_runs(demo, capsys):
    folder, rows = demo
    _, toml = _documented_blocks()
    req = _write(folder, toml)
    assert cli.main(["report", str(req)]) == 0
    assert "report.html" in capsys.readouterr().out
    out = folder / "report"
    assert sorted(p.name for p in out.iterdir()) == [
        "measures.csv", "noise_ckm_d_5_v_3.png", "report.html", "report.md", "ru_map.png"]
    res = pl.read_csv(out / "measures.csv")
    ckm = res.filter(pl.col("method") == "CKM D=5 V=3").row(0, named=True)
    # the counts tabulated by the report are the ones protab demo protected: the same utility
    demo_row = rows["municipality_agegroup_plus_sex"]
    assert ckm["cells"] == demo_row["cells"]
    assert ckm["hellinger_utility"] == pytest.approx(demo_row["hellinger_utility"], rel=1e-12)
    # a formula table has no inner cells, but rm applies to its finest published crossings
    assert ckm["rm"] is not None and 0 <= ckm["rm"] < 1
    assert ckm["entropy_risk"] is None
    page = (out / "report.html").read_text(encoding="utf-8")
    risk = re.search(r"Risk \((\w+)\) across", page).group(1)
    assert ckm[risk] is not None  # the R-U map shows the method
    assert "Do not publish it" in page


def test_a_formula_table_on_the_ru_map():
    """Published a*b + a*c without a×b×c: rm on the a×b and a×c cells, and the map never
    empty by default (small_share when nothing else applies)."""
    inner = pl.DataFrame({
        "a": ["x", "x", "x", "x", "y", "y", "y", "y"], "b": ["p", "p", "q", "q"] * 2,
        "c": ["u", "v"] * 4, "n": [40, 55, 61, 70, 33, 48, 52, 90]})
    spec = pt.TableSpec({"a": None, "b": None, "c": None}, formula="a*b + a*c")
    _, _, pub = pt.model_matrix(inner, spec)
    noise = np.resize([1, -1, 0, 2, 0, 1, -2], pub.height)
    prot = pub.with_columns((pl.col("n") + pl.Series(noise)).alias("n_pert")).drop("n")
    res = report.compare(pub, {"noise": prot}, dims=["a", "b", "c"])
    row = res.row(1, named=True)
    a = pub.join(prot, on=["a", "b", "c"]).rename({"n": "_f", "n_pert": "_g"})
    finest = _finest_published(a, ["a", "b", "c"], "Total")
    assert finest.height == 8  # a×b (2 × 2) and a×c (2 × 2); no a×b×c cells published
    assert set(zip(finest["b"], finest["c"])) <= {(b, "Total") for b in "pq"} | {("Total", c) for c in "uv"}
    assert row["rm"] == pytest.approx(m.conditional_entropy_risk(finest["_f"], finest["_g"]))
    assert row["small_unchanged"] is None and row["entropy_risk"] is None

    fig = _ru_map_figure(res, risk="rm", utility="hellinger_utility", title="t", note=None)
    assert len(fig.axes[0].collections) == 2  # the original and the method
    # asked for a risk that does not apply: the map says why instead of being blank
    fig = _ru_map_figure(res, risk="entropy_risk", utility="hellinger_utility", title="t", note=None)
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "No point to show" in texts and "formula" in texts


def test_the_default_risk_says_why_it_falls_back(tmp_path):
    inner = pl.DataFrame({"a": ["x", "x", "y", "y"], "b": ["p", "q", "p", "q"], "n": [40, 55, 61, 70]})
    _, _, pub = pt.model_matrix(inner, pt.TableSpec({"a": None, "b": None}))
    prot = pub.with_columns((pl.col("n") + 1).alias("n_pert")).drop("n")
    report.compare(pub, {"plus one": prot}, dims=["a", "b"], out_dir=tmp_path)
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "Risk (rm) across" in page
    assert "rm because small_unchanged does not apply here: no original cell has a value in 1…small" in page


# --------------------------------------------------------------------------------------------
# the schema: every key checked before anything is read

_GOOD = '''
title = "t"
dims = ["party", "age", "sex"]

[original]
file = "original.csv"

[[protected]]
label = "m"
file = "m.csv"

[measures]
sensitive = "party"
quasi = ["age", "sex"]
'''


@pytest.mark.parametrize(("old", "new", "words"), [
    ('title = "t"', 'titel = "t"', ["unknown key 'titel'", "'title'"]),
    ('file = "original.csv"', 'fille = "original.csv"', ["unknown key 'fille'", "original", "'file'"]),
    ('label = "m"', 'lable = "m"', ["unknown key 'lable'", "protected[0]", "'label'"]),
    ('sensitive = "party"', 'sensitiv = "party"', ["unknown key 'sensitiv'", "measures", "'sensitive'"]),
    ('[measures]', '[measures]\nknow_yourself = "false"', ["measures.know_yourself", "a boolean"]),
    ('quasi = ["age", "sex"]', 'quasi = "age"', ["measures.quasi", "a list of strings"]),
    ('dims = ["party", "age", "sex"]', 'dims = "party"', ["dims", "a list of strings"]),
    ('sensitive = "party"', 'sensitive = ["party"]', ["measures.sensitive", "a string", "not a list"]),
    ('[measures]', '[measures]\nsmall = "2"', ["measures.small", "an integer"]),
    ('[measures]', '[measures]\nrisk = "fbeta"', ["measures.risk", "'f_beta'"]),
    ('file = "m.csv"', 'file = ["m.csv"]', ["protected[0].file", "a string"]),
    ('[[protected]]', '[protected]', ["protected", "a list of tables"]),
    ('file = "m.csv"', 'file = "m.csv"\nptable = { maximum_entropy = { D = 5, V = 3, jss = 2 } }',
     ["unknown key 'jss'", "protected[0].ptable.maximum_entropy", "'js'"]),
    ('file = "m.csv"', 'file = "m.csv"\nptable = 5', ["protected[0].ptable", "a p-table file name or a table"]),
    ('file = "m.csv"', 'file = "m.csv"\nptable = { D = 5 }', ["unknown key 'D'", "protected[0].ptable"]),
    ('file = "original.csv"', 'file = "original.csv"\ntable = "persons"', ["exactly one of file, table"]),
    ('file = "original.csv"', 'file = "original.csv"\nformula = "party*age"', ["original.formula", "only with original.table"]),
    ('[measures]', '[hierarchies.party]\ncolumns = ["a", "b"]\n[measures]', ["[hierarchies]", "table"]),
    ('sensitive = "party"', 'sensitive = "region"', ["measures.sensitive", "'region'", "dims"]),
    ('[measures]', '[measures]\ntwo_way = ["party"]', ["measures.two_way", "two dimensions"]),
    ('label = "m"', 'label = "original"', ["reserved"]),
    ('file = "m.csv"', 'ptable = "p.csv"', ["protected[0]", "file = '…'"]),
])
def test_request_mistakes_name_the_key(tmp_path, old, new, words):
    assert old in _GOOD
    req = _write(tmp_path, _GOOD.replace(old, new, 1))
    with pytest.raises(SpecError) as err:
        report.run_request(req)
    msg = str(err.value)
    assert "report.toml" in msg
    for w in words:
        assert w in msg, (w, msg)
    assert not (tmp_path / "report").exists()


def test_files_named_by_the_request(tmp_path):
    pl.DataFrame({"party": ["A", "Total"], "age": ["y", "Total"], "sex": ["m", "Total"],
                  "n": [3, 3]}).write_csv(tmp_path / "original.csv")
    req = _write(tmp_path, _GOOD.replace("[measures]\n", "[nothing]\n").split("[nothing]")[0])
    with pytest.raises(InputError, match=r"protected\[0\]\.file = 'm.csv': no such file"):
        report.run_request(req)
    (tmp_path / "m.csv").mkdir()
    with pytest.raises(InputError, match=r"protected\[0\]\.file = 'm.csv': .* is a folder"):
        report.run_request(req)
    os.rmdir(tmp_path / "m.csv")
    (tmp_path / "m.csv").write_bytes(b"party,age,sex,n_pert\n\xff\xfe,y,m,1\n")
    with pytest.raises(InputError, match=r"protected\[0\]\.file = 'm.csv': the file is not UTF-8"):
        report.run_request(req)
    (tmp_path / "m.csv").write_text("party,age,sex,n_pert\nA,y,m,3\nTotal,Total,Total,3\n", encoding="utf-8")
    (tmp_path / "p.csv").write_bytes(b"\xff\xfe\x00\x01")
    text = req.read_text(encoding="utf-8") + 'ptable = "p.csv"\n'
    req = _write(tmp_path, text)
    with pytest.raises(ProtabError, match=r"protected\[0\]\.ptable = 'p.csv': p-table file .*p.csv' is not UTF-8"):
        report.run_request(req)
    (tmp_path / "p.csv").write_text("not a p-table\n", encoding="utf-8")
    with pytest.raises(ProtabError, match=r"protected\[0\]\.ptable = 'p.csv'"):
        report.run_request(req)
    req = _write(tmp_path, text.replace('ptable = "p.csv"', 'ptable = { file = "q.csv" }'))
    with pytest.raises(InputError, match=r"protected\[0\]\.ptable\.file = 'q.csv': no such file"):
        report.run_request(req)
    (tmp_path / "q.csv").write_text("not a p-table\n", encoding="utf-8")
    with pytest.raises(ProtabError, match=r"protected\[0\]\.ptable\.file = 'q.csv'"):
        report.run_request(req)
    req = _write(tmp_path, text)
    # the request file itself
    (tmp_path / "latin1.toml").write_bytes('title = "caf\xe9"\n'.encode("latin-1"))
    with pytest.raises(SpecError, match="latin1.toml.*not UTF-8"):
        report.run_request(tmp_path / "latin1.toml")
    with pytest.raises(SpecError, match="is a folder"):
        report.run_request(tmp_path)
    with pytest.raises(SpecError, match="nope.toml"):
        report.run_request(tmp_path / "nope.toml")
    assert not (tmp_path / "report").exists()


def test_database_mistakes(demo, tmp_path):
    folder, _ = demo
    _, toml = _documented_blocks()
    base = toml.replace('"protab.duckdb"', f'"{folder}/protab.duckdb"')
    base = base.replace('"protab_output/', f'"{folder}/protab_output/')
    # a request elsewhere: the default database beside it does not exist
    req = _write(tmp_path, re.sub(r"\ndatabase = .*\n", "\n", base))
    with pytest.raises(InputError, match=r": database = 'protab.duckdb': no such file"):
        report.run_request(req)
    # --db overrides the request's database (a path as given)
    res = report.run_request(req, tmp_path / "out", database=folder / "protab.duckdb")
    assert res.height == 2 and (tmp_path / "out" / "report.html").is_file()
    with pytest.raises(InputError, match="--db 'nope.duckdb': no such file"):
        report.run_request(req, tmp_path / "out", database="nope.duckdb")
    with pytest.raises(SpecError, match="--db applies only when"):
        report.run_request(_write(tmp_path, _GOOD, "files.toml"), database=folder / "protab.duckdb")
    req = _write(tmp_path, base.replace('table = "persons"', 'table = "people"'))
    with pytest.raises(InputError, match=r"original\.table = 'people'.*no table named 'people'"):
        report.run_request(req)
    req = _write(tmp_path, base.replace('columns = ["region", "municipality"]', 'hrc = "m.hrc"'))
    with pytest.raises(InputError, match=r"hierarchies\.municipality\.hrc = 'm.hrc': no such file"):
        report.run_request(req)
    req = _write(tmp_path, base.replace('value = "n_pert"', 'value = "n_pert"\nexpected_value = "e"'))
    with pytest.raises(SpecError, match="expected_value needs expected"):
        report.run_request(req)
    assert not (tmp_path / "report").exists()


# --------------------------------------------------------------------------------------------
# writing the folder as a whole


def test_nothing_half_written(tmp_path, monkeypatch):
    out = tmp_path / "rep"
    real = render._writer

    def failing_third(data):
        def write(path):
            if path.name == "c.html":
                raise OSError(28, "No space left on device")
            real(data)(path)

        return write

    monkeypatch.setattr(render, "_writer", failing_third)
    files = {"a.csv": b"1", "b.png": b"2", "c.html": b"3"}
    with pytest.raises(OSError):
        render._write_files(out, files)
    assert not out.exists() and not list(tmp_path.iterdir())  # no folder, no leftovers
    monkeypatch.setattr(render, "_writer", real)
    render._write_files(out, files)
    assert sorted(p.name for p in out.iterdir()) == ["a.csv", "b.png", "c.html"]
    # an existing folder keeps every file when a later write fails
    monkeypatch.setattr(render, "_writer", failing_third)
    with pytest.raises(OSError):
        render._write_files(out, {"a.csv": b"new", "b.png": b"new", "c.html": b"new"})
    assert [(out / n).read_bytes() for n in ("a.csv", "b.png", "c.html")] == [b"1", b"2", b"3"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]
    # a path ending in ".." names the folder above, as everywhere
    (out / "sub").mkdir()
    render._write_files(out / "sub" / "..", {"d.md": b"4"})
    assert sorted(p.name for p in out.iterdir()) == ["a.csv", "b.png", "c.html", "d.md", "sub"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


def test_a_failing_comparison_writes_nothing(tmp_path):
    pl.DataFrame({"party": ["A", "B", "Total"], "age": ["y", "y", "Total"], "sex": ["m", "m", "Total"],
                  "n": [3, 4, 7]}).write_csv(tmp_path / "original.csv")
    # B is missing from the protected table: compare refuses after reading every file
    pl.DataFrame({"party": ["A", "Total"], "age": ["y", "Total"], "sex": ["m", "Total"],
                  "n_pert": [3, 7]}).write_csv(tmp_path / "m.csv")
    req = _write(tmp_path, _GOOD)
    with pytest.raises(InputError, match="report.toml.*missing from its table"):
        report.run_request(req)
    assert not (tmp_path / "report").exists()


def test_a_text_value_column_is_a_clear_error():
    import polars as pl

    from protab.errors import InputError
    from protab.report._align import _select

    with pytest.raises(InputError, match="'v' holds String, not numbers"):
        _select(pl.DataFrame({"a": ["x"], "v": ["t"]}), ["a"], "v", "out", "protected 'ckm'")


def test_report_db_flag_overrides_the_database(demo, tmp_path, capsys):
    folder, _ = demo
    _, toml = _documented_blocks()
    req = _write(tmp_path, toml.replace('"protab_output/', f'"{(folder / "protab_output").as_posix()}/'))
    # the request's database (protab.duckdb beside it) does not exist here: --db names the real one
    assert cli.main(["report", str(req), "--out", str(tmp_path / "r0")]) == 2
    assert "protab.duckdb" in capsys.readouterr().err
    assert cli.main(["report", str(req), "--out", str(tmp_path / "r"), "--db", str(folder / "protab.duckdb")]) == 0
    assert (tmp_path / "r" / "report.html").exists()
