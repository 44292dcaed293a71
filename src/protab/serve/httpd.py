"""uvicorn as ``protab serve`` runs it: the HTTP/1.1 protocol of h11 with a deadline for the
request headers.

uvicorn closes a keep-alive connection that stays idle after an answer
(``timeout_keep_alive``), but not a connection that never finishes its request line and
headers (a new one that sends nothing, or a few bytes now and then: the "slowloris" attack),
and h11 limits their size, not their time. :func:`protocol` adds that deadline: from the
moment the connection opens, or its previous answer is sent, the headers of the next request
must be complete within ``header_timeout`` seconds, or the connection is closed. The body is
the app's concern (:func:`protab.serve.app.create_app`'s ``body_timeout``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.h11_impl import H11Protocol

if TYPE_CHECKING:
    from protab.serve.tls import TLSFiles

#: seconds a client has to send the request line and headers (of a new connection, or of the
#: next request on a kept-alive one)
HEADER_SECONDS = 10.0


class _HeaderDeadline(H11Protocol):
    """uvicorn's h11 protocol with a deadline for the headers of each request."""

    header_timeout = HEADER_SECONDS
    _deadline: asyncio.TimerHandle | None = None
    _armed_at: Any = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self._deadline is not None and self.cycle is not self._armed_at:
            self._disarm()  # the headers of a request arrived: a new request cycle began

    def on_response_complete(self) -> None:
        if not self.transport.is_closing():
            self._arm()  # before the next (pipelined) request is read, which disarms it
        super().on_response_complete()

    def _arm(self) -> None:
        self._disarm()
        self._armed_at = self.cycle
        self._deadline = self.loop.call_later(self.header_timeout, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def protocol(header_timeout: float = HEADER_SECONDS) -> type[asyncio.Protocol]:
    """The protocol class for ``uvicorn.run(..., http=...)`` with this header deadline (seconds)."""
    return type("ProtabHTTPProtocol", (_HeaderDeadline,), {"header_timeout": float(header_timeout)})


def run(app: Any, host: str, port: int, header_timeout: float = HEADER_SECONDS, *,
        tls: TLSFiles | None = None) -> None:
    """Serve ``app`` on uvicorn until interrupted: no access log (the audit log records every
    request), no Server header, the header deadline above; HTTPS only with ``tls`` (checked
    files: uvicorn's context of Python's defaults, TLS 1.2 and later)."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, server_header=False,
                http=protocol(header_timeout), ssl_certfile=None if tls is None else tls.cert,
                ssl_keyfile=None if tls is None else tls.key)  # None: uvicorn's default, no TLS
