"""What a programme run keeps between runs: the finished hypercubes' files in a staging folder
beside the output (``.<out>.protab-programme``) and a state file naming them, each with a keyed
hash of its definition, so that a run killed half-way resumes without recomputing them.

The hash is an HMAC-SHA256 whose key is a fingerprint of the records the hypercubes read (their
count and a hash of every row's used columns and record key), over the hypercube's entry, the
classifications it uses (their codes), the p-table section and the programme-wide options. A
changed definition, p-table, swap or record therefore invalidates a hypercube. The state file
holds names, these digests and the summary rows only: no seed, key or p-table parameter, and the
digests cannot be tested against guessed parameters without the records and their keys.

Only the run that holds the locks of the output folder and of the staging folder
(``protab._locks``, taken by ``Programme.run``) reads or changes a staging folder, so two runs
never share one."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protab._io import write_text
from protab.sqltools import quote_ident

if TYPE_CHECKING:  # pragma: no cover
    from protab.hierarchy import Hierarchy
    from protab.programme.definition import Hypercube
    from protab.session import Session

STATE = "state.json"
_VERSION = 1


def staging_folder(out: Path) -> Path:
    """The staging folder of an output folder (a sibling; batches of :mod:`protab._io` leave it)."""
    real = Path(os.path.realpath(out))
    return real.parent / f".{real.name}.protab-programme"


def records_key(s: Session, table: str, columns: list[str]) -> bytes:
    """The HMAC key: SHA-256 of the record count and two sums of a keyed hash of each group of
    records with the same ``columns`` — its codes, record count and record-key sum — computed
    in one scan and a hash per group, not per record (``protab_record_key``, the SHA-256 function
    every engine has: the same statements on DuckDB, Spark and PostgreSQL); never stored. A
    record whose codes change moves its key from one group's sum to another's."""
    key_column, modulus = s.record_key(table)
    cols = [f"{quote_ident(c)} AS c{k}" for k, c in enumerate(columns)]
    group = f" GROUP BY {', '.join(str(k + 1) for k in range(len(cols)))}" if cols else ""
    parts = [f"coalesce(CAST(c{k} AS VARCHAR), chr(30))" for k in range(len(cols))]
    text = " || chr(31) || ".join([*parts, "CAST(n AS VARCHAR)", "CAST(k AS VARCHAR)"])
    groups = (f"SELECT {''.join(c + ', ' for c in cols)}count(*) AS n, sum({quote_ident(key_column)}) AS k "
              f"FROM {quote_ident(table)}{group}")
    n, a, b = s.engine.rows(
        f"SELECT sum(n), sum(CAST(protab_record_key('a', {text}, 32) AS BIGINT)), "
        f"sum(CAST(protab_record_key('b', {text}, 32) AS BIGINT)) FROM ({groups}) AS g")[0]
    return hashlib.sha256(f"{n}\x1f{a}\x1f{b}\x1f{modulus}".encode()).digest()


def cube_digest(key: bytes, common: dict[str, Any], cube: Hypercube, depth: dict[str, int],
                hierarchies: dict[str, Hierarchy]) -> str:
    """The keyed hash of one hypercube's definition (see the module docstring): its entry, the
    levels its dimensions resolve to, and the codes of its classifications."""
    used = sorted({d.classification for d in cube.dims})
    codes = {c: hashlib.sha256(hierarchies[c].to_frame().write_csv().encode()).hexdigest() for c in used}
    text = json.dumps({"common": common, "hypercube": cube.entry, "levels": depth, "classifications": codes},
                      sort_keys=True, default=str)
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


class State:
    """The state file of a staging folder: per finished hypercube its digest, files and summary."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.cubes: dict[str, dict[str, Any]] = {}
        try:
            saved = json.loads((folder / STATE).read_text(encoding="utf-8"))
            if saved.get("version") == _VERSION:
                self.cubes = dict(saved["hypercubes"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            self.cubes = {}  # no state, or an unreadable one: nothing is resumed

    def finished(self, name: str, digest: str) -> dict[str, Any] | None:
        """The saved entry of hypercube ``name`` when its digest matches and its files are there."""
        entry = self.cubes.get(name)
        if not entry or entry.get("digest") != digest:
            return None
        if not all((self.folder / f).is_file() for f in entry.get("files", [])):
            return None
        return entry

    def forget_others(self, digests: dict[str, str]) -> None:
        """Drop the entries (and files) of hypercubes whose definition changed or that are gone."""
        for name in list(self.cubes):
            if self.finished(name, digests.get(name, "")) is None:
                for f in self.cubes[name].get("files", []):
                    (self.folder / f).unlink(missing_ok=True)
                del self.cubes[name]
        self.save()

    def record(self, name: str, digest: str, files: list[str], summary: dict[str, Any]) -> None:
        """Hypercube ``name`` is finished: its files are in the staging folder."""
        self.cubes[name] = {"digest": digest, "files": files, "summary": summary}
        self.save()

    def save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        write_text(self.folder / STATE, json.dumps({"version": _VERSION, "hypercubes": self.cubes}, indent=1))

    def remove(self) -> None:
        """The outputs are in place: the staging folder goes."""
        shutil.rmtree(self.folder, ignore_errors=True)
