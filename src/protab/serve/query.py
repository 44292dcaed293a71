"""The validated query of the SQL gate and its errors: what an analyst's SQL asks for
(:class:`Query`), the rights it is checked against (:class:`DatasetRights`), the refusals with
their HTTP status, and the small helpers that word a refusal (the SQL echoed, cut short)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlglot import exp

from protab.errors import SpecError, show_values

ALLOWED_FORM = (
    "Allowed form: SELECT <dims>, count(*) [AS n] [, sum(<measure>) [AS a], avg(<measure>) [AS b]] "
    "FROM <dataset> [WHERE <dim> = | <> | IN (...) | NOT IN (...) <string or integer literals> [AND ...]] "
    "[GROUP BY <dims> | ROLLUP(...) | CUBE(...) | GROUPING SETS((...), ...)] "
    "[ORDER BY <output column> [ASC|DESC], ...] [LIMIT n]; no comments, one statement."
)
FORM_ADVICE = "write the query in the allowed form the message shows (GET /v1/catalog gives it as allowed_form)"
_ECHO = 200  # characters of the analyst's SQL echoed in a message
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


#: what the answers of a refusal that names no rule of its own advise
CATALOG_ADVICE = ("change the request as the message says; GET /v1/catalog lists the datasets, dimensions, "
                  "levels, codes and measures you may use")


class QueryError(SpecError):
    """An analyst's request that the service does not answer; ``status`` is its HTTP status,
    ``rule`` the rule or check that refused it (a disclosure rule's name, ``max_cells``,
    ``min_population``, ``allowed_form``, ``validator``, ``rights``, ...) and ``advice`` what
    would pass: every refusal's JSON carries both beside ``error``, and the PostgreSQL front
    sends them as the ErrorResponse's DETAIL (``rule: <name>``) and HINT."""

    status = 400
    rule = "validator"
    advice = CATALOG_ADVICE

    def __init__(self, message: str, *, rule: str | None = None, advice: str | None = None) -> None:
        super().__init__(message)
        if rule is not None:
            self.rule = rule
        if advice is not None:
            self.advice = advice


class QueryRefused(QueryError):
    """HTTP 400: the query is not of the allowed form, or names an unknown dataset or column."""

    status = 400


class QueryForbidden(QueryError):
    """HTTP 403: a well-formed query that uses a dataset, dimension or measure outside the user's rights."""

    status = 403
    rule = "rights"
    advice = ("use only the datasets, dimensions and measures of your rights (GET /v1/catalog lists them), or ask "
              "the office for wider rights")


class QueryThrottled(QueryError):
    """HTTP 429: the user has sent more requests than the service's per-user rate allows;
    ``retry_after``: whole seconds until the next one is admitted."""

    status = 429
    rule = "requests_per_minute"

    def __init__(self, message: str, retry_after: int, *, rule: str | None = None, advice: str | None = None) -> None:
        super().__init__(message, rule=rule, advice=advice if advice is not None else
                         f"wait {retry_after} s (the Retry-After header) before the next request")
        self.retry_after = retry_after


def same_refusal(exc: QueryError) -> QueryRefused:
    """A refusal (400) with the message, rule and advice of ``exc`` (a kept refusal raised anew)."""
    return QueryRefused(str(exc), rule=exc.rule, advice=exc.advice)


@dataclass(frozen=True)
class Filter:
    """A WHERE predicate on one dimension: ``op`` is "in" or "not in"; values as text, sorted, distinct."""

    column: str
    op: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Measure:
    """An output aggregate: count(*) (column None), sum(column) or avg(column), named ``alias``."""

    func: str
    column: str | None
    alias: str


@dataclass(frozen=True)
class Query:
    """A validated query: what to tabulate, in the catalogue's spelling, and its canonical SQL."""

    dataset: str
    dims: tuple[str, ...]
    grouping_sets: tuple[tuple[str, ...], ...]
    filters: tuple[Filter, ...]
    measures: tuple[Measure, ...]
    columns: tuple[str, ...]
    order_by: tuple[tuple[str, bool], ...]
    limit: int | None
    normalised: str


@dataclass(frozen=True)
class DatasetRights:
    """The dimensions and measures of a dataset (in the catalogue: all; in a user's rights: those allowed)."""

    dims: frozenset[str] = field(default_factory=frozenset)
    measures: frozenset[str] = field(default_factory=frozenset)


MIN_POPULATION_MESSAGE = (
    "refused by the minimum-population rule: the records a query's filters select must be, after "
    "perturbation, at least the service's minimum; widen or drop a filter condition"
)
SET_FILTER_MESSAGE = (
    "a filter with several values (IN with more than one value, <>, NOT IN) may only be on a dimension "
    "that the query also groups by in every grouping set (it then only picks rows of the answer); on "
    "other dimensions filter with = one value. A filter that makes a new population would let two "
    "answers differ by a few records"
)
MIN_POPULATION_ADVICE = "widen or drop a filter condition"
SET_FILTER_RULE = "multi_value_filter"
SET_FILTER_ADVICE = ("filter with = one value, or group by the filtered dimension in every grouping set (a table "
                     "request: filter a dimension of the table, shown at its finest level)")


def population_refused() -> QueryRefused:
    """The refusal of the minimum-population rule (one message, whatever the count)."""
    return QueryRefused(MIN_POPULATION_MESSAGE, rule="min_population", advice=MIN_POPULATION_ADVICE)


def cut(text: str, limit: int = _ECHO) -> str:
    """``text``, cut to ``limit`` characters for a message."""
    return text if len(text) <= limit else text[:limit] + "…"


def refused(message: str) -> QueryRefused:
    """A refusal (400) that shows the allowed form after its message (rule ``allowed_form``)."""
    return QueryRefused(f"{message}. {ALLOWED_FORM}", rule="allowed_form", advice=FORM_ADVICE)


def node_sql(node: exp.Expression) -> str:
    """A node as SQL text for a message, cut to a short length."""
    try:
        return cut(node.sql(dialect="duckdb"))
    except Exception:  # a message must not fail on a node sqlglot cannot render
        return cut(type(node).__name__)


def args_only(node: exp.Expression, *keys: str) -> bool:
    """True when ``node`` sets no argument other than ``keys``."""
    return all(k in keys or v in (None, False, []) for k, v in node.args.items())


def lower(name: str) -> str:
    """ASCII lower case, as DuckDB compares unquoted identifiers."""
    return name.translate(_LOWER)


def match(ident: exp.Identifier, names: Iterable[str], what: str) -> str | None:
    """The name in ``names`` that an identifier denotes (DuckDB rules), or None."""
    text = ident.this
    names = list(names)
    if ident.quoted or text in names:
        return text if text in names else None
    hits = [n for n in names if lower(n) == lower(text)]
    if len(hits) > 1:
        raise refused(f"{what} {cut(text)!r} is ambiguous ({show_values(sorted(hits))}); quote it")
    return hits[0] if hits else None
