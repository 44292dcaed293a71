"""Numeric (magnitude) p-tables: R ptable's ``create_num_ptable``, its files, cellKey's lookup.

A magnitude p-table has the layout of a count p-table (docs/methods.md §1.2, §1.6) with
fractional noise: row ``i`` is an original *ratio* class (R's ``icat``, plus 0), and its
noise values ``v`` run over a grid of width 1/step. The cell-key method for magnitudes
(Destatis; R cellKey ``ck_params_nums``) looks up the ratio ``a = |x / x_delta|`` of a cell
value to its noise magnitude, interpolating between the two rows around ``a``, and scales the
noise ``v`` by ``x_delta``. Tables come in types: "all", or "even" and "odd" (chosen by the
parity of the number of contributors), and "small_cells" (cells below the separation point).

p-table parameters (D, V, pstay) are secrets: no repr, error or warning shows them.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl

from protab._io import write_text
from protab.errors import InputError, PTableError, PTableWarning
from protab.ptable._entries import _EntryTable, refuse_variance_above, row_moments
from protab.ptable._magnitude_checks import (
    TYPES,
    _as_int_col,
    _check_type,
    _clean,
    _floats,
    magnitude_frame,
    maxent_parameters,
)
from protab.ptable._magnitude_files import read_frame, render
from protab.ptable._magnitude_frames import frame_entries
from protab.ptable._maxent import row_bounds
from protab.ptable._values import _R_DIGITS, _R_EPS, _as_int, _constructor_input, _row_params, check_infeasible
from protab.ptable.keyspace import _check_keys, _check_modulus, keyspace_frame, noise_at

__all__ = ["MagnitudePTable", "TYPES"]

#: Order of the types in a file holding several: tau-ARGUS needs even before odd.
_FILE_ORDER = ("even", "odd", "all", "small_cells")


class MagnitudePTable(_EntryTable):
    """A magnitude p-table: for ratio class i, noise v (a multiple of 1/step) with probability p.

    ``frame`` holds the entries (i, j, p, v, lb, ub as Float64; lb_n, ub_n as Int64 over
    ``den``; type): the intervals [lb_n, ub_n) of one i tile [0, den) — zero-width entries
    (probability below 5e-9, as R ptable writes them) are kept. ``type`` is "all", "even",
    "odd" or "small_cells"; ``rows`` the sorted distinct i (0 included) and ``imax`` the
    largest. Build one with :meth:`maximum_entropy`, :meth:`from_frame` or :meth:`read`; the
    constructor itself takes the frame (i, v, lb_n, ub_n, optionally j) and den.
    Method: R ptable ``create_num_ptable`` and R cellKey's magnitude lookup (Destatis); see
    docs/methods.md §1.6 for the maximum-entropy rows.
    """

    _EQ_COLUMNS = ("i", "j", "v")

    frame: pl.DataFrame
    den: int
    type: str
    imax: float
    rows: tuple[float, ...]

    def __init__(self, frame: Any, *, den: int, type: str = "all") -> None:
        df, den = _constructor_input(frame, den, "MagnitudePTable", "frame")
        i = _floats(df, "i")
        v = _floats(df, "v")
        j = _floats(df, "j") if "j" in df.columns else _clean(i + v)
        lb_n, ub_n = (_as_int_col(df, c) for c in ("lb_n", "ub_n"))
        self._var_reached: dict[float, bool] | None = None
        self._set(i, j, v, lb_n, ub_n, den, _check_type(type))

    # ------------------------------------------------------------------ validation, layout

    def _set(
        self,
        i: np.ndarray,
        j: np.ndarray,
        v: np.ndarray,
        lb_n: np.ndarray,
        ub_n: np.ndarray,
        den: int,
        type: str,
    ) -> None:
        """Check the entries (see :func:`magnitude_frame`) and fill the frame."""
        self.frame, rows = magnitude_frame(i, j, v, lb_n, ub_n, den, type)
        self.den = den
        self.type = type
        self.rows = tuple(float(r) for r in rows)
        self.imax = self.rows[-1]

    # ------------------------------------------------------------------------ constructors

    @classmethod
    def maximum_entropy(
        cls,
        D: int,
        V: float,
        *,
        step: int = 2,
        icat: Sequence[int],
        pstay: float | Sequence[float] | None = None,
        optim: int | Sequence[int] = 1,
        mono: bool | Sequence[bool] = True,
        type: str = "all",
        infeasible: str = "error",
    ) -> "MagnitudePTable":
        """A magnitude p-table by maximum entropy, as R ptable 1.0.0 ``create_num_ptable``.

        Rows i ∈ {0} ∪ sorted(icat); row 0 is (j = 0, v = 0, p = 1). Row i allows the outcomes
        j = seq(max(i − D, 0), i + D, by = 1/step) rounded to 4 decimals (v = j − i, rounded
        too), and maximises entropy subject to Σp = 1, Σ p·v = 0, Σ p·v² ≤ V (= V for optim
        4), p ≥ 1e-8 and, with ``mono``, p non-decreasing up to v = 0 — the problem of
        :meth:`PTable.maximum_entropy` (docs/methods.md §1.6) on a finer grid, solved by the
        same row solver. Bounds are cumulative sums rounded to 8 decimals (den = 10**8).

        Validation as R: D a positive integer, step a positive integer, D·step < 50, icat
        integers that include 1 and D with max(icat) <= D (and none below 1); optim 1..4 and
        mono scalar or one per class of icat; type "all", "even" or "odd" (here also
        "small_cells", the label R cellKey gives the table of the separation). ``pstay`` is
        checked (0 < pstay < 1) and, as in R ptable, ignored for magnitude tables
        (PTableWarning). Rows that cannot reach V warn (PTableWarning; see
        :attr:`diagnostics`) — R marks them with iter = 20 in ``empResults``. A row whose
        every distribution has a variance above V (only a V near 0: each row holds v = 0)
        raises PTableError as in :meth:`PTable.maximum_entropy`, or with
        ``infeasible="warn"`` is taken at its smallest variance and warned.
        """
        infeasible = check_infeasible(infeasible)
        D, step, Vf, type, classes = maxent_parameters(D, V, step, type, icat)
        pstays, monos, optims = _row_params(pstay, mono, optim, len(classes), "class of icat")
        if any(ps is not None for ps in pstays):
            warnings.warn(
                "pstay is ignored for magnitude p-tables (as in R ptable create_num_ptable)",
                PTableWarning,
                stacklevel=2,
            )
        entries, reached = _maxent_entries(D, Vf, step, classes, monos, optims)
        out = cls.__new__(cls)
        out._var_reached = reached
        out._set(*entries, 10**_R_DIGITS, type)
        refuse_variance_above(out.frame, out.den, reached, Vf, infeasible, "magnitude p-table", "Raise V")
        missed = sum(not ok for ok in reached.values())
        if missed:
            warnings.warn(
                f"magnitude p-table: the variance target was not met for {missed} of the "
                f"{len(classes)} classes (the other constraints do not allow it; R ptable marks them "
                "with iter = 20); see MagnitudePTable.diagnostics",
                PTableWarning,
                stacklevel=2,
            )
        return out

    @classmethod
    def from_frame(
        cls,
        frame: Any,
        *,
        type: str | None = None,
        digits: int | None = None,
    ) -> "MagnitudePTable":
        """A magnitude p-table from a polars, pandas or pyarrow table.

        Columns: ``i``; ``v`` or ``j`` (both: they must agree, j = i + v); then bounds —
        ``lb``/``ub`` or R's ``p_int_lb``/``p_int_ub``, or only the upper bound (``ub``,
        ``p_int_ub``, ``p_ij_ub``), whose lower bound is the previous upper bound of that i
        in the given order (tau-ARGUS' file) — or only ``p``, cumulated in ascending j and
        rounded to 8 decimals (as R ptable). A ``p`` given with bounds must equal ub − lb
        (1e-7). Optional ``type``: when it holds several types, ``type=`` picks one (else
        PTableError: use :meth:`read_set`); ``type=`` also labels a frame without the column.
        Bounds are held over den = 10**8, or 10**d for d = 9..12 decimals; more need
        ``digits`` (the decimals to round to).
        """
        i, j, v, lb_n, ub_n, scale, type = frame_entries(frame, type=type, digits=digits)
        out = cls.__new__(cls)
        out._var_reached = None
        out._set(i, j, v, lb_n, ub_n, scale, type)
        return out

    def as_type(self, type: str) -> "MagnitudePTable":
        """The same table labelled ``type`` ("all", "even", "odd" or "small_cells")."""
        out = self.__class__.__new__(self.__class__)
        out.__dict__.update(self.__dict__)
        out.type = _check_type(type)
        out.frame = self.frame.with_columns(pl.lit(out.type, dtype=pl.Utf8).alias("type"))
        return out

    # ------------------------------------------------------------------------ files

    @classmethod
    def read(
        cls,
        path: str | os.PathLike[str],
        format: Literal["auto", "r", "argus"] = "auto",
        *,
        type: str | None = None,
    ) -> "MagnitudePTable":
        """Read one magnitude p-table: "r" (R ptable's CSV: i,j,p,v,p_int_lb,p_int_ub,type) or
        "argus" (``pt_export``'s ';' file ``i;j;p;v;p_int_ub;type``, or the SAS variant with
        p_int_lb); "auto" goes by the separator. A file of several types needs ``type=`` (or
        :meth:`read_set`). A count p-table file (integer noise, no type column) raises
        PTableError pointing to :meth:`PTable.read`."""
        df = read_frame(path, format)
        return cls.from_frame(df, type=type)

    @classmethod
    def read_set(
        cls,
        path: str | os.PathLike[str],
        format: Literal["auto", "r", "argus"] = "auto",
    ) -> dict[str, "MagnitudePTable"]:
        """Every table of a file, by type (e.g. {"even": …, "odd": …}, or {"all": …,
        "small_cells": …}); a file without a type column holds one table, "all"."""
        df = read_frame(path, format)
        if "type" not in df.columns:
            return {"all": cls.from_frame(df)}
        kinds = df["type"].cast(pl.String).str.strip_chars().unique(maintain_order=True).to_list()
        return {k: cls.from_frame(df, type=k) for k in kinds}

    def write(
        self,
        path: str | os.PathLike[str],
        format: Literal["r", "argus"] = "r",
    ) -> None:
        """Write the table atomically: "r" is R ptable's CSV (``i,j,p,v,p_int_lb,p_int_ub,type``
        with exact decimals), "argus" tau-ARGUS' ';' file of ``pt_export`` (``i;j;p;v;
        p_int_ub;type``, 8 significant digits). tau-ARGUS reads one table of type "all" or an
        even/odd pair (:meth:`write_set`)."""
        write_text(Path(path), render([(self.frame, self.den, self.type)], format))

    @staticmethod
    def write_set(
        path: str | os.PathLike[str],
        tables: Mapping[str, "MagnitudePTable"],
        format: Literal["r", "argus"] = "r",
    ) -> None:
        """Write several tables to one file, each labelled with its key: "all" or the pair
        "even" and "odd" (even first, as tau-ARGUS requires), optionally with "small_cells"
        (the separation table of R cellKey)."""
        if not isinstance(tables, Mapping) or not tables:
            raise PTableError("write_set needs a dict of tables by type, e.g. {'even': ..., 'odd': ...}")
        for k, t in tables.items():
            _check_type(k)
            if not isinstance(t, MagnitudePTable):
                raise PTableError("write_set: every value must be a MagnitudePTable")
        keys = set(tables)
        if "all" in keys and keys & {"even", "odd"}:
            raise PTableError("a set holds either 'all' or 'even' and 'odd', not both")
        if len(keys & {"even", "odd"}) == 1:
            raise PTableError("'even' and 'odd' go together: give both")
        if not keys & {"all", "even", "odd"}:
            raise PTableError("a set needs 'all' or the pair 'even' and 'odd'")
        ordered = [tables[k].as_type(k) for k in _FILE_ORDER if k in tables]
        write_text(Path(path), render([(t.frame, t.den, t.type) for t in ordered], format))

    # ------------------------------------------------------------------------ lookup

    def keyspace(self, modulus: int) -> pl.DataFrame:
        """For integer cell keys k in [0, modulus) (u = k/modulus), the inclusive range
        klo..khi of keys each entry serves under lb <= u < ub, in exact integer arithmetic
        (as :meth:`PTable.keyspace`); entries serving no key are dropped. Columns i, v
        (Float64), klo, khi (Int64), sorted by i and klo."""
        out = keyspace_frame(self.frame, self.den, modulus, "[lb,ub)", pl.Float64)
        return out.sort(["i", "klo"], maintain_order=True)

    def lookup(self, a: Any, key: Any, modulus: int) -> np.ndarray:
        """The noise v (in units of x_delta) for ratios ``a`` >= 0 and integer cell keys
        (u = key/modulus): a vectorised NumPy reference of R cellKey's ``.lookup_v_flex``.
        ``a`` is capped at imax; a ratio equal to a row i takes the v of the entry whose
        interval holds u (lb <= u < ub); otherwise v = (1 − λ)·v(a0) + λ·v(a1) between the
        rows a0 < a < a1, λ = (a − a0)/(a1 − a0), both looked up with the same key (row 0 has
        v = 0). R cellKey also returns 0 for a cell key of exactly 0 (a cell without
        contributors): that is the caller's rule, not the table's."""
        try:
            ratios = np.asarray(a, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError("ratios a must be numbers") from None
        keys = _as_int(key, "key")
        ratios, keys = np.broadcast_arrays(ratios, keys)
        M = _check_modulus(modulus, InputError)
        if ratios.size and not (np.all(np.isfinite(ratios)) and ratios.min() >= 0):
            bad = int((~np.isfinite(ratios) | ~(ratios >= 0)).sum())
            raise InputError(f"ratios a must be finite and >= 0; {bad} are not")
        _check_keys(keys, M)
        rows = np.asarray(self.rows)
        ks = self.keyspace(M)
        ri = np.searchsorted(rows, ks["i"].to_numpy())
        rk = ks["klo"].to_numpy()
        rv = ks["v"].to_numpy()

        def v_at(r: np.ndarray, k: np.ndarray) -> np.ndarray:
            return noise_at(ri, rk, rv, r, k, rows.size, M)

        x = np.minimum(ratios.ravel(), self.imax)
        k = keys.ravel()
        pos = np.searchsorted(rows, x, side="left")  # rows[pos] >= x (x <= imax)
        exact = rows[pos] == x
        res = np.empty(x.shape, dtype=np.float64)
        res[exact] = v_at(pos[exact], k[exact])
        mid = ~exact
        if mid.any():
            r1 = pos[mid]
            r0 = r1 - 1
            a0, a1 = rows[r0], rows[r1]
            lam = (x[mid] - a0) / (a1 - a0)
            res[mid] = (1 - lam) * v_at(r0, k[mid]) + lam * v_at(r1, k[mid])
        return res.reshape(ratios.shape)

    # ------------------------------------------------------------------------ views

    def variance(self) -> float:
        """Σ v²·p of the last (largest-i) row: R cellKey's m1² (from which the separation
        point of a "small_cells" table is computed)."""
        last = self.frame.filter(pl.col("i") == self.imax)
        w = (last["ub_n"] - last["lb_n"]).to_numpy()
        v = last["v"].to_numpy()
        return float((v * v * w).sum() / self.den)

    @property
    def diagnostics(self) -> pl.DataFrame:
        """Per i, as R ptable's ``empResults``: p_mean (Σ p v), p_var (Σ p v²), p_sum, p_stay
        (p of v = 0), and var_reached (maximum-entropy tables only; null for row 0)."""
        return row_moments(self.frame, self.den, self._var_reached)

    def summary(self) -> pl.DataFrame:
        """One row per i: ``mean`` (Σ p v), ``variance`` (Σ p v² − mean²), ``p_stay`` (p of
        v = 0) and ``n_entries`` (the noise values of the row, zero-width ones included).
        This describes the secret p-table: keep it away from the publication."""
        d = self.diagnostics
        n = self.frame.group_by("i").agg(pl.len().cast(pl.Int64).alias("n_entries"))
        return d.join(n, on="i").sort("i").select(
            "i",
            pl.col("p_mean").alias("mean"),
            (pl.col("p_var") - pl.col("p_mean") ** 2).alias("variance"),
            "p_stay",
            "n_entries",
        )

    # ------------------------------------------------------------------------ dunder

    def __repr__(self) -> str:
        return f"MagnitudePTable(type={self.type!r}, {len(self.rows)} classes)"

    def __eq__(self, other: object) -> bool:
        """Same type, entries (i, j, v) and intervals (compared exactly across denominators)."""
        if not isinstance(other, MagnitudePTable):
            return NotImplemented
        return self.type == other.type and self._same_entries(other)


def _maxent_entries(
    D: int, V: float, step: int, classes: list[int], monos: list[Any], optims: list[Any]
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], dict[float, bool]]:
    """The entries (i, j, v, lb_n, ub_n over 10**8) of a maximum-entropy magnitude table, row 0
    (j = v = 0) first, and per class whether its variance reached V: each class i solved over
    j = seq(max(i − D, 0), i + D, by = 1/step) as R ptable ``create_num_ptable`` (4 decimals)."""
    scale = 10**_R_DIGITS
    parts: dict[str, list[np.ndarray]] = {"i": [np.zeros(1)], "j": [np.zeros(1)], "v": [np.zeros(1)]}
    lbs, ubs = [np.zeros(1, dtype=np.int64)], [np.full(1, scale, dtype=np.int64)]
    reached: dict[float, bool] = {}
    unsolved = 0
    width = 1.0 / step
    for r, i in enumerate(classes):
        lo = max(i - D, 0)
        n = int(math.floor((i + D - lo) * step + 1e-10)) + 1
        j = lo + np.arange(n) * width  # R: seq(max(i - D, 0), i + D, by = 1/step)
        if step != 1:
            j = np.round(j, 4)
        v = j - i
        if step != 1:
            v = np.round(v, 4)
        j, v = j + 0.0, v + 0.0
        lower = np.full(n, _R_EPS)
        row = row_bounds(v, V, lower, bool(monos[r]), int(optims[r]), scale)
        if row is None:
            unsolved += 1
            continue
        lb_n, ub_n, reached[float(i)] = row
        parts["i"].append(np.full(n, float(i)))
        parts["j"].append(j)
        parts["v"].append(v)
        ubs.append(ub_n)
        lbs.append(lb_n)
    if unsolved:
        raise PTableError(
            "the maximum-entropy p-table cannot be computed without violating its "
            f"constraints for {unsolved} of the {len(classes)} classes; change the parameters "
            "(a different variance is usually enough) or set mono=False or optim for those "
            "classes"
        )
    ei, ej, ev = (np.concatenate(parts[k]) for k in ("i", "j", "v"))
    entries = (ei, ej, ev, np.concatenate(lbs), np.concatenate(ubs))
    return entries, reached
