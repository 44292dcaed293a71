"""The ``protab`` command: demo, register, keys, ptable, protect, report.

Secrets stay off the command line where it matters: record-key seeds are read from an
environment variable or a file (``--seed-env``, ``--seed-file``), and no command prints a
seed, a record key or a p-table parameter.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from protab._io import read_toml, write_frame
from protab.errors import ProtabError, SpecError
from protab.hierarchy import Hierarchy
from protab.measures import hellinger_utility, share_changed
from protab.ptable import PTable
from protab.session import DEFAULT_DATABASE, Session, sql_text
from protab.table import TableSpec

DEFAULT_OUTPUT = "protab_output"


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- protect: one table ---------------------------------------------------------------------
def _protect_one(
    s: Session, name: str, source: str, spec: TableSpec, ptable: PTable, threshold: int | None = None,
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Protect one table: the publishable frame (original counts dropped) and its summary row."""
    frame = s.cell_key(source, spec, ptable, original=True, threshold=threshold)
    n = frame["n"].to_numpy()
    n_pert = frame["n_pert"].fill_null(0).to_numpy()
    row = {
        "table": name,
        "cells": frame.height,
        "changed": share_changed(n, n_pert),
        "hellinger_utility": hellinger_utility(n, n_pert) if n.sum() > 0 else float("nan"),
    }
    return frame.drop([c for c in ("n", "w") if c in frame.columns]), row


def _write_all(frames: dict[str, pl.DataFrame], out: Path, formats: Sequence[str]) -> None:
    """Write every table only after all were protected: nothing is written when one fails."""
    for name, frame in frames.items():
        for fmt in formats:
            write_frame(frame, out / f"{name}.{fmt}")


def _summary(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'table':<34}{'cells':>10}{'changed':>10}{'Hellinger utility':>20}"]
    for r in rows:
        lines.append(
            f"{r['table']:<34}{r['cells']:>10,}{r['changed']:>10.1%}{r['hellinger_utility']:>20.6f}"
        )
    return "\n".join(lines)


# -- demo -----------------------------------------------------------------------------------
def demo(persons: int, database: str, out: str, seed: str, formats: Sequence[str] = ("csv", "parquet")) -> list[dict[str, Any]]:
    """Generate a synthetic census in SQL, protect four tables by the cell key method."""
    if persons < 1:
        raise ProtabError("--persons must be at least 1")
    out_dir = Path(out)
    t0 = time.perf_counter()
    with Session(database) as s:
        _say(f"protab demo: generating {persons:,} persons in {database} (table persons) …")
        s.con.execute(sql_text("demo_population.sql"))
        s.con.execute("BEGIN TRANSACTION")
        try:
            s.con.execute(
                "CREATE OR REPLACE TABLE persons AS SELECT * FROM protab_demo_population(?)",
                [persons],
            )
            s.con.execute("COMMIT")
        except BaseException:
            s.con.execute("ROLLBACK")
            raise
        s.add_record_keys("persons", id_column="pid", seed=seed, bits=32)
        h_mun = s.hierarchy_from_columns("persons", ["region", "municipality"])
        h_grid = s.hierarchy_from_columns("persons", ["grid10km", "grid1km"])
        ptable = PTable.maximum_entropy(D=5, V=3, js=2)
        s.install_ptable(ptable, table="persons")
        tables = {
            "municipality_sex_agegroup": TableSpec(
                {"municipality": h_mun, "sex": None, "agegroup": None}),
            "grid_sex": TableSpec({"grid1km": h_grid, "sex": None}, drop_empty=True),
            "region_agegroup_weighted": TableSpec(
                {"region": None, "agegroup": None}, weight="weight"),
            "municipality_agegroup_plus_sex": TableSpec(
                {"municipality": h_mun, "agegroup": None, "sex": None},
                formula="municipality*agegroup + municipality*sex"),
        }
        rows, frames = [], {}
        for name, spec in tables.items():
            _say(f"  protecting {name} …")
            frames[name], row = _protect_one(s, name, "persons", spec, ptable)
            rows.append(row)
    _write_all(frames, out_dir, formats)
    _say(f"done in {time.perf_counter() - t0:.1f} s")
    print(f"protab demo: {persons:,} persons, {len(rows)} tables protected by the cell key method")
    print(_summary(rows))
    print(f"protected tables written to {out_dir}/ as {', '.join(formats)}")
    print(f"the microdata, record keys and p-table are in {database} "
          "(query it with the duckdb CLI: SELECT sex, ckm(count(*), sum(rkey)) FROM persons GROUP BY ALL)")
    return rows


# -- protect: a request file ----------------------------------------------------------------
def _load_ptable(cfg: dict[str, Any], base: Path) -> PTable:
    if "file" in cfg:
        return PTable.read(base / cfg["file"], format=cfg.get("format", "auto"))
    if "maximum_entropy" in cfg:
        params = cfg["maximum_entropy"]
        allowed = {"D", "V", "js", "pstay", "mono", "optim"}
        unknown = sorted(set(params) - allowed) if isinstance(params, dict) else ["(not a table)"]
        if unknown:
            raise SpecError(
                f"request: [ptable] maximum_entropy has unknown keys {unknown}; use "
                f"{sorted(allowed)}"
            )
        return PTable.maximum_entropy(**params)
    raise SpecError("request: [ptable] needs file = '…' or maximum_entropy = { D = …, V = … }")


def _load_hierarchy(s: Session, cfg: dict[str, Any], source: str, column: str, base: Path) -> Hierarchy:
    root = cfg.get("root", "Total")
    if "columns" in cfg:
        return s.hierarchy_from_columns(source, cfg["columns"], root=root)
    if "code_lengths" in cfg:
        return Hierarchy.from_code_lengths(s.codes(source, column), cfg["code_lengths"], root=root)
    if "hrc" in cfg:
        return Hierarchy.read_hrc(base / cfg["hrc"], root=root)
    if "parent_child" in cfg:
        return Hierarchy.from_parent_child(_read_csv(base / cfg["parent_child"], column, infer_schema=False),
                                           root=cfg.get("root"))
    if "ssb_frame" in cfg:
        return Hierarchy.from_frame(_read_csv(base / cfg["ssb_frame"], column,
                                              schema_overrides={"mapsFrom": pl.String, "mapsTo": pl.String}))
    raise SpecError(
        f"request: hierarchy {column!r} needs one of columns, code_lengths, hrc, parent_child, ssb_frame"
    )


def _read_csv(path: Path, column: str, **kwargs: Any) -> pl.DataFrame:
    try:
        return pl.read_csv(path, **kwargs)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise SpecError(f"request: cannot read the hierarchy file of {column!r} ({path}): {exc}") from None


_BAD_NAME = re.compile(r"[/\\\x00]|^\.|^$")


def _check_entry(t: Any) -> None:
    """A [[tables]] entry: the keys it needs, list-valued dims, a plain file name."""
    if not isinstance(t, dict):
        raise SpecError("request: every [[tables]] entry must be a table of keys (name, source, dims)")
    for key in ("name", "source", "dims"):
        if key not in t:
            raise SpecError(f"request: every [[tables]] entry needs {key!r} (entry {t})")
    if not isinstance(t["name"], str) or _BAD_NAME.search(t["name"]):
        raise SpecError(
            f"request: table name {t['name']!r} is used as the output file name; use a plain name "
            "without path separators and not starting with a dot"
        )
    if not isinstance(t["dims"], list) or not all(isinstance(d, str) for d in t["dims"]):
        raise SpecError(f"request: dims of table {t['name']!r} must be a list of column names, e.g. [\"sex\"]")


def _require_database(db: str, hint: str = "") -> None:
    """Commands that read tables must not create an empty database file by mistake."""
    if db != ":memory:" and not Path(db).exists():
        raise ProtabError(
            f"the database {db!r} does not exist ({hint}create it with `protab register` or "
            "`protab demo`, or pass --db)"
        )


def protect(request: str, database: str | None = None, out: str | None = None) -> list[dict[str, Any]]:
    """Protect every table of a TOML request file (see README) and write them."""
    path = Path(request)
    cfg = read_toml(path)
    base = path.parent
    db = database or cfg.get("database", DEFAULT_DATABASE)
    if not os.path.isabs(db) and db != ":memory:" and database is None:
        db = str(base / db)
    out_dir = Path(out) if out else base / cfg.get("output", DEFAULT_OUTPUT)
    formats = cfg.get("formats", ["csv", "parquet"])
    bad = [f for f in formats if f not in ("csv", "parquet")]
    if bad:
        raise SpecError(f"request: unknown output formats {bad}; use csv and/or parquet")
    tables = cfg.get("tables", [])
    if not tables:
        raise SpecError(f"request {request!r} lists no [[tables]]")
    _require_database(db, "paths in a request file are relative to the file; ")
    ptable = _load_ptable(cfg.get("ptable", {}), base)
    for t in tables:
        _check_entry(t)
    names = [t["name"] for t in tables]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SpecError(f"request: the table names {dup} appear more than once (they name the output files)")
    rows, frames = [], {}
    with Session(db) as s:
        for t in tables:
            dims: dict[str, Any] = {}
            for d in t["dims"]:
                h = cfg.get("hierarchies", {}).get(d)
                dims[d] = _load_hierarchy(s, h, t["source"], d, base) if h else None
            spec = TableSpec(
                dims, formula=t.get("formula"), weight=t.get("weight"),
                drop_empty=bool(t.get("drop_empty", False)), null_code=t.get("null_code"),
            )
            _say(f"  protecting {t['name']} …")
            frames[t["name"]], row = _protect_one(s, t["name"], t["source"], spec, ptable,
                                                  threshold=t.get("threshold"))
            rows.append(row)
    _write_all(frames, out_dir, formats)
    print(_summary(rows))
    print(f"protected tables written to {out_dir}/")
    return rows


# -- the command line -----------------------------------------------------------------------
def _seed(args: argparse.Namespace) -> str:
    if args.seed_env:
        val = os.environ.get(args.seed_env)
        if not val:
            raise ProtabError(f"the environment variable {args.seed_env} is not set or empty")
        return val
    if args.seed_file:
        try:
            return Path(args.seed_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ProtabError(f"cannot read the seed file: {exc.strerror}") from None
    raise ProtabError("give the secret seed with --seed-env VAR or --seed-file PATH")


def _ons_modulus(fmt: str, bits: int) -> dict[str, int]:
    """The ONS layout lists every integer cell key, so it needs the key modulus 2^bits."""
    if fmt != "ons":
        return {}
    if not 1 <= bits <= 20:
        raise ProtabError("--bits for the ons layout must be from 1 to 20 (ONS uses 8: keys 0-255)")
    return {"modulus": 2**bits}


# the Python API's wording of an option, and the command line's
_CLI_WORDS = (("pass replace=True", "pass --replace"), ("name= to choose", "--name to choose"))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="protab", description="Protected frequency tables from microdata in DuckDB.")
    sub = p.add_subparsers(dest="cmd", required=True)

    d = sub.add_parser("demo", help="generate a synthetic census and protect a few tables")
    d.add_argument("--persons", type=int, default=1_000_000, help="population size (default 1,000,000)")
    d.add_argument("--db", default=DEFAULT_DATABASE, help=f"DuckDB file (default {DEFAULT_DATABASE})")
    d.add_argument("--out", default=DEFAULT_OUTPUT, help=f"output folder (default {DEFAULT_OUTPUT})")
    d.add_argument("--seed", default="protab-demo-seed", help="record-key seed (demo only; keep real seeds secret)")

    r = sub.add_parser("register", help="register a Parquet/CSV file (or glob) as a table")
    r.add_argument("name")
    r.add_argument("source")
    r.add_argument("--db", default=DEFAULT_DATABASE)
    r.add_argument("--materialize", action="store_true", help="copy the rows into the database")
    r.add_argument("--replace", action="store_true")

    k = sub.add_parser("keys", help="add record keys to a table")
    k.add_argument("table")
    k.add_argument("--db", default=DEFAULT_DATABASE)
    k.add_argument("--id", dest="id_column", help="identifier column to hash with the seed")
    k.add_argument("--seed-env", help="environment variable holding the secret seed")
    k.add_argument("--seed-file", help="file holding the secret seed")
    k.add_argument("--record-key-column", help="use existing keys from this column")
    k.add_argument("--decimals", type=int, help="existing keys are decimals with this many digits")
    k.add_argument("--bits", type=int, default=32, help="keys below 2^bits (default 32; ONS style: 8)")
    k.add_argument("--name", default="rkey", help="name of the key column (default rkey)")
    k.add_argument("--replace", action="store_true")

    pt = sub.add_parser("ptable", help="generate, convert or install p-tables")
    ps = pt.add_subparsers(dest="pcmd", required=True)
    g = ps.add_parser("generate", help="maximum-entropy p-table (as the R package ptable)")
    g.add_argument("--D", type=int, required=True)
    g.add_argument("--V", type=float, required=True)
    g.add_argument("--js", type=int, default=0)
    g.add_argument("--pstay", type=float)
    g.add_argument("--out", required=True)
    g.add_argument("--format", default="ptable", choices=["ptable", "tauargus", "ons"])
    g.add_argument("--bits", type=int, default=8, help="ons layout only: cell keys below 2^bits (default 8)")
    c = ps.add_parser("convert", help="convert a p-table file between layouts")
    c.add_argument("source")
    c.add_argument("target")
    c.add_argument("--to", default="tauargus", choices=["ptable", "tauargus", "ons"])
    c.add_argument("--from", dest="from_", default="auto", choices=["auto", "ptable", "tauargus", "ons"])
    c.add_argument("--bits", type=int, default=8, help="--to ons only: cell keys below 2^bits (default 8)")
    i = ps.add_parser("install", help="install a p-table for the SQL macro ckm()")
    i.add_argument("source")
    i.add_argument("--db", default=DEFAULT_DATABASE)
    i.add_argument("--table", help="keyed table whose key modulus to use")
    i.add_argument("--bits", type=int, help="key modulus 2^bits")
    i.add_argument("--decimals", type=int, help="key modulus 10^decimals")

    pr = sub.add_parser("protect", help="protect the tables of a TOML request file")
    pr.add_argument("request")
    pr.add_argument("--db", help="DuckDB file (overrides the request's database)")
    pr.add_argument("--out", help="output folder (overrides the request's output)")

    rp = sub.add_parser("report", help="risk-utility report of protected tables (TOML request file)")
    rp.add_argument("request")
    rp.add_argument("--out", help="report folder (overrides the request's output)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "demo":
            demo(args.persons, args.db, args.out, args.seed)
        elif args.cmd == "register":
            with Session(args.db) as s:
                s.register(args.name, args.source, materialize=args.materialize, replace=args.replace)
            print(f"registered {args.name} in {args.db}")
        elif args.cmd == "keys":
            seed = None if args.record_key_column else _seed(args)
            _require_database(args.db)
            with Session(args.db) as s:
                if args.record_key_column:
                    s.add_record_keys(args.table, record_key_column=args.record_key_column,
                                      decimals=args.decimals, bits=args.bits, name=args.name,
                                      replace=args.replace)
                else:
                    s.add_record_keys(args.table, id_column=args.id_column, seed=seed,
                                      bits=args.bits, name=args.name, replace=args.replace)
            print(f"record keys added to {args.table} as column {args.name}")
        elif args.cmd == "ptable":
            if args.pcmd == "generate":
                p = PTable.maximum_entropy(D=args.D, V=args.V, js=args.js, pstay=args.pstay)
                p.write(args.out, format=args.format, **_ons_modulus(args.format, args.bits))
                print(f"wrote {args.out}")
            elif args.pcmd == "convert":
                PTable.read(args.source, format=args.from_).write(
                    args.target, format=args.to, **_ons_modulus(args.to, args.bits))
                print(f"wrote {args.target}")
            else:
                p = PTable.read(args.source)
                _require_database(args.db)
                with Session(args.db) as s:
                    if args.table:
                        s.install_ptable(p, table=args.table)
                    elif args.bits:
                        s.install_ptable(p, modulus=2**args.bits)
                    elif args.decimals:
                        s.install_ptable(p, modulus=10**args.decimals)
                    else:
                        raise ProtabError("give --table, --bits or --decimals for the key modulus")
                print(f"p-table installed in {args.db}; use ckm(count(*), sum(rkey)) in SQL")
        elif args.cmd == "protect":
            protect(args.request, args.db, args.out)
        elif args.cmd == "report":
            from protab.report import run_request

            run_request(args.request, args.out)
    except ProtabError as exc:
        msg = str(exc)
        for api, flag in _CLI_WORDS:
            msg = msg.replace(api, flag)
        print(f"protab: error: {msg}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
