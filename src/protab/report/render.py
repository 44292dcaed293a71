"""The report folder: measures.csv, figures, report.html and report.md (made in memory, then
written all at once)."""

from __future__ import annotations

import html
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

import protab.measures as m
from protab._io import spreadsheet_safe, write_batch
from protab.ptable import PTable
from protab.report._columns import MEASURES, Options
from protab.report.plots import _noise_figure, _png, _ru_map_figure

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


def _writer(data: bytes) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.write_bytes(data)

    return write


def _write_files(out: Path, files: Mapping[str, bytes]) -> None:
    """Write the files of the report folder all at once (protab._io.write_batch): either
    every file is replaced or none is, also if the process is killed."""
    # a normal absolute path: "a/b/.." must name the folder a, not a folder called ".."
    folder = Path(os.path.abspath(out))
    write_batch(folder, {name: _writer(data) for name, data in files.items()})


#: the warning at the top of every report
_WARN = ("Internal document: it is computed from the original counts and shows the noise "
         "distribution of the methods. Do not publish it.")


def _write_report(out: Path, result: pl.DataFrame, pairs: dict[str, pl.DataFrame],
                  ptables: Mapping[str, PTable], o: Options, risk: str, utility: str,
                  title: str, n_cells: int, risk_note: str | None = None) -> None:
    """The report folder: measures.csv, the R-U map, a noise figure per p-table method,
    report.html and report.md, every file made in memory first, then written together."""
    shown = [c for c in result.columns
             if c in ("method", "view", "cells") or result[c].null_count() < result.height]
    table = result.select(shown)
    methods = [x for x in result["method"].unique(maintain_order=True).to_list() if x != "original"]
    files: dict[str, bytes] = {"measures.csv": spreadsheet_safe(result).write_csv().encode("utf-8")}
    files["ru_map.png"] = _png(_ru_map_figure(result, risk=risk, utility=utility,
                                              title=f"R-U map: {title}", note=risk_note))
    taken: set[str] = {"ru_map"}
    noise: list[tuple[str, str, pl.DataFrame]] = []
    for label, pt in ptables.items():
        a = pairs[label]
        name = f"noise_{_slug(label, taken)}.png"
        files[name] = _png(_noise_figure(a["_f"], a["_g"], pt,
                                         title=f"Noise per original value: {label}"))
        noise.append((label, name, _noise_table(a, pt)))
    page = _Page(title, _intro(o, methods, n_cells), table,
                 [(c, *MEASURES[c]) for c in shown if c in MEASURES], risk, utility, risk_note, noise)
    files["report.html"] = _html(page).encode("utf-8")
    files["report.md"] = _markdown(page).encode("utf-8")
    _write_files(out, files)


@dataclass
class _Page:
    """What report.html and report.md say: title, introduction, measures table, glossary of its
    columns (name, meaning, source), the R-U map's axes and note, and the noise tables."""

    title: str
    intro: str
    table: pl.DataFrame
    glossary: list[tuple[str, str, str]]
    risk: str
    utility: str
    risk_note: str | None
    noise: list[tuple[str, str, pl.DataFrame]]


def _intro(o: Options, methods: list[str], n_cells: int) -> str:
    """The report's first paragraph: what is compared, how to read the rows, the settings."""
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
    return (
        f"This report compares {len(methods)} protected version(s) of a table of {n_cells:,} "
        f"cells (dimensions {', '.join(o.dims)}) with the original: {', '.join(methods)}. "
        "Utility measures say how close a protected table stays to the original; risk "
        "measures say how much an intruder still learns from it. Each row of the table is a "
        "method (view *published*: the protected table as released; view *expected*: its "
        "expected inner frequencies, the fair comparison of Langsrud & Lupp 2022); the row "
        "*original* is the original table against itself. Settings: " + "; ".join(options) + "."
    )


def _html(page: _Page) -> str:
    """report.html."""
    intro_html = re.sub(r"\*(\w+)\*", r"<em>\1</em>", html.escape(page.intro))
    risk, utility = page.risk, page.utility
    parts = [
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(page.title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(page.title)}</h1>", f"<p>{intro_html}</p>", f'<p class="warn">{_WARN}</p>',
        "<h2>Measures</h2>", '<div class="scroll">', _html_table(page.table, "measures"), "</div>",
        "<p>The same table is in <a href=\"measures.csv\">measures.csv</a>.</p>",
        "<h2>Risk-utility map</h2>",
        (f"<p>Risk ({html.escape(risk)}) across, utility ({html.escape(utility)}) up: the best "
         "methods sit top left; the original sits at the top right.</p>"),
        (f"<p>{html.escape(page.risk_note)}</p>" if page.risk_note else ""),
        '<img src="ru_map.png" alt="R-U confidentiality map" width="800" height="600">',
    ]
    if page.noise:
        parts.append("<h2>Noise per original value</h2>")
        parts.append("<p>For p-table methods: the observed noise v = protected − original per "
                     "original value (bars) against the p-table's probabilities (dots); below, "
                     "P(v = 0 | n) and 1/Var(v | n), risks that grow when the noise is "
                     "predictable. The dots and the p-table columns come from the p-table: "
                     "internal, like the rest of this report.</p>")
        for label, name, tab in page.noise:
            parts += [f"<h3>{html.escape(label)}</h3>",
                      f'<img src="{name}" alt="noise of {html.escape(label)}" width="1000" height="600">',
                      _html_table(tab, "noise")]
    parts.append("<h2>What the measures mean</h2><dl>")
    for c, meaning, source in page.glossary:
        src = f" <em>({html.escape(source)})</em>" if source else ""
        text = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(meaning))
        parts.append(f"<dt>{html.escape(c)}</dt><dd>{text}{src}</dd>")
    parts += ["</dl>", "</body></html>", ""]
    return "\n".join(parts)


def _markdown(page: _Page) -> str:
    """report.md."""
    md = [f"# {page.title}", "", page.intro, "",
          f"> {_WARN}", "", "## Measures", "", _md_table(page.table), "",
          "## Risk-utility map", "",
          f"Risk ({page.risk}) across, utility ({page.utility}) up."
          + (f" {page.risk_note}" if page.risk_note else ""),
          "", "![R-U map](ru_map.png)", ""]
    if page.noise:
        md += ["## Noise per original value", "",
               "Observed noise v = protected − original per original value against the "
               "p-table's probabilities (from the p-table: internal, like the rest of this "
               "report).", ""]
        for label, name, tab in page.noise:
            md += [f"### {label}", "", f"![noise of {label}]({name})", "", _md_table(tab), ""]
    md += ["## What the measures mean", ""]
    for c, meaning, source in page.glossary:
        md.append(f"- **{c}**: {meaning}" + (f" ({source})" if source else ""))
    md.append("")
    return "\n".join(md)
