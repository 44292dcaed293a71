"""Benchmark: one user's heavy GROUPING SETS queries against another user's small query.

    nice python benchmarks/serve_fairness.py --db protab.duckdb      # a `protab demo` database
    nice python benchmarks/serve_fairness.py --persons 1e6 --heavy 8 --rounds 5

The database (a `protab demo` file, or one made in --folder) is served by `python -m protab.serve`
on a free 127.0.0.1 port with the answer cache off and `sessions` read-only sessions (default 4).
User ``heavy`` sends ``--heavy`` GROUPING SETS queries at once (municipality by age group by sex,
with their margins: about 23,000 cells each, read from the records); 0.3 s later user ``light``
sends one small query (counts by sex). Printed per round: the small query's latency, and the
heavy ones'; then the small query alone, a heavy one alone, and the medians. With sessions handed
out by user in turn (protab.serve.fair_pool) the small query waits for one heavy query to end,
not for every heavy query queued before it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from serve_load import AGEGROUPS, declare_codes, demo_database

CONFIG = """\
database = "{db}"
audit_log = "audit.jsonl"
threshold = 3
max_cells = 200000
sessions = {sessions}
cache_size = 0
requests_per_minute = 0

[ptable]
maximum_entropy = {{ D = 5, V = 3, js = 2 }}

[datasets.persons]
dims = ["region", "municipality", "sex", "agegroup"]
hierarchies = {{ municipality = ["region", "municipality"] }}
codes = {{ sex = ["F", "M"], agegroup = {agegroups} }}
codes_file = {{ municipality = "municipalities.csv" }}

[users.heavy]
datasets = ["persons"]
token_sha256 = "{heavy}"
[users.light]
datasets = ["persons"]
token_sha256 = "{light}"
"""
TOKENS = {"heavy": "bench-heavy-token", "light": "bench-light-token"}
HEAVY = ("SELECT municipality, agegroup, sex, count(*) AS n FROM persons GROUP BY GROUPING SETS "
         "((municipality, agegroup, sex), (municipality, agegroup), (municipality, sex), (municipality), ())")
SMALL = "SELECT sex, count(*) AS n FROM persons GROUP BY sex"


def _post(url: str, user: str, sql: str) -> float:
    """Seconds to answer ``sql`` for ``user`` (200 expected)."""
    t0 = time.perf_counter()
    r = httpx.post(url + "/v1/query", json={"sql": sql}, timeout=600,
                   headers={"Authorization": f"Bearer {TOKENS[user]}"})
    dt = time.perf_counter() - t0
    if r.status_code != 200:
        raise SystemExit(f"{user}: {r.status_code} {r.text[:300]}")
    return dt


#: the heavy user's client: its own process (so that its threads do not slow the small query's client)
_HEAVY_CLIENT = """
import sys, threading, time, httpx
url, token, sql, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
times = []
def one():
    t0 = time.perf_counter()
    r = httpx.post(url + "/v1/query", json={"sql": sql}, timeout=600, headers={"Authorization": "Bearer " + token})
    assert r.status_code == 200, r.text[:300]
    times.append(time.perf_counter() - t0)
threads = [threading.Thread(target=one) for _ in range(n)]
for t in threads:
    t.start()
print("sent", flush=True)
for t in threads:
    t.join()
print(" ".join(f"{t:.3f}" for t in times), flush=True)
"""


def _round(url: str, heavy: int) -> tuple[float, list[float]]:
    """``heavy`` heavy queries at once (from another process), then the small one: (its latency, theirs)."""
    proc = subprocess.Popen([sys.executable, "-c", _HEAVY_CLIENT, url, TOKENS["heavy"], HEAVY, str(heavy)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "sent"
    time.sleep(0.3)  # they hold the sessions they may and the rest wait
    small = _post(url, "light", SMALL)
    times = [float(t) for t in proc.stdout.readline().split()]
    proc.wait(60)
    return small, times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", help="a protab demo database (else one of --persons is made in --folder)")
    p.add_argument("--persons", type=float, default=1e6)
    p.add_argument("--folder", default=str(Path(tempfile.gettempdir()) / "protab-bench"))
    p.add_argument("--heavy", type=int, default=8, help="heavy queries sent at once (default 8)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--sessions", type=int, default=4)
    args = p.parse_args()
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    db = str(Path(args.db).resolve()) if args.db else demo_database(folder, int(args.persons))
    with tempfile.TemporaryDirectory(prefix="protab-fair-") as tmp:
        run = Path(tmp)
        declare_codes(run)
        sha = {u: hashlib.sha256(t.encode()).hexdigest() for u, t in TOKENS.items()}
        (run / "serve.toml").write_text(CONFIG.format(db=db, sessions=args.sessions, agegroups=json.dumps(AGEGROUPS),
                                                      **sha), encoding="utf-8")
        with socket.socket() as sock:  # a free port
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "protab.serve", "--config", str(run / "serve.toml"),
                                 "--port", str(port)], cwd=run, stderr=subprocess.PIPE, text=True)
        try:
            while True:
                try:
                    if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    if proc.poll() is not None:
                        raise SystemExit(proc.stderr.read() if proc.stderr else "the service did not start") from None
                    time.sleep(0.1)
            print(f"service up in {time.perf_counter() - t0:.1f} s over {db}")
            alone_small = min(_post(url, "light", SMALL) for _ in range(5))
            alone_heavy = min(_post(url, "heavy", HEAVY) for _ in range(2))
            smalls, heavies = [], []
            for k in range(args.rounds):
                small, times = _round(url, args.heavy)
                smalls.append(small)
                heavies += times
                print(f"round {k + 1}: small query {small:.2f} s; heavy queries {min(times):.2f}-{max(times):.2f} s")
            print(f"alone: small query {alone_small:.3f} s, heavy query {alone_heavy:.2f} s")
            print(f"under load ({args.heavy} heavy at once, {args.sessions} sessions): small query median "
                  f"{statistics.median(smalls):.2f} s, max {max(smalls):.2f} s; heavy median "
                  f"{statistics.median(heavies):.2f} s, max {max(heavies):.2f} s")
            audit = [json.loads(x) for x in (run / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
            light = [x["ms"] / 1000 for x in audit if x["user"] == "light"][5:]
            print("the small query in the service (the audit log's ms, from its arrival to its answer): "
                  + ", ".join(f"{t:.2f} s" for t in light))
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
