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
_ECHO = 200  # characters of the analyst's SQL echoed in a message
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


class QueryError(SpecError):
    """An analyst's query that the service does not answer; ``status`` is its HTTP status."""

    status = 400


class QueryRefused(QueryError):
    """HTTP 400: the query is not of the allowed form, or names an unknown dataset or column."""

    status = 400


class QueryForbidden(QueryError):
    """HTTP 403: a well-formed query that uses a dataset, dimension or measure outside the user's rights."""

    status = 403


class QueryThrottled(QueryError):
    """HTTP 429: the user has sent more requests than the service's per-user rate allows;
    ``retry_after``: whole seconds until the next one is admitted."""

    status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


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


def cut(text: str, limit: int = _ECHO) -> str:
    """``text``, cut to ``limit`` characters for a message."""
    return text if len(text) <= limit else text[:limit] + "…"


def refused(message: str) -> QueryRefused:
    """A refusal (400) that shows the allowed form after its message."""
    return QueryRefused(f"{message}. {ALLOWED_FORM}")


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
