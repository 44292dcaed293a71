"""Benchmark: the query service under load, against Session.cell_key in-process.

    nice python benchmarks/serve_load.py                     # 1e6 persons, 8 clients, 20 s
    nice python benchmarks/serve_load.py --large             # 1e7 persons
    nice python benchmarks/serve_load.py --persons 2e5 --clients 4 --duration 10

A demo database (`protab demo --persons N --db FILE`, kept in --folder and reused) is served by
`python -m protab.serve` on a free 127.0.0.1 port (only there). N client threads (at most 64)
send a mix of SQL queries and table requests for `--duration` seconds (at most 600) or until
`--max-requests`: tables from 27 to about 7,200 cells (municipality x agegroup), four kinds of
counts and one of means (avg(income)), in forms the service accepts (one-value filters on other
dimensions, several values only on a grouped dimension) and one of custom age groups (judged by
the differencing rule, then computed by Session.cell_key_groups; its baseline is cell_key with the
groups as a level of the age hierarchy), with filters drawn at random so that
most requests differ (the answer cache is off unless `--cache N`; answers are deterministic, so a
cache only hides the work). Prints throughput, p50/p95/max latency, the error count, and per
query kind the ratio of its latency alone (one client, best of --repeat, each with new filters)
to `Session.cell_key` of the same table on the records in this process (best of --repeat, after a
warm-up). The service answers counts and means from the key sums of the dataset's dims (Session.key_sums
with the measures' sums and top lists, the same numbers), so its queries can beat cell_key on the records.

    nice python benchmarks/serve_load.py --jobs 2            # and a second phase with 2 job clients

With ``--jobs J`` the service runs requests above ``job_cells`` (10,000) as jobs, and the load runs
twice for ``--duration``: the small requests alone, then the same clients while J more clients
each submit a job (municipality x agegroup x sex with the region level, about 24,000 cells), poll it
until it is done (``Retry-After``, at most 0.5 s) and submit the next. It prints the p95 of the small
requests, counts and means apart, in both phases, and the jobs' times (submission to answer).
``--threads N`` and ``--job-workers N`` set the server's ``threads`` and ``job_workers``.
``--record [FILE]`` appends one row per phase and kind to benchmarks/measurements.csv
(benchmarks/measurements.py): method ``service p95 counts`` / ``service p95 means`` (``... with
jobs`` in the second phase, ``service job`` for the jobs' median), ``protab_s`` the p95 under load,
``floor`` ``the same request answered alone`` with ``floor_s`` the slowest of the kind's requests
answered alone (one client, best of --repeat), ``published_cells`` the largest answer of the kind.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import measurements

import protab as pt

THRESHOLD, MIN_POPULATION = 3, 10
CONFIG = """\
database = "{db}"
audit_log = "audit.jsonl"
tokens_file = "tokens.json"
threshold = {threshold}
min_population = {min_population}
max_cells = 50000
sessions = {sessions}
{threads}
job_cells = {job_cells}
job_workers = {job_workers}
cache_size = {cache}
requests_per_minute = 0

[ptable]
maximum_entropy = {{ D = 5, V = 3, js = 2 }}

[datasets.persons]
dims = ["region", "municipality", "sex", "agegroup"]
measures = ["income"]
hierarchies = {{ municipality = ["region", "municipality"] }}
codes = {{ sex = ["F", "M"], agegroup = {agegroups} }}
codes_file = {{ municipality = "municipalities.csv" }}
[datasets.persons.magnitude]
ptable = {{ maximum_entropy = {{ D = 10, V = 3, step = 2, icat = [1, 5, 10], optim = 4 }} }}
fp = 1000

[users.bench]
datasets = ["persons"]
"""


AGEGROUPS = ["00-04", "05-09", "10-14", "15-19", "20-24", "25-29", "30-34", "35-39", "40-44", "45-49",
             "50-54", "55-59", "60-64", "65-69", "70-74", "75-79", "80-84", "85+"]


def declare_codes(run: Path) -> None:
    """The demo's classification of municipalities (from its generator, not its records), as the
    service requires declared code lists (docs/serve.md)."""
    from protab import Session, sql_text

    with Session(":memory:", progress=False) as s:
        s.con.execute(sql_text("demo_population.sql"))
        s.sql("SELECT region, municipality FROM protab_demo_towns() ORDER BY municipality").write_csv(
            run / "municipalities.csv")


def demo_database(folder: Path, persons: int) -> str:
    db = folder / f"demo-{persons}.duckdb"
    if not db.exists():
        print(f"generating {persons:,} persons with `protab demo` into {db} …", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "protab.cli", "demo", "--persons", str(persons), "--db", str(db),
                        "--out", str(folder / f"demo-{persons}-tables")], check=True, stdout=subprocess.DEVNULL)
    return str(db)


def kinds(codes: dict[str, list[str]]):
    """Query kinds: (name, make a request body from a Random, the same table as a TableSpec)."""
    ages, regions = codes["agegroup"], codes["region"]

    def cube(rng):
        return "/v1/query", {"sql": "SELECT region, sex, count(*) FROM persons GROUP BY CUBE(region, sex)"}

    def muni_age(rng):
        sex = rng.choice(codes["sex"])
        return "/v1/query", {"sql": "SELECT municipality, agegroup, count(*) AS n FROM persons "
                                    f"WHERE sex = '{sex}' GROUP BY municipality, agegroup"}

    def muni_sex_rollup(rng):
        age = rng.choice(ages)
        return "/v1/query", {"sql": f"SELECT municipality, sex, count(*) FROM persons WHERE agegroup = '{age}' "
                                    "GROUP BY ROLLUP(municipality, sex) ORDER BY municipality LIMIT 5000"}

    def age_income(rng):
        r = rng.choice(regions)
        return "/v1/query", {"sql": "SELECT agegroup, sex, count(*), avg(income) FROM persons "
                                    f"WHERE region = '{r}' GROUP BY agegroup, sex"}

    def table(rng):
        drop = rng.choice(ages)
        return "/v1/table", {"dataset": "persons", "dims": ["municipality", "agegroup"],
                             "filters": {"agegroup": [a for a in ages if a != drop]}}

    def groups(rng):  # custom groups: the differencing rule judges them (serve/groups.py) before the table
        return "/v1/table", {"dataset": "persons", "dims": ["agegroup", "sex"], "groups": {"agegroup": age_groups},
                             "filters": {"region": [rng.choice(regions)]}}

    age_groups = {"0-14": ages[:3], "15-64": ages[3:13], "65+": ages[13:]}
    h_groups = pt.Hierarchy.from_parent_child([(g, a) for g, members in age_groups.items() for a in members])

    def spec_of(name, h_mun):
        return {
            "cube": pt.TableSpec({"region": regions, "sex": codes["sex"]}),
            "muni_age": pt.TableSpec({"municipality": codes["municipality"], "agegroup": ages},
                                     where=[("sex", "in", [codes["sex"][0]])]),
            "muni_sex_rollup": pt.TableSpec({"municipality": codes["municipality"], "sex": codes["sex"]},
                                            where=[("agegroup", "in", ages[:1])]),
            "age_income": pt.TableSpec({"agegroup": ages, "sex": codes["sex"]}, sums=["income"],
                                       where=[("region", "in", [regions[0]])]),
            "table": pt.TableSpec({"municipality": h_mun, "agegroup": ages[1:]},
                                  where=[("agegroup", "in", ages[1:])]),
            "groups": pt.TableSpec({"agegroup": h_groups, "sex": codes["sex"]}, where=[("region", "in", [regions[0]])]),
        }[name]

    return [("cube", cube), ("muni_age", muni_age), ("muni_sex_rollup", muni_sex_rollup),
            ("age_income", age_income), ("table", table), ("groups", groups)], spec_of


JOB_CELLS = 10000


def job_request(rng):
    """A request above JOB_CELLS (about 24,000 cells): the service answers it as a job."""
    return {"dataset": "persons", "dims": rng.choice([["municipality", "agegroup", "sex"],
                                                      ["municipality", "sex", "agegroup"]])}


def run_load(url, headers, mix, clients, jobs, duration, max_requests):
    """``clients`` threads send the mix, ``jobs`` more submit jobs and poll them, for ``duration``
    seconds or ``max_requests`` small requests: (latencies per kind, errors, job times, wall, the
    one-minute load average at the end)."""
    latencies: dict[str, list[float]] = {name: [] for name, _ in mix}
    errors: list[str] = []
    job_times: list[float] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + duration
    sent = [0]

    def client(k: int) -> None:
        rng = random.Random(k)
        with httpx.Client(base_url=url, headers=headers, timeout=120) as c:
            while time.monotonic() < stop_at:
                with lock:
                    if sent[0] >= max_requests:
                        return
                    sent[0] += 1
                name, make = rng.choice(mix)
                path, body = make(rng)
                t0 = time.perf_counter()
                try:
                    r = c.post(path, json=body)
                    ok, why = r.status_code == 200, f"{r.status_code} {r.text[:200]}"
                except httpx.HTTPError as exc:
                    ok, why = False, type(exc).__name__
                dt = time.perf_counter() - t0
                with lock:
                    latencies[name].append(dt)
                    if not ok:
                        errors.append(why)

    def job_client(k: int) -> None:
        rng = random.Random(10_000 + k)
        with httpx.Client(base_url=url, headers=headers, timeout=120) as c:
            while time.monotonic() < stop_at and sent[0] < max_requests:
                t0 = time.perf_counter()
                r = c.post("/v1/table", json=job_request(rng))
                if r.status_code != 202:
                    with lock:
                        errors.append(f"job: {r.status_code} {r.text[:200]}")
                    return
                where = r.headers["Location"]
                while (r := c.get(where)).status_code == 202:
                    time.sleep(min(0.5, float(r.headers.get("Retry-After", 1))))
                with lock:
                    if r.status_code == 200:
                        job_times.append(time.perf_counter() - t0)
                    else:
                        errors.append(f"job: {r.status_code} {r.text[:200]}")

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    threads += [threading.Thread(target=job_client, args=(k,)) for k in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, errors, job_times, time.perf_counter() - t0, measurements.load1()


def p95(values):
    values = sorted(values)
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100)[94] if len(values) > 1 else values[0]


def report(phase, persons, latencies, errors, job_times, wall, load, alone, record_rows):
    """Print one phase of the load; append its rows (measurements.row) to ``record_rows``."""
    lat = sorted(x for xs in latencies.values() for x in xs)
    if not lat:
        print(f"{phase}: no requests answered")
        return
    p = statistics.quantiles(lat, n=100) if len(lat) > 1 else lat * 99
    print(f"{phase}: requests {len(lat):,} in {wall:.1f} s  throughput {len(lat) / wall:.1f}/s  "
          f"p50 {1000 * p[49]:.0f} ms  p95 {1000 * p[94]:.0f} ms  max {1000 * lat[-1]:.0f} ms  "
          f"errors {len(errors)}  load {load:.2f}")
    for e in errors[:5]:
        print("  error:", e)
    suffix = " with jobs" if job_times else ""
    for group, names in (("counts", [n for n in latencies if n != "age_income"]), ("means", ["age_income"])):
        xs = [x for n in names for x in latencies[n]]
        if not xs:
            continue
        floor = max(alone[n][0] for n in names)
        print(f"  {group}: {len(xs):,} requests, p95 {1000 * p95(xs):.0f} ms (slowest alone {1000 * floor:.0f} ms)")
        record_rows.append(measurements.row(
            "serve_load", f"service p95 {group}{suffix}", "duckdb", persons, p95(xs),
            "the same request answered alone", floor, published_cells=max(alone[n][1] for n in names),
            load1=round(load, 2)))
    if job_times:
        jt = sorted(job_times)
        print(f"  jobs: {len(jt)} done, median {jt[len(jt) // 2]:.1f} s, max {jt[-1]:.1f} s")
        record_rows.append(measurements.row(
            "serve_load", "service job", "duckdb", persons, statistics.median(jt),
            "the slowest small request answered alone", max(a for a, _ in alone.values()), load1=round(load, 2)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--persons", type=float, default=1e6)
    ap.add_argument("--large", action="store_true", help="1e7 persons")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=0, help="clients submitting jobs in a second phase (0: none)")
    ap.add_argument("--duration", type=float, default=20.0, help="seconds of load per phase (at most 600)")
    ap.add_argument("--max-requests", type=int, default=5000, help="small requests per phase")
    ap.add_argument("--sessions", type=int, default=4, help="read-only sessions of the server")
    ap.add_argument("--threads", type=int, default=None, help="DuckDB threads of the server (default: the cores)")
    ap.add_argument("--job-workers", type=int, default=2, help="the server's job_workers (default 2)")
    ap.add_argument("--cache", type=int, default=0, help="answer cache size of the server (default 0: off)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--folder", default=str(Path(tempfile.gettempdir()) / "protab-serve-bench"))
    measurements.add_option(ap)
    args = ap.parse_args()
    persons = int(1e7 if args.large else args.persons)
    clients = max(1, min(args.clients, 64))
    jobs = max(0, min(args.jobs, 4))  # jobs_per_user: 4
    duration = max(1.0, min(args.duration, 600.0))
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    db = demo_database(folder, persons)

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from serve_fixtures import Server  # the tests' server runner: a subprocess on a free 127.0.0.1 port

    from protab.serve import auth
    from protab.serve.config import load_config

    run = Path(tempfile.mkdtemp(prefix="run-", dir=folder))
    config = run / "serve.toml"
    declare_codes(run)
    config.write_text(CONFIG.format(db=db, threshold=THRESHOLD, min_population=MIN_POPULATION,
                                    sessions=args.sessions, cache=args.cache,
                                    threads=f"threads = {args.threads}" if args.threads else "", agegroups=json.dumps(AGEGROUPS),
                                    job_cells=JOB_CELLS if jobs else 0, job_workers=args.job_workers))
    _, token = auth.add_token(load_config(config, database=":memory:"), "bench")
    with pt.Session(db, read_only=True) as s:
        codes = {c: s.codes("persons", c) for c in ("region", "municipality", "sex", "agegroup")}
        h_mun = s.hierarchy_from_columns("persons", ["region", "municipality"])
    mix, spec_of = kinds(codes)
    headers = {"Authorization": f"Bearer {token}"}

    server = Server(config, timeout=600)
    try:
        alone = answered_alone(server.url, headers, mix, args.repeat)
        inproc = in_process(db, mix, spec_of, h_mun, args.repeat)
        phases = [("small requests alone", run_load(server.url, headers, mix, clients, 0, duration,
                                                     args.max_requests))]
        if jobs:
            phases.append((f"with {jobs} job clients", run_load(server.url, headers, mix, clients, jobs, duration,
                                                                args.max_requests)))
    finally:
        server.stop()

    print(f"persons {persons:,}; {clients} clients, {args.sessions} server sessions, answer cache "
          f"{args.cache or 'off'}; {os.cpu_count()} cores")
    rows: list[dict] = []
    for phase, result in phases:
        report(phase, persons, *result, alone, rows)
    print(f"{'query':<18}{'cells':>7}{'alone ms':>10}{'cell_key ms':>13}{'ratio':>8}")
    for name, _ in mix:
        best, cells = alone[name]
        print(f"{name:<18}{cells:>7}{1000 * best:>10.0f}{1000 * inproc[name]:>13.0f}{best / inproc[name]:>8.2f}")
    if args.record:
        print("recorded in", measurements.append(args.record, rows))


def answered_alone(url, headers, mix, repeat):
    """One client alone, per kind: (best latency, cells), each request with new filters."""
    alone = {}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as c:
        for name, make in mix:
            best, cells = float("inf"), 0
            for k in range(repeat + 1):
                path, body = make(random.Random(1000 + k))  # new filters: the population rule's scan counts
                t0 = time.perf_counter()
                r = c.post(path, json=body)
                best = min(best, time.perf_counter() - t0)
                if r.status_code != 200:
                    raise SystemExit(f"{name}: {r.status_code} {r.text[:300]} for {body}")
                cells = len(r.json()["rows"])
            alone[name] = (best, cells)
    return alone


def in_process(db, mix, spec_of, h_mun, repeat):
    """Session.cell_key of each kind's table on the records in this process: best of ``repeat``."""
    from protab.request.loaders import load_magnitude

    ptable = pt.PTable.maximum_entropy(D=5, V=3, js=2)
    magnitude = load_magnitude({"ptable": {"maximum_entropy": {"D": 10, "V": 3, "step": 2, "icat": [1, 5, 10],
                                                               "optim": 4}}, "fp": 1000}, Path("."))
    inproc = {}
    with pt.Session(db, read_only=True, progress=False) as s:
        for name, _ in mix:
            spec = spec_of(name, h_mun)
            kw = {"magnitude": magnitude} if spec.sums else {}
            best = float("inf")
            for _ in range(repeat + 1):
                t0 = time.perf_counter()
                s.cell_key("persons", spec, ptable, threshold=THRESHOLD, **kw)
                best = min(best, time.perf_counter() - t0)
            inproc[name] = best
    return inproc


if __name__ == "__main__":
    main()
