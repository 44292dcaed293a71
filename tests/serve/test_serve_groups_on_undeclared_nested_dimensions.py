"""Two dimensions that nest in the records (every age has one age group) but that serve.toml does
not declare as levels of one classification: the differencing rule could not judge groups on
them together, so the service warns the office at start-up and refuses custom groups on either
(failing closed); declared as one classification, groups on both are judged as one variable."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette")

import serve_fixtures as F

from protab.serve.broker import Broker
from protab.serve.config import load_config
from protab.serve.query import QueryRefused


def _undeclared(text: str) -> str:
    """The fixture's serve.toml with agegroup and age as two flat dimensions."""
    flat = {"municipality": F.PERSONS_CODES["municipality"], "sex": F.PERSONS_CODES["sex"],
            "agegroup": F.AGEGROUP_CODES, "age": F.AGE_CODES}
    text = text.replace(', age = ["agegroup", "age"] }', " }")
    return text.replace(f"codes = {F._toml_value(F.PERSONS_CODES)}", f"codes = {F._toml_value(flat)}")


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    folder = tmp_path_factory.mktemp("nested")
    db = F.build_database(folder / "micro.duckdb", persons=1500)
    out = {}
    for name, edit in (("declared", lambda t: t), ("undeclared", _undeclared)):
        path = folder / f"{name}.toml"
        path.write_text(edit(F.config_text(db, audit=f"{name}.jsonl", state_dir=f"state-{name}", min_population=1)),
                        encoding="utf-8")
        out[name] = Broker(load_config(path))
    yield out
    for b in out.values():
        b.close()


def _table(broker: Broker, body: dict) -> object:
    return broker.table({"dataset": "persons", **body}, broker.config.users["bob"])


def test_the_office_is_warned_of_dimensions_that_nest_undeclared(brokers):
    warned = brokers["undeclared"].warnings
    assert any("'age' nests with 'agegroup'" in w for w in warned), warned
    assert any("'agegroup' nests with 'age'" in w for w in warned), warned
    assert brokers["declared"].warnings == []


@pytest.mark.parametrize("dim, groups", [
    ("age", {"young": [str(a) for a in range(10)], "old": [str(a) for a in range(10, 20)]}),
    ("agegroup", {"young": ["a0-4", "a5-9"], "old": ["a10-14", "a15-19"]}),
])
def test_custom_groups_on_either_are_refused_until_declared(brokers, dim, groups):
    with pytest.raises(QueryRefused) as info:
        _table(brokers["undeclared"], {"dims": [dim], "groups": {dim: groups}})
    assert info.value.rule == "groups.classification"
    assert "not offered" in str(info.value) and "declare the classification" in info.value.advice
    declared = _table(brokers["declared"], {"dims": [dim], "groups": {dim: groups}})
    assert declared.frame.height == 3  # the two groups and their total


def test_groups_of_another_dimension_are_still_answered(brokers):
    answer = _table(brokers["undeclared"], {"dims": ["municipality"], "groups": {"municipality": {
        "west": ["R1-0", "R1-1", "R2-0"], "east": ["R1-2", "R1-3", "R2-1", "R2-2", "R2-3"]}}})
    assert answer.frame.height == 3


def test_the_two_levels_attack_is_refused_when_declared(brokers):
    """Ages 15 to 18 as a group, after the age group 15-19 as a group: they differ by the one
    person aged 19. Declared, both are groups of one variable and the second is refused."""
    broker = brokers["declared"]
    _table(broker, {"dims": ["agegroup"], "groups": {"agegroup": {"teens": ["a15-19"], "kids": ["a0-4", "a5-9"]}}})
    with pytest.raises(QueryRefused) as info:
        _table(broker, {"dims": ["age"], "groups": {"age": {"teens": ["15", "16", "17", "18"]}}})
    assert info.value.rule == "groups.min_difference"
