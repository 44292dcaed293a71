"""The value types of protab's TOML files (requests, programmes, serve.toml, report requests),
checked before anything runs.

A request (``protab protect``, ``protab report``) is TOML. Each schema below says which keys
a table may hold and the type of each value. :func:`check` refuses unknown keys (naming the
closest valid key), values of the wrong type (naming the key and the type expected), missing
required keys and values outside their allowed set, so that a misspelt ``wieght`` or a string
``"false"`` for a boolean never silently publishes a different table.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from protab.errors import SpecError


class Type:
    """A value type of a request key."""

    name = "value"

    def check(self, value: Any, path: str) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


def fail(path: str, expected: str, value: Any) -> SpecError:
    """The error of a value of the wrong type at ``path`` (a key of a request), naming the type expected."""
    got = type(value).__name__
    got = {"str": "a string", "bool": "a boolean", "int": "an integer", "float": "a number",
           "list": "a list", "dict": "a table"}.get(got, got)
    shown = repr(value) if not isinstance(value, (dict, list)) or len(repr(value)) < 60 else got
    return SpecError(f"request: {path} must be {expected}, not {got} ({shown})")


@dataclass
class Str(Type):
    choices: Sequence[str] | None = None
    nonempty: bool = True

    @property
    def name(self) -> str:  # type: ignore[override]
        if self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        return "a string"

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, str):
            raise fail(path, self.name, value)
        if self.nonempty and not value.strip():
            raise SpecError(f"request: {path} must not be empty")
        if "\x00" in value:
            raise SpecError(f"request: {path} contains a NUL character")
        if self.choices is not None and value not in self.choices:
            close = difflib.get_close_matches(value, list(self.choices), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SpecError(f"request: {path} = {value!r} is not {self.name}{hint}")


@dataclass
class Bool(Type):
    name = "a boolean (true or false, without quotes)"

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, bool):
            raise fail(path, self.name, value)


@dataclass
class Num(Type):
    """A number (integer or float), finite, optionally within [lo, hi]."""

    lo: float | None = None
    hi: float | None = None
    noun: ClassVar[str] = "a number"
    kinds: ClassVar[tuple[type, ...]] = (int, float)

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.noun + _range(self.lo, self.hi)

    def check(self, value: Any, path: str) -> None:
        if isinstance(value, bool) or not isinstance(value, self.kinds):
            raise fail(path, self.name, value)
        value = cast(float, value)  # an int or a float (isinstance of self.kinds narrows to object)
        try:
            finite = math.isfinite(value)
        except OverflowError:  # an integer beyond any float
            finite = isinstance(value, int) and self.kinds == (int,)
        if not finite:
            raise SpecError(f"request: {path} must be a finite number of a sensible size")
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            raise SpecError(f"request: {path} = {value} must be {self.name}")


@dataclass
class Int(Num):
    """A whole number (TOML integer), optionally within [lo, hi]."""

    noun: ClassVar[str] = "an integer"
    kinds: ClassVar[tuple[type, ...]] = (int,)


def _range(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f" from {lo} to {hi}"
    if lo is not None:
        return f" of at least {lo}"
    if hi is not None:
        return f" of at most {hi}"
    return ""


@dataclass
class List(Type):
    item: Type
    nonempty: bool = True
    unique: bool = False

    @property
    def name(self) -> str:  # type: ignore[override]
        if isinstance(self.item, Str) and self.item.choices:
            return "a list of strings, each " + self.item.name
        if isinstance(self.item, Str):
            return 'a list of strings (e.g. ["…"])'
        if isinstance(self.item, Table):
            return "a list of tables (in TOML: [[…]] sections)"
        return f"a list of {_plural(self.item.name)}"

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, list):
            raise fail(path, self.name, value)
        if self.nonempty and not value:
            raise SpecError(f"request: {path} must not be an empty list")
        for k, v in enumerate(value):
            self.item.check(v, f"{path}[{k}]")
        if self.unique:
            seen = [v for k, v in enumerate(value) if v in value[:k]]
            if seen:
                raise SpecError(f"request: {path} names {seen[0]!r} more than once")


def _plural(name: str) -> str:
    for one, many in (("a string", "strings"), ("an integer", "integers"), ("a number", "numbers"),
                      ("a table", "tables"), ("a boolean", "booleans")):
        if name.startswith(one):
            return many + name[len(one):]
    return name


@dataclass
class AnyOf(Type):
    options: Sequence[Type]

    @property
    def name(self) -> str:  # type: ignore[override]
        return " or ".join(o.name for o in self.options)

    def check(self, value: Any, path: str) -> None:
        errors = []
        for o in self.options:
            try:
                o.check(value, path)
                return
            except SpecError as exc:
                errors.append(exc)
        raise fail(path, self.name, value)


@dataclass
class Table(Type):
    """A TOML table with known keys; ``one_of``: exactly one of these keys must be present."""

    keys: Mapping[str, Type]
    required: Sequence[str] = ()
    one_of: Sequence[str] = ()
    doc: str = ""
    name = "a table of keys"

    def check(self, value: Any, path: str) -> None:
        where = path or "the request"
        if not isinstance(value, dict):
            raise fail(path, self.name + (f" ({self.doc})" if self.doc else ""), value)
        for key in value:
            if key not in self.keys:
                close = difflib.get_close_matches(str(key), list(self.keys), n=1, cutoff=0.5)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                exc = SpecError(
                    f"request: unknown key {key!r} in {where}{hint} (valid keys: "
                    f"{', '.join(sorted(self.keys))})"
                )
                exc.unknown_key, exc.where = key, path  # type: ignore[attr-defined]
                raise exc
        for key in self.required:
            if key not in value:
                raise SpecError(f"request: {where} needs the key {key!r}")
        if self.one_of:
            present = [k for k in self.one_of if k in value]
            if len(present) != 1:
                raise SpecError(
                    f"request: {where} needs exactly one of {', '.join(self.one_of)}"
                    + (f" (found {', '.join(present)})" if present else "")
                )
        for key, v in value.items():
            self.keys[key].check(v, f"{path}.{key}" if path else str(key))


@dataclass
class Dict(Type):
    """A TOML table whose keys are names chosen by the user (e.g. hierarchies by dimension)."""

    value: Type
    name = "a table of keys"

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise fail(path, self.name, value)
        for key, v in value.items():
            self.value.check(v, f"{path}.{key}")


@dataclass
class Refused(Type):
    """A key that is understood but not supported yet: a clear error instead of silence."""

    why: str = ""
    name = "(not supported)"

    def check(self, value: Any, path: str) -> None:
        raise SpecError(f"request: {path} is not supported yet: {self.why}")


def check(cfg: Mapping[str, Any], schema: Table) -> None:
    """Raise a :class:`SpecError` naming the first key of ``cfg`` that ``schema`` refuses."""
    try:
        schema.check(dict(cfg), "")
    except SpecError as exc:
        key, where = getattr(exc, "unknown_key", None), getattr(exc, "where", "")
        if key is not None and where and key in schema.keys:
            raise SpecError(
                f"{exc}. In TOML a key written after a [section] header belongs to that section: "
                f"move {key!r} above the first [section]"
            ) from None
        raise


