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
    "ServeConfig",
    "create_app",
    "load_config",
    "validate",
]

_LAZY = {"create_app": "protab.serve.app", "ServeConfig": "protab.serve.config", "load_config": "protab.serve.config"}


def __getattr__(name: str) -> object:
    """The app's names on first use (PEP 562), so that the command line does not import Starlette."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'protab.serve' has no attribute {name!r}")
