"""``Programme``: a census programme of hypercubes protected in one run from one copy of the
records (swapped first when the programme has [swap]) with one set of record keys and one
p-table, so that a cell two hypercubes share has one value; outputs written all at once, each
finished hypercube kept in a staging folder so that a killed run resumes (protab.programme.state)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protab.errors import InputError
from protab.programme import classifications as cls
from protab.programme.cube_run import SUMMARY_COLUMNS, file_names, protect_cube, summary_text, write_cube
from protab.programme.definition import (
    Hypercube,
    check_programme_label_columns,
    check_sources,
    hypercubes,
    read_programme,
)
from protab.programme.state import State, cube_digest, records_key, staging_folder

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from protab.session import Session

_FILE_KEYS = ("file", "hrc", "parent_child", "ssb_frame", "seed_file")


class Programme:
    """A census programme read from a TOML file (docs/census.md) and checked at once.

    >>> prog = Programme("programme.toml")            # doctest: +SKIP
    >>> summary = prog.run()                           # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.cfg = read_programme(self.path)
        self.cubes: list[Hypercube] = hypercubes(self.cfg)
        check_programme_label_columns(self.cfg, self.cubes, self.path)
        self.classified, self.source = check_sources(self.cfg)

    @property
    def names(self) -> list[str]:
        """The hypercubes' names, in the order they run."""
        return [c.name for c in self.cubes]

    def __repr__(self) -> str:
        return f"Programme({str(self.path)!r}, hypercubes={self.names})"

    def run(
        self, database: str | None = None, out: str | os.PathLike[str] | None = None, *,
        on_hypercube: Callable[[str, dict[str, Any]], None] | None = None, quiet: bool = False,
        wait: bool = False, engine: Callable[[dict[str, Any], str], Session] | None = None,
    ) -> pl.DataFrame:
        """Protect every hypercube, then write all files into ``out`` at once (``<hypercube>.
        <table>.<format>`` and ``summary.csv``) and return the summary. A hypercube finished by
        an earlier, interrupted run of the same definition on the same records is not
        recomputed. ``on_hypercube(name, summary_row)`` is called as each one is finished.

        The run holds the locks of ``out`` and of its staging folder (protab._locks) from before
        it opens the records until the outputs are in place: another run into the same folder
        refuses at once, naming this one, or waits for it with ``wait=True``.

        ``engine(sources, database)`` opens the session on another engine (``protab programme
        --engine spark|postgres``; ``sources`` names the records' table and the [swap] section as
        a protect request does, ``database`` the DuckDB file that may declare their record keys);
        by default the records are the DuckDB database's."""
        import polars as pl

        from protab._locks import output_lock

        base = self.path.parent
        db = database or _relative(base, self.cfg.get("database", "protab.duckdb"))
        out_dir = Path(out) if out is not None else base / self.cfg.get("output", "protab_output")
        formats = self.cfg.get("formats", ["csv", "parquet"])
        self._check_outputs(db, out_dir, formats)
        with output_lock((out_dir, "programme: the output folder"), (staging_folder(out_dir), "programme: its staging "
                         "folder"), command=f"protab programme {self.path}", wait=wait):
            rows = self._protect(db, out_dir, formats, on_hypercube, quiet, engine)
        summary = pl.DataFrame(rows, schema_overrides={"blanked": pl.Float64, "changed": pl.Float64,
                                                       "hellinger_utility": pl.Float64}).select(SUMMARY_COLUMNS)
        if not quiet:
            print(summary_text(rows))
            print(f"hypercubes written to {out_dir}/ (summary.csv)")
        return summary

    def _check_outputs(self, db: str, out_dir: Path, formats: list[str]) -> None:
        """The output folder can be written and replaces no input, before any work."""
        from protab._io import check_output_folder, refuse_replacing

        if "sdmx-structure" in formats:
            from protab.exchange import sdmx_library

            sdmx_library()  # the extra it needs is named before any work
        names = [f for c in self.cubes for f in file_names(c, formats)] + ["summary.csv"]
        check_output_folder(out_dir, names)
        inputs = self.inputs(db)
        for folder, what in ((out_dir, "the output folder"), (staging_folder(out_dir), "its staging folder")):
            refuse_replacing(folder, inputs, f"programme: {what}", "give the outputs a folder of their own")

    def inputs(self, db: str) -> list[tuple[str, str]]:
        """What no output may replace, as (protected form, label; protab._io.refuse_replacing): the
        records' database, the programme and every file it names (p-table, swap seed,
        classifications and their labels files)."""
        from protab._io import database_files, protected_form

        found = [(p, f"the microdata database {db!r}") for p in database_files(db)]
        found.append((protected_form(str(self.path)), f"the programme {str(self.path)!r}"))
        for section in (self.cfg.get("ptable", {}), self.cfg.get("swap", {}), *self.cfg["classifications"].values()):
            named = [v for k, v in section.items() if k in _FILE_KEYS]
            labels = section.get("labels_file", [])  # a name, { file | sdmx = … }, or a list of these
            for e in labels if isinstance(labels, list) else [labels]:
                named += [e] if isinstance(e, str) else [e[k] for k in ("file", "sdmx") if k in e]
            found += [(protected_form(str(self.path.parent / v)), f"the file {v!r} of the programme") for v in named]
        return found

    def _protect(self, db: str, out_dir: Path, formats: list[str],
                 on_hypercube: Callable[[str, dict[str, Any]], None] | None, quiet: bool,
                 engine: Callable[[dict[str, Any], str], Session] | None) -> list[dict[str, Any]]:
        """Open the session, check against the records, swap, protect each hypercube, write."""
        from protab.request.loaders import load_ptable

        ptable = load_ptable(self.cfg["ptable"], self.path.parent)
        swap = self.cfg.get("swap")
        with self._session(db, engine) as s:
            prepared = self._prepare(s)
            if swap:
                _swap(s, swap, self.path.parent, quiet)
            rows = self._cubes(s, prepared, ptable, staging_folder(out_dir), formats, on_hypercube, quiet)
            self._write(out_dir, rows)
            if swap:
                from protab.request.swap_section import keep_swap

                keep_swap(s, swap)
        State(staging_folder(out_dir)).remove()
        return [r["summary"] for r in rows]

    def _session(self, db: str, engine: Callable[[dict[str, Any], str], Session] | None) -> Session:
        """The session of the run: on the DuckDB database ``db`` (written only to keep a swap), or
        opened by ``engine`` with the records' table and the [swap] section as its sources."""
        from protab.session import Session

        swap = self.cfg.get("swap")
        if engine is not None:
            sources = {"tables": [{"source": self.source}], **({"swap": swap} if swap else {})}
            return engine(sources, db)
        if not os.path.exists(db):
            raise InputError(f"programme: the database {db!r} does not exist (paths in a programme are relative "
                             "to its file; --db chooses another)")
        return Session(db) if swap else Session(db, read_only=True)

    def _prepare(self, s: Session) -> tuple[dict[str, Any], dict[str, dict[str, int]]]:
        """Every check that needs the records, before anything is computed: columns, classifications,
        levels, cell limits, and the records' codes against the declared ones."""
        if not s.exists(self.classified):
            raise InputError(f"programme: the database has no table {self.classified!r} "
                             f"(tables: {', '.join(s.tables()) or 'none'})")
        columns = s.columns(self.classified)
        for cube in self.cubes:
            wanted = [(f"dims.{d.variable}", d.variable) for d in cube.dims]
            wanted += [(f"tables.{t.name}.weight", t.options["weight"]) for t in cube.tables if "weight" in t.options]
            for key, column in wanted:
                if column not in columns:
                    raise InputError(f"programme: hypercube {cube.name!r}: {key} names {column!r}, which is not a "
                                     f"column of {self.classified!r} (columns: {', '.join(columns)})")
        hierarchies = cls.build(s, self.cfg, self.cubes, self.classified, self.path.parent,
                                f"programme {str(self.path)!r}")
        depths = {}
        for cube in self.cubes:
            depths[cube.name] = cls.levels(self.cfg, cube, hierarchies)
            cls.check_cells(cube, depths[cube.name], hierarchies)
        cls.check_records(s, self.cfg, self.cubes, self.classified, hierarchies)
        return hierarchies, depths

    def _cubes(self, s: Session, prepared: tuple[dict[str, Any], dict[str, dict[str, int]]], ptable: Any,
               folder: Path, formats: list[str], on_hypercube: Callable[[str, dict[str, Any]], None] | None,
               quiet: bool) -> list[dict[str, Any]]:
        """Each hypercube protected, or taken from the staging folder when an interrupted run of the
        same definition finished it; with progress."""
        from protab._progress import track

        hierarchies, depths = prepared
        variables = sorted({d.variable for c in self.cubes for d in c.dims}
                           | {t.options["weight"] for c in self.cubes for t in c.tables if "weight" in t.options})
        key = records_key(s, self.source, variables)
        common = {k: self.cfg.get(k) for k in ("ptable", "threshold", "swap", "source", "formats")}
        common["ptable_file"] = _file_digest(self.path.parent, self.cfg["ptable"])
        classes = self.cfg["classifications"]
        named = {n: [c.get("labels"), c.get("name")] for n, c in classes.items() if "labels" in c or "name" in c}
        if named:  # they are in the exchange files: a run with other labels redoes its hypercubes
            common["labels"] = named
        if self.cfg.get("label_columns"):  # so are the label columns (and JSON-stat's language)
            common["label_columns"] = self.cfg["label_columns"]
        digests = {c.name: cube_digest(key, common, c, depths[c.name], hierarchies) for c in self.cubes}
        state = State(folder)
        state.forget_others(digests)
        columns = {n: list(c["columns"]) for n, c in self.cfg["classifications"].items() if "columns" in c}
        cut_cache: dict[tuple[str, int], Any] = {}
        done = []
        for k, cube in enumerate(track(self.cubes, "protecting hypercubes", total=len(self.cubes), unit="hypercube")):
            entry = state.finished(cube.name, digests[cube.name])
            if entry is None:
                _say(quiet, f"  hypercube {cube.name} ({k + 1}/{len(self.cubes)}) …")
                frames, row = protect_cube(s, self.source, cube, depths[cube.name], hierarchies, ptable,
                                           self.cfg.get("threshold"), columns, cut_cache)
                state.record(cube.name, digests[cube.name], write_cube(folder, cube, frames, formats, classes,
                                                                       self.cfg.get("label_columns", ())), row)
                entry = state.cubes[cube.name]
            else:
                _say(quiet, f"  hypercube {cube.name} ({k + 1}/{len(self.cubes)}): finished by an earlier run, kept")
            done.append({"folder": folder, **entry})
            if on_hypercube is not None:
                on_hypercube(cube.name, dict(entry["summary"]))
        return done

    def _write(self, out_dir: Path, done: list[dict[str, Any]]) -> None:
        """Every hypercube's files, summary.csv and the run's manifest protab_run.json into
        ``out_dir`` at once (protab._io.write_batch, protab._run_manifest)."""
        import polars as pl

        from protab._io import frame_writer, write_batch
        from protab._run_manifest import with_manifest

        files = {f: _linker(d["folder"] / f) for d in done for f in d["files"]}
        summary = pl.DataFrame([d["summary"] for d in done], schema_overrides={
            "blanked": pl.Float64, "changed": pl.Float64, "hellinger_utility": pl.Float64}).select(SUMMARY_COLUMNS)
        files["summary.csv"] = frame_writer(summary, "csv")
        write_batch(out_dir, with_manifest(out_dir, files, "programme"))


def _linker(source: Path) -> Callable[[Path], None]:
    """A writer of write_batch that hard-links (or copies) a staged file."""
    import shutil

    def link(target: Path) -> None:
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)

    return link


def _relative(base: Path, path: str) -> str:
    return path if os.path.isabs(path) or path == ":memory:" else str(base / path)


def _file_digest(base: Path, section: dict[str, Any]) -> str | None:
    """SHA-256 of a p-table file (its contents enter the keyed hypercube hash, never stored)."""
    import hashlib

    if "file" not in section:
        return None
    try:
        return hashlib.sha256((base / section["file"]).read_bytes()).hexdigest()
    except OSError:
        return None


def _say(quiet: bool, line: str) -> None:
    if not quiet:
        print(line, file=sys.stderr, flush=True)


def _swap(s: Session, cfg: dict[str, Any], base: Path, quiet: bool) -> None:
    """The [swap] section, as protect's (protab.request.swap_section): targeted record swapping
    into a temporary table of the session, kept in the database only once every output is written."""
    from protab.request.swap_section import run_swap, swap_line

    _say(quiet, swap_line(run_swap(s, cfg, base), cfg))
