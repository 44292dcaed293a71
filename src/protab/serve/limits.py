"""The broker's bounds: a least-recently-used cache of answers (and of flat hierarchies) and a
token bucket per user (the rate limit, ``requests_per_minute``)."""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from typing import Any

from protab.serve.query import QueryThrottled


class LRU:
    """A bounded, thread-safe least-recently-used cache."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._data: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            if key not in self._data:
                return None
            self._data.move_to_end(key)
            return self._data[key]

    def put(self, key: Any, value: Any) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)


class RateLimit:
    """A token bucket per user: ``per_minute`` requests a minute on average, in bursts of up to
    ``per_minute``; 0 turns it off. Thread-safe."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._buckets: dict[str, tuple[float, float]] = {}  # user → (tokens, time of last update)
        self._lock = threading.Lock()

    def admit(self, user: str) -> None:
        if self.per_minute <= 0:
            return
        rate = self.per_minute / 60.0
        with self._lock:
            now = time.monotonic()
            tokens, last = self._buckets.get(user, (float(self.per_minute), now))
            tokens = min(float(self.per_minute), tokens + (now - last) * rate)
            if tokens < 1.0:
                self._buckets[user] = (tokens, now)
                wait = max(1, math.ceil((1.0 - tokens) / rate))
                raise QueryThrottled(
                    f"too many requests: the service answers each user at most {self.per_minute} requests a "
                    f"minute; try again in {wait} s", wait)
            self._buckets[user] = (tokens - 1.0, now)
