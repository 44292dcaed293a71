"""Helpers of the audit's tests: copies of a run's output folder, a table altered together
with its manifest, and the audit command on them."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from protab import cli


def copy_out(run: dict[str, Path], to: Path) -> Path:
    """A copy of the protect output folder (manifest included)."""
    shutil.copytree(run["out"], to)
    return to


def resign(folder: Path, name: str) -> None:
    """Put the digest of ``folder/name`` into the folder's manifest, as someone altering a table
    and its manifest together would: the audit's other checks must then catch the table."""
    path = folder / "protab_run.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["files"][name]["sha256"] = hashlib.sha256((folder / name).read_bytes()).hexdigest()
    path.write_text(json.dumps(manifest), encoding="utf-8")


def audit(run: dict[str, Path], tables: Path, report: Path, *more: str) -> int:
    return cli.main(["audit", str(run["req"]), "--db", str(run["db"]), "--tables", str(tables),
                     "--report", str(report), *more])
