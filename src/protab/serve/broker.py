"""What the service answers: a validated query or table request turned into a TableSpec and
protected by :meth:`protab.Session.cell_key`, the method a Python user calls; nothing here
computes a protected number itself.

- SQL (``POST /v1/query``): :func:`protab.serve.validator.validate` gives a :class:`Query`;
  its grouping sets become the crossings of a TableSpec of flat dimensions (every declared
  code of the dimension, so that an empty cell is published like any other and is not told
  apart by its absence), its WHERE filters ``TableSpec(where=...)`` (the cells keep their cell
  keys). The protected table holds the crossings with all their margins; the rows of the
  requested grouping sets are kept, the dimensions a set aggregates set to NULL as in SQL,
  and ORDER BY and LIMIT applied after protection.
- Table requests (``POST /v1/table``): dimensions with the configured hierarchies, a
  formula, filters and a measure, answered as ``Session.cell_key`` answers.

Code lists come from declared classifications, never from the records
(:mod:`protab.serve.classifications`): the catalogue and every answer list the declared codes,
a declared code without records is an ordinary cell of count 0, and a code of the data that is
not declared stops the service at start-up.

Before any scan: the request's cells are estimated from the code counts of the catalogue
(refused above ``max_cells``). Filters never make a new population whose differences with
other answers could isolate a few records (the differencing attack on table servers;
Hundepool et al. 2012, Statistical Disclosure Control):

- a filter with one value (``dim = 'x'``) makes every answer cell a cell of the crosstab
  with ``dim`` added: the same records, the same cell key, the same value in every answer;
- a filter with several values or an exclusion (``IN`` of several, ``<>``, ``NOT IN``) is
  allowed only on a dimension every grouping set groups by (for tables: a dimension of the
  table, answered at its finest level), where it only picks rows of the answer.

The minimum-population rule then asks that the filtered population's *perturbed* total be at
least ``min_population`` (a verdict from exact counts would tell whether a group is empty or
small without noise).
Answers are deterministic (same records, same keys, same p-table), so a bounded LRU cache
keyed by (dataset, normalised request) serves repeats.
"""

from __future__ import annotations

import contextvars
import functools
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import polars as pl

from protab.errors import ProtabError
from protab.serve import snapshot
from protab.serve.caching import state_folder
from protab.serve.code_labels import Labelling, catalog_labels, labelled, languages
from protab.serve.config import ServeConfig, UserConfig
from protab.serve.fair_pool import FairPool
from protab.serve.groups import Ledger, group_hierarchy
from protab.serve.groups import check_request as check_groups
from protab.serve.limits import LRU, RateLimit
from protab.serve.nesting import RULE as NESTING_RULE
from protab.serve.nesting import refusal_text as nesting_refusal
from protab.serve.nesting import undeclared_nesting
from protab.serve.nesting import warning as nesting_warning
from protab.serve.query import (
    ALLOWED_FORM,
    MIN_POPULATION_MESSAGE,
    SET_FILTER_ADVICE,
    SET_FILTER_MESSAGE,
    SET_FILTER_RULE,
    DatasetRights,
    Query,
    QueryRefused,
    population_refused,
    same_refusal,
)
from protab.serve.rules import check_query, notice, withheld_areas
from protab.serve.served_datasets import KEY_SUMS_GAIN as KEY_SUMS_GAIN
from protab.serve.served_datasets import ServedDataset, keep_key_sums, load_dataset
from protab.serve.table_plan import TablePlan, plan_table
from protab.serve.validator import validate

if TYPE_CHECKING:  # pragma: no cover
    from protab.hierarchy import Hierarchy
    from protab.ptable import PTable
    from protab.session import Session

#: codes of a dimension listed in the catalogue when there are at most this many
CATALOG_CODES = 1000
#: hierarchies a session keeps as tables before it drops them (bounded memory)
KEEP_HIERARCHIES = 64


#: true while a request runs as a job (Broker.as_job): it takes a session of the jobs' pool
_IN_JOB: contextvars.ContextVar[bool] = contextvars.ContextVar("protab_in_job", default=False)
#: the user whose request runs (Broker.query, Broker.table): sessions are handed out fairly by user
_USER: contextvars.ContextVar[str | None] = contextvars.ContextVar("protab_user", default=None)
_F = TypeVar("_F", bound=Callable[..., Any])


def _for_user(method: _F) -> _F:
    """A broker method of ``(self, request, user, ...)`` run as ``user``'s: the sessions it borrows
    are handed out in turn with other users' (protab.serve.fair_pool)."""
    @functools.wraps(method)
    def run(self: Any, request: Any, user: UserConfig, *args: Any, **kwargs: Any) -> Any:
        token = _USER.set(user.name)
        try:
            return method(self, request, user, *args, **kwargs)
        finally:
            _USER.reset(token)

    return run  # type: ignore[return-value]


class JobNeeded(Exception):
    """A request of more than ``job_cells`` cells (raised before any scan): the app runs it as a job."""

    def __init__(self, cells: int) -> None:
        super().__init__(f"about {cells:,} cells: answered as a job")
        self.cells = cells


@dataclass
class Answer:
    """A protected answer: the frame, its number of cells, and what the audit log records."""

    frame: pl.DataFrame
    summary: str
    cached: bool = False
    #: areas the disclosure rule area.min_population withheld from this answer: level column → codes
    withheld: dict[str, list[str]] = field(default_factory=dict)
    #: the same as text (the PostgreSQL front sends it as a NOTICE), or None
    notice: str | None = None
    #: the dimensions' names in the language asked (protab.serve.code_labels; its label columns are in ``frame``)
    labels: Labelling | None = None

    @property
    def cells(self) -> int:
        return self.frame.height


class Broker:
    """Sessions on the microdata (read-only), the datasets, the p-table and the answer cache.

    ``config.sessions`` read-only sessions are opened on a snapshot of the database taken at
    start-up (protab.serve.snapshot: the service holds no lock on the office's file); a request
    borrows one for its scan (requests beyond that wait, served by user in turn:
    protab.serve.fair_pool). Start-up checks every dataset against the database (table, record
    keys, columns, NULL codes, hierarchies, magnitude parameters) and raises a
    :class:`~protab.errors.ProtabError` naming the key of serve.toml.
    """

    def __init__(self, config: ServeConfig) -> None:
        from protab.request.loaders import load_ptable
        from protab.session import Session

        self.config = config
        try:
            self.ptable: PTable = load_ptable(dict(config.ptable), config.base)
        except ProtabError as exc:
            raise type(exc)(f"[ptable] of the serve config: {exc}") from None
        # the custom groups each user asked for (protab.serve.groups), kept in the state folder
        self._ledger = Ledger(state_folder(config))
        self._pool: FairPool[Session] = FairPool(config.sessions_per_user or max(1, config.sessions - 1))
        self._sessions: list[Session] = []
        self.snapshot: snapshot.Snapshot | None = None
        try:
            self.snapshot = snapshot.take(config.database, state_folder(config), {
                ds.table: f"datasets.{name} of the serve config" for name, ds in config.datasets.items()})
            # jobs (protab.serve.jobs) take sessions of their own: small requests keep every one of theirs
            self._job_pool: FairPool[Session] | None = FairPool() if config.job_cells else None
            for k in range(config.sessions + (config.job_workers if self._job_pool is not None else 0)):
                s = Session(self.snapshot.path, read_only=True, progress=False, threads=config.threads,
                            memory_limit=config.memory_limit)
                self._sessions.append(s)
                (self._pool if k < config.sessions or self._job_pool is None else self._job_pool).add(s)
            with self.session() as s:
                self.datasets = {name: load_dataset(s, ds, config) for name, ds in config.datasets.items()}
            self._key_sums()  # after the magnitude parameters: their top_k decides the lists kept
            self._withheld()
        except BaseException:
            self.close()
            raise
        self.catalog_rights = {n: DatasetRights(frozenset(d.conf.dims), frozenset(d.conf.measures))
                               for n, d in self.datasets.items()}
        self._cache = LRU(config.cache_size)
        self.rate = RateLimit(config.requests_per_minute)
        self._flat = LRU(1024)  # flat hierarchies by (dataset, dimension, codes): built once, found by identity
        self._warm_up()

    # -- start-up ----------------------------------------------------------------------------
    def _key_sums(self) -> None:
        """Each dataset's key sums in every session (protab.serve.served_datasets.keep_key_sums)."""
        for k, ds in enumerate(self.datasets.values()):
            keep_key_sums(self._sessions, ds, f"_protab_serve_counts_{k}")

    def _withheld(self) -> None:
        """The areas each dataset's rules withhold (protab.serve.rules.withheld_areas), once, before
        any answer, and the dimensions that nest undeclared (protab.serve.nesting): the office's
        console is warned (``self.warnings``) and custom groups on them are refused."""
        self.warnings: list[str] = []
        with self.session() as s:
            for ds in self.datasets.values():
                ds.withheld = withheld_areas(s, ds, self.ptable)
                ds.nested = undeclared_nesting(s, ds.counts_table or ds.conf.table, ds.conf.dims,
                                               ds.conf.hierarchies)
                self.warnings += [nesting_warning(ds.name, d, others) for d, others in ds.nested.items()]

    def _warm_up(self) -> None:
        """One small protected table per session, so that the first analyst does not wait for
        DuckDB's and protab's first-use costs."""
        from protab.table import TableSpec

        ds = next(iter(self.datasets.values()))
        dim = ds.conf.dims[0]
        spec = TableSpec({dim: self._flat_hierarchy(ds, dim, ds.codes[dim])}, null_code=ds.conf.null_code)
        for s in self._sessions:
            s.cell_key(ds.conf.table, spec, self.ptable)

    def _flat_hierarchy(self, ds: ServedDataset, dim: str, codes: Sequence[str]) -> Hierarchy:
        """The flat hierarchy of a code list (cached: building one costs more than a small table)."""
        from protab.hierarchy import Hierarchy

        key = (ds.name, dim, tuple(codes))
        h = self._flat.get(key)
        if h is None:
            h = Hierarchy.flat(list(codes))
            self._flat.put(key, h)
        return h

    def close(self) -> None:
        """Close the sessions and remove the snapshot (idempotent)."""
        for s in self._sessions:
            s.close()
        self._sessions.clear()
        if self.snapshot is not None:
            self.snapshot.close()

    @contextmanager
    def session(self) -> Iterator[Session]:
        """Borrow a session of the pool for one request (of the jobs' pool inside :meth:`as_job`),
        in turn with other users' requests when all are busy (the user of :func:`_for_user`)."""
        pool = self._job_pool if _IN_JOB.get() and self._job_pool is not None else self._pool
        user = _USER.get()
        s = pool.get(user)
        try:
            yield s
        finally:
            pool.put(s, user)

    @staticmethod
    @contextmanager
    def as_job() -> Iterator[None]:
        """Requests made inside run as a job: on the jobs' own sessions."""
        token = _IN_JOB.set(True)
        try:
            yield
        finally:
            _IN_JOB.reset(token)

    # -- rights and catalogue ----------------------------------------------------------------
    @staticmethod
    def user_rights(user: UserConfig) -> dict[str, DatasetRights]:
        return {ds: DatasetRights(r.dims, r.measures) for ds, r in user.rights.items()}

    def _hierarchy_for(self, ds: ServedDataset, dim: str, rights: DatasetRights) -> Hierarchy | None:
        """The dimension's hierarchy if the user may use every dimension it is built from (its
        upper levels are tables of those columns), else None (the dimension is served flat)."""
        h = ds.hierarchies.get(dim)
        if h is None:
            return None
        cols = [c for c in ds.conf.hierarchies[dim] if c in ds.conf.dims]
        return h if all(c in rights.dims for c in cols) else None

    def catalog(self, user: UserConfig) -> dict[str, Any]:
        """The datasets, dimensions (levels, codes when few) and measures the user may use."""
        self.rate.admit(user.name)
        out = []
        for name, r in sorted(self.user_rights(user).items()):
            ds = self.datasets[name]
            dims = []
            for d in ds.conf.dims:
                if d not in r.dims:
                    continue
                h = self._hierarchy_for(ds, d, r)
                levels = list(ds.conf.hierarchies[d]) if h is not None else []
                entry: dict[str, Any] = {"name": d, "levels": levels, "n_codes": len(ds.codes[d])}
                shown = catalog_labels(ds.conf.labels.get(d), None if h is not None else ds.codes[d])
                if len(ds.codes[d]) <= CATALOG_CODES:
                    entry["codes"] = ds.codes[d]
                else:  # too many codes to list, and so their labels; the dimension's names still
                    shown.pop("labels", None)
                entry.update(shown)
                dims.append(entry)
            measures = [m for m in ds.conf.measures if m in r.measures]
            out.append({
                "name": name, "description": ds.conf.description, "dims": dims, "measures": measures,
                "functions": ["count", "sum", "avg"] if ds.magnitude is not None and measures else ["count"],
            })
        c = self.config
        mine = (self.datasets[n].conf for n in self.user_rights(user))  # the languages of the user's datasets
        return {"datasets": out, "languages": languages(mine),
                "allowed_form": ALLOWED_FORM,
                "limits": {"max_cells": c.max_cells, "max_limit": c.max_limit, "max_sql_length": c.max_sql_length}}

    # -- checks before a scan ----------------------------------------------------------------
    def _check_cells(self, cells: int, job_cells: int | None = None, ds: ServedDataset | None = None) -> None:
        own = ds.conf.rules.max_cells if ds is not None and ds.conf.rules is not None else None
        most = own or self.config.max_cells  # the dataset's rule max_cells, else the service's
        if job_cells and job_cells < cells <= most:
            raise JobNeeded(cells)
        if cells > most:
            rule = f" (the disclosure rule max_cells of dataset {ds.name!r})" if own and ds is not None else ""
            raise QueryRefused(
                f"the request asks for about {cells:,} cells; the service answers at most "
                f"{most:,}{rule}: use fewer or coarser dimensions, or filter",
                rule="max_cells", advice="use fewer or coarser dimensions, or filter",
            )

    @staticmethod
    def _codes(ds: ServedDataset, dim: str, filters: Sequence[tuple[str, str, Sequence[str]]]) -> list[str]:
        """The codes of a flat dimension in a filtered request: those its own filters let pass."""
        codes = ds.codes[dim]
        for col, op, values in filters:
            if col == dim:
                vals = set(values)
                codes = [c for c in codes if (c in vals) == (op == "in")]
        return codes

    def _min_population(self, frame: pl.DataFrame, dims: Sequence[str], filters: Sequence[object],
                        ds: ServedDataset | None = None) -> None:
        """The minimum-population rule: the filtered population, as its *perturbed* total (the
        table's grand total, published by the same cell key method in every answer over the same
        records), must be at least ``min_population``. A verdict from perturbed values tells no
        more than the service publishes anyway (a verdict from exact counts would be an oracle)."""
        if not filters:
            return
        total = frame.filter(pl.all_horizontal([pl.col(f"{d}_level") == 0 for d in dims]))["n_pert"]
        own = ds.conf.rules.min_population if ds is not None and ds.conf.rules is not None else None
        if total.is_empty() or total[0] is None or total[0] < (own or self.config.min_population):
            raise population_refused()

    @staticmethod
    def _set_filters(filters: Sequence[tuple[str, str, Sequence[str]]]) -> list[str]:
        """Columns of filters that select several values or exclude values (IN of several, <>,
        NOT IN): each makes a new population unless its column is grouped in every cell."""
        return [col for col, op, values in filters if op == "not in" or len(values) > 1]

    def _cached(self, key: Any, compute: Callable[[], pl.DataFrame], summary: str) -> Answer:
        hit = self._cache.get(key)
        if hit is None:
            try:
                hit = ("ok", compute())
            except QueryRefused as exc:  # deterministic refusals (the population rule) are kept too
                hit = ("refused", population_refused() if str(exc) == MIN_POPULATION_MESSAGE else same_refusal(exc))
            self._cache.put(key, hit)
            cached = False
        else:
            cached = True
        if hit[0] == "refused":
            raise same_refusal(hit[1])
        return Answer(hit[1], summary, cached)

    def _protect(self, s: Session, ds: ServedDataset, spec: Any, sums: bool) -> pl.DataFrame:
        from protab.errors import NoRecordsError

        table = ds.counts_table if ds.counts_table is not None and (ds.sums_kept or not sums) else ds.conf.table
        try:
            frame = s.cell_key(table, spec, self.ptable, threshold=self.config.threshold or None,
                               magnitude=ds.magnitude if sums else None, rules=ds.sensitivity if sums else None)
        except NoRecordsError:  # filters that select nobody: the same answer as a small population
            raise QueryRefused(MIN_POPULATION_MESSAGE) from None
        s.forget_hierarchies(KEEP_HIERARCHIES)  # a long-lived session sees ever new code lists
        return frame

    # -- POST /v1/query ----------------------------------------------------------------------
    @_for_user
    def query(self, sql: Any, user: UserConfig, *, admit: bool = True, job_cells: int | None = None) -> Answer:
        """An analyst's SQL, validated and answered with protected values (see the module doc).
        ``admit``: count it against the user's rate; ``job_cells``: raise JobNeeded above that many cells."""
        if admit:
            self.rate.admit(user.name)
        c = self.config
        q = validate(sql, self.catalog_rights, self.user_rights(user), max_length=c.max_sql_length,
                     max_limit=c.max_limit)
        ds = self.datasets[q.dataset]
        if any(m.func != "count" for m in q.measures) and ds.magnitude is None:
            raise QueryRefused(
                f"sum() and avg() are not available for dataset {q.dataset!r}: the service protects its counts "
                "only (no magnitude parameters are configured for it); use count(*)", rule="measures",
                advice="use count(*)"
            )
        filters = [(f.column, f.op, f.values) for f in q.filters]
        loose = [c for c in self._set_filters(filters) if not all(c in g for g in q.grouping_sets)]
        if loose:
            raise QueryRefused(f"{SET_FILTER_MESSAGE} (filter on {loose[0]!r}). {ALLOWED_FORM}", rule=SET_FILTER_RULE,
                               advice=SET_FILTER_ADVICE)
        codes = {d: self._codes(ds, d, filters) for d in q.dims}
        assert ds.withheld is not None  # set at start-up (_withheld)
        area, note = check_query(ds.withheld, q.grouping_sets, q.dims, filters, codes)  # the rules
        self._check_cells(sum(math.prod(len(codes[d]) for d in g) for g in q.grouping_sets), job_cells, ds)
        answer = self._cached(("query", q.normalised), lambda: self._answer_query(q, ds, codes, filters, area),
                              q.normalised)
        return self._noted(answer, ds, note)

    @staticmethod
    def _noted(answer: Answer, ds: ServedDataset, note: dict[str, list[str]]) -> Answer:
        """The answer with the areas its rules withheld (``Answer.withheld``, ``Answer.notice``)."""
        if note:
            answer.withheld, answer.notice = note, notice(ds.name, note)
        return answer

    def _answer_query(self, q: Query, ds: ServedDataset, codes: Mapping[str, list[str]],
                      filters: list[tuple[str, str, tuple[str, ...]]], area: Mapping[str, int | None]) -> pl.DataFrame:
        from protab.table import TableSpec

        dims = list(q.dims) or [ds.conf.dims[0]]
        sums = list(dict.fromkeys(m.column for m in q.measures if m.column is not None))
        with self.session() as s:
            spec = TableSpec(
                {d: self._flat_hierarchy(ds, d, codes.get(d) or ds.codes[d]) for d in dims},
                crossings=[g for g in q.grouping_sets if g] or [(dims[0],)],
                sums=sums, null_sums=ds.conf.null_sums, null_code=ds.conf.null_code,
                where=[(col, op, list(v)) for col, op, v in filters],
            )
            frame = self._protect(s, ds, spec, bool(sums))
        self._min_population(frame, dims, filters, ds)
        assert ds.withheld is not None  # set at start-up (_withheld)
        frame = ds.withheld.drop(frame, area)  # the areas the rules withhold, before ORDER BY and LIMIT
        values = []
        for m in q.measures:
            src = "n_pert" if m.func == "count" else f"{m.column}_pert" if m.func == "sum" else f"{m.column}_mean_pert"
            values.append(pl.col(src).alias(m.alias))
        parts = []
        for g in q.grouping_sets:
            keep = pl.all_horizontal([pl.col(f"{d}_level") == (1 if d in g else 0) for d in dims])
            part = frame.filter(keep).select(
                [(pl.col(d).cast(pl.String) if d in g else pl.lit(None, pl.String)).alias(d) for d in q.dims] + values
            )
            parts.append(part)
        out = pl.concat(parts, how="vertical")
        if q.order_by:
            out = out.sort([n for n, _ in q.order_by], descending=[d for _, d in q.order_by], nulls_last=True,
                           maintain_order=True)
        if q.limit is not None:
            out = out.head(q.limit)
        return out.select(list(q.columns))

    # -- POST /v1/table ----------------------------------------------------------------------
    def _table_dims(self, ds: ServedDataset, req: Mapping[str, Any], rights: DatasetRights,
                    grouped: tuple[str, Any] | None, filters: Sequence[tuple[str, str, Sequence[str]]]
                    ) -> dict[str, Any]:
        """The hierarchy of each dimension of a table request: its custom groups, its configured
        hierarchy (when the user may use every level) or its codes, flat (those its filters pass)."""
        dims: dict[str, Any] = {}
        for d in req["dims"]:
            h = group_hierarchy(grouped[1]) if grouped and d == grouped[0] else self._hierarchy_for(ds, d, rights)
            if h is None:
                codes = self._codes(ds, d, filters)
                if not codes:  # its own filter lets no code pass: no records
                    raise population_refused()
                h = self._flat_hierarchy(ds, d, codes)
            dims[d] = h
        flat = [d for d in req["levels"] if dims[d] is not ds.hierarchies.get(d)]
        if flat:
            raise QueryRefused(f"levels: dimension {flat[0]!r} is served without hierarchy levels")
        return dims

    def plan_table(self, body: Any, user: UserConfig) -> TablePlan:
        """Everything a table request is judged by before any scan (protab.serve.table_plan): its
        plan, or the refusal; reads no data and records nothing (a saved table is judged so when
        it is saved)."""
        return plan_table(self, body, user)

    @_for_user
    def table(self, body: Any, user: UserConfig, *, admit: bool = True, job_cells: int | None = None) -> Answer:
        """A table request (``dataset``, ``dims``, ``formula``, ``filters``, ``measure``, ``levels``)
        answered as ``Session.cell_key``: dims, ``<dim>_level``, ``n_pert`` (and the measure's
        ``<m>_pert``, ``<m>_mean_pert``)."""
        if admit:  # ``admit`` and ``job_cells`` as for query()
            self.rate.admit(user.name)
        plan = self.plan_table(body, user)
        req, ds, dims, filters, grouped = plan.req, plan.ds, plan.dims, plan.filters, plan.grouped
        spec, where, area, picked = plan.spec, plan.where, plan.area, plan.picked
        self._check_cells(plan.cells, job_cells, ds)
        if grouped and grouped[0] in ds.nested:  # nests undeclared with another dimension: not judged alone
            raise ds.withheld.rules.refuse(NESTING_RULE, *nesting_refusal(grouped[0]))
        if grouped:  # the differencing rule, against the published cells and the user's other groups
            with self.session() as s:
                check_groups(s, self.config.min_population, ds, user.name, self._ledger, *grouped,
                             [d for d in dims if d != grouped[0]], filters, self.ptable)
        summary = json.dumps(req, sort_keys=True, ensure_ascii=False)

        def compute() -> pl.DataFrame:
            with self.session() as s:
                frame = self._protect(s, ds, spec, bool(req["measure"]))
            self._min_population(frame, list(dims), where, ds)
            frame = ds.withheld.drop(frame, area)
            for d, values in picked.items():  # the codes picked, at the finest level
                frame = frame.filter((pl.col(f"{d}_level") == pl.col(f"{d}_level").max())
                                     & pl.col(d).cast(pl.String).is_in(list(values)))
            for d, level in {**req["levels"], **({grouped[0]: 1} if grouped else {})}.items():
                frame = frame.filter(pl.col(f"{d}_level").is_in([0, level]))
            cols = list(dims) + [f"{d}_level" for d in dims] + ["n_pert"]
            if req["measure"]:
                cols += [f"{req['measure']}_pert", f"{req['measure']}_mean_pert"]
            return frame.select(cols)

        # the dimensions served with their hierarchy depend on the user's rights: part of the key
        served_with = tuple(d for d in dims if dims[d] is ds.hierarchies.get(d))
        answer = self._noted(self._cached(("table", summary, served_with), compute, summary), ds, plan.note)
        return labelled(answer, req.get("lang"), list(dims), ds.conf.labels)  # label columns beside the codes
