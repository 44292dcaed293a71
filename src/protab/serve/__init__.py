"""protab's query service for SQL analysts: the SQL validator (the single gate every front uses),
the ASGI app (``create_app``) and its configuration. Needs the ``serve`` extra
(``pip install 'protab[serve]'``)."""

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

_LAZY = {"create_app": "protab.serve.app", "ServeConfig": "protab.serve.config", "load_config": "protab.serve.config",
         "validate": "protab.serve.validator"}
_LAZY.update({name: "protab.serve.query" for name in __all__ if name not in _LAZY})


def __getattr__(name: str) -> object:
    """Names on first use (PEP 562), so that the command line imports neither Starlette nor sqlglot
    (the ``serve`` extra) until the service runs."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'protab.serve' has no attribute {name!r}")
