"""A small keyed census for the tests of custom groups' differencing rule, where the counts of
every age are known: ages 0 to 97 have 40 persons each, age 98 has 2 (the cell the attacks of
the review try to isolate), age 99 has 30; five-year age bands ``00-04`` .. ``95-99``; two
regions of two municipalities, sex and municipality independent within each age. Every person
of ages 95 to 99 lives in R1-a (so those ages have no record elsewhere: the empty parts of the
zero policy).

Datasets over the one table: ``persons`` (age a hierarchy agegroup > age, municipality one of
region > municipality), ``flat`` (age without bands: only the total above it) and ``lenient``
(as persons, with ``group_zero_atoms = "allow"``). The minimum (``min_population``, so also the
groups' minimum difference) is 10; the p-table moves a count by at most 5.
"""

from __future__ import annotations

from pathlib import Path

import serve_fixtures as F

import protab as pt

AGES = [str(a) for a in range(100)]
BANDS = [f"{a:02d}-{a + 4:02d}" for a in range(0, 100, 5)]
MUNICIPALITIES = [["R1", "R1-a"], ["R1", "R1-b"], ["R2", "R2-a"], ["R2", "R2-b"]]
PER_AGE = {**{a: 40 for a in range(98)}, 98: 2, 99: 30}
LEAST = 10


def band(age: int) -> str:
    return BANDS[age // 5]


def ages(lo: int, hi: int) -> list[str]:
    """The codes of ages lo to hi, both included."""
    return [str(a) for a in range(lo, hi + 1)]


def build(folder: Path, **overrides: object) -> tuple[Path, str]:
    """The database and serve.toml in ``folder``; returns (config path, database)."""
    db = str(folder / "census.duckdb")
    with pt.Session(db) as s:
        s.con.execute(
            """CREATE TABLE persons AS
            WITH ages AS (SELECT a AS age, CASE WHEN a < 98 THEN 40 WHEN a = 98 THEN 2 ELSE 30 END AS n
                          FROM range(100) t(a)),
            people AS (SELECT age, i FROM ages, range(n) r(i))
            SELECT row_number() OVER (ORDER BY age, i) AS pid, CAST(age AS VARCHAR) AS age,
                   CASE WHEN age >= 95 THEN 'R1-a' ELSE ['R1-a', 'R1-b', 'R2-a', 'R2-b'][i % 4 + 1] END AS municipality,
                   CASE WHEN i // 4 % 2 = 0 THEN 'F' ELSE 'M' END AS sex
            FROM people"""
        )
        s.con.execute("ALTER TABLE persons ADD COLUMN region VARCHAR")
        s.con.execute("UPDATE persons SET region = substr(municipality, 1, 2)")
        s.con.execute("ALTER TABLE persons ADD COLUMN agegroup VARCHAR")
        s.con.execute("UPDATE persons SET agegroup = lpad(CAST(CAST(age AS INTEGER) // 5 * 5 AS VARCHAR), 2, '0') "
                      "|| '-' || lpad(CAST(CAST(age AS INTEGER) // 5 * 5 + 4 AS VARCHAR), 2, '0')")
        s.add_record_keys("persons", id_column="pid", seed=F.SEED)
    top = {"database": db, "audit_log": "audit.jsonl", "threshold": 3, "min_population": LEAST, "max_cells": 5000,
           "sessions": 2, "threads": 1, "requests_per_minute": 0, **overrides}
    age_rows = [[band(a), str(a)] for a in range(100)]
    hier = '{ municipality = ["region", "municipality"], age = ["agegroup", "age"] }'
    lines = [f"{k} = {F._toml_value(v)}" for k, v in top.items()]
    lines += ["[ptable]", f"maximum_entropy = {F._toml_value(F.PTABLE)}"]
    for name, rows, hierarchies in (("persons", age_rows, hier), ("lenient", age_rows, hier),
                                    ("flat", AGES, '{ municipality = ["region", "municipality"] }')):
        dims = '["region", "municipality", "sex", "agegroup", "age"]' if name != "flat" else \
            '["region", "municipality", "sex", "age"]'
        lines += [f"[datasets.{name}]", 'table = "persons"', f"dims = {dims}", f"hierarchies = {hierarchies}",
                  f"codes = {F._toml_value({'municipality': MUNICIPALITIES, 'sex': ['F', 'M'], 'age': rows})}"]
        if name == "lenient":
            lines += [f"[datasets.{name}.rules]", 'group_zero_atoms = "allow"']
    for user in ("bob", "alice", "carol"):
        lines += [f"[users.{user}]", 'datasets = ["persons", "flat", "lenient"]']
    config = folder / "serve.toml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return config, db
