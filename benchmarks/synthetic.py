"""What several benchmarks share: the synthetic population of municipality (8 regions × 50),
age group (18) and occupation, drawn from DuckDB's ``hash`` of the row number (skewed as real
registers are), and the best-of-n timer."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

_POPULATION = """SELECT range AS pid,
       'R' || CAST(m % 8 + 1 AS VARCHAR) || lpad(CAST(m // 8 + 1 AS VARCHAR), 3, '0') AS m,
       lpad(CAST(a AS VARCHAR), 2, '0') AS a,
       'O' || lpad(CAST(o AS VARCHAR), 2, '0') AS o{extra}
FROM (
    SELECT range,
           CAST(floor(400 * pow((hash(range * 3) % 1000003) / 1000003.0, 2)) AS INTEGER) AS m,
           CAST(floor(18 * (hash(range * 3 + 1) % 1000003) / 1000003.0) AS INTEGER) AS a,
           CAST(floor({occupations} * pow((hash(range * 3 + 2) % 1000003) / 1000003.0, 1.5)) AS INTEGER) AS o
    FROM range({n})
)"""


def population_sql(n: str, occupations: str = "40", extra: str = "") -> str:
    """DuckDB SELECT of the population: ``n`` rows and ``occupations`` codes, as SQL text (a
    number, ``?``, or a ``{name}`` left for a later ``str.format``); ``extra``: more columns
    (``, expr AS name`` …) computed from ``range``."""
    return _POPULATION.format(n=n, occupations=occupations, extra=extra)


def best(fn: Callable[[], Any], repeat: int, *, warm: bool = True) -> tuple[float, Any]:
    """The least wall time of ``repeat`` calls of ``fn`` (after one untimed call when ``warm``),
    and the last call's result."""
    out = fn() if warm else None
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out
