"""TLS of the service's two fronts (``protab serve --tls-cert FILE --tls-key FILE``): the
certificate and its private key, checked and loaded into an :class:`ssl.SSLContext` before
anything listens, so that a missing, unreadable or mismatched file stops the start-up with a
:class:`~protab.errors.ProtabError` naming the option (never a word of the key's content).

The HTTP front hands the files to uvicorn (``ssl_certfile``, ``ssl_keyfile``); the PostgreSQL
front answers a client's SSLRequest with ``S`` and upgrades the connection with
:meth:`context` (PostgreSQL documentation, "Frontend/Backend Protocol", section "SSL Session
Encryption"). Both accept TLS 1.2 and later only.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from protab.errors import ProtabError

#: the ALPN protocol name of PostgreSQL over TLS (PostgreSQL 17's server offers it too)
PG_ALPN = "postgresql"


def _read(option: str, path: str) -> bytes:
    """The bytes of the file an option names, or a ProtabError that says why they cannot be read."""
    if not path:
        raise ProtabError(f"{option} is empty: give the path of a PEM file")
    p = Path(path)
    if not p.exists():
        raise ProtabError(f"{option}: no such file {path!r}")
    if p.is_dir():
        raise ProtabError(f"{option}: {path!r} is a folder, not a PEM file")
    try:
        return p.read_bytes()
    except PermissionError:
        raise ProtabError(f"{option}: cannot read {path!r}: permission denied (the service's user must be "
                          "able to read it)") from None
    except OSError as exc:
        raise ProtabError(f"{option}: cannot read {path!r}: {exc.strerror or type(exc).__name__}") from None


def _refuse_password() -> bytes:
    raise ProtabError("--tls-key: the private key is encrypted with a passphrase; give protab serve an "
                      "unencrypted key (readable by the service's user only)")


@dataclass(frozen=True)
class TLSFiles:
    """A certificate (PEM, the server's first, then any intermediates) and its private key (PEM,
    unencrypted), as ``--tls-cert`` and ``--tls-key`` name them."""

    cert: str
    key: str

    def check(self) -> None:
        """Load both files as :meth:`context` does, else a ProtabError naming the option at fault."""
        self.context()

    def context(self, alpn: str | None = None) -> ssl.SSLContext:
        """A server-side context of TLS 1.2 and later with this certificate and key; ``alpn``: the
        protocol name offered in the handshake (:data:`PG_ALPN` on the PostgreSQL front)."""
        if b"-----BEGIN CERTIFICATE-----" not in _read("--tls-cert", self.cert):
            raise ProtabError(f"--tls-cert: {self.cert!r} holds no PEM certificate (a block "
                              "'-----BEGIN CERTIFICATE-----'); --tls-key takes the private key")
        key = _read("--tls-key", self.key)
        if b"PRIVATE KEY-----" not in key:
            raise ProtabError(f"--tls-key: {self.key!r} holds no PEM private key (a block "
                              "'-----BEGIN ... PRIVATE KEY-----'); --tls-cert takes the certificate")
        if b"ENCRYPTED" in key:
            _refuse_password()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_cert_chain(self.cert, self.key, password=_refuse_password)
        except ssl.SSLError as exc:
            if "KEY_VALUES_MISMATCH" in str(exc.reason):
                raise ProtabError(f"--tls-key: {self.key!r} is not the private key of the certificate in "
                                  f"--tls-cert {self.cert!r} (they are not a pair)") from None
            raise ProtabError(f"--tls-cert / --tls-key: cannot load the certificate {self.cert!r} with the key "
                              f"{self.key!r} (OpenSSL: {exc.reason or 'unreadable PEM'}); give a PEM "
                              "certificate and its unencrypted PEM private key") from None
        if alpn is not None:
            ctx.set_alpn_protocols([alpn])
        return ctx


def key_exposure(path: str) -> str | None:
    """What is wrong with the private key file's permissions, or None: a key that its group or
    others may read (or write) is a key others can take, and with it the service's identity."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None  # unreadable files are the certificate check's to refuse
    if not mode & 0o077:
        return None
    who = " and ".join(w for w, bits in (("its group", 0o070), ("others", 0o007)) if mode & bits)
    return (f"--tls-key {path!r} has mode {mode:04o}: {who} may read it (the private key of the service's "
            f"certificate); make it readable by the service's user only: chmod 600 {path}")


def check_key_mode(files: TLSFiles | None, require_tls: bool, warn: Callable[[str], None]) -> None:
    """A key file open to its group or others: a warning (``warn``), or with ``require_tls`` (an
    office that asks for TLS) a ProtabError that stops the start-up."""
    problem = None if files is None else key_exposure(files.key)
    if problem is None:
        return
    if require_tls:
        raise ProtabError(f"{problem} (require_tls = true: the service does not start with an exposed key)")
    warn(f"warning: {problem}")


def tls_files(cert: str | None, key: str | None) -> TLSFiles | None:
    """The checked TLS files of ``--tls-cert`` and ``--tls-key`` (both or neither), or None."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        given, missing = ("--tls-cert", "--tls-key") if key is None else ("--tls-key", "--tls-cert")
        raise ProtabError(f"{given} needs {missing} too: TLS takes a certificate and its private key")
    if not hasattr(asyncio.StreamWriter, "start_tls"):  # Python 3.10
        raise ProtabError("--tls-cert: TLS on the service needs Python 3.11 or later")
    files = TLSFiles(cert, key)
    files.check()
    return files


def has_unread_data(reader: asyncio.StreamReader) -> bool:
    """Whether bytes the client sent in clear wait in ``reader``'s buffer: after an SSLRequest
    they must not be read as if they came over TLS (PostgreSQL's fix of CVE-2021-23214 refuses
    them the same way). asyncio has no public call for it: the reader's ``_buffer``."""
    return bool(getattr(reader, "_buffer", b""))
