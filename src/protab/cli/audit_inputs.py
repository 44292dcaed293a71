"""What ``protab audit`` reads, checked before any model matrix is built (docs/audit.md): the
published tables of one run — from an output folder of ``protab protect`` or ``protab
programme`` (with its run manifest protab_run.json) or from a database ``protab publish``
wrote (with its table protab_run) — each unchanged since its run, all of one run, each a
table of the expected columns with numeric counts, and the cells that tables share published
alike. Also the ``--report`` path: never an input, a published table or a file of a run.
Every refusal is one InputError line naming the files or tables."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protab._run_manifest import MANIFEST, RUN_TABLE, file_digest, read_manifest, table_digest
from protab.errors import InputError, show_values

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

#: the published count the audit reads
VALUE = "n_pert"


def read_folder(folder: Path, names: dict[str, list[str]], rerun: str) -> dict[str, pl.DataFrame]:
    """The tables ``names`` (name → its dimensions) of an output folder: ``<name>.parquet``, else
    ``<name>.csv``; each listed in the folder's manifest with its digest, all of one run."""
    if not folder.is_dir():
        raise InputError(f"audit: the folder of the published tables {str(folder)!r} does not exist; {rerun}")
    manifest = read_manifest(folder, missing_ok=True)
    if manifest is None:
        raise InputError(f"audit: {str(folder)!r} has no {MANIFEST}, the run fingerprint protab writes with its "
                         f"tables, so the audit cannot tell which run wrote them; {rerun}")
    frames, runs = {}, {}
    for name, dims in names.items():
        path = next((folder / f"{name}.{ext}" for ext in ("parquet", "csv") if (folder / f"{name}.{ext}").is_file()),
                    None)
        if path is None:
            raise InputError(f"audit: table {name!r} is not in {str(folder)!r} (no {name}.parquet or {name}.csv); "
                             f"{rerun}")
        copies = [folder / f"{name}.{ext}" for ext in ("parquet", "csv") if (folder / f"{name}.{ext}").is_file()]
        # the copy read and the one an analyst may open: both as one run wrote them
        ids = {_unchanged(copy, manifest, rerun)["run_id"] for copy in copies}
        if len(ids) > 1:
            raise InputError(f"audit: {name}.parquet and {name}.csv of {str(folder)!r} come from different runs; "
                             f"the audit takes the tables of one run: {rerun}")
        runs[name] = ids.pop()
        frames[name] = check_table(name, _read_file(path), dims)
    same_run(runs, str(folder), rerun)
    return frames


def _unchanged(path: Path, manifest: dict[str, Any], rerun: str) -> dict[str, Any]:
    """The manifest's entry of ``path``; InputError when it has none or its digest differs."""
    entry = manifest["files"].get(path.name)
    if entry is None:
        raise InputError(f"audit: {str(path)!r} is not listed in {MANIFEST} of its folder: it was not written by "
                         f"a protab run into it; {rerun}")
    if file_digest(path) != entry["sha256"]:
        raise InputError(f"audit: {str(path)!r} was modified since the run that wrote it (its sha256 is not the "
                         f"one in {MANIFEST}); audit the tables as published, or {rerun}")
    return entry


def _read_file(path: Path) -> pl.DataFrame:
    import polars as pl

    try:
        if path.suffix == ".parquet":
            return pl.read_parquet(path)
        return pl.read_csv(path, infer_schema=False)
    except Exception as exc:  # polars raises many kinds for a garbage file
        raise InputError(f"audit: {str(path)!r} cannot be read as a table ({type(exc).__name__})") from None


def read_published(database: Path, names: dict[str, list[str]], rerun: str) -> dict[str, pl.DataFrame]:
    """The tables ``names`` of a database ``protab publish`` wrote, each with its digest in protab_run."""
    import duckdb

    from protab.engines import DuckDBEngine
    from protab.sqltools import quote_ident

    try:
        eng = DuckDBEngine(duckdb.connect(str(database), read_only=True))
    except duckdb.Error as exc:
        raise InputError(f"audit: {str(database)!r} cannot be opened as a DuckDB database "
                         f"({type(exc).__name__})") from None
    try:
        tables = {r[0] for r in eng.rows("SELECT table_name FROM duckdb_tables()")}
        if RUN_TABLE not in tables:
            raise InputError(f"audit: {str(database)!r} has no table {RUN_TABLE}, the run fingerprint protab publish "
                             f"writes, so the audit cannot tell which run wrote its tables; {rerun}")
        digests = {r[0]: (r[1], r[2]) for r in eng.rows(f"SELECT table_name, run_id, sha256 FROM {RUN_TABLE}")}
        frames, runs = {}, {}
        for name, dims in names.items():
            if name not in tables or name not in digests:
                raise InputError(f"audit: table {name!r} is not a published table of {str(database)!r} "
                                 f"(not in it or not in {RUN_TABLE}); {rerun}")
            frame = eng.frame(f"SELECT * FROM {quote_ident(name)}")
            if table_digest(frame) != digests[name][1]:
                raise InputError(f"audit: table {name!r} of {str(database)!r} was modified since the run that "
                                 f"published it (its digest is not the one in {RUN_TABLE}); {rerun}")
            runs[name] = digests[name][0]
            frames[name] = check_table(name, frame, dims)
    finally:
        eng.close()
    same_run(runs, str(database), rerun)
    return frames


def same_run(runs: dict[str, str], where: str, rerun: str) -> None:
    """Refuse tables of different runs (their run ids in the manifest differ)."""
    first = next(iter(runs), None)
    if first is None:
        return
    other = next((n for n in runs if runs[n] != runs[first]), None)
    if other is not None:
        raise InputError(f"audit: tables {first!r} (run {runs[first][:8]}) and {other!r} (run {runs[other][:8]}) of "
                         f"{where!r} come from different runs; the audit takes the tables of one run: {rerun}")


def check_table(name: str, frame: pl.DataFrame, dims: list[str]) -> pl.DataFrame:
    """A published table with its dimension and level columns and numeric counts: codes as
    text, levels as integers, counts as numbers (null where blanked)."""
    import polars as pl

    wanted = [c for d in dims for c in (d, f"{d}_level")] + [VALUE]
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise InputError(f"audit: table {name!r} lacks the column(s) {show_values(missing)} (its columns: "
                         f"{show_values(frame.columns, 10)}): not a table protab published")
    out = frame.select(wanted).with_columns(pl.col(d).cast(pl.Utf8) for d in dims)
    for col, kind in [(f"{d}_level", pl.Int64) for d in dims] + [(VALUE, pl.Float64)]:
        text = out[col].cast(pl.Utf8).str.strip_chars()
        values = text.cast(kind, strict=False)
        bad = text.filter(values.is_null() & text.is_not_null() & (text != ""))
        if bad.len() or (col != VALUE and values.null_count()):
            shown = show_values(bad.unique(maintain_order=True).head(3).to_list()) if bad.len() else "empty values"
            raise InputError(f"audit: column {col!r} of table {name!r} holds {shown}, not "
                             f"{'counts' if col == VALUE else 'levels'} (whole numbers)")
        out = out.with_columns(values.alias(col))
    counts = out[VALUE].drop_nulls()
    odd = counts.filter((counts != counts.round(0)) | (counts < 0) | ~counts.is_finite())
    if odd.len():
        raise InputError(f"audit: column {VALUE!r} of table {name!r} holds {show_values(odd.head(3).to_list())}, "
                         "not published counts (whole numbers of 0 or more)")
    if out.height == 0:
        raise InputError(f"audit: table {name!r} has no rows: a table protab published has at least its total")
    return out


def check_shared(frames: dict[str, pl.DataFrame], dims: dict[str, list[str]]) -> None:
    """Refuse two tables that publish one cell (same codes at the same levels, the dimensions one
    lacks at their total) with different values: one run of the cell key method gives a cell one
    value. Blanked cells are not compared (tables may blank below different thresholds)."""
    import polars as pl

    names = list(frames)
    for k, a in enumerate(names):
        for b in names[k + 1:]:
            common = [c for d in dims[a] if d in dims[b] for c in (d, f"{d}_level")]
            fa, fb = (_at_total(frames[x], dims[x], dims[y], common) for x, y in ((a, b), (b, a)))
            if common:
                both = fa.join(fb, on=common, how="inner", nulls_equal=True, suffix="_b")
            else:
                both = fa.join(fb, how="cross", suffix="_b")
            bad = both.filter(pl.col(VALUE).is_not_null() & pl.col(f"{VALUE}_b").is_not_null()
                              & (pl.col(VALUE) != pl.col(f"{VALUE}_b")))
            if bad.height:
                row = bad.row(0, named=True)
                cell = ", ".join(f"{d} = {row[d]!r}" for d in dims[a] if d in dims[b]) or "the grand total"
                raise InputError(f"audit: tables {a!r} and {b!r} publish different values for the cell they share "
                                 f"({cell}: {row[VALUE]:g} and {row[VALUE + '_b']:g}; {bad.height} cell(s) in all): "
                                 "they are not the tables of one run")


def _at_total(frame: pl.DataFrame, own: list[str], other: list[str], common: list[str]) -> pl.DataFrame:
    import polars as pl

    keep = [pl.col(f"{d}_level") == 0 for d in own if d not in other]
    return (frame.filter(pl.all_horizontal(keep)) if keep else frame).select(*common, VALUE)


def check_report(raw: str, protected: list[tuple[str, str]], runs: list[Path]) -> Path:
    """The ``--report`` path, before any work: a .csv or .parquet file in a folder that exists,
    not a folder, not an input or published table (``protected``: protected forms with labels),
    and not inside a folder a protab run wrote (one with a manifest, or ``runs``)."""
    from protab._io import output_name, real_path, refuse_replacing

    output_name(raw, "audit report")
    target = Path(real_path(raw))
    if target.is_dir() or raw.endswith(os.sep):
        raise InputError(f"audit: --report {raw!r} is a folder; name a CSV file (e.g. audit_report.csv)")
    if not target.parent.is_dir():
        raise InputError(f"audit: the folder of --report {raw!r} does not exist; make it or name another file")
    refuse_replacing(raw, protected, "audit: --report", "write the report outside the run's inputs and outputs")
    if target.suffix.lower() not in (".csv", ".parquet"):
        raise InputError(f"audit: --report {raw!r} must end in .csv or .parquet")
    for folder in [target.parent, *target.parent.parents]:
        if (folder / MANIFEST).is_file() or any(folder == Path(real_path(r)) for r in runs):
            raise InputError(f"audit: --report {raw!r} is inside {str(folder)!r}, an output folder of a protab run; "
                             "write the report outside it (it is not a published table)")
    return target
