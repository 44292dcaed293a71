"""Figures of the report: the R-U confidentiality map and the noise per original value (PNG)."""

from __future__ import annotations

import io
import math
import os
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from protab._io import atomic_path
from protab.errors import InputError
from protab.ptable import PTable
from protab.report._columns import WHY_EMPTY

__all__ = ["plot_noise", "plot_ru_map"]


# --------------------------------------------------------------------------------------------
# figures


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Any) -> bytes:
    """The figure as PNG bytes: the figure's own size (no bbox_inches="tight") and no Software
    tag, so that the same inputs give the same bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return buf.getvalue()


def _save_png(fig: Any, path: Path) -> Path:
    data = _png(fig)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return path


def plot_ru_map(measures: pl.DataFrame, path: str | os.PathLike[str], *,
                risk: str = "small_unchanged", utility: str = "hellinger_utility",
                title: str = "R-U confidentiality map", note: str | None = None) -> Path:
    """R-U confidentiality map (Duncan, Keller-McNulty & Stokes 2001; Shlomo & Young 2006):
    the ``risk`` column across, the ``utility`` column up, one labelled point per row of a
    :func:`compare` frame (stars: the original; circles: published; squares: expected).
    Written as an 800 × 600 PNG. Rows where either value is null are left out; when no row
    has both, the plot says why in its middle. ``note``: a line under the plot (e.g. why
    this risk measure was chosen)."""
    return _save_png(_ru_map_figure(measures, risk=risk, utility=utility, title=title, note=note),
                     Path(path))


def _ru_map_figure(measures: pl.DataFrame, *, risk: str, utility: str, title: str,
                   note: str | None) -> Any:
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
    if d.height:
        ax.legend(handles=handles, fontsize=8, loc="lower left")
    ax.set_xlabel(f"risk: {risk}  (lower is safer)")
    ax.set_ylabel(f"utility: {utility}  (higher is better)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.margins(0.15)
    left_out = measures.height - d.height
    if d.height == 0:
        empty = [c for c in (risk, utility) if measures[c].null_count() == measures.height]
        why = "; ".join(f"{c}: {WHY_EMPTY.get(c, 'does not apply to these tables')}" for c in empty)
        ax.text(0.5, 0.5, "\n".join(textwrap.wrap(
                    f"No point to show: no row has both {risk} and {utility}"
                    + (f" ({why})" if why else "") + ". Choose other measures (risk = …, "
                    "utility = … in the request's [measures]).", 60)),
                ha="center", va="center", transform=ax.transAxes, fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
    elif left_out:
        ax.text(0.99, 0.01, f"{left_out} row(s) without both values not shown", ha="right",
                transform=ax.transAxes, fontsize=7, color="grey")
    if note:
        fig.text(0.5, 0.01, "\n".join(textwrap.wrap(note, 120)), ha="center", va="bottom",
                 fontsize=7, color="dimgrey")
    fig.tight_layout(rect=(0, 0.04 if note else 0, 1, 1))
    return fig


_NOISE_PANELS = 8


def plot_noise(original: Any, protected: Any, ptable: PTable, path: str | os.PathLike[str], *,
               title: str = "Noise per original value") -> Path:
    """Histogram of the noise v = protected − original per original value (p-table row class
    1…8): bars are the observed shares among the cells, dots the p-table's probabilities
    (ESSnet Handbook: distribution of the noise by original value). 1000 × 600 PNG. The
    dots show the p-table's probabilities: an internal figure, not for publication."""
    return _save_png(_noise_figure(original, protected, ptable, title=title), Path(path))


def _noise_figure(original: Any, protected: Any, ptable: PTable, *, title: str) -> Any:
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
    return fig
