"""protab.report: compare() over several protected tables, the report folder, `protab report`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import polars as pl
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal
from refdata import HANDBOOK

import protab as pt
from protab import cli, report
from protab import measures as m
from protab.errors import InputError, SpecError

DATA = Path(__file__).resolve().parents[1] / "data"
DIMS = ["party", "age", "sex"]
MEASURE_COLUMNS = list(report.MEASURES)


@pytest.fixture(scope="module")
def scr():
    """The SCR example: published table of ~party*age + party*sex, SmallCountRounding's
    rounded version (published and inner), and a cell-key version with the handbook p-table."""
    d = json.loads((DATA / "scr_party_age_sex.json").read_text(encoding="utf-8"))
    inner = pl.DataFrame(d["inner"], schema=[*DIMS, "n"], orient="row")
    spec = pt.TableSpec({"party": None, "age": None, "sex": None}, formula=d["formula"])
    X, inn, pub = pt.model_matrix(inner, spec)
    rounded = inn["n"].to_numpy().astype(float)
    key = (inn["party"] + "," + inn["age"] + "," + inn["sex"]).to_numpy()
    for cell, (_, after) in d["r_package_result"]["inner_changed"].items():
        rounded[key == cell] = after
    scr_pub = pub.drop("n").with_columns(pl.Series("rounded", X.T @ rounded))
    scr_inner = inn.drop("n").with_columns(pl.Series("expected", rounded))
    ptable = pt.PTable.from_frame(HANDBOOK)
    keys = np.random.default_rng(7).integers(0, 2**16, pub.height)
    ckm = pub.drop("n").with_columns(
        pl.Series("n_pert", ptable.lookup(pub["n"].to_numpy(), keys, 2**16)))
    return {"inner": inn, "published": pub, "scr": scr_pub, "scr_inner": scr_inner,
            "ckm": ckm, "ptable": ptable, "ref": d["r_package_result"]}


def _row(res: pl.DataFrame, method: str, view: str) -> dict:
    rows = res.filter((pl.col("method") == method) & (pl.col("view") == view)).to_dicts()
    assert len(rows) == 1
    return rows[0]


def _compare(scr, **kw):
    return report.compare(
        scr["published"], {"SCR base 3": scr["scr"], "CKM handbook": scr["ckm"]},
        dims=DIMS, expected={"SCR base 3": scr["scr_inner"]}, inner=scr["inner"],
        ptables={"CKM handbook": scr["ptable"]}, sensitive="party", quasi=["age", "sex"],
        two_way=("party", "age"), groups="party", **kw)


def test_compare_reproduces_the_published_scr_utilities(scr):
    res = _compare(scr)
    assert res.columns == ["method", "view", "cells", *MEASURE_COLUMNS]
    assert res.select("method", "view").rows() == [
        ("original", "published"), ("SCR base 3", "published"), ("CKM handbook", "published"),
        ("original", "expected"), ("SCR base 3", "expected")]
    # SmallCountRounding's HDutility of the published table and of the inner table
    assert _row(res, "SCR base 3", "published")["hellinger_utility"] == pytest.approx(
        scr["ref"]["hellinger_utility_published"], abs=1e-7)
    assert _row(res, "SCR base 3", "expected")["hellinger_utility"] == pytest.approx(
        scr["ref"]["hellinger_utility_inner"], abs=1e-7)
    assert _row(res, "SCR base 3", "published")["cells"] == 24
    assert _row(res, "SCR base 3", "expected")["cells"] == 18


def test_compare_disclosure_risk_by_hand(scr):
    res = _compare(scr)
    # published view, quasi-identifier combinations published with party: party × age and
    # party × sex. Knowing yourself, only "young" discloses: A 0, B 1, C 5 → C 5/(6 − 1) = 1.
    # SCR publishes young as A 0, B 3, C 5: C 5/7 → a = 1, b = 0, c = 0, F = 0.
    pub = _row(res, "SCR base 3", "published")
    assert (pub["disclosures_original"], pub["disclosures_protected"], pub["disclosures_both"]) == (1, 0, 0)
    assert pub["f_beta"] == 0 and pub["recall"] == 0 and pub["precision"] is None
    # inner view: the original discloses young-male (0, 0, 2), young-female (0, 1, 3) and
    # old-female (1, 0, 7); the rounded inner (B young female 3, B old male 0) keeps young-male
    # and old-female only: a = 3, b = 2, c = 2; recall 2/3, precision 1,
    # F_0.5 = 1.25·2/(0.25·3 + 2) = 2.5/2.75
    ex = _row(res, "SCR base 3", "expected")
    assert (ex["disclosures_original"], ex["disclosures_protected"], ex["disclosures_both"]) == (3, 2, 2)
    assert ex["recall"] == pytest.approx(2 / 3) and ex["precision"] == pytest.approx(1)
    assert ex["f_beta"] == pytest.approx(2.5 / 2.75)
    # the original rows: every disclosure found again, utility 1, nothing changed
    for view in ("published", "expected"):
        o = _row(res, "original", view)
        assert o["hellinger_utility"] == 1 and o["pct_changed"] == 0 and o["f_beta"] == 1
        assert o["small_unchanged"] == 1 and o["spearman"] == pytest.approx(1)
    # inner measures: the published formula table has no party × age × sex cells; the inner
    # view has them: the entropy risk of the original is r of the inner counts
    assert _row(res, "original", "published")["entropy_risk"] is None
    assert _row(res, "original", "expected")["entropy_risk"] == pytest.approx(m.entropy_risk(scr["inner"]["n"]))
    assert _row(res, "original", "expected")["rm"] == 1
    # two changed inner cells of 18
    assert _row(res, "SCR base 3", "expected")["pct_changed"] == pytest.approx(100 * 2 / 18)


def test_compare_counts_changed_published_cells(scr):
    res = _compare(scr)
    # by hand from the R package's published table: party B (young 1→3, old 1→0, male 4→3,
    # female 6→8, Total 10→11), Total (young 6→8, old 15→14, male 29→28, female 27→29,
    # Total 56→57): 10 of 24 cells changed
    assert _row(res, "SCR base 3", "published")["pct_changed"] == pytest.approx(100 * 10 / 24)


def test_compare_with_protected_equal_to_original_gives_the_original_row(scr):
    same = scr["published"].rename({"n": "n_pert"})
    res = report.compare(scr["published"], {"same": same}, dims=DIMS, sensitive="party",
                         quasi=["age", "sex"], two_way=("party", "age"))
    a, b = res.row(0, named=True), res.row(1, named=True)
    for col in MEASURE_COLUMNS:
        assert a[col] == b[col], col


inner_tables = st.lists(st.integers(0, 6), min_size=12, max_size=12)


@settings(max_examples=15, deadline=None)
@given(inner_tables, inner_tables, st.permutations(range(12)))
def test_compare_properties_on_random_tables(counts, noise, perm):
    frame = pl.DataFrame({
        "a": [f"a{i // 4}" for i in range(12)], "b": [f"b{(i // 2) % 2}" for i in range(12)],
        "c": [f"c{i % 2}" for i in range(12)], "n": counts,
    })
    assume(sum(counts) > 0)
    prot = frame.with_columns(pl.Series("n_pert", [max(0, x + y - 3) for x, y in zip(counts, noise)])).drop("n")
    kw = {"dims": ["a", "b", "c"], "sensitive": "a", "quasi": ["b", "c"], "two_way": ("a", "b"),
          "groups": "a"}
    res = report.compare(frame, {"p": prot, "same": frame}, **kw)
    # protected equal to original: utility 1 and every risk at its original value
    same, orig = res.row(2, named=True) | {"method": "original"}, res.row(0, named=True)
    assert same.keys() == orig.keys()
    for key, value in orig.items():  # equal up to the last bits of different float formulas
        assert same[key] == (value if not isinstance(value, float) else pytest.approx(value, rel=1e-12, abs=1e-15))
    assert res["hellinger_utility"][0] == 1
    # row order of either input does not matter
    shuffled = report.compare(frame[list(perm)], {"p": prot[list(perm)], "same": frame[list(reversed(perm))]}, **kw)
    assert_frame_equal(res, shuffled)


def test_report_folder_renders(scr, tmp_path):
    out = tmp_path / "rep"
    res = _compare(scr, out_dir=out, title="Party by age and sex")
    names = sorted(p.name for p in out.iterdir())
    assert names == ["measures.csv", "noise_ckm_handbook.png", "report.html", "report.md", "ru_map.png"]
    img = mpimg.imread(out / "ru_map.png")
    assert img.shape[:2] == (600, 800)
    assert np.ptp(img[..., :3]) > 0  # not a blank image
    noise = mpimg.imread(out / "noise_ckm_handbook.png")
    assert noise.shape[:2] == (600, 1000) and np.ptp(noise[..., :3]) > 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and "<title>Party by age and sex</title>" in page
    table = page[page.index('<table class="measures">'):page.index("</table>")]
    assert table.count("<tr>") == res.height + 1
    for method, view in res.select("method", "view").iter_rows():
        assert f"<tr><td>{method}</td><td>{view}</td>" in table
    assert 'src="ru_map.png"' in page and 'src="noise_ckm_handbook.png"' in page
    assert "What the measures mean" in page and "hellinger_utility" in page
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "![R-U map](ru_map.png)" in md
    for method in ("SCR base 3", "CKM handbook"):
        assert f"| {method} | published |" in md
    back = pl.read_csv(out / "measures.csv", schema=res.schema)
    assert_frame_equal(back, res)
    # the same inputs give the same bytes
    again = tmp_path / "again"
    _compare(scr, out_dir=again, title="Party by age and sex")
    for name in names:
        assert (again / name).read_bytes() == (out / name).read_bytes(), name
    # no temporary files left behind
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_noise_table_of_the_report_matches_the_ptable(scr, tmp_path):
    _compare(scr, out_dir=tmp_path)
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    noise = page[page.index('<table class="noise">'):]
    noise = noise[:noise.index("</table>")]
    rows = re.findall(r"<tr><td>(\d+)</td><td>([^<]+)</td><td>([^<]+)</td>", noise)
    # handbook p-table: P(v = 0 | 1) = 0, 1/var 1; P(0 | 2) = 0.8, 1/var 1/0.16 = 6.25;
    # P(0 | 3) = 0.4, 1/var 1/0.6 = 1.667
    assert rows == [("1", "0", "1"), ("2", "0.8", "6.25"), ("3", "0.4", "1.667")]


def test_compare_errors(scr):
    pub = scr["published"]
    with pytest.raises(InputError, match="missing from its table"):
        report.compare(pub, {"x": scr["scr"].head(10)}, dims=DIMS)
    with pytest.raises(InputError, match="cannot tell which column"):
        two = scr["scr"].rename({"rounded": "r1"}).with_columns(pl.lit(1.0).alias("r2"))
        report.compare(pub, {"x": two}, dims=DIMS)
    with pytest.raises(InputError, match="not a measure"):
        report.compare(pub, {"x": scr["scr"]}, dims=DIMS, risk="nonsense")
    with pytest.raises(InputError, match="not among the dims"):
        report.compare(pub, {"x": scr["scr"]}, dims=DIMS, sensitive="region")
    with pytest.raises(InputError, match="margin cells are missing from the original"):
        with_margin = pl.concat([
            scr["scr_inner"], pl.DataFrame({"party": ["Total"], "age": ["Total"], "sex": ["Total"],
                                            "expected": [57.0]})])
        report.compare(scr["inner"], {"x": with_margin}, dims=DIMS)
    with pytest.raises(InputError, match="reserved"):
        report.compare(pub, {"original": scr["scr"]}, dims=DIMS)
    with pytest.raises(InputError, match="share their dimension codes"):
        report.compare(pub, {"x": pl.concat([scr["scr"], scr["scr"].head(1)])}, dims=DIMS)


def _request_files(scr, tmp_path: Path) -> Path:
    scr["published"].write_csv(tmp_path / "original.csv")
    scr["inner"].write_csv(tmp_path / "inner.csv")
    scr["scr"].write_csv(tmp_path / "scr.csv")
    scr["ckm"].write_parquet(tmp_path / "ckm.parquet")
    scr["scr_inner"].write_csv(tmp_path / "scr_expected.csv")
    scr["ptable"].write(tmp_path / "ptable.csv")
    req = tmp_path / "request.toml"
    req.write_text(
        '''
title = "Party by age and sex"
output = "report"
dims = ["party", "age", "sex"]

[original]
file = "original.csv"
value = "n"
inner = "inner.csv"

[[protected]]
label = "SCR base 3"
file = "scr.csv"
value = "rounded"
expected = "scr_expected.csv"

[[protected]]
label = "CKM handbook"
file = "ckm.parquet"
ptable = "ptable.csv"

[measures]
sensitive = "party"
quasi = ["age", "sex"]
two_way = ["party", "age"]
''', encoding="utf-8")
    return req


def test_cli_report(scr, tmp_path, capsys):
    req = _request_files(scr, tmp_path)
    assert cli.main(["report", str(req)]) == 0
    out = tmp_path / "report"
    assert (out / "report.html").is_file() and (out / "ru_map.png").is_file()
    assert (out / "noise_ckm_handbook.png").is_file()
    assert "report.html" in capsys.readouterr().out
    written = pl.read_csv(out / "measures.csv", schema=pl.read_csv(out / "measures.csv").schema)
    scr_pub = written.filter((pl.col("method") == "SCR base 3") & (pl.col("view") == "published"))
    assert scr_pub["hellinger_utility"][0] == pytest.approx(0.9456522, abs=1e-7)
    # --out overrides the request's output
    assert cli.main(["report", str(req), "--out", str(tmp_path / "elsewhere")]) == 0
    assert (tmp_path / "elsewhere" / "report.md").is_file()


def test_cli_report_bad_requests(scr, tmp_path, capsys):
    req = _request_files(scr, tmp_path)
    text = req.read_text(encoding="utf-8")
    req.write_text(text.replace("[measures]", "[measures]\nsensitiv = \"party\""), encoding="utf-8")
    assert cli.main(["report", str(req)]) == 2
    assert "sensitiv" in capsys.readouterr().err
    req.write_text(text.replace('file = "scr.csv"', 'file = "missing.csv"'), encoding="utf-8")
    assert cli.main(["report", str(req)]) == 2
    assert "missing.csv" in capsys.readouterr().err
    assert not (tmp_path / "report").exists()
    with pytest.raises(SpecError, match="dims"):
        bad = tmp_path / "bad.toml"
        bad.write_text('[original]\nfile = "original.csv"\n', encoding="utf-8")
        report.run_request(bad)


def test_ru_map_falls_back_to_the_entropy_risk_without_small_cells(tmp_path):
    """No original cell in 1…small: the default risk axis would be empty, so it is rm."""
    spec = pt.TableSpec({"a": None, "b": None})
    inner = pl.DataFrame({"a": ["x", "x", "y", "y"], "b": ["p", "q", "p", "q"], "n": [40, 55, 61, 70]})
    _, _, pub = pt.model_matrix(inner, spec)
    noisy = pub.with_columns((pl.col("n") + pl.Series([1, -1, 0, 2, 0, 1, -2, 0, 1])).alias("n_pert"))
    res = report.compare(pub, {"noise": noisy.drop("n")}, dims=["a", "b"], out_dir=tmp_path)
    assert res["small_unchanged"].null_count() == res.height and res["rm"].null_count() == 0
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "Risk (rm) across" in page
