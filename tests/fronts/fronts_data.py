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
import polars as pl

from tests import serve_fixtures as F

PERSONS = 3000
NULL_CODE = "U"
GEO = ("region", "municipality")


@dataclass(frozen=True)
class Case:
    """One table: its name, and per dimension the level columns of its hierarchy (coarsest first;
    one column: flat)."""

    name: str
    levels: dict[str, tuple[str, ...]]
    null_code: str | None = None

    @property
    def dims(self) -> tuple[str, ...]:
        return tuple(self.levels)

    @property
    def sql(self) -> str:
        """The SQL of the table: a grouping set per combination of levels (none: the margin)."""
        sets = itertools.product(*(("", *c) for c in self.levels.values()))
        return (f"SELECT {', '.join(c for cs in self.levels.values() for c in cs)}, count(*) AS n FROM persons "
                "GROUP BY GROUPING SETS (" + ", ".join("(" + ", ".join(c for c in s if c) + ")" for s in sets) + ")")


CASES = {c.name: c for c in (Case("T", {"municipality": GEO, "age": ("agegroup", "age")}),
                             Case("N", {"municipality": GEO, "sex": ("sex",)}, NULL_CODE))}
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


def write_request(folder: Path, db: str) -> Path:
    """The protect (and publish) request of the tables, every file format."""
    path = folder / "request.toml"
    hierarchies = "".join(f'[hierarchies.{d}]\ncolumns = {F._toml_value(list(c))}\n' for d, c in HIERARCHIES.items())
    tables = "".join(f"""[[tables]]
name = "{c.name}"
source = "persons"
dims = {F._toml_value(list(c.dims))}
threshold = {THRESHOLD}
""" + (f'null_code = "{c.null_code}"\n' if c.null_code else "") for c in CASES.values())
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
    classifications += f'[classifications.sex]\ncodes = ["F", "M", "{NULL_CODE}"]\n'
    cubes = "".join(f"""[[hypercubes]]
name = "HC{c.name}"
dims = {{ {", ".join(f'{d} = "{d}"' for d in c.dims)} }}
[[hypercubes.tables]]
name = "{c.name}"
""" + (f'null_code = "{c.null_code}"\n' if c.null_code else "") for c in CASES.values())
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
codes = {F._toml_value({**F.PERSONS_CODES, "sex": ["F", "M", NULL_CODE]})}
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


def from_frame(case: Case, frame: pl.DataFrame) -> bytes:
    """A table as protect, publish, programme, Session and /v1/table give it: one column per
    dimension (margins as the front codes them), ``n_pert``; flags from the blanks."""
    blank = pl.col("n_pert").is_null()
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
    frame = pl.read_csv(io.BytesIO(data), infer_schema=False)
    codes = [pl.col(d.upper()).replace("_T", TOTAL).alias(d) for d in case.dims]
    flags = pl.concat_str(pl.col("OBS_STATUS"), pl.col("CONF_STATUS"), separator="/").alias("flags")
    return _finish(case, frame.select(*codes, pl.col("OBS_VALUE").alias("n_pert"), flags))


def from_json_stat(case: Case, data: bytes) -> bytes:
    """A JSON-stat 2.0 dataset (two dimensions): the positions that hold a value or a status
    (row-major, the last dimension fastest)."""
    ds = json.loads(data)
    assert [d.lower() for d in ds["id"]] == list(case.dims), ds["id"]
    outer, inner = (ds["dimension"][d]["category"]["index"] for d in ds["id"])
    value, status = ds["value"], ds.get("status") or {}
    if isinstance(value, list):
        value = {str(k): v for k, v in enumerate(value)}
    if isinstance(status, list):
        status = {str(k): s for k, s in enumerate(status) if s is not None}
    positions = sorted({int(k) for k in value if value[k] is not None} | {int(k) for k in status})
    frame = pl.DataFrame({
        case.dims[0]: [outer[p // len(inner)] for p in positions], case.dims[1]: [inner[p % len(inner)] for p in positions],
        "n_pert": [value.get(str(p)) for p in positions], "status": [status.get(str(p)) for p in positions]},
        schema_overrides={"status": pl.Utf8})
    flags = (pl.when(pl.col("status") == "C").then(pl.lit("Q/C"))
             .when(pl.col("status").is_null()).then(pl.lit("A/F")).otherwise(pl.col("status")))
    return _finish(case, frame.select(*(pl.col(d).replace("_T", TOTAL) for d in case.dims),
                                      pl.col("n_pert").cast(pl.Utf8), flags.alias("flags")))
