"""The tables of a protect request protected in memory, by the cell key method or by linked
cell suppression, each with its summary row; then written all at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from protab.cli.words import say
from protab.request.loaders import hierarchy

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from protab.ptable import PTable
    from protab.session import Session
    from protab.table import TableSpec


def protect_one(
    s: Session, name: str, source: str, spec: TableSpec, ptable: PTable, threshold: float | None = None,
    magnitude: Any = None, rules: Any = None,
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Protect one table: the publishable frame (original values dropped) and its summary row."""
    from protab.measures import hellinger_utility, share_changed

    frame = s.cell_key(source, spec, ptable, original=True, threshold=threshold,
                       magnitude=magnitude if spec.sums else None, rules=rules if spec.sums else None)
    n = frame["n"].to_numpy()
    n_pert = frame["n_pert"].fill_null(0).to_numpy()
    row = {
        "table": name,
        "cells": frame.height,
        "changed": share_changed(n, n_pert),
        "method": "ckm",
        "hellinger_utility": hellinger_utility(n, n_pert) if n.sum() > 0 else None,
    }
    # originals, and the sensitivity verdicts (they tell which cells one contributor dominates)
    originals = ["n", "w"] + [c for v in spec.sums for c in (v, f"{v}_w", f"{v}_sensitive", f"{v}_rule")]
    return frame.drop([c for c in originals if c in frame.columns]), row


def suppress_all(
    s: Session, tables: list[dict[str, Any]], specs: list[TableSpec], rules: Any
) -> dict[str, tuple[pl.DataFrame, dict[str, Any]]]:
    """Suppress the tables of each source together, as linked tables (a cell common to two
    tables gets one decision, so that no table helps to disclose another's primary cell):
    per table its original values, null where suppressed (no labels: they would tell which
    cells are sensitive), and its summary row."""
    out: dict[str, tuple[pl.DataFrame, dict[str, Any]]] = {}
    for src in dict.fromkeys(t["source"] for t in tables):
        group = [(t, spec) for t, spec in zip(tables, specs) if t["source"] == src]
        t0, spec0 = group[0]
        options: dict[str, Any] = dict(
            rules=rules if spec0.sums else None, min_frequency=None if spec0.sums else t0.get("min_frequency"),
            protect_zeros=t0.get("protect_zeros", False), direct_disclosure=t0.get("direct_disclosure") or None,
            coalition=t0.get("coalition", 1), k_disclosure=t0.get("k_disclosure"),
            method=t0.get("suppression_method", "gauss"), cost=t0.get("suppression_cost"),
            time_limit=t0.get("time_limit"))
        frames = (s.suppress(src, [spec for _, spec in group], **options) if len(group) > 1
                  else [s.suppress(src, spec0, **options)])
        for (t, spec), frame in zip(group, frames):
            out[t["name"]] = (frame.drop("suppressed"), _suppression_row(s, t, spec, frame))
    return out


def _suppression_row(s: Session, t: dict[str, Any], spec: TableSpec, frame: pl.DataFrame) -> dict[str, Any]:
    """The summary of a suppressed table: the share of its cells suppressed and the share of its
    value (the count, or the first sums variable) in suppressed cells, from the original table."""
    import polars as pl

    value = spec.sums[0] if spec.sums else "n"
    mask = frame["suppressed"] != "no"
    dims = [d.column for d in spec.dimensions]
    original = s.tabulate(t["source"], spec).select(*dims, pl.col(value).alias("_v"))
    v = frame.select(dims).join(original, on=dims, how="left", nulls_equal=True)["_v"].cast(pl.Float64).abs()
    total = float(v.sum())
    # the mean of a boolean column: a float (polars types it as any value)
    return {"table": t["name"], "cells": frame.height, "method": "suppression",
            "changed": float(cast(float, mask.mean())) if frame.height else None, "value": value,
            "suppressed_value_share": float(v.filter(mask).sum()) / total if total > 0 else None,
            "hellinger_utility": None}


def specs(s: Session, cfg: dict[str, Any], base: Path, file: str = "the request") -> list[TableSpec]:
    """The TableSpec of every table (hierarchies read, their labels checked against their codes),
    before any table is built."""
    from protab.table import TableSpec
    from protab.vocabulary.labels import check_labels

    out = []
    for t in cfg["tables"]:
        dims: dict[str, Any] = {}
        for d in t["dims"]:
            h = cfg.get("hierarchies", {}).get(d)
            dims[d] = hierarchy(s, h, t["source"], d, base) if h else None
            if h:
                check_labels(h, dims[d].codes, file, f"[hierarchies.{d}]")
        out.append(TableSpec(
            dims, formula=t.get("formula"), weight=t.get("weight"),
            drop_empty=t.get("drop_empty", False), null_code=t.get("null_code"),
            margins=t.get("margins", True), sums=t.get("sums", ()), null_sums=t.get("null_sums", "error"),
            freq=t.get("freq"),
        ))
    return out


def protect_tables(
    s: Session, cfg: dict[str, Any], base: Path, methods: dict[str, Any], file: str = "the request"
) -> tuple[dict[str, pl.DataFrame], list[dict[str, Any]]]:
    """Every table protected in memory, by its method (the suppressed ones of a source together)."""
    from protab._progress import track

    tables = cfg["tables"]
    table_specs = specs(s, cfg, base, file)
    rows, frames = [], {}
    suppressed: dict[str, tuple[pl.DataFrame, dict[str, Any]]] = {}
    for k, (t, spec) in enumerate(track(list(zip(tables, table_specs)), "protecting tables",
                                        total=len(tables), unit="table")):
        say(f"  protecting {t['name']} ({k + 1}/{len(tables)}) …")
        if t.get("method", "ckm") == "suppression":
            if t["name"] not in suppressed:
                chosen = [(u, x) for u, x in zip(tables, table_specs) if u.get("method", "ckm") == "suppression"]
                suppressed.update(suppress_all(s, [u for u, _ in chosen], [x for _, x in chosen],
                                               methods["rules"]))
            frames[t["name"]], row = suppressed[t["name"]]
        else:
            frames[t["name"]], row = protect_one(s, t["name"], t["source"], spec, methods["ptable"],
                                                 threshold=t.get("threshold"), magnitude=methods["magnitude"],
                                                 rules=methods["rules"])
        rows.append(row)
    return frames, rows


def table_labels(cfg: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per table of a request, the ``labels`` and ``name`` of its dimensions' hierarchies
    (``{"labels": {dim: …}, "names": {dim: …}}``, protab.exchange.labels)."""
    hs = cfg.get("hierarchies", {})
    return {t["name"]: {"labels": {d: hs[d]["labels"] for d in t["dims"] if "labels" in hs.get(d, {})},
                        "names": {d: hs[d]["name"] for d in t["dims"] if "name" in hs.get(d, {})}}
            for t in cfg["tables"]}


def write_all(frames: dict[str, pl.DataFrame], out: Path, formats: Sequence[str],
              labels: dict[str, dict[str, Any]] | None = None, label_columns: Sequence[str] = ()) -> None:
    """Write every table into ``out`` at once, after all were protected (see protab._io), with
    the run's manifest protab_run.json (protab._run_manifest) in the same batch. The
    exchange formats are made in memory first, so a table they refuse stops the batch before
    any file is written. ``labels`` (of :func:`table_labels`) name the codes of the SDMX
    structure and JSON-stat; ``label_columns`` are the languages of CSV and Parquet label columns."""
    from protab._io import write_batch
    from protab._run_manifest import with_manifest
    from protab.cli.options import output_file

    files = {output_file(name, fmt): _writer(name, frame, fmt, (labels or {}).get(name, {}), label_columns)
             for name, frame in frames.items() for fmt in formats}
    write_batch(out, with_manifest(out, files, "protect"))


def _writer(name: str, frame: pl.DataFrame, fmt: str, labels: dict[str, Any],
            label_columns: Sequence[str]) -> Callable[[Path], None]:
    """The batch writer of one table in one format (SDMX dataflow / JSON-stat id: the upper-case name)."""
    from protab._io import frame_writer

    named = {"labels": labels.get("labels") or None, "names": labels.get("names") or None}
    if fmt == "sdmx-csv":
        from protab.exchange import sdmx_csv_writer

        return sdmx_csv_writer(frame, name.upper())
    if fmt == "sdmx-structure":
        from protab.exchange import sdmx_structure_writer

        return sdmx_structure_writer(frame, name.upper(), **named)
    if fmt == "json-stat":
        from protab.exchange import json_stat_writer

        return json_stat_writer(frame, name.upper(), label=name, language=next(iter(label_columns), None), **named)
    return frame_writer(labelled(frame, labels, label_columns), fmt)


def labelled(frame: pl.DataFrame, labels: dict[str, Any], label_columns: Sequence[str]) -> pl.DataFrame:
    """A table as protect's CSV and Parquet files and publish's database hold it: with a column
    ``<dim>_label_<lang>`` right after each labelled dimension per language of ``label_columns``
    (``labels``: the table's entry of :func:`table_labels`; protab.exchange.with_label_columns)."""
    if not (label_columns and labels.get("labels")):
        return frame
    from protab.exchange import with_label_columns

    return with_label_columns(frame, labels["labels"], label_columns)


def summary(rows: list[dict[str, Any]]) -> str:
    """One line per table with the measures that apply to its method: for the cell key method
    the share of cells changed and the Hellinger utility; for suppression the share of cells
    and of the table's value suppressed. A measure without meaning (an empty table) is "-"."""
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.1%}"

    lines = [f"{'table':<34}{'cells':>10}  measures"]
    for r in rows:
        if r.get("method") == "suppression":
            text = (f"suppressed {pct(r['changed'])} of cells, {pct(r['suppressed_value_share'])} of the "
                    f"{'value' if r.get('value') == 'n' else repr(r.get('value'))}")
        else:
            h = r["hellinger_utility"]
            text = f"changed {pct(r['changed'])}, Hellinger utility {'-' if h is None else f'{h:.6f}'}"
        lines.append(f"{r['table']:<34}{r['cells']:>10,}  {text}")
    return "\n".join(lines)
