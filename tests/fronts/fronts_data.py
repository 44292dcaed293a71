"""The one table asked of every front, and the canonical form its cells are compared in.

Microdata: the service tests' persons (tests/serve_fixtures.py, 3,000 records, keyed), with
region > municipality and agegroup > age as hierarchies, and ``sex`` missing (NULL) in one
record of 97. The tables (:data:`CASES`), with the count p-table of the fixtures and
``threshold = 3``: counts of municipality × age with every level and margin (the one
19-year-old gives cells that are blanked), and municipality × sex with the NULLs published as
the code ``U`` (``null_code``).

Canonical form of one front's answer: one column per dimension, ``n_pert``, ``flags``, all text;
a margin is ``Total`` (SDMX-CSV and JSON-stat write it ``_T``, docs/exchange.md, and are read
back to ``Total``); ``n_pert`` is the value as the front types it, cast to text (an integer
``12`` and a float ``12.0`` differ), empty when withheld; ``flags`` is ``OBS_STATUS/CONF_STATUS``
as docs/exchange.md defines them (a front without flags: ``A/F`` for a value, ``Q/C`` for a blank;
JSON-stat holds CONF_STATUS only, ``C`` meaning withheld); rows sorted. The form is written as
CSV and fronts are compared on those bytes.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from tests import serve_fixtures as F

PERSONS = 3000
NULL_CODE = "U"
#: the declared codes of sex on every front: ``X`` is held by no record (its cells are zeros)
SEX_CODES = ["F", "M", NULL_CODE, "X"]
GEO = ("region", "municipality")


@dataclass(frozen=True)
class Case:
    """One table: its name, per dimension the level columns it publishes (coarsest first; one
    column: flat; fewer than :data:`HIERARCHIES` holds: the hierarchy cut at its last one), an
    optional formula and null code."""

    name: str
    levels: dict[str, tuple[str, ...]]
    null_code: str | None = None
    formula: str | None = None

    @property
    def dims(self) -> tuple[str, ...]:
        return tuple(self.levels)

    @property
    def cut(self) -> dict[str, str]:
        """Dimension → the level column its hierarchy is cut at (published down to it only)."""
        return {d: c[-1] for d, c in self.levels.items() if d in HIERARCHIES and c != HIERARCHIES[d]}

    @property
    def flat_dims(self) -> list[str]:
        """The dimensions as a table of the records names them: a cut one by its level column."""
        return [self.cut.get(d, d) for d in self.dims]

    @property
    def flat_formula(self) -> str | None:
        """The formula as a table of the records names the dimensions (see :attr:`flat_dims`)."""
        formula = self.formula
        for d, c in self.cut.items():
            formula = formula and formula.replace(d, c)
        return formula

    @property
    def sql(self) -> str:
        """The SQL of the table: per term of the formula (or one of every dimension) a grouping
        set per combination of levels (none: the margin)."""
        terms = [t.split("*") for t in self.formula.replace(" ", "").split("+")] if self.formula else [self.dims]
        sets = dict.fromkeys(tuple(c for c in combo if c) for term in terms
                             for combo in itertools.product(*(("", *self.levels[d]) for d in term)))
        return (f"SELECT {', '.join(c for cs in self.levels.values() for c in cs)}, count(*) AS n FROM persons "
                "GROUP BY GROUPING SETS (" + ", ".join("(" + ", ".join(g) + ")" for g in sets) + ")")


CASES = {c.name: c for c in (
    Case("T", {"municipality": GEO, "age": ("agegroup", "age")}),
    Case("N", {"municipality": GEO, "sex": ("sex",)}, NULL_CODE),
    Case("F", {"municipality": GEO, "sex": ("sex",), "age": ("agegroup", "age")}, NULL_CODE,
         "municipality*sex + municipality*age"),
    Case("L", {"municipality": ("region",), "age": ("agegroup",)}),
)}
HIERARCHIES = {"municipality": GEO, "age": ("agegroup", "age")}
PTABLE = {"D": 5, "V": 2.71828, "js": 2}
THRESHOLD = 3
TOKEN = "tok-fronts-matrix-3c9e"
TOTAL = "Total"


def build_database(path: Path) -> str:
    """The service tests' persons, ``sex`` NULL in every 97th record."""
    db = F.build_database(path, persons=PERSONS)
    with duckdb.connect(db) as con:
        con.execute("UPDATE persons SET sex = NULL WHERE pid % 97 = 0")
    return db


def _ptable_toml() -> str:
    return f"maximum_entropy = {F._toml_value(PTABLE)}"


def _options(case: Case, flat: bool) -> str:
    """The null_code and formula lines of a protect (``flat``) or programme table."""
    formula = case.flat_formula if flat else case.formula
    return "".join(f'{k} = "{v}"\n' for k, v in (("null_code", case.null_code), ("formula", formula)) if v)


def write_request(folder: Path, db: str) -> Path:
    """The protect (and publish) request of the tables, every file format."""
    path = folder / "request.toml"
    hierarchies = "".join(f'[hierarchies.{d}]\ncolumns = {F._toml_value(list(c))}\n' for d, c in HIERARCHIES.items())
    (folder / "sex.csv").write_text("parent,child\n" + "".join(f"Total,{c}\n" for c in SEX_CODES), encoding="utf-8")
    hierarchies += '[hierarchies.sex]\nparent_child = "sex.csv"\n'
    tables = "".join(f"""[[tables]]
name = "{c.name}"
source = "persons"
dims = {F._toml_value(c.flat_dims)}
threshold = {THRESHOLD}
""" + _options(c, True) for c in CASES.values())
    path.write_text(f"""database = "{db}"
output = "protect_out"
formats = ["csv", "parquet", "sdmx-csv", "json-stat"]
[ptable]
{_ptable_toml()}
{hierarchies}{tables}""", encoding="utf-8")
    return path


def write_programme(folder: Path, db: str) -> Path:
    """The programme of one hypercube per table, every file format."""
    path = folder / "programme.toml"
    classifications = "".join(f'[classifications.{d}]\ncolumns = {F._toml_value(list(c))}\n'
                              for d, c in HIERARCHIES.items())
    classifications += f'[classifications.sex]\ncodes = {F._toml_value(SEX_CODES)}\n'
    cubes = "".join(f"""[[hypercubes]]
name = "HC{c.name}"
dims = {{ {", ".join(f'{d} = "{d}' + (f':{c.cut[d]}' if d in c.cut else '') + '"' for d in c.dims)} }}
[[hypercubes.tables]]
name = "{c.name}"
""" + _options(c, False) for c in CASES.values())
    path.write_text(f"""database = "{db}"
source = "persons"
output = "programme_out"
formats = ["csv", "parquet", "sdmx-csv", "json-stat"]
threshold = {THRESHOLD}
[ptable]
{_ptable_toml()}
{classifications}{cubes}""", encoding="utf-8")
    return path


def write_serve_config(folder: Path, db: str) -> Path:
    """serve.toml of one dataset (the persons with both hierarchies, NULLs as ``U``) and one user."""
    path = folder / "serve.toml"
    path.write_text(f"""database = "{db}"
audit_log = "audit.jsonl"
threshold = {THRESHOLD}
min_population = 1
sessions = 2
threads = 1
[ptable]
{_ptable_toml()}
[datasets.persons]
dims = ["region", "municipality", "sex", "agegroup", "age"]
hierarchies = {F._toml_value({d: list(c) for d, c in HIERARCHIES.items()})}
codes = {F._toml_value({**F.PERSONS_CODES, "sex": SEX_CODES})}
null_code = "{NULL_CODE}"
[users.ana]
datasets = ["persons"]
token_sha256 = "{hashlib.sha256(TOKEN.encode()).hexdigest()}"
""", encoding="utf-8")
    return path


# -- canonical forms (each of one case's table) -------------------------------------------------
def _finish(case: Case, frame: pl.DataFrame) -> bytes:
    """Sorted, as CSV bytes (a null written as an empty field)."""
    columns = [*case.dims, "n_pert", "flags"]
    return frame.select(columns).sort(columns, nulls_last=True).write_csv().encode()


def _named(case: Case, frame: pl.DataFrame, upper: bool = False) -> pl.DataFrame:
    """A table of the records' columns (a cut dimension named by its level column: protect,
    publish, Session) with the dimensions' names."""
    names = {(f.upper() if upper else f): (d.upper() if upper else d) for f, d in zip(case.flat_dims, case.dims)}
    return frame.rename({f: d for f, d in names.items() if f in frame.columns and d not in frame.columns})


def from_frame(case: Case, frame: pl.DataFrame) -> bytes:
    """A table as protect, publish, programme, Session and /v1/table give it: one column per
    dimension (margins as the front codes them), ``n_pert``; flags from the blanks."""
    blank = pl.col("n_pert").is_null()
    frame = _named(case, frame)
    return _finish(case, frame.select(
        *(pl.col(d).cast(pl.Utf8) for d in case.dims), pl.col("n_pert").cast(pl.Utf8),
        pl.when(blank).then(pl.lit("Q/C")).otherwise(pl.lit("A/F")).alias("flags")))


def from_csv(case: Case, data: bytes) -> bytes:
    return from_frame(case, pl.read_csv(io.BytesIO(data), infer_schema=False))


def from_sql(case: Case, columns: list[str], rows: list[list]) -> bytes:
    """An answer of the SQL fronts: the level columns, NULL where a grouping set aggregates; a
    cell's code is that of its finest level not aggregated (``Total`` when all are)."""
    frame = pl.DataFrame([[None if v is None else str(v) for v in r] for r in rows],
                         schema=[(c, pl.Utf8) for c in columns], orient="row")
    codes = [pl.coalesce(*(pl.col(c) for c in reversed(levels)), pl.lit(TOTAL)).alias(d)
             for d, levels in case.levels.items()]
    counts = pl.Series("n_pert", [r[columns.index("n")] for r in rows])
    return from_frame(case, frame.select(codes).with_columns(counts))


def from_sdmx_csv(case: Case, data: bytes) -> bytes:
    frame = _named(case, pl.read_csv(io.BytesIO(data), infer_schema=False), upper=True)
    codes = [pl.col(d.upper()).replace("_T", TOTAL).alias(d) for d in case.dims]
    flags = pl.concat_str(pl.col("OBS_STATUS"), pl.col("CONF_STATUS"), separator="/").alias("flags")
    return _finish(case, frame.select(*codes, pl.col("OBS_VALUE").alias("n_pert"), flags))


def from_json_stat(case: Case, data: bytes) -> bytes:
    """A JSON-stat 2.0 dataset: the positions that hold a value or a status (row-major, the last
    dimension fastest)."""
    ds = json.loads(data)
    assert [d.lower() for d in ds["id"]] in (list(case.dims), case.flat_dims), ds["id"]
    index = [ds["dimension"][d]["category"]["index"] for d in ds["id"]]
    value, status = ds["value"], ds.get("status") or {}
    if isinstance(value, list):
        value = {str(k): v for k, v in enumerate(value)}
    if isinstance(status, list):
        status = {str(k): s for k, s in enumerate(status) if s is not None}
    positions = sorted({int(k) for k in value if value[k] is not None} | {int(k) for k in status})
    at = np.unravel_index(np.array(positions, dtype=np.int64), ds["size"])
    frame = pl.DataFrame({
        **{d: np.array(codes, dtype=object)[k].tolist() for d, codes, k in zip(case.dims, index, at)},
        "n_pert": [value.get(str(p)) for p in positions], "status": [status.get(str(p)) for p in positions]},
        schema_overrides={"status": pl.Utf8})
    flags = (pl.when(pl.col("status") == "C").then(pl.lit("Q/C"))
             .when(pl.col("status").is_null()).then(pl.lit("A/F")).otherwise(pl.col("status")))
    return _finish(case, frame.select(*(pl.col(d).replace("_T", TOTAL) for d in case.dims),
                                      pl.col("n_pert").cast(pl.Utf8), flags.alias("flags")))
