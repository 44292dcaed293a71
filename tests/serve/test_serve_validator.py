"""The SQL gate of the query service (issue 13): accepted forms, refused queries, round trips.

Expected queries are written by hand from the SQL's meaning (what a GROUP BY ROLLUP/CUBE/
GROUPING SETS groups by, what a WHERE keeps), not taken from the validator's output.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protab.errors import ProtabError
from protab.serve import (
    ALLOWED_FORM,
    DatasetRights,
    Filter,
    Measure,
    Query,
    QueryForbidden,
    QueryRefused,
    validate,
)

CATALOG = {
    "persons": DatasetRights(
        dims=frozenset({"region", "sex", "age_group", "Tenure"}), measures=frozenset({"income", "hours"})
    ),
    "firms": DatasetRights(dims=frozenset({"nace", "size_class"}), measures=frozenset({"turnover"})),
}
# The analyst of the refusal tests: no firms, no age_group, no hours.
RIGHTS = {"persons": DatasetRights(dims=frozenset({"region", "sex", "Tenure"}), measures=frozenset({"income"}))}

N = Measure("count", None, "n")
R, S, T, A = "region", "sex", "Tenure", "age_group"


def expect(dims=(), sets=((),), filters=(), measures=(N,), columns=None, order_by=(), limit=None, dataset="persons"):
    columns = tuple(dims) + tuple(m.alias for m in measures) if columns is None else columns
    return dict(
        dataset=dataset,
        dims=tuple(dims),
        grouping_sets=tuple(sets),
        filters=tuple(filters),
        measures=tuple(measures),
        columns=columns,
        order_by=tuple(order_by),
        limit=limit,
    )


ACCEPTED = [
    ("SELECT region, count(*) FROM persons GROUP BY region", expect([R], [(R,)])),
    ("SELECT count(*) FROM persons", expect()),
    ("SELECT count(*) AS total FROM persons GROUP BY ()", expect(measures=[Measure("count", None, "total")])),
    ("SELECT count(*) FROM firms", expect(dataset="firms")),
    ("SELECT region, sex, count(*) FROM persons GROUP BY ROLLUP(region, sex)", expect([R, S], [(R, S), (R,), ()])),
    (
        "SELECT region, sex, count(*) FROM persons GROUP BY CUBE(region, sex)",
        expect([R, S], [(R, S), (R,), (S,), ()]),
    ),
    (
        "SELECT region, sex, count(*) FROM persons GROUP BY GROUPING SETS ((region, sex), (sex), ())",
        expect([R, S], [(R, S), (S,), ()]),
    ),
    ("SELECT region, sex, count(*) FROM persons GROUP BY region, ROLLUP(sex)", expect([R, S], [(R, S), (R,)])),
    # a composite element of ROLLUP; dims keep SELECT order, sets are in dims order
    (
        "SELECT sex, region, tenure, count(*) FROM persons GROUP BY ROLLUP((region, sex), tenure)",
        expect([S, R, T], [(S, R, T), (S, R), ()]),
    ),
    # CUBE(a), CUBE(b) is CUBE(a, b); a GROUP BY in another order groups the same
    (
        "SELECT region, sex, count(*) FROM persons GROUP BY CUBE(sex), CUBE(region)",
        expect([R, S], [(R, S), (R,), (S,), ()]),
    ),
    ("SELECT region, sex, count(*) FROM persons GROUP BY sex, region", expect([R, S], [(R, S)])),
    (
        "SELECT region, count(*) FROM persons WHERE region = 'N1' AND sex IN ('m', 'f', 'f') AND Tenure <> 3 "
        "AND age_group NOT IN (1, '2', 007, -4) GROUP BY region",
        expect(
            [R],
            [(R,)],
            filters=[  # sorted by column name as Python sorts text: upper case first
                Filter(T, "not in", ("3",)),
                Filter(A, "not in", ("-4", "1", "2", "7")),
                Filter(R, "in", ("N1",)),
                Filter(S, "in", ("f", "m")),
            ],
        ),
    ),
    # several predicates on one column: IN lists intersect, <> and NOT IN take values out
    (
        "SELECT count(*) FROM persons WHERE region IN ('a', 'b', 'c') AND region != 'c' AND region IN ('b', 'c', 'a')"
        " AND sex <> 'x' AND sex NOT IN ('y')",
        expect(filters=[Filter(R, "in", ("a", "b")), Filter(S, "not in", ("x", "y"))]),
    ),
    # string literals holding ; -- /* */ and quotes are values, not SQL
    (
        "SELECT count(*) FROM persons WHERE region IN ('a;--', '/* x */', 'O''Neil', '; DROP TABLE t')",
        expect(filters=[Filter(R, "in", ("/* x */", "; DROP TABLE t", "O'Neil", "a;--"))]),
    ),
    (
        "SELECT region, count(*) AS N, sum(income) AS inc, avg(income) FROM persons GROUP BY region "
        "ORDER BY inc DESC, region LIMIT 10",
        expect(
            [R],
            [(R,)],
            measures=[Measure("count", None, "N"), Measure("sum", "income", "inc"), Measure("avg", "income", "avg_income")],
            order_by=[("inc", True), (R, False)],
            limit=10,
        ),
    ),
    # measures before dims: columns follow SELECT
    (
        "SELECT sum(hours), region, count(*) FROM persons GROUP BY region ORDER BY N ASC, SUM_HOURS",
        expect(
            [R],
            [(R,)],
            measures=[Measure("sum", "hours", "sum_hours"), N],
            columns=("sum_hours", R, "n"),
            order_by=[("n", False), ("sum_hours", False)],
        ),
    ),
    # case-insensitive unquoted names, exact quoted names, the dataset as qualifier, a final ';'
    (
        'select REGION, "Tenure", COUNT(*) from PERSONS group by Persons.region, "persons"."Tenure" '
        "order by tenure desc;",
        expect([R, T], [(R, T)], order_by=[(T, True)]),
    ),
    ("FROM persons SELECT region, count(*) GROUP BY region", expect([R], [(R,)])),
    ("SELECT region, count(*) FROM persons GROUP BY region LIMIT 1000000", expect([R], [(R,)], limit=1_000_000)),
]


@pytest.mark.parametrize(("sql", "fields"), ACCEPTED, ids=[s[:60] for s, _ in ACCEPTED])
def test_accepted_forms(sql, fields):
    q = validate(sql, CATALOG)
    assert {k: getattr(q, k) for k in fields} == fields
    assert validate(q.normalised, CATALOG) == q


def test_normalised_text():
    q = validate(
        "select sex, REGION, count(*) as Total, avg(income) from persons where sex in ('m', 'f') and region <> 'O''x' "
        "group by rollup(sex, region) order by total desc limit 5",
        CATALOG,
    )
    assert q.normalised == (
        "SELECT \"sex\", \"region\", count(*) AS \"Total\", avg(\"income\") FROM \"persons\" "
        "WHERE \"region\" NOT IN ('O''x') AND \"sex\" IN ('f', 'm') "
        'GROUP BY GROUPING SETS (("sex", "region"), ("sex"), ()) ORDER BY "Total" DESC LIMIT 5'
    )


EQUIVALENT = [
    [
        "SELECT region, count(*) FROM persons GROUP BY region",
        'select REGION , COUNT( * )\n\tfrom "persons"  GROUP  BY persons.region ;  ',
        'SELECT "region", count(*) AS n FROM persons GROUP BY "region"',
        "SELECT region, count(*) FROM persons GROUP BY GROUPING SETS ((region))",
    ],
    [
        "SELECT region, sex, count(*) FROM persons GROUP BY ROLLUP(region, sex)",
        "SELECT region, sex, count(*) FROM persons GROUP BY GROUPING SETS ((region, sex), (region), ())",
        "SELECT region, sex, count(*) FROM persons GROUP BY GROUPING SETS ((), (region), (sex, region), (region))",
    ],
    [
        "SELECT count(*) FROM persons WHERE sex = 'f' AND region IN ('b', 'a')",
        "SELECT count(*) FROM persons WHERE (region IN ('a', 'b', 'a')) AND sex IN ('f')",
        "SELECT count(*) FROM persons WHERE region IN ('a', 'b', 'c') AND region <> 'c' AND sex = 'f'",
    ],
    [
        "SELECT count(*) FROM persons WHERE tenure <> 3 AND tenure <> '4'",
        "SELECT count(*) FROM persons WHERE tenure NOT IN ('3', 4)",
        "SELECT count(*) FROM persons WHERE NOT tenure IN (3, 4)",
    ],
]


@pytest.mark.parametrize("spellings", EQUIVALENT, ids=range(len(EQUIVALENT)))
def test_equivalent_spellings_give_one_normalised_query(spellings):
    queries = [validate(s, CATALOG) for s in spellings]
    assert all(q == queries[0] for q in queries)
    assert len({q.normalised for q in queries}) == 1


def test_different_queries_differ():
    base = "SELECT region, count(*) FROM persons GROUP BY region ORDER BY region"
    assert validate(base, CATALOG).normalised != validate(base + " DESC", CATALOG).normalised
    assert validate(base, CATALOG) != validate(base + " LIMIT 3", CATALOG)


def test_rights_subset_accepts_what_is_allowed():
    q = validate("SELECT tenure, count(*), sum(income) FROM persons WHERE sex = 'f' GROUP BY tenure", CATALOG, RIGHTS)
    assert q.dims == (T,) and q.measures[1] == Measure("sum", "income", "sum_income")


def test_error_classes():
    assert issubclass(QueryRefused, ProtabError) and issubclass(QueryForbidden, ProtabError)
    assert QueryRefused.status == 400 and QueryForbidden.status == 403
    assert not issubclass(QueryForbidden, QueryRefused) and not issubclass(QueryRefused, QueryForbidden)


B = "SELECT region, count(*) FROM persons"
G = " GROUP BY region"
LONG = "SELECT region, count(*) FROM persons WHERE region IN (" + ", ".join(["'x'"] * 2600) + ")" + G

REFUSED = [
    # statements, comments, length, text
    (B + G + " -- x", QueryRefused, "comments are not accepted"),
    ("SELECT region, /* x */ count(*) FROM persons" + G, QueryRefused, "comments are not accepted"),
    (B + G + " /*+ hint */", QueryRefused, "comments are not accepted"),
    ("SELECT 1; DROP TABLE t", QueryRefused, "only one statement"),
    (B + G + "; SELECT 1", QueryRefused, "only one statement"),
    (B + G + ";;", QueryRefused, "only one statement"),
    ("DROP TABLE persons", QueryRefused, "only a SELECT query"),
    ("INSERT INTO persons VALUES (1)", QueryRefused, "only a SELECT query"),
    ("EXPLAIN SELECT count(*) FROM persons", QueryRefused, "only a SELECT query is accepted, not EXPLAIN"),
    ("(SELECT count(*) FROM persons)", QueryRefused, "only a SELECT query"),
    ("PRAGMA show_tables", QueryRefused, "only a SELECT query"),
    (LONG, QueryRefused, "at most 10000 are accepted"),
    (b"SELECT count(*) FROM persons", QueryRefused, "SQL text (a string)"),
    (None, QueryRefused, "SQL text (a string)"),
    ("   \n ", QueryRefused, "empty"),
    ("SELECT count(*) FROM persons WHERE", QueryRefused, "could not be parsed"),
    ("SELECT count(*) FROM persons WHERE " + "(" * 4000 + "region = 'a'" + ")" * 4000, QueryRefused, "nested"),
    # unicode tricks: invisible characters, look-alike letters, full-width keywords, the Kelvin sign
    (B + G + "\u200b", QueryRefused, "U+200B"),
    ("SELECT region, count(*) FROM persons\u202e GROUP BY region", QueryRefused, "U+202E"),
    ("SELECT count(*) FROM persons WHERE region = 'a\u00a0b'", QueryRefused, "U+00A0"),
    ("SELECT count(*) FROM persons\x00", QueryRefused, "U+0000"),
    ("SELECT r\u0435gion, count(*) FROM persons GROUP BY r\u0435gion", QueryRefused, "unknown column"),
    ("SELECT count(*) FROM persons WHERE \u212aegion = 1", QueryRefused, "unknown column"),
    ("\uff33\uff25\uff2c\uff25\uff23\uff34 count(*) FROM persons", QueryRefused, "only a SELECT query"),
    ("SELECT count(*) FROM persons WHERE region \uff1d 'a'", QueryRefused, "could not be parsed"),
    ("SELECT count(*) FROM persons WHERE region = 'a\nb'", QueryRefused, "one line"),
    # the SELECT list
    ("SELECT * FROM persons", QueryRefused, "SELECT * is not accepted"),
    ("FROM persons", QueryRefused, "SELECT * is not accepted"),
    ("SELECT persons.*, count(*) FROM persons", QueryRefused, "SELECT * is not accepted"),
    ("SELECT DISTINCT region, count(*) FROM persons" + G, QueryRefused, "DISTINCT"),
    ("SELECT region AS r, count(*) FROM persons" + G, QueryRefused, "aliases on dimensions"),
    ("SELECT upper(region), count(*) FROM persons GROUP BY upper(region)", QueryRefused, "UPPER(region)"),
    ("SELECT CAST(region AS INT), count(*) FROM persons GROUP BY region", QueryRefused, "casts are not accepted"),
    ("SELECT region::INT, count(*) FROM persons GROUP BY region", QueryRefused, "casts are not accepted"),
    ("SELECT 'x', count(*) FROM persons", QueryRefused, "SELECT takes dimension columns"),
    ("SELECT region, count(region) FROM persons" + G, QueryRefused, "only count(*)"),
    ("SELECT region, count(DISTINCT sex) FROM persons" + G, QueryRefused, "count(DISTINCT"),
    ("SELECT region FROM persons" + G, QueryRefused, "count(*) exactly once"),
    ("SELECT region, count(*), count(*) AS m FROM persons" + G, QueryRefused, "count(*) exactly once"),
    ("SELECT region, count(*), sum(region) FROM persons" + G, QueryRefused, "take measures only"),
    ("SELECT region, count(*), sum(DISTINCT income) FROM persons" + G, QueryRefused, "sum(DISTINCT"),
    ("SELECT region, count(*), max(income) FROM persons" + G, QueryRefused, "MAX(income)"),
    ("SELECT region, count(*), sum(income * 2) FROM persons" + G, QueryRefused, "plain column names"),
    ("SELECT region, count(*) OVER () FROM persons", QueryRefused, "window functions"),
    ("SELECT region, count(*), sum(income) FILTER (WHERE sex = 'f') FROM persons" + G, QueryRefused, "SELECT takes"),
    ("SELECT region, region, count(*) FROM persons" + G, QueryRefused, "selected twice"),
    ("SELECT region, count(*) AS region FROM persons" + G, QueryRefused, "appears twice"),
    ("SELECT region, count(*) AS x, sum(income) AS X FROM persons" + G, QueryRefused, "appears twice"),
    ('SELECT region, count(*) AS "a\tb" FROM persons' + G, QueryRefused, "printable"),
    # FROM: joins, subqueries, CTEs, set operations, aliases, qualified names, table functions
    (B + " JOIN firms ON true" + G, QueryRefused, "joins are not accepted"),
    (B + ", firms" + G, QueryRefused, "joins are not accepted"),
    ("SELECT region, count(*) FROM (SELECT * FROM persons)" + G, QueryRefused, "subqueries"),
    ("WITH p AS (SELECT * FROM persons) SELECT region, count(*) FROM p" + G, QueryRefused, "WITH"),
    (B + G + " UNION " + B + G, QueryRefused, "UNION"),
    (B + G + " EXCEPT " + B + G, QueryRefused, "UNION, INTERSECT and EXCEPT"),
    ("SELECT p.region, count(*) FROM persons p GROUP BY p.region", QueryRefused, "table aliases"),
    ("SELECT region, count(*) FROM persons AS p" + G, QueryRefused, "table aliases"),
    ("SELECT region, count(*) FROM main.persons" + G, QueryRefused, "qualified table names"),
    ("SELECT firms.region, count(*) FROM persons GROUP BY region", QueryRefused, "qualified names other than"),
    ("SELECT main.persons.region, count(*) FROM persons GROUP BY region", QueryRefused, "qualified names other than"),
    ("SELECT count(*) FROM read_csv('/etc/passwd')", QueryRefused, "FROM takes one dataset name"),
    ("SELECT count(*) FROM persons TABLESAMPLE 10%", QueryRefused, "FROM takes one dataset name"),
    ("SELECT 1", QueryRefused, "FROM <dataset> is missing"),
    # WHERE
    (B + " WHERE region = 'a' OR sex = 'f'" + G, QueryRefused, "OR is not accepted"),
    (B + " WHERE region = 'a' AND (sex = 'f' OR sex = 'm')" + G, QueryRefused, "OR is not accepted"),
    (B + " WHERE NOT (region = 'a')" + G, QueryRefused, "NOT (...) is not accepted"),
    (B + " WHERE NOT (region IN ('a'))" + G, QueryRefused, "NOT (...) is not accepted"),
    (B + " WHERE region LIKE 'a%'" + G, QueryRefused, "LIKE is not accepted"),
    (B + " WHERE region ILIKE 'a%'" + G, QueryRefused, "ILIKE is not accepted"),
    (B + " WHERE tenure BETWEEN 1 AND 3" + G, QueryRefused, "BETWEEN is not accepted"),
    (B + " WHERE region IS NULL" + G, QueryRefused, "IS (NULL) is not accepted"),
    (B + " WHERE region = NULL" + G, QueryRefused, "string or integer literals only"),
    (B + " WHERE region = 1.5" + G, QueryRefused, "string or integer literals only"),
    (B + " WHERE region = TRUE" + G, QueryRefused, "string or integer literals only"),
    (B + " WHERE region = DATE '2020-01-01'" + G, QueryRefused, "casts are not accepted"),
    (B + " WHERE lower(region) = 'a'" + G, QueryRefused, "plain column names"),
    (B + " WHERE region = sex" + G, QueryRefused, "column-to-column"),
    (B + " WHERE region IN (sex)" + G, QueryRefused, "column-to-column"),
    (B + " WHERE 'a' = region" + G, QueryRefused, "plain column names"),
    (B + " WHERE region IN (SELECT region FROM persons)" + G, QueryRefused, "subqueries"),
    (B + " WHERE income = 3" + G, QueryRefused, "is a measure"),
    (B + " WHERE region = 'a' AND region = 'b'" + G, QueryRefused, "exclude every value"),
    (B + " WHERE pid = 17" + G, QueryRefused, "unknown column 'pid'"),
    # GROUP BY, HAVING
    (B + " GROUP BY 1", QueryRefused, "GROUP BY by position"),
    (B + " GROUP BY ALL", QueryRefused, "GROUP BY ALL"),
    (B + " GROUP BY region WITH ROLLUP", QueryRefused, "WITH ROLLUP"),
    (B + " GROUP BY upper(region)", QueryRefused, "plain column names"),
    (B + G + " HAVING count(*) > 10", QueryRefused, "HAVING"),
    (B, QueryRefused, "missing from GROUP BY"),
    (B + " GROUP BY region, sex", QueryRefused, "missing from SELECT"),
    ("SELECT region, sex, count(*) FROM persons GROUP BY CUBE(region, sex, tenure)", QueryRefused, "missing from"),
    (B + " GROUP BY CUBE(" + ", ".join(["region"] * 13) + ")", QueryRefused, "too large"),
    (B + G + " QUALIFY count(*) > 1", QueryRefused, "QUALIFY"),
    # ORDER BY, LIMIT, OFFSET
    (B + G + " ORDER BY 1", QueryRefused, "ORDER BY by position"),
    (B + G + " ORDER BY count(*)", QueryRefused, "output column names only"),
    (B + G + " ORDER BY sex", QueryRefused, "not an output column"),
    (B + G + " ORDER BY persons.region", QueryRefused, "output column names only"),
    (B + G + " ORDER BY region NULLS FIRST", QueryRefused, "NULLS FIRST"),
    (B + G + " ORDER BY region, region DESC", QueryRefused, "twice"),
    (B + G + " LIMIT 0", QueryRefused, "LIMIT must be between 1 and"),
    (B + G + " LIMIT 1000001", QueryRefused, "LIMIT must be between 1 and"),
    (B + G + " LIMIT 1 + 1", QueryRefused, "positive integer literal"),
    (B + G + " LIMIT 10%", QueryRefused, "positive integer literal"),
    (B + G + " LIMIT '5'", QueryRefused, "positive integer literal"),
    (B + G + " LIMIT 5 OFFSET 2", QueryRefused, "OFFSET"),
    (B + G + " LIMIT 2, 5", QueryRefused, "OFFSET"),
    # names: unknown (400, listing only what the user may use) and known but not allowed (403)
    ("SELECT region, count(*) FROM people" + G, QueryRefused, "unknown dataset 'people'; datasets you may query: 'persons'"),
    ("SELECT pid, count(*) FROM persons GROUP BY pid", QueryRefused, "dimensions you may use: 'Tenure', 'region', 'sex'"),
    ("SELECT region, count(*), sum(record_key) FROM persons" + G, QueryRefused, "measures: 'income'"),
    ('SELECT "Region", count(*) FROM persons GROUP BY "Region"', QueryRefused, "unknown column 'Region'"),
    ('SELECT region, count(*) FROM "Persons"' + G, QueryRefused, "unknown dataset 'Persons'"),
    ("SELECT nace, count(*) FROM firms GROUP BY nace", QueryForbidden, "no rights to dataset 'firms'"),
    ("SELECT pid, count(*) FROM firms GROUP BY pid", QueryForbidden, "no rights to dataset 'firms'"),
    ("SELECT age_group, count(*) FROM persons GROUP BY age_group", QueryForbidden, "may not use 'age_group'"),
    (B + " WHERE age_group = 1" + G, QueryForbidden, "may not use 'age_group'"),
    ("SELECT region, count(*), sum(hours) FROM persons" + G, QueryForbidden, "may not use 'hours'"),
    ("SELECT region, count(*), avg(hours) AS h FROM persons" + G + " ORDER BY h", QueryForbidden, "may not use 'hours'"),
]


@pytest.mark.parametrize(
    ("sql", "error", "message"), REFUSED, ids=[f"{i}-{str(s)[:50]}" for i, (s, _, _) in enumerate(REFUSED)]
)
def test_refused(sql, error, message):
    with pytest.raises(error) as info:
        validate(sql, CATALOG, RIGHTS)
    text = str(info.value)
    assert message in text
    assert len(text) < 1500  # nothing huge echoed back
    if error is QueryRefused:
        assert text.endswith(ALLOWED_FORM)
    else:
        assert ALLOWED_FORM not in text


def test_refusal_catalogue_is_large():
    assert len(REFUSED) >= 30
    assert {e for _, e, _ in REFUSED} == {QueryRefused, QueryForbidden}


def test_refusals_list_only_what_the_user_may_see():
    with pytest.raises(QueryRefused) as info:
        validate("SELECT id, count(*) FROM persons GROUP BY id", CATALOG, RIGHTS)
    text = str(info.value)
    assert "region" in text and "income" in text
    assert "age_group" not in text and "hours" not in text and "firms" not in text
    with pytest.raises(QueryRefused) as info:
        validate("SELECT count(*) FROM census", CATALOG, RIGHTS)
    assert "'persons'" in str(info.value) and "firms" not in str(info.value)
    with pytest.raises(QueryForbidden) as info:
        validate("SELECT nace, count(*) FROM firms GROUP BY nace", CATALOG, RIGHTS)
    assert "nace" not in str(info.value) and "size_class" not in str(info.value)
    # without rights, the whole catalogue is visible
    with pytest.raises(QueryRefused) as info:
        validate("SELECT count(*) FROM census", CATALOG)
    assert "'firms'" in str(info.value)


def test_long_input_is_not_echoed():
    name = "x" * 5000
    with pytest.raises(QueryRefused) as info:
        validate(f"SELECT {name}, count(*) FROM persons GROUP BY {name}", CATALOG)
    assert len(str(info.value)) < 1000
    with pytest.raises(QueryRefused) as info:
        validate("SELECT count(*) FROM persons WHERE region IN (" + "'y', " * 1500 + "'y' GROUP BY", CATALOG)
    assert "could not be parsed" in str(info.value) and len(str(info.value)) < 1000


def test_length_limit_is_checked_before_parsing():
    sql = "SELECT count(*) FROM persons WHERE region = '" + "a" * 200 + "'"
    assert validate(sql, CATALOG).filters[0].values == ("a" * 200,)
    with pytest.raises(QueryRefused, match="at most 100 are accepted"):
        validate(sql, CATALOG, max_length=100)
    # an unreadable text longer than the limit is refused for its length, not its syntax
    with pytest.raises(QueryRefused, match="at most 100 are accepted"):
        validate("SELECT ((((" + "(" * 200, CATALOG, max_length=100)


def test_nothing_is_logged(caplog):
    """The analyst's SQL does not reach the server's log through sqlglot's warnings."""
    with caplog.at_level("DEBUG"):
        for sql in ["EXPLAIN SELECT count(*) FROM persons", "SELECT count(*) FROM persons LIMIT 2, 5", B + G]:
            try:
                validate(sql, CATALOG)
            except QueryRefused:
                pass
    assert caplog.records == []


def test_max_limit():
    assert validate(B + G + " LIMIT 50", CATALOG, max_limit=50).limit == 50
    with pytest.raises(QueryRefused, match="between 1 and 50"):
        validate(B + G + " LIMIT 51", CATALOG, max_limit=50)


# -- property: generated queries validate to what they say and round-trip ----------------------

DIMS = [R, S, T, A]
ALIASES = ["total", "Inc", "mean_h", "x1"]


def _ident(draw, name):
    """A spelling of a catalogue name: quoted exactly, or unquoted in any ASCII case."""
    how = draw(st.sampled_from(["quoted", "lower", "upper", "same"]))
    if how == "quoted":
        return '"' + name + '"'
    return {"lower": name.lower(), "upper": name.upper(), "same": name}[how]


def _kw(draw, word):
    return draw(st.sampled_from([word.upper(), word.lower(), word.capitalize()]))


def _literal(value):
    return str(value) if isinstance(value, int) else "'" + value.replace("'", "''") + "'"


def _sets(mode, dims, head, sets_drawn):
    """The grouping sets a GROUP BY means, from the SQL standard's definitions (independent of protab)."""
    if mode == "plain":
        return {frozenset(dims)}
    if mode == "rollup":
        return {frozenset(dims[:k]) for k in range(len(dims) + 1)}
    if mode == "cube":
        return {frozenset(c) for k in range(len(dims) + 1) for c in itertools.combinations(dims, k)}
    if mode == "mixed":
        tail = dims[head:]
        return {frozenset(dims[:head]) | frozenset(tail[:k]) for k in range(len(tail) + 1)}
    return set(sets_drawn)


@st.composite
def queries(draw):
    dims = draw(st.permutations(DIMS))[: draw(st.integers(0, len(DIMS)))]
    mode = draw(st.sampled_from(["plain", "rollup", "cube", "sets", "mixed"])) if dims else "plain"
    head = draw(st.integers(0, len(dims) - 1)) if mode == "mixed" else 0
    sets_drawn = []
    if mode == "sets":
        subsets = draw(st.lists(st.sets(st.sampled_from(dims)), max_size=4))
        sets_drawn = [frozenset(dims)] + [frozenset(s) for s in subsets]
        sets_drawn = draw(st.permutations(sets_drawn))

    def names(cols):
        return ", ".join(_ident(draw, c) for c in cols)

    if mode == "plain":
        group = names(draw(st.permutations(dims))) if dims else draw(st.sampled_from(["", "()"]))
    elif mode in ("rollup", "cube"):
        group = f"{_kw(draw, mode)}({names(dims)})"
    elif mode == "mixed":
        parts = [names(dims[:head])] if head else []
        group = ", ".join(parts + [f"{_kw(draw, 'rollup')}({names(dims[head:])})"])
    else:
        group = f"{_kw(draw, 'grouping sets')} (" + ", ".join(f"({names(sorted(s))})" for s in sets_drawn) + ")"

    # measures: count(*) once, maybe sum(income) and avg(hours), each maybe aliased; all shuffled with the dims
    measures = [("count", None)] + [m for m in [("sum", "income"), ("avg", "hours")] if draw(st.booleans())]
    items = [(_ident(draw, d), d, None) for d in dims]
    for (func, col), alias in zip(measures, draw(st.permutations(ALIASES))):
        call = f"{_kw(draw, 'count')}(*)" if col is None else f"{_kw(draw, func)}({_ident(draw, col)})"
        if draw(st.booleans()):
            items.append((f"{call} {_kw(draw, 'as')} {alias}", alias, Measure(func, col, alias)))
        else:
            default = "n" if col is None else f"{func}_{col}"
            items.append((call, default, Measure(func, col, default)))
    items = draw(st.permutations(items))
    columns = tuple(c for _, c, _ in items)
    select_dims = tuple(c for _, c, m in items if m is None)
    expected_measures = [m for _, _, m in items if m is not None]

    filters, preds = [], []
    for col in draw(st.lists(st.sampled_from(DIMS), unique=True, max_size=3)):
        values = draw(
            st.lists(
                st.one_of(
                    st.integers(-999, 999),
                    st.text(alphabet="abzü'; -/*\"", max_size=6),
                ),
                min_size=1,
                max_size=3,
            )
        )
        op = draw(st.sampled_from(["=", "<>", "!=", "IN", "NOT IN"]))
        if op in ("=", "<>", "!="):
            values = values[:1]
            preds.append(f"{_ident(draw, col)} {op} {_literal(values[0])}")
        else:
            preds.append(f"{_ident(draw, col)} {_kw(draw, op)} ({', '.join(_literal(v) for v in values)})")
        kind = "in" if op in ("=", "IN") else "not in"
        filters.append(Filter(col, kind, tuple(sorted({str(v) for v in values}))))
    filters.sort(key=lambda f: f.column)

    order_cols = draw(st.lists(st.sampled_from(columns), unique=True, max_size=3))
    order_by = [(c, draw(st.booleans())) for c in order_cols]
    limit = draw(st.one_of(st.none(), st.integers(1, 10_000)))

    ws = draw(st.sampled_from([" ", "\n", "  \n\t"]))
    sql = f"{_kw(draw, 'select')} " + ", ".join(text for text, _, _ in items) + f"{ws}{_kw(draw, 'from')} {_ident(draw, 'persons')}"
    if preds:
        sql += f"{ws}{_kw(draw, 'where')} " + f" {_kw(draw, 'and')} ".join(preds)
    if group:
        sql += f"{ws}{_kw(draw, 'group by')} {group}"
    if order_by:
        sql += f"{ws}{_kw(draw, 'order by')} " + ", ".join(
            (c if c in dims else c.upper()) + (" DESC" if d else draw(st.sampled_from(["", " ASC", " asc"])))
            for c, d in order_by
        )
    if limit is not None:
        sql += f" {_kw(draw, 'limit')} {limit}"
    sets = _sets(mode, dims, head, sets_drawn)
    return sql, select_dims, sets, filters, expected_measures, columns, order_by, limit


@settings(max_examples=200, deadline=None)
@given(queries())
def test_generated_queries_validate_and_round_trip(case):
    sql, dims, sets, filters, measures, columns, order_by, limit = case
    q = validate(sql, CATALOG)
    assert q.dataset == "persons"
    assert q.dims == tuple(dims)
    assert {frozenset(s) for s in q.grouping_sets} == sets
    assert len(q.grouping_sets) == len(sets)
    assert all(list(s) == [d for d in dims if d in s] for s in q.grouping_sets)
    assert q.filters == tuple(filters)
    assert q.measures == tuple(measures)
    assert q.columns == columns
    assert q.order_by == tuple(order_by)
    assert q.limit == limit
    assert isinstance(q, Query) and "\n" not in q.normalised
    assert validate(q.normalised, CATALOG) == q
    assert validate(q.normalised, CATALOG, RIGHTS | {"persons": CATALOG["persons"]}) == q


# -- fuzz: any text gives a Query or a QueryError, never another exception -------------------------

FUZZ_BASE = (
    "SELECT region, sex, count(*) AS n, sum(income) FROM persons WHERE region IN ('a', 1) AND sex <> 'f' "
    "GROUP BY ROLLUP(region, sex) ORDER BY n DESC LIMIT 5"
)
FUZZ_TOKENS = [
    "SELECT", "FROM", "WHERE", "GROUP BY", "ORDER BY", "LIMIT", "(", ")", ",", "'", '"', ";", "--", "/*", "*/",
    "*", "count", "sum", "region", "persons", "AND", "OR", "NOT", "IN", "=", "<>", "1", "'x'", "ROLLUP", "CUBE",
    "GROUPING SETS", "()", "AS", "::", "[", "]", "$$", "E'", "\\", "OVER", "JOIN", "UNION", "?", "$1", ".", "",
]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_fuzzed_text_is_accepted_or_refused(data):
    if data.draw(st.booleans()):
        sql = " ".join(data.draw(st.lists(st.sampled_from(FUZZ_TOKENS), max_size=30)))
    else:  # a valid query with a few pieces replaced
        sql = FUZZ_BASE
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(sql)))
            j = data.draw(st.integers(i, min(len(sql), i + 5)))
            sql = sql[:i] + data.draw(st.sampled_from(FUZZ_TOKENS)) + sql[j:]
    try:
        q = validate(sql, CATALOG, RIGHTS)
    except (QueryRefused, QueryForbidden):
        return
    assert validate(q.normalised, CATALOG, RIGHTS) == q
