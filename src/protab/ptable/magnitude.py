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
from protab.errors import InputError, PTableError, PTableWarning, show_values
from protab.ptable._common import (
    _P_TOL,
    _R_DIGITS,
    _R_EPS,
    _as_int,
    _check_keys,
    _check_modulus,
    _constructor_input,
    _cumulated_bounds,
    _decimal_bounds,
    _EntryTable,
    _float_column,
    _fmt_units,
    _is_integral,
    _is_number,
    _row_params,
    _to_polars,
    check_infeasible,
    entries,
    keyspace_frame,
    noise_at,
    read_file_text,
    refuse_fractional_i,
    refuse_variance_above,
    row_moments,
)
from protab.ptable._maxent import row_bounds

__all__ = ["MagnitudePTable"]

#: The types of magnitude p-tables (R ptable: all, even, odd; R cellKey adds small_cells).
TYPES: tuple[str, ...] = ("all", "even", "odd", "small_cells")
#: Order of the types in a file holding several: tau-ARGUS needs even before odd.
_FILE_ORDER = ("even", "odd", "all", "small_cells")
#: R ptable refuses D * step >= 50 (a row has up to 2·D·step + 1 noise values).
_MAX_D_STEP = 50

_SCHEMA = {
    "i": pl.Float64,
    "j": pl.Float64,
    "p": pl.Float64,
    "v": pl.Float64,
    "lb": pl.Float64,
    "ub": pl.Float64,
    "lb_n": pl.Int64,
    "ub_n": pl.Int64,
    "type": pl.Utf8,
}


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _frame_rows(mask: np.ndarray) -> str:
    """'frame rows 3, 4 (2 in all)': positions (0-based) of offending entries, never their i
    (the largest i of an R table is D, a secret)."""
    return "frame rows " + show_values(np.flatnonzero(mask).tolist())


def _in_rows(mask: np.ndarray) -> str:
    return "in " + _frame_rows(mask)


def _floats(df: pl.DataFrame, col: str) -> np.ndarray:
    """Column ``col`` as finite float64 (text is stripped and parsed), else PTableError."""
    return _float_column(df, col, _in_rows)


def _clean(x: np.ndarray) -> np.ndarray:
    """Float noise off values that are decimals of at most 10 digits (i + v -> j); -0 -> 0."""
    return np.round(x, 10) + 0.0


def _fmt_dec(x: float) -> str:
    """Shortest decimal of a float (no exponent): 0.3333, -0.5, 10."""
    return np.format_float_positional(float(x) + 0.0, trim="-")


def _fmt_sig8(x: float) -> str:
    """A number with 8 significant digits and no exponent (R pt_export's digits = 8)."""
    return np.format_float_positional(
        float(x) + 0.0, precision=8, unique=False, fractional=False, trim="-"
    )


def _check_type(type: Any) -> str:
    if not isinstance(type, str) or type not in TYPES:
        raise PTableError(f"type must be one of {', '.join(TYPES)}")
    return type


# --------------------------------------------------------------------------------------------
# the class
# --------------------------------------------------------------------------------------------


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
        if i.size == 0:
            raise PTableError("the p-table has no rows; it needs at least one entry per i")
        for bad, what in (
            (i < 0, "negative original values i (i >= 0)"),
            (j < -1e-9, "negative outcomes j = i + v (a magnitude must not change sign)"),
            (np.abs(i + v - j) > 1e-6, "j different from i + v"),
            (ub_n < lb_n, "intervals with ub < lb (negative width)"),
            ((lb_n < 0) | (ub_n > den), "interval bounds outside [0, 1]"),
        ):
            if bad.any():
                raise PTableError(f"p-table has {what} in {_frame_rows(bad)}; fix them")
        core = pl.DataFrame(
            {"i": i, "j": j, "v": v, "lb_n": lb_n, "ub_n": ub_n},
            schema={"i": pl.Float64, "j": pl.Float64, "v": pl.Float64, "lb_n": pl.Int64, "ub_n": pl.Int64},
        ).with_row_index("_pos")
        core = core.sort(["i", "lb_n", "ub_n"], maintain_order=True)
        chk = core.with_columns(
            prev_ub=pl.col("ub_n").shift(1).over("i"),
            last_ub=pl.col("ub_n").last().over("i"),
        )
        for cond, what in (
            (pl.col("prev_ub").is_null() & (pl.col("lb_n") != 0), "do not start at 0"),
            (pl.col("last_ub") != den, "do not end at 1 (probabilities do not sum to 1)"),
            (pl.col("lb_n") > pl.col("prev_ub"), "have gaps"),
            (pl.col("lb_n") < pl.col("prev_ub"), "overlap"),
        ):
            bad = chk.filter(cond)
            if bad.height:
                mask = np.zeros(i.size, dtype=bool)
                mask[bad["_pos"].to_numpy()] = True
                raise PTableError(
                    f"p-table intervals are not a partition of [0, 1): the intervals of one i "
                    f"{what} ({_frame_rows(mask)}); the intervals of each i must tile [0, 1) "
                    "without gap or overlap (sorted by lb, each ub = next lb)"
                )
        rows = np.unique(core["i"].to_numpy())
        if rows[0] != 0:
            raise PTableError(
                "a magnitude p-table needs the row i = 0 (noise 0), toward which the lookup "
                "interpolates ratios below the first class"
            )
        self.frame = core.select(
            "i",
            "j",
            ((pl.col("ub_n") - pl.col("lb_n")) / den).alias("p"),
            "v",
            (pl.col("lb_n") / den).alias("lb"),
            (pl.col("ub_n") / den).alias("ub"),
            "lb_n",
            "ub_n",
            pl.lit(type).alias("type"),
        ).cast(_SCHEMA)  # type: ignore[arg-type]
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
        if not _is_integral(D) or int(D) < 1:
            raise PTableError("D (the largest noise) must be a positive integer")
        if not _is_number(V) or float(V) <= 0:
            raise PTableError("V (the noise variance) must be a positive number")
        if not _is_integral(step) or int(step) < 1:
            raise PTableError("step must be a positive integer (the noise grid is 1/step)")
        D, step, Vf = int(D), int(step), float(V)
        if D * step >= _MAX_D_STEP:
            raise PTableError(
                f"D * step must be below {_MAX_D_STEP} (R ptable's limit): reduce D, step or both"
            )
        type = _check_type(type)
        if icat is None:
            raise PTableError(
                "icat (the ratio classes) is required for magnitude p-tables; it must include "
                "1 and D"
            )
        if isinstance(icat, (str, bytes)) or not isinstance(icat, (Sequence, np.ndarray)):
            icat = [icat]
        cats = list(icat)
        if not cats or not all(_is_integral(c) for c in cats):
            raise PTableError("icat must hold integers (the ratio classes), including 1 and D")
        classes = sorted({int(c) for c in cats})
        if classes[0] < 1:
            raise PTableError("icat values must be integers from 1 to D")
        if 1 not in classes or D not in classes:
            raise PTableError("icat must include 1 and D, e.g. icat = [1, D]")
        if classes[-1] > D:
            raise PTableError("the largest entry of icat can be D")
        ncat = len(classes)
        pstays, monos, optims = _row_params(pstay, mono, optim, ncat, "class of icat")
        if any(ps is not None for ps in pstays):
            warnings.warn(
                "pstay is ignored for magnitude p-tables (as in R ptable create_num_ptable)",
                PTableWarning,
                stacklevel=2,
            )

        scale = 10**_R_DIGITS
        parts = {"i": [np.zeros(1)], "j": [np.zeros(1)], "v": [np.zeros(1)]}
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
            row = row_bounds(v, Vf, lower, bool(monos[r]), int(optims[r]), scale)
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
                f"constraints for {unsolved} of the {ncat} classes; change the parameters "
                "(a different variance is usually enough) or set mono=False or optim for those "
                "classes"
            )
        out = cls.__new__(cls)
        out._var_reached = reached
        out._set(
            np.concatenate(parts["i"]),
            np.concatenate(parts["j"]),
            np.concatenate(parts["v"]),
            np.concatenate(lbs),
            np.concatenate(ubs),
            scale,
            type,
        )
        refuse_variance_above(out.frame, scale, reached, Vf, infeasible, "magnitude p-table", "Raise V")
        missed = sum(not ok for ok in reached.values())
        if missed:
            warnings.warn(
                f"magnitude p-table: the variance target was not met for {missed} of the "
                f"{ncat} classes (the other constraints do not allow it; R ptable marks them "
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
        df = _to_polars(frame)
        if "i" not in df.columns:
            raise PTableError("p-table frame lacks column 'i' (the original ratio class)")
        if "v" not in df.columns and "j" not in df.columns:
            raise PTableError("p-table frame needs column 'v' (noise) or 'j' (perturbed value)")
        if digits is not None and (not _is_integral(digits) or not 0 <= int(digits) <= 15):
            raise PTableError("digits must be an integer between 0 and 15")
        if "type" in df.columns:
            t = df["type"].cast(pl.String).str.strip_chars()
            kinds = t.unique(maintain_order=True).to_list()
            unknown = [k for k in kinds if k not in TYPES]
            if unknown:
                raise PTableError(
                    f"p-table column 'type' holds {show_values(unknown)}; the types are "
                    f"{', '.join(TYPES)}"
                )
            if type is None:
                if len(kinds) > 1:
                    raise PTableError(
                        f"the p-table holds the types {', '.join(kinds)}; pass type= to pick "
                        "one, or use MagnitudePTable.read_set for all of them"
                    )
                type = kinds[0] if kinds else "all"
            elif len(kinds) > 1 or (kinds and kinds[0] != type):
                df = df.filter(t == _check_type(type))
                if df.height == 0:
                    raise PTableError(f"the p-table holds no entries of type {type!r}")
        type = _check_type("all" if type is None else type)
        if df.height == 0:
            raise PTableError("the p-table has no rows; it needs at least one entry per i")

        i = _floats(df, "i")
        if "v" in df.columns:
            v = _floats(df, "v")
            j = _floats(df, "j") if "j" in df.columns else _clean(i + v)
        else:
            j = _floats(df, "j")
            v = _clean(j - i)
        if np.any(np.abs(i + v - j) > 1e-6):
            raise PTableError(
                "p-table columns j and v disagree (j != i + v) in "
                f"{_frame_rows(np.abs(i + v - j) > 1e-6)}; give consistent values or only one"
            )
        lb_col = next((c for c in ("lb", "p_int_lb") if c in df.columns), None)
        ub_col = next((c for c in ("ub", "p_int_ub", "p_ij_ub") if c in df.columns), None)
        p = _floats(df, "p") if "p" in df.columns else None
        if ub_col is not None:
            ub = _floats(df, ub_col)
            lb = _floats(df, lb_col) if lb_col is not None else None
            lb_n, ub_n, scale = _decimal_bounds(i, lb, ub, p, digits, _in_rows)
        elif p is not None:
            bad = (p < -_P_TOL) | (p > 1 + _P_TOL)
            if bad.any():
                raise PTableError(f"p-table probabilities outside [0, 1] in {_frame_rows(bad)}")
            scale = 10 ** int(_R_DIGITS if digits is None else digits)
            order = pl.DataFrame({"i": i, "j": j, "p": p}).with_row_index("_pos")
            order = order.sort(["i", "j"], maintain_order=True)
            sums = order.select(pl.col("p").sum().over("i")).to_series().to_numpy()
            if np.any(np.abs(sums - 1.0) > _P_TOL):
                raise PTableError(
                    "p-table probabilities do not sum to 1 for some i; each i needs a complete "
                    "distribution of its outcomes"
                )
            pos, lb_sorted, ub_sorted = _cumulated_bounds(i, j, p, scale)
            lb_n, ub_n = np.empty_like(ub_sorted), np.empty_like(ub_sorted)
            lb_n[pos], ub_n[pos] = lb_sorted, ub_sorted
        else:
            raise PTableError(
                "p-table frame needs interval bounds (lb/ub or p_int_lb/p_int_ub, or the upper "
                "bounds alone) or probabilities p"
            )
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
        df = _read_frame(path, format)
        return cls.from_frame(df, type=type)

    @classmethod
    def read_set(
        cls,
        path: str | os.PathLike[str],
        format: Literal["auto", "r", "argus"] = "auto",
    ) -> dict[str, "MagnitudePTable"]:
        """Every table of a file, by type (e.g. {"even": …, "odd": …}, or {"all": …,
        "small_cells": …}); a file without a type column holds one table, "all"."""
        df = _read_frame(path, format)
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
        write_text(Path(path), _render([self], format))

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
        write_text(Path(path), _render(ordered, format))

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


# --------------------------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------------------------


def _as_int_col(df: pl.DataFrame, col: str) -> np.ndarray:
    a = _floats(df, col)
    bad = a != np.round(a)
    if bad.any():
        raise PTableError(f"p-table column '{col}' must hold integers ({_frame_rows(bad)})")
    return a.astype(np.int64)


def _read_frame(path: str | os.PathLike[str], format: str) -> pl.DataFrame:
    """The file as a frame with R's column names (i, j, p, v, [p_int_lb,] p_int_ub[, type]);
    PTableError for a count p-table file."""
    path = Path(path)
    header = next((line for line in read_file_text(path).splitlines() if line.strip()), "")
    if format == "auto":
        format = "argus" if ";" in header else "r"
    if format not in ("r", "argus"):
        raise PTableError(f"unknown p-table format {format!r}; use 'r' or 'argus'")
    try:
        if format == "r":
            df = pl.read_csv(path, infer_schema_length=0)
            df = df.rename({c: c.strip().strip("\"'").lower() for c in df.columns})
        else:
            raw = pl.read_csv(path, separator=";", infer_schema_length=0)
            cols = raw.columns
            names = [c.strip().strip("\"'").lower() for c in cols]
            if len(cols) < 5:
                raise PTableError(
                    f"tau-ARGUS p-table file {path.name!r} needs the columns i;j;p;v;p_int_ub;type"
                )
            has_type = "type" in names or (
                len(cols) in (6, 7)
                and raw[cols[-1]].str.strip_chars().cast(pl.Float64, strict=False).null_count() > 0
            )
            sas = len(cols) - has_type >= 6
            use = ["i", "j", "p", "v"] + (["p_int_lb", "p_int_ub"] if sas else ["p_int_ub"])
            use += ["type"] if has_type else []
            df = raw.select(cols[: len(use)]).rename(dict(zip(cols[: len(use)], use)))
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
        raise PTableError(f"cannot read p-table file {path.name!r} as {format}: {exc}") from exc
    df = df.with_columns(pl.col(c).str.strip_chars() for c in df.columns if df[c].dtype == pl.String)
    refuse_fractional_i(df, path.name, "the ratio classes, as R ptable's icat; a table of other "
                        "classes is built with MagnitudePTable.from_frame")
    if "type" not in df.columns and {"i", "v"} <= set(df.columns):
        v = df["v"].cast(pl.Float64, strict=False).drop_nulls().to_numpy()
        if v.size and np.all(v == np.round(v)):
            raise PTableError(
                f"p-table file {path.name!r} is a count p-table (integer noise, no type "
                "column); read it with protab.PTable.read"
            )
    return df


def _render(tables: Sequence[MagnitudePTable], format: str) -> str:
    if format == "r":  # exact decimals
        header = "i,j,p,v,p_int_lb,p_int_ub,type"

        def line(i: float, j: float, v: float, lo: int, u: int, den: int, type: str) -> str:
            return (
                f"{_fmt_dec(i)},{_fmt_dec(j)},{_fmt_units(u - lo, den)},{_fmt_dec(v)},"
                f"{_fmt_units(lo, den)},{_fmt_units(u, den)},{type}"
            )
    elif format == "argus":  # 8 significant digits, no lower bound
        header = "i;j;p;v;p_int_ub;type"

        def line(i: float, j: float, v: float, lo: int, u: int, den: int, type: str) -> str:
            return (
                f"{_fmt_sig8(i)};{_fmt_sig8(j)};{_fmt_sig8((u - lo) / den)};{_fmt_sig8(v)};"
                f"{_fmt_sig8(u / den)};{type}"
            )
    else:
        raise PTableError(f"unknown p-table format {format!r}; use 'r' or 'argus'")
    lines = [header]
    for t in tables:
        lines += [line(*e, t.den, t.type) for e in entries(t.frame)]
    return "\n".join(lines) + "\n"
