"""The run fingerprint: ``protab_run.json``, written by ``protab protect`` and ``protab
programme`` into their output folder in the same all-or-nothing batch as the tables
(:func:`protab._io.write_batch`), and its rows in the ``protab_run`` table of a database that
``protab publish`` writes. ``protab audit`` reads it to refuse tables from different runs and
tables changed since their run (docs/audit.md).

A run has a random id (``uuid4``: never derived from seeds, record keys or the p-table), the
protab version and the time, and every file (or published table) its SHA-256 digest. A file of
the folder that the run kept from an earlier run (write_batch keeps files not in its batch)
keeps the entry, and so the run id, that the earlier manifest gave it. Nothing secret is in it.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protab.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

#: the manifest's file name in an output folder
MANIFEST = "protab_run.json"
#: the table of a published database that holds its run and the digest of every table
RUN_TABLE = "protab_run"
_FORMAT = 1
_MAX_BYTES = 64 * 2**20  # far above any manifest protab writes (a line per output file)


def new_run(command: str) -> dict[str, Any]:
    """A new run: random id, protab version, UTC time, the command (``protect``, ``programme``, ``publish``)."""
    from protab import __version__

    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    return {"run_id": uuid.uuid4().hex, "protab_version": __version__, "created": now.isoformat(),
            "command": command}


def file_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file, read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def with_manifest(out: Path, files: Mapping[str, Callable[[Path], None]],
                  command: str) -> dict[str, Callable[[Path], None]]:
    """``files`` (a batch of :func:`protab._io.write_batch` into ``out``) and, last, the
    manifest: written in the batch's folder after every other file, so that it is swapped in
    with them. Call it while holding ``out``'s lock (the earlier manifest is read then)."""
    if MANIFEST in files:  # pragma: no cover - output names are checked before
        raise InputError(f"{MANIFEST!r} is the run manifest's name; no output may take it")
    run = new_run(command)
    names = list(files)

    def write(target: Path) -> None:
        folder = target.parent
        earlier = read_manifest(out, missing_ok=True) or {"files": {}}
        entries = {n: e for n, e in earlier.get("files", {}).items()
                   if n not in files and isinstance(e, dict) and _inside(n) and (folder / n).is_file()}
        for n in names:
            entries[n] = {"sha256": file_digest(folder / n), "bytes": (folder / n).stat().st_size,
                          "run_id": run["run_id"]}
        text = json.dumps({"protab_run": _FORMAT, **run, "files": dict(sorted(entries.items()))},
                          indent=1, sort_keys=False, ensure_ascii=False)
        target.write_text(text + "\n", encoding="utf-8")

    return {**files, MANIFEST: write}


def read_manifest(folder: str | os.PathLike[str], *, missing_ok: bool = False) -> dict[str, Any] | None:
    """The manifest of an output folder, checked for its shape; None when absent and ``missing_ok``."""
    path = Path(folder) / MANIFEST
    try:
        if path.stat().st_size > _MAX_BYTES:
            raise InputError(f"the run manifest {str(path)!r} is larger than protab ever writes one "
                             f"({_MAX_BYTES // 2**20} MiB): it is not what protab wrote; run protab again into a "
                             "fresh folder")
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if missing_ok:
            return None
        raise InputError(f"{str(folder)!r} has no {MANIFEST} (the fingerprint protab protect and protab "
                         "programme write with their tables)") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"the run manifest {str(path)!r} cannot be read ({exc.__class__.__name__}): it is not "
                         "what protab wrote; run protab again into a fresh folder") from None
    files = data.get("files") if isinstance(data, dict) else None
    if (not isinstance(files, dict) or not isinstance(data.get("run_id"), str)
            or not all(isinstance(e, dict) and isinstance(e.get("sha256"), str) and isinstance(e.get("run_id"), str)
                       for e in files.values())
            or not all(_inside(n) for n in files)):
        raise InputError(f"the run manifest {str(path)!r} is not what protab wrote (no run_id, or files that are "
                         "not names inside its folder with sha256 and run_id); run protab again into a fresh folder")
    return data


def _inside(name: str) -> bool:
    """A file name of the manifest: relative, inside the folder (no '..', not absolute)."""
    p = Path(name)
    return bool(name) and not p.is_absolute() and ".." not in p.parts and "\\" not in name


def table_digest(frame: pl.DataFrame) -> str:
    """SHA-256 of a published table's content, independent of its row order: its column names
    and types, then its rows sorted, as CSV. ``protab publish`` stores it; the audit recomputes it."""
    ordered = frame.sort(frame.columns, nulls_last=True) if frame.width else frame
    h = hashlib.sha256(json.dumps([[c, str(t)] for c, t in frame.schema.items()]).encode("utf-8"))
    h.update(ordered.write_csv().encode("utf-8"))
    return h.hexdigest()
