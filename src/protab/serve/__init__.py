"""protab's query service for SQL analysts: the SQL validator (the single gate every front uses)."""

from protab.serve.validator import (
    ALLOWED_FORM,
    DatasetRights,
    Filter,
    Measure,
    Query,
    QueryError,
    QueryForbidden,
    QueryRefused,
    validate,
)

__all__ = [
    "ALLOWED_FORM",
    "DatasetRights",
    "Filter",
    "Measure",
    "Query",
    "QueryError",
    "QueryForbidden",
    "QueryRefused",
    "validate",
]
