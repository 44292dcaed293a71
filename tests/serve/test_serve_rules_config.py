"""Disclosure rules files with bad input (issue 28): unknown rule names, levels that do not
exist, contradictory rules, a rules file that cannot be used. Each stops the service at config
load with a SpecError naming the key, and no threshold value; a good one is parsed as written."""

from __future__ import annotations

import pytest
import serve_fixtures as F

import protab as pt
from protab.serve.config import load_config

SECRET = 987_654  # a threshold: must not appear in any message


def _load(tmp_path, rules: str = "", rules_file: str | None = None, extra_top: str = ""):
    text = F.config_text(":memory:")
    if extra_top:
        text = extra_top + "\n" + text
    if rules_file is not None:
        (tmp_path / "rules.toml").write_text(rules_file, encoding="utf-8")
    (tmp_path / "serve.toml").write_text(text + rules, encoding="utf-8")
    return load_config(tmp_path / "serve.toml")


def _refused(tmp_path, *args, **kw) -> str:
    with pytest.raises(pt.errors.SpecError) as info:
        _load(tmp_path, *args, **kw)
    message = str(info.value)
    assert str(SECRET) not in message
    return message


def test_a_good_rules_table_is_parsed_as_written(tmp_path):
    cfg = _load(tmp_path, f"""
[datasets.persons.rules]
max_dims = 3
min_population = {SECRET}
blocked = [["sex", "age", "municipality"]]
[datasets.persons.rules.area]
dim = "municipality"
min_population = {{ region = {SECRET}, municipality = 5 }}
detail = {{ region = {{ age = "age" }} }}
""")
    rules = cfg.datasets["persons"].rules
    assert (rules.max_dims, rules.min_population, rules.blocked) == (3, SECRET, (("sex", "age", "municipality"),))
    assert rules.area == "municipality" and dict(rules.area_min_population) == {"region": SECRET, "municipality": 5}
    assert rules.column_level["region"] == ("municipality", 1) and rules.column_level["age"] == ("age", 2)
    assert SECRET not in (repr(rules), repr(cfg))
    assert cfg.datasets["households"].rules.blocked == ()  # no rules: the defaults
    assert cfg.datasets["households"].rules.max_cells is None


@pytest.mark.parametrize("rules, words", [
    ("[datasets.persons.rules]\nmax_dim = 3", "unknown key 'max_dim' in datasets.persons.rules; did you mean 'max_dims'?"),
    ("[datasets.persons.rules.area]\ndim = \"municipality\"\nminimum = 3", "unknown key 'minimum' in "
     "datasets.persons.rules.area"),
    ("[datasets.persons.rules]\nblocked = [[\"sex\", \"town\"]]", "datasets.persons.rules.blocked[0] names 'town', "
     "which is not a dimension or a level of one"),
    ("[datasets.persons.rules.area]\ndim = \"town\"", "datasets.persons.rules.area.dim names 'town'"),
    ("[datasets.persons.rules.area]\ndim = \"region\"", "it is a level of 'municipality': name that"),
    (f"[datasets.persons.rules.area]\ndim = \"municipality\"\nmin_population = {{ county = {SECRET} }}",
     "datasets.persons.rules.area.min_population.county: 'county' is not a level of 'municipality'"),
    ("[datasets.persons.rules.area]\ndim = \"municipality\"\ndetail = { municipality = { age = \"decade\" } }",
     "datasets.persons.rules.area.detail.municipality.age = 'decade' is not a level of 'age'"),
    ("[datasets.persons.rules.area]\ndim = \"municipality\"\ndetail = { municipality = { occupation = \"x\" } }",
     "datasets.persons.rules.area.detail.municipality.occupation: 'occupation' is not a variable"),
    ("[datasets.persons.rules]\nmin_population = \"987654\"", "datasets.persons.rules.min_population must be an "
     "integer"),
    (f"[datasets.persons.rules]\nmin_population = -{SECRET}", "datasets.persons.rules.min_population must be"),
])
def test_unknown_rules_and_levels_name_the_key(tmp_path, rules, words):
    assert words in _refused(tmp_path, rules)


@pytest.mark.parametrize("rules, words", [
    ("[datasets.persons.rules]\nblocked = [[\"region\", \"municipality\"]]",
     "blocked[0]: names two levels of the same variable 'municipality'"),
    ("[datasets.persons.rules]\nblocked = [[\"sex\"]]", "blocked[0]: a blocked combination names at least two"),
    ("[datasets.persons.rules.area]\ndim = \"municipality\"\ndetail = { municipality = { municipality = \"region\" } }",
     "detail.municipality.municipality: the area's own levels are not limited"),
])
def test_contradictory_or_meaningless_rules_are_refused(tmp_path, rules, words):
    assert words in _refused(tmp_path, rules)


def test_a_finer_area_level_may_not_allow_more_detail(tmp_path):
    """With region (and finer), age at level agegroup at most; municipality is finer than region,
    so allowing age there contradicts it."""
    text = F.config_text(":memory:")  # the fixture's age: a hierarchy (agegroup > age)
    (tmp_path / "serve.toml").write_text(text + """
[datasets.persons.rules.area]
dim = "municipality"
detail = { region = { age = "agegroup" }, municipality = { age = "age" } }
""", encoding="utf-8")
    with pytest.raises(pt.errors.SpecError, match=r"area.detail.municipality.age = 'age' contradicts "
                                                  r"detail.region.age: municipality is finer than region"):
        load_config(tmp_path / "serve.toml")


def test_a_rules_file(tmp_path):
    cfg = _load(tmp_path, rules_file=f"[persons]\nmax_dims = 2\nmin_population = {SECRET}\n",
                extra_top='rules_file = "rules.toml"')
    assert cfg.datasets["persons"].rules.max_dims == 2


@pytest.mark.parametrize("content, words", [
    ("[people]\nmax_dims = 2\n", "unknown key 'people' in the file"),
    ("[persons]\nmax_dim = 2\n", "unknown key 'max_dim' in persons; did you mean 'max_dims'?"),
    (f"[persons]\nmin_population = \"x{SECRET}\"\n", "persons.min_population must be an integer"),
])
def test_a_bad_rules_file_names_the_file_and_key(tmp_path, content, words):
    message = _refused(tmp_path, rules_file=content, extra_top='rules_file = "rules.toml"')
    assert "rules.toml" in message and words in message


def test_rules_in_both_places_and_a_missing_file_are_refused(tmp_path):
    both = _refused(tmp_path, "[datasets.persons.rules]\nmax_dims = 3\n", rules_file="[persons]\nmax_dims = 2\n",
                    extra_top='rules_file = "rules.toml"')
    assert "datasets.persons.rules and the rules_file both give rules for 'persons'" in both
    missing = _refused(tmp_path, extra_top='rules_file = "nowhere.toml"')
    assert "nowhere.toml" in missing
