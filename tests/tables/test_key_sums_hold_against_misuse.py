"""Review of Session.key_sums, the service's count tables and its rate limit: what a reviewer
tried to break (float where-filters, key sums of key sums, stale key sums, a dim named as a
key-sum column, leaks through the service, the rate limit under threads) and what holds."""

from __future__ import annotations

import threading
import types

import polars as pl
import pytest

import protab as pt
from protab.errors import InputError, ProtabError, SpecError

P = pt.PTable.maximum_entropy(D=3, V=1)


def _records(s, sql: str, **keys) -> None:
    s.con.execute(f"CREATE TABLE p AS {sql}")
    s.add_record_keys("p", id_column="id", seed="review-key-sums", **keys)


# -- Session.key_sums ---------------------------------------------------------------------------
def test_suppress_perturb_inner_and_non_tree_hierarchies_match_the_records():
    """Sparse records (singletons, NULL codes, 8-bit keys), a hierarchy with a −1 coefficient,
    structural zeros: suppression, perturb_inner, cell_key with threshold, inner cells and
    the model matrix are the same from the key sums."""
    with pt.Session(":memory:", progress=False) as s:
        _records(s, "SELECT i AS id, ['N', 'S', 'E'][CAST(hash(i) % 3 AS INTEGER) + 1] AS region, "
                    "CASE WHEN i % 13 = 0 THEN NULL ELSE ['1', '2'][CAST(hash(i, 1) % 2 AS INTEGER) + 1] END AS sex, "
                    "CAST(hash(i, 2) % 9 AS INTEGER) AS age FROM range(150) t(i)", bits=8)
        ks = s.key_sums("p", ["region", "sex", "age"])
        h = pt.Hierarchy.from_frame(pl.DataFrame({  # X = All − nS (not a tree)
            "mapsFrom": ["N", "S", "E", "S", "All", "nS"], "mapsTo": ["All", "All", "All", "nS", "X", "X"],
            "sign": [1, 1, 1, 1, 1, -1], "level": [1, 1, 1, 1, 2, 2]}))
        specs = [pt.TableSpec({"region": h, "sex": None}, null_code="9"),
                 pt.TableSpec({"age": None, "sex": None}, null_code="u", where=[("age", "not in", [1, 2])],
                              drop_empty=True)]
        for spec in specs:
            for run in (lambda t, spec=spec: s.suppress(t, spec, min_frequency=4),
                        lambda t, spec=spec: s.suppress(t, spec, min_frequency=3, protect_zeros=True),
                        lambda t, spec=spec: s.perturb_inner(t, spec, P, original=True),
                        lambda t, spec=spec: s.cell_key(t, spec, P, original=True, threshold=2),
                        lambda t, spec=spec: s.inner_cells(t, spec, extend0=True)):
                assert run(ks).equals(run("p"))
        zeros = pl.DataFrame({"age": ["3"], "sex": ["1"]})
        X1, i1, p1 = s.model_matrix(ks, specs[1], structural_zeros=zeros)
        X2, i2, p2 = s.model_matrix("p", specs[1], structural_zeros=zeros)
        assert (X1 != X2).nnz == 0 and i1.equals(i2) and p1.equals(p2)


def test_key_sum_table_refuses_what_needs_records_or_reveals_key_sums():
    with pt.Session(":memory:", progress=False) as s:
        _records(s, "SELECT i AS id, ['1', '2'][i % 2 + 1] AS sex, i % 5 AS age, 2.0 AS w FROM range(100) t(i)")
        ks = s.key_sums("p", ["sex", "age"])
        for spec in (pt.TableSpec({"sex": None}, freq="age"), pt.TableSpec({"sex": None}, freq="protab_records")):
            with pytest.raises(SpecError, match="holds record counts and key sums"):
                s.cell_key(ks, spec, P)
        with pytest.raises(SpecError, match="secret"):  # the key sums as a filter
            s.tabulate(ks, pt.TableSpec({"sex": None}, where=[("protab_key_sum", "in", ["1"])]))
        with pytest.raises(SpecError, match="secret"):
            s.tabulate(ks, pt.TableSpec({"age": None, "protab_key_sum": None}))
        assert "protab_key_sum" not in s.cell_key(ks, pt.TableSpec({"sex": None}), P, original=True).columns


def _same(s, ks: str, spec) -> bool:
    """The same table (or the same kind of error) from the key sums as from the records."""
    out = []
    for t in (ks, "p"):
        try:
            out.append(s.tabulate(t, spec, cell_keys=True))
        except ProtabError as exc:
            out.append(type(exc))
    return out[0] == out[1] if isinstance(out[0], type) or isinstance(out[1], type) else out[0].equals(out[1])


def _signed_zeros_and_nans(s) -> str:
    """x: −0.0 (i % 3 = 0), −NaN, NaN or 0.0, independent of g; their key sums."""
    _records(s, "SELECT i AS id, CASE WHEN i % 3 = 0 THEN -0.0::DOUBLE WHEN i % 7 = 0 THEN -('nan'::DOUBLE) "
                "WHEN i % 11 = 0 THEN 'nan'::DOUBLE ELSE 0.0::DOUBLE END AS x, ['a', 'b'][i % 2 + 1] AS g "
                "FROM range(200) t(i)")
    return s.key_sums("p", ["x", "g"])


def test_where_on_signed_zero_float_column():
    with pt.Session(":memory:", progress=False) as s:
        ks = _signed_zeros_and_nans(s)
        for vals in (["0.0"], ["-0.0"]):
            for op in ("in", "not in"):
                assert _same(s, ks, pt.TableSpec({"g": None}, where=[("x", op, vals)]))


def test_where_on_negative_nan_float_column():
    with pt.Session(":memory:", progress=False) as s:
        ks = _signed_zeros_and_nans(s)
        for op in ("in", "not in"):
            assert _same(s, ks, pt.TableSpec({"g": None}, where=[("x", op, ["-nan"])]))


def test_float_dimensions_themselves_match():
    """As dimensions (code_sql: −0.0 is 0.0, NaN is missing) the float codes agree."""
    with pt.Session(":memory:", progress=False) as s:
        ks = _signed_zeros_and_nans(s)
        spec = pt.TableSpec({"x": None, "g": None}, null_code="u")
        assert s.tabulate(ks, spec, cell_keys=True).equals(s.tabulate("p", spec, cell_keys=True))


def test_key_sums_of_key_sums():
    with pt.Session(":memory:", progress=False) as s:
        _records(s, "SELECT i AS id, ['N', 'S', 'E'][i % 3 + 1] AS region, i % 7 AS age FROM range(1000) t(i)")
        ks = s.key_sums("p", ["region", "age"])
        ks2 = s.key_sums(ks, ["region"])
        spec = pt.TableSpec({"region": None})
        assert s.tabulate(ks2, spec, cell_keys=True).equals(s.tabulate("p", spec, cell_keys=True))


def test_key_sums_named_as_its_own_source():
    with pt.Session(":memory:", progress=False) as s:
        _records(s, "SELECT i AS id, ['N', 'S'][i % 2 + 1] AS region, i % 7 AS age FROM range(100) t(i)")
        ks = s.key_sums("p", ["region", "age"], name="cells")
        with pytest.raises(SpecError):
            s.key_sums(ks, ["region"], name="cells")
        assert s.exists("cells")


def test_key_sums_follow_new_record_keys():
    with pt.Session(":memory:", progress=False) as s:
        _records(s, "SELECT i AS id, ['1', '2'][i % 2 + 1] AS sex FROM range(100) t(i)")
        ks = s.key_sums("p", ["sex"])
        s.add_record_keys("p", id_column="id", seed="a new seed", replace=True)
        assert not s.exists(ks)  # dropped with the old keys: it can no longer answer with them
        with pytest.raises(InputError, match=ks):
            s.tabulate(ks, pt.TableSpec({"sex": None}))
        ks = s.key_sums("p", ["sex"])
        ks2 = s.key_sums(ks, ["sex"])
        s.register("p", pl.DataFrame({"id": [1, 2], "sex": ["1", "2"]}), replace=True)  # a new table p: both go
        assert not s.exists(ks) and not s.exists(ks2)


# -- the service --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    import serve_fixtures as F

    from protab.serve.broker import Broker
    from protab.serve.config import load_config

    tmp = tmp_path_factory.mktemp("review")
    db = F.build_database(tmp / "micro.duckdb", persons=3000)
    config, _ = F.write_setup(tmp, db)
    e = Broker(load_config(config))
    yield e
    e.close()


def test_counts_tables_are_out_of_the_analysts_reach(engine):
    from protab.serve.validator import QueryError

    assert all(ds.counts_table is not None for ds in engine.datasets.values())
    bob = engine.config.users["bob"]
    for name in ("_protab_serve_counts_0", '"_protab_serve_counts_0"', "temp.main._protab_serve_counts_0"):
        with pytest.raises(QueryError):
            engine.query(f"SELECT count(*) AS n FROM {name}", bob)
    for col in ("protab_key_sum", "protab_records", "rkey"):
        with pytest.raises(QueryError):
            engine.query(f"SELECT {col}, count(*) AS n FROM persons GROUP BY {col}", bob)
        with pytest.raises(QueryError):
            engine.query(f"SELECT sex, count(*) AS n FROM persons WHERE {col} = 1 GROUP BY sex", bob)
        with pytest.raises(QueryError):
            engine.table({"dataset": "persons", "dims": [col]}, bob)
    with pytest.raises(QueryError):
        engine.table({"dataset": "_protab_serve_counts_0", "dims": ["sex"]}, bob)
    text = str(engine.catalog(bob))
    assert "protab_key_sum" not in text and "_protab_serve_counts" not in text and "protab_records" not in text


def test_one_bucket_per_user_for_catalog_query_and_table(engine, monkeypatch):
    from protab.serve.limits import RateLimit as _RateLimit
    from protab.serve.validator import QueryThrottled

    monkeypatch.setattr(engine, "rate", _RateLimit(3))
    bob, erin = engine.config.users["bob"], engine.config.users["erin"]
    engine.catalog(bob)
    engine.query("SELECT sex, count(*) AS n FROM persons GROUP BY sex", bob)
    engine.table({"dataset": "persons", "dims": ["sex"]}, bob)
    for call in (lambda: engine.catalog(bob), lambda: engine.table({"dataset": "persons", "dims": ["sex"]}, bob),
                 lambda: engine.query("SELECT sex, count(*) AS n FROM persons GROUP BY sex", bob)):  # cached too
        with pytest.raises(QueryThrottled) as err:
            call()
        assert err.value.status == 429 and err.value.retry_after == 20
    engine.catalog(erin)


def test_rate_limit_is_exact_under_threads_and_retry_after_is_honest(monkeypatch):
    from protab.serve import limits as eng
    from protab.serve.validator import QueryThrottled

    limit = eng.RateLimit(50)
    admitted, lock = [], threading.Lock()

    def hammer():
        for _ in range(40):
            try:
                limit.admit("u")
            except QueryThrottled:
                continue
            with lock:
                admitted.append(1)

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 50 <= len(admitted) <= 51  # the burst, and at most one token refilled meanwhile

    now = [1000.0]
    monkeypatch.setattr(eng, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    for per_minute, wait in ((7, 9), (1, 60), (600, 1)):
        limit = eng.RateLimit(per_minute)
        for _ in range(per_minute):
            limit.admit("u")
        with pytest.raises(QueryThrottled) as err:
            limit.admit("u")
        assert err.value.retry_after == wait
        if wait > 1:
            now[0] += wait - 1
            with pytest.raises(QueryThrottled):  # not a second too long
                limit.admit("u")
            now[0] += 1
        else:
            now[0] += wait
        limit.admit("u")  # admitted after Retry-After seconds


def test_service_starts_with_a_dimension_named_protab_records(tmp_path):
    import serve_fixtures as F

    from protab.serve.broker import Broker
    from protab.serve.config import load_config

    db = F.build_database(tmp_path / "micro.duckdb", persons=300)
    with pt.Session(db, progress=False) as s:
        s.con.execute("ALTER TABLE households ADD COLUMN protab_records VARCHAR DEFAULT 'x'")
    config, _ = F.write_setup(tmp_path, db)
    config.write_text(config.read_text()
                      .replace('dims = ["region", "size"]', 'dims = ["region", "size", "protab_records"]')
                      .replace('size = [1, 2, 3, 4, 5] }', 'size = [1, 2, 3, 4, 5], protab_records = ["x"] }'))
    engine = Broker(load_config(config))
    engine.close()
