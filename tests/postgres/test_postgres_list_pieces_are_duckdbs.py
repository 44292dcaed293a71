"""The list and struct pieces of protab's magnitude SQL, rendered for PostgreSQL
(engines/postgres/postgres_lists.py), give on PostgreSQL what they give on DuckDB: the same
statement in protab's dialect on both engines, the same rows — top-k lists with NULLs, ties
and no value, structs ordered field by field, lambdas over NULL and empty lists, indices past
the end, slices, unnest side by side, merged lists and the sensitivity rules' functions."""

from __future__ import annotations

import pyarrow as pa
import pytest

import protab as pt

#: groups of values: NULLs, ties in |x| (3 and -3, the same weight too), a group with no value, one with one
ROWS = [(1, 3.0, 1.0), (1, -3.0, 2.0), (1, -3.0, 1.0), (1, None, 1.0), (1, 2.0, 0.5), (1, 3.0, 0.5), (1, -1.0, 4.0),
        (2, None, 1.0), (2, None, 2.0), (3, 7.5, 1.0), (4, 0.0, 1.0), (4, -2.0, 1.0)]

PIECES = {
    "max(x, n) and min(x, n), NULLs skipped, NULL for no value":
        "SELECT g, max(x, 3) AS hi, min(x, 2) AS lo, max(x, 9) AS every FROM v GROUP BY g ORDER BY g",
    "max(x, n) with a FILTER":
        "SELECT g, max(x, 2) FILTER (WHERE x < 3) AS t FROM v GROUP BY g ORDER BY g",
    "a list of structs ordered by |x|, then w, then x":
        "SELECT g, list_transform(max({'a': abs(x), 'w': w, 'x': x}, 4) FILTER (WHERE x IS NOT NULL), "
        "lambda e: e.x) AS xs, list_transform(max({'a': abs(x), 'w': w, 'x': x}, 4) "
        "FILTER (WHERE x IS NOT NULL), lambda e: e.w) AS ws FROM v GROUP BY g ORDER BY g",
    "an element's fields, past the end NULL":
        "SELECT g, t[1].x * t[1].w AS first, t[2].a AS second, t[5].x AS none FROM (SELECT g, "
        "max({'a': abs(x), 'w': w, 'x': x}, 2) FILTER (WHERE x IS NOT NULL) AS t FROM v GROUP BY g) ORDER BY g",
    "lambdas, sorts and concatenations over NULL and empty lists":
        "SELECT g, list_transform(l, lambda e: e * 2) AS doubled, list_filter(coalesce(l, []), lambda e: e < 0) AS neg, "
        "list_sort(l, 'DESC') AS down, list_sort(l, 'ASC') AS up, list_concat(l, [1.5]) AS more, "
        "list_slice(l, 2, 3) AS mid, l[1] AS first, l[9] AS far FROM (SELECT g, max(x, 3) AS l FROM v GROUP BY g) "
        "ORDER BY g",
    "sorts with NULLs, where DuckDB puts them":
        "SELECT list_sort(l, 'DESC') AS a, list_sort(l) AS b, list_sort(l, 'DESC', 'NULLS FIRST') AS c, "
        "list_sort(l, 'ASC', 'NULLS FIRST') AS d FROM (SELECT [CAST(3 AS DOUBLE), NULL, CAST(1 AS DOUBLE)] AS l)",
    "structs of |x| and x sorted, sliced and read back":
        "SELECT g, list_transform(list_slice(list_sort(list_transform(coalesce(l, []), lambda v: {'a': abs(v), "
        "'x': v}), 'DESC'), 1, 2), lambda e: e.x) AS top FROM (SELECT g, min(x, 4) AS l FROM v GROUP BY g) ORDER BY g",
    "unnest side by side, the shorter padded with NULL, NULL lists as empty ones":
        "SELECT g, a, b FROM (SELECT g, unnest(hi) AS a, unnest(lo) AS b FROM (SELECT g, max(x, 3) AS hi, "
        "min(x, 1) AS lo FROM v GROUP BY g)) ORDER BY g, a DESC NULLS LAST, b",
    # distinct values of y: DuckDB orders ties in no defined way (protab's own y, a swap's keyed hash, has none)
    "arg_max(x, y, n) and arg_min(x, y, n): x by y, NULLs of either left out":
        "SELECT g, arg_max(w, x + w / 100, 2) AS hi, arg_min(w, x + w / 100, 3) AS lo, "
        "unnest(arg_max(x, w + x / 100, 1)) AS top FROM v GROUP BY g ORDER BY g",
    "the rules' functions over top lists":
        "SELECT g, protab_dominance_ratio(l, 10.0, 1) AS d1, protab_dominance_ratio(l, 0.0, 2) AS d0, "
        "protab_dominance_ratio(l, 3.7, 2) AS d2, [protab_weighted_largest(l, w, 2)] AS wl, "
        "protab_frequency_rule(n, 3) AS freq FROM (SELECT g, max(x, 3) AS l, max(w, 3) AS w, count(x) AS n FROM v "
        "GROUP BY g) ORDER BY g",
}


@pytest.fixture(scope="module")
def engines(pg_dsn):
    duck, pg = pt.Session(":memory:"), pt.Session.postgres(pg_dsn)
    data = pa.table({"g": pa.array([r[0] for r in ROWS], pa.int64()), "x": pa.array([r[1] for r in ROWS], pa.float64()),
                     "w": pa.array([r[2] for r in ROWS], pa.float64())})
    try:
        for s in (duck, pg):
            s.register("v", data)
        yield duck.engine, pg.engine
    finally:
        pg.close()
        duck.close()


@pytest.mark.parametrize("name", list(PIECES))
def test_a_list_piece_gives_duckdbs_rows(engines, name):
    duck, pg = (e.rows(PIECES[name]) for e in engines)
    assert duck and pg == duck


def test_merged_lists_are_duckdbs(engines):
    """Engine.merged_list: the n largest (smallest) of all lists of a group, NULL for none."""
    def merged(e, descending):
        lists = "SELECT g % 2 AS h, max(x, 2) AS l FROM v GROUP BY g"
        return e.rows(f"SELECT h, {e.merged_list('l', 3, descending=descending)} FROM ({lists}) q GROUP BY h "
                      "ORDER BY h")

    for descending in (True, False):
        duck, pg = (merged(e, descending) for e in engines)
        assert pg == duck


def test_top_lists_with_a_bound_length_are_duckdbs(engines):
    duck, pg = (e.rows("SELECT g, max(x, ?) FROM v GROUP BY g ORDER BY g", [2]) for e in engines)
    assert pg == duck


CHAIN = ("WITH a AS (SELECT g, max(x, 2) AS l FROM v GROUP BY g), b AS (SELECT *, l[1] AS top, "
         "list_transform(l, lambda e: e * 2) AS l2 FROM a), "
         "c AS (SELECT *, top * 2 AS twice FROM b), d AS (SELECT * FROM c ORDER BY g LIMIT 3) "
         "SELECT c.g, c.twice, d.top, d.l2 FROM c LEFT JOIN d USING (g) UNION ALL SELECT g, twice, top, l2 FROM c "
         "ORDER BY 1, 2, 3")


def test_a_chain_of_steps_is_fenced_and_gives_duckdbs_rows(engines):
    """In a statement with lambdas, a common table expression read once streams into its
    reader as a subquery the planner keeps (NOT MATERIALIZED, OFFSET 0: no expression
    substituted into the next step), one read twice is MATERIALIZED; a LIMIT stays the step's own."""
    from protab.engines.postgres.postgres_sql import to_postgres

    text = " ".join(to_postgres(CHAIN)[0].split())
    for once in ("a", "b", "d"):
        assert f"{once} AS NOT MATERIALIZED (" in text
    assert "FROM a OFFSET 0)" in text and "GROUP BY g OFFSET 0)" in text
    assert "c AS MATERIALIZED (" in text and "LIMIT 3)" in text and "LIMIT 3 OFFSET 0" not in text
    duck, pg = (e.rows(CHAIN) for e in engines)
    assert duck and pg == duck


def test_the_connection_runs_without_jit(engines):
    """JIT is off on protab's connection (LLVM took seconds per long statement)."""
    assert engines[1].user_query("SHOW jit").item() == "off"
