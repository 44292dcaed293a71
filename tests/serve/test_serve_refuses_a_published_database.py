"""``protab serve`` on a database written by ``protab publish`` (protected tables, the table
``protab_published`` and the view ``protab_catalog``: no records, no record keys) refuses to
start with an exact message: the database was written by protab publish, it holds protected
tables and not microdata, and what to do — point the service at the microdata, or give the
analysts the published file — never advising to add record keys to published tables."""

from __future__ import annotations

import subprocess
import sys

import pytest
import serve_fixtures as F

REQUEST = """\
database = "micro.duckdb"
[ptable]
maximum_entropy = { D = 3, V = 1 }
[[tables]]
name = "persons"
source = "persons"
dims = ["sex", "agegroup"]
[[tables]]
name = "by_region"
source = "persons"
dims = ["region"]
"""


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    folder = tmp_path_factory.mktemp("published")
    F.build_database(folder / "micro.duckdb", persons=500)
    (folder / "request.toml").write_text(REQUEST, encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "protab.cli", "publish", "request.toml", "--to", "published.duckdb"],
                       cwd=folder, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return folder


def _serve(folder, config_text):
    config = folder / "serve-published.toml"
    config.write_text(config_text, encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "protab.serve", "--config", str(config), "--port",
                           str(F.free_port())], cwd=folder, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("dataset", ["persons", "by_region"], ids=["a published table named as the microdata",
                                                                   "another published table"])
def test_serving_a_published_database_is_refused_saying_what_to_do(published, dataset):
    text = F.config_text(str(published / "published.duckdb"), audit="audit-published.jsonl")
    if dataset == "by_region":
        text = text.replace("[datasets.persons]", "[datasets.by_region]\ndims = [\"region\"]\n"
                            "codes = { region = [\"R1\", \"R2\", \"R3\"] }\n[datasets.persons]", 1)
    r = _serve(published, text)
    err = r.stderr
    assert r.returncode == 2, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    path = str(published / "published.duckdb")
    assert f"database {path!r} was written by protab publish: it holds protected tables" in err
    assert "not microdata" in err and "'by_region', 'persons'" in err
    assert "point `database` (or --db) at the microdata" in err and "give the analysts the published file" in err
    assert "protab keys" not in err and "add them" not in err  # never: record keys on published tables
    assert not list((published / "serve_state").glob("snapshot-*")), "no snapshot is left behind"


def test_the_microdata_the_request_read_is_served(published):
    """The advice followed: the same serve.toml on the microdata starts (checked without listening)."""
    from protab.serve.broker import Broker
    from protab.serve.config import load_config

    config = published / "serve-micro.toml"
    config.write_text(F.config_text(str(published / "micro.duckdb"), audit="audit-micro.jsonl"), encoding="utf-8")
    Broker(load_config(config)).close()
