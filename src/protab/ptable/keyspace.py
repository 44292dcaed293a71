"""Integer cell keys and p-tables: the key range each interval serves (exact integer
arithmetic), the row class of a count, and the vectorised lookup of the noise of a key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from protab.errors import InputError, PTableError
from protab.ptable._values import _is_integral


def row_classes(counts: np.ndarray, imax: int, period: int) -> np.ndarray:
    """Row class of each count: n up to imax, then rows imax-period+1..imax repeating."""
    base = imax - period + 1
    return np.where(counts <= imax, counts, base + np.mod(counts - base, period))


def _check_modulus(modulus: Any, error: type[Exception] = PTableError) -> int:
    """The modulus of integer cell keys, an integer in 1 .. 2**63 - 1 (else ``error``)."""
    if not _is_integral(modulus) or not 1 <= int(modulus) < 2**63:
        raise error("modulus must be an integer in 1 .. 2**63 - 1")
    return int(modulus)


def _check_keys(keys: np.ndarray, M: int) -> None:
    """Integer cell keys must lie in [0, M) (else InputError)."""
    if keys.size and (keys.min() < 0 or keys.max() >= M):
        outside = int(((keys < 0) | (keys >= M)).sum())
        raise InputError(f"cell keys must lie in [0, modulus); {outside} do not")


def _key_ranges(
    lb_n: Sequence[int], ub_n: Sequence[int], den: int, M: int, interval: str = "[lb,ub)"
) -> tuple[list[int], list[int]]:
    """For integer cell keys k in [0, M) (u = k/M), the inclusive key range klo..khi each
    interval [lb_n/den, ub_n/den) serves (``interval`` "[lb,ub)"; "(lb,ub]" puts k = 0 in
    the first interval), in exact integer arithmetic. khi < klo: the interval serves no key."""
    if interval == "[lb,ub)":  # lb <= k/M < ub
        klo = [-((-a * M) // den) for a in lb_n]
        khi = [-((-b * M) // den) - 1 for b in ub_n]
    else:  # lb < k/M <= ub, and k = 0 in the first interval
        klo = [0 if a == 0 else (a * M) // den + 1 for a in lb_n]
        khi = [min((b * M) // den, M - 1) for b in ub_n]
    return klo, khi


def keyspace_frame(
    frame: pl.DataFrame, den: int, modulus: Any, interval: str, value_type: type[pl.DataType]
) -> pl.DataFrame:
    """The keyspace of a p-table frame: for integer cell keys k in [0, modulus), the inclusive
    range klo..khi of keys each entry serves (:func:`_key_ranges`); entries serving no key are
    dropped. Columns i, v (``value_type``), klo, khi (Int64), in the frame's order.
    Shared by PTable.keyspace and MagnitudePTable.keyspace."""
    M = _check_modulus(modulus)
    klo, khi = _key_ranges(frame["lb_n"].to_list(), frame["ub_n"].to_list(), den, M, interval)
    out = pl.DataFrame(
        {"i": frame["i"], "v": frame["v"], "klo": klo, "khi": khi},
        schema={"i": value_type, "v": value_type, "klo": pl.Int64, "khi": pl.Int64},
    )
    return out.filter(pl.col("khi") >= pl.col("klo"))


def noise_at(
    ri: np.ndarray, rk: np.ndarray, rv: np.ndarray, r: np.ndarray, k: np.ndarray, nrow: int, M: int
) -> np.ndarray:
    """The noise of keyspace entries (row ``ri``, first key ``rk``, noise ``rv``; sorted by
    row and key) for rows ``r`` (0..nrow-1) and cell keys ``k`` in [0, M): the entry of row r
    with the largest klo <= k. Shared by PTable.lookup and MagnitudePTable.lookup."""
    if nrow * M < 2**62:  # one sorted int64 key (row, klo): one searchsorted
        out: np.ndarray = rv[np.searchsorted(ri * M + rk, r * M + k, side="right") - 1]
        return out
    out = np.empty(r.shape, dtype=rv.dtype)  # keys too wide for one int64: row by row
    for rr in np.unique(r):
        sel = r == rr
        ent = np.flatnonzero(ri == rr)
        out[sel] = rv[ent[np.searchsorted(rk[ent], k[sel], side="right") - 1]]
    return out
