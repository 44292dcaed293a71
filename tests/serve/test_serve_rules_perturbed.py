"""The per-area minimum population (disclosure rule area.min_population) decides on the areas'
*perturbed* totals, the values the service publishes, never on exact counts (a verdict from
exact counts would tell, without noise, which side of the threshold an area is): with the
threshold set between an area's exact and perturbed totals, the perturbed one decides."""

from __future__ import annotations

import polars as pl
import serve_fixtures as F

import protab as pt
from protab.serve.broker import Broker
from protab.serve.config import load_config


def test_withheld_areas_follow_the_perturbed_totals(tmp_path):
    db = F.build_database(tmp_path / "micro.duckdb")
    towns = [c for _, c in F.PERSONS_CODES["municipality"]]
    with pt.Session(db, read_only=True) as s:
        pert = s.cell_key("persons", pt.TableSpec({"municipality": towns}), pt.PTable.maximum_entropy(**F.PTABLE))
        exact = dict(s.sql("SELECT municipality, count(*) AS n FROM persons GROUP BY municipality").rows())
    pert = dict(pert.filter(pl.col("municipality_level") == 1).select("municipality", "n_pert").rows())
    moved = sorted((t for t in towns if pert[t] != exact[t]), key=lambda t: -abs(pert[t] - exact[t]))
    town = moved[0]  # noise moved its total; the threshold goes between its exact and perturbed totals
    least = max(pert[town], exact[town])
    config, _ = F.write_setup(tmp_path, db)
    config.write_text(F.config_text(db) + f"""
[datasets.persons.rules.area]
dim = "municipality"
min_population = {{ municipality = {least} }}
""", encoding="utf-8")
    broker = Broker(load_config(config))
    try:
        answer = broker.query("SELECT municipality, count(*) AS n FROM persons GROUP BY municipality",
                              broker.config.users["bob"])
    finally:
        broker.close()
    by_pert = sorted(t for t in towns if pert[t] < least)
    by_exact = sorted(t for t in towns if exact[t] < least)
    assert by_pert != by_exact  # the two verdicts differ at ``town``
    assert answer.withheld == ({"municipality": by_pert} if by_pert else {})
    assert sorted(answer.frame["municipality"]) == sorted(set(towns) - set(by_pert))
