"""The bad-input catalogue: one row per mistake a user can make at the command line.

Each row runs a `protab` command on a small keyed database and asserts that it exits with a
protab error (exit 2, no traceback), that the message names the fault, and that nothing was
written: no output folder, no staging folder beside it, the database's tables unchanged.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from protab import cli
from protab.session import Session

GOOD_TABLE = '[[tables]]\nname = "t"\nsource = "persons"\ndims = ["region", "sex"]\n'
PTABLE = "[ptable]\nmaximum_entropy = { D = 3, V = 1 }\n"
HEAD = PTABLE
MAGNITUDE = "[magnitude]\nptable = { maximum_entropy = { D = 10, V = 3, step = 2, icat = [1, 5, 10] } }\nfp = 1000\n"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad")
    db = root / "census.duckdb"
    cli.demo(2000, str(db), str(root / "demo_out"), "catalogue-seed", formats=("csv",))
    (root / "ptable.csv").write_text("not,a,ptable\n")
    (root / "binary.csv").write_bytes(b"\xff\xfe\x00\x81garbage")
    (root / "adir").mkdir()
    (root / "empty_seed").write_text("  \n")
    (root / "a_file").write_text("I am a file")
    (root / "noncsv.txt").write_text("x")
    return root


def _db_state(db: Path) -> list:
    with Session(str(db), read_only=True, progress=False) as s:
        state = [(t, tuple(s.columns(t).items())) for t in s.tables()]
        state.append(s.con.execute("SELECT count(*) FROM protab_ptable").fetchall()[0][0])
    return state


# (id, argv template, request text or None, expected fragments of the message)
# In argv: {db} the database, {req} the request file, {out} an output folder, {root} the folder.
CASES: list[tuple[str, list[str], str | None, list[str]]] = [
    # -- protect: request schema
    ("unknown top key", ["protect", "{req}"], 'formatss = ["csv"]\n' + HEAD + GOOD_TABLE, ["formatss", "formats"]),
    ("misspelt weight", ["protect", "{req}"], HEAD + GOOD_TABLE + 'wieght = "weight"\n', ["wieght", "weight"]),
    ("weights plural", ["protect", "{req}"], HEAD + GOOD_TABLE + 'weights = "weight"\n', ["weights", "weight"]),
    ("misspelt drop_empty", ["protect", "{req}"], HEAD + GOOD_TABLE + "drop_emtpy = true\n",
     ["drop_emtpy", "drop_empty"]),
    ("misspelt formula", ["protect", "{req}"], HEAD + GOOD_TABLE + 'formul = "region*sex"\n', ["formul", "formula"]),
    ("drop_empty string", ["protect", "{req}"], HEAD + GOOD_TABLE + 'drop_empty = "false"\n',
     ["drop_empty", "boolean"]),
    ("formats empty", ["protect", "{req}"], "formats = []\n" + HEAD + GOOD_TABLE, ["formats", "empty"]),
    ("top key after a section", ["protect", "{req}"], HEAD + 'formats = ["csv"]\n' + GOOD_TABLE,
     ["formats", "above the first"]),
    ("formats scalar", ["protect", "{req}"], 'formats = "csv"\n' + HEAD + GOOD_TABLE, ["formats", "list"]),
    ("formats unknown", ["protect", "{req}"], 'formats = ["xlsx"]\n' + HEAD + GOOD_TABLE, ["xlsx", "csv"]),
    ("formats twice", ["protect", "{req}"], 'formats = ["csv", "csv"]\n' + HEAD + GOOD_TABLE, ["formats", "csv"]),
    ("tables scalar", ["protect", "{req}"], "tables = 5\n" + HEAD, ["tables", "list"]),
    ("tables missing", ["protect", "{req}"], HEAD, ["tables"]),
    ("tables empty", ["protect", "{req}"], "tables = []\n" + HEAD, ["tables", "empty"]),
    ("formula number", ["protect", "{req}"], HEAD + GOOD_TABLE + "formula = 5\n", ["formula", "string"]),
    ("dims scalar", ["protect", "{req}"], HEAD + '[[tables]]\nname = "t"\nsource = "persons"\ndims = "sex"\n',
     ["dims", "list"]),
    ("dims of numbers", ["protect", "{req}"], HEAD + '[[tables]]\nname = "t"\nsource = "persons"\ndims = [1]\n',
     ["dims[0]", "string"]),
    ("dims repeated", ["protect", "{req}"],
     HEAD + '[[tables]]\nname = "t"\nsource = "persons"\ndims = ["sex", "sex"]\n', ["dims", "sex"]),
    ("name missing", ["protect", "{req}"], HEAD + '[[tables]]\nsource = "persons"\ndims = ["sex"]\n', ["name"]),
    ("source list", ["protect", "{req}"], HEAD + '[[tables]]\nname = "t"\nsource = ["persons"]\ndims = ["sex"]\n',
     ["source", "string"]),
    ("hierarchy columns scalar", ["protect", "{req}"],
     HEAD + '[hierarchies.region]\ncolumns = "region"\n' + GOOD_TABLE, ["hierarchies.region.columns", "list"]),
    ("hierarchy not a table", ["protect", "{req}"], "hierarchies = { region = 5 }\n" + HEAD + GOOD_TABLE,
     ["hierarchies.region", "table"]),
    ("hierarchy two sources", ["protect", "{req}"],
     HEAD + '[hierarchies.region]\ncolumns = ["region"]\nhrc = "x.hrc"\n' + GOOD_TABLE, ["exactly one"]),
    ("hierarchy unknown key", ["protect", "{req}"],
     HEAD + '[hierarchies.region]\ncolum = ["region"]\n' + GOOD_TABLE, ["colum", "columns"]),
    ("hierarchy of no dimension", ["protect", "{req}"],
     HEAD + '[hierarchies.regoin]\ncolumns = ["region"]\n' + GOOD_TABLE, ["regoin", "not a dimension"]),
    ("threshold string", ["protect", "{req}"], HEAD + GOOD_TABLE + 'threshold = "abc"\n', ["threshold", "number"]),
    ("threshold negative", ["protect", "{req}"], HEAD + GOOD_TABLE + "threshold = -1\n", ["threshold", "at least 0"]),
    ("threshold nan", ["protect", "{req}"], HEAD + GOOD_TABLE + "threshold = nan\n", ["threshold", "finite"]),
    ("null_code number", ["protect", "{req}"], HEAD + GOOD_TABLE + "null_code = 5\n", ["null_code", "string"]),
    ("sums without magnitude", ["protect", "{req}"], HEAD + GOOD_TABLE + 'sums = ["income"]\n', ["sums", "[magnitude]"]),
    ("magnitude without sums", ["protect", "{req}"], HEAD + MAGNITUDE + GOOD_TABLE, ["[magnitude]", "no such table"]),
    ("sums unknown column", ["protect", "{req}"], HEAD + MAGNITUDE + GOOD_TABLE + 'sums = ["incom"]\n',
     ["sums", "'incom'"]),
    ("sums not a list", ["protect", "{req}"], HEAD + MAGNITUDE + GOOD_TABLE + 'sums = "income"\n', ["sums", "list"]),
    ("null_sums bad", ["protect", "{req}"], HEAD + MAGNITUDE + GOOD_TABLE + 'sums = ["income"]\nnull_sums = "skip"\n',
     ["null_sums", "omit"]),
    ("magnitude q below 1", ["protect", "{req}"], HEAD + MAGNITUDE + "q = 0.5\n" + GOOD_TABLE + 'sums = ["income"]\n',
     ["magnitude.q", "at least 1"]),
    ("magnitude fp zero", ["protect", "{req}"], HEAD + MAGNITUDE.replace("fp = 1000", "fp = 0") + GOOD_TABLE
     + 'sums = ["income"]\n', ["[magnitude]", "fp"]),
    ("magnitude top_k 7", ["protect", "{req}"], HEAD + MAGNITUDE + "top_k = 7\n" + GOOD_TABLE + 'sums = ["income"]\n',
     ["magnitude.top_k", "6"]),
    ("magnitude epsilon increasing", ["protect", "{req}"], HEAD + MAGNITUDE + "epsilon = [1, 0.2, 0.5]\n" + GOOD_TABLE
     + 'sums = ["income"]\n', ["[magnitude]", "epsilon"]),
    ("magnitude count p-table file", ["protect", "{req}"],
     HEAD + MAGNITUDE.replace("maximum_entropy = { D = 10, V = 3, step = 2, icat = [1, 5, 10] }", 'file = "adir"')
     + GOOD_TABLE + 'sums = ["income"]\n', ["[magnitude]", "adir"]),
    ("rules unknown key", ["protect", "{req}"], HEAD + MAGNITUDE + "[rules]\np_percnt = 10\n" + GOOD_TABLE
     + 'sums = ["income"]\n', ["p_percnt", "p_percent"]),
    ("rules dominance bad", ["protect", "{req}"], HEAD + MAGNITUDE + "[rules]\ndominance = [[0, 80]]\n" + GOOD_TABLE
     + 'sums = ["income"]\n', ["[rules]", "dominance n"]),
    ("rules holding unknown", ["protect", "{req}"], HEAD + MAGNITUDE + '[rules]\np_percent = 10\nholding = "firm"\n'
     + GOOD_TABLE + 'sums = ["income"]\n', ["holding", "'firm'"]),
    ("ptable missing", ["protect", "{req}"], GOOD_TABLE, ["ptable"]),
    ("ptable both sources", ["protect", "{req}"],
     '[ptable]\nfile = "p.csv"\nmaximum_entropy = { D = 3, V = 1 }\n' + GOOD_TABLE, ["exactly one"]),
    ("maximum_entropy unknown key", ["protect", "{req}"],
     "[ptable]\nmaximum_entropy = { D = 5, V = 3, jss = 2 }\n" + GOOD_TABLE, ["jss", "js"]),
    ("maximum_entropy D string", ["protect", "{req}"],
     '[ptable]\nmaximum_entropy = { D = "5", V = 3 }\n' + GOOD_TABLE, ["ptable.maximum_entropy.D", "integer"]),
    ("maximum_entropy V missing", ["protect", "{req}"], "[ptable]\nmaximum_entropy = { D = 5 }\n" + GOOD_TABLE,
     ["'V'"]),
    ("ptable format unknown", ["protect", "{req}"], '[ptable]\nfile = "ptable.csv"\nformat = "argus"\n' + GOOD_TABLE,
     ["format", "tauargus"]),
    ("ptable file missing", ["protect", "{req}"], '[ptable]\nfile = "missing.csv"\n' + GOOD_TABLE,
     ["missing.csv", "does not exist"]),
    ("ptable file a folder", ["protect", "{req}"], '[ptable]\nfile = "adir"\n' + GOOD_TABLE, ["adir", "folder"]),
    ("ptable file binary", ["protect", "{req}"], '[ptable]\nfile = "binary.csv"\n' + GOOD_TABLE, ["binary.csv"]),
    ("hrc missing", ["protect", "{req}"], HEAD + '[hierarchies.region]\nhrc = "nope.hrc"\n' + GOOD_TABLE,
     ["nope.hrc", "does not exist"]),
    ("parent_child missing", ["protect", "{req}"],
     HEAD + '[hierarchies.region]\nparent_child = "nope.csv"\n' + GOOD_TABLE, ["nope.csv", "parent_child"]),
    ("parent_child binary", ["protect", "{req}"],
     HEAD + '[hierarchies.region]\nparent_child = "binary.csv"\n' + GOOD_TABLE, ["binary.csv"]),
    ("table name with slash", ["protect", "{req}"],
     HEAD + '[[tables]]\nname = "../escaped"\nsource = "persons"\ndims = ["sex"]\n', ["../escaped", "plain name"]),
    ("table name hidden", ["protect", "{req}"],
     HEAD + '[[tables]]\nname = ".hidden"\nsource = "persons"\ndims = ["sex"]\n', [".hidden"]),
    ("table name too long", ["protect", "{req}"],
     HEAD + f'[[tables]]\nname = "{"x" * 300}"\nsource = "persons"\ndims = ["sex"]\n', ["bytes long", "shorter"]),
    ("table names twice", ["protect", "{req}"], HEAD + GOOD_TABLE + GOOD_TABLE, ["more than once"]),
    ("unknown source table", ["protect", "{req}"],
     HEAD + '[[tables]]\nname = "t"\nsource = "people"\ndims = ["sex"]\n', ["people"]),
    ("unknown dimension", ["protect", "{req}"],
     HEAD + '[[tables]]\nname = "t"\nsource = "persons"\ndims = ["gender"]\n', ["gender"]),
    ("second table fails", ["protect", "{req}"],
     HEAD + GOOD_TABLE + '[[tables]]\nname = "u"\nsource = "persons"\ndims = ["nope"]\n', ["nope"]),
    ("weight not numeric", ["protect", "{req}"], HEAD + GOOD_TABLE + 'weight = "municipality"\n', ["municipality", "numeric"]),
    ("record keys as weight", ["protect", "{req}"], HEAD + GOOD_TABLE + 'weight = "rkey"\n', ["rkey", "secret"]),
    ("record keys as dimension", ["protect", "{req}"],
     HEAD + '[[tables]]\nname = "t"\nsource = "persons"\ndims = ["rkey"]\n', ["rkey", "secret"]),
    ("threshold beyond floats", ["protect", "{req}"], HEAD + GOOD_TABLE + "threshold = 1" + "0" * 400 + "\n",
     ["threshold", "finite"]),
    ("table name with newline", ["protect", "{req}"],
     HEAD + '[[tables]]\nname = "a\\nb"\nsource = "persons"\ndims = ["sex"]\n', ["control"]),
    ("out under /proc", ["protect", "{req}", "--out", "/proc/protab_out"], HEAD + GOOD_TABLE, ["cannot write"]),
    ("request missing", ["protect", "{root}/nope.toml"], None, ["nope.toml"]),
    ("request a folder", ["protect", "{root}/adir"], None, ["adir", "folder"]),
    ("request binary", ["protect", "{root}/binary.csv"], None, ["binary.csv"]),
    ("request not toml", ["protect", "{req}"], "this is = = not toml\n", ["cannot read the request"]),
    ("out is a file", ["protect", "{req}", "--out", "{root}/a_file"], HEAD + GOOD_TABLE, ["a_file", "not a folder"]),
    ("out too long", ["protect", "{req}", "--out", "{root}/" + "d" * 5000], HEAD + GOOD_TABLE, ["too long"]),
    ("database missing", ["protect", "{req}", "--db", "{root}/none.duckdb"], HEAD + GOOD_TABLE,
     ["none.duckdb", "does not exist"]),
    ("database a folder", ["protect", "{req}", "--db", "{root}/adir"], HEAD + GOOD_TABLE, ["adir", "folder"]),
    # -- keys
    ("seed env unset", ["keys", "persons", "--db", "{db}", "--id", "pid", "--seed-env", "PROTAB_NO_SUCH_VAR",
                        "--name", "k2"], None, ["PROTAB_NO_SUCH_VAR"]),
    ("seed file missing", ["keys", "persons", "--db", "{db}", "--id", "pid", "--seed-file", "{root}/nope",
                           "--name", "k2"], None, ["seed file", "does not exist"]),
    ("seed file empty", ["keys", "persons", "--db", "{db}", "--id", "pid", "--seed-file", "{root}/empty_seed",
                         "--name", "k2"], None, ["seed file", "empty"]),
    ("seed file a folder", ["keys", "persons", "--db", "{db}", "--id", "pid", "--seed-file", "{root}/adir",
                            "--name", "k2"], None, ["seed file", "folder"]),
    ("two seeds", ["keys", "persons", "--db", "{db}", "--id", "pid", "--seed-file", "{root}/empty_seed",
                   "--seed-env", "HOME", "--name", "k2"], None, ["once"]),
    ("no seed", ["keys", "persons", "--db", "{db}", "--id", "pid", "--name", "k2"], None, ["--seed-env"]),
    ("bits zero", ["keys", "persons", "--db", "{db}", "--id", "pid", "--seed-env", "HOME", "--bits", "0",
                   "--name", "k2"], None, ["bits"]),
    ("bits 33", ["keys", "persons", "--db", "{db}", "--id", "pid", "--seed-env", "HOME", "--bits", "33",
                 "--name", "k2"], None, ["bits"]),
    ("keys unknown table", ["keys", "people", "--db", "{db}", "--id", "pid", "--seed-env", "HOME"], None,
     ["people"]),
    ("keys unknown id", ["keys", "persons", "--db", "{db}", "--id", "person_id", "--seed-env", "HOME",
                         "--name", "k2"], None, ["person_id"]),
    ("keys column taken", ["keys", "persons", "--db", "{db}", "--id", "pid", "--seed-env", "HOME"], None,
     ["rkey", "--replace"]),
    ("keys two modes", ["keys", "persons", "--db", "{db}", "--id", "pid", "--seed-env", "HOME",
                        "--record-key-column", "rkey", "--name", "k2"], None, ["not both"]),
    ("keys replace a data column", ["keys", "persons", "--db", "{db}", "--record-key-column", "rkey",
                                    "--name", "sex", "--replace"], None, ["sex", "data"]),
    ("generate under /proc", ["ptable", "generate", "--D", "3", "--V", "1", "--out", "/proc/p.csv"], None,
     ["cannot write"]),
    ("keys decimals without existing keys", ["keys", "persons", "--db", "{db}", "--id", "pid", "--seed-env", "HOME",
                                             "--decimals", "8", "--name", "k2"], None, ["--decimals", "--record-key-column"]),
    ("keys database missing", ["keys", "persons", "--db", "{root}/none.duckdb", "--id", "pid",
                               "--seed-env", "HOME"], None, ["none.duckdb"]),
    # -- ptable
    ("install bits zero", ["ptable", "install", "{root}/p.csv", "--db", "{db}", "--bits", "0"], None, ["--bits"]),
    ("install decimals zero", ["ptable", "install", "{root}/p.csv", "--db", "{db}", "--decimals", "0"], None,
     ["--decimals"]),
    ("install no modulus", ["ptable", "install", "{root}/p.csv", "--db", "{db}"], None, ["--table"]),
    ("install two moduli", ["ptable", "install", "{root}/p.csv", "--db", "{db}", "--bits", "8",
                            "--table", "persons"], None, ["exactly one"]),
    ("install file missing", ["ptable", "install", "{root}/nope.csv", "--db", "{db}", "--bits", "8"], None,
     ["nope.csv", "does not exist"]),
    ("install file a folder", ["ptable", "install", "{root}/adir", "--db", "{db}", "--bits", "8"], None,
     ["adir", "folder"]),
    ("convert source missing", ["ptable", "convert", "{root}/nope.csv", "{out}.txt"], None, ["nope.csv"]),
    ("convert source binary", ["ptable", "convert", "{root}/binary.csv", "{out}.txt"], None, ["binary.csv"]),
    ("generate ons bits zero", ["ptable", "generate", "--D", "3", "--V", "1", "--out", "{out}.csv",
                                "--format", "ons", "--bits", "0"], None, ["--bits"]),
    ("show missing", ["ptable", "show", "{root}/nope.csv"], None, ["nope.csv", "does not exist"]),
    # -- demo, register, tables
    ("demo would replace", ["demo", "--persons", "10", "--db", "{db}", "--out", "{out}"], None,
     ["persons", "--replace"]),
    ("demo no persons", ["demo", "--persons", "0", "--db", "{root}/new.duckdb", "--out", "{out}"], None,
     ["--persons"]),
    ("register missing file", ["register", "x", "{root}/nope.parquet", "--db", "{db}"], None, ["nope.parquet"]),
    ("register unknown format", ["register", "x", "{root}/noncsv.bin", "--db", "{db}"], None, ["noncsv.bin"]),
    ("register name taken", ["register", "persons", "{root}/noncsv.txt", "--db", "{db}"], None,
     ["persons", "--replace"]),
    ("tables database missing", ["tables", "--db", "{root}/none.duckdb"], None, ["none.duckdb"]),
    # -- numeric (magnitude) p-tables
    ("generate numeric without icat", ["ptable", "generate", "--numeric", "--D", "10", "--V", "3",
                                       "--out", "{out}.csv"], None, ["--numeric", "--icat"]),
    ("generate numeric icat without D", ["ptable", "generate", "--numeric", "--D", "10", "--V", "3",
                                         "--icat", "1", "5", "--out", "{out}.csv"], None, ["icat", "1 and D"]),
    ("generate numeric icat without 1", ["ptable", "generate", "--numeric", "--D", "10", "--V", "3",
                                         "--icat", "5", "10", "--out", "{out}.csv"], None, ["icat", "1 and D"]),
    ("generate numeric D times step 50", ["ptable", "generate", "--numeric", "--D", "25", "--V", "3", "--step", "2",
                                          "--icat", "1", "25", "--out", "{out}.csv"], None, ["D * step", "50"]),
    ("generate numeric unknown type", ["ptable", "generate", "--numeric", "--D", "10", "--V", "3", "--icat", "1",
                                       "10", "--type", "both", "--out", "{out}.csv"], None,
     ["--type", "even, odd, small_cells"]),
    ("generate icat without numeric", ["ptable", "generate", "--D", "3", "--V", "1", "--icat", "1", "3",
                                       "--out", "{out}.csv"], None, ["--icat", "add --numeric"]),
    ("generate numeric mono not boolean", ["ptable", "generate", "--numeric", "--D", "10", "--V", "3", "--icat", "1",
                                           "10", "--mono", "yes", "--out", "{out}.csv"], None,
     ["--mono", "true or false"]),
    ("generate numeric mono per class", ["ptable", "generate", "--numeric", "--D", "10", "--V", "3", "--icat", "1",
                                         "5", "10", "--mono", "true", "false", "--out", "{out}.csv"], None,
     ["--mono", "one per class"]),
    ("generate numeric optim 5", ["ptable", "generate", "--numeric", "--D", "10", "--V", "3", "--icat", "1", "10",
                                  "--optim", "5", "--out", "{out}.csv"], None, ["optim", "1, 2, 3 or 4"]),
    ("generate numeric with js", ["ptable", "generate", "--numeric", "--D", "10", "--V", "3", "--icat", "1", "10",
                                  "--js", "2", "--out", "{out}.csv"], None, ["--js", "count"]),
    ("generate numeric ons", ["ptable", "generate", "--numeric", "--D", "10", "--V", "3", "--icat", "1", "10",
                              "--format", "ons", "--out", "{out}.csv"], None, ["ons", "count"]),
    ("show numeric given a count file", ["ptable", "show",
                                         str(Path(__file__).resolve().parents[1] / "data" / "ptable_R_D5_V3_js2.csv"),
                                         "--numeric"], None, ["is a count p-table", "--numeric"]),
    ("convert numeric given a count file", ["ptable", "convert",
                                            str(Path(__file__).resolve().parents[1] / "data" / "ptable_R_D5_V3_js2.csv"),
                                            "{out}.txt", "--numeric"], None, ["is a count p-table", "--numeric"]),
    ("show numeric from ons", ["ptable", "show", str(Path(__file__).resolve().parents[1] / "data" / "ptable_num" / "all.csv"),
                               "--numeric", "--from", "ons"], None, ["--from ons", "count"]),
    ("install a numeric file", ["ptable", "install", str(Path(__file__).resolve().parents[1] / "data" / "ptable_num" / "all.csv"),
                                "--db", "{db}", "--bits", "8"], None, ["numeric (magnitude)", "takes count p-tables"]),
    ("convert numeric to ons", ["ptable", "convert", str(Path(__file__).resolve().parents[1] / "data" / "ptable_num" / "all.csv"),
                                "{out}.txt", "--to", "ons"], None, ["ons", "numeric (magnitude)"]),
    ("show numeric png", ["ptable", "show", str(Path(__file__).resolve().parents[1] / "data" / "ptable_num" / "all.csv"),
                          "--reveal-parameters", "--png", "{out}.txt"], None, ["--png", "numeric (magnitude)"]),
    ("show png without reveal", ["ptable", "show", str(Path(__file__).resolve().parents[1] / "data" / "ptable_R_D5_V3_js2.csv"),
                                 "--png", "{out}.png"], None, ["--png", "--reveal-parameters"]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gives_a_clear_error_and_writes_nothing(case, base, tmp_path, capsys):
    name, argv, body, fragments = case
    db = base / "census.duckdb"
    req = tmp_path / "request.toml"
    if body is not None:
        req.write_text(f'database = "{db.as_posix()}"\n' + body if "database" not in body else body)
        for f in ("ptable.csv", "binary.csv", "adir"):
            if not (tmp_path / f).exists():
                os.symlink(base / f, tmp_path / f)
    out = tmp_path / "out"
    words = {"db": str(db), "req": str(req), "out": str(out), "root": str(base)}
    args = [a.format(**words) for a in argv]
    if args[0] == "protect" and "--out" not in args:
        args += ["--out", str(out)]
    before = _db_state(db)
    capsys.readouterr()
    rc = cli.main(args)
    err = capsys.readouterr().err
    assert rc == 2, f"{name}: exit {rc}, stderr {err!r}"
    assert err.splitlines()[-1].startswith("protab: error: ") and "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, f"{name}: {fragment!r} not in {err!r}"
    assert not out.exists() and not Path(f"{out}.txt").exists() and not Path(f"{out}.csv").exists()
    assert [p.name for p in tmp_path.iterdir() if ".protab-" in p.name] == []
    assert _db_state(db) == before
    assert "catalogue-seed" not in err


def test_the_catalogue_is_long_enough():
    assert len(CASES) >= 60
