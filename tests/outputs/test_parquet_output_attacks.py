"""Hostile and careless ``path=`` values for the Parquet outputs of cell_key, tabulate and
perturb_inner: an output never replaces the session's database (or its .wal), a file or
folder registered as input, or a folder of someone else's files — however the path is spelled
(symlinks to the file or to a folder above it, ``..``, ``~``, a relative database path after
``chdir``, a ``**`` glob) — and a refused or failed write leaves nothing behind.

Each test asserts the safe behaviour: it fails where protab is unsafe."""

from __future__ import annotations

import os
import shutil

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import protab as pt
from protab.engines import DuckDBEngine
from protab.errors import InputError, ProtabError

SEED = "parquet-output-attacks"
N = 400
CODES = ["0101", "0102", "0201", "0202"]
REGION = pt.Hierarchy.from_code_lengths(CODES, [2, 2])
SPEC = pt.TableSpec({"region": REGION, "age": None}, weight="w")
P = pt.PTable.maximum_entropy(D=3, V=1.5, js=1)


def _records() -> pl.DataFrame:
    i = pl.int_range(0, N, eager=True)
    return pl.DataFrame({
        "pid": i,
        "region": pl.Series(CODES).gather((i * 7) % len(CODES)),
        "age": ((i * 13) % 5).cast(pl.String),
        "w": (1 + (i % 4) * 0.25).cast(pl.Float64),
    })


RECORDS = _records()
REFUSED = "would replace"


def _listing(folder) -> list[str]:
    return sorted(os.listdir(folder))


def _keyed(s: pt.Session, name: str, source) -> None:
    s.register(name, source)
    s.add_record_keys(name, id_column="pid", seed=SEED)


def _write(s: pt.Session, path, table: str = "persons"):
    return s.cell_key(table, SPEC, P, path=path)


def _is_database(db) -> bool:
    """The file still opens as the session's database (with table persons)."""
    with open(db, "rb") as fh:
        if fh.read(4) == b"PAR1":
            return False
    with pt.Session(db, progress=False, read_only=True) as s:
        return "persons" in s.tables()


@pytest.fixture
def farm(tmp_path):
    """real/persons.parquet, real/db.duckdb's folder and link -> real (a symlinked folder)."""
    real = tmp_path / "real"
    real.mkdir()
    RECORDS.write_parquet(real / "persons.parquet")
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    return tmp_path


# -- DuckDB: registered inputs reached through symlinks -------------------------------------

@pytest.mark.parametrize("as_path", [False, True], ids=["str", "Path"])
@pytest.mark.parametrize("registered,written", [
    ("link/persons.parquet", "real/persons.parquet"),   # registered through a symlinked folder
    ("real/persons.parquet", "link/persons.parquet"),   # written through a symlinked folder
    ("real/persons.parquet", "alias.parquet"),          # a symlink to the input file itself
])
def test_duckdb_symlinks_to_a_registered_input_are_refused(farm, registered, written, as_path):
    (farm / "alias.parquet").symlink_to(farm / "real" / "persons.parquet")
    before = _listing(farm / "real")
    with pt.Session(":memory:", progress=False) as s:
        _keyed(s, "persons", str(farm / registered))
        target = farm / written
        with pytest.raises(InputError, match=REFUSED):
            _write(s, target if as_path else str(target))
        assert_frame_equal(pl.read_parquet(farm / "real" / "persons.parquet"), RECORDS)
        assert s.sql("SELECT count(*) AS n FROM persons")["n"][0] == N
    assert (farm / "alias.parquet").is_symlink()
    assert _listing(farm / "real") == before


def test_duckdb_hard_link_to_a_registered_input_keeps_the_input(farm):
    """A hard link is another name: replacing the name never touches the input's bytes."""
    src = farm / "real" / "persons.parquet"
    os.link(src, farm / "hard.parquet")
    with pt.Session(":memory:", progress=False) as s:
        _keyed(s, "persons", str(src))
        try:
            _write(s, farm / "hard.parquet")
        except InputError:
            pass
    assert_frame_equal(pl.read_parquet(src), RECORDS)


@pytest.mark.parametrize("spelling", [
    "{d}/real/sub/../persons.parquet",
    "{d}/real/persons.parquet/",
    "{d}/real/./persons.parquet",
    "{d}//real//persons.parquet",
])
def test_duckdb_respellings_of_a_registered_input_are_refused(farm, spelling):
    (farm / "real" / "sub").mkdir()
    with pt.Session(":memory:", progress=False) as s:
        _keyed(s, "persons", str(farm / "real" / "persons.parquet"))
        with pytest.raises(ProtabError, match=REFUSED):
            _write(s, spelling.format(d=farm))
    assert_frame_equal(pl.read_parquet(farm / "real" / "persons.parquet"), RECORDS)


def test_duckdb_dotdot_after_a_symlink_never_reaches_the_input(farm):
    """``link/sub/..`` is ``real`` to the OS but ``link`` lexically; protab writes the lexical
    path (its parent is normalised before writing), so the input is never reached this way."""
    (farm / "real" / "sub").mkdir()
    (farm / "hop").symlink_to(farm / "real" / "sub", target_is_directory=True)
    with pt.Session(":memory:", progress=False) as s:
        _keyed(s, "persons", str(farm / "real" / "persons.parquet"))
        try:
            _write(s, str(farm / "hop" / ".." / "persons.parquet"))  # OS: real/persons.parquet
        except InputError:
            pass
    assert_frame_equal(pl.read_parquet(farm / "real" / "persons.parquet"), RECORDS)


def test_duckdb_input_registered_with_tilde_is_protected(farm, monkeypatch):
    """DuckDB expands ``~`` in a registered path; the protection must see the same file."""
    monkeypatch.setenv("HOME", str(farm / "real"))
    with pt.Session(":memory:", progress=False) as s:
        _keyed(s, "persons", "~/persons.parquet")
        with pytest.raises(InputError, match=REFUSED):
            _write(s, farm / "real" / "persons.parquet")
    assert_frame_equal(pl.read_parquet(farm / "real" / "persons.parquet"), RECORDS)


# -- DuckDB: globs ----------------------------------------------------------------------------

@pytest.mark.parametrize("glob,written", [
    ("real/*.parquet", "real/new.parquet"),
    ("real/**/*.parquet", "real/new.parquet"),        # DuckDB's ** matches no folder too
    ("link/*.parquet", "real/new.parquet"),           # the glob's folder through a symlink
    ("real/*.parquet", "link/new.parquet"),
])
def test_duckdb_no_output_joins_a_registered_glob(farm, glob, written):
    with pt.Session(":memory:", progress=False) as s:
        _keyed(s, "persons", str(farm / glob))
        with pytest.raises(InputError, match=REFUSED):
            _write(s, farm / written)
        # the view over the glob still reads exactly the input's rows
        assert s.sql("SELECT count(*) AS n FROM persons")["n"][0] == N
    assert _listing(farm / "real") == ["persons.parquet"]


# -- DuckDB: the database and its .wal ------------------------------------------------------

@pytest.mark.parametrize("opened,written", [
    ("real/db.duckdb", "real/db.duckdb"),
    ("real/db.duckdb", "real/db.duckdb.wal"),
    ("real/db.duckdb", "link/db.duckdb"),             # through a symlinked folder
    ("link/db.duckdb", "real/db.duckdb"),             # opened through one, written by its real name
    ("link/db.duckdb", "real/db.duckdb.wal"),         # DuckDB's wal is link/db.duckdb.wal = real/...
    ("real/db.duckdb", "dblink.duckdb"),              # a symlink to the database file
])
def test_duckdb_never_replaces_its_database(farm, opened, written):
    (farm / "dblink.duckdb").symlink_to(farm / "real" / "db.duckdb")
    db = farm / opened
    with pt.Session(str(db), progress=False) as s:
        _keyed(s, "persons", RECORDS)
        with pytest.raises(InputError, match="the session's database"):
            _write(s, str(farm / written))
    assert _is_database(farm / "real" / "db.duckdb")
    assert (farm / "dblink.duckdb").is_symlink()


def test_duckdb_relative_database_after_chdir(farm, monkeypatch):
    """A database opened by a relative path stays protected when the working folder changes."""
    monkeypatch.chdir(farm / "real")
    s = pt.Session("db.duckdb", progress=False)
    try:
        _keyed(s, "persons", RECORDS)
        monkeypatch.chdir(farm)
        with pytest.raises(InputError, match="the session's database"):
            _write(s, farm / "real" / "db.duckdb")
    finally:
        s.close()
    assert _is_database(farm / "real" / "db.duckdb")


def test_duckdb_database_opened_with_tilde(farm, monkeypatch):
    """DuckDB expands ``~`` in the database path; so must the protection."""
    monkeypatch.setenv("HOME", str(farm / "real"))
    s = pt.Session("~/db.duckdb", progress=False)
    try:
        assert (farm / "real" / "db.duckdb").exists()
        _keyed(s, "persons", RECORDS)
        with pytest.raises(InputError, match="the session's database"):
            _write(s, farm / "real" / "db.duckdb")
    finally:
        s.close()
    assert _is_database(farm / "real" / "db.duckdb")


# -- DuckDB: paths that cannot be files --------------------------------------------------------

@pytest.fixture
def duck():
    s = pt.Session(":memory:", progress=False)
    _keyed(s, "persons", RECORDS)
    yield s
    s.close()


def _bad_paths(tmp_path):
    (tmp_path / "adir").mkdir()
    (tmp_path / "dirlink").symlink_to(tmp_path / "adir", target_is_directory=True)
    (tmp_path / "afile").write_bytes(b"keep")
    return {
        "empty": "",
        "nul": str(tmp_path / "a\x00b.parquet"),
        "folder": str(tmp_path / "adir"),
        "folder_slash": str(tmp_path / "adir") + "/",
        "symlink_to_folder": tmp_path / "dirlink",
        "parent_is_a_file": tmp_path / "afile" / "x.parquet",
        "proc": "/proc/protab-attack.parquet",
    }


BAD = ["empty", "nul", "folder", "folder_slash", "symlink_to_folder", "parent_is_a_file", "proc"]


@pytest.mark.parametrize("case", BAD)
def test_duckdb_unwritable_paths_are_refused_and_leave_nothing(duck, tmp_path, monkeypatch, case):
    monkeypatch.chdir(tmp_path)
    path = _bad_paths(tmp_path)[case]
    before = {p: _listing(tmp_path / p) for p in ("", "adir")}
    with pytest.raises(ProtabError):
        _write(duck, path)
    assert {p: _listing(tmp_path / p) for p in ("", "adir")} == before
    assert (tmp_path / "afile").read_bytes() == b"keep"


@pytest.mark.parametrize("case", BAD)
def test_duckdb_bad_paths_raise_input_error_naming_the_path(duck, tmp_path, monkeypatch, case):
    """As on Spark and for the input checks: InputError (what callers catch), naming the path."""
    monkeypatch.chdir(tmp_path)
    path = _bad_paths(tmp_path)[case]
    with pytest.raises(InputError) as err:
        _write(duck, path)
    assert repr(os.fspath(path)) in str(err.value)


@pytest.mark.parametrize("path", [b"out.parquet", 5], ids=["bytes", "int"])
def test_duckdb_path_of_the_wrong_type_is_an_input_error(duck, tmp_path, monkeypatch, path):
    monkeypatch.chdir(tmp_path)
    try:
        out = _write(duck, path)
    except InputError:
        assert _listing(tmp_path) == []
    else:  # bytes are a path to the OS: then the file must be whole
        assert pl.read_parquet(out).height > 0


def test_duckdb_folder_without_write_permission(duck, tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes into a folder of mode 0o500")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(ProtabError, match="ro"):
            _write(duck, ro / "t.parquet")
        assert _listing(ro) == []
    finally:
        ro.chmod(0o700)


# -- DuckDB: legitimate writes and failures ---------------------------------------------------

@pytest.mark.parametrize("as_path", [False, True], ids=["str", "Path"])
def test_duckdb_new_folders_and_writing_twice(duck, tmp_path, as_path):
    target = tmp_path / "new" / "deeper" / "t.parquet"
    t = target if as_path else str(target)
    assert _write(duck, t) == os.fspath(t)
    first = pl.read_parquet(target)
    assert "n" not in first.columns
    out = duck.cell_key("persons", SPEC, P, original=True, path=t)  # replaces the first
    assert_frame_equal(pl.read_parquet(out), duck.cell_key("persons", SPEC, P, original=True))
    assert _listing(target.parent) == ["t.parquet"]


def test_duckdb_relative_path_is_written_where_it_says(duck, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a").mkdir()
    out = _write(duck, "a/../b/t.parquet")
    assert out == "a/../b/t.parquet"
    assert _listing(tmp_path / "b") == ["t.parquet"] and _listing(tmp_path / "a") == []


@pytest.mark.parametrize("bad", ["not a ptable", pt.MagnitudePTable.maximum_entropy(10, 3, step=2, icat=[1, 5, 10])],
                         ids=["str", "numeric_ptable"])
def test_duckdb_bad_ptable_leaves_the_older_file_and_no_temporary(duck, tmp_path, bad):
    target = tmp_path / "t.parquet"
    _write(duck, target)
    before = target.read_bytes()
    with pytest.raises(ProtabError):
        duck.cell_key("persons", SPEC, bad, path=target)
    with pytest.raises(ProtabError):
        duck.perturb_inner("persons", SPEC, bad, path=target)
    assert target.read_bytes() == before
    assert _listing(tmp_path) == ["t.parquet"]


def test_duckdb_interrupt_during_the_write_keeps_the_older_file(duck, tmp_path, monkeypatch):
    """Ctrl-C (a BaseException, not an Exception) half-way through the engine's write."""
    target = tmp_path / "t.parquet"
    _write(duck, target)
    before = target.read_bytes()

    def interrupted(self, sql, params, path):
        with open(path, "wb") as fh:
            fh.write(b"PAR1half")
        raise KeyboardInterrupt

    monkeypatch.setattr(DuckDBEngine, "write_parquet", interrupted)
    with pytest.raises(KeyboardInterrupt):
        duck.tabulate("persons", SPEC, path=target)
    assert target.read_bytes() == before
    assert _listing(tmp_path) == ["t.parquet"]


# -- Spark ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    pytest.importorskip("pyspark", reason="pyspark (in the dev extra) is not installed")
    if shutil.which("java") is None:  # pragma: no cover
        pytest.skip("Spark needs a Java runtime (make java installs Java 17)")
    from spark_fixtures import local_spark, release

    s = local_spark(tmp_path_factory, "protab-parquet-attacks", cores=2)
    s.conf.set("spark.sql.shuffle.partitions", "1")  # a slow machine: as few tasks as can be
    yield s
    release(s)


SPARK_SPEC = pt.TableSpec({"age": None})  # few Spark stages: every call runs the scan first


def _spark_lake(root) -> tuple:
    """root/lake/persons.parquet (a folder of one part file) and root/lakelink -> root/lake."""
    folder = root / "lake" / "persons.parquet"
    folder.mkdir(parents=True)
    RECORDS.write_parquet(folder / "part-0.parquet")
    (root / "lakelink").symlink_to(root / "lake", target_is_directory=True)
    return folder, root / "lakelink"


def _lake_intact(folder) -> None:
    assert _listing(folder) == ["part-0.parquet"]
    assert_frame_equal(pl.read_parquet(folder / "part-0.parquet"), RECORDS)


@pytest.mark.parametrize("registered,written", [
    ("lakelink/persons.parquet", "lake/persons.parquet"),        # the folder by its real name
    ("lake/persons.parquet", "published"),                       # a symlink to the folder
    ("lake/persons.parquet", "lake/persons.parquet/published"),  # a new folder inside the input
])
def test_spark_never_replaces_or_writes_into_a_registered_folder(spark, tmp_path, registered, written):
    folder, _ = _spark_lake(tmp_path)
    (tmp_path / "published").symlink_to(folder, target_is_directory=True)
    s = pt.Session.spark(spark)
    try:
        s.register("lake", str(tmp_path / registered), replace=True)
        with pytest.raises(InputError, match=REFUSED):
            s.tabulate("lake", SPARK_SPEC, path=tmp_path / written)
    finally:
        s.close()
    _lake_intact(folder)
    assert (tmp_path / "published").is_symlink()
    assert _listing(tmp_path) == ["lake", "lakelink", "published"]  # nothing moved aside


def test_spark_never_replaces_a_folder_of_other_files(spark, tmp_path, monkeypatch):
    """An existing folder that is not a table Spark wrote (here someone's project, also the
    working folder) is refused, not moved aside and deleted with everything in it."""
    work = tmp_path / "project"
    work.mkdir()
    (work / "notes.txt").write_text("years of work")
    monkeypatch.chdir(work)
    s = pt.Session.spark(spark)
    try:
        s.register("persons", RECORDS, replace=True)
        with pytest.raises(InputError):
            s.tabulate("persons", SPARK_SPEC, path=work)
    finally:
        s.close()
    assert (tmp_path / "project" / "notes.txt").read_text() == "years of work"


def test_spark_legitimate_writes_and_bad_names(spark, tmp_path):
    s = pt.Session.spark(spark)
    try:
        s.register("persons", RECORDS, replace=True)
        target = tmp_path / "out" / "t"
        assert s.tabulate("persons", SPARK_SPEC, path=str(target)) == str(target)
        assert s.tabulate("persons", SPARK_SPEC, path=target) == os.fspath(target)  # replaces its own output
        parts = [f for f in os.listdir(target) if f.endswith(".parquet")]
        assert sum(pl.read_parquet(target / f).height for f in parts) > 0
        assert _listing(tmp_path / "out") == ["t"]
        with pytest.raises(InputError, match="NUL character"):
            s.tabulate("persons", SPARK_SPEC, path=str(tmp_path / "a\x00b"))
    finally:
        s.close()
    assert _listing(tmp_path) == ["out"]


def test_duckdb_bad_path_is_refused_before_the_scan(duck, tmp_path, monkeypatch):
    """The path is checked before any work: the table request is never prepared."""
    def no_scan(*args, **kwargs):
        raise AssertionError("the table was computed before the path was checked")

    monkeypatch.setattr(pt.Session, "_run", no_scan)
    (tmp_path / "adir").mkdir()
    for method in (duck.cell_key, duck.perturb_inner):
        with pytest.raises(InputError, match="is a folder"):
            method("persons", SPEC, P, path=tmp_path / "adir")
    with pytest.raises(InputError, match="is a folder"):
        duck.tabulate("persons", SPEC, path=tmp_path / "adir")


def test_duckdb_writes_through_a_symlink_to_another_file(duck, tmp_path):
    """A symbolic link to a file that is no input: the file it points to gets the table, the
    link stays a link."""
    (tmp_path / "real.parquet").write_bytes(b"old")
    (tmp_path / "alias.parquet").symlink_to(tmp_path / "real.parquet")
    _write(duck, tmp_path / "alias.parquet")
    assert (tmp_path / "alias.parquet").is_symlink()
    assert_frame_equal(pl.read_parquet(tmp_path / "real.parquet"), duck.cell_key("persons", SPEC, P))
    assert _listing(tmp_path) == ["alias.parquet", "real.parquet"]
