"""Atomic output files: written under a temporary name in the target folder, then renamed."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

from protab.errors import ProtabError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; outputs get the usual mode
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write a text file (UTF-8, newlines as given) atomically."""
    target = Path(path)
    with atomic_path(target) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
    return target


def write_frame(frame: pl.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write a polars frame as CSV or Parquet (by suffix), atomically and deterministically."""
    target = Path(path)
    suffix = target.suffix.lower()
    with atomic_path(target) as tmp:
        if suffix == ".csv":
            frame.write_csv(tmp)
        elif suffix in (".parquet", ".pq"):
            # no statistics of wall-clock or writer version that would differ between runs
            frame.write_parquet(tmp, compression="zstd", statistics=False)
        else:
            raise ValueError(f"cannot write {target.name}: use a .csv or .parquet file name")
    return target


def read_toml(path: str | os.PathLike[str], error: type[ProtabError] = ProtabError) -> dict[str, Any]:
    """A TOML request file as a dict; ``error`` naming the file if it cannot be read."""
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise error(f"cannot read the request file {str(path)!r}: {exc}") from None
