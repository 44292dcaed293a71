"""Code lists come from declared classifications, never from the records (docs/serve.md).

A code taken from the data would disclose that somebody holds it: one person aged 107, or alone
in municipality R8-999, makes the code appear in the catalogue and in every answer while its cell
is blanked. The service lists the codes of serve.toml's ``codes``/``codes_file`` only: a code of
the data that is not declared stops it at start-up (the office sees the code, analysts never do);
a declared code without records is an ordinary cell of count 0 in the catalogue and in every
answer (/v1/table, /v1/query with GROUP BY, ROLLUP, CUBE, GROUPING SETS and filters), so that
answers list the same codes whatever the records hold.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest

import protab as pt
from protab.errors import SpecError

pytest.importorskip("starlette")

SEED = "declared-codes-seed-3Kp"
TOKEN = "tok-ana-declared-51c2"
#: the declared classification of municipality: area > region > municipality. R4 and R8-999 hold
#: no record in the plain data; the rare data add one person aged 107 in R8-999
MUNICIPALITIES = [["N", "R1", "R1-0"], ["N", "R1", "R1-1"], ["S", "R2", "R2-0"], ["S", "R2", "R2-1"],
                  ["S", "R8", "R8-999"], ["N", "R4", "R4-0"]]
AGES = [str(a) for a in range(108)]
#: answers list codes in protab's publication order (numeric codes numerically, others as text)
REGIONS = ["R1", "R2", "R4", "R8"]
MUNIS = ["R1-0", "R1-1", "R2-0", "R2-1", "R4-0", "R8-999"]
AGEGROUPS = ["00-29", "30-59", "60-89", "90+"]


def build(path: Path, *, rare: bool = False, null_sex: bool = False) -> str:
    """persons (600, ages 0-59 in R1, R2) keyed; ``rare``: one more person aged 107 in R8-999;
    ``null_sex``: every 50th person's sex is NULL."""
    with pt.Session(str(path)) as s:
        s.con.execute(
            """CREATE TABLE persons AS
            WITH base AS (SELECT i AS pid, CAST(hash(i, 1) % 2 AS INTEGER) AS r, CAST(hash(i, 2) % 2 AS INTEGER) AS m,
                                 CASE WHEN hash(i, 3) % 2 = 0 THEN 'F' ELSE 'M' END AS sex,
                                 CAST(hash(i, 4) % 60 AS INTEGER) AS age FROM range(1, 601) t(i))
            SELECT pid, CASE WHEN r = 0 THEN 'N' ELSE 'S' END AS area, 'R' || CAST(r + 1 AS VARCHAR) AS region,
                   'R' || CAST(r + 1 AS VARCHAR) || '-' || CAST(m AS VARCHAR) AS municipality, sex, age,
                   CASE WHEN age < 30 THEN '00-29' ELSE '30-59' END AS agegroup FROM base"""
        )
        if rare:
            s.con.execute("INSERT INTO persons VALUES (601, 'S', 'R8', 'R8-999', 'F', 107, '90+')")
        if null_sex:
            s.con.execute("UPDATE persons SET sex = NULL WHERE pid % 50 = 0")
        s.add_record_keys("persons", id_column="pid", seed=SEED)
    return str(path)


def toml(value: object) -> str:
    return json.dumps(value)  # JSON lists and strings are TOML too


def config(folder: Path, db: str, *, threshold: int = 0, codes: dict | None = None, extra: str = "",
           min_population: int = 10) -> Path:
    """serve.toml of ``db``: persons with declared codes (``codes`` replaces entries of the inline table)."""
    declared = {"municipality": MUNICIPALITIES, "sex": ["F", "M"], "agegroup": AGEGROUPS, "age": AGES}
    declared.update(codes or {})
    inline = ", ".join(f"{k} = {toml(v)}" for k, v in declared.items() if v is not None)
    codes_line = f"codes = {{ {inline} }}" if inline else ""  # no code list at all: no key
    text = f"""database = {toml(db)}
audit_log = "audit.jsonl"
threshold = {threshold}
min_population = {min_population}
sessions = 1
threads = 1
requests_per_minute = 0
[ptable]
maximum_entropy = {{ D = 5, V = 2, js = 2 }}
[datasets.persons]
dims = ["region", "municipality", "sex", "agegroup", "age"]
hierarchies = {{ municipality = ["area", "region", "municipality"] }}
{codes_line}
{extra}
[users.ana]
datasets = ["persons"]
token_sha256 = "{hashlib.sha256(TOKEN.encode()).hexdigest()}"
"""
    path = folder / "serve.toml"
    path.write_text(text, encoding="utf-8")
    return path


def engine_of(path: Path):
    from protab.serve.broker import Broker
    from protab.serve.config import load_config

    cfg = load_config(path)
    return Broker(cfg), cfg.users["ana"]


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plain")
    engine, user = engine_of(config(folder, build(folder / "plain.duckdb")))
    yield engine, user
    engine.close()


def _rows(answer, dims):
    """The code columns of an answer, as tuples."""
    return list(answer.frame.select(dims).iter_rows())


# -- start-up ---------------------------------------------------------------------------------
@pytest.mark.parametrize("codes, named", [
    ({"age": [str(a) for a in range(100)]}, ["dimension 'age'", "'107'"]),
    ({"municipality": MUNICIPALITIES[:4] + MUNICIPALITIES[5:]}, ["dimension 'municipality'", "'S > R8 > R8-999'"]),
    ({"municipality": MUNICIPALITIES[:4] + [["N", "R8", "R8-999"], MUNICIPALITIES[5]]},
     ["dimension 'municipality'", "'S > R8 > R8-999'"]),  # declared under another area
    ({"agegroup": AGEGROUPS[:3]}, ["dimension 'agegroup'", "'90+'"]),
])
def test_a_rare_code_that_is_not_declared_stops_the_service(tmp_path, codes, named):
    db = build(tmp_path / "rare.duckdb", rare=True)
    with pytest.raises(SpecError) as info:
        engine_of(config(tmp_path, db, codes=codes))
    message = str(info.value)
    assert "datasets.persons" in message and "not declared" in message
    for part in named:
        assert part in message


@pytest.mark.parametrize("undeclared, named", [(["sex"], "sex"), (["municipality", "sex", "agegroup", "age"], "region")])
def test_a_dimension_without_a_declared_code_list_is_refused(tmp_path, undeclared, named):
    """Without declared lists (the second case: none at all) the service does not start, so the
    rare person's codes (age 107, R8-999) cannot reach the catalogue as they did from the data."""
    db = build(tmp_path / "rare.duckdb", rare=True)
    with pytest.raises(SpecError) as info:
        engine_of(config(tmp_path, db, codes=dict.fromkeys(undeclared)))
    message = str(info.value)
    assert "datasets.persons" in message and f"dimension {named!r} has no declared code list" in message
    assert f"codes = {{ {named} = [...] }}" in message and f"codes_file = {{ {named} =" in message


def test_region_takes_the_codes_of_its_level_in_the_municipality_classification(plain):
    engine, user = plain
    dims = {d["name"]: d for d in engine.catalog(user)["datasets"][0]["dims"]}
    assert dims["region"]["codes"] == ["R1", "R2", "R8", "R4"]  # in the declared order
    assert dims["municipality"]["levels"] == ["area", "region", "municipality"]


# -- the catalogue and the answers list the declared codes ------------------------------------
def test_the_catalogue_lists_exactly_the_declared_codes(plain):
    engine, user = plain
    (persons,) = engine.catalog(user)["datasets"]
    codes = {d["name"]: d["codes"] for d in persons["dims"]}
    assert codes == {"region": ["R1", "R2", "R8", "R4"], "municipality": [r[-1] for r in MUNICIPALITIES],
                     "sex": ["F", "M"], "agegroup": AGEGROUPS, "age": AGES}
    assert {d["name"]: d["n_codes"] for d in persons["dims"]}["age"] == 108


def test_a_declared_code_without_records_is_a_zero_cell_of_a_table(plain):
    engine, user = plain
    frame = engine.table({"dataset": "persons", "dims": ["age"]}, user).frame
    assert frame["age"].to_list() == ["Total", *AGES]
    assert frame.filter(pl.col("age").cast(pl.Int64, strict=False) >= 60)["n_pert"].to_list() == [0] * 48
    # a hierarchy of three levels: each level lists its declared codes; R4 and R8 hold nobody
    frame = engine.table({"dataset": "persons", "dims": ["municipality"], "levels": {"municipality": "region"}},
                         user).frame
    assert frame["municipality"].to_list() == ["Total", *REGIONS]
    assert dict(zip(frame["municipality"], frame["n_pert"]))["R8"] == 0
    frame = engine.table({"dataset": "persons", "dims": ["municipality", "sex"]}, user).frame
    assert set(frame["municipality"]) == {"Total", "N", "S", "R1", "R2", "R8", "R4", *(r[-1] for r in MUNICIPALITIES)}
    empty = frame.filter(pl.col("municipality").is_in(["R4", "R4-0", "R8", "R8-999"]))
    assert empty.height == 4 * 3 and set(empty["n_pert"]) == {0}


@pytest.mark.parametrize("sql, dims, expected", [
    ("SELECT age, count(*) AS n FROM persons GROUP BY age", ["age"], [(a,) for a in AGES]),
    ("SELECT region, sex, count(*) AS n FROM persons GROUP BY ROLLUP(region, sex)", ["region", "sex"],
     [(r, s) for r in REGIONS for s in ("F", "M")] + [(r, None) for r in REGIONS]
     + [(None, None)]),
    ("SELECT agegroup, sex, count(*) AS n FROM persons GROUP BY CUBE(agegroup, sex)", ["agegroup", "sex"],
     [(a, s) for a in AGEGROUPS for s in ("F", "M")] + [(a, None) for a in AGEGROUPS] + [(None, "F"), (None, "M")]
     + [(None, None)]),
    ("SELECT region, agegroup, count(*) AS n FROM persons GROUP BY GROUPING SETS((region), (agegroup))",
     ["region", "agegroup"], [(r, None) for r in REGIONS] + [(None, a) for a in AGEGROUPS]),
    ("SELECT agegroup, count(*) AS n FROM persons WHERE sex = 'F' GROUP BY agegroup", ["agegroup"],
     [(a,) for a in AGEGROUPS]),
    ("SELECT age, count(*) AS n FROM persons WHERE age IN (58, 59, 107) GROUP BY age", ["age"],
     [("58",), ("59",), ("107",)]),
    ("SELECT municipality, count(*) AS n FROM persons WHERE region = 'R2' GROUP BY municipality", ["municipality"],
     [(m,) for m in MUNIS]),
])
def test_a_declared_code_without_records_is_a_zero_row_of_a_query(plain, sql, dims, expected):
    engine, user = plain
    answer = engine.query(sql, user)
    assert _rows(answer, dims) == expected
    empty = [k for k, row in enumerate(expected) if set(row) & {"R4", "R8", "R4-0", "R8-999", "60-89", "90+", "107"}]
    assert empty and all(answer.frame["n"][k] == 0 for k in empty)


def test_a_filter_on_a_declared_code_without_records_meets_the_minimum_population_rule(plain, tmp_path):
    from protab.serve.broker import MIN_POPULATION_MESSAGE
    from protab.serve.validator import QueryRefused

    engine, user = plain
    refusals = []
    for ask in (lambda: engine.table({"dataset": "persons", "dims": ["sex"], "filters": {"region": "R4"}}, user),
                lambda: engine.query("SELECT sex, count(*) AS n FROM persons WHERE region = 'R4' GROUP BY sex", user)):
        with pytest.raises(QueryRefused) as info:
            ask()
        refusals.append(str(info.value))
    # the same message as for a population of one person (the rare data's R8)
    rare, rare_user = engine_of(config(tmp_path, build(tmp_path / "rare.duckdb", rare=True)))
    try:
        with pytest.raises(QueryRefused) as info:
            rare.table({"dataset": "persons", "dims": ["sex"], "filters": {"region": "R8"}}, rare_user)
    finally:
        rare.close()
    assert refusals == [MIN_POPULATION_MESSAGE] * 2 and str(info.value) == MIN_POPULATION_MESSAGE


REQUESTS = [
    {"dataset": "persons", "dims": ["municipality", "agegroup"]},
    {"dataset": "persons", "dims": ["region", "age"]},
    {"dataset": "persons", "dims": ["municipality"], "levels": {"municipality": "region"}},
    {"dataset": "persons", "dims": ["agegroup", "age"], "filters": {"sex": "F"}},
]
QUERIES = [
    "SELECT region, age, count(*) AS n FROM persons GROUP BY CUBE(region, age)",
    "SELECT municipality, sex, count(*) AS n FROM persons WHERE agegroup = '00-29' GROUP BY ROLLUP(municipality, sex)",
    "SELECT age, count(*) AS n FROM persons WHERE age <> 3 GROUP BY age",
]


def test_answers_list_the_same_codes_whatever_the_records_hold(tmp_path):
    """One database without and one with the person aged 107 in R8-999: the same catalogue, and
    every answer has the same rows (codes); the rare cell is blanked (threshold 3)."""
    answers = []
    for name, rare in (("plain", False), ("rare", True)):
        folder = tmp_path / name
        folder.mkdir()
        engine, user = engine_of(config(folder, build(folder / "micro.duckdb", rare=rare), threshold=3))
        try:
            tables = [engine.table(r, user).frame for r in REQUESTS]
            queries = [engine.query(q, user).frame for q in QUERIES]
            answers.append((engine.catalog(user), tables, queries))
        finally:
            engine.close()
    (cat0, tables0, queries0), (cat1, tables1, queries1) = answers
    assert cat0 == cat1
    for r, a, b in zip(REQUESTS, tables0, tables1):
        assert a.drop("n_pert").equals(b.drop("n_pert")), r
    for q, a, b in zip(QUERIES, queries0, queries1):
        assert a.drop("n").equals(b.drop("n")), q
    rare_cell = tables1[1].filter((pl.col("region") == "R8") & (pl.col("age") == "107"))
    assert rare_cell["n_pert"].to_list() == [None]  # blanked: one person, below the threshold


# -- null_code -------------------------------------------------------------------------------
def test_null_code_is_a_declared_code(tmp_path):
    db = build(tmp_path / "nulls.duckdb", null_sex=True)
    with pytest.raises(SpecError) as info:  # NULLs read as 'Unknown', which is not declared
        engine_of(config(tmp_path, db, extra='null_code = "Unknown"'))
    assert "dimension 'sex'" in str(info.value) and "'Unknown'" in str(info.value)
    with pytest.raises(SpecError) as info:  # NULLs without null_code
        engine_of(config(tmp_path, db, codes={"sex": ["F", "M", "Unknown"]}))
    assert "'sex'" in str(info.value) and "null_code" in str(info.value)
    for data in (db, build(tmp_path / "no_nulls.duckdb")):  # listed whether or not anybody's sex is missing
        engine, user = engine_of(config(tmp_path, data, codes={"sex": ["F", "M", "Unknown"]},
                                        extra='null_code = "Unknown"'))
        try:
            sexes = {d["name"]: d["codes"] for d in engine.catalog(user)["datasets"][0]["dims"]}["sex"]
            frame = engine.table({"dataset": "persons", "dims": ["sex"]}, user).frame
        finally:
            engine.close()
        assert sexes == ["F", "M", "Unknown"] and frame["sex"].to_list() == ["Total", "F", "M", "Unknown"]
        unknown = frame.filter(pl.col("sex") == "Unknown")["n_pert"][0]
        assert (unknown > 0) if data == db else (unknown == 0)


# -- codes_file ------------------------------------------------------------------------------
def test_code_lists_from_files(tmp_path):
    db = build(tmp_path / "plain.duckdb")
    (tmp_path / "sex.txt").write_text("F\n\n  M  \n", encoding="utf-8")
    (tmp_path / "agegroups.csv").write_text(
        "agegroup,label\n00-29,young\n30-59,middle\n60-89,old\n90+,oldest\n", encoding="utf-8")
    lines = ["name,municipality,region,area"] + [f"place {r[2]}, {r[2]} ,{r[1]},{r[0]}" for r in MUNICIPALITIES]
    (tmp_path / "municipalities.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    files = ('codes_file = { sex = "sex.txt", agegroup = "agegroups.csv", '
             'municipality = "municipalities.csv" }')
    path = config(tmp_path, db, codes={"sex": None, "agegroup": None, "municipality": None}, extra=files)
    engine, user = engine_of(path)
    try:
        codes = {d["name"]: d["codes"] for d in engine.catalog(user)["datasets"][0]["dims"]}
        frame = engine.table({"dataset": "persons", "dims": ["municipality"], "levels": {"municipality": "area"}},
                             user).frame
    finally:
        engine.close()
    assert codes["sex"] == ["F", "M"] and codes["agegroup"] == AGEGROUPS
    assert codes["municipality"] == [r[-1] for r in MUNICIPALITIES] and codes["region"] == ["R1", "R2", "R8", "R4"]
    assert frame["municipality"].to_list() == ["Total", "N", "S"]


@pytest.mark.parametrize("files, codes, message", [
    ({"sex.csv": "code\nF\nM\n"}, {"sex": "sex.csv"}, "the CSV has no column 'sex' (its header: code)"),
    ({"sex.txt": "F\nM\nF\n"}, {"sex": "sex.txt"}, "codes listed more than once: 'F'"),
    ({"sex.txt": "F\nM\nTotal\n"}, {"sex": "sex.txt"}, "'Total' is the name protab gives margins"),
    ({}, {"sex": "nowhere.txt"}, "does not exist"),
    ({"m.txt": "R1-0\n"}, {"municipality": "m.txt"}, "give a CSV file (.csv) with the columns area, region, "
                                                     "municipality"),
    ({"m.csv": "area,region,municipality\nN,R1,R1-0\nN,R2,R1-0\n"}, {"municipality": "m.csv"},
     "codes listed more than once: 'R1-0'"),
    ({"m.csv": "area,region,municipality\nN,R1,R1-0\nS,R1,R1-1\n"}, {"municipality": "m.csv"},
     "not a hierarchy (area, region, municipality)"),
])
def test_bad_code_files_are_named(tmp_path, files, codes, message):
    db = build(tmp_path / "plain.duckdb")
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    extra = "codes_file = { " + ", ".join(f"{k} = {toml(v)}" for k, v in codes.items()) + " }"
    with pytest.raises(pt.ProtabError) as info:
        engine_of(config(tmp_path, db, codes=dict.fromkeys(codes), extra=extra))
    assert message in str(info.value)
    assert f"datasets.persons.codes_file.{next(iter(codes))}" in str(info.value)


@pytest.mark.parametrize("codes, extra, message", [
    ({}, 'codes_file = { sex = "sex.txt" }', "'sex' is declared both in codes and in codes_file"),
    ({"income": ["1"]}, "", "datasets.persons.codes.income names 'income', which is not one of the dataset's dims"),
    ({"sex": [["F", "f"], ["M", "m"]]}, "", "give a list of codes"),
    ({"municipality": ["R1-0", "R1-1"]}, "", "give one row per code with its code at each level"),
    ({"sex": ["F", True]}, "", "datasets.persons.codes.sex must be a list of codes"),
    ({"sex": ["F", ""]}, "", "column 'sex' has an empty code"),
    ({"municipality": [["A", "R1", "R1"], ["A", "R1", "R1-1"]]}, "",  # a region and a municipality coded alike
     "codes at two levels of one classification: 'R1' (1 in all; the first both in 'region' and in 'municipality')"),
])
def test_bad_inline_code_lists_are_named(tmp_path, codes, extra, message):
    db = build(tmp_path / "plain.duckdb")
    with pytest.raises(SpecError) as info:
        engine_of(config(tmp_path, db, codes=codes, extra=extra))
    assert message in str(info.value)


# -- the real service: HTTP and the PostgreSQL front -------------------------------------------
def test_both_fronts_publish_declared_codes_without_records(tmp_path):
    """``protab serve --pg-port``: the catalogue over HTTP, a table request and the same query over
    HTTP and over the PostgreSQL front list R4 and R8 (no records) with count 0."""
    import serve_fixtures as F

    httpx = pytest.importorskip("httpx")
    psycopg = pytest.importorskip("psycopg")
    path = config(tmp_path, build(tmp_path / "plain.duckdb"))
    server = F.Server(path, pg=True)
    try:
        h = {"Authorization": f"Bearer {TOKEN}"}
        cat = httpx.get(server.url + "/v1/catalog", headers=h, timeout=30).json()
        regions = {d["name"]: d["codes"] for d in cat["datasets"][0]["dims"]}["region"]
        table = httpx.post(server.url + "/v1/table", headers=h, timeout=30, json={
            "dataset": "persons", "dims": ["municipality"], "levels": {"municipality": "region"}}).json()
        sql = "SELECT region, count(*) AS n FROM persons GROUP BY region"
        http = httpx.post(server.url + "/v1/query", headers=h, timeout=30, json={"sql": sql}).json()["rows"]
        dsn = psycopg.conninfo.make_conninfo(host="127.0.0.1", port=server.pg_port, dbname="protab", user="ana",
                                             password=TOKEN, connect_timeout=10)
        with psycopg.connect(dsn, autocommit=True) as conn:
            pg = [list(r) for r in conn.execute(sql).fetchall()]
    finally:
        server.stop()
    assert regions == ["R1", "R2", "R8", "R4"]
    assert [r[0] for r in table["rows"]] == ["Total", *REGIONS]
    assert pg == http and [r[0] for r in http] == REGIONS
    assert {r[0]: r[1] for r in http}["R4"] == 0 and {r[0]: r[1] for r in http}["R8"] == 0
