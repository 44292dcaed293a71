"""The [swap] section of a request or programme: the secret seed (an environment variable or
a file, never the command line), targeted record swapping into a temporary table that the
tables then read, its one-line summary, and keeping the swapped records once every output is
written (`protab protect`, `protab programme`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protab.errors import InputError, ProtabError
from protab.request.loaders import reading

if TYPE_CHECKING:  # pragma: no cover
    from protab.session import Session

#: ``similar`` when a [swap] section leaves it out: one profile of no column, so that any
#: household of another area may be the donor (the donors still come in the risk-weighted
#: order of docs/swapping.md). Naming a household-size column (``[["hsize"]]``) keeps every
#: area's count of persons as well as of households; protect and programme read the same default.
DEFAULT_SIMILAR: list[list[str]] = [[]]


def read_seed(env: str | None, file: str | os.PathLike[str] | None, missing: str) -> str:
    """A secret seed from an environment variable or a file (never from the command line)."""
    if env:
        val = os.environ.get(env)
        if not val or not val.strip():
            raise InputError(f"the environment variable {env} is not set or empty")
        return val
    if file:
        with reading(file, "the seed file"):
            val = Path(file).read_text(encoding="utf-8").strip()
        if not val:
            raise InputError(f"the seed file {str(file)!r} is empty")
        return val
    raise InputError(missing)


def run_swap(s: Session, cfg: dict[str, Any], base: Path) -> dict[str, Any]:
    """Targeted record swapping of ``cfg["source"]`` into a temporary table ``cfg["out"]`` of the
    session (kept by :func:`keep_swap` only when every output was written); its summary."""
    from protab.swapping import SwapSpec

    seed_file = base / cfg["seed_file"] if "seed_file" in cfg else None
    seed = read_seed(cfg.get("seed_env"), seed_file, "[swap] needs seed_env or seed_file")
    spec = SwapSpec(
        household=cfg["household"], geography=cfg["geography"], risk_variables=cfg["risk_variables"],
        similar=cfg.get("similar", DEFAULT_SIMILAR), swap_rate=cfg["swap_rate"], k_anonymity=cfg.get("k_anonymity", 3),
        carry_along=cfg.get("carry_along", ()), max_swap_rate=cfg.get("max_swap_rate"),
    )
    try:
        return s.swap(cfg["source"], spec, seed=seed, out=cfg["out"], log=cfg.get("log"),
                      replace=cfg.get("replace", False), temporary=True)
    except ProtabError as exc:  # the option of a request, not of the Python API
        raise type(exc)(str(exc).replace("pass replace=True", "set replace = true in [swap]")) from None


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
    """Every output was written: keep the swapped records (and log) in the database (on Spark:
    as views of the Spark session, which end with it)."""
    from protab.swapping import persist_swap

    persist_swap(s.engine, cfg["out"], cfg.get("log"), replace=cfg.get("replace", False))
