"""Labels of the service's codes and names of its dimensions (docs/serve.md, "Labels").

The office declares them in serve.toml (``labels``, ``names``: per dimension, as protect's
``labels`` and ``name``) or in its code files (columns ``label_<lang>`` and
``<level>_label_<lang>``); bad ones stop the service at start-up naming the file, the dataset,
the dimension and the codes. The catalogue lists them in every language; a table request with
``lang`` gets a column ``<dim>_label_<lang>`` beside each labelled dimension (codes stay the
identifiers) and the dimensions' names, in JSON, CSV and JSON-stat; an unknown language is a
400 naming the declared ones; answers in two languages have two ETags.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import warnings
from pathlib import Path

import pytest

import protab as pt
from protab.errors import SpecError

pytest.importorskip("starlette")

SEED = "labels-seed-7Qw"
TOKEN = "tok-ana-labels-2b9e"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MUNICIPALITIES = """region,municipality,region_label_en,region_label_nb,label_en,label_nb
R1,R1-0,North,Nord,Northtown,Nordby
R1,R1-1,North,Nord,Fjordvik,Fjordvik
R2,R2-0,South,Sør,Southport,Sørhavn
R2,R2-1,South,Sør,Lakeside,Sjøkanten
"""
LABELS = ('labels = { sex = { en = { F = "Female", M = "Male", Total = "Both sexes" }, '
          'nb = { F = "Kvinne", M = "Mann" } }, municipality = { en = { Total = "All municipalities" } } }')
NAMES = ('names = { sex = { en = "Sex", nb = "Kjønn" }, municipality = { en = "Municipality" } }\n'
         'descriptions = { sex = { en = "Sex as registered", nb = "Registrert kjønn" } }')


def build(path: Path) -> str:
    with pt.Session(str(path)) as s:
        s.con.execute(
            """CREATE TABLE persons AS
            SELECT i AS pid, 'R' || CAST(hash(i, 1) % 2 + 1 AS VARCHAR) AS region,
                   CASE WHEN hash(i, 3) % 2 = 0 THEN 'F' ELSE 'M' END AS sex FROM range(1, 401) t(i)""")
        s.con.execute("ALTER TABLE persons ADD COLUMN municipality VARCHAR")
        s.con.execute("UPDATE persons SET municipality = region || '-' || CAST(pid % 2 AS VARCHAR)")
        s.add_record_keys("persons", id_column="pid", seed=SEED)
    return str(path)


def write_config(folder: Path, db: str, *, munis: str = MUNICIPALITIES, labels: str = LABELS,
                 names: str = NAMES) -> Path:
    (folder / "municipalities.csv").write_text(munis, encoding="utf-8")
    text = f"""database = {json.dumps(db)}
audit_log = "audit.jsonl"
sessions = 1
threads = 1
requests_per_minute = 0
[ptable]
maximum_entropy = {{ D = 5, V = 2, js = 2 }}
[datasets.persons]
dims = ["region", "municipality", "sex"]
hierarchies = {{ municipality = ["region", "municipality"] }}
codes = {{ sex = ["F", "M"] }}
codes_file = {{ municipality = "municipalities.csv" }}
{labels}
{names}
[users.ana]
datasets = ["persons"]
token_sha256 = "{hashlib.sha256(TOKEN.encode()).hexdigest()}"
"""
    path = folder / "serve.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return build(tmp_path_factory.mktemp("labels_db") / "micro.duckdb")


@pytest.fixture(scope="module")
def client(tmp_path_factory, db):
    from protab.serve.app import create_app

    app = create_app(write_config(tmp_path_factory.mktemp("labels"), db))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
        from starlette.testclient import TestClient

        with TestClient(app) as c:
            yield c


def table(client, lang=None, fmt=None, **extra):
    body = {"dataset": "persons", "dims": ["municipality", "sex"], **extra}
    if lang is not None:
        body["lang"] = lang
    return client.post("/v1/table" + (f"?format={fmt}" if fmt else ""), json=body, headers={**AUTH})


# -- the configuration ------------------------------------------------------------------------
def test_labels_come_from_serve_toml_and_the_code_files_label_columns(tmp_path, db):
    from protab.serve.config import load_config

    ds = load_config(write_config(tmp_path, db)).datasets["persons"]
    muni, region, sex = (ds.labels[d] for d in ("municipality", "region", "sex"))
    assert sex.names == {"en": "Sex", "nb": "Kjønn"}
    assert sex.descriptions == {"en": "Sex as registered", "nb": "Registrert kjønn"}
    assert sex.labels == {"en": {"F": "Female", "M": "Male", "Total": "Both sexes"}, "nb": {"F": "Kvinne", "M": "Mann"}}
    # label_<lang> labels the row's municipality, region_label_<lang> its region (in both dimensions)
    assert muni.labels["en"] == {"R1-0": "Northtown", "R1-1": "Fjordvik", "R2-0": "Southport", "R2-1": "Lakeside",
                                 "R1": "North", "R2": "South", "Total": "All municipalities"}
    assert region.labels == {"en": {"R1": "North", "R2": "South"}, "nb": {"R1": "Nord", "R2": "Sør"}}
    assert region.names == {}


def test_a_region_labelled_in_serve_toml_is_labelled_in_the_hierarchy_too(tmp_path, db):
    from protab.serve.config import load_config

    munis = "region,municipality\nR1,R1-0\nR1,R1-1\nR2,R2-0\nR2,R2-1\n"
    cfg = load_config(write_config(tmp_path, db, munis=munis, names="",
                                   labels='labels = { region = { en = { R1 = "North" } } }'))
    assert cfg.datasets["persons"].labels["municipality"].labels == {"en": {"R1": "North"}}


def test_labels_file_reads_code_files_as_protects_labels_file_does(tmp_path, db):
    """serve.toml's labels_file = { dim = … } takes the vocabulary's forms: a label_<lang> CSV and a
    one-language code list (a KLASS export: ``;``, quoted, labels in ``name``), merged with the
    labels of serve.toml and of the codes file."""
    from protab.serve.config import load_config

    (tmp_path / "sex.csv").write_text("code,label_en,label_de\nF,Female,Frau\nM,Male,Mann\nTotal,Both sexes,\n",
                                      encoding="utf-8")
    (tmp_path / "klass.csv").write_text('"code";"parentCode";"level";"name"\n"R1-0";"R1";"2";"Nordby"\n'
                                        '"R2-0";"R2";"2";"Sørhavn"\n', encoding="utf-8")
    cfg = load_config(write_config(tmp_path, db, names="", labels=(
        'labels = { sex = { nb = { F = "Kvinne" } } }\n'
        'labels_file = { sex = "sex.csv", municipality = [{ file = "klass.csv", language = "nb" }] }')))
    labels = cfg.datasets["persons"].labels
    assert labels["sex"].labels == {"nb": {"F": "Kvinne"}, "en": {"F": "Female", "M": "Male", "Total": "Both sexes"},
                                    "de": {"F": "Frau", "M": "Mann"}}
    assert labels["municipality"].labels["nb"]["R1-0"] == "Nordby"  # the file agrees with the codes file
    assert labels["municipality"].labels["en"]["R1-0"] == "Northtown"


@pytest.mark.parametrize(("text", "named"), [
    ("code,label_en\nF,Female\nX,Other\n", ["labels_file.sex 'sex.csv'", "'X'", "not a declared code"]),
    ("code,label_en\nF,Woman\n", ["labels_file.sex 'sex.csv'", "'F'", "otherwise", "'Female'"]),
    ("code,label_en\nTotal,Everybody\n", ["labels_file.sex 'sex.csv'", "'Total'", "otherwise", "'All'"]),
    ("id,label_en\nF,Female\n", ["labels_file.sex 'sex.csv'", "code"]),
], ids=["undeclared", "two-ways", "margin-two-ways", "no-code-column"])
def test_a_bad_labels_file_stops_the_start_naming_it_and_the_codes(tmp_path, db, text, named):
    from protab.serve.config import load_config

    (tmp_path / "sex.csv").write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_config(write_config(tmp_path, db, names="", labels=(
            'labels = { sex = { en = { F = "Female", Total = "All" } } }\nlabels_file = { sex = "sex.csv" }')))
    assert "datasets.persons" in str(err.value)
    for part in named:
        assert part in str(err.value), str(err.value)


BAD_FILES = [
    ("region,municipality,label_en\nR1,R1-0,Northtown\nR1,R1-1,\nR2,R2-0,S\nR2,R2-1,L\n",
     ["municipalities.csv", "'label_en'", "empty label", "'R1-1'"]),
    ("region,municipality,region_label_en\nR1,R1-0,North\nR1,R1-1,Nord\nR2,R2-0,S\nR2,R2-1,S\n",
     ["municipalities.csv", "'region_label_en'", "'R1' two ways", "'North'", "'Nord'"]),
    ("region,municipality,label_English\nR1,R1-0,a\nR1,R1-1,b\nR2,R2-0,c\nR2,R2-1,d\n",
     ["municipalities.csv", "'label_English'", "'English' is not a language tag"]),
    ("region,municipality,county_label_en\nR1,R1-0,a\nR1,R1-1,b\nR2,R2-0,c\nR2,R2-1,d\n",
     ["municipalities.csv", "'county_label_en'", "names no level", "region, municipality"]),
    ("region,municipality,label_EN,label_en\nR1,R1-0,a,A\nR1,R1-1,b,B\nR2,R2-0,c,C\nR2,R2-1,d,D\n",
     ["municipalities.csv", "'label_en'", "'EN' and 'en' are one language written two ways"]),
    ("region,municipality,label_en\nR1,R1-0,a\nR1,R1-1,Bell\x07\nR2,R2-0,c\nR2,R2-1,d\n",
     ["municipalities.csv", "'label_en'", "'R1-1'", "control character '\\x07'"]),
    ("region,municipality,label_en,label_en\nR1,R1-0,a,A\nR1,R1-1,b,B\nR2,R2-0,c,C\nR2,R2-1,d,D\n",
     ["municipalities.csv", "the column 'label_en' is in the header twice"]),
]


@pytest.mark.parametrize(("munis", "named"), BAD_FILES,
                         ids=["empty", "two-ways", "bad-tag", "no-level", "one-language-two-ways", "control",
                              "column-twice"])
def test_a_bad_label_column_stops_the_start_naming_file_column_and_codes(tmp_path, db, munis, named):
    from protab.serve.config import load_config

    with pytest.raises(SpecError) as err:
        load_config(write_config(tmp_path, db, munis=munis, labels="", names=""))
    assert "datasets.persons.codes_file.municipality" in str(err.value)
    for part in named:
        assert part in str(err.value)


BAD_TOML = [
    ('labels = { sex = { en = { F = "Female", X = "Other" } } }', ["datasets.persons.labels.sex.en", "'X'",
                                                                  "not a declared code", "dimension 'sex'"]),
    ('labels = { sex = { en = { F = "" } } }', ["datasets.persons.labels.sex.en.F", "must not be empty"]),
    ('labels = { sex = { english = { F = "Female" } } }', ["datasets.persons.labels.sex", "'english'",
                                                          "not a language tag"]),
    ('labels = { municipality = { en = { R1 = "Capital" } } }', ["datasets.persons.labels.municipality",
                                                                "'R1'", "otherwise", "'North'"]),
    ('labels = { age = { en = { F = "x" } } }', ["datasets.persons.labels.age", "'age'", "not one of the dataset's dims"]),
    ('names = { sex = { en = "" } }', ["datasets.persons.names.sex.en", "must not be empty"]),
    ('descriptions = { sex = { EN_x = "Sex" } }', ["datasets.persons.descriptions.sex", "not a language tag"]),
    ('labels = { sex = { en = { F = "Fe\\u0007male" } } }', ["datasets.persons.labels.sex.en.F", "control character"]),
    ('labels = { sex = { EN = { F = "Female" } } }\nnames = { sex = { en = "Sex" } }',
     ["datasets.persons", "dimension 'sex'", "'EN'", "'en'", "one language written two ways"]),
    ('labels = { region = { EN = { R1 = "North" } } }',
     ["datasets.persons", "'EN'", "'en'", "one language written two ways"]),
    ('labels_file = { sex = "sex.csv" }', ["datasets.persons.labels_file.sex 'sex.csv'", "only one line"]),
]


@pytest.mark.parametrize(("labels", "named"), BAD_TOML,
                         ids=["undeclared", "empty", "bad-tag", "two-ways", "no-dim", "empty-name", "description-tag",
                              "control", "one-language-two-ways", "two-ways-across-sources", "header-only-file"])
def test_bad_labels_in_serve_toml_stop_the_start_naming_dataset_dimension_and_codes(tmp_path, db, labels, named):
    from protab.serve.config import load_config

    (tmp_path / "sex.csv").write_text("code,label_en\n", encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_config(write_config(tmp_path, db, labels=labels, names=""))
    assert "serve.toml" in str(err.value)
    for part in named:
        assert part in str(err.value), str(err.value)


# -- the catalogue ----------------------------------------------------------------------------
def test_the_catalogue_lists_names_labels_and_languages(client):
    r = client.get("/v1/catalog", headers=AUTH)
    assert r.status_code == 200, r.text
    cat = r.json()
    assert cat["languages"] == ["en", "nb"]
    dims = {d["name"]: d for d in cat["datasets"][0]["dims"]}
    assert dims["sex"]["names"] == {"en": "Sex", "nb": "Kjønn"}
    assert dims["sex"]["descriptions"]["nb"] == "Registrert kjønn"
    assert dims["sex"]["labels"]["nb"] == {"F": "Kvinne", "M": "Mann"}
    assert dims["municipality"]["labels"]["nb"]["R2-0"] == "Sørhavn"
    assert dims["municipality"]["labels"]["en"]["R1"] == "North"  # a level's codes too
    assert dims["municipality"]["codes"] == ["R1-0", "R1-1", "R2-0", "R2-1"]  # codes stay the identifiers
    assert dims["region"]["labels"] == {"en": {"R1": "North", "R2": "South"}, "nb": {"R1": "Nord", "R2": "Sør"}}


def test_a_dimension_of_too_many_codes_to_list_keeps_its_names_in_the_catalogue(tmp_path, db, monkeypatch):
    from protab.serve import broker
    from protab.serve.app import create_app

    monkeypatch.setattr(broker, "CATALOG_CODES", 3)  # the municipalities (4) are too many to list, the sexes not
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
        from starlette.testclient import TestClient

        with TestClient(create_app(write_config(tmp_path, db))) as c:
            dims = {d["name"]: d for d in c.get("/v1/catalog", headers=AUTH).json()["datasets"][0]["dims"]}
    assert "codes" not in dims["municipality"] and "labels" not in dims["municipality"]
    assert dims["municipality"]["names"] == {"en": "Municipality"}  # the builder names it in the language chosen
    assert dims["sex"]["names"] == {"en": "Sex", "nb": "Kjønn"} and dims["sex"]["labels"]["nb"]["F"] == "Kvinne"


# -- /v1/table ----------------------------------------------------------------------------------
def test_a_table_without_lang_is_as_before(client):
    r = table(client)
    assert r.status_code == 200, r.text
    assert r.json()["columns"] == ["municipality", "sex", "municipality_level", "sex_level", "n_pert"]
    assert "names" not in r.json()


def test_a_table_with_lang_has_label_columns_beside_the_codes_and_the_names(client):
    plain, en = table(client).json(), table(client, "en").json()
    assert en["columns"] == ["municipality", "municipality_label_en", "sex", "sex_label_en", "municipality_level",
                             "sex_level", "n_pert"]
    assert en["lang"] == "en" and en["names"] == {"municipality": "Municipality", "sex": "Sex"}
    rows = [dict(zip(en["columns"], r)) for r in en["rows"]]
    label = {(r["municipality"], r["sex"]): (r["municipality_label_en"], r["sex_label_en"]) for r in rows}
    assert label["R2-0", "F"] == ("Southport", "Female")
    assert label["R1", "Total"] == ("North", "Both sexes")
    assert label["Total", "M"] == ("All municipalities", "Male")
    # the same protected values as without lang
    values = {(r[0], r[1]): r[-1] for r in plain["rows"]}
    assert {(r["municipality"], r["sex"]): r["n_pert"] for r in rows} == values
    nb = table(client, "nb").json()
    rows = [dict(zip(nb["columns"], r)) for r in nb["rows"]]
    found = {(r["municipality"], r["sex"]): (r["municipality_label_nb"], r["sex_label_nb"]) for r in rows}
    assert found["R2-0", "F"] == ("Sørhavn", "Kvinne")
    assert found["Total", "Total"] == (None, None)  # no label declared in nb: empty
    assert nb["names"] == {"municipality": "municipality", "sex": "Kjønn"}  # no name in nb: its column


def test_an_unknown_language_is_refused_naming_the_declared_ones(client):
    r = table(client, "fr")
    assert r.status_code == 400
    assert "'fr'" in r.json()["error"] and "'en', 'nb'" in r.json()["error"]
    assert table(client, 7).status_code == 400


@pytest.mark.parametrize(("lang", "says"), [
    (7, "lang must be a language tag (a string such as 'en'), not an integer"),
    (["en"], "lang must be a language tag (a string such as 'en'), not a list"),
    ({"en": 1}, "lang must be a language tag (a string such as 'en'), not an object"),
    (True, "lang must be a language tag (a string such as 'en'), not a boolean"),
    ("x" * 100_000, "no labels in 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'"),
    ("en\x00\n<b>", "no labels in 'en\\x00\\n<b>'"),
], ids=["number", "list", "table", "boolean", "long", "controls"])
def test_an_odd_lang_is_a_400_saying_what_lang_must_be(client, lang, says):
    r = table(client, lang)
    assert r.status_code == 400 and r.headers["content-type"].startswith("application/json")
    error = r.json()["error"]
    assert says in error and len(error) < 200 and "\x00" not in error, error


def test_a_csv_answer_has_the_label_columns(client):
    r = table(client, "nb", "csv")
    assert r.status_code == 200, r.text
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert list(rows[0])[:4] == ["municipality", "municipality_label_nb", "sex", "sex_label_nb"]
    assert {(x["municipality"], x["municipality_label_nb"]) for x in rows} >= {("R1-1", "Fjordvik"), ("R2", "Sør")}
    assert "label" not in table(client, fmt="csv").text.splitlines()[0]


def test_json_stat_takes_the_labels_as_category_labels(client):
    r = table(client, "en", "json-stat")
    assert r.status_code == 200, r.text
    ds = r.json()
    assert not any("LABEL" in i.upper() for i in ds["id"])
    by_id = {k.lower(): v for k, v in ds["dimension"].items()}
    assert by_id["sex"]["label"] == "Sex"
    assert by_id["sex"]["category"]["label"]["F"] == "Female"
    assert by_id["municipality"]["category"]["label"]["R2-1"] == "Lakeside"
    sdmx = table(client, "en", "sdmx-csv")
    assert sdmx.status_code == 200 and "label" not in sdmx.text.splitlines()[0].lower()


def test_answers_in_two_languages_have_two_etags_and_are_not_mixed_up(client):
    tags = {lang: table(client, lang).headers["ETag"] for lang in (None, "en", "nb")}
    assert len(set(tags.values())) == 3
    again = client.post("/v1/table", json={"dataset": "persons", "dims": ["municipality", "sex"], "lang": "nb"},
                        headers={**AUTH, "If-None-Match": tags["en"]})
    assert again.status_code == 200 and "sex_label_nb" in again.json()["columns"]
    cached = client.post("/v1/table", json={"dataset": "persons", "dims": ["municipality", "sex"], "lang": "nb"},
                         headers={**AUTH, "If-None-Match": tags["nb"]})
    assert cached.status_code == 304
    for lang in ("en", "nb", "en"):  # from the answer cache too, each in its own language
        assert f"sex_label_{lang}" in table(client, lang).json()["columns"]


def test_a_job_answer_keeps_its_labels(tmp_path, db):
    """A table answered as a job (above job_cells) is stored with its label columns: its JSON has
    them, its JSON-stat takes them as category labels, and the same request in another language
    is another job."""
    import time

    from protab.serve.app import create_app

    path = write_config(tmp_path, db)
    path.write_text(path.read_text(encoding="utf-8").replace("sessions = 1\n", "sessions = 1\njob_cells = 5\n"),
                    encoding="utf-8")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
        from starlette.testclient import TestClient

        with TestClient(create_app(path)) as c:
            jobs = {}
            for lang in ("en", "nb"):
                r = table(c, lang)
                assert r.status_code == 202, r.text
                jobs[lang] = r.json()["job"]["id"]
            assert jobs["en"] != jobs["nb"]
            for _ in range(300):
                r = c.get(f"/v1/jobs/{jobs['nb']}", headers=AUTH)
                if r.status_code != 202:
                    break
                time.sleep(0.1)
            assert r.status_code == 200, r.text
            assert "sex_label_nb" in r.json()["columns"]
            stat = c.get(f"/v1/jobs/{jobs['nb']}?format=json-stat", headers=AUTH).json()
            sex = {k.lower(): v for k, v in stat["dimension"].items()}["sex"]
            assert sex["category"]["label"]["F"] == "Kvinne"


def test_the_answers_version_changes_with_a_label(tmp_path, db):
    from protab.serve import caching
    from protab.serve.config import load_config

    first = caching.version(load_config(write_config(tmp_path, db)), [])
    assert caching.version(load_config(write_config(tmp_path, db, labels=LABELS.replace("Kvinne", "Kvinner"))),
                           []) != first
    assert caching.version(load_config(write_config(tmp_path, db, names=NAMES.replace("Kjønn", "Kjonn"))),
                           []) != first


def test_a_labels_file_code_that_differs_by_leading_zeros_stops_the_start_saying_so(tmp_path, db):
    from protab.serve.config import load_config

    munis = "region,municipality\nR1,0301\nR1,0302\nR2,1103\nR2,1104\n"
    (tmp_path / "kommuner.csv").write_text("code;name\n301;Oslo\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"labels_file\.municipality 'kommuner\.csv'\.nb labels '301', which is not "
                                        r"a declared code.*'301' and '0301' differ only by leading zeros"):
        load_config(write_config(tmp_path, db, munis=munis, names="", labels=(
            'labels_file = { municipality = { file = "kommuner.csv", language = "nb" } }')))


def test_two_datasets_writing_one_language_two_ways_stop_the_start(tmp_path, db):
    """The catalogue's languages are the service's: 'en' in one dataset and 'EN' in another would be two."""
    from protab.serve.config import load_config

    path = write_config(tmp_path, db)
    other = ('[datasets.people]\ntable = "persons"\ndims = ["sex"]\ncodes = { sex = ["F", "M"] }\n'
             'labels = { sex = { EN = { F = "Female" } } }\n')
    path.write_text(path.read_text(encoding="utf-8").replace("[users.ana]", other + "[users.ana]"), encoding="utf-8")
    with pytest.raises(SpecError, match=r"serve\.toml.*datasets\.people dimension 'sex' has labels or names in 'EN', "
                                        r"datasets\.persons dimension '\w+' in 'en': one language written two ways"):
        load_config(path)


def test_the_languages_shown_are_those_of_the_datasets_the_user_may_use(tmp_path, db):
    """A dataset the user has no rights to says nothing of itself, its labels' languages neither."""
    from protab.serve.app import create_app

    path = write_config(tmp_path, db)
    other = ('[datasets.people]\ntable = "persons"\ndims = ["sex"]\ncodes = { sex = ["F", "M"] }\n'
             'labels = { sex = { de = { F = "Frau" } } }\n')
    path.write_text(path.read_text(encoding="utf-8").replace("[users.ana]", other + "[users.ana]"), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
        from starlette.testclient import TestClient

        with TestClient(create_app(path)) as c:
            assert c.get("/v1/catalog", headers=AUTH).json()["languages"] == ["en", "nb"]
            r = table(c, "de")
    assert r.status_code == 400 and "'de'" in r.json()["error"] and "'en', 'nb'" in r.json()["error"]


def test_a_codes_file_of_one_line_stops_the_start_without_showing_it(tmp_path, db):
    """A seed file named as a codes file by mistake (one line): the error names it, never its content."""
    from protab.serve.config import load_config

    with pytest.raises(SpecError) as err:
        load_config(write_config(tmp_path, db, munis="s3cr3t-seed-9d2c\n", labels="", names=""))
    assert "codes_file.municipality" in str(err.value) and "only one line" in str(err.value)
    assert "s3cr3t" not in str(err.value)
