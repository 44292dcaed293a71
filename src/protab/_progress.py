"""Progress bars for long steps: one library (tqdm), used the same way everywhere.

Bars go to stderr and are shown only when stderr is a terminal (or when ``PROTAB_PROGRESS=1``);
``PROTAB_PROGRESS=0`` silences them. They never show a seed, a record key or a p-table parameter:
callers pass only a short description and counts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


def enabled() -> bool:
    """Whether progress bars are shown: ``PROTAB_PROGRESS`` (0/1) if set, else stderr is a terminal."""
    env = os.environ.get("PROTAB_PROGRESS")
    if env is not None and env.strip() != "":
        return env.strip().lower() not in ("0", "false", "no", "off")
    return sys.stderr.isatty()


def track(iterable: Iterable[T], desc: str, total: int | None = None, unit: str = "it") -> Iterator[T]:
    """Iterate over ``iterable`` with a progress bar (silent when not shown)."""
    if not enabled():
        yield from iterable
        return
    from tqdm.auto import tqdm

    yield from tqdm(iterable, desc=desc, total=total, unit=unit, file=sys.stderr, leave=False,
                    dynamic_ncols=True)


@contextmanager
def bar(desc: str, total: int | None = None, unit: str = "it") -> Iterator[Any]:
    """A progress bar to advance by hand: ``with bar("IPF", total=n) as b: b.update(1)``.

    Yields an object with ``update(n)`` and ``set_postfix_str(s)``; a no-op one when bars are
    not shown.
    """
    if not enabled():
        yield _Silent()
        return
    from tqdm.auto import tqdm

    with tqdm(desc=desc, total=total, unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True) as b:
        yield b


class _Silent:
    def update(self, n: int = 1) -> None:
        """Nothing to show."""

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        """Nothing to show."""
