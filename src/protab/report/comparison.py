"""compare: the measures of several protected versions of one table, one row per method and view."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

import protab.measures as m
from protab.errors import InputError, show_values
from protab.ptable import PTable
from protab.report._align import (
    _align,
    _crossing,
    _finest_published,
    _inner_rows,
    _is_finest,
    _is_total,
    _select,
    _total_mask,
    _value_column,
)
from protab.report._columns import MEASURES, SCHEMA, WHY_EMPTY, Options
from protab.report.render import _write_report

__all__ = ["compare"]


_PROTECTED_NAMES = ("n_pert", "n_rounded", "rounded", "n_protected", "protected")
_EXPECTED_NAMES = ("expected", "n_expected", "ipfit", "ipFit", "fit", "y_hat")


# --------------------------------------------------------------------------------------------
# the measures of one aligned pair


def _nan(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _measure_row(a: pl.DataFrame, o: Options, *, is_original: bool) -> dict[str, Any]:
    """The measures of one aligned pair (``_f`` original, ``_g`` protected), null where a
    measure does not apply."""
    row: dict[str, Any] = {"cells": a.height}
    if a.height == 0:
        return row
    row.update(_cell_measures(a, o))
    row.update(_inner_measures(a, o, is_original))
    finest = _finest_published(a, o.dims, o.total)
    if finest.height:
        # the inner cells, or for a formula table without them its finest published crossings
        row["rm"] = m.conditional_entropy_risk(finest["_f"].to_numpy(), finest["_g"].to_numpy())
    if o.two_way:
        row.update(_two_way_measures(a, o, o.two_way))
    if o.sensitive:
        row.update(_sensitive_measures(a, o, o.sensitive))
    return row


def _cell_measures(a: pl.DataFrame, o: Options) -> dict[str, Any]:
    """The measures of every cell compared, margins included (ESSnet Handbook; Shlomo & Young 2006)."""
    f = a["_f"].to_numpy()
    g = a["_g"].to_numpy()
    row: dict[str, Any] = {}
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
    return row


def _inner_measures(a: pl.DataFrame, o: Options, is_original: bool) -> dict[str, Any]:
    """The group and entropy measures of the inner cells (Shlomo & Young 2006; Antal, Shlomo &
    Elliot 2014); none without inner cells."""
    inner = _inner_rows(a, o.dims, o.total)
    if not inner.height:
        return {}
    fi, gi = inner["_f"].to_numpy(), inner["_g"].to_numpy()
    grp = inner[o.groups] if o.groups else None
    row: dict[str, Any] = {"aad": m.average_absolute_difference(fi, gi, grp)}
    vb = m.variance_of_cell_averages(fi, grp)
    va = m.variance_of_cell_averages(gi, grp)
    row["var_cell_avg_change_pct"] = 100.0 * (va - vb) / vb if vb > 0 else float("nan")
    if grp is not None:
        row["anova_r2_before"] = m.anova_r2(fi, grp)
        row["anova_r2_after"] = m.anova_r2(gi, grp)
    if fi.sum() > 0 and (fi >= 0).all():
        row["entropy_risk"] = (m.entropy_risk(fi) if is_original
                               else m.entropy_risk_perturbed(fi, gi))
    return row


def _two_way_measures(a: pl.DataFrame, o: Options, two_way: tuple[str, str]) -> dict[str, Any]:
    """χ² and Cramér's V of the ``two_way`` crossing before and after (ESSnet Handbook)."""
    r, c = two_way
    cross = _crossing(a, o.dims, o.total, [r, c])
    if not cross.height:
        return {}
    tf, _, _ = m.two_way_table(cross, r, c, "_f")
    tg, _, _ = m.two_way_table(cross, r, c, "_g")
    res = m.independence_before_after(tf, tg)
    return {k: res[k] for k in ("chi2_before", "chi2_after", "p_before", "p_after",
                                "cramers_v_before", "cramers_v_after")}


def _sensitive_measures(a: pl.DataFrame, o: Options, s: str) -> dict[str, Any]:
    """The disclosive cells of the ``sensitive`` categories (Lupp & Langsrud 2021) and, with
    quasi-identifiers, F_β of exact attribute disclosures (Langsrud & Lupp 2022)."""
    row: dict[str, Any] = {}
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


def _default_risk(result: pl.DataFrame, first: str, utility: str) -> tuple[str, str | None]:
    """The risk axis of the R-U map when none was asked for: ``first`` if some protected row
    has it (and, for f_beta, the original has exact disclosures to speak of), else the first
    of small_unchanged, rm and small_share that has: the map is never empty for want of a
    risk. Returns the measure and, if it is not ``first``, a sentence saying why."""
    prot = result.filter(pl.col("method") != "original")

    def usable(name: str) -> bool:
        if name == "f_beta" and not (result["disclosures_original"].fill_null(0) > 0).any():
            return False
        return prot.filter(pl.col(name).is_not_null() & pl.col(utility).is_not_null()).height > 0

    for name in (first, "small_unchanged", "rm", "small_share"):
        if usable(name):
            if name == first:
                return name, None
            why = ("the original has no exact disclosures of the sensitive dimension"
                   if first == "f_beta" and prot["f_beta"].null_count() < prot.height
                   else WHY_EMPTY.get(first, "it is empty"))
            return name, f"The risk axis shows {name} because {first} does not apply here: {why}."
    return first, None


def _mapping(x: str | Mapping[str, str] | None, label: str) -> str | None:
    if x is None or isinstance(x, str):
        return x
    return x.get(label)


def compare(
    original: pl.DataFrame, protected: Mapping[str, pl.DataFrame], *, dims: Sequence[str], value: str = "n",
    protected_value: str | Mapping[str, str] | None = None, expected: Mapping[str, pl.DataFrame] | None = None,
    expected_value: str | Mapping[str, str] | None = None, inner: pl.DataFrame | None = None,
    ptables: Mapping[str, PTable] | None = None, total: str = "Total", small: int = 2,
    sensitive: str | None = None, quasi: Sequence[str] | None = None, know_yourself: bool = True,
    beta: float = 0.5, coalition: int = 1, two_way: Sequence[str] | None = None, groups: str | None = None,
    risk: str | None = None, utility: str = "hellinger_utility", out_dir: str | os.PathLike[str] | None = None,
    title: str = "Risk-utility comparison",
) -> pl.DataFrame:
    """Measures of several protected versions of one table, side by side (docs/methods.md §5).

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
    docstring); ``risk`` and ``utility`` name the columns of the R-U map. Without ``risk``
    the map shows ``f_beta`` (with sensitive and quasi, when the original has exact
    disclosures), else the first of ``small_unchanged``, ``rm`` and ``small_share`` that a
    protected row has, and the report says why. ``rm`` is computed on the inner cells or, for
    a table published by a formula without them, on its finest published crossings.
    """
    dims = list(dims)
    if not dims:
        raise InputError("compare needs the dimension columns (dims=[…])")
    if not protected and not expected:
        raise InputError("compare needs at least one protected table (protected={label: frame})")
    opts = _options(dims, total, small, sensitive, quasi, know_yourself, beta, coalition, two_way, groups)
    _check_labels(protected, expected, ptables)
    default_risk = risk is None
    if risk is None:
        risk = "f_beta" if sensitive and quasi else "small_unchanged"
    for axis, name in (("risk", risk), ("utility", utility)):
        if name not in MEASURES:
            raise InputError(f"{axis}={name!r} is not a measure; use one of {show_values(list(MEASURES), 40)}")

    orig = _original(original, dims, value)
    rows, pairs = _published_rows(orig, protected, protected_value, value, opts)
    if expected:
        rows += _expected_rows(orig, inner, expected, expected_value, value, opts)
    result = pl.DataFrame([{k: (_nan(row.get(k)) if SCHEMA[k] == pl.Float64 else row.get(k)) for k in SCHEMA}
                           for row in rows], schema=SCHEMA)
    note = None
    if default_risk:
        risk, note = _default_risk(result, risk, utility)
    if out_dir is not None:
        _write_report(Path(out_dir), result, pairs, ptables or {}, opts, risk, utility, title,
                      orig.height, note)
    return result


def _original(original: pl.DataFrame, dims: list[str], value: str) -> pl.DataFrame:
    """The original table as dims and ``_f``; every cell must have a value."""
    orig = _select(original, dims, _value_column(original, value, (), dims, None, "original"),
                   "_f", "original")
    if orig["_f"].null_count():
        raise InputError(f"original: {orig['_f'].null_count()} cells have no value in {value!r}")
    return orig


def _options(dims: list[str], total: str, small: int, sensitive: str | None, quasi: Sequence[str] | None,
             know_yourself: bool, beta: float, coalition: int, two_way: Sequence[str] | None,
             groups: str | None) -> Options:
    """The options of one comparison, checked against each other and the dims."""
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
    return Options(dims, total, small, sensitive, list(quasi) if quasi else None, know_yourself,
                   beta, coalition, tw, groups)


def _check_labels(protected: Mapping[str, pl.DataFrame], expected: Mapping[str, pl.DataFrame] | None,
                  ptables: Mapping[str, PTable] | None) -> None:
    """'original' names the original table only; p-tables belong to protected tables given."""
    if "original" in protected or "original" in (expected or {}):
        raise InputError("the label 'original' is reserved for the original table; rename the method")
    bad_pt = [k for k in (ptables or {}) if k not in protected]
    if bad_pt:
        raise InputError(f"ptables given for unknown methods {show_values(bad_pt)}")


def _published_rows(orig: pl.DataFrame, protected: Mapping[str, pl.DataFrame],
                    protected_value: str | Mapping[str, str] | None, value: str,
                    opts: Options) -> tuple[list[dict[str, Any]], dict[str, pl.DataFrame]]:
    """The rows of view ``published``: the original against itself, then each protected table;
    and each protected table aligned with the original (label → pair)."""
    dims, total = opts.dims, opts.total
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
    return rows, pairs


def _expected_rows(orig: pl.DataFrame, inner: pl.DataFrame | None, expected: Mapping[str, pl.DataFrame],
                   expected_value: str | Mapping[str, str] | None, value: str,
                   opts: Options) -> list[dict[str, Any]]:
    """The rows of view ``expected``: the original inner cells against themselves, then each
    method's expected inner frequencies against them (Langsrud & Lupp 2022)."""
    dims, total = opts.dims, opts.total
    if inner is not None:
        icol = _value_column(inner, value, (), dims, None, "original inner table")
        orig_inner = _select(inner, dims, icol, "_f", "original inner table")
    else:
        orig_inner = _inner_rows(orig, dims, total)
    orig_inner = orig_inner.drop([c for c in orig_inner.columns if c.endswith("_level")])
    if orig_inner.height == 0:
        raise InputError("compare: the original has no inner cells; pass inner=the original inner table")
    rows = [{"method": "original", "view": "expected",
             **_measure_row(orig_inner.with_columns(pl.col("_f").alias("_g")), opts, is_original=True)}]
    for label, frame in expected.items():
        col = _value_column(frame, _mapping(expected_value, label), _EXPECTED_NAMES, dims,
                            value, f"expected frequencies {label!r}")
        ex = _select(frame, dims, col, "_g", f"expected frequencies {label!r}")
        ex = ex.drop([c for c in ex.columns if c.endswith("_level")])
        a = _align(orig_inner, ex, dims, total, f"{label} (expected)")
        rows.append({"method": label, "view": "expected", **_measure_row(a, opts, is_original=False)})
    return rows
