"""The ledger of answered custom cells: per table of records and variable, every custom group (and
groups' total) the service has answered to anyone, through any dataset over that table, as sets
of the variable's leaves — the generators of the atoms that the differencing rule judges
(:mod:`protab.serve.atoms`). Datasets over one table share its records and record keys, so the
same set of leaves is the same cell, with the same value, whichever dataset answers it.

It is one file of the state folder, ``group_atoms.json``: per table and variable the leaves (in
the order the masks use: every code a dataset over the table declared) and each cell as a base64
bit mask over them. It is read afresh
(when it changed on disk) and replaced atomically — a temporary file, fsync'ed, renamed, the
folder fsync'ed (:func:`protab.serve.jobs.write_atomic`) — under this process's lock and an
exclusive ``flock`` on ``group_atoms.lock``, so that a kill -9 leaves the old or the new file,
and a second process on the folder (an embedded app) waits its turn. A request is judged
outside the lock (its counts asked of the Session), then, under the lock, judged again (its
counts asked again) if cells were recorded meanwhile (by any user) and recorded: two requests
at once cannot both pass against a partition the other changes; a refused request records nothing.

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
#: custom cells kept per table and variable (for all users): bounds the work of a request
MAX_GENERATORS = 2000


class Ledger:
    """The answered custom cells of every table and variable, in ``folder/group_atoms.json``."""

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
        assert self._fd is not None, "only under the lock"
        os.pwrite(self._fd, f"{writes:<20d}\n".encode("ascii"), 0)
        text = json.dumps(self._data, ensure_ascii=True, separators=(",", ":"))
        write_atomic(self.path, lambda fh: fh.write(text), "w")
        st = os.stat(self.path)
        self._seen = (writes, st.st_ino, st.st_mtime_ns, st.st_size)

    # -- one variable's cells -------------------------------------------------------------------
    def _entry(self, cls: Classification) -> tuple[list[str], np.ndarray]:
        """The stored leaves of the variable (every code any dataset over its table used) and its
        cells as masks over them; under the lock."""
        entry = self._data["variables"].get(cls.source, {}).get(cls.variable)
        if entry is None:
            return [], np.zeros((0, 0), dtype=bool)
        leaves, cells = entry.get("leaves"), entry.get("cells")
        if not isinstance(leaves, list) or not isinstance(cells, list):
            raise InputError(f"the ledger of custom groups has a bad entry for {cls.source}.{cls.variable}")
        masks = [unpack(base64.b64decode(c), len(leaves)) for c in cells]
        return leaves, np.vstack(masks) if masks else np.zeros((0, len(leaves)), dtype=bool)

    def _custom(self, cls: Classification) -> np.ndarray:
        """The variable's recorded cells as masks over ``cls``'s leaves (codes it does not declare
        dropped: no record holds them); under the lock."""
        if self._import(cls):
            self._save()
        key = (cls.dataset, cls.variable)
        hit = self._decoded.get(key)
        if hit is not None and self._seen is not None and hit[0] == self._seen:
            return hit[1]
        leaves, masks = self._entry(cls)
        if leaves != cls.leaves:
            index = {c: k for k, c in enumerate(cls.leaves)}
            where = np.array([index.get(c, -1) for c in leaves], dtype=np.int64)
            out = np.zeros((masks.shape[0], cls.size), dtype=bool)
            out[:, where[where >= 0]] = masks[:, where >= 0]
            masks = out[out.any(axis=1)]
        self._decoded[key] = (self._seen, masks)
        return masks

    def _import(self, cls: Classification) -> bool:
        """Translate the old ledger's groups of the variable's levels into cells (True if any)."""
        pending = self._data["imported"].get(cls.dataset, {})
        dims = [d for d in cls.levels if d in pending]
        if not dims:
            return False
        self._store(cls, [m for d in dims for codes in pending.pop(d)
                          if (m := cls.mask(d, codes)).any() and not cls.is_published(m)])
        if not pending:
            self._data["imported"].pop(cls.dataset, None)
        return True

    def _kept(self, cls: Classification) -> int:
        return len(self._data["variables"].get(cls.source, {}).get(cls.variable, {}).get("cells", []))

    def _store(self, cls: Classification, new: Sequence[np.ndarray]) -> None:
        """Record the cells ``new`` (masks over ``cls``'s leaves) not kept yet; the stored leaves
        grow by the codes of ``cls`` they lack (the masks kept are widened, never cut)."""
        leaves, masks = self._entry(cls)
        stored = set(leaves)
        extra = [c for c in cls.leaves if c not in stored]
        if extra:
            leaves = leaves + extra
            masks = np.hstack([masks, np.zeros((masks.shape[0], len(extra)), dtype=bool)])
        index = {c: k for k, c in enumerate(leaves)}
        where = np.array([index[c] for c in cls.leaves], dtype=np.int64)
        known = {pack(r) for r in masks}
        rows = list(masks)
        for m in new:
            wide = np.zeros(len(leaves), dtype=bool)
            wide[where[m]] = True
            if (key := pack(wide)) not in known:
                known.add(key)
                rows.append(wide)
        self._data["variables"].setdefault(cls.source, {})[cls.variable] = {
            "leaves": leaves, "cells": [_b64(pack(r)) for r in rows]}
        self._decoded.pop((cls.dataset, cls.variable), None)

    def cells(self, cls: Classification) -> np.ndarray:
        """The variable's recorded cells (a leaf mask per row)."""
        with self._locked():
            return self._custom(cls).copy()

    def judge(self, cls: Classification, record: Sequence[np.ndarray], check: Callable[[np.ndarray], None],
              full: Callable[[int], Exception]) -> None:
        """``check`` a request against the variable's recorded cells, then record its cells
        ``record`` (leaf masks); ``full(kept)``: the refusal when they would pass ``most``."""
        with self._locked():
            before, kept = self._custom(cls).copy(), self._kept(cls)
        self._bound(kept, before, record, full)
        check(before)
        with self._locked():
            now = self._custom(cls)
            if now.shape != before.shape or not np.array_equal(now, before):
                check(now)  # cells recorded meanwhile (by any user's request): judged with them
            if self._bound(self._kept(cls), now, record, full):
                self._store(cls, record)
                self._save()

    def _bound(self, kept: int, cells: np.ndarray, record: Sequence[np.ndarray],
               full: Callable[[int], Exception]) -> int:
        """How many of ``record`` are not among ``cells`` yet; ``full`` raised beyond ``most``."""
        new = len({pack(m) for m in record} - {pack(r) for r in cells})
        if new and kept + new > self.most:
            raise full(kept)
        return new


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


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
