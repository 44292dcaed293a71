"""The PTable class: construction, validation, maximum entropy, lookup, keyspace and views."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl

from protab._io import write_text
from protab.errors import InputError, PTableWarning, show_values
from protab.ptable._count_files import count_file_frame, count_file_text, ons_table, read_errors
from protab.ptable._count_frames import frame_rows, ons_rows
from protab.ptable._count_rows import count_frame
from protab.ptable._entries import _EntryTable, refuse_variance_above, row_moments
from protab.ptable._maxent import maximum_entropy_rows
from protab.ptable._values import (
    _ONS_PERIOD,
    Interval,
    _as_int,
    _constructor_input,
    _int_array,
    _name_i,
    check_infeasible,
)
from protab.ptable.keyspace import _check_keys, _check_modulus, keyspace_frame, noise_at, row_classes

__all__ = ["Interval", "PTable"]


class PTable(_EntryTable):
    """A perturbation table: for original value i, move to j = i + v with probability p.

    ``frame`` holds the rows (i, j, p, v, lb, ub, lb_n, ub_n): the intervals [lb_n, ub_n) over
    ``den`` of one i partition [0, den). Values n > imax use row ``key(n)`` (``period``); the
    lookup convention for a cell key on a boundary is ``interval`` ("[lb,ub)" as R cellKey,
    ptable and tau-ARGUS; "(lb,ub]" as the ESSnet handbook and SSBcellKey).
    Build one with :meth:`maximum_entropy`, :meth:`from_frame`, :meth:`from_ons` or
    :meth:`read`; the constructor itself takes the integer frame (i, v, lb_n, ub_n) and den.
    """

    frame: pl.DataFrame
    den: int
    imax: int
    period: int
    interval: str

    def __init__(
        self,
        frame: Any,
        *,
        den: int,
        imax: int | None = None,
        period: int = 1,
        interval: Interval = "[lb,ub)",
    ) -> None:
        df, den = _constructor_input(frame, den, "PTable", "integer frame")
        i = _int_array(df, "i")
        core = pl.DataFrame(
            {
                "i": i,
                "v": _int_array(df, "v"),
                "lb_n": _int_array(df, "lb_n"),
                "ub_n": _int_array(df, "ub_n"),
            },
            schema={"i": pl.Int64, "v": pl.Int64, "lb_n": pl.Int64, "ub_n": pl.Int64},
        )
        self._var_reached: dict[int, bool] | None = None
        self._target_V: float | None = None
        self._set(core, den, imax, period, interval)

    # ---------------------------------------------------------------- validation and layout

    def _set(self, core: pl.DataFrame, den: int, imax: int | None, period: int, interval: str) -> None:
        """Validate (i, v, lb_n, ub_n) over den, merge adjacent equal noise, fill the frame."""
        self.frame, self.imax, self.period = count_frame(core, den, imax, period, interval)
        self.den = den
        self.interval = interval

    # ------------------------------------------------------------------------ constructors

    @classmethod
    def maximum_entropy(
        cls,
        D: int,
        V: float,
        js: int = 0,
        pstay: float | Sequence[float] | None = None,
        mono: bool | Sequence[bool] = True,
        optim: int | Sequence[int] = 1,
        *,
        infeasible: str = "error",
    ) -> "PTable":
        """A count p-table by maximum entropy, as R ptable 1.0.0 ``create_cnt_ptable``.

        Rows i = 0..ncat (ncat = D, or D + js + 1 when js > 0); row 0 keeps zeros. Row i
        allows j in [max(0, i-D), i+D] except 1..js and maximises entropy subject to
        unbiasedness, variance <= V (= V for optim 4), p >= max(pstay at v = 0, 1e-8) and,
        with ``mono``, p non-decreasing up to v = 0. A row that misses the variance lowers its
        pstay bound by 0.05 and retries (up to 20 solves). Bounds are cumulative sums rounded
        to 8 decimals (den = 10**8). ``pstay``, ``mono`` and ``optim`` may be given per row
        i = 1..ncat. Warns (PTableWarning) naming the rows whose variance was not reached.
        D may be at most 200 (``protab.ptable._maxent.MAX_D``): PTableError above, as the time
        grows with D² and the 1e-8 floor on every noise value alone adds a variance of about
        (2/3)·D³·1e-8. Rows of up to 100 noise values solve their Newton systems densely,
        longer rows in O(n) (tridiagonal plus one dense row), falling back to the dense solve
        where that stops short of the optimum.

        Differences from R, all outside its normal use: the variance counts as met within
        5e-4 of V (R: rounded to 3 decimals equal to V — the same for V with <= 3 decimals);
        blocked rows (i <= js) are judged too (R flags none); where no distribution meets
        the variance cap, the row takes the smallest attainable variance and is flagged (R's
        solver returns some point that breaks a constraint); a row with no distribution at all
        raises PTableError.

        ``infeasible``: a row whose every distribution has a variance above V (e.g. the blocked
        rows of D = 5, js = 3 at V = 3) raises PTableError (``"error"``, the default: R ptable
        stops too); ``"warn"`` takes such rows at the smallest variance they allow, warned
        with the rows that stay below V.
        """
        infeasible = check_infeasible(infeasible)
        core, scale, reached = maximum_entropy_rows(D, V, js, pstay, mono, optim)
        out = cls(core, den=scale)
        out._var_reached = reached
        out._target_V = float(V)
        refuse_variance_above(out.frame, out.den, reached, float(V), infeasible, "p-table",
                              "Raise V, or lower js")
        missed = sorted(i for i, ok in reached.items() if not ok)
        if missed:
            warnings.warn(
                f"p-table: the variance target was not met for {_name_i(missed)} (the "
                "other constraints do not allow it); see PTable.diagnostics, and change V, "
                "js or mono for those rows if that matters",
                PTableWarning,
                stacklevel=2,
            )
        return out

    @classmethod
    def from_frame(
        cls,
        frame: Any,
        *,
        imax: int | None = None,
        period: int = 1,
        interval: Interval = "[lb,ub)",
        den: int | None = None,
        digits: int | None = None,
    ) -> "PTable":
        """A p-table from a polars, pandas or pyarrow table.

        Columns: ``i``; ``v`` or ``j`` (both: they must agree); then either bounds — ``lb``/``ub``
        or R's ``p_int_lb``/``p_int_ub`` (``p_ij_ub`` as tau-ARGUS' example), or only the upper
        bound, whose lower bound is then the previous upper bound of that i in the given order —
        or only ``p``, whose intervals are cumulative sums in ascending j rounded to 8 decimals
        (as R ptable). Integer bounds ``lb_n``/``ub_n`` are taken as they are with ``den``.
        Decimal bounds are held over den = 10**8, or 10**d when they carry d = 9..12 decimals;
        more than 12 decimals raise PTableError unless ``digits`` says to round them (to 8, as
        R ptable does). Other columns (R's ``type``) are ignored.
        """
        core, scale = frame_rows(frame, den=den, digits=digits)
        return cls(core, den=scale, imax=imax, period=period, interval=interval)

    @classmethod
    def from_ons(
        cls,
        frame: Any,
        *,
        period: int = _ONS_PERIOD,
        imax: int | None = None,
        fill_missing: bool = False,
    ) -> "PTable":
        """A p-table from an ONS/ABS table (pcv, ckey, pvalue), as ONS cell-key-perturbation.

        The ONS package adds pvalue of the row (pcv, ckey) with pcv = n for n <= 750, else
        ((n - 1) mod 250) + 501, and cell key = (sum of record keys) mod (max ckey + 1). Here
        den = max ckey + 1, row (pcv, c) is the interval [c, c + 1) over den, i = pcv,
        v = pvalue, adjacent ckeys with equal pvalue merge; imax = max pcv and period 250
        reproduce the ONS rule when the table runs to pcv 750. Every pcv needs every ckey
        0..max: ``fill_missing=True`` instead gives absent (pcv, ckey) — and absent pcv up to
        ``imax`` — noise 0, as the ONS package's left join does.
        """
        core, den = ons_rows(frame, imax=imax, fill_missing=fill_missing)
        return cls(core, den=den, imax=imax, period=period, interval="[lb,ub)")

    # ------------------------------------------------------------------------ files

    @classmethod
    def read(
        cls,
        path: str | os.PathLike[str],
        format: Literal["auto", "ptable", "tauargus", "ons"] = "auto",
        *,
        period: int | None = None,
        interval: Interval = "[lb,ub)",
    ) -> "PTable":
        """Read a p-table file: "ptable" (R ptable CSV), "tauargus" (``pt_export`` ';' file,
        also the SAS variant with p_int_lb) or "ons" (pcv,ckey,pvalue CSV); "auto" detects
        it from the header and separator. Files do not store ``period`` (default 1, 250 for
        ONS) or ``interval``: pass them."""
        path = Path(path)
        kind, df = count_file_frame(path, format)
        with read_errors(path, kind):
            if kind == "ons":
                return cls.from_ons(df, period=_ONS_PERIOD if period is None else period)
            return cls.from_frame(df, period=1 if period is None else period, interval=interval)

    def write(
        self,
        path: str | os.PathLike[str],
        format: Literal["ptable", "tauargus", "ons"] = "ptable",
        *,
        modulus: int | None = None,
    ) -> None:
        """Write the p-table atomically (temporary file, then rename): "ptable" is R ptable's
        CSV (``"i","j","p","v","p_int_lb","p_int_ub","type"``), "tauargus" the ';' file of
        ``pt_export(SDCtool = "TauArgus")`` (``i;j;p;v;p_int_ub``), "ons" the (pcv, ckey,
        pvalue) CSV of :meth:`to_ons` (``modulus`` as there). Decimals are exact (8 of them for
        den = 10**8)."""
        path = Path(path)
        if format == "ons":
            text = self.to_ons(modulus).write_csv()
        else:
            text = count_file_text(self.frame, self.den, format)
        write_text(path, text)

    def to_ons(self, modulus: int | None = None) -> pl.DataFrame:
        """The ONS/ABS table (pcv, ckey, pvalue) for cell keys 0..modulus-1 (default den).

        pcv runs 1..750 as the ONS package reads it (pcv = n up to 750, then
        ((n - 1) mod 250) + 501), each with the noise of row ``key(pcv)``; rows below the
        smallest i are left out (noise 0), pcv 0 is written only when row 0 moves zeros.
        Raises PTableError when the table's (imax, period) rule differs from the ONS rule
        for some count (e.g. imax > 750).
        """
        return ons_table(self.frame, self.den, self.imax, self.period, self.interval, modulus)

    # ------------------------------------------------------------------------ lookup

    def row_class(self, n: Any) -> np.ndarray:
        """Row class of each count: n up to imax, then rows imax-period+1..imax repeating."""
        return row_classes(_as_int(n, "n"), self.imax, self.period)

    def keyspace(self, modulus: int) -> pl.DataFrame:
        """For integer cell keys k in [0, modulus) (u = k/modulus), the inclusive range
        klo..khi of keys each row serves, in exact integer arithmetic; rows serving no key are
        dropped. Columns i, v, klo, khi (Int64). The join relation of the SQL lookup."""
        return keyspace_frame(self.frame, self.den, modulus, self.interval, pl.Int64)

    def lookup(self, n: Any, cell_key_int: Any, modulus: int) -> np.ndarray:
        """Perturbed counts n + v for integer cell keys (u = k/modulus): a vectorised NumPy
        reference of the SQL lookup. A count whose row class is below the smallest i (0 with
        no row 0) keeps its value."""
        counts = _as_int(n, "n")
        keys = _as_int(cell_key_int, "cell_key_int")
        counts, keys = np.broadcast_arrays(counts, keys)
        M = _check_modulus(modulus, InputError)
        if counts.size and counts.min() < 0:
            raise InputError(f"counts must be >= 0; {int((counts < 0).sum())} are negative")
        _check_keys(keys, M)
        ks = self.keyspace(M).sort(["i", "klo"])
        imin = int(self.frame["i"].min())  # type: ignore[arg-type]
        cls_ = self.row_class(counts)
        has = cls_ >= imin
        noise = np.zeros(counts.shape, dtype=np.int64)
        ri = ks["i"].to_numpy() - imin
        rk = ks["klo"].to_numpy()
        rv = ks["v"].to_numpy()
        c, k = cls_[has] - imin, keys[has]
        noise[has] = noise_at(ri, rk, rv, c, k, self.imax - imin + 1, M)
        return counts + noise

    # ------------------------------------------------------------------------ views

    def transition_matrix(self) -> np.ndarray:
        """Dense transition matrix P[i, j] for i = 0..imax, j = 0..max(j, imax); rows below the
        smallest i are the identity (those counts are not perturbed)."""
        f = self.frame
        imin = int(f["i"].min())  # type: ignore[arg-type]
        ncol = max(int(f["j"].max()), self.imax) + 1  # type: ignore[arg-type]
        mat = np.zeros((self.imax + 1, ncol))
        np.add.at(mat, (f["i"].to_numpy(), f["j"].to_numpy()), f["p"].to_numpy())
        for i in range(imin):
            mat[i, i] = 1.0
        return mat

    def distribution(self) -> pl.DataFrame:
        """Probabilities per (i, j), rows of equal outcome summed: columns i, j, p."""
        return (
            self.frame.group_by("i", "j")
            .agg((pl.col("ub_n") - pl.col("lb_n")).sum().alias("w"))
            .sort("i", "j")
            .select("i", "j", (pl.col("w") / self.den).alias("p"))
        )

    @property
    def diagnostics(self) -> pl.DataFrame:
        """Per i: p_mean (sum p v), p_var (sum p v^2, the variance when p_mean = 0, as R
        ptable's empResults), p_sum, p_stay (p of v = 0); for maximum-entropy tables also
        var_reached (null for row 0)."""
        return row_moments(self.frame, self.den, self._var_reached)

    def summary(self) -> pl.DataFrame:
        """One row per original value i: ``n_rows`` (intervals), ``mean`` (Σ p v), ``variance``
        (Σ p v² − mean²), ``p_stay`` (p of v = 0), ``v_min``/``v_max`` (smallest and largest
        noise with p > 0), and, the same on every row, ``D`` (the largest |v| of the table) and
        ``V`` (the variance the table was built for by :meth:`maximum_entropy`; for a table
        built otherwise or read from a file, the variance of row ``imax``, which serves every
        count from imax on).

        For a maximum-entropy table ``variance`` equals V on every row whose target was
        reached (``diagnostics["var_reached"]``), to the 8 decimals of the bounds; rows of
        small counts may fall short (their noise cannot go below −i).

        The result describes the p-table, which is secret for publication purposes: whoever
        knows D, V and the row probabilities can undo part of the protection (e.g. bound the
        original counts from the published ones). Show it to the people who tune the method,
        never with the protected tables.
        """
        den = self.den
        w = pl.col("ub_n") - pl.col("lb_n")
        out = (
            self.frame.filter(w > 0)
            .group_by("i")
            .agg(
                pl.len().alias("n_rows"),
                (w * pl.col("v")).sum().alias("m1"),
                (w * pl.col("v") * pl.col("v")).sum().alias("m2"),
                (w * (pl.col("v") == 0)).sum().alias("s"),
                pl.col("v").min().alias("v_min"),
                pl.col("v").max().alias("v_max"),
            )
            .sort("i")
            .with_columns((pl.col("m1") / den).alias("mean"))
            .select(
                "i",
                pl.col("n_rows").cast(pl.Int64),
                "mean",
                (pl.col("m2") / den - pl.col("mean") ** 2).alias("variance"),
                (pl.col("s") / den).alias("p_stay"),
                "v_min",
                "v_max",
            )
        )
        D = int(self.frame["v"].abs().max())  # type: ignore[arg-type]
        if self._target_V is not None:
            V = self._target_V
        else:
            last = out.filter(pl.col("i") == out["i"].max())
            V = float(last["variance"][0])
        return out.with_columns(pl.lit(D, dtype=pl.Int64).alias("D"), pl.lit(V, dtype=pl.Float64).alias("V"))

    def plot(self, path: str | os.PathLike[str], *, rows: Sequence[int] | None = None) -> None:
        """Write a PNG of the noise distribution: p(v) per original value i, one line per row i
        (``rows``: which i; by default up to 8 spread over 0..imax), with D and V in the title.

        matplotlib is imported here, with its Agg canvas only (no pyplot, no display, the
        global backend untouched). Like :meth:`summary`, the picture shows the secret p-table:
        keep it away from the publication.
        """
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        dist = self.frame.group_by("i", "v").agg(((pl.col("ub_n") - pl.col("lb_n")).sum() / self.den).alias("p"))
        all_i = sorted(dist["i"].unique().to_list())
        if rows is None:
            pick = np.unique(np.linspace(0, len(all_i) - 1, num=min(8, len(all_i))).round().astype(int))
            chosen = [all_i[k] for k in pick]
        else:
            chosen = [int(r) for r in rows]
            unknown = sorted(set(chosen) - set(all_i))
            if unknown:
                raise InputError(f"plot: the p-table has no row(s) i = {show_values(unknown)}")
        summ = self.summary()
        fig = Figure(figsize=(8, 4.5), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        for i in chosen:
            d = dist.filter(pl.col("i") == i).sort("v")
            ax.plot(d["v"].to_numpy(), d["p"].to_numpy(), marker="o", markersize=3, label=f"i = {i}")
        ax.set_xlabel("noise v (published j = i + v)")
        ax.set_ylabel("probability p(v | i)")
        ax.set_title(f"p-table noise distribution (D = {summ['D'][0]}, V = {summ['V'][0]:.4g})")
        ax.legend(fontsize="small", ncols=2)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.fspath(path), format="png")

    # ------------------------------------------------------------------------ dunder

    def __repr__(self) -> str:
        return f"PTable({self.frame.height} rows)"

    def __eq__(self, other: object) -> bool:
        """Same rows, intervals (compared exactly across denominators), rule and convention."""
        if not isinstance(other, PTable):
            return NotImplemented
        return (self.imax, self.period, self.interval) == (
            other.imax,
            other.period,
            other.interval,
        ) and self._same_entries(other)
