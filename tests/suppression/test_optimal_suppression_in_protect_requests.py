"""A protect request asks for the optimal mode per table (suppression_method = "optimal",
suppression_cost, time_limit): its suppressed cells are those of Session.suppress(method="optimal"),
and the keys belong to method = "suppression"."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import protab as pt

DATA = Path(__file__).resolve().parents[1] / "data" / "gauss_rules"
TABLE = ('[[tables]]\nname = "acc"\nsource = "acc"\ndims = ["mun", "inj"]\nmethod = "suppression"\n'
         'min_frequency = 4\nfreq = "freq"\n')


def _request(tmp_path: Path, body: str, capsys) -> tuple[int, str]:
    from protab import cli

    db = tmp_path / "s.duckdb"
    with pt.Session(str(db)) as s:
        s.register("acc", pl.read_csv(DATA / "inputs" / "mun_accidents.csv"))
    (tmp_path / "req.toml").write_text(f'database = "{db.as_posix()}"\n' + body)
    capsys.readouterr()
    rc = cli.main(["protect", str(tmp_path / "req.toml")])
    return rc, capsys.readouterr().err


def test_a_request_suppresses_the_optimal_pattern(tmp_path, capsys):
    rc, err = _request(tmp_path, TABLE + 'suppression_method = "optimal"\nsuppression_cost = "cells"\n'
                       "time_limit = 300\n", capsys)
    assert rc == 0, err
    out = pl.read_csv(tmp_path / "protab_output" / "acc.csv", schema_overrides={"mun": pl.String, "inj": pl.String})
    with pt.Session(":memory:") as s:
        s.register("acc", pl.read_csv(DATA / "inputs" / "mun_accidents.csv"))
        ref = s.suppress("acc", pt.TableSpec(["mun", "inj"], freq="freq"), min_frequency=4, method="optimal",
                         cost="cells")
        gauss = s.suppress("acc", pt.TableSpec(["mun", "inj"], freq="freq"), min_frequency=4)
    j = ref.join(out, on=["mun", "inj"], suffix="_out")
    assert j.height == ref.height
    assert ((j["suppressed"] != "no") == j["n_out"].is_null()).all()
    assert (ref["suppressed"] != "no").sum() <= (gauss["suppressed"] != "no").sum()


def test_a_request_suppresses_the_modular_pattern(tmp_path, capsys):
    rc, err = _request(tmp_path, TABLE + 'suppression_method = "modular"\nsuppression_cost = "cells"\n', capsys)
    assert rc == 0, err
    out = pl.read_csv(tmp_path / "protab_output" / "acc.csv", schema_overrides={"mun": pl.String, "inj": pl.String})
    with pt.Session(":memory:") as s:
        s.register("acc", pl.read_csv(DATA / "inputs" / "mun_accidents.csv"))
        ref = s.suppress("acc", pt.TableSpec(["mun", "inj"], freq="freq"), min_frequency=4, method="modular",
                         cost="cells")
    assert ref["protected"].all()
    j = ref.join(out, on=["mun", "inj"], suffix="_out")
    assert j.height == ref.height
    assert ((j["suppressed"] != "no") == j["n_out"].is_null()).all()


@pytest.mark.parametrize("body, message", [
    (TABLE + 'suppression_method = "best"\n', "suppression_method"),
    (TABLE.replace('method = "suppression"\n', "").replace("min_frequency = 4\n", "").replace('freq = "freq"\n', "")
     + 'suppression_method = "optimal"\n', "belongs to method"),
])
def test_a_request_with_bad_optimal_keys_is_refused(tmp_path, capsys, body, message):
    rc, err = _request(tmp_path, body, capsys)
    assert rc == 2 and message in err, err
    assert not (tmp_path / "protab_output").exists()
