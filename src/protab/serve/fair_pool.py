"""The broker's sessions, handed out fairly between users.

A request borrows one of the broker's DuckDB sessions for its scan. When every session is busy
the request waits; the waiting requests are served *by user in turn*: a session given back goes
to the waiting user who was served least recently, and each user's own requests in the order
they came. One user's many heavy requests (GROUPING SETS over every dimension, say) then take
the sessions one at a time with everybody else's: another user's small query waits at most until
one session is given back, however many heavy requests are queued before it — the fair queueing
of network schedulers (round robin over flows; Demers, Keshav and Shenker 1989), with the
session as the resource. And one user's requests hold at most ``per_user`` sessions at once
(``sessions_per_user``, default one fewer than the sessions): one session is always left to the
other users, so that their request starts at once instead of after one of his. Requests of
nobody in particular (start-up, warm-up) count as one user, without that bound.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class _Waiter(Generic[T]):
    """One waiting request: set when a session is handed to it."""

    ready: threading.Event = field(default_factory=threading.Event)
    item: T | None = None


class FairPool(Generic[T]):
    """A pool of items (sessions): :meth:`get` one for a user, :meth:`put` it back. Thread-safe.
    A free item is taken at once (the one given back last: its caches are warm) by a user who
    holds fewer than ``per_user`` items; otherwise the request waits, and :meth:`put` hands the
    item to the oldest request of the waiting user served least recently among those below
    ``per_user`` (a user never served first, then in the order users began to wait). With
    ``per_user`` below the number of items, one user alone never holds them all: another
    user's request finds an item at once."""

    def __init__(self, per_user: int | None = None) -> None:
        self.per_user = per_user
        self._lock = threading.Lock()
        self._free: list[T] = []
        self._waiting: dict[str | None, deque[_Waiter[T]]] = {}  # user → requests, oldest first
        self._served: dict[str | None, int] = {}  # user → the tick of the last item given to them
        self._held: dict[str | None, int] = {}  # user → items lent out to them
        self._ticks = itertools.count()

    def _may(self, user: str | None) -> bool:
        """Whether ``user`` may take one more item (requests of nobody in particular always may)."""
        return self.per_user is None or user is None or self._held.get(user, 0) < self.per_user

    def _lend(self, user: str | None) -> None:
        self._served[user] = next(self._ticks)
        self._held[user] = self._held.get(user, 0) + 1

    def add(self, item: T) -> None:
        """A new item (none is lent out with it)."""
        self._give(item)

    def put(self, item: T, user: str | None = None) -> None:
        """Give back an item ``user`` had: to the next waiting request in turn, else to the free ones."""
        with self._lock:
            left = self._held.get(user, 0) - 1
            if left > 0:
                self._held[user] = left
            else:
                self._held.pop(user, None)
        self._give(item)

    def _give(self, item: T) -> None:
        with self._lock:
            eligible = [u for u in self._waiting if self._may(u)]
            if not eligible:
                self._free.append(item)
                return
            user = min(eligible, key=lambda u: self._served.get(u, -1))  # ties: who waited first
            queue = self._waiting[user]
            waiter = queue.popleft()
            if not queue:
                del self._waiting[user]
            self._lend(user)
            waiter.item = item
        waiter.ready.set()

    def get(self, user: str | None = None) -> T:
        """An item for ``user``'s request, waiting for one in turn when none is free (or the user
        holds ``per_user`` already)."""
        with self._lock:
            if self._free and self._may(user):
                self._lend(user)
                return self._free.pop()
            waiter: _Waiter[T] = _Waiter()
            self._waiting.setdefault(user, deque()).append(waiter)
        waiter.ready.wait()
        assert waiter.item is not None
        return waiter.item

    def waiting(self, user: str | None = None) -> int:
        """Requests waiting for an item (of ``user`` only, when given)."""
        with self._lock:
            if user is not None:
                return len(self._waiting.get(user, ()))
            return sum(map(len, self._waiting.values()))

    def free(self) -> int:
        """Items not lent out."""
        with self._lock:
            return len(self._free)
