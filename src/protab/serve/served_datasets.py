"""The configured datasets as the broker serves them, built against the database at start-up:
the checks of a dataset's table and columns, its declared codes and hierarchies, its magnitude
parameters and sensitivity rules (read as a protect request's [magnitude] and [rules], by the
same loaders), and the key sums count and magnitude requests read."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from protab.errors import InputError, ProtabError, SpecError, show_values
from protab.serve.classifications import check_data
from protab.serve.config import DatasetConfig, ServeConfig
from protab.serve.rules import Withheld
from protab.sqltools import FLOAT_TYPES, quote_ident

if TYPE_CHECKING:  # pragma: no cover
    from protab.hierarchy import Hierarchy
    from protab.magnitude import MagnitudeCKM, SensitivityRules
    from protab.session import Session

#: count requests read a dataset's key sums when they have this many times fewer rows than its records
KEY_SUMS_GAIN = 4
_NUMERIC_PREFIX = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                   "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "REAL", "DECIMAL")


@dataclass
class ServedDataset:
    """A configured dataset as the broker uses it (built against the database at start-up)."""

    conf: DatasetConfig
    codes: dict[str, list[str]]
    hierarchies: dict[str, Hierarchy] = field(default_factory=dict)
    magnitude: MagnitudeCKM | None = field(default=None, repr=False)
    #: the measures' sensitivity rules (protect's [rules]): sensitive cells get the extra noise mu_c
    sensitivity: SensitivityRules | None = field(default=None, repr=False)
    #: the key-sum table of the dataset's dims in every session (Session.key_sums), or None
    counts_table: str | None = None
    #: whether that table keeps the measures' sums too (so magnitude requests read it)
    sums_kept: bool = False
    #: the areas withheld by the dataset's rules (protab.serve.rules), set at start-up
    withheld: Withheld | None = None
    #: per dimension with a hierarchy: its codes per level (1 = coarsest) and its finest codes
    level_sizes: dict[str, dict[int, int]] = field(default_factory=dict, repr=False)
    finest: dict[str, frozenset[str]] = field(default_factory=dict, repr=False)
    #: dimensions that nest with others in the records, undeclared (protab.serve.nesting): no custom groups
    nested: dict[str, list[str]] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return self.conf.name


def load_dataset(s: Session, ds: DatasetConfig, config: ServeConfig) -> ServedDataset:
    """A dataset checked against the database (table, record keys, columns, declared codes) with
    its magnitude parameters and sensitivity rules; a SpecError naming the key of serve.toml."""
    where = f"datasets.{ds.name} of the serve config"
    if not s.exists(ds.table):
        raise SpecError(f"{where}: table {ds.table!r} is not in the database {config.database!r} "
                        f"(tables: {show_values(s.tables(), 10)})")
    cols = s.columns(ds.table)
    try:
        key = s.record_key(ds.table)[0]
    except ProtabError:
        raise SpecError(f"{where}: table {ds.table!r} has no record keys; add them with `protab keys` "
                        "before serving it") from None
    hier_cols = [c for cs in ds.hierarchies.values() for c in cs]
    for what, names in (("dims", ds.dims), ("measures", ds.measures), ("hierarchies", hier_cols)):
        missing = [c for c in names if c not in cols]
        if missing:
            raise SpecError(f"{where}: {what} names {show_values(missing)}, not columns of table {ds.table!r}")
        if key in names:
            raise SpecError(f"{where}: {what} names {key!r}, the secret record keys of {ds.table!r}")
    floats = [d for d in ds.dims if cols[d].upper() in FLOAT_TYPES]
    if floats:
        raise SpecError(f"{where}: dims {show_values(floats)} are floating-point columns; dimensions are codes "
                        "(text or whole numbers)")
    bad = [m for m in ds.measures if not cols[m].upper().startswith(_NUMERIC_PREFIX)]
    if bad:
        raise SpecError(f"{where}: measures {show_values(bad)} are not numeric columns")
    check_data(s, ds.table, ds.dims, ds.code_lists, ds.null_code, where)  # the office's config: names codes
    codes = {d: ds.code_lists[d].codes for d in ds.dims}  # declared, never from the records
    hierarchies = {d: h for d in ds.hierarchies if (h := ds.code_lists[d].hierarchy) is not None}
    levels = {d: h.code_levels().column("level").to_pylist() for d, h in hierarchies.items()}
    out = ServedDataset(ds, codes, hierarchies, level_sizes={d: dict(Counter(ks)) for d, ks in levels.items()},
                        finest={d: frozenset(h.leaves) for d, h in hierarchies.items()})
    _magnitudes(out, cols, config)
    return out


def _magnitudes(ds: ServedDataset, cols: dict[str, str], config: ServeConfig) -> None:
    """The dataset's magnitude parameters and sensitivity rules, read as a protect request's
    [magnitude] and [rules] (the same loaders): the same table is protected the same way.
    Errors name the section, never a value (they are secrets)."""
    from protab.request.loaders import load_magnitude, load_rules

    name = ds.name
    if ds.conf.magnitude is not None:
        try:
            ds.magnitude = load_magnitude(dict(ds.conf.magnitude), config.base)
        except ProtabError as exc:
            raise type(exc)(f"datasets.{name}.magnitude of the serve config: {exc}") from None
    if ds.conf.sensitivity is None:
        return
    try:
        ds.sensitivity = load_rules(dict(ds.conf.sensitivity))
    except ProtabError as exc:
        raise type(exc)(f"datasets.{name}.sensitivity of the serve config: {exc}") from None
    holding = ds.sensitivity.holding
    if holding is not None and holding not in cols:
        raise SpecError(f"datasets.{name}.sensitivity of the serve config: holding {holding!r} is not a "
                        f"column of table {ds.conf.table!r}")
    if holding is not None and holding in ds.conf.dims:
        raise SpecError(f"datasets.{name}.sensitivity of the serve config: holding {holding!r} is a "
                        "dimension; the holding is the contributor group of each record, not a code")


def keep_key_sums(sessions: Sequence[Session], ds: ServedDataset, name: str) -> None:
    """Count requests read, in every session, the records aggregated to the dataset's dims
    with their key sums (Session.key_sums: the same counts and cell keys, so the same
    answers byte for byte, from one row per combination of codes instead of one per
    record), when that is at least KEY_SUMS_GAIN times fewer rows (judged in the first
    session before the others build theirs). With magnitude parameters they keep the
    measures' sums and top lists too (Session.key_sums(sums=...): the same magnitudes byte
    for byte), unless a measure holds values no table could hold, which the records' scan
    then names per request, or the rules count holdings, which need the records. A dataset
    with a dim named as a column of the key sums is answered from its records."""
    from protab.session import Session

    if {Session.KEY_SUM_RECORDS, Session.KEY_SUM_KEY} & set(ds.conf.dims):
        return
    first, others = sessions[0], sessions[1:]
    sums: dict[str, Any] = {}
    holdings = ds.sensitivity is not None and ds.sensitivity.holding is not None
    if ds.magnitude is not None and ds.conf.measures and not holdings:
        top_k = max(ds.magnitude.top_k, ds.sensitivity.top_k if ds.sensitivity is not None else 1)
        sums = {"sums": list(ds.conf.measures), "top_k": top_k, "null_sums": ds.conf.null_sums}
    try:
        first.key_sums(ds.conf.table, ds.conf.dims, name=name, **sums)
    except InputError:  # a measure no table could hold: counts only, sums from the records
        sums = {}
        first.key_sums(ds.conf.table, ds.conf.dims, name=name)
    rows = first.sql(f"SELECT count(*) AS n FROM {quote_ident(name)}")["n"][0]
    records = first.sql(f"SELECT count(*) AS n FROM {quote_ident(ds.conf.table)}")["n"][0]
    if rows * KEY_SUMS_GAIN > records:  # hardly fewer rows than records: not worth the memory
        first.drop_key_sums(name)
        return
    for s in others:
        s.key_sums(ds.conf.table, ds.conf.dims, name=name, **sums)
    ds.counts_table, ds.sums_kept = name, bool(sums)
