"""HTTP caching of answers: ETags that say nothing, ``If-None-Match`` and ``Cache-Control``.

An ETag is an HMAC-SHA256 (RFC 2104) under a random key the service keeps in its state folder
(``etag.key``, 32 bytes, readable by the service only) over the user, the canonical request,
the rights that shape the answer, the format and the *version*: a fingerprint, taken at
start-up, of everything an answer depends on (the database file's identity and time, the
p-table and magnitude parameters and the files they name, threshold and limits, the datasets
with their declared code lists). It changes when the data or a protection parameter changes,
and, being keyed, tells nothing about them: a plain hash of the parameters (D, V, a seed) could
be brute-forced over their small ranges, a keyed one cannot without the key.

ETags are per user (the user's name is hashed too), so a tag tells a user only about answers
they were given. The app checks the token and the request's rights before it answers 304.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from protab.errors import InputError

KEY_FILE = "etag.key"
KEY_BYTES = 32


def state_folder(config: Any) -> Path:
    """The service's state folder (``state_dir`` of serve.toml, relative to it; default
    ``serve_state`` beside the audit log), created when missing (its parent must exist)."""
    path = Path(config.base) / config.state_dir if config.state_dir else Path(config.audit_log).parent / "serve_state"
    if not path.parent.is_dir():
        raise InputError(f"state_dir of the serve config: the folder of {str(path)!r} does not exist; create it first")
    try:
        path.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise InputError(f"state_dir of the serve config: cannot create {str(path)!r}: {exc.strerror}") from None
    if not path.is_dir():
        raise InputError(f"state_dir of the serve config: {str(path)!r} is not a folder")
    return path


def load_key(folder: Path) -> bytes:
    """The ETag key of ``folder`` (``etag.key``), made at the first start (random, mode 0600,
    created exclusively, so that two starts at once agree on one key)."""
    path = folder / KEY_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    except OSError as exc:
        raise InputError(f"cannot create the ETag key {str(path)!r}: {exc.strerror}") from None
    else:
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(KEY_BYTES))
            fh.flush()
            os.fsync(fh.fileno())
    try:
        key = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the ETag key {str(path)!r}: {exc.strerror}") from None
    if len(key) < KEY_BYTES:  # cut short by a crash at the first start: a new key (old ETags just miss)
        key = secrets.token_bytes(KEY_BYTES)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(key)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    return key


def _file_identity(path: Path) -> list[Any]:
    try:
        st = path.stat()
    except OSError:
        return [str(path), None]
    return [str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _named_files(section: Any, base: Path) -> list[Any]:
    """The identity of every file a secret section names (``file = "ptable.csv"``, at any depth)."""
    out: list[Any] = []
    if isinstance(section, Mapping):
        for k, v in sorted(section.items()):
            if k == "file" and isinstance(v, str):
                out.append(_file_identity(base / v))
            else:
                out += _named_files(v, base)
    return out


def _plain(value: Any) -> Any:
    """A configuration value as JSON-able data: files by their identity, code lists by their
    rows, dataclasses by their fields (so that a key added later is part of the version too)."""
    if isinstance(value, Path):
        return _file_identity(value)
    if isinstance(value, pl.DataFrame):
        return value.rows()
    if isinstance(getattr(value, "table", None), pl.DataFrame) and hasattr(value, "levels"):  # a CodeList
        return value.table.rows()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def version(config: Any, database: list[Any] | None = None) -> bytes:
    """The fingerprint of what answers depend on, taken at start-up (never shown: only hashed
    under the key): every key of the config but the users and the service's own files, the
    datasets with their code lists, the identity (device, inode, size, time) of the database
    — ``database``: as it was when the service's snapshot was copied from it
    (protab.serve.snapshot), else now — and of the files the p-table and magnitude sections
    name. Users are not part of it (an answer's rights are hashed per request)."""
    base = Path(config.base)
    skip = {"users", "path", "base", "audit_log", "tokens_file", "state_dir"}
    state = {f.name: _plain(getattr(config, f.name)) for f in dataclasses.fields(config) if f.name not in skip}
    if database is not None:
        state["database"] = database
    else:
        state["database"] = _file_identity(Path(config.database)) if config.database != ":memory:" else secrets.token_hex(16)
    state["files"] = _named_files(config.ptable, base) + [
        _named_files(ds.magnitude, base) for _, ds in sorted(config.datasets.items())]
    return hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode("utf-8")).digest()


class ETags:
    """ETags of one service: ``key`` (secret) and ``fingerprint`` (:func:`version`)."""

    def __init__(self, key: bytes, fingerprint: bytes, max_age: int = 0) -> None:
        self._key = key
        self._fingerprint = fingerprint
        self.max_age = max_age

    def tag(self, user: str, what: str, request: Any, rights: Any, fmt: str) -> str:
        """The weak ETag of an answer: HMAC over the user, the kind of answer, the canonical
        request, the rights that shape it, the format and the version."""
        text = json.dumps([user, what, request, rights, fmt], sort_keys=True, default=sorted, ensure_ascii=True)
        mac = hmac.new(self._key, self._fingerprint + text.encode("ascii"), hashlib.sha256).hexdigest()
        return f'W/"{mac[:40]}"'

    def headers(self, tag: str) -> dict[str, str]:
        """The caching headers of an answer with ETag ``tag``."""
        return {"ETag": tag, "Cache-Control": f"private, max-age={self.max_age}, must-revalidate",
                "X-Content-Type-Options": "nosniff", "Vary": "Authorization, Accept"}


def matches(if_none_match: str | None, tag: str) -> bool:
    """Whether an ``If-None-Match`` header names ``tag`` (weak comparison, RFC 9110 13.1.2).
    ``*`` matches nothing here: it would turn into a 304 a request whose answer is a refusal."""
    if not if_none_match:
        return False
    want = tag.removeprefix("W/")
    for part in if_none_match.split(",")[:64]:
        if part.strip().removeprefix("W/") == want:
            return True
    return False
