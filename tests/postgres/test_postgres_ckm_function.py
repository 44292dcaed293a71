"""ckm() on PostgreSQL (issue 39, item 5): after ``install_ptable`` an analyst's own
``SELECT sex, ckm(count(*), sum(rkey)) FROM t GROUP BY sex``, run through a psycopg connection
of its own (as psql runs it), gives the perturbed counts of DuckDB's macro and of
``Session.cell_key`` on the same records and p-table; without a p-table it raises, and the
p-table is replaced in one transaction."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import polars as pl
import psycopg
import pytest
from ckm_function_cases import CROWDED_MODULUS, crowded_ptable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from postgres_fixtures import duckdb_and_postgres

import protab as pt
from protab.errors import InputError

N = 3000
SEED = "pg-ckm"
_rng = np.random.default_rng(3905)
# skewed dimensions: cells of one or two records beside cells of hundreds
RECORDS = pl.DataFrame({
    "pid": np.arange(1, N + 1) * 3,
    "sex": _rng.choice(["f", "m"], N),
    "region": _rng.choice(["r1", "r2", "r3", "r4"], N, p=[0.6, 0.3, 0.09, 0.01]),
    "age": _rng.choice([str(a) for a in range(40)], N, p=np.arange(40, 0, -1) / 820),
    "kd": _rng.integers(0, 10**8, N) / 10**8,
    "weight": _rng.uniform(0.5, 3.0, N),
})


def _ons_layout() -> pt.PTable:
    """An ONS-layout p-table (rows 1..750 with period 250, 8-bit keys; no row 0) whose noise
    depends on the key differently in every row (tests/cli/test_macros_fast.py)."""
    ons = pt.PTable.maximum_entropy(D=3, V=1).to_ons(256)
    return pt.PTable.from_ons(ons.with_columns(ckey=(pl.col("ckey") + 37 * pl.col("pcv")) % 256))


with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    MAXENT = pt.PTable.maximum_entropy(D=3, V=2, js=1)  # a row 0: zero cells are perturbed by it
    ONS = _ons_layout()

#: (records' table, its key modulus): 32-bit keys from the ids, 8-bit ones, 8-digit decimal keys
KEYED = {"t32": 2**32, "t8": 2**8, "tdec": 10**8}
DIMS = {"sex": ["sex"], "region by sex": ["region", "sex"], "age by region": ["age", "region"]}


def _prepare(s: pt.Session) -> None:
    s.register("t32", RECORDS)
    s.add_record_keys("t32", id_column="pid", seed=SEED)
    s.register("t8", RECORDS)
    s.add_record_keys("t8", id_column="pid", seed=SEED, bits=8)
    s.register("tdec", RECORDS)
    s.add_record_keys("tdec", record_key_column="kd", decimals=8)
    # every (age, region) pair, for cells of count 0 (a LEFT JOIN's count, NULL key sum)
    grid = RECORDS.select("age").unique().join(RECORDS.select("region").unique(), how="cross")
    s.register("grid", grid)


@pytest.fixture(scope="module")
def engines(pg_dsn):
    yield from duckdb_and_postgres(pg_dsn, _prepare)


@pytest.fixture(scope="module")
def psql(pg_dsn, engines):
    """The analyst's own connection (a psql session): protab's pg_temp functions are not there."""
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        yield con


_installed: list[tuple[int, str]] = []  # the p-table and table of the last install on both engines


def _install(engines, ptable: pt.PTable, table: str) -> None:
    """``ptable`` installed on both engines for the keys of ``table`` (once for a run of tests
    with the same one)."""
    if _installed == [(id(ptable), table)]:
        return
    _installed.clear()
    for s in engines:
        s.install_ptable(ptable, table=table)
    _installed.append((id(ptable), table))


def _analyst(psql, dims: list[str], table: str) -> list[tuple]:
    cols = ", ".join(dims)
    return [tuple(r) for r in psql.execute(
        f"SELECT {cols}, count(*), ckm(count(*), sum(rkey)) FROM {table} GROUP BY {cols} ORDER BY {cols}")]


def _duckdb_macro(duck: pt.Session, dims: list[str], table: str) -> list[tuple]:
    cols = ", ".join(dims)
    return duck.sql(f"SELECT {cols}, count(*), ckm(count(*), sum(rkey)) FROM {table} GROUP BY ALL "
                    f"ORDER BY {cols}").rows()


def _cell_key(s: pt.Session, dims: list[str], table: str, ptable: pt.PTable) -> list[tuple]:
    spec = pt.TableSpec(dict.fromkeys(dims), margins=False, drop_empty=True)
    return s.cell_key(table, spec, ptable, original=True).sort(dims).select(*dims, "n", "n_pert").rows()


#: the p-tables and keyed tables of the differential test (the ONS layout is one of 8-bit keys)
CASES = [("maximum entropy", "t32"), ("maximum entropy", "t8"), ("maximum entropy", "tdec"), ("ONS layout", "t8")]


@pytest.mark.parametrize(("pname", "table"), CASES)
@pytest.mark.parametrize("dname", list(DIMS))
def test_the_analysts_group_by_is_duckdbs_macro_and_cell_key(engines, psql, pname, table, dname):
    ptable = MAXENT if pname == "maximum entropy" else ONS
    duck, pg = engines
    _install(engines, ptable, table)
    dims = DIMS[dname]
    got = _analyst(psql, dims, table)
    assert got == _duckdb_macro(duck, dims, table)
    assert got == _cell_key(pg, dims, table, ptable) == _cell_key(duck, dims, table, ptable)
    counts = [r[-2] for r in got]
    assert max(counts) > 50 and (min(counts) <= 2 or dname != "age by region")  # small cells beside large
    assert any(r[-1] != r[-2] for r in got) or dname == "sex"  # the p-table moved some counts


@pytest.mark.parametrize("pname", ["maximum entropy", "ONS layout"])
def test_zero_cells_of_a_left_join_are_duckdbs(engines, psql, pname):
    """A count of 0 with a NULL key sum: kept without a row 0 (ONS), row 0's noise with one."""
    ptable = MAXENT if pname == "maximum entropy" else ONS
    duck, _ = engines
    _install(engines, ptable, "t8")
    query = ("SELECT grid.age, grid.region, count(t8.pid) AS n, ckm(count(t8.pid), sum(t8.rkey)) AS n_pert "
             "FROM grid LEFT JOIN t8 ON grid.age = t8.age AND grid.region = t8.region "
             "GROUP BY grid.age, grid.region ORDER BY grid.age, grid.region")
    got = [tuple(r) for r in psql.execute(query)]
    assert got == duck.sql(query).rows()
    assert any(r[2] == 0 for r in got)


def test_ckm_of_literal_keys_is_duckdbs(engines, psql):
    """A NULL key sum, a negative one, one past the modulus and past 2^64 (reduced modulo M),
    as on DuckDB."""
    duck, _ = engines
    _install(engines, MAXENT, "t32")
    big = str(3 * 2**64 + 12345)
    query = "SELECT ckm(0, 17), ckm(3, NULL), ckm(3, -5), ckm(5, 12345), ckm(5, {}), ckm(9, 4294967296 + 99)"
    got = psql.execute(query.format(f"CAST('{big}' AS NUMERIC)")).fetchone()
    assert tuple(got) == tuple(duck.sql(query.format(f"CAST('{big}' AS HUGEINT)")).row(0))
    assert got[1] == 3 and got[2] == 3


def test_weighted_ckm_is_duckdbs(engines, psql):
    duck, _ = engines
    _install(engines, MAXENT, "t32")
    query = ("SELECT region, ckm_weighted(count(*), sum(rkey), sum(weight)) AS w FROM t32 "
             "GROUP BY region ORDER BY region")
    got = [tuple(r) for r in psql.execute(query)]
    want = duck.sql(query).rows()
    assert [r[0] for r in got] == [r[0] for r in want]
    np.testing.assert_allclose([r[1] for r in got], [r[1] for r in want], rtol=1e-12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=st.lists(st.tuples(st.integers(0, 800), st.integers(0, 2**40 - 1)), min_size=1, max_size=40))
def test_ckm_of_any_count_and_key_is_the_ptables_lookup(engines, psql, cells):
    """ckm(n, k) on PostgreSQL equals DuckDB's macro and PTable.lookup for counts and keys
    anywhere (the ONS layout: rows 1..750 with a period, keys reduced modulo 256)."""
    duck, _ = engines
    _install(engines, ONS, "t8")
    n, k = (np.array(c, dtype=np.int64) for c in zip(*cells))
    values = ", ".join(f"({int(a)}, {int(b)})" for a, b in cells)
    query = f"SELECT ckm(n, k) FROM (VALUES {values}) AS c(n, k)"
    got = [r[0] for r in psql.execute(query)]
    assert got == [r[0] for r in duck.sql(query).rows()]
    assert got == ONS.lookup(n, k % 256, 256).tolist()


def test_ckm_before_any_install_raises_as_on_duckdb(pg_server):
    """A database without an installed p-table: psql gets PostgreSQL's "function ckm(...) does
    not exist", a Session DuckDB's macro's words, never a count."""
    dsn = pg_server.new_database()
    with psycopg.connect(dsn, autocommit=True) as con:
        with pytest.raises(psycopg.errors.UndefinedFunction, match=r"function ckm\(integer, integer\) does not exist"):
            con.execute("SELECT ckm(3, 5)")
    with pt.Session.postgres(dsn) as s, pt.Session(":memory:", progress=False) as duck:
        for session in (s, duck):
            session.register("t", RECORDS)
            session.add_record_keys("t", id_column="pid", seed=SEED)
        with pytest.raises(InputError, match="no p-table is installed in this database") as info:
            s.sql("SELECT sex, ckm(count(*), sum(rkey)) FROM t GROUP BY sex")
        with pytest.raises(Exception, match=str(info.value).replace("(", r"\(").replace(")", r"\)")):
            duck.sql("SELECT sex, ckm(count(*), sum(rkey)) FROM t GROUP BY ALL")


def test_the_analysts_query_has_ckm_inlined(engines, psql):
    """PostgreSQL's planner inlines ckm() into the query (one expression over the group's count
    and key sum, its p-table constants read once per query): no function call, no query per cell."""
    _install(engines, ONS, "t8")
    plan = "\n".join(r[0] for r in psql.execute(
        "EXPLAIN VERBOSE SELECT region, ckm(count(*), sum(rkey)) FROM t8 GROUP BY region"))
    assert "width_bucket" in plan and "ckm(" not in plan and "SubPlan" not in plan


def test_install_without_record_keys_or_with_bad_arguments_is_refused_as_on_duckdb(engines):
    duck, pg = engines
    messages = []
    for s in (duck, pg):
        s.register("nokeys", RECORDS.select("sex"), replace=True)
        with pytest.raises(InputError) as info:
            s.install_ptable(MAXENT, table="nokeys")
        messages.append(str(info.value))
    assert messages[0] == messages[1] and "nokeys" in messages[0]
    for bad in (1, 2**63):
        with pytest.raises(InputError, match="modulus"):
            pg.install_ptable(MAXENT, modulus=bad)
    with pytest.raises(InputError, match="count p-table"):
        pg.install_ptable(MAXENT.frame, modulus=256)


def test_a_reinstall_is_seen_whole_by_concurrent_queries(engines, pg_dsn):
    """While p-tables are installed in turn, every query of another session gives the counts of
    one of them (never of an empty or half-written one), and the install waits for no reader."""
    duck, pg = engines
    query = "SELECT age, region, ckm(count(*), sum(rkey)) FROM t8 GROUP BY age, region ORDER BY age, region"
    want = []
    for p in (MAXENT, ONS):
        _install(engines, p, "t8")
        want.append([(a, r, m) for a, r, _, m in _duckdb_macro(duck, ["age", "region"], "t8")])
    assert want[0] != want[1]
    stop, seen, failures = threading.Event(), [], []

    def read() -> None:
        with psycopg.connect(pg_dsn, autocommit=True) as con:
            while not stop.is_set():
                got = [tuple(r) for r in con.execute(query)]
                (seen if got in want else failures).append(want.index(got) if got in want else got)

    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        for k in range(6):
            pg.install_ptable((MAXENT, ONS)[k % 2], table="t8")
    finally:
        stop.set()
        for t in readers:
            t.join(60)
    _installed.clear()
    assert not failures and set(seen) == {0, 1}


def _state(psql) -> tuple:
    """What an install writes, as another session reads it: ckm's counts and the p-table's tables."""
    counts = "SELECT region, ckm(count(*), sum(rkey)) FROM t8 GROUP BY region ORDER BY region"
    return tuple([tuple(r) for r in psql.execute(q)]
                 for q in (counts, "SELECT * FROM protab_ptable ORDER BY 1, 3", "SELECT * FROM protab_ptable_meta"))


def test_an_install_refused_at_its_last_statement_leaves_the_one_before(engines, psql):
    """ckm_weighted made by hand with another result type: PostgreSQL refuses to replace it, after
    the tables and ckm were rewritten in the install's transaction; all of it is rolled back."""
    _, pg = engines
    _install(engines, MAXENT, "t8")
    before = _state(psql)
    psql.execute("DROP FUNCTION ckm_weighted(bigint, numeric, double precision)")
    psql.execute("CREATE FUNCTION ckm_weighted(n bigint, ksum numeric, wsum double precision) RETURNS text "
                 "LANGUAGE sql AS $$ SELECT 'mine' $$")
    try:
        with pytest.raises(InputError, match="refused to install the p-table in schema 'public'.*return type"):
            pg.install_ptable(ONS, table="t8")
        assert _state(psql) == before
    finally:
        psql.execute("DROP FUNCTION ckm_weighted(bigint, numeric, double precision)")
        _installed.clear()


def test_a_refused_install_shows_none_of_the_ptables_rows(engines, psql):
    """A row of the intervals breaking a constraint added by hand: the message names the schema,
    the constraint and what to check, not the failing row (PostgreSQL's DETAIL would show it)."""
    _, pg = engines
    _install(engines, MAXENT, "t8")
    before = _state(psql)
    psql.execute("ALTER TABLE protab_ptable ADD CONSTRAINT spoiler CHECK (protab_v < -100) NOT VALID")
    try:
        with pytest.raises(InputError) as info:
            pg.install_ptable(ONS, table="t8")
    finally:
        psql.execute("ALTER TABLE protab_ptable DROP CONSTRAINT spoiler")
    assert _state(psql) == before
    message = str(info.value)
    assert "refused to install the p-table in schema 'public'" in message and "spoiler" in message
    assert "Failing row" not in message and "DETAIL" not in message and "\n" not in message
    for row in ONS.keyspace(256).head(50).iter_rows():
        assert "(" + ", ".join(str(x) for x in row) + ")" not in message


def test_another_role_runs_ckm_and_one_without_create_cannot_install(pg_server):
    """The functions are the database's (in public): a role granted SELECT on the records runs
    the analyst's query in a session of its own; a role without CREATE on the schema (PostgreSQL
    15's default for public) is refused with a protab error that says what it needs."""
    dsn = pg_server.new_database()
    with psycopg.connect(dsn, autocommit=True) as owner:
        owner.execute("CREATE ROLE ckm_analyst LOGIN")  # a role is the server's: dropped at the end
    try:
        with pt.Session.postgres(dsn) as s, pt.Session(":memory:", progress=False) as duck:
            for session in (s, duck):
                session.register("t", RECORDS)
                session.add_record_keys("t", id_column="pid", seed=SEED)
                session.install_ptable(MAXENT, table="t")
            s.engine.con.execute("GRANT SELECT ON t TO ckm_analyst")
            analyst = dsn.replace("user=protab", "user=ckm_analyst")
            with psycopg.connect(analyst, autocommit=True) as con:
                got = [tuple(r) for r in con.execute(
                    "SELECT region, ckm(count(*), sum(rkey)) FROM t GROUP BY region ORDER BY region")]
            assert got == duck.sql("SELECT region, ckm(count(*), sum(rkey)) FROM t GROUP BY ALL ORDER BY region").rows()
            with pt.Session.postgres(analyst) as other:
                other.use_record_keys("t", "rkey", 2**32)
                with pytest.raises(InputError, match="refused to install the p-table in schema 'public' "
                                                     r"\(permission denied .*CREATE privilege on the schema"):
                    other.install_ptable(ONS, table="t")
    finally:
        with psycopg.connect(dsn, autocommit=True) as owner:
            owner.execute("DROP OWNED BY ckm_analyst")
            owner.execute("DROP ROLE ckm_analyst")


def test_keys_at_and_beside_every_interval_start_of_a_crowded_ptable(engines, psql):
    """Intervals one p-table unit wide beside wide ones at a 40-bit modulus (over 150 segment
    starts): ckm(n, k) equals PTable.lookup on keys at, before and after every start, and DuckDB's."""
    duck, pg = engines
    p, n, keys, starts = crowded_ptable()
    M = CROWDED_MODULUS
    _installed.clear()
    for s in engines:
        s.install_ptable(p, modulus=M)
    values = ", ".join(f"({int(a)}, {int(b)})" for a, b in zip(n, keys))
    query = f"SELECT ckm(n, k) FROM (VALUES {values}) AS c(n, k) ORDER BY k"
    got = [r[0] for r in psql.execute(query)]
    assert got == p.lookup(n, keys, M).tolist() == [r[0] for r in duck.sql(query).rows()]
    assert starts.size > 150 and any(g != c for g, c in zip(got, n))
