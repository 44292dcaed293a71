"""The benchmarks' shared record of what they measured: one CSV row per measured case.

Each scale benchmark given ``--record`` appends its rows to ``benchmarks/measurements.csv``
(or the file named), and ``benchmarks/plot_performance.py`` draws docs/performance.png and the
table of docs/performance.md from that file. A row is one method at one size on one engine:
protab's time beside the *floor* (the cheapest query any design must run for the same cells,
measured in the same process) and, where one ran, a peer (R) on the same data. The machine's
cores and its load average at the time are kept with the row, since the machines are shared.

Appending is safe when two benchmarks run at once: the row is written under an exclusive
lock of the file (``fcntl.flock``), with the header when the file is new.
"""

from __future__ import annotations

import csv
import datetime as dt
import fcntl
import os
from pathlib import Path
from typing import Any

#: the default file, beside this module
DEFAULT = Path(__file__).resolve().parent / "measurements.csv"

COLUMNS = ("date", "benchmark", "method", "engine", "records", "inner_cells", "published_cells",
           "protab_s", "floor", "floor_s", "ratio", "groupby_s", "peer", "peer_s", "peak_rss_gib", "cores", "load1")


def load1() -> float:
    """The machine's one-minute load average (0 where unknown)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def row(benchmark: str, method: str, engine: str, records: float | None, protab_s: float, floor: str,
        floor_s: float, **extra: Any) -> dict[str, Any]:
    """One measured case; ``ratio`` is protab's time over the floor's."""
    out: dict[str, Any] = dict.fromkeys(COLUMNS, "")
    out.update(date=dt.datetime.now(dt.timezone.utc).date().isoformat(), benchmark=benchmark, method=method,
               engine=engine, records="" if records is None else int(records), protab_s=round(protab_s, 4),
               floor=floor, floor_s=round(floor_s, 4), ratio=round(protab_s / floor_s, 3),
               cores=os.cpu_count() or "", load1=round(load1(), 2))
    unknown = set(extra) - set(COLUMNS)
    if unknown:
        raise ValueError(f"unknown measurement column(s): {sorted(unknown)}")
    out.update({k: (round(v, 4) if isinstance(v, float) else v) for k, v in extra.items()})
    return out


def append(path: str | os.PathLike[str] | None, rows: list[dict[str, Any]]) -> Path:
    """Append ``rows`` to the CSV at ``path`` (default :data:`DEFAULT`) under a lock."""
    target = Path(path) if path else DEFAULT
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "a+", newline="", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            fh.seek(0, os.SEEK_END)
            writer = csv.DictWriter(fh, fieldnames=COLUMNS)
            if fh.tell() == 0:
                writer.writeheader()
            writer.writerows(rows)
            fh.flush()
            os.fsync(fh.fileno())
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
    return target


def add_option(parser: Any) -> None:
    """``--record [FILE]`` for a benchmark's argument parser."""
    parser.add_argument("--record", nargs="?", const=str(DEFAULT), default=None, metavar="FILE",
                        help=f"append the measured rows to this CSV (default {DEFAULT.name} beside the "
                             "benchmarks), read by plot_performance.py")
