"""The ASGI app of the query service (Starlette): routes, authentication, formats, errors, audit.

Every ``/v1`` request is authenticated by its bearer token (401), checked against the user's
rights (403) by the validator or the table-request check, answered by the broker with values
protected by the cell key method, and recorded in the audit log *before* its answer is sent
(a request whose line cannot be written gets a 500 and no answer). Errors are JSON
``{"error": message}`` with the status that fits: 400 (malformed JSON, a refused query, too
many cells, the minimum-population rule, a body cut short by its client), 401, 403, 404
(unknown route), 405 (wrong method), 408 (a body that does not arrive within ``body_timeout``
seconds), 413 (body too large), 429 (more requests than the user's rate allows, with
Retry-After), 500 (the service's own failure; its cause goes to the audit log only).

``create_app(config)`` builds it from a serve.toml path or a loaded :class:`ServeConfig`, so
that a platform can mount it in its own ASGI server; ``python -m protab.serve`` runs it on
uvicorn.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from protab.errors import InputError
from protab.serve import formats
from protab.serve.audit_log import AuditLog
from protab.serve.auth import AuthError, TokenStore
from protab.serve.broker import Answer, Broker
from protab.serve.config import ServeConfig, UserConfig, load_config
from protab.serve.validator import QueryError

STATIC = Path(__file__).parent / "static"
ENDPOINTS = "GET /v1/catalog, POST /v1/query, POST /v1/table"
_NO_STORE = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
#: the page loads its own script and styles only, and is not framed by other sites
_PAGE = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
         "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; base-uri 'none'; "
                                    "form-action 'self'; frame-ancestors 'none'"}
_INTERNAL = "the service could not answer this request (an internal error, recorded for the office)"
#: seconds a client has to send a request's body (``create_app(body_timeout=...)``, ``--body-timeout``)
BODY_SECONDS = 10.0


class _HTTPError(Exception):
    """An error answer of the service itself (400 malformed body, 408 body too slow, 413 too
    large); ``close``: the connection ends after the answer (the body was not read to its end)."""

    def __init__(self, status: int, message: str, close: bool = False) -> None:
        super().__init__(message)
        self.status, self.close = status, close


def _max_digits() -> int:
    """Python's limit on the digits of an integer read from text (``sys.get_int_max_str_digits``)."""
    return getattr(sys, "get_int_max_str_digits", lambda: 4300)()


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers={**_NO_STORE, **(headers or {})})


def _refusal(exc: Exception) -> tuple[int, str, Response]:
    """The status, audited reason and answer of a request that failed with ``exc``: 401, the
    refusal's own status, 400 for an unknown ?format=, else 500 (its cause to the audit log only)."""
    if isinstance(exc, AuthError):
        return 401, str(exc), _error(401, str(exc), {"WWW-Authenticate": 'Bearer realm="protab"'})
    if isinstance(exc, QueryError):
        retry = getattr(exc, "retry_after", None)
        return exc.status, str(exc), _error(exc.status, str(exc),
                                            {"Retry-After": str(retry)} if retry is not None else None)
    if isinstance(exc, _HTTPError):
        return exc.status, str(exc), _error(exc.status, str(exc), {"Connection": "close"} if exc.close else None)
    if isinstance(exc, InputError):  # an unknown ?format=
        return 400, str(exc), _error(400, str(exc))
    return 500, f"{type(exc).__name__}: {exc}", _error(500, _INTERNAL)


class _Service:
    """The request handlers around one broker, token store and audit log."""

    def __init__(self, config: ServeConfig, broker: Broker, tokens: TokenStore, audit: AuditLog,
                 body_timeout: float = BODY_SECONDS) -> None:
        self.config, self.broker, self.tokens, self.audit = config, broker, tokens, audit
        self.body_timeout = body_timeout

    async def _read(self, request: Request, limit: int) -> bytes:
        """The body's bytes, up to ``limit`` (413 beyond), within :attr:`body_timeout` seconds
        (408 after: a body shorter than its Content-Length, or sent too slowly); 400 when the
        client closes the connection before its end."""
        size, chunks = 0, []
        try:
            with anyio.fail_after(self.body_timeout):
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > limit:
                        raise _HTTPError(413, f"the request body is larger than {limit:,} bytes")
                    chunks.append(chunk)
        except TimeoutError:
            raise _HTTPError(408, f"the request body did not arrive within {self.body_timeout:g} seconds "
                             f"({size:,} bytes came, Content-Length said {request.headers.get('content-length')}); "
                             "send the whole body at once", close=True) from None
        except ClientDisconnect:
            raise _HTTPError(400, f"the client closed the connection after {size:,} bytes of the request body, "
                             "before its end", close=True) from None
        return b"".join(chunks)

    async def _body(self, request: Request) -> Any:
        """The JSON body, read up to ``max_body_bytes`` (413 beyond), parsed (400 if malformed)."""
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                raise _HTTPError(400, "the Content-Length header is not a number")
            if int(declared) > limit:
                raise _HTTPError(413, f"the request body is larger than {limit:,} bytes")
        raw = await self._read(request, limit)
        if not raw.strip():
            raise _HTTPError(400, "malformed JSON: the request body is empty; send a JSON object")
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise _HTTPError(400, f"malformed JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
        except UnicodeDecodeError:
            raise _HTTPError(400, "malformed JSON: the body is not UTF-8 text") from None
        except RecursionError:
            raise _HTTPError(400, "malformed JSON: nested too deeply") from None
        except ValueError:  # Python's limit on the digits of an integer read from text
            raise _HTTPError(400, f"malformed JSON: a number has more than {_max_digits():,} "
                             "digits; send codes as strings") from None

    async def _serve(self, request: Request, work: Callable[[UserConfig, Any], Any], *, body: bool) -> Response:
        """Authenticate, read the body, run ``work`` in a worker thread, render, audit, answer."""
        t0 = time.perf_counter()
        endpoint = f"{request.method} {request.url.path}"
        seen: dict[str, Any] = {"user": None, "query": None, "format": "json", "cells": None, "cached": None}
        try:
            response = await self._answer(request, work, body, seen)
            status, reason = 200, None
        except Exception as exc:  # a refusal, or the service's own failure (its cause to the audit log only)
            status, reason, response = _refusal(exc)
        record = {
            "user": seen["user"], "endpoint": endpoint, "query": seen["query"],
            "status": status, "accepted": status == 200, "reason": reason, "cells": seen["cells"],
            "cached": seen["cached"], "format": seen["format"] if status == 200 else None,
            "ms": round(1000 * (time.perf_counter() - t0), 1),
        }
        try:
            await run_in_threadpool(self.audit.write, **record)
        except Exception:  # no line, no answer
            return _error(500, "the service could not write its audit log; the request was not answered")
        return response

    async def _answer(self, request: Request, work: Callable[[UserConfig, Any], Any], body: bool,
                      seen: dict[str, Any]) -> Response:
        """The answer of an authenticated request; ``seen`` gets what its audit line records (the
        user, the query, the format, and the answer's cells and whether it came from the cache)."""
        try:
            user = self.tokens.authenticate(request.headers.get("authorization"))
        except AuthError:
            raise
        except Exception as exc:  # a broken tokens file: the office's problem, not the analyst's
            raise RuntimeError(f"token store: {type(exc).__name__}: {exc}") from None
        seen["user"] = user.name
        seen["format"] = fmt = formats.choose(request.query_params.get("format"), request.headers.get("accept"))
        payload = None
        if body:
            payload = await self._body(request)
            summary = payload.get("sql", payload) if isinstance(payload, dict) else payload
            seen["query"] = summary if isinstance(summary, str) else json.dumps(summary, ensure_ascii=False)[:4000]
        result = await run_in_threadpool(work, user, payload)
        if not isinstance(result, Answer):
            return JSONResponse(result, headers=_NO_STORE)
        seen.update(query=result.summary, cells=result.cells, cached=result.cached)
        content = await run_in_threadpool(formats.render, result.frame, fmt)
        headers = dict(_NO_STORE)
        if fmt != "json":
            headers["Content-Disposition"] = f'attachment; filename="protab-answer{formats.SUFFIXES[fmt]}"'
        return Response(content, media_type=formats.MEDIA_TYPES[fmt], headers=headers)

    # -- endpoints ---------------------------------------------------------------------------
    async def catalog(self, request: Request) -> Response:
        return await self._serve(request, lambda user, _: self.broker.catalog(user), body=False)

    async def query(self, request: Request) -> Response:
        def work(user: UserConfig, payload: Any) -> Answer:
            if not isinstance(payload, dict) or "sql" not in payload:
                raise _HTTPError(400, 'the body must be a JSON object {"sql": "SELECT ..."}')
            extra = [k for k in payload if k != "sql"]
            if extra:
                raise _HTTPError(400, f'unknown key {str(extra[0])[:60]!r}: the body is {{"sql": "SELECT ..."}}')
            return self.broker.query(payload["sql"], user)

        return await self._serve(request, work, body=True)

    async def table(self, request: Request) -> Response:
        return await self._serve(request, lambda user, payload: self.broker.table(payload, user), body=True)

    async def http_error(self, request: Request, exc: Exception) -> Response:
        """404 and 405 of the router (and the static files), as JSON, audited."""
        status = getattr(exc, "status_code", 500)
        if status == 404:
            message = f"no such endpoint: {request.method} {request.url.path[:200]}; endpoints: {ENDPOINTS}"
        elif status == 405:
            message = f"method {request.method} is not allowed on {request.url.path[:200]}; endpoints: {ENDPOINTS}"
        else:
            message = str(getattr(exc, "detail", "")) or "error"
        try:
            await run_in_threadpool(self.audit.write, user=None, endpoint=f"{request.method} {request.url.path}",
                                    query=None, status=status, accepted=False, reason=message, cells=None,
                                    cached=None, format=None, ms=None)
        except Exception:
            return _error(500, "the service could not write its audit log; the request was not answered")
        headers = dict(getattr(exc, "headers", None) or {})
        return _error(status, message, headers)


async def _health(request: Request) -> Response:
    return JSONResponse({"status": "ok"}, headers=_NO_STORE)


async def _index(request: Request) -> Response:
    page = STATIC / "index.html"
    if not page.is_file():
        raise HTTPException(404)
    return FileResponse(page, headers=_PAGE)


def create_app(config: ServeConfig | str | os.PathLike[str] | Mapping[str, Any], *,
               database: str | None = None, body_timeout: float = BODY_SECONDS) -> Starlette:
    """The service as an ASGI app. ``config``: a serve.toml path, its content as a mapping, or a
    :class:`ServeConfig`; ``database`` overrides the config's database (``--db``);
    ``body_timeout``: seconds a client has to send a request's body (``--body-timeout``). Opens
    the microdata read-only and checks every dataset now, so that a bad config fails here, with
    a :class:`~protab.errors.ProtabError` naming its key. ``app.state.broker`` is the
    :class:`~protab.serve.broker.Broker` (also ``app.state.engine``, its name before)."""
    cfg = config if isinstance(config, ServeConfig) else load_config(config, database=database)
    tokens = TokenStore(cfg)
    audit = AuditLog(cfg.audit_log)
    try:
        broker = Broker(cfg)
    except BaseException:
        audit.close()
        raise
    service = _Service(cfg, broker, tokens, audit, body_timeout)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        broker.close()
        audit.close()

    routes = [
        Route("/", _index, methods=["GET"]),
        Route("/healthz", _health, methods=["GET"]),
        Route("/v1/catalog", service.catalog, methods=["GET"]),
        Route("/v1/query", service.query, methods=["POST"]),
        Route("/v1/table", service.table, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC, check_dir=False), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: service.http_error})
    app.state.broker = broker
    app.state.engine = broker  # its name in docs/serve.md before the class Engine became Broker
    app.state.config = cfg
    return app
