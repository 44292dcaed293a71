"""Where the tables of a protect request read their records: the records after targeted record
swapping ([swap], a temporary table until every table is written), or Spark tables and Parquet
files (``protect --engine spark``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from protab.cli.options import read_seed
from protab.cli.words import say
from protab.errors import InputError, ProtabError

if TYPE_CHECKING:  # pragma: no cover
    from protab.session import Session


def spark_session(spark: dict[str, Any], cfg: dict[str, Any], db: str, base: Path) -> Session:
    """The Spark engine's session of ``protect --engine spark``: the request's sources as Spark
    tables or Parquet files, their record keys declared from the DuckDB database (catalog only)
    or from ``--spark-keys``. With [swap], its source is read so and its output is left to the
    swap (a view of the Spark session)."""
    from protab.engines import require_java, require_spark
    from protab.session import Session

    builder = require_spark().builder
    require_java()
    session = (builder.master(spark["master"] or "local[*]").appName("protab protect")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    s = Session.spark(session)
    keys = _spark_keys(spark["keys"])
    data = Path(spark["data"]) if spark["data"] else base
    swapped = cfg["swap"]["out"] if "swap" in cfg else None
    sources = [cfg["swap"]["source"]] if "swap" in cfg else []
    sources += [t["source"] for t in cfg["tables"] if t["source"] != swapped]
    for source in dict.fromkeys(sources):
        if not s.exists(source):
            path = data / f"{source}.parquet"
            if not path.exists():
                raise InputError(
                    f"protect --engine spark: source {source!r} is neither a Spark table nor the Parquet "
                    f"file {str(path)!r} (pass --spark-data FOLDER holding {source}.parquet)"
                )
            s.register(source, str(path))
        column, modulus = _keys_in_database(db, source) if keys is None else keys
        s.use_record_keys(source, column, modulus)
    return s


def _spark_keys(given: str | None) -> tuple[str, int] | None:
    """``--spark-keys COLUMN:MODULUS``, or None."""
    if given is None:
        return None
    column, _, modulus = str(given).rpartition(":")
    if not column or not modulus.isdigit() or int(modulus) < 2:
        raise InputError(f"--spark-keys must be COLUMN:MODULUS (e.g. rkey:4294967296), not {given!r}")
    return column, int(modulus)


def _keys_in_database(db: str, source: str) -> tuple[str, int]:
    """The record-key column and modulus of ``source`` as keyed in the DuckDB database."""
    from protab.session import Session

    with Session(db, read_only=True, progress=False) as d:
        if not d.exists(source):
            raise InputError(
                f"protect --engine spark: the database {db!r} has no table {source!r} to tell its "
                "record keys; pass --spark-keys COLUMN:MODULUS"
            )
        return d.record_key(source)


def swap(s: Session, cfg: dict[str, Any], base: Path) -> None:
    """The [swap] section: targeted record swapping of ``source`` into a temporary table ``out`` of
    the session, which the tables of the request then read (kept by :func:`keep_swap` only when
    every table was protected and written)."""
    from protab.swapping import SwapSpec

    seed_file = base / cfg["seed_file"] if "seed_file" in cfg else None
    seed = read_seed(cfg.get("seed_env"), seed_file, "[swap] needs seed_env or seed_file")
    spec = SwapSpec(
        household=cfg["household"], geography=cfg["geography"], risk_variables=cfg["risk_variables"],
        similar=cfg["similar"], swap_rate=cfg["swap_rate"], k_anonymity=cfg.get("k_anonymity", 3),
        carry_along=cfg.get("carry_along", ()), max_swap_rate=cfg.get("max_swap_rate"),
    )
    try:
        summary = s.swap(cfg["source"], spec, seed=seed, out=cfg["out"], log=cfg.get("log"),
                         replace=cfg.get("replace", False), temporary=True)
    except ProtabError as exc:  # the option of a request, not of the Python API
        raise type(exc)(str(exc).replace("pass replace=True", "set replace = true in [swap]")) from None
    say(swap_line(summary, cfg))


def swap_line(summary: dict[str, Any], cfg: dict[str, Any]) -> str:
    """The swap's summary: the rate asked for and the rate reached, and why they differ."""
    share = summary.get("share_risky_swapped")
    cap = summary.get("max_swap_rate")
    capped = "" if cap is None else f", capped at {cap:g}"
    left = "" if cap is None else f", left by the cap {summary['risky_over_cap']:,}"
    swapped = "-" if share is None else f"{share:.1%}"
    return (f"  swapped {summary['swapped_households']:,} of {summary['households']:,} households into "
            f"{cfg['out']!r}: rate {summary['achieved_swap_rate']:.4f} (requested "
            f"{summary['requested_swap_rate']:g}{capped}); risky households {summary['risky_share']:.1%}, "
            f"of them swapped {swapped}{left}; without donor {summary['households_without_donor']:,}")


def keep_swap(s: Session, cfg: dict[str, Any]) -> None:
    """Every table was protected and written: keep the swapped records (and log) in the database
    (on Spark: as views of the Spark session, which end with it)."""
    from protab.swapping import persist_swap

    persist_swap(s.engine, cfg["out"], cfg.get("log"), replace=cfg.get("replace", False))
