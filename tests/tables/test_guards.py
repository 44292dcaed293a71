"""Guards on input mistakes and resources: every mistake is a protab error that names the
table, the column and the offending values, and leaves nothing half-written behind."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from decimal import Decimal
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import protab as pt
from protab.engines.duckdb_resources import SpillFolder as _SpillFolder
from protab.engines.duckdb_resources import _remove_folder
from protab.errors import InputError, SpecError
from protab.session.frames import _FRAMES, model_matrix

PTABLE = pt.PTable.maximum_entropy(D=1, V=0.5)


def _state(s: pt.Session) -> list[tuple[str, str, str]]:
    """Every table and view of the connection (temporary ones included) with its columns."""
    return sorted(
        s.con.execute(
            "SELECT schema_name, table_name, string_agg(column_name, ',' ORDER BY column_index) "
            "FROM duckdb_columns() WHERE NOT internal GROUP BY ALL"
        ).fetchall()
    )


def _raises(s: pt.Session, error: type[Exception], call, *needles: str) -> str:
    """Run ``call``; it must raise ``error`` whose message holds every needle, and leave the
    database as it was."""
    before = _state(s)
    with pytest.raises(error) as info:
        call()
    msg = str(info.value)
    for needle in needles:
        assert needle in msg, (needle, msg)
    assert _state(s) == before
    return msg


@pytest.fixture
def micro() -> pl.DataFrame:
    """60 records: 20 cells of 3 (two flat dimensions), weights and an income."""
    n = 60
    return pl.DataFrame(
        {
            "pid": list(range(n)),
            "a": [f"a{k % 5}" for k in range(n)],
            "b": [f"b{k % 4}" for k in range(n)],
            "w": [1.0 + (k % 3) / 4 for k in range(n)],
            "income": [100.0 * k for k in range(n)],
        }
    )


# -- 1. threshold ----------------------------------------------------------------------------
def test_threshold_is_exact_for_a_real_threshold(session):
    # 200 cells of 2 records: many perturbed counts of exactly 2
    frame = pl.DataFrame({"pid": list(range(400)), "x": [f"x{k // 2:03d}" for k in range(400)]})
    session.register("t", frame)
    session.add_record_keys("t", id_column="pid", seed="threshold")
    spec = pt.TableSpec({"x": None})
    free = session.cell_key("t", spec, PTABLE)
    assert (free["n_pert"] == 2).sum() > 0  # the case the old int(threshold) got wrong
    for threshold in (2.7, 3, 2.0000001, np.float64(2.5), Fraction(5, 2), Decimal("2.1"), 1e300):
        out = session.cell_key("t", spec, PTABLE, threshold=threshold)
        blank = pl.Series([v < threshold for v in free["n_pert"].to_list()])  # exact, in Python
        assert out["n_pert"].is_null().to_list() == blank.to_list(), threshold
        assert out.filter(~blank)["n_pert"].equals(free.filter(~blank)["n_pert"])
    # an integer threshold: the count equal to it is published
    out = session.cell_key("t", spec, PTABLE, threshold=2)
    assert out.filter(free["n_pert"] == 2)["n_pert"].null_count() == 0
    # 0 blanks nothing
    assert session.cell_key("t", spec, PTABLE, threshold=0)["n_pert"].null_count() == 0


def test_threshold_blanks_w_pert_with_n_pert(session):
    frame = pl.DataFrame({"pid": list(range(60)), "x": [f"x{k % 30}" for k in range(60)],
                          "y": [f"y{k % 7}" for k in range(60)], "w": [1.5] * 60})
    session.register("t", frame)
    session.add_record_keys("t", id_column="pid", seed="w")
    out = session.cell_key("t", pt.TableSpec({"x": None, "y": None}, weight="w"), PTABLE, threshold=2.5, original=True)
    assert (out["n"] == 0).sum() > 0
    assert out["w_pert"].is_null().to_list() == out["n_pert"].is_null().to_list()


@pytest.mark.parametrize("threshold", [True, "3", float("nan"), float("inf"), -1, -0.5, [3]])
def test_bad_thresholds_are_refused(session, micro, threshold):
    session.register("t", micro)
    session.add_record_keys("t", id_column="pid", seed="s")
    _raises(session, InputError, lambda: session.cell_key("t", pt.TableSpec({"a": None}), PTABLE, threshold=threshold),
            "'t'", "threshold")


# -- 2. weights and sums ---------------------------------------------------------------------
def _with(micro: pl.DataFrame, column: str, rows: list[int], value: float) -> pl.DataFrame:
    vals = micro[column].to_list()
    for r in rows:
        vals[r] = value
    return micro.with_columns(pl.Series(column, vals, dtype=pl.Float64))


@pytest.mark.parametrize(
    ("column", "value", "needles"),
    [
        ("w", -1.5, ["weight column 'w'", "negative in 2 record(s)", "-1.5", "0 or more"]),
        ("w", float("nan"), ["weight column 'w'", "NaN or infinite in 2 record(s)"]),
        ("w", float("inf"), ["weight column 'w'", "NaN or infinite in 2 record(s)", "inf"]),
        ("w", float("-inf"), ["weight column 'w'", "NaN or infinite in 2 record(s)"]),
        ("w", 1e30, ["weight column 'w'", "1e+29", "larger unit"]),
        ("income", float("nan"), ["sums column 'income'", "NaN or infinite in 2 record(s)"]),
        ("income", 1e30, ["sums column 'income'", "1e+29", "larger unit"]),
    ],
)
def test_bad_weights_and_sums_are_refused(session, micro, column, value, needles):
    session.register("t", _with(micro, column, [3, 17], value))
    spec = pt.TableSpec({"a": None, "b": None}, weight="w", sums=["income"])
    _raises(session, InputError, lambda: session.tabulate("t", spec), "table 't'", *needles)


@pytest.mark.parametrize("weight", [None, "w"])
@pytest.mark.parametrize(
    ("value", "needles"),
    [
        (float("nan"), ["NaN or infinite in 2 record(s)"]),
        (float("inf"), ["NaN or infinite in 2 record(s)", "inf"]),
        (float("-inf"), ["NaN or infinite in 2 record(s)", "-inf"]),
        (1e30, ["1e+29", "larger unit"]),
        (-1e30, ["1e+29", "larger unit"]),
    ],
)
def test_bad_sums_are_refused_in_magnitude_tables(session, micro, weight, value, needles):
    # magnitude tables read the checks' smallest and largest value off their top lists
    session.register("t", _with(micro, "income", [3, 17], value))
    spec = pt.TableSpec({"a": None, "b": None}, weight=weight, sums=["income"])
    _raises(session, InputError, lambda: session.tabulate("t", spec, top_k=3), "table 't'", "sums column 'income'",
            *needles)


def test_sums_that_overflow_in_one_cell_are_refused(session):
    # every value fits a DECIMAL(38, 8), but 40 of them in one cell do not
    frame = pl.DataFrame({"a": ["x"] * 40, "w": [9e28] * 40})
    session.register("t", frame)
    _raises(session, InputError, lambda: session.tabulate("t", pt.TableSpec({"a": None}, weight="w")),
            "weight column 'w'", "table 't'", "1e+29")


def test_frequencies_that_overflow_are_refused(session):
    session.con.execute(
        "CREATE TABLE t AS SELECT * FROM (VALUES ('a', 9223372036854775000), ('a', 9223372036854775000)) v(x, f)"
    )
    _raises(session, InputError, lambda: session.tabulate("t", pt.TableSpec({"x": None}, freq="f")),
            "table 't'", "overflowed", "frequency")


def test_values_near_the_limit_are_looked_at_exactly(session):
    # the scan's cheap bound (2 values × 6e28 ≥ 5e28) asks for an exact look: 6e28 + 1 < 1e29
    session.register("t", pl.DataFrame({"a": ["x", "x", "y"], "w": [6e28, 1.0, 2.0]}))
    out = session.tabulate("t", pt.TableSpec({"a": None}, weight="w"))
    assert dict(zip(out["a"], out["w"])) == {"x": 6e28, "y": 2.0, "Total": 6e28}
    session.register("u", pl.DataFrame({"a": ["x", "y"], "w": [6e28, 6e28]}))
    _raises(session, InputError, lambda: session.tabulate("u", pt.TableSpec({"a": None}, weight="w")),
            "weight column 'w'", "table 'u'", "1.2e+29")


def test_large_weights_within_the_limit_sum_exactly_with_any_thread_count(tmp_path):
    rng = np.random.default_rng(1)
    frame = pl.DataFrame({
        "a": rng.integers(0, 7, 20_000).astype(str),
        "w": rng.uniform(0, 1e20, 20_000).round(-8),  # 1e20 · 2e4 = 2e24 < 1e29
        "x": rng.uniform(-1e3, 1e3, 20_000).round(3),
    })
    spec = pt.TableSpec({"a": None}, weight="w", sums=["x"])
    outs = []
    for threads in (1, 2, 4):
        with pt.Session(":memory:", threads=threads) as s:
            s.register("t", frame)
            outs.append(s.sql(
                "SELECT a, sum(CAST(w AS DECIMAL(38, 8)))::VARCHAR AS w, sum(CAST(x AS DECIMAL(38, 8)))::VARCHAR AS x "
                "FROM t GROUP BY ALL ORDER BY a"
            ))
            tab = s.tabulate("t", spec).filter(pl.col("a") != "Total").sort("a")
            assert tab["w"].to_list() == [float(v) for v in outs[-1]["w"]]
            outs.append(tab)
    assert outs[1].equals(outs[3]) and outs[1].equals(outs[5])


# -- 3. NaN codes ----------------------------------------------------------------------------
def _nan_codes() -> pl.DataFrame:
    return pl.DataFrame({"pid": [0, 1, 2, 3, 4, 5], "x": [1.0, 2.0, float("nan"), None, float("nan"), 1.0]})


def test_nan_codes_are_missing_like_null(session):
    session.register("t", _nan_codes())
    msg = _raises(session, InputError, lambda: session.tabulate("t", pt.TableSpec({"x": None})),
                  "column 'x'", "table 't'", "in 3 record(s)", "null_code")
    assert "NaN" in msg


def test_nan_codes_go_to_the_null_code(session):
    session.register("t", _nan_codes())
    out = session.tabulate("t", pt.TableSpec({"x": None}, null_code="Unknown"))
    got = dict(zip(out["x"].to_list(), out["n"].to_list()))
    assert got == {"1.0": 2, "2.0": 1, "Unknown": 3, "Total": 6}
    assert session.codes("t", "x") == ["1.0", "2.0"]


def test_nan_codes_in_hierarchy_columns_are_missing(session):
    session.register("t", pl.DataFrame({"r": [1.0, 1.0, 2.0], "m": [11.0, float("nan"), 21.0]}))
    _raises(session, InputError, lambda: session.hierarchy_from_columns("t", ["r", "m"]),
            "table 't'", "'m'", "NULL or NaN")


def test_a_code_at_two_levels_of_hierarchy_columns_is_refused(session):
    # bands 0-9 coded like the ages 0-9 they hold: '1' would name two cells
    session.register("t", pl.DataFrame({"band": [0, 0, 1, 1], "age": [0, 5, 1, 12]}))
    msg = _raises(session, InputError, lambda: session.hierarchy_from_columns("t", ["band", "age"]),
                  "table 't'", "'band'", "'age'", "two levels")
    assert "'0', '1'" in msg and "2 in all" in msg
    session.register("u", pl.DataFrame({"band": [100, 100, 101], "age": [0, 5, 12]}))
    assert session.hierarchy_from_columns("u", ["band", "age"]).depth == 2


# -- 4. seeds --------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [12345, 1.5, True, "   ", "", "\t\n", b"", None, ["s"]])
def test_bad_seeds_are_refused(session, micro, seed):
    session.register("t", micro)
    msg = _raises(session, InputError, lambda: session.add_record_keys("t", id_column="pid", seed=seed),
                  "table 't'", "seed")
    if isinstance(seed, (int, float)) and not isinstance(seed, bool):
        assert str(seed) not in msg  # the secret is never shown


def test_bytes_seeds_are_their_hex_text(session, micro):
    session.register("t", micro)
    session.register("u", micro)
    session.add_record_keys("t", id_column="pid", seed=b"\x01\xffk")
    session.add_record_keys("u", id_column="pid", seed=b"\x01\xffk".hex())
    assert session.sql("SELECT rkey FROM t ORDER BY pid").equals(session.sql("SELECT rkey FROM u ORDER BY pid"))


# -- 5. TableSpec types ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "needles"),
    [
        ({"null_code": 5}, ["null_code", "string", "int"]),
        ({"null_code": "  "}, ["null_code", "string"]),
        ({"drop_empty": "false"}, ["drop_empty", "True or False", "'false'"]),
        ({"drop_empty": 1}, ["drop_empty", "True or False"]),
        ({"formula": 5}, ["formula", "string", "int"]),
        ({"weight": 3}, ["weight", "column name", "int"]),
        ({"weight": ""}, ["weight", "column name"]),
        ({"sums": [1]}, ["sums", "column name", "int"]),
        ({"sums": {"x": 1}}, ["sums", "dict"]),
        ({"sums": ["x", "x"]}, ["sums", "'x'"]),
        ({"freq": 2.5}, ["freq", "column name", "float"]),
        ({"crossings": "ab"}, ["crossings", "str"]),
        ({"crossings": [("a", 1)]}, ["crossings", "('a', 1)"]),
        ({"total": None}, ["total", "string"]),
        ({"dims": [1, 2]}, ["dims", "1", "int"]),
        ({"dims": {"a": None, 7: None}}, ["dims", "7", "int"]),
        ({"dims": {"a": [1, None, 2]}}, ["'a'", "None or NaN"]),
        ({"dims": {"a": ["x", "x"]}}, ["'a'", "'x'", "twice"]),
    ],
)
def test_tablespec_types(kwargs, needles):
    kwargs = {"dims": {"a": None, "b": None}, **kwargs}
    with pytest.raises(SpecError) as info:
        pt.TableSpec(**kwargs)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


def test_tablespec_accepts_numpy_bool_and_a_single_sums_name():
    spec = pt.TableSpec({"a": None}, drop_empty=np.bool_(True), sums="x")
    assert spec.drop_empty is True and spec.sums == ("x",)


# -- 6. resources ----------------------------------------------------------------------------
def _ids(n: int = 200) -> pl.DataFrame:
    return pl.DataFrame({"pid": list(range(n)), "hid": [k // 2 for k in range(n)], "sex": ["F", "M"] * (n // 2)})


def test_too_many_cells_are_refused_before_the_rollup():
    with pt.Session(":memory:", max_cells=10_000) as s:
        s.register("t", _ids())
        spec = pt.TableSpec({"pid": None, "hid": None, "sex": None})
        msg = _raises(s, SpecError, lambda: s.tabulate("t", spec),
                      "table 't'", "pid 201 codes", "hid 101 codes", "max_cells", "10,000", "drop_empty")
        assert "6.09e+04" in msg  # 201 · 101 · 3
        assert s.inner_cells("t", spec).height == 200  # no roll-up: no estimate of published cells
        _raises(s, SpecError, lambda: s.inner_cells("t", spec, extend0=True), "zero-extended", "extend0=False")
        # sparse: at most 200 inner cells × 8 level combinations
        out = s.tabulate("t", pt.TableSpec({"pid": None, "hid": None, "sex": None}, drop_empty=True))
        assert out.filter(pl.col("pid") == "Total", pl.col("hid") == "Total", pl.col("sex") == "Total")["n"].item() == 200
        # zero-extended inner cells (model matrix) count too: 200 · 100 · 2
        _raises(s, SpecError, lambda: s.model_matrix("t", pt.TableSpec({"pid": None, "hid": None, "sex": None},
                                                                         drop_empty=True)),
                "zero-extended", "4e+04", "max_cells")
    with pt.Session(":memory:", max_cells=None) as s:  # no limit
        s.register("t", _ids(40))
        assert s.tabulate("t", pt.TableSpec({"pid": None, "hid": None})).height == 41 * 21


def test_default_cell_limit_stops_an_identifier_crossing(session):
    # 3000 × 3000 × 20 codes: 1.9e8 published cells, above the default 1e8
    n = 3000
    frame = pl.DataFrame({"pid": list(range(n)), "hid": list(range(n)), "age": [k % 20 for k in range(n)]})
    session.register("t", frame)
    _raises(session, SpecError, lambda: session.tabulate("t", pt.TableSpec({"pid": None, "hid": None, "age": None})),
            "table 't'", "Session(max_cells=...)", "100,000,000")


@pytest.mark.parametrize("value", [0, -3, "many", float("nan"), True])
def test_bad_max_cells(value):
    with pytest.raises(InputError, match="max_cells"):
        pt.Session(":memory:", max_cells=value)


@pytest.mark.parametrize("value", [0, "4", 2.5, True])
def test_bad_threads(value):
    with pytest.raises(InputError, match="threads"):
        pt.Session(":memory:", threads=value)


@pytest.mark.parametrize("value", ["lots", 12, -5, "4 parsecs", True])
def test_bad_memory_limit(value, tmp_path):
    with pytest.raises(InputError, match="memory_limit"):
        pt.Session(":memory:", memory_limit=value, temp_directory=tmp_path)
    assert not list((tmp_path / f"protab-{os.getuid()}").glob("s-*"))  # nothing left behind


def test_memory_limit_and_private_spill_folder(tmp_path):
    db = tmp_path / "data.duckdb"
    base = tmp_path / "spill"
    with pt.Session(db, memory_limit="64MB", temp_directory=base) as s:
        limit, folder = s.con.execute(
            "SELECT current_setting('memory_limit'), current_setting('temp_directory')"
        ).fetchall()[0]
        assert limit in ("61.0 MiB", "61.0MiB")
        assert os.path.dirname(os.path.dirname(folder)) == str(base)
        assert os.path.isdir(folder)
        # a query that needs more than 64 MB spills into the folder and still finishes
        n = s.con.execute(
            "SELECT count(*) FROM (SELECT range AS i, md5(range::VARCHAR) AS h FROM range(1500000) ORDER BY h)"
        ).fetchall()[0][0]
        assert n == 1_500_000
    assert not os.path.exists(folder)
    assert not os.path.exists(str(db) + ".tmp")
    # the default: below the machine's memory
    with pt.Session(":memory:") as s:
        assert s.con.execute("SELECT current_setting('temp_directory')").fetchall()[0][0] != ".tmp"


def test_two_sessions_on_one_database_file_share_the_spill_folder(tmp_path):
    db = tmp_path / "one.duckdb"
    with pt.Session(db, temp_directory=tmp_path) as a:
        with pt.Session(db, temp_directory=tmp_path) as b:
            assert a.engine._spill is b.engine._spill
            folder = b.engine._spill.path
        assert os.path.isdir(folder)  # still used by a
    assert not os.path.exists(folder)


def test_out_of_memory_is_a_clear_error_and_leaves_nothing(tmp_path):
    with pt.Session(tmp_path / "db.duckdb", temp_directory=tmp_path) as s:
        s.con.execute("CREATE TABLE t AS SELECT range AS pid, range % 7 AS a FROM range(2000000)")
        s.con.execute("CHECKPOINT")
        s.con.execute("SET memory_limit = '16MB'")
        s.con.execute("SET max_temp_directory_size = '1MB'")
        _raises(s, InputError, lambda: s.tabulate("t", pt.TableSpec({"pid": None}, drop_empty=True)),
                "table 't'", "out of memory", "Session(memory_limit=...)")


def test_spill_folder_of_a_killed_process_is_removed_by_the_next_session(tmp_path):
    code = (
        "import os, sys, protab\n"
        f"s = protab.Session(':memory:', temp_directory={str(tmp_path)!r})\n"
        "print(s.con.execute(\"SELECT current_setting('temp_directory')\").fetchall()[0][0], flush=True)\n"
        "os._exit(9)  # killed: no close, no clean-up at exit\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    left = res.stdout.strip()
    assert res.returncode == 9 and os.path.isdir(left), res.stderr
    with pt.Session(":memory:", temp_directory=tmp_path):
        assert not os.path.exists(left)


def test_spill_folders_of_killed_sessions_are_removed(tmp_path):
    live = _SpillFolder(tmp_path)
    stale = _SpillFolder(tmp_path)
    (open(os.path.join(stale.path, "spill.bin"), "wb")).write(b"x" * 100)
    os.close(stale._fd)  # as if its process were killed: the lock is free, the folder stays
    stale._finalizer.detach()
    with pt.Session(":memory:", temp_directory=tmp_path) as s:
        assert not os.path.exists(stale.path)
        assert os.path.isdir(live.path)  # a live session's folder is kept
        mine = s.con.execute("SELECT current_setting('temp_directory')").fetchall()[0][0]
        assert os.path.isdir(mine)
    _remove_folder(live.path, None, os.getpid() + 1)  # as a forked child at its exit
    assert os.path.isdir(live.path)
    live.remove()
    assert not os.path.exists(live.path) and not os.path.exists(mine)


# -- 7. model_matrix on frames ---------------------------------------------------------------
def test_model_matrix_reuses_its_session_and_is_thread_safe():
    inner = pl.DataFrame({"a": ["x", "x", "y", "y"], "b": ["p", "q", "p", "q"], "n": [1, 2, 3, 4]})
    spec = pt.TableSpec({"a": None, "b": None})
    X0, _, pub0 = model_matrix(inner, spec)
    shared = _FRAMES.session()
    clean = _state(shared)
    for _ in range(3):
        model_matrix(inner, spec)
    assert _FRAMES.session() is shared and _state(shared) == clean  # reused, nothing left over
    results, errors = [], []

    def work(k):
        try:
            frame = inner.with_columns(pl.col("n") * k)
            X, _, pub = model_matrix(frame, spec)
            results.append((k, X, pub))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 8
    for k, X, pub in results:
        assert (X != X0).nnz == 0
        assert pub["n"].to_list() == [v * k for v in pub0["n"].to_list()]
    # errors inside leave the shared session clean
    with pytest.raises(InputError, match="frequency column"):
        model_matrix(inner, spec, freq="nope")
    bad = inner.with_columns(pl.Series("a", ["x", None, "y", "y"]))
    with pytest.raises(InputError, match="missing"):
        model_matrix(bad, spec)
    X1, _, _ = model_matrix(inner, spec)
    assert (X1 != X0).nnz == 0
    assert _FRAMES.session() is shared and _state(shared) == clean


# -- 8. progress -----------------------------------------------------------------------------
class _Bar:
    made: list["_Bar"] = []

    def __init__(self, desc, total=None, unit="it"):
        self.desc, self.total, self.done = desc, total, 0
        _Bar.made.append(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        self.done += n

    def set_postfix_str(self, s="", refresh=True):
        pass


@pytest.mark.parametrize("progress", [None, False])
def test_progress_on_long_steps(monkeypatch, progress):
    import protab.engines.duckdb_engine as ps

    monkeypatch.setenv("PROTAB_PROGRESS", "1")
    monkeypatch.setattr(ps, "bar", _Bar)
    monkeypatch.setattr(ps, "_POLL", 0.002)
    _Bar.made.clear()
    with pt.Session(":memory:", progress=progress) as s:
        s.con.execute("CREATE TABLE t AS SELECT range AS pid FROM range(400000)")
        s.add_record_keys("t", id_column="pid", seed="SEED-NOT-SHOWN")
        s.register("u", pl.DataFrame({"x": list(range(1000))}))
        on = s.con.execute("SELECT current_setting('enable_progress_bar')").fetchall()[0][0]
    if progress is False:
        assert not _Bar.made and on is False
        return
    descs = [b.desc for b in _Bar.made]
    assert descs == ["checking the ids of t", "record keys for t", "copying u into the database"]
    assert all("SEED" not in d for d in descs)
    assert any(b.done > 0 for b in _Bar.made) and all(b.done <= 100 for b in _Bar.made)


def test_minus_zero_and_zero_are_one_code():
    for dtype in (pl.Float32, pl.Float64):
        df = pl.DataFrame({"x": pl.Series([-0.0] * 3 + [0.0] * 4 + [1.1], dtype=dtype)})
        with pt.Session(":memory:") as s:
            s.register("t", df)
            out = s.tabulate("t", pt.TableSpec({"x": None}))
        assert out["x"].to_list() == ["Total", "0.0", "1.1"] and out["n"].to_list() == [8, 7, 1]


def test_threads_far_beyond_the_cores_are_refused():
    with pytest.raises(InputError, match="threads"):
        pt.Session(":memory:", threads=10**6)


@pytest.mark.parametrize("limit", ["1KB", "0%", "150%", "100b"])
def test_memory_limits_too_small_to_work_are_refused(limit):
    with pytest.raises(InputError, match="memory_limit"):
        pt.Session(":memory:", memory_limit=limit)
