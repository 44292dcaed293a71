"""Draw where protab stands: its time over the floor, and how time grows with records and cells.

    python benchmarks/plot_performance.py                        # docs/performance.png + table
    python benchmarks/plot_performance.py --results my.csv --out my.png --markdown docs/performance.md

Reads the rows the scale benchmarks append with ``--record`` (benchmarks/measurements.py; the
repository keeps the last measured set in benchmarks/measurements.csv) and draws one figure:

1. protab's time over its floor per number of records, one line per method and engine (counts
   and magnitudes on DuckDB and on Spark), with the targets as dotted lines (other rows, such
   as the service's, are in the table only);
2. seconds per number of records, protab (solid) and its floor (dashed), log–log, so that the
   growth with size shows;
3. small count rounding: seconds per number of inner cells, protab and, where it ran, R's
   PLSrounding on the same data.

Where a case was measured more than once, its latest row counts. The Markdown table of the
same rows is printed, and with ``--markdown FILE`` written into FILE between the lines
``<!-- measurements:start -->`` and ``<!-- measurements:end -->``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent
#: ratio targets of the speed work (protab's time over the floor), drawn as dotted lines
TARGETS = {("counts", "duckdb"): 1.15, ("magnitudes", "duckdb"): 1.5, ("counts", "spark"): 2.0,
           ("magnitudes", "spark"): 3.0}
COLOURS = {("counts", "duckdb"): "tab:blue", ("magnitudes", "duckdb"): "tab:orange",
           ("counts", "spark"): "tab:green", ("magnitudes", "spark"): "tab:red"}
START, END = "<!-- measurements:start -->", "<!-- measurements:end -->"


def latest(path: Path) -> pl.DataFrame:
    """The measurements, the latest row of each case (benchmark, method, engine, size)."""
    if not path.is_file():
        raise SystemExit(f"no measurements at {path}: run a benchmark with --record first")
    rows = pl.read_csv(path, infer_schema_length=None)
    key = ["benchmark", "method", "engine", "records", "inner_cells"]
    return (rows.with_row_index("n").sort("n").unique(subset=key, keep="last")
            .sort(["benchmark", "method", "engine", "records", "inner_cells"]).drop("n"))


def _scale_panels(axes, rows: pl.DataFrame) -> None:
    ratio_ax, time_ax = axes
    drawn = pl.DataFrame(list(COLOURS), schema=["method", "engine"], orient="row")
    scale = rows.join(drawn, on=["method", "engine"], how="semi", maintain_order="left")
    for (method, engine), part in scale.group_by(["method", "engine"], maintain_order=True):
        part = part.sort("records")
        colour = COLOURS.get((method, engine), "tab:gray")
        label = f"{method}, {engine}"
        ratio_ax.plot(part["records"], part["ratio"], "o-", color=colour, label=label)
        if (method, engine) in TARGETS:
            ratio_ax.axhline(TARGETS[(method, engine)], color=colour, linestyle=":", linewidth=1)
        time_ax.plot(part["records"], part["protab_s"], "o-", color=colour, label=f"protab: {label}")
        time_ax.plot(part["records"], part["floor_s"], "s--", color=colour, alpha=0.6,
                     label=f"floor: {part['floor'][0]}")
    ratio_ax.set(xscale="log", yscale="log", xlabel="records", ylabel="protab time / floor time",
                 title="protab over its floor (dotted: targets)")
    ratio_ax.axhline(1.0, color="black", linewidth=0.8)
    ratio_ax.legend(fontsize=7)
    time_ax.set(xscale="log", yscale="log", xlabel="records", ylabel="seconds",
                title="time by records: protab (solid) and its floor (dashed)")
    time_ax.legend(fontsize=6)


def _rounding_panel(ax, rows: pl.DataFrame) -> None:
    scr = rows.filter(pl.col("benchmark") == "rounding_scale").sort("inner_cells")
    for (method,), part in scr.group_by(["method"], maintain_order=True):
        ax.plot(part["inner_cells"], part["protab_s"], "o-", label=f"protab: {method}")
        peers = part.filter(pl.col("peer_s").is_not_null())
        if peers.height:
            ax.plot(peers["inner_cells"], peers["peer_s"], "^--", label=f"{peers['peer'][0]} (same data)")
    if scr.height:
        ax.plot(scr["inner_cells"], scr["floor_s"], "s:", color="gray", label="floor: X + Xᵀy")
    ax.set(xscale="log", yscale="log", xlabel="inner cells", ylabel="seconds",
           title="small count rounding by inner cells")
    ax.legend(fontsize=7)


def plot(rows: pl.DataFrame, out: Path) -> Path:
    """Draw the three panels of ``rows`` into the PNG ``out`` (matplotlib's Agg canvas)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 4.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 3)
    _scale_panels(axes[:2], rows)
    _rounding_panel(axes[2], rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    return out


def markdown(rows: pl.DataFrame) -> str:
    """The rows as a Markdown table (sizes, times, ratio, peer, load at the time)."""
    head = ("| method | engine | records | inner cells | protab s | floor | floor s | protab / floor "
            "| peer s | load | date |\n|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|")
    lines = [head]
    for r in rows.iter_rows(named=True):
        records = f"{r['records']:,.0f}" if r["records"] is not None else ""
        inner = f"{r['inner_cells']:,.0f}" if r["inner_cells"] is not None else ""
        peer = f"{r['peer_s']:.2f} ({r['peer']})" if r.get("peer_s") is not None else ""
        lines.append(f"| {r['method']} | {r['engine']} | {records} | {inner} | {r['protab_s']:.2f} | "
                     f"{r['floor']} | {r['floor_s']:.2f} | **{r['ratio']:.2f}** | {peer} | {r['load1']:.1f} "
                     f"| {r['date']} |")
    return "\n".join(lines)


def write_between_markers(path: Path, table: str) -> None:
    """Replace the text between :data:`START` and :data:`END` in ``path`` with ``table``."""
    text = path.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{path} has no {START} ... {END} lines to write the table between")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{START}\n{table}\n{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=str(HERE / "measurements.csv"), help="the measurements CSV")
    ap.add_argument("--out", default=str(HERE.parent / "docs" / "performance.png"), help="the PNG to write")
    ap.add_argument("--markdown", default=None, metavar="FILE",
                    help="also write the table into FILE between the measurements markers")
    args = ap.parse_args(argv)
    rows = latest(Path(args.results))
    print(f"wrote {plot(rows, Path(args.out))}", file=sys.stderr)
    table = markdown(rows)
    print(table)
    if args.markdown:
        write_between_markers(Path(args.markdown), table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
