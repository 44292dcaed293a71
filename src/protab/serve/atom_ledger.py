"""The ledger of answered custom cells: per dataset and variable, every custom group (and groups'
total) the service has answered to anyone, as sets of the variable's leaves — the generators of
the atoms that the differencing rule judges (:mod:`protab.serve.atoms`).

It is one file of the state folder, ``group_atoms.json``: per dataset and variable the leaves
(in the order the masks use) and each cell as a base64 bit mask over them. It is read afresh
(when it changed on disk) and replaced atomically — a temporary file, fsync'ed, renamed, the
folder fsync'ed (:func:`protab.serve.jobs.write_atomic`) — under this process's lock and an
exclusive ``flock`` on ``group_atoms.lock``, so that a kill -9 leaves the old or the new file,
and a second process on the folder (an embedded app) waits its turn. A request is judged
outside the lock (the judgement reads the records once), then, under the lock, judged again
if cells were recorded meanwhile (by any user) and recorded: two requests at once cannot
both pass against a partition the other changes; a refused request records nothing.

The ledger of earlier versions, ``groups_used.json`` (each user's groups per dimension), is
imported when ``group_atoms.json`` does not exist yet: its groups were answered, so they are
generators too (translated to leaves when their variable is first judged). The old file is
left as it was and no longer read.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from protab.errors import InputError
from protab.serve.atoms import Classification, pack, unpack
from protab.serve.jobs import write_atomic

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: one service per state folder
    fcntl = None  # type: ignore[assignment]

FILE = "group_atoms.json"
OLD_FILE = "groups_used.json"
FORMAT = "protab group atoms 1"
#: custom cells kept per dataset and variable (for all users): bounds the work of a request
MAX_GENERATORS = 2000


class Ledger:
    """The answered custom cells of every dataset and variable, in ``folder/group_atoms.json``."""

    file = FILE

    def __init__(self, folder: Path, most: int = MAX_GENERATORS) -> None:
        self.path = Path(folder) / FILE
        self.most = most
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int, int] | None = None  # the writes, the file's identity when last read
        self._fd: int | None = None  # the lock file, while locked
        self._data: dict[str, Any] = {"format": FORMAT, "variables": {}, "imported": {}}
        self._decoded: dict[tuple[str, str], tuple[tuple[int, int, int, int] | None, np.ndarray]] = {}
        with self._locked():
            old = Path(folder) / OLD_FILE
            if self._seen is None and old.exists():
                self._data["imported"] = _read_old(old)
                self._save()

    # -- the file -------------------------------------------------------------------------------
    @contextmanager
    def _locked(self) -> Iterator[None]:
        """The ledger, read afresh if it changed, under this process's lock and an exclusive
        ``flock`` on ``group_atoms.lock``, which holds a count of the writes (bumped before each,
        so that a change is seen even when a new file has the old one's inode, size and time)."""
        with self._lock:
            fd = os.open(self.path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                self._fd = fd
                self._refresh()
                yield
            finally:
                self._fd = None
                os.close(fd)

    def _writes(self) -> int:
        assert self._fd is not None, "only under the lock"
        text = os.pread(self._fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else 0

    def _refresh(self) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._seen = None
            return
        seen = (self._writes(), st.st_ino, st.st_mtime_ns, st.st_size)
        if seen == self._seen:
            return
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"cannot read the ledger of custom groups {str(self.path)!r}: "
                             f"{type(exc).__name__}") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT or not isinstance(raw.get("variables"), dict):
            raise InputError(f"{str(self.path)!r} is not a protab ledger of custom groups (format {FORMAT!r})")
        raw.setdefault("imported", {})
        self._data, self._seen = raw, seen

    def _save(self) -> None:
        writes = self._writes() + 1
        os.pwrite(self._fd, f"{writes:<20d}\n".encode("ascii"), 0)
        text = json.dumps(self._data, ensure_ascii=True, separators=(",", ":"))
        write_atomic(self.path, lambda fh: fh.write(text), "w")
        st = os.stat(self.path)
        self._seen = (writes, st.st_ino, st.st_mtime_ns, st.st_size)

    # -- one variable's cells -------------------------------------------------------------------
    def _custom(self, cls: Classification) -> np.ndarray:
        """The variable's recorded cells as leaf masks (rows), in ``cls``'s leaf order; under the lock."""
        key = (cls.dataset, cls.variable)
        if self._import(cls):
            self._save()
        hit = self._decoded.get(key)
        if hit is not None and hit[0] == self._seen and self._seen is not None:
            return hit[1]
        entry = self._data["variables"].get(cls.dataset, {}).get(cls.variable)
        masks = np.zeros((0, cls.size), dtype=bool) if entry is None else _decode(entry, cls)
        self._decoded[key] = (self._seen, masks)
        return masks

    def _import(self, cls: Classification) -> bool:
        """Translate the old ledger's groups of the variable's levels into cells (True if any)."""
        pending = self._data["imported"].get(cls.dataset, {})
        dims = [d for d in cls.levels if d in pending]
        if not dims:
            return False
        masks = [m for d in dims for codes in pending.pop(d) if (m := cls.mask(d, codes)).any()]
        entry = self._data["variables"].get(cls.dataset, {}).get(cls.variable)
        before = np.zeros((0, cls.size), dtype=bool) if entry is None else _decode(entry, cls)
        self._store(cls, before, [m for m in masks if not cls.is_published(m)])
        if not pending:
            self._data["imported"].pop(cls.dataset, None)
        return True

    def _store(self, cls: Classification, before: np.ndarray, new: Sequence[np.ndarray]) -> None:
        known = {pack(r) for r in before}
        fresh = [m for m in dict.fromkeys(pack(m) for m in new) if m not in known]
        entry = self._data["variables"].setdefault(cls.dataset, {}).get(cls.variable)
        if entry is None or entry["leaves"] != cls.leaves:  # new, or its code list changed: all re-encoded
            entry = {"leaves": cls.leaves, "cells": [_b64(pack(r)) for r in before]}
        entry["cells"] += [_b64(m) for m in fresh]
        self._data["variables"][cls.dataset][cls.variable] = entry
        self._decoded.pop((cls.dataset, cls.variable), None)

    def cells(self, cls: Classification) -> np.ndarray:
        """The variable's recorded cells (a leaf mask per row)."""
        with self._locked():
            return self._custom(cls).copy()

    def judge(self, cls: Classification, record: Sequence[np.ndarray], check: Callable[[np.ndarray], None],
              full: Callable[[int], Exception]) -> None:
        """``check`` a request against the variable's recorded cells, then record its cells
        ``record`` (leaf masks); ``full(kept)``: the refusal when they would pass ``most``."""
        before = self.cells(cls)
        self._bound(before, record, full)
        check(before)
        with self._locked():
            now = self._custom(cls)
            if now.shape != before.shape or not np.array_equal(now, before):
                check(now)  # cells recorded meanwhile (by any user's request): judged with them
            if self._bound(now, record, full):
                self._store(cls, now, record)
                self._save()

    def _bound(self, kept: np.ndarray, record: Sequence[np.ndarray], full: Callable[[int], Exception]) -> int:
        """How many of ``record`` are not kept yet; ``full`` raised beyond ``most``."""
        known = {pack(r) for r in kept}
        new = len({pack(m) for m in record} - known)
        if new and len(kept) + new > self.most:
            raise full(len(kept))
        return new


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _decode(entry: Any, cls: Classification) -> np.ndarray:
    """A stored variable's cells as masks over ``cls``'s leaves (codes no longer declared dropped:
    no record holds them)."""
    stored = entry.get("leaves") if isinstance(entry, dict) else None
    cells = entry.get("cells") if isinstance(entry, dict) else None
    if not isinstance(stored, list) or not isinstance(cells, list):
        raise InputError(f"the ledger of custom groups has a bad entry for {cls.dataset}.{cls.variable}")
    masks = np.vstack([unpack(base64.b64decode(c), len(stored)) for c in cells]) if cells else \
        np.zeros((0, len(stored)), dtype=bool)
    if stored == cls.leaves:
        return masks
    index = {c: k for k, c in enumerate(cls.leaves)}
    where = np.array([index.get(c, -1) for c in stored], dtype=np.int64)
    out = np.zeros((masks.shape[0], cls.size), dtype=bool)
    keep = where >= 0
    out[:, where[keep]] = masks[:, keep]
    return out[out.any(axis=1)]


def _read_old(path: Path) -> dict[str, dict[str, list[list[str]]]]:
    """The groups of the old per-user ledger (user → dataset → dimension → code lists), merged
    over users: dataset → dimension → distinct code lists."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        users = raw["users"]
        out: dict[str, dict[str, list[list[str]]]] = {}
        for datasets in users.values():
            for ds, dims in datasets.items():
                for dim, lists in dims.items():
                    kept = out.setdefault(str(ds), {}).setdefault(str(dim), [])
                    kept += [sorted(str(c) for c in codes) for codes in lists]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(f"cannot import the old ledger of custom groups {str(path)!r} ({type(exc).__name__}); "
                         "fix or remove it") from None
    return {ds: {d: [list(t) for t in dict.fromkeys(tuple(x) for x in lists)] for d, lists in dims.items()}
            for ds, dims in out.items()}
