"""Benchmark: two checkouts of protab taking turns on the same magnitude table, to tell a change
of a few per cent from the noise of a shared machine.

    python benchmarks/turns.py --before ../old/src --after src --size 1e6 --rounds 6

A single run says little on a shared two-core machine (the same code measured 13.3 s and 18.9 s
at 1e7 records within the hour). Here each checkout runs in its own process, both alive at the
same time, each with its own copy of the table of magnitude_scale.py; they run
``Session.cell_key`` (magnitudes and rules) one after the other, turn by turn, passing a turn
file, so both see the same machine. Printed per checkout: every time, the minimum and the
median. Make the ``--before`` checkout with ``git worktree add ../old <commit>``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def player(me: str, other: str, n: int, rounds: int, turn: Path) -> None:
    """One side: make the table, then run the magnitude table at each of its turns."""
    sys.path.insert(0, str(Path(__file__).parent))
    from magnitude_scale import table

    import protab as pt

    with pt.Session(":memory:", progress=False) as s:
        spec, p, magnitude, rules = table(s, n)
        (turn.parent / f"{me}.ready").write_text("")
        times = []
        for _ in range(rounds):
            while turn.read_text().strip() != me:
                time.sleep(0.05)
            t = time.perf_counter()
            s.cell_key("t", spec, p, magnitude=magnitude, rules=rules)
            times.append(time.perf_counter() - t)
            tmp = turn.with_suffix(".tmp")
            tmp.write_text(other)
            os.replace(tmp, turn)
    ordered = sorted(times)
    print(f"{me:7s} {pt.__file__}\n        times {' '.join(f'{x:.2f}' for x in times)}  "
          f"min {ordered[0]:.2f}  median {ordered[len(ordered) // 2]:.2f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the src folder of the checkout before the change")
    ap.add_argument("--after", default=str(Path(__file__).parents[1] / "src"), help="the src folder after it")
    ap.add_argument("--size", type=float, default=1e6)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--player", nargs=3, help=argparse.SUPPRESS)  # me, other, turn file
    args = ap.parse_args()
    if args.player:
        me, other, turn = args.player
        player(me, other, int(args.size), args.rounds, Path(turn))
        return
    with tempfile.TemporaryDirectory() as tmp:
        turn = Path(tmp) / "turn"
        turn.write_text("wait")
        procs = [subprocess.Popen([sys.executable, __file__, "--before", args.before, "--size", str(args.size),
                                   "--rounds", str(args.rounds), "--player", me, other, str(turn)],
                                  env={**os.environ, "PYTHONPATH": str(Path(src).resolve())})
                 for me, other, src in (("before", "after", args.before), ("after", "before", args.after))]
        while not all((Path(tmp) / f"{me}.ready").exists() for me in ("before", "after")):
            if any(p.poll() not in (None, 0) for p in procs):
                raise SystemExit("a side stopped before its table was made")
            time.sleep(0.2)
        turn.write_text("after")
        codes = [p.wait() for p in procs]
        if any(codes):
            raise SystemExit(f"a side failed (exit codes {codes})")


if __name__ == "__main__":
    main()
