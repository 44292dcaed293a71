"""Targeted record swapping (TRS) of households as set work in SQL, run through an engine (DuckDB
or Spark: the same statements, the same swapped records).

Follows the census handbook's targeted record swapping (Eurostat recommendation for the 2021
round; docs/methods.md §6.1) with the semantics of sdcMicro's ``recordSwap`` (docs/swapping.md):
a household's risk at geography level h is 1/count of the records that share its risk
variables inside its level-h area (maximum over its members); a household is *risky* at the
first (coarsest) level where that risk exceeds 1/k (a count below k); risky households are
swapped, level by level from the coarsest, with a donor household outside their level-h area
that agrees on a similarity profile (fallback profiles in order), donors drawn with probability
proportional to their risk; at the finest level random households (weighted by their risk) top
the swaps up to the global swap rate (every risky household is swapped, so the achieved rate can
be far above it: SwapRateWarning; ``SwapSpec.max_swap_rate`` caps it, riskiest households
first). A swap exchanges the geography (and the carry-along
variables) of two whole households. Every random choice is a keyed hash (SHA-256) of the seed
and the household id, so the result depends on nothing but the data and the seed.

The steps live in ``protab.swapping.households`` (risk, swap level, keys),
``protab.swapping.matching`` (rounds of proposals, top-up, cap) and ``protab.swapping.results``
(summary, swapped records, log); the spec in ``protab.swapping.spec``, the input checks and
``persist_swap`` in ``protab.swapping.writing``; the public names are re-exported here.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from protab.errors import InputError, SpecError, SwapRateWarning
from protab.swapping.results import Results
from protab.swapping.spec import SwapSpec
from protab.swapping.writing import (
    as_engine,
    check_columns,
    check_names,
    check_seed,
    check_values,
    discard_swap,
    persist_swap,
)

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence

    import duckdb

    from protab.engines import Engine

__all__ = ["SwapRateWarning", "SwapSpec", "discard_swap", "persist_swap", "swap"]


class _Run(Results):
    """One swap: temporary work tables on the engine, dropped at the end."""


def _warn_rate(table: str, spec: SwapSpec, r: dict[str, Any]) -> None:
    """SwapRateWarning when the risky households alone took the achieved rate past the requested
    one by more than the rounding of a pair (no cap given)."""
    if spec.max_swap_rate is not None or r["swapped_households"] <= r["target_households"] + 1:
        return
    level, most = max(r["per_level"].items(), key=lambda kv: kv[1]["risky"])
    why = (f"a combination of {', '.join(map(repr, spec.risk_variables))} shared by fewer than k_anonymity "
           "records in their area" if not spec.risk else "their given risk is above the threshold")
    warnings.warn(
        f"swap: table {table!r}: the requested swap rate {spec.swap_rate:g} became {r['achieved_swap_rate']:.3f} "
        f"({r['swapped_households']:,} of {r['households']:,} households swapped) because {r['risky_share']:.1%} "
        f"of the households ({r['risky_households']:,}) are risky ({why}; most of them first at level {level!r}: "
        f"{most['risky']:,}) and every risky household is swapped, as in sdcMicro's recordSwap. To keep the rate "
        "down give SwapSpec(max_swap_rate=...) (the riskiest households first, up to that rate), or lower "
        "k_anonymity, use fewer risk variables or a coarser finest geography",
        SwapRateWarning,
        stacklevel=3,
    )


def swap(
    con: duckdb.DuckDBPyConnection | Engine,
    table: str,
    spec: SwapSpec,
    *,
    seed: str | int,
    out: str,
    log: str | None = None,
    replace: bool = False,
    temporary: bool = False,
) -> dict[str, Any]:
    """Targeted record swapping of the microdata ``table`` (handbook §5.6; sdcMicro recordSwap).

    ``con``: a DuckDB connection, or an engine (``protab.engines.DuckDBEngine`` or
    ``SparkEngine``; ``Session.swap`` passes its own). Writes the swapped records to table
    ``out`` (the input's columns, geography and carry-along values exchanged between paired
    households, rows in the input order) and, if ``log`` is given, one row per household
    swapped, left without a donor or left by the cap (partner, level, profile, reason 'risk',
    'rate' or 'cap'). Both are written in one transaction; on any error nothing is. With
    ``temporary=True`` they are temporary tables of the connection (gone when it closes) until
    ``persist_swap`` keeps them. On Spark both are checkpointed temporary views of the
    SparkSession. Returns a summary: households, risky households and their share, swapped
    households, requested and achieved swap rate, share of risky households swapped, per-level
    counts, households without donor, the cap and the risky households it left. Warns
    (SwapRateWarning) when risky households alone took the achieved rate past the requested one.
    """
    if not isinstance(spec, SwapSpec):
        raise SpecError(f"swap: spec must be a SwapSpec, not {type(spec).__name__}")
    seed_text = check_seed(seed)
    for name, flag in (("replace", replace), ("temporary", temporary)):
        if not isinstance(flag, bool):
            raise InputError(f"swap: {name} must be True or False, not {flag!r}")
    eng = as_engine(con)
    run = _Run(eng, table, spec, seed_text)
    try:
        check_names(eng, table, out, log, replace)
        run.cols = check_columns(eng, table, spec)
        run.columns = list(run.cols)
        eng.check_swap(table, run.cols, spec.household)
        check_values(eng, table, spec, run.cols)
        run.build_households()
        run.pair()
        result = run.summary()
        outputs: list[tuple[str, str, Sequence[str]]] = [(out, run.out_select(run.columns), ())]
        if log is not None:
            outputs.append((log, run.log_select(), spec.geography))
        eng.write_relations(outputs, temporary=temporary)
    finally:
        run.close()
    _warn_rate(table, spec, result)
    return result
