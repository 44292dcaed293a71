"""The one table asked of every front, and the canonical form its cells are compared in.

Microdata: the service tests' persons (tests/serve_fixtures.py, 3,000 records, keyed), with
region > municipality and agegroup > age as hierarchies. The table: counts of municipality × age
with every level and margin, the count p-table of the fixtures and ``threshold = 3`` (the one
19-year-old gives cells that are blanked).

Canonical form of one front's answer: the columns ``municipality, age, n_pert, flags``, all text;
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
import json
from pathlib import Path

import polars as pl

from tests import serve_fixtures as F

PERSONS = 3000
DIMS = ("municipality", "age")
LEVELS = {"municipality": ("region", "municipality"), "age": ("agegroup", "age")}
PTABLE = {"D": 5, "V": 2.71828, "js": 2}
THRESHOLD = 3
TOKEN = "tok-fronts-matrix-3c9e"
COLUMNS = [*DIMS, "n_pert", "flags"]
TOTAL = "Total"
SQL = ("SELECT region, municipality, agegroup, age, count(*) AS n FROM persons GROUP BY GROUPING SETS ("
       + ", ".join("(" + ", ".join(c for c in (m, a) if c) + ")"
                   for m in ("", "region", "municipality") for a in ("", "agegroup", "age")) + ")")


def _ptable_toml() -> str:
    return f"maximum_entropy = {F._toml_value(PTABLE)}"


def write_request(folder: Path, db: str) -> Path:
    """The protect (and publish) request of the table, every file format."""
    path = folder / "request.toml"
    hierarchies = "".join(f'[hierarchies.{d}]\ncolumns = {F._toml_value(list(c))}\n' for d, c in LEVELS.items())
    path.write_text(f"""database = "{db}"
output = "protect_out"
formats = ["csv", "parquet", "sdmx-csv", "json-stat"]
[ptable]
{_ptable_toml()}
{hierarchies}[[tables]]
name = "T"
source = "persons"
dims = {F._toml_value(list(DIMS))}
threshold = {THRESHOLD}
""", encoding="utf-8")
    return path


def write_programme(folder: Path, db: str) -> Path:
    """The programme of one hypercube holding the table, every file format."""
    path = folder / "programme.toml"
    classifications = "".join(f'[classifications.{d}]\ncolumns = {F._toml_value(list(c))}\n'
                              for d, c in LEVELS.items())
    path.write_text(f"""database = "{db}"
source = "persons"
output = "programme_out"
formats = ["csv", "parquet", "sdmx-csv", "json-stat"]
threshold = {THRESHOLD}
[ptable]
{_ptable_toml()}
{classifications}[[hypercubes]]
name = "HC"
dims = {{ {", ".join(f'{d} = "{d}"' for d in DIMS)} }}
[[hypercubes.tables]]
name = "T"
""", encoding="utf-8")
    return path


def write_serve_config(folder: Path, db: str) -> Path:
    """serve.toml of one dataset (the persons with both hierarchies) and one user."""
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
hierarchies = {F._toml_value({d: list(c) for d, c in LEVELS.items()})}
codes = {F._toml_value(F.PERSONS_CODES)}
[users.ana]
datasets = ["persons"]
token_sha256 = "{hashlib.sha256(TOKEN.encode()).hexdigest()}"
""", encoding="utf-8")
    return path


# -- canonical forms ---------------------------------------------------------------------------
def _finish(frame: pl.DataFrame) -> bytes:
    """Sorted, as CSV bytes (a null written as an empty field)."""
    return frame.select(COLUMNS).sort(COLUMNS, nulls_last=True).write_csv().encode()


def from_frame(frame: pl.DataFrame) -> bytes:
    """A table as protect, publish, programme, Session and /v1/table give it: one column per
    dimension (margins as the front codes them), ``n_pert``; flags from the blanks."""
    blank = pl.col("n_pert").is_null()
    return _finish(frame.select(
        *(pl.col(d).cast(pl.Utf8) for d in DIMS), pl.col("n_pert").cast(pl.Utf8),
        pl.when(blank).then(pl.lit("Q/C")).otherwise(pl.lit("A/F")).alias("flags")))


def from_csv(data: bytes) -> bytes:
    return from_frame(pl.read_csv(io.BytesIO(data), infer_schema=False))


def from_sql(columns: list[str], rows: list[list]) -> bytes:
    """An answer of the SQL fronts: the level columns, NULL where a grouping set aggregates; a
    cell's code is that of its finest level not aggregated (``Total`` when all are)."""
    frame = pl.DataFrame([[None if v is None else str(v) for v in r] for r in rows],
                         schema=[(c, pl.Utf8) for c in columns], orient="row")
    codes = [pl.coalesce(*(pl.col(c) for c in reversed(LEVELS[d])), pl.lit(TOTAL)).alias(d) for d in DIMS]
    counts = pl.DataFrame({"n_pert": [r[columns.index("n")] for r in rows]})
    return from_frame(frame.select(codes).with_columns(counts["n_pert"]))


def from_sdmx_csv(data: bytes) -> bytes:
    frame = pl.read_csv(io.BytesIO(data), infer_schema=False)
    codes = [pl.col(d.upper()).replace("_T", TOTAL).alias(d) for d in DIMS]
    flags = pl.concat_str(pl.col("OBS_STATUS"), pl.col("CONF_STATUS"), separator="/").alias("flags")
    return _finish(frame.select(*codes, pl.col("OBS_VALUE").alias("n_pert"), flags))


def from_json_stat(data: bytes) -> bytes:
    """A JSON-stat 2.0 dataset: the positions that hold a value or a status (row-major)."""
    ds = json.loads(data)
    index = [ds["dimension"][d]["category"]["index"] for d in ds["id"]]
    assert [d.lower() for d in ds["id"]] == list(DIMS), ds["id"]
    value, status = ds["value"], ds.get("status") or {}
    if isinstance(value, list):
        value = {str(k): v for k, v in enumerate(value)}
    if isinstance(status, list):
        status = {str(k): s for k, s in enumerate(status) if s is not None}
    positions = sorted({int(k) for k in value if value[k] is not None} | {int(k) for k in status})
    inner = len(index[1])
    frame = pl.DataFrame({
        DIMS[0]: [index[0][p // inner] for p in positions], DIMS[1]: [index[1][p % inner] for p in positions],
        "n_pert": [value.get(str(p)) for p in positions], "status": [status.get(str(p)) for p in positions]})
    flags = (pl.when(pl.col("status") == "C").then(pl.lit("Q/C"))
             .when(pl.col("status").is_null()).then(pl.lit("A/F")).otherwise(pl.col("status")))
    return _finish(frame.select(*(pl.col(d).replace("_T", TOTAL) for d in DIMS),
                                pl.col("n_pert").cast(pl.Utf8), flags.alias("flags")))
