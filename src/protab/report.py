"""Risk-utility reports: one table of measures per protection method, an R-U map, noise plots.

:func:`compare` puts an original table beside several protected versions of it (any protab
method's output: the dimension columns and a value column such as ``n_pert``) and, if given,
their expected inner frequencies (Langsrud & Lupp 2022: a fair comparison fits every method
to expected frequencies first). It returns a polars frame of the measures of
:mod:`protab.measures`, one row per method (and view), and with ``out_dir`` writes a report
folder a person reads:

- ``report.html`` and ``report.md``: a short introduction, the measures table, the figures,
  and what each measure means;
- ``ru_map.png``: the R-U confidentiality map (Duncan, Keller-McNulty & Stokes 2001; Shlomo
  & Young 2006), risk across and utility up, one labelled point per method and setting;
- ``noise_<method>.png`` for every method given a p-table: the noise v = protected −
  original per original value, observed (bars) against the p-table's probabilities (dots);
- ``measures.csv``: the measures table.

Every file is written atomically (a temporary name, then renamed). The report describes
original values and p-table noise: it is an internal document, not for publication.

Request file of ``protab report REQUEST.toml [--out DIR]`` (paths relative to the file)::

    title = "Party by age and sex"        # optional
    output = "report"                      # optional report folder; --out overrides
    dims = ["party", "age", "sex"]         # the dimension columns shared by every file
    total = "Total"                        # optional: the code of a margin (default Total)

    [original]
    file = "original.csv"                  # CSV or Parquet: dims + value (+ <dim>_level)
    value = "n"                            # optional, default "n"
    inner = "original_inner.csv"           # optional: the original inner cells (for expected)
    inner_value = "n"                      # optional, default: value

    [[protected]]                          # one entry per method and parameter setting
    label = "CKM D=5 V=3"                  # the name in the table and on the map
    file = "ckm.parquet"                   # its protected table (may be left out if expected)
    value = "n_pert"                       # optional: n_pert, n_rounded, rounded, … found alone
    ptable = "ptable.csv"                  # optional: its p-table (PTable.read): noise plot
    expected = "ckm_expected.csv"          # optional: its expected inner frequencies
    expected_value = "expected"            # optional: expected, n_expected, ipfit, … found alone

    [measures]                             # all optional
    small = 2                              # small cells are 1…small
    sensitive = "party"                    # sensitive dimension: disclosive cells, F_β
    quasi = ["age", "sex"]                 # quasi-identifiers for the disclosure probabilities
    know_yourself = true                   # the attacker is a member (1-coalition)
    beta = 0.5
    coalition = 1                          # k of the directly disclosive cells
    two_way = ["party", "age"]             # χ² and Cramér's V of this two-way crossing
    groups = "party"                       # rows for AAD, variance of cell averages, ANOVA R²
    risk = "f_beta"                        # x axis of the R-U map (a column of measures.csv)
    utility = "hellinger_utility"          # y axis

Cells are matched on the dimension columns (codes compared as strings). A cell missing from
a protected table counts as 0 when its original value is 0 (tables with ``drop_empty``) and is
an error otherwise; a null protected value (a blanked cell) counts as 0, as a naive user would
read it. Cells at every level of every dimension (margins included) enter the cell measures;
the inner cells (every dimension at its finest level: the largest ``<dim>_level``, or a code
other than ``total`` without level columns) enter the entropy measures and the group measures.
"""

from __future__ import annotations

import html
import math
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from protab import measures as m
from protab._io import atomic_path, write_frame, write_text
from protab.errors import InputError, SpecError, show_values
from protab.ptable import PTable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["MEASURES", "compare", "plot_noise", "plot_ru_map", "run_request"]

_PROTECTED_NAMES = ("n_pert", "n_rounded", "rounded", "n_protected", "protected")
_EXPECTED_NAMES = ("expected", "n_expected", "ipfit", "ipFit", "fit", "y_hat")

#: The columns of :func:`compare`'s frame after method/view/cells: name → (meaning, source).
def _doc(meaning: str, source: str) -> tuple[str, str]:
    return meaning, source


MEASURES: dict[str, tuple[str, str]] = {
    "hellinger_utility": _doc("Hellinger utility 1 − HD/√Σf: 1 = unchanged, lower = more damage "
                          "(signed √ for negative values).", "Langsrud & Heldal 2018"),
    "hellinger_distance": _doc("Hellinger distance HD = √(½Σ(√f − √g)²): 0 = unchanged.",
                           "Shlomo & Young 2006"),
    "mean_abs_dev": _doc("Mean absolute deviation Σ|f − g|/K over all cells compared.",
                     "ESSnet Handbook"),
    "aad": _doc("Average absolute difference per cell, averaged over the rows of the `groups` "
            "dimension (inner cells); = mean_abs_dev of the inner cells without groups.",
            "Shlomo & Young 2006"),
    "total_rel_diff_pct": _doc("Percent relative absolute difference of the totals (margins; the "
                           "grand total of an inner table), mean of 100·|g − f|/f.",
                           "Shlomo & Young 2006"),
    "spearman": _doc("Spearman rank correlation of the cells before and after: 1 = ranking kept.",
                 "ESSnet Handbook"),
    "var_cell_avg_change_pct": _doc("Relative change (%) of the variance of the average cell value "
                                "per row of `groups` (inner cells; of the cell values without "
                                "groups).", "Shlomo & Young 2006"),
    "anova_r2_before": _doc("One-way ANOVA R² of the inner cell values across the rows of "
                        "`groups`, original.", "Shlomo & Young 2006"),
    "anova_r2_after": _doc("The same R² on the protected values.", "Shlomo & Young 2006"),
    "chi2_before": _doc("Pearson χ² of independence of the `two_way` crossing, original.",
                    "ESSnet Handbook"),
    "chi2_after": _doc("Pearson χ² of the same crossing, protected (negatives set to 0).",
                   "ESSnet Handbook"),
    "p_before": _doc("p-value of χ² before.", ""),
    "p_after": _doc("p-value of χ² after.", ""),
    "cramers_v_before": _doc("Cramér's V of the `two_way` crossing, original.", "ESSnet Handbook"),
    "cramers_v_after": _doc("Cramér's V after protection.", "ESSnet Handbook"),
    "pct_changed": _doc("Risk/utility: percent of cells whose value changed (by more than 1e-9).",
                    "ESSnet Handbook"),
    "small_share": _doc("Risk: share of cells published with a value in 1…small.",
                    "ESSnet Handbook"),
    "small_unchanged": _doc("Risk: share of the original small cells (1…small) published with "
                        "their true value (1 for the original).", "Shlomo & Young 2006"),
    "rm": _doc("Risk: conditional-entropy measure 1 − H(A|B)/H(A) of the inner cells, A the "
           "original and B the protected value of a cell: 1 = the published value gives the "
           "original away, 0 = it tells nothing.", "Shlomo, Krenzke & Li 2019"),
    "entropy_risk": _doc("Risk: entropy risk of the inner population table, r for the original "
                     "and r# for a protected version (weights ⅓ each).",
                     "Antal, Shlomo & Elliot 2014"),
    "disclosive_share": _doc("Risk: share of the cells of the `sensitive` categories that are "
                         "directly disclosive for a k-coalition (|p_c| − k ≤ |c|) as published.",
                         "Lupp & Langsrud 2021"),
    "f_beta": _doc("Risk: F_β of exact attribute disclosures (probability 1 of guessing the "
               "`sensitive` category from the `quasi` identifiers) against the original.",
               "Langsrud & Lupp 2022"),
    "precision": _doc("c/b: share of the disclosures seen in the protected data that are true.",
                  "Langsrud & Lupp 2022"),
    "recall": _doc("c/a: share of the original's disclosures still seen.", "Langsrud & Lupp 2022"),
    "disclosures_original": _doc("a: exact disclosures in the original.", ""),
    "disclosures_protected": _doc("b: exact disclosures in the protected data (where the original "
                              "combination is non-empty).", ""),
    "disclosures_both": _doc("c: exact disclosures in both.", ""),
}

_SCHEMA: dict[str, Any] = {"method": pl.String, "view": pl.String, "cells": pl.Int64}
_SCHEMA.update({name: pl.Float64 for name in MEASURES})
for _int_col in ("disclosures_original", "disclosures_protected", "disclosures_both"):
    _SCHEMA[_int_col] = pl.Int64


# --------------------------------------------------------------------------------------------
# aligning tables


def _value_column(frame: pl.DataFrame, given: str | None, names: Sequence[str], dims: Sequence[str],
                  avoid: str | None, what: str) -> str:
    if given is not None:
        if given not in frame.columns:
            raise InputError(
                f"{what}: no value column {given!r} (columns: {show_values(frame.columns, 10)})"
            )
        return given
    for name in names:
        if name in frame.columns:
            return name
    rest = [c for c in frame.columns
            if c not in dims and not c.endswith("_level") and c != avoid
            and frame.schema[c].is_numeric()]
    if len(rest) == 1:
        return rest[0]
    if avoid is not None and avoid in frame.columns and not rest:
        return avoid
    raise InputError(
        f"{what}: cannot tell which column holds the values (columns: "
        f"{show_values(frame.columns, 10)}); name it (value=… in the request, or a mapping "
        "protected_value= / expected_value=)"
    )


def _select(frame: pl.DataFrame, dims: Sequence[str], value: str, out: str, what: str) -> pl.DataFrame:
    missing = [d for d in dims if d not in frame.columns]
    if missing:
        raise InputError(
            f"{what}: no dimension column(s) {show_values(missing)} "
            f"(columns: {show_values(frame.columns, 10)})"
        )
    levels = [f"{d}_level" for d in dims if f"{d}_level" in frame.columns]
    sel = frame.select(
        *[pl.col(d).cast(pl.String) for d in dims],
        *[pl.col(c).cast(pl.Int64) for c in levels],
        pl.col(value).cast(pl.Float64).alias(out),
    )
    dup = sel.select(dims).is_duplicated()
    if dup.any():
        first = sel.filter(dup).select(dims).unique(maintain_order=True).rows()
        raise InputError(
            f"{what}: {int(dup.sum())} rows share their dimension codes with another row "
            f"(codes {show_values(first, 3)}); give one row per cell"
        )
    return sel


def _align(orig: pl.DataFrame, prot: pl.DataFrame, dims: Sequence[str], total: str,
           label: str) -> pl.DataFrame:
    """Full join on the dims: columns dims, <dim>_level (where known), _f, _g."""
    j = orig.join(prot, on=list(dims), how="full", coalesce=True, suffix="_p",
                  maintain_order="left_right")
    for d in dims:
        lc = f"{d}_level"
        if lc in j.columns and f"{lc}_p" in j.columns:
            j = j.with_columns(pl.coalesce(lc, f"{lc}_p").alias(lc)).drop(f"{lc}_p")
    in_orig = pl.col("_f").is_not_null()
    missing = j.filter(pl.col("_f").fill_null(0) > 0).filter(pl.col("_g").is_null())
    # a protected cell given with a null value is blanked: count it as 0; a cell absent from
    # the protected table is 0 only when the original is 0
    present = prot.select(dims).with_columns(pl.lit(True).alias("_present"))
    missing = missing.join(present, on=list(dims), how="left").filter(pl.col("_present").is_null())
    if missing.height:
        raise InputError(
            f"method {label!r}: {missing.height} cells of the original with a positive count are "
            f"missing from its table (e.g. {show_values(missing.select(dims).rows(), 3)}); "
            "give the protected table for the same cells as the original"
        )
    extra = j.filter(~in_orig)
    if extra.height:
        tot = _total_mask(extra, dims, total, any_dim=True)
        margins = extra.filter(tot)
        if margins.height:
            raise InputError(
                f"method {label!r}: {margins.height} margin cells are missing from the original "
                f"(e.g. {show_values(margins.select(dims).rows(), 3)}); give the "
                "original table with the same margins (the published table, not the inner one)"
            )
    return j.with_columns(pl.col("_f").fill_null(0.0), pl.col("_g").fill_null(0.0))


def _is_total(frame: pl.DataFrame, d: str, total: str) -> pl.Expr:
    lc = f"{d}_level"
    if lc in frame.columns:
        return pl.col(lc).fill_null(-1) == 0
    return pl.col(d) == total


def _is_finest(frame: pl.DataFrame, d: str, total: str) -> pl.Expr:
    lc = f"{d}_level"
    if lc in frame.columns:
        top = frame[lc].max()
        return pl.col(lc).fill_null(-1) == (top if top is not None else 0)
    return pl.col(d) != total


def _total_mask(frame: pl.DataFrame, dims: Sequence[str], total: str, any_dim: bool) -> pl.Expr:
    exprs = [_is_total(frame, d, total) for d in dims]
    if not exprs:
        return pl.lit(False)
    return pl.any_horizontal(exprs) if any_dim else pl.all_horizontal(exprs)


def _all(exprs: list[pl.Expr]) -> pl.Expr:
    return pl.all_horizontal(exprs) if exprs else pl.lit(True)


def _inner_rows(a: pl.DataFrame, dims: Sequence[str], total: str) -> pl.DataFrame:
    return a.filter(_all([_is_finest(a, d, total) for d in dims]))


def _crossing(a: pl.DataFrame, dims: Sequence[str], total: str, finest: Sequence[str],
              any_level: Sequence[str] = ()) -> pl.DataFrame:
    """Cells of the crossing of ``finest`` (finest level) and ``any_level`` dims: the rows with
    every other dim at its total when the table has them, else the inner rows summed."""
    keep = [*finest, *any_level]
    others = [d for d in dims if d not in keep]
    # the finest level of a dimension is the largest level in the whole table ``a``
    rows = a.filter(_all([_is_finest(a, d, total) for d in finest]))
    if others:
        at_total = rows.filter(_all([_is_total(a, d, total) for d in others]))
        if at_total.height:
            rows = at_total
        else:
            rows = rows.filter(_all([_is_finest(a, d, total) for d in others]))
    return rows.group_by(keep, maintain_order=True).agg(pl.col("_f").sum(), pl.col("_g").sum())


# --------------------------------------------------------------------------------------------
# the measures of one aligned pair


@dataclass
class _Options:
    dims: list[str]
    total: str
    small: int
    sensitive: str | None
    quasi: list[str] | None
    know_yourself: bool
    beta: float
    coalition: int
    two_way: tuple[str, str] | None
    groups: str | None


def _nan(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _measure_row(a: pl.DataFrame, o: _Options, *, is_original: bool) -> dict[str, Any]:
    f = a["_f"].to_numpy()
    g = a["_g"].to_numpy()
    row: dict[str, Any] = {"cells": a.height}
    if a.height == 0:
        return row
    if f.sum() > 0:
        row["hellinger_utility"] = m.hellinger_utility(f, g)
    row["hellinger_distance"] = m.hellinger_distance(f, g)
    row["mean_abs_dev"] = m.mean_absolute_deviation(f, g)
    row["spearman"] = m.spearman_correlation(f, g)
    row["pct_changed"] = m.percent_changed(f, g, tol=1e-9)
    row["small_share"] = m.share_small_cells(g, o.small)
    row["small_unchanged"] = m.small_cells_unchanged(f, g, o.small)

    margins = a.filter(_total_mask(a, o.dims, o.total, any_dim=True))
    if margins.height:
        row["total_rel_diff_pct"] = m.relative_difference_of_totals(margins["_f"], margins["_g"])
    else:
        row["total_rel_diff_pct"] = m.relative_difference_of_totals([f.sum()], [g.sum()])

    inner = _inner_rows(a, o.dims, o.total)
    if inner.height:
        fi, gi = inner["_f"].to_numpy(), inner["_g"].to_numpy()
        grp = inner[o.groups] if o.groups else None
        row["aad"] = m.average_absolute_difference(fi, gi, grp)
        vb = m.variance_of_cell_averages(fi, grp)
        va = m.variance_of_cell_averages(gi, grp)
        row["var_cell_avg_change_pct"] = 100.0 * (va - vb) / vb if vb > 0 else float("nan")
        if o.groups:
            row["anova_r2_before"] = m.anova_r2(fi, grp)
            row["anova_r2_after"] = m.anova_r2(gi, grp)
        row["rm"] = m.conditional_entropy_risk(fi, gi)
        if fi.sum() > 0 and (fi >= 0).all():
            row["entropy_risk"] = (m.entropy_risk(fi) if is_original
                                   else m.entropy_risk_perturbed(fi, gi))

    if o.two_way:
        r, c = o.two_way
        cross = _crossing(a, o.dims, o.total, [r, c])
        if cross.height:
            tf, _, _ = m.two_way_table(cross, r, c, "_f")
            tg, _, _ = m.two_way_table(cross, r, c, "_g")
            res = m.independence_before_after(tf, tg)
            for k in ("chi2_before", "chi2_after", "p_before", "p_after",
                      "cramers_v_before", "cramers_v_after"):
                row[k] = res[k]

    if o.sensitive:
        s = o.sensitive
        tot_s = _is_total(a, s, o.total)
        cells = a.filter(tot_s | _is_finest(a, s, o.total)).with_columns(
            pl.when(tot_s).then(pl.lit("\x00total")).otherwise(pl.col(s)).alias(s)
        )
        others = [d for d in o.dims if d != s]
        dc = m.disclosive_cells(cells.select(*others, s, "_g"), sensitive=s, count="_g",
                                k=o.coalition, total="\x00total")
        if dc.height:
            row["disclosive_share"] = float(dc["disclosive"].mean())  # type: ignore[arg-type]
        if o.quasi:
            cross = _crossing(a, o.dims, o.total, [s], o.quasi)
            if cross.height:
                po = m.disclosure_probabilities(cross, sensitive=s, quasi=o.quasi, count="_f",
                                                know_yourself=o.know_yourself)
                pp = m.disclosure_probabilities(cross, sensitive=s, quasi=o.quasi, count="_g",
                                                know_yourself=o.know_yourself)
                fb = m.f_beta_risk(po, pp, o.beta)
                row.update(f_beta=fb["f_beta"], precision=fb["precision"], recall=fb["recall"],
                           disclosures_original=fb["a"], disclosures_protected=fb["b"],
                           disclosures_both=fb["c"])
    return row


# --------------------------------------------------------------------------------------------
# compare


def _mapping(x: str | Mapping[str, str] | None, label: str) -> str | None:
    if x is None or isinstance(x, str):
        return x
    return x.get(label)


def compare(
    original: pl.DataFrame,
    protected: Mapping[str, pl.DataFrame],
    *,
    dims: Sequence[str],
    value: str = "n",
    protected_value: str | Mapping[str, str] | None = None,
    expected: Mapping[str, pl.DataFrame] | None = None,
    expected_value: str | Mapping[str, str] | None = None,
    inner: pl.DataFrame | None = None,
    ptables: Mapping[str, PTable] | None = None,
    total: str = "Total",
    small: int = 2,
    sensitive: str | None = None,
    quasi: Sequence[str] | None = None,
    know_yourself: bool = True,
    beta: float = 0.5,
    coalition: int = 1,
    two_way: Sequence[str] | None = None,
    groups: str | None = None,
    risk: str | None = None,
    utility: str = "hellinger_utility",
    out_dir: str | os.PathLike[str] | None = None,
    title: str = "Risk-utility comparison",
) -> pl.DataFrame:
    """Measures of several protected versions of one table, side by side (METHODS.md §5).

    ``original``: the original table (dims, optional ``<dim>_level`` columns, ``value``).
    ``protected``: label → protected table (dims + a value column: ``protected_value``, a
    mapping label → column, or found among n_pert, n_rounded, rounded, … or as the only
    numeric column). ``expected``: label → expected inner frequencies (dims + a column named by
    ``expected_value`` or found among expected, n_expected, ipfit, …), compared with the
    original inner cells (``inner``, or the inner rows of ``original``). ``ptables``: label →
    PTable of a p-table method (noise plots in the report).

    Returns one row per (method, view): first ``original`` (the original against itself: the
    top of the utility axis and the risk of publishing unprotected), then each protected table
    (view ``published``), then, if ``expected`` is given, ``original`` and each method on
    the inner cells (view ``expected``). Columns: method, view, cells and :data:`MEASURES`
    (null where a measure does not apply: no ``sensitive``/``quasi``/``two_way``/``groups``,
    or no inner cells in the table). With ``out_dir``, writes the report folder (module
    docstring); ``risk`` (default ``f_beta`` with sensitive and quasi, else
    ``small_unchanged``) and ``utility`` name the columns of the R-U map.
    """
    dims = list(dims)
    if not dims:
        raise InputError("compare needs the dimension columns (dims=[…])")
    if not protected and not expected:
        raise InputError("compare needs at least one protected table (protected={label: frame})")
    if small < 1:
        raise InputError("small must be ≥ 1")
    tw: tuple[str, str] | None = None
    if two_way is not None:
        if len(two_way) != 2 or two_way[0] == two_way[1]:
            raise InputError("two_way names two different dimensions, e.g. ('party', 'age')")
        tw = (two_way[0], two_way[1])
    named = [x for x in [sensitive, groups, *(quasi or []), *(tw or ())] if x is not None]
    unknown = [x for x in named if x not in dims]
    if unknown:
        raise InputError(f"compare: {show_values(unknown)} not among the dims {show_values(dims)}")
    if quasi and not sensitive:
        raise InputError("quasi-identifiers need a sensitive dimension (sensitive=…)")
    if sensitive and quasi and sensitive in quasi:
        raise InputError(f"the sensitive dimension {sensitive!r} cannot also be a quasi-identifier")
    if "original" in protected or "original" in (expected or {}):
        raise InputError("the label 'original' is reserved for the original table; rename the method")
    bad_pt = [k for k in (ptables or {}) if k not in protected]
    if bad_pt:
        raise InputError(f"ptables given for unknown methods {show_values(bad_pt)}")
    if risk is None:
        risk = "f_beta" if sensitive and quasi else "small_unchanged"
    for axis, name in (("risk", risk), ("utility", utility)):
        if name not in MEASURES:
            raise InputError(f"{axis}={name!r} is not a measure; use one of {show_values(list(MEASURES), 40)}")
    opts = _Options(dims, total, small, sensitive, list(quasi) if quasi else None, know_yourself,
                    beta, coalition, tw, groups)

    orig = _select(original, dims, _value_column(original, value, (), dims, None, "original"),
                   "_f", "original")
    if orig["_f"].null_count():
        raise InputError(f"original: {orig['_f'].null_count()} cells have no value in {value!r}")
    rows: list[dict[str, Any]] = []
    pairs: dict[str, pl.DataFrame] = {}
    self_pair = orig.with_columns(pl.col("_f").alias("_g"))
    rows.append({"method": "original", "view": "published",
                 **_measure_row(self_pair, opts, is_original=True)})
    for label, frame in protected.items():
        col = _value_column(frame, _mapping(protected_value, label), _PROTECTED_NAMES, dims,
                            value, f"protected table {label!r}")
        prot = _select(frame, dims, col, "_g", f"protected table {label!r}")
        a = _align(orig, prot, dims, total, label)
        pairs[label] = a
        rows.append({"method": label, "view": "published", **_measure_row(a, opts, is_original=False)})

    if expected:
        if inner is not None:
            icol = _value_column(inner, value, (), dims, None, "original inner table")
            orig_inner = _select(inner, dims, icol, "_f", "original inner table")
        else:
            orig_inner = _inner_rows(orig, dims, total)
        orig_inner = orig_inner.drop([c for c in orig_inner.columns if c.endswith("_level")])
        if orig_inner.height == 0:
            raise InputError("compare: the original has no inner cells; pass inner=the original inner table")
        rows.append({"method": "original", "view": "expected",
                     **_measure_row(orig_inner.with_columns(pl.col("_f").alias("_g")), opts,
                                    is_original=True)})
        for label, frame in expected.items():
            col = _value_column(frame, _mapping(expected_value, label), _EXPECTED_NAMES, dims,
                                value, f"expected frequencies {label!r}")
            ex = _select(frame, dims, col, "_g", f"expected frequencies {label!r}")
            ex = ex.drop([c for c in ex.columns if c.endswith("_level")])
            a = _align(orig_inner, ex, dims, total, f"{label} (expected)")
            rows.append({"method": label, "view": "expected",
                         **_measure_row(a, opts, is_original=False)})

    result = pl.DataFrame(
        [{k: (_nan(row.get(k)) if _SCHEMA[k] == pl.Float64 else row.get(k)) for k in _SCHEMA}
         for row in rows],
        schema=_SCHEMA,
    )
    if out_dir is not None:
        _write_report(Path(out_dir), result, pairs, ptables or {}, opts, risk, utility, title,
                      orig.height)
    return result


# --------------------------------------------------------------------------------------------
# figures


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _save_png(fig: Any, path: Path) -> Path:
    with atomic_path(path) as tmp:
        # no bbox_inches="tight": the image keeps the figure's size; no Software tag:
        # the same inputs give the same bytes
        fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
    return path


def plot_ru_map(measures: pl.DataFrame, path: str | os.PathLike[str], *,
                risk: str = "small_unchanged", utility: str = "hellinger_utility",
                title: str = "R-U confidentiality map") -> Path:
    """R-U confidentiality map (Duncan, Keller-McNulty & Stokes 2001; Shlomo & Young 2006):
    the ``risk`` column across, the ``utility`` column up, one labelled point per row of a
    :func:`compare` frame (stars: the original; circles: published; squares: expected).
    Written as an 800 × 600 PNG. Rows where either value is null are left out."""
    for col in (risk, utility, "method", "view"):
        if col not in measures.columns:
            raise InputError(f"plot_ru_map: the measures have no column {col!r}")
    fig = _figure(8, 6)
    ax = fig.add_subplot(1, 1, 1)
    d = measures.filter(pl.col(risk).is_not_null() & pl.col(utility).is_not_null())
    style = {"published": ("o", "tab:blue"), "expected": ("s", "tab:orange")}
    labels: dict[tuple[float, float], list[str]] = {}
    for meth, view, x, y in d.select("method", "view", risk, utility).iter_rows():
        # a loop over methods (a handful of points), not cells
        marker, colour = ("*", "tab:red") if meth == "original" else style.get(view, ("o", "tab:grey"))
        ax.scatter([x], [y], marker=marker, s=140 if marker == "*" else 60, color=colour,
                   zorder=3, edgecolor="black", linewidth=0.5)
        text = meth if view == "published" else f"{meth} ({view})"
        labels.setdefault((round(x, 9), round(y, 9)), []).append(text)
    for (x, y), names in labels.items():
        ax.annotate(", ".join(names), (x, y), xytext=(6, 6), textcoords="offset points",
                    fontsize=8)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="*", color="tab:red", linestyle="", markersize=11,
                      markeredgecolor="black", label="original")]
    views = set(d["view"].to_list())
    for view, (marker, colour) in style.items():
        if view in views:
            handles.append(Line2D([], [], marker=marker, color=colour, linestyle="", markersize=7,
                                  markeredgecolor="black", label=f"{view} (view)"))
    ax.legend(handles=handles, fontsize=8, loc="lower left")
    ax.set_xlabel(f"risk: {risk}  (lower is safer)")
    ax.set_ylabel(f"utility: {utility}  (higher is better)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.margins(0.15)
    left_out = measures.height - d.height
    if left_out:
        ax.text(0.99, 0.01, f"{left_out} row(s) without both values not shown", ha="right",
                transform=ax.transAxes, fontsize=7, color="grey")
    fig.tight_layout()
    return _save_png(fig, Path(path))


_NOISE_PANELS = 8


def plot_noise(original: Any, protected: Any, ptable: PTable, path: str | os.PathLike[str], *,
               title: str = "Noise per original value") -> Path:
    """Histogram of the noise v = protected − original per original value (p-table row class
    1…8): bars are the observed shares among the cells, dots the p-table's probabilities
    (ESSnet Handbook: distribution of the noise by original value). 1000 × 600 PNG."""
    from matplotlib.ticker import MaxNLocator

    f = np.asarray(original, dtype=float).ravel()
    g = np.asarray(protected, dtype=float).ravel()
    if f.shape != g.shape:
        raise InputError(f"plot_noise: {f.size} original against {g.size} protected values")
    keep = (f >= 0) & (f == np.round(f))
    f, g = f[keep].astype(np.int64), g[keep]
    cls = ptable.row_class(f) if f.size else f
    v = g - f
    dist = ptable.distribution().with_columns((pl.col("j") - pl.col("i")).alias("v"))
    classes = list(range(1, ptable.imax + 1))[:_NOISE_PANELS]
    ncols = min(4, max(len(classes), 1))
    nrows = max(1, math.ceil(len(classes) / ncols))
    fig = _figure(10, 6)
    for k, i in enumerate(classes):
        ax = fig.add_subplot(nrows, ncols, k + 1)
        vi = v[cls == i]
        if vi.size:
            vals, counts = np.unique(vi, return_counts=True)
            ax.bar(vals, counts / vi.size, width=0.8, color="tab:blue", alpha=0.7,
                   label="observed")
        di = dist.filter(pl.col("i") == i)
        if di.height:
            ax.plot(di["v"].to_numpy(), di["p"].to_numpy(), "o", color="tab:red", markersize=4,
                    label="p-table")
        last = i == ptable.imax and ptable.period == 1
        ax.set_title(f"n {'≥' if last else '='} {i}  ({vi.size} cells)", fontsize=9)
        ax.set_ylim(0, 1.05)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(labelsize=7)
        if k == 0:
            ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.supxlabel("noise v = protected − original", fontsize=9)
    fig.supylabel("share", fontsize=9)
    fig.tight_layout()
    return _save_png(fig, Path(path))


# --------------------------------------------------------------------------------------------
# the report folder


def _slug(label: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9]+", "_", label).strip("_").lower() or "method"
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


def _fmt(x: Any) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        if math.isinf(x):
            return "∞"
        if x == 0:
            return "0"
        return f"{x:.4g}" if abs(x) >= 1e-3 else f"{x:.2e}"
    return str(x)


def _md_table(frame: pl.DataFrame) -> str:
    head = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(_fmt(x).replace("|", "\\|") for x in r) + " |" for r in frame.iter_rows()]
    return "\n".join([head, rule, *body])


def _html_table(frame: pl.DataFrame, cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in frame.columns)
    body = "\n".join(
        "<tr>" + "".join(f"<td>{html.escape(_fmt(x))}</td>" for x in r) + "</tr>"
        for r in frame.iter_rows()
    )
    return f'<table class="{cls}">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>'


_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: right; }
th { background: #f2f2f2; } td:first-child, td:nth-child(2) { text-align: left; }
.warn { background: #fff4e5; border-left: 4px solid #f0a030; padding: 0.5em 1em; }
.scroll { overflow-x: auto; } img { max-width: 100%; } dt { font-weight: bold; margin-top: 0.5em; }
"""


def _noise_table(pairs: pl.DataFrame, ptable: PTable) -> pl.DataFrame:
    top = min(ptable.imax, 10)
    vals = np.arange(1, top + 1)
    theo = m.ptable_noise_by_value(ptable, vals).select(
        "value", pl.col("p_stay").alias("p_stay (p-table)"), pl.col("inv_var").alias("1/var (p-table)")
    )
    f = pairs["_f"].to_numpy()
    g = pairs["_g"].to_numpy()
    keep = (f >= 1) & (f == np.round(f))
    cls = ptable.row_class(f[keep].astype(np.int64)) if keep.any() else np.zeros(0, np.int64)
    # the observed noise grouped by p-table row class (not by value: n ≥ imax share a class)
    emp = m.noise_by_value(cls.astype(float), (g[keep] - f[keep]) + cls, max_value=top)
    emp = emp.select(pl.col("value").cast(pl.Int64), "cells",
                     pl.col("p_stay").alias("p_stay (observed)"),
                     pl.col("inv_var").alias("1/var (observed)"))
    return theo.with_columns(pl.col("value").cast(pl.Int64)).join(emp, on="value", how="left").sort("value")


def _write_report(out: Path, result: pl.DataFrame, pairs: dict[str, pl.DataFrame],
                  ptables: Mapping[str, PTable], o: _Options, risk: str, utility: str,
                  title: str, n_cells: int) -> None:
    # everything is computed first; each file is then written atomically
    shown = [c for c in result.columns
             if c in ("method", "view", "cells") or result[c].null_count() < result.height]
    table = result.select(shown)
    methods = [x for x in result["method"].unique(maintain_order=True).to_list() if x != "original"]
    out.mkdir(parents=True, exist_ok=True)
    write_frame(result, out / "measures.csv")
    plot_ru_map(result, out / "ru_map.png", risk=risk, utility=utility,
                title=f"R-U map: {title}")
    taken: set[str] = {"ru_map"}
    noise: list[tuple[str, str, pl.DataFrame]] = []
    for label, pt in ptables.items():
        a = pairs[label]
        name = f"noise_{_slug(label, taken)}.png"
        plot_noise(a["_f"], a["_g"], pt, out / name, title=f"Noise per original value: {label}")
        noise.append((label, name, _noise_table(a, pt)))

    options = []
    if o.sensitive:
        options.append(f"sensitive dimension {o.sensitive!r}"
                       + (f", quasi-identifiers {', '.join(o.quasi)}" if o.quasi else "")
                       + f", {'attacker knows themself' if o.know_yourself else 'outside attacker'}"
                       + f", β = {o.beta}, coalition k = {o.coalition}")
    if o.two_way:
        options.append(f"two-way crossing {o.two_way[0]} × {o.two_way[1]}")
    if o.groups:
        options.append(f"rows of {o.groups!r} for the group measures")
    options.append(f"small cells 1…{o.small}")
    intro = (
        f"This report compares {len(methods)} protected version(s) of a table of {n_cells:,} "
        f"cells (dimensions {', '.join(o.dims)}) with the original: {', '.join(methods)}. "
        "Utility measures say how close a protected table stays to the original; risk "
        "measures say how much an intruder still learns from it. Each row of the table is a "
        "method (view *published*: the protected table as released; view *expected*: its "
        "expected inner frequencies, the fair comparison of Langsrud & Lupp 2022); the row "
        "*original* is the original table against itself. Settings: " + "; ".join(options) + "."
    )
    intro_html = re.sub(r"\*(\w+)\*", r"<em>\1</em>", html.escape(intro))
    warn = ("Internal document: it is computed from the original counts and shows the noise "
            "distribution of the methods. Do not publish it.")
    glossary = [(c, *MEASURES[c]) for c in shown if c in MEASURES]

    parts = [
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>", f"<p>{intro_html}</p>", f'<p class="warn">{warn}</p>',
        "<h2>Measures</h2>", '<div class="scroll">', _html_table(table, "measures"), "</div>",
        "<p>The same table is in <a href=\"measures.csv\">measures.csv</a>.</p>",
        "<h2>Risk-utility map</h2>",
        (f"<p>Risk ({html.escape(risk)}) across, utility ({html.escape(utility)}) up: the best "
         "methods sit top left; the original sits at the top right.</p>"),
        '<img src="ru_map.png" alt="R-U confidentiality map" width="800" height="600">',
    ]
    if noise:
        parts.append("<h2>Noise per original value</h2>")
        parts.append("<p>For p-table methods: the observed noise v = protected − original per "
                     "original value (bars) against the p-table's probabilities (dots); below, "
                     "P(v = 0 | n) and 1/Var(v | n), risks that grow when the noise is "
                     "predictable.</p>")
        for label, name, tab in noise:
            parts += [f"<h3>{html.escape(label)}</h3>",
                      f'<img src="{name}" alt="noise of {html.escape(label)}" width="1000" height="600">',
                      _html_table(tab, "noise")]
    parts.append("<h2>What the measures mean</h2><dl>")
    for c, meaning, source in glossary:
        src = f" <em>({html.escape(source)})</em>" if source else ""
        text = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(meaning))
        parts.append(f"<dt>{html.escape(c)}</dt><dd>{text}{src}</dd>")
    parts += ["</dl>", "</body></html>", ""]

    md = [f"# {title}", "", intro, "",
          f"> {warn}", "", "## Measures", "", _md_table(table), "",
          "## Risk-utility map", "",
          f"Risk ({risk}) across, utility ({utility}) up.", "", "![R-U map](ru_map.png)", ""]
    if noise:
        md += ["## Noise per original value", ""]
        for label, name, tab in noise:
            md += [f"### {label}", "", f"![noise of {label}]({name})", "", _md_table(tab), ""]
    md += ["## What the measures mean", ""]
    for c, meaning, source in glossary:
        md.append(f"- **{c}**: {meaning}" + (f" ({source})" if source else ""))
    md.append("")
    write_text(out / "report.html", "\n".join(parts))
    write_text(out / "report.md", "\n".join(md))


# --------------------------------------------------------------------------------------------
# request files (protab report)

_TOP_KEYS = {"title", "output", "dims", "total", "original", "protected", "measures"}
_ORIG_KEYS = {"file", "value", "inner", "inner_value"}
_PROT_KEYS = {"label", "file", "value", "ptable", "expected", "expected_value"}
_MEASURE_KEYS = {"small", "sensitive", "quasi", "know_yourself", "beta", "coalition", "two_way",
                 "groups", "risk", "utility"}


def _unknown_keys(cfg: Mapping[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(cfg) - allowed)
    if extra:
        raise SpecError(f"request: unknown key(s) {show_values(extra)} in {where}; "
                        f"allowed: {show_values(sorted(allowed), 20)}")


def _read_table(path: Path, dims: Sequence[str]) -> pl.DataFrame:
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            return pl.read_csv(path, schema_overrides={d: pl.String for d in dims})
        if suffix in (".parquet", ".pq"):
            return pl.read_parquet(path)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise InputError(f"cannot read {str(path)!r}: {exc}") from None
    raise InputError(f"cannot read {str(path)!r}: use a .csv or .parquet file")


def run_request(request: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> pl.DataFrame:
    """Run a report request file (TOML, format in the module docstring) and write the report
    folder (``out``, else the request's ``output``, else ``report`` beside the request)."""
    path = Path(request)
    try:
        cfg = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SpecError(f"cannot read the request file {str(request)!r}: {exc}") from None
    base = path.parent
    _unknown_keys(cfg, _TOP_KEYS, "the request")
    dims = cfg.get("dims")
    if not dims or not isinstance(dims, list):
        raise SpecError("request: dims = [\"…\", …] names the dimension columns")
    oc = cfg.get("original")
    if not isinstance(oc, dict) or "file" not in oc:
        raise SpecError("request: [original] needs file = '…'")
    _unknown_keys(oc, _ORIG_KEYS, "[original]")
    entries = cfg.get("protected", [])
    if not entries:
        raise SpecError("request: list the protected tables as [[protected]] entries")
    mc = cfg.get("measures", {})
    _unknown_keys(mc, _MEASURE_KEYS, "[measures]")

    value = oc.get("value", "n")
    original = _read_table(base / oc["file"], dims)
    inner = None
    if "inner" in oc:
        inner = _read_table(base / oc["inner"], dims)
        iv = oc.get("inner_value", value)
        if iv not in inner.columns:
            raise InputError(f"{oc['inner']!r} has no column {iv!r} (inner_value)")
        inner = inner.select(*[d for d in dims if d in inner.columns], pl.col(iv).alias(value))
    protected: dict[str, pl.DataFrame] = {}
    pvals: dict[str, str] = {}
    expected: dict[str, pl.DataFrame] = {}
    evals: dict[str, str] = {}
    ptables: dict[str, PTable] = {}
    for e in entries:
        _unknown_keys(e, _PROT_KEYS, "a [[protected]] entry")
        label = e.get("label")
        if not label:
            raise SpecError(f"request: every [[protected]] entry needs label = '…' (entry {e})")
        if label in protected or label in expected or label == "original":
            raise SpecError(f"request: the label {label!r} is used twice (or is reserved)")
        if "file" not in e and "expected" not in e:
            raise SpecError(f"request: [[protected]] {label!r} needs file = '…' or expected = '…'")
        if "file" in e:
            protected[label] = _read_table(base / e["file"], dims)
            if "value" in e:
                pvals[label] = e["value"]
        if "expected" in e:
            expected[label] = _read_table(base / e["expected"], dims)
            if "expected_value" in e:
                evals[label] = e["expected_value"]
        if "ptable" in e:
            if "file" not in e:
                raise SpecError(f"request: [[protected]] {label!r} has a ptable but no file")
            ptables[label] = PTable.read(base / e["ptable"])
    out_dir = Path(out) if out is not None else base / cfg.get("output", "report")
    two_way = mc.get("two_way")
    result = compare(
        original, protected, dims=dims, value=value, protected_value=pvals or None,
        expected=expected or None, expected_value=evals or None, inner=inner,
        ptables=ptables or None, total=cfg.get("total", "Total"), small=int(mc.get("small", 2)),
        sensitive=mc.get("sensitive"), quasi=mc.get("quasi"),
        know_yourself=bool(mc.get("know_yourself", True)), beta=float(mc.get("beta", 0.5)),
        coalition=int(mc.get("coalition", 1)), two_way=two_way, groups=mc.get("groups"),
        risk=mc.get("risk"), utility=mc.get("utility", "hellinger_utility"), out_dir=out_dir,
        title=cfg.get("title", "Risk-utility comparison"),
    )
    print(f"protab report: {result.height} rows of measures; report written to {out_dir}/report.html")
    return result
