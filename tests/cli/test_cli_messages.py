"""The command line's messages and help say what is true: the keys hint is a whole `protab keys`
command, reserved names are refused before any work, linked suppressed tables name the real
conflict, the summary shows the measures that apply, and the help says what protect does and how
p-table parameters are treated."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import protab as pt
from protab import cli


@pytest.fixture()
def db(tmp_path, persons):
    path = tmp_path / "m.duckdb"
    with pt.Session(str(path)) as s:
        s.register("persons", persons)
        s.register("plain", persons)  # no record keys
        s.add_record_keys("persons", id_column="pid", seed="cli-messages-seed")
    return path


def _request(tmp_path, db, body: str) -> str:
    (tmp_path / "r.toml").write_text(f'database = "{db.as_posix()}"\n' + body, encoding="utf-8")
    return str(tmp_path / "r.toml")


CKM = '[ptable]\nmaximum_entropy = { D = 3, V = 1 }\n'


def test_the_keys_hint_is_a_whole_command_line(tmp_path, db, capsys):
    req = _request(tmp_path, db, CKM + '[[tables]]\nname = "t"\nsource = "plain"\ndims = ["sex"]\n')
    assert cli.main(["protect", req]) == 2
    err = capsys.readouterr().err
    assert "`protab keys plain --id ID_COLUMN --seed-env VAR`" in err
    assert "id_column=" not in err and "Session." not in err and "`protab keys`(" not in err


@pytest.mark.parametrize("name", ["protab_published", "protab_catalog", "PROTAB_Catalog"])
def test_publish_refuses_the_names_of_its_catalogue_before_any_work(tmp_path, db, capsys, name):
    req = _request(tmp_path, db, CKM + f'[[tables]]\nname = "{name}"\nsource = "persons"\ndims = ["sex"]\n')
    assert cli.main(["publish", req, "--to", str(tmp_path / "p.duckdb")]) == 2
    err = capsys.readouterr().err
    assert "is taken" in err and "protecting" not in err  # refused before any table was protected
    assert not (tmp_path / "p.duckdb").exists()


def test_publish_refuses_names_that_differ_only_in_case(tmp_path, db, capsys):
    body = CKM + "".join(f'[[tables]]\nname = "{n}"\nsource = "persons"\ndims = ["sex"]\n' for n in ("T", "t"))
    assert cli.main(["publish", _request(tmp_path, db, body), "--to", str(tmp_path / "p.duckdb")]) == 2
    assert "differ only in case" in capsys.readouterr().err


def test_a_count_and_a_sums_table_suppressed_together_name_sums_as_the_conflict(tmp_path, db, capsys):
    body = ('[[tables]]\nname = "counts"\nsource = "persons"\ndims = ["sex"]\nmethod = "suppression"\n'
            'min_frequency = 3\n'
            '[[tables]]\nname = "incomes"\nsource = "persons"\ndims = ["age"]\nmethod = "suppression"\n'
            'sums = ["income"]\n[rules]\np_percent = 10\n')
    assert cli.main(["protect", _request(tmp_path, db, body)]) == 2
    err = capsys.readouterr().err
    assert "agree on sums" in err and "'counts' has none" in err and "'incomes' has ['income']" in err
    assert "min_frequency" not in err


def test_suppressed_tables_summarise_their_suppression_never_nan(tmp_path, capsys):
    rng = np.random.default_rng(5)
    frame = pl.DataFrame({"region": rng.choice(["a", "b", "c", "d"], 60, p=[.5, .3, .15, .05]),
                          "sex": rng.choice(["F", "M"], 60)})
    db = tmp_path / "s.duckdb"
    with pt.Session(str(db)) as s:
        s.register("t", frame)
    body = '[[tables]]\nname = "rs"\nsource = "t"\ndims = ["region", "sex"]\nmethod = "suppression"\nmin_frequency = 4\n'
    capsys.readouterr()
    rows = cli.protect(_request(tmp_path, db, body))
    out = capsys.readouterr().out
    assert "nan" not in out.lower() and "suppressed" in out and "of the value" in out
    published = pl.read_csv(tmp_path / "protab_output" / "rs.csv", schema_overrides={"n": pl.Int64})
    with pt.Session(str(db)) as s:
        original = s.tabulate("t", pt.TableSpec(["region", "sex"]))
    j = original.join(published, on=["region", "sex"], suffix="_pub")
    gone = j["n_pub"].is_null()
    assert rows[0]["changed"] == pytest.approx(gone.mean())
    assert rows[0]["suppressed_value_share"] == pytest.approx(j.filter(gone)["n"].sum() / j["n"].sum())
    assert 0 < rows[0]["suppressed_value_share"] < 1
    assert not any(isinstance(v, float) and math.isnan(v) for v in rows[0].values())


def test_help_says_what_protect_does_and_how_ptable_parameters_are_kept(capsys):
    with pytest.raises(SystemExit):
        cli.main(["protect", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "cell suppression" in text and "record swapping" in text and "magnitudes" in text
    with pytest.raises(SystemExit):
        cli.main(["ptable", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "prints them, with the rows they can be read off from, only with --reveal-parameters" in text
    assert "not to be published" in text


def test_an_infeasible_variance_is_refused_and_the_cli_offers_its_option(tmp_path, capsys):
    out = tmp_path / "p.csv"
    assert cli.main(["ptable", "generate", "--D", "5", "--V", "3", "--js", "3", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--infeasible warn" in err and "infeasible='warn'" not in err and not out.exists()
    assert cli.main(["ptable", "generate", "--D", "5", "--V", "3", "--js", "3", "--out", str(out),
                     "--infeasible", "warn"]) == 0
    assert out.exists() and "variance target was not met" in capsys.readouterr().err
    (tmp_path / "r.toml").write_text(
        '[ptable]\nmaximum_entropy = { D = 5, V = 3, js = 3 }\n'
        '[[tables]]\nname = "t"\nsource = "persons"\ndims = ["sex"]\n', encoding="utf-8")
    (tmp_path / "protab.duckdb").touch()
    assert cli.main(["protect", str(tmp_path / "r.toml")]) == 2
    assert "[ptable] of the request" in capsys.readouterr().err
