"""Old names kept for one release: a module's ``__getattr__`` that returns the new object and
warns, naming the new name (docs/design.md, "One name per idea")."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any


def renamed(module: str, aliases: dict[str, tuple[str, Any]]) -> Callable[[str], Any]:
    """``__getattr__`` for ``module``: ``aliases`` maps an old name to (its new name, the object)."""

    def __getattr__(name: str) -> Any:
        if name in aliases:
            new, obj = aliases[name]
            warnings.warn(f"{module}.{name} is deprecated; use {module}.{new}", DeprecationWarning, stacklevel=2)
            return obj
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
