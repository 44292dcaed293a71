"""The registry of engines (after Ibis's backend entry points): each engine module registers its
class once, under its :attr:`~protab.engines.Engine.name`, with its option schema
(:attr:`~protab.engines.Engine.options`); ``Session.from_engine(name, **options)`` opens one
by name and refuses an option the engine does not take, naming the engines that do."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from protab.engines.base import SQL_PIECES, Engine
from protab.errors import InputError, show_values

E = TypeVar("E", bound=type[Engine])

_ENGINES: dict[str, type[Engine]] = {}


def register_engine(cls: E) -> E:
    """Register ``cls`` under its ``name`` (a class decorator); its declared data (``dialect``,
    ``options``, ``union_pieces``, every template of :data:`SQL_PIECES`) is checked here, once.
    Registering another class under a taken name is a ValueError."""
    for attr in ("name", "dialect", "options", "templates", "union_pieces"):
        if not hasattr(cls, attr):
            raise TypeError(f"engine {cls.__qualname__} declares no {attr!r}")
    missing = [k for k in SQL_PIECES if k not in cls.templates]
    if missing:
        raise TypeError(f"engine {cls.__qualname__} has no template for {show_values(missing)}")
    known = _ENGINES.get(cls.name)
    if known is not None and known is not cls:
        raise ValueError(f"an engine named {cls.name!r} is registered already ({known.__qualname__})")
    _ENGINES[cls.name] = cls
    return cls


def unregister_engine(name: str) -> None:
    """Remove the engine registered as ``name`` (tests that register one of their own)."""
    _ENGINES.pop(name, None)


def engines() -> dict[str, type[Engine]]:
    """Name → class of every registered engine, in the order they registered."""
    return dict(_ENGINES)


def engine_class(name: str) -> type[Engine]:
    """The engine registered as ``name``; an InputError naming the registered ones otherwise."""
    if not isinstance(name, str) or name not in _ENGINES:
        raise InputError(f"Session: no engine named {name!r}; the registered engines are {show_values(list(_ENGINES))}")
    return _ENGINES[name]


def check_options(cls: type[Engine], options: Mapping[str, Any], where: str = "Session") -> None:
    """An InputError for the first option ``cls`` does not take: it names the option, the engine,
    the options that engine accepts, and the engines that take the option."""
    for option in options:
        if option in cls.options:
            continue
        takes = [n for n, c in _ENGINES.items() if option in c.options]
        elsewhere = f" (an option of the {', '.join(takes)} engine)" if takes else ""
        accepted = ", ".join(repr(o) for o in cls.options) or "none"
        raise InputError(f"{where}: the {cls.name} engine takes no option {option!r}{elsewhere}; "
                         f"options accepted by the {cls.name} engine: {accepted}")


def open_engine(name: str, target: Any = None, **options: Any) -> Engine:
    """The engine registered as ``name`` on ``target``, its ``options`` checked first."""
    cls = engine_class(name)
    check_options(cls, options)
    return cls.connect(target, **options)
