"""Custom groups of table requests: a group's cells are the cells of its records (the same
value in every table; a group of one code has that code's value), bad groups are refused with
the key at fault, and the differencing rule refuses groups that would set apart a few records
from a published cell or from the groups answered before (to any user), also as an attack over
HTTP. The attacks of the review and the ledger have files of their own
(test_groups_cannot_be_differenced.py, test_serve_groups_ledger.py).

The test census (tests/serve_fixtures.py): 6,000 persons, exactly one of them 19 years old."""

from __future__ import annotations

import polars as pl
import pytest
import serve_fixtures as F

import protab as pt
from protab.serve.atom_ledger import Ledger
from protab.serve.broker import Broker
from protab.serve.caching import state_folder
from protab.serve.config import load_config
from protab.serve.groups import classification_of
from protab.serve.query import QueryRefused

httpx = pytest.importorskip("httpx")

AGES = [str(a) for a in range(20)]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("groups")
    db = F.build_database(folder / "micro.duckdb")
    config, tokens = F.write_setup(folder, db)
    return {"config": config, "db": db, "tokens": tokens, "folder": folder}


def _forget_groups(setup):
    """Start with an empty ledger of the groups users asked for (kept in the state folder)."""
    (state_folder(load_config(setup["config"])) / Ledger.file).unlink(missing_ok=True)


@pytest.fixture
def broker(setup):
    """A broker of its own for each test: the groups a user asked for start empty."""
    _forget_groups(setup)
    b = Broker(load_config(setup["config"]))
    try:
        yield b
    finally:
        b.close()


def _table(broker, body, user="bob"):
    return broker.table({"dataset": "persons", **body}, broker.config.users[user]).frame


def _cell(frame, **codes):
    row = frame.filter(pl.all_horizontal([pl.col(k) == v for k, v in codes.items()]))
    assert row.height == 1, row
    return row["n_pert"][0]


def test_a_group_of_one_code_has_that_codes_value(broker):
    plain = _table(broker, {"dims": ["municipality", "sex"]})
    grouped = _table(broker, {"dims": ["municipality", "sex"], "groups": {"municipality": {"g": ["R1-0"]}}})
    assert set(grouped["municipality"]) == {"g", "Total"}
    for sex in ("F", "M", "Total"):
        assert _cell(grouped, municipality="g", sex=sex) == _cell(plain, municipality="R1-0", sex=sex)


def test_a_group_has_the_value_of_its_records_in_every_table(broker, setup):
    young = {"agegroup": {"young": ["a0-4", "a5-9"], "older": ["a10-14"]}}
    alone = _table(broker, {"dims": ["agegroup"], "groups": young})
    by_sex = _table(broker, {"dims": ["agegroup", "sex"], "groups": young})
    assert _cell(alone, agegroup="young") == _cell(by_sex, agegroup="young", sex="Total")
    assert _cell(alone, agegroup="Total") == _cell(by_sex, agegroup="Total", sex="Total")  # the groups' total
    # the same records' cell computed here with Session.cell_key: the same value
    with broker.session() as s:  # the broker's read-only session (a second one would clash)
        want = s.cell_key("persons", pt.TableSpec({"sex": ["F", "M"]}, where=[("agegroup", "in", ["a0-4", "a5-9"])]),
                          pt.PTable.maximum_entropy(**F.PTABLE), threshold=F.THRESHOLD)
    for sex in ("F", "M", "Total"):
        assert _cell(by_sex, agegroup="young", sex=sex) == _cell(want, sex=sex)
    assert by_sex.columns == ["agegroup", "sex", "agegroup_level", "sex_level", "n_pert"]
    assert set(by_sex["agegroup_level"]) == {0, 1}  # the groups and their total, not their codes


@pytest.mark.parametrize("groups, words", [
    ({"agegroup": {"g": ["a0-4", "a99"]}}, "groups.agegroup.g: 'a99' are not codes of 'agegroup'"),
    ({"agegroup": {"g": []}}, "groups.agegroup.g: give a non-empty list of codes"),
    ({"agegroup": {"g": ["a0-4", "a5-9"], "h": ["a5-9"]}}, "code 'a5-9' is also in group 'g'; groups may not overlap"),
    ({"agegroup": {"a0-4": ["a0-4", "a5-9"]}}, "groups.agegroup.a0-4: a group's name is 1 to 60 printable characters"),
    ({"agegroup": {"Total": ["a0-4"]}}, "not 'Total' or '_T'"),
    ({"agegroup": {"_T": ["a0-4"]}}, "groups.agegroup._T: a group's name is"),
    ({"region": {"g": ["R1"]}}, "groups.region: 'region' is not one of the table's dims"),
    ({"agegroup": {"g": ["a0-4"]}, "sex": {"h": ["F"]}}, "groups must be an object of one dimension"),
    ({"agegroup": ["a0-4"]}, "groups.agegroup must be an object of 1 to 50 groups"),
    ({"agegroup": {"g": [True]}}, "give a non-empty list of codes of 'agegroup' (strings or whole numbers)"),
])
def test_bad_groups_name_the_key(broker, groups, words):
    with pytest.raises(QueryRefused) as info:
        _table(broker, {"dims": ["agegroup", "sex"], "groups": groups})
    assert words in str(info.value)
    assert _table(broker, {"dims": ["sex"]}).height == 3  # the service goes on


def test_a_grouped_dimension_takes_no_filter_or_level(broker):
    for extra in ({"filters": {"municipality": ["R1-0", "R1-1"]}}, {"levels": {"municipality": "region"}}):
        with pytest.raises(QueryRefused, match="a grouped dimension takes no filter and no level"):
            _table(broker, {"dims": ["municipality"], "groups": {"municipality": {"g": ["R1-0"]}}, **extra})


def test_a_group_of_one_record_is_refused_without_its_count(broker):
    with pytest.raises(QueryRefused) as info:
        _table(broker, {"dims": ["age"], "groups": {"age": {"nineteen": ["19"]}}})
    message = str(info.value)
    assert "disclosure rule groups.min_difference" in message and "group 'nineteen' holds too few records" in message
    assert not any(ch.isdigit() for ch in message.replace("19", "").replace("min_difference", ""))


def test_groups_that_differ_from_a_published_cell_by_one_record_are_refused(broker):
    """All ages but 19 is the total less one person, and the age group 15-19 less one person."""
    with pytest.raises(QueryRefused, match=r"group 'most' differs from (the total of age|agegroup 'a15-19') by too "
                                           r"few records"):
        _table(broker, {"dims": ["age"], "groups": {"age": {"most": AGES[:19]}}})
    # R3 less R3-0 differs from R3 by R3-0's 300 persons, but by one person (the 19-year-old) in a
    # cell of its crossing with age: refused crossed with age, answered alone
    east = {"municipality": {"east": ["R3-1", "R3-2", "R3-3"]}}
    with pytest.raises(QueryRefused, match=r"group 'east' differs from (region 'R3'|the total of municipality) by too few records .*"
                                           r"in a cell of its crossing with age"):
        _table(broker, {"dims": ["municipality", "age"], "groups": east})
    assert _table(broker, {"dims": ["municipality"], "groups": east}).height == 2


def test_a_group_may_not_be_named_as_a_code_of_another_level(broker):
    """A group of municipalities named like a region (a code of the classification's other level)
    or like SDMX's total would show two cells under one name in an exchange output."""
    for name in ("R1", "_T"):
        with pytest.raises(QueryRefused) as info:
            _table(broker, {"dims": ["municipality"], "groups": {"municipality": {name: ["R1-0"]}}})
        assert str(info.value) == (f"groups.municipality.{name}: a group's name is 1 to 60 printable characters, "
                                   "not 'Total' or '_T' and not a code of 'municipality' at any level")


def test_group_names_are_compared_with_codes_case_sensitively(broker):
    """'r1' and '_t' are not codes (codes are compared as they are written), so they may name groups."""
    frame = _table(broker, {"dims": ["municipality"], "groups": {"municipality": {"r1": ["R1-0", "R1-1"],
                                                                               "_t": ["R2-0", "R2-1"]}}})
    assert set(frame["municipality"]) == {"r1", "_t", "Total"}


def test_a_group_may_not_set_apart_a_few_records_from_an_earlier_group(broker):
    first = _table(broker, {"dims": ["age"], "groups": {"age": {"young": AGES[:10]}}})
    assert first.height == 2
    with pytest.raises(QueryRefused, match=r"group 'young\+' holds a part that the published codes and the groups "
                                           r"answered before \(to any user\) set apart, with too few records"):
        _table(broker, {"dims": ["age"], "groups": {"age": {"young+": [*AGES[:10], "19"]}}})
    # ... and another user may not either: the groups answered are the service's, not the user's
    with pytest.raises(QueryRefused, match=r"group 'young\+' holds a part"):
        _table(broker, {"dims": ["age"], "groups": {"age": {"young+": [*AGES[:10], "19"]}}}, user="carol")
    # setting apart many records is fine
    assert _table(broker, {"dims": ["age"], "groups": {"age": {"wider": AGES[:15]}}}).height == 2


def _kept(setup):
    """The age groups the ledger keeps, as sorted code lists."""
    cfg = load_config(setup["config"])
    cls = classification_of(cfg.datasets["persons"], "age")
    cells = Ledger(state_folder(cfg)).cells(cls)
    return sorted(sorted(c for c, m in zip(cls.leaves, row) if m) for row in cells)


def test_a_restart_forgets_no_group_answered(setup):
    """The ledger is in the state folder: a new broker (a restarted service) still refuses a
    group that sets apart a few records from one answered before the restart; a refused group
    is not kept."""
    _forget_groups(setup)
    for attempt in range(2):
        b = Broker(load_config(setup["config"]))
        try:
            if attempt == 0:
                _table(b, {"dims": ["age"], "groups": {"age": {"young": AGES[:10]}}})
                with pytest.raises(QueryRefused, match="holds a part"):
                    _table(b, {"dims": ["age"], "groups": {"age": {"near": [*AGES[:10], "19"]}}})
            else:
                with pytest.raises(QueryRefused, match=r"group 'young\+' holds a part"):
                    _table(b, {"dims": ["age"], "groups": {"age": {"young+": [*AGES[:10], "19"]}}}, user="carol")
                assert _table(b, {"dims": ["age"], "groups": {"age": {"young": AGES[:10]}}}).height == 2
        finally:
            b.close()
    assert _kept(setup) == [sorted(AGES[:10])]


def test_the_differencing_attack_over_http_is_refused(setup):
    """An analyst tries to average out the noise of the one 19-year-old: each base group and the
    same group with age 19 added; every second group of a pair is refused, so no difference of
    the pair is ever published (bounded: five pairs, on 127.0.0.1)."""
    _forget_groups(setup)
    server = F.Server(setup["config"])
    try:
        def ask(groups):
            return httpx.post(server.url + "/v1/table", timeout=60,
                              headers={"Authorization": f"Bearer {setup['tokens']['bob']}"},
                              json={"dataset": "persons", "dims": ["age"], "groups": {"age": groups}})

        published = []
        for k in range(5):
            base = AGES[k:k + 10]
            first, second = ask({f"b{k}": base}), ask({f"b{k}+": [*base, "19"]})
            assert first.status_code == 200, first.text
            assert second.status_code == 400 and second.json()["rule"] == "groups.min_difference", second.text
            assert f"group 'b{k}+' holds a part" in second.json()["error"]
            published.append(first.json())
        assert all(len(p["rows"]) == 2 for p in published)
        # the service keeps serving, this user and others
        assert ask({"other": AGES[:5]}).status_code == 200
    finally:
        server.stop()
