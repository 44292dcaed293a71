"""The service's configuration file (serve.toml): database, p-table, limits, datasets, users.

Read and checked at start-up, before anything listens: an unknown key, a value of the wrong
type or a name that does not fit (a right to a dataset that is not configured, a token hash
that is not 64 hex digits) stops the service with a :class:`~protab.errors.SpecError` naming
the key. The p-table and magnitude sections are secrets: their errors name the key, never the
value. The format is documented in docs/serve.md and in :data:`FORMAT`. Code lists come from
declared classifications, never from the records (:mod:`protab.serve.classifications`).
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protab.errors import SpecError
from protab.request import schema
from protab.request.loaders import check_decimals
from protab.serve.classifications import CODES, CODES_FILE, CodeList, declared
from protab.serve.code_labels import (
    DESCRIPTIONS,
    LABELS,
    LABELS_FILE,
    NAMES,
    DimensionLabels,
    dataset_labels,
    one_way,
)
from protab.serve.rules import RULES, attach
from protab.vocabulary.include import expand, read_with_includes
from protab.vocabulary.sections import DATABASE, MAGNITUDE, NULL_CODE, NULL_SUMS, PTABLE, THRESHOLD
from protab.vocabulary.sections import RULES as SENSITIVITY_RULES

FORMAT = """\
serve.toml (paths relative to the file):

  database = "census.duckdb"       # microdata with record keys (--db overrides); opened read-only
  audit_log = "audit.jsonl"        # one JSON line per request, fsync'ed before the answer
  tokens_file = "tokens.json"      # optional: tokens managed by `protab serve-token`
  threshold = 3                    # blank perturbed counts below this (default 0: none)
  min_population = 10              # least perturbed total of a filtered population (default 10)
  max_cells = 10000                # largest answer in cells (default 10000)
  max_sql_length = 10000  max_limit = 1000000  max_body_bytes = 1048576
  sessions = 4  threads = 2  cache_size = 256  memory_limit = "4GB"
  sessions_per_user = 3            # sessions one user may hold at once (default sessions - 1, at least 1)
  requests_per_minute = 600        # per user (catalogue, queries, tables); 0: no limit
  cache_max_age = 0                # Cache-Control max-age of answers, seconds (they carry an ETag)
  state_dir = "serve_state"        # jobs, saved tables, ETag key (default: beside the audit log)
  job_cells = 5000                 # answer requests above this many cells as jobs (default 0: never)
  job_workers = 2  job_keep_hours = 24  jobs_per_user = 4  saved_per_user = 100
  groups_per_user = 100            # saved custom groups one user may keep (409 beyond)
  require_tls = true               # refuse PostgreSQL logins in clear (needs --tls-cert/--tls-key)

  [ptable]                         # secret: file = "ptable.csv" or maximum_entropy = {D, V, js}
  maximum_entropy = { D = 5, V = 3, js = 2 }

  [datasets.persons]               # one per dataset analysts may query
  table = "persons"                # default: the dataset's name
  dims = ["region", "municipality", "sex", "agegroup"]
  measures = ["income"]            # optional; sum/avg need a magnitude section
  hierarchies = { municipality = ["region", "municipality"] }   # level columns, coarsest first
  # code lists come from declared classifications, never from the records: each dim needs one
  codes = { sex = ["F", "M"], agegroup = ["00-14", "15-64", "65+"] }   # inline, in this order
  codes_file = { municipality = "municipalities.csv" }   # or a file: one code per line, or a CSV
                                   # whose header names the columns (a hierarchy: its levels)
                                   # region, a level of municipality's hierarchy, takes its codes
                                   # (label columns label_<lang>, <level>_label_<lang>: labels)
  labels = { sex = { en = { F = "Female", M = "Male" } } }   # optional: per dim, as protect's labels
  names = { sex = { en = "Sex" } }  # optional: a dimension's own name per language
  descriptions = { sex = { en = "Sex as registered" } }   # optional: and its description
  null_code = "Unknown"            # optional: NULL dimension values as this (declared) code
  [datasets.persons.magnitude]     # optional, secret: as [magnitude] of a protect request
  decimals = 0                     # published sums and means: decimals (default 2; or {income = 0})
  [datasets.persons.sensitivity]   # optional, secret: as [rules] of a protect request (sensitive
  p_percent = 10                   # cells get the extra noise mu_c, as protect gives them)
  [datasets.persons.rules]         # optional: disclosure rules (or in rules_file = "rules.toml")
  blocked = [["age", "municipality"]]   # also max_cells, max_dims, min_population, [...rules.area]

  [users.alice]
  datasets = ["persons"]           # every dimension and measure of these datasets
  token_sha256 = ["<64 hex digits>"]   # optional: hashes of tokens given out by hand
  expires = 2027-12-31             # optional: tokens of the user stop working after that day (UTC)
  revoked = false                  # optional: true turns every token of the user off
  [users.alice.rights.persons]     # optional: a narrower right (implies the dataset)
  dims = ["region", "sex"]         # default: all dims; measures = [] (default: all measures)
"""

DEFAULTS: dict[str, Any] = {
    "threshold": 0,
    "min_population": 10,
    "max_cells": 10_000,
    "max_sql_length": 10_000,
    "max_limit": 1_000_000,
    "max_body_bytes": 1 << 20,
    "sessions": 4,
    "sessions_per_user": None,
    "cache_size": 256,
    "requests_per_minute": 600,
    "require_tls": False,
    "cache_max_age": 0,
    "job_cells": 0,
    "job_workers": 2,
    "job_keep_hours": 24,
    "jobs_per_user": 4,
    "saved_per_user": 100,
    "groups_per_user": 100,
    "state_dir": None,
}

_HEX64 = re.compile(r"[0-9a-f]{64}")  # matched in full: a trailing newline does not pass
_SECRET_SECTIONS = ("ptable", "magnitude", "sensitivity", "rules")


@dataclass
class _Expiry(schema.Type):
    """A TOML date or date-time, or the same as ISO text."""

    name = "a date such as 2027-12-31 (or a date-time such as 2027-12-31T12:00:00Z)"

    def check(self, value: Any, path: str) -> None:
        if isinstance(value, (dt.date, dt.datetime)):
            return
        if isinstance(value, str):
            try:
                parse_expiry(value)
                return
            except ValueError:
                pass
        raise schema.fail(path, self.name, value)


_NAMES = schema.List(schema.Str(), unique=True)
_NAMES0 = schema.List(schema.Str(), unique=True, nonempty=False)

RIGHTS = schema.Table({"dims": _NAMES0, "measures": _NAMES0})

USER = schema.Table(
    {
        "datasets": _NAMES0,
        "rights": schema.Dict(RIGHTS),
        "token_sha256": schema.AnyOf([schema.Str(), _NAMES0]),
        "expires": _Expiry(),
        "revoked": schema.Bool(),
        "description": schema.Str(nonempty=False),
    }
)

DATASET = schema.Table(
    {
        "table": schema.Str(),
        "dims": _NAMES,
        "measures": _NAMES0,
        "hierarchies": schema.Dict(_NAMES),
        "codes": CODES,
        "codes_file": CODES_FILE,
        "labels": LABELS,
        "labels_file": LABELS_FILE,
        "names": NAMES,
        "descriptions": DESCRIPTIONS,
        "null_code": NULL_CODE,
        "null_sums": NULL_SUMS,
        "magnitude": MAGNITUDE,
        "sensitivity": SENSITIVITY_RULES,
        "rules": RULES,
        "description": schema.Str(nonempty=False),
    },
    required=("dims",),
)

SERVE = schema.Table(
    {
        "database": DATABASE,
        "audit_log": schema.Str(),
        "tokens_file": schema.Str(),
        "ptable": PTABLE,
        "threshold": THRESHOLD,
        "min_population": schema.Int(1),
        "max_cells": schema.Int(1, 100_000_000),
        "max_sql_length": schema.Int(100, 1_000_000),
        "max_limit": schema.Int(1),
        "max_body_bytes": schema.Int(1024, 1 << 30),
        "sessions": schema.Int(1, 64),
        "sessions_per_user": schema.Int(1, 64),
        "threads": schema.Int(1, 1024),
        "cache_size": schema.Int(0, 1_000_000),
        "requests_per_minute": schema.Int(0, 1_000_000),
        "memory_limit": schema.Str(),
        "require_tls": schema.Bool(),
        "cache_max_age": schema.Int(0, 31_536_000),
        "state_dir": schema.Str(),
        "job_cells": schema.Int(0, 100_000_000),
        "job_workers": schema.Int(1, 64),
        "job_keep_hours": schema.Num(0.001, 87_600),
        "jobs_per_user": schema.Int(1, 1000),
        "saved_per_user": schema.Int(0, 100_000),
        "groups_per_user": schema.Int(0, 100_000),
        "datasets": schema.Dict(DATASET),
        "users": schema.Dict(USER),
        "rules_file": schema.Str(),
    },
    required=("audit_log", "ptable", "datasets"),
)


@dataclass(frozen=True)
class Rights:
    """What one user may use of one dataset (dimension and measure names)."""

    dims: frozenset[str]
    measures: frozenset[str]


@dataclass(frozen=True)
class UserConfig:
    """A user: rights per dataset, token hashes given in serve.toml, expiry and revocation."""

    name: str
    rights: Mapping[str, Rights]
    token_sha256: tuple[str, ...] = ()
    expires: dt.datetime | None = None
    revoked: bool = False


@dataclass(frozen=True)
class DatasetConfig:
    """A dataset analysts may query: a keyed table, its dimensions, measures and hierarchies, and
    the declared code list of every dimension (``code_lists``: never taken from the records)."""

    name: str
    table: str
    dims: tuple[str, ...]
    measures: tuple[str, ...] = ()
    hierarchies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    code_lists: Mapping[str, CodeList] = field(default_factory=dict, repr=False)
    #: the dimensions' names and their codes' labels per language (protab.serve.code_labels)
    labels: Mapping[str, DimensionLabels] = field(default_factory=dict, repr=False)
    null_code: str | None = None
    null_sums: str = "error"
    magnitude: Mapping[str, Any] | None = field(default=None, repr=False)
    #: the sensitivity rules of the measures (the keys of protect's [rules]; secret thresholds)
    sensitivity: Mapping[str, Any] | None = field(default=None, repr=False)
    description: str = ""
    #: the disclosure rules (protab.serve.rules.Rules), set by load_config
    rules: Any = field(default=None, repr=False)


@dataclass(frozen=True)
class ServeConfig:
    """A checked serve.toml. ``ptable`` and the datasets' ``magnitude`` hold secrets (not in repr)."""

    path: Path | None
    base: Path
    database: str
    audit_log: Path
    tokens_file: Path | None
    ptable: Mapping[str, Any] = field(repr=False)
    datasets: Mapping[str, DatasetConfig]
    users: Mapping[str, UserConfig]
    threshold: float = 0
    min_population: int = 10
    max_cells: int = 10_000
    max_sql_length: int = 10_000
    max_limit: int = 1_000_000
    max_body_bytes: int = 1 << 20
    sessions: int = 4
    #: sessions one user's requests may hold at once (None: sessions - 1, at least 1: one stays for others)
    sessions_per_user: int | None = None
    threads: int | None = None
    cache_size: int = 256
    memory_limit: str | None = None
    requests_per_minute: int = 600
    #: refuse PostgreSQL-front logins that are not over TLS (protab serve --tls-cert/--tls-key)
    require_tls: bool = False
    cache_max_age: int = 0
    job_cells: int = 0
    job_workers: int = 2
    job_keep_hours: float = 24
    jobs_per_user: int = 4
    saved_per_user: int = 100
    groups_per_user: int = 100
    #: the folder of jobs, saved tables and the ETag key, as written (relative to ``base``);
    #: None: ``serve_state`` beside the audit log
    state_dir: str | None = None


def parse_expiry(value: Any) -> dt.datetime:
    """An expiry as an aware UTC date-time: a date means the end of that day (UTC)."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = dt.date.fromisoformat(text)
        except ValueError:
            value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value.astimezone(dt.timezone.utc)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc) + dt.timedelta(days=1)
    raise ValueError(f"not a date: {type(value).__name__}")


def _where(path: Path | None) -> str:
    return f"serve config {str(path)!r}" if path is not None else "serve config"


def _check_schema(cfg: Mapping[str, Any], where: str) -> None:
    """The schema check of protab's request files, its messages said of the serve config; in the
    secret sections the message keeps the key and drops the value."""
    try:
        schema.check(cfg, SERVE)
    except SpecError as exc:
        msg = str(exc).replace("request: the request ", f"{where} ", 1)
        msg = msg.replace("request: ", f"{where}: ", 1).replace("the request", where)
        key = msg.split(": ", 1)[1].split(" ", 1)[0] if ": " in msg else ""
        if any(part in _SECRET_SECTIONS for part in re.split(r"[.\[\]]", key)) or "ptable" in key:
            msg = re.sub(r" = .*? (must|is not) ", r" \1 ", msg)
            msg = re.sub(r", not [^,]*$", "", msg)
            msg = re.sub(r" \([^()]*\)$", "", msg)
        raise SpecError(msg) from None


def load_config(source: str | os.PathLike[str] | Mapping[str, Any], *, database: str | None = None) -> ServeConfig:
    """serve.toml (a path, or its content as a mapping with paths relative to the working
    directory) checked and turned into a :class:`ServeConfig`; ``database`` overrides the
    file's ``database`` (the ``--db`` option). Secrets are checked for shape only here; the
    p-table and the datasets are built against the database by the broker at start-up."""
    if isinstance(source, Mapping):
        path, base = None, Path.cwd()
        cfg = expand(source, base / "serve.toml", "serve") if "include" in source else dict(source)
    else:
        path = Path(source)
        if path.is_dir():
            raise SpecError(f"the serve config {str(path)!r} is a folder, not a TOML file")
        cfg = read_with_includes(path, "serve")
        base = path.parent
    where = _where(path)
    _check_schema(cfg, where)
    db = database if database is not None else cfg.get("database")
    if db is None:
        raise SpecError(f"{where}: needs the key 'database' (the microdata file), or pass --db")
    if db != ":memory:" and not os.path.isabs(db) and database is None:
        db = str(base / db)
    for kind in ("datasets", "users"):
        for name in cfg.get(kind, {}):
            _check_name(kind, name, where)
    datasets = {name: _dataset(name, ds, base, where) for name, ds in cfg["datasets"].items()}
    if not datasets:
        raise SpecError(f"{where}: [datasets] is empty; configure at least one dataset")
    one_way({f"datasets.{n} dimension {d!r}": dl for n, ds in datasets.items() for d, dl in ds.labels.items()},
            where)  # the service's languages, as the catalogue lists them
    datasets = attach(datasets, cfg, base, where)
    users = {name: _user(name, u, datasets, where) for name, u in cfg.get("users", {}).items()}
    kw = {k: cfg.get(k, v) for k, v in DEFAULTS.items()}
    tokens = cfg.get("tokens_file")
    return ServeConfig(
        path=path, base=base, database=db, audit_log=base / cfg["audit_log"],
        tokens_file=base / tokens if tokens else None, ptable=cfg["ptable"], datasets=datasets,
        users=users, threads=cfg.get("threads"), memory_limit=cfg.get("memory_limit"), **kw,
    )


def _check_name(kind: str, name: str, where: str) -> None:
    """A dataset's or user's name as analysts type it (in SQL, in a login): printable, without
    a space at either end (a name is compared in full: ``"persons\\n"`` is another name)."""
    if not name or not name.isprintable() or name != name.strip():
        raise SpecError(f"{where}: {kind}.{name.strip()[:60]!r}: a name of {kind} must be printable characters "
                        "without spaces at either end (no newline, tab or control character)")


def _dataset(name: str, ds: Mapping[str, Any], base: Path, where: str) -> DatasetConfig:
    dims, measures = tuple(ds["dims"]), tuple(ds.get("measures", ()))
    both = sorted(set(dims) & set(measures))
    if both:
        raise SpecError(f"{where}: datasets.{name}: {both[0]!r} is both in dims and in measures")
    hierarchies = {}
    for dim, columns in ds.get("hierarchies", {}).items():
        if dim not in dims:
            raise SpecError(
                f"{where}: datasets.{name}.hierarchies.{dim}: {dim!r} is not one of the dataset's dims "
                f"({', '.join(dims)})"
            )
        if columns[-1] != dim:
            raise SpecError(
                f"{where}: datasets.{name}.hierarchies.{dim}: list the columns coarsest first, ending with "
                f"{dim!r} itself (e.g. [\"region\", {dim!r}])"
            )
        hierarchies[dim] = tuple(columns)
    if "magnitude" in ds and not measures:
        raise SpecError(f"{where}: datasets.{name}.magnitude protects sums of measures; the dataset has none")
    if "sensitivity" in ds and "magnitude" not in ds:
        raise SpecError(f"{where}: datasets.{name}.sensitivity marks the cells that the cell key method for "
                        f"magnitudes protects more: it needs [datasets.{name}.magnitude] too")
    if "magnitude" in ds:
        check_decimals(ds["magnitude"], measures, f"{where}: datasets.{name}.magnitude.decimals")
    code_lists = declared(name, ds, hierarchies, base, where)
    return DatasetConfig(
        name=name, table=ds.get("table", name), dims=dims, measures=measures, hierarchies=hierarchies,
        code_lists=code_lists, labels=dataset_labels(name, ds, code_lists, where, base), null_code=ds.get("null_code"),
        null_sums=ds.get("null_sums", "error"),
        magnitude=ds.get("magnitude"), sensitivity=ds.get("sensitivity"), description=ds.get("description", ""),
    )


def _user(name: str, u: Mapping[str, Any], datasets: Mapping[str, DatasetConfig], where: str) -> UserConfig:
    rights: dict[str, Rights] = {}
    for ds in u.get("datasets", []):
        if ds not in datasets:
            raise SpecError(
                f"{where}: users.{name}.datasets names {ds!r}, which is not a configured dataset "
                f"({', '.join(sorted(datasets))})"
            )
        rights[ds] = Rights(frozenset(datasets[ds].dims), frozenset(datasets[ds].measures))
    for ds, r in u.get("rights", {}).items():
        if ds not in datasets:
            raise SpecError(
                f"{where}: users.{name}.rights.{ds}: {ds!r} is not a configured dataset "
                f"({', '.join(sorted(datasets))})"
            )
        if ds in rights:
            raise SpecError(
                f"{where}: users.{name}: {ds!r} is both in datasets (every column) and in rights (some "
                "columns); keep one"
            )
        conf = datasets[ds]
        for key, known in (("dims", conf.dims), ("measures", conf.measures)):
            bad = [c for c in r.get(key, ()) if c not in known]
            if bad:
                raise SpecError(
                    f"{where}: users.{name}.rights.{ds}.{key} names {bad[0]!r}, which is not one of the "
                    f"dataset's {key} ({', '.join(known) or 'none'})"
                )
        rights[ds] = Rights(frozenset(r.get("dims", conf.dims)), frozenset(r.get("measures", conf.measures)))
    hashes = u.get("token_sha256", [])
    hashes = [hashes] if isinstance(hashes, str) else list(hashes)
    for k, h in enumerate(hashes):
        if not _HEX64.fullmatch(h):
            raise SpecError(
                f"{where}: users.{name}.token_sha256[{k}] must be the SHA-256 of a token as 64 lowercase "
                "hex digits (give tokens with `protab serve-token add`, which stores hashes only)"
            )
    expires = parse_expiry(u["expires"]) if "expires" in u else None
    return UserConfig(name=name, rights=rights, token_sha256=tuple(hashes), expires=expires,
                      revoked=u.get("revoked", False))
