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

Answers with data carry an ETag and ``Cache-Control`` (:mod:`protab.serve.caching`); a request
whose ``If-None-Match`` names it gets 304, after its token and rights are checked, without being
counted against the rate. Requests above ``job_cells`` cells get 202 and run as jobs
(:mod:`protab.serve.jobs`: ``GET /v1/jobs``, ``GET /v1/jobs/{id}``); saved tables
(:mod:`protab.serve.saved`: ``/v1/saved``) are requests kept per user and run again on demand;
saved custom groups (:mod:`protab.serve.saved_groups`: ``/v1/groups``) are used by name in table
requests.

``create_app(config)`` builds it from a serve.toml path or a loaded :class:`ServeConfig`, so
that a platform can mount it in its own ASGI server; ``python -m protab.serve`` runs it on
uvicorn.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import State
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from protab.errors import InputError
from protab.serve import caching, formats
from protab.serve.audit_log import AuditLog
from protab.serve.auth import AuthError, TokenStore
from protab.serve.broker import Answer, Broker, JobNeeded
from protab.serve.config import ServeConfig, UserConfig, load_config
from protab.serve.jobs import POLL_SECONDS, JobFailed, JobStore, JobUnknown
from protab.serve.leftovers import remove_leftovers
from protab.serve.query import QueryRefused
from protab.serve.saved import SavedFull, SavedTables, check_name
from protab.serve.saved_groups import SavedGroups, check_saved, resolve
from protab.serve.table_request import check_table_request
from protab.serve.validator import QueryError, validate

STATIC = Path(__file__).parent / "static"
ENDPOINTS = ("GET /v1/catalog, POST /v1/query, POST /v1/table, GET /v1/jobs, GET /v1/jobs/{id}, GET|POST /v1/saved, "
             "GET|DELETE /v1/saved/{name}, GET|POST /v1/groups, GET|DELETE /v1/groups/{dataset}/{dim}/{name}")
_NO_STORE = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
#: the page loads its own script and styles only, and is not framed by other sites
_PAGE = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
         "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; base-uri 'none'; "
                                    "form-action 'self'; frame-ancestors 'none'"}
_INTERNAL = "the service could not answer this request (an internal error, recorded for the office)"
#: seconds a client has to send a request's body (``create_app(body_timeout=...)``, ``--body-timeout``)
BODY_SECONDS = 10.0


#: the rule and advice of the service's own error answers, by status
_HTTP_RULES = {
    400: ("body", 'send the body as one JSON object in UTF-8, as the endpoint takes it (POST /v1/query: '
                  '{"sql": "SELECT ..."}; POST /v1/table: a table request)'),
    408: ("body_timeout", "send the whole body at once, right after the headers"),
    413: ("max_body_bytes", "send a smaller request (fewer filter values or groups)"),
}
_AUTH_ADVICE = ("send the header Authorization: Bearer <your token> (the office gives tokens); an expired or "
                "revoked token needs a new one from the office")
_INTERNAL_ADVICE = "try again later; the office finds the cause in the service's audit log"


class _HTTPError(Exception):
    """An error answer of the service itself (400 malformed body, 408 body too slow, 413 too
    large); ``close``: the connection ends after the answer (the body was not read to its end);
    ``rule`` and ``advice`` as a refusal's (by default those of its status)."""

    def __init__(self, status: int, message: str, close: bool = False, *, rule: str | None = None,
                 advice: str | None = None) -> None:
        super().__init__(message)
        self.status, self.close = status, close
        default = _HTTP_RULES.get(status, ("http", "see the endpoints of docs/serve.md"))
        self.rule, self.advice = rule or default[0], advice or default[1]


def _max_digits() -> int:
    """Python's limit on the digits of an integer read from text (``sys.get_int_max_str_digits``)."""
    return getattr(sys, "get_int_max_str_digits", lambda: 4300)()


def _error(status: int, message: str, rule: str, advice: str, headers: Mapping[str, str] | None = None
           ) -> JSONResponse:
    """A refusal's answer: ``{"error": message, "rule": rule, "advice": advice}`` (every refusal
    names the rule or check that refused it and what would pass)."""
    return JSONResponse({"error": message, "rule": rule, "advice": advice}, status_code=status,
                        headers={**_NO_STORE, **(headers or {})})


def _refusal(exc: Exception) -> tuple[int, str, Response]:
    """The status, audited reason and answer of a request that failed with ``exc``: 401, the
    refusal's own status, 400 for an unknown ?format=, else 500 (its cause to the audit log only)."""
    if isinstance(exc, AuthError):
        return 401, str(exc), _error(401, str(exc), "token", _AUTH_ADVICE,
                                     {"WWW-Authenticate": 'Bearer realm="protab"'})
    if isinstance(exc, QueryError):
        retry = getattr(exc, "retry_after", None)
        return exc.status, str(exc), _error(exc.status, str(exc), exc.rule, exc.advice,
                                            {"Retry-After": str(retry)} if retry is not None else None)
    if isinstance(exc, _HTTPError):
        return exc.status, str(exc), _error(exc.status, str(exc), exc.rule, exc.advice,
                                            {"Connection": "close"} if exc.close else None)
    if isinstance(exc, InputError):  # an unknown ?format=
        return 400, str(exc), _error(400, str(exc), "format", f"use ?format= one of {', '.join(formats.SUFFIXES)}")
    return 500, f"{type(exc).__name__}: {exc}", _error(500, _INTERNAL, "internal", _INTERNAL_ADVICE)


#: a request's computation: (user, payload[, direct]) → an Answer, a JSON-able value or a Response
Work = Callable[..., Any]
#: a request's ETag before it is answered: (user, payload, format) → (tag, audit summary) or None
Tagger = Callable[[UserConfig, Any, str], "tuple[str, str | None] | None"]


def _summary(payload: Any) -> str:
    """What the audit log records of a request body (its SQL, or its JSON, cut)."""
    summary = payload.get("sql", payload) if isinstance(payload, dict) else payload
    return summary if isinstance(summary, str) else json.dumps(summary, ensure_ascii=False)[:4000]


class _Service:
    """The request handlers around one broker, token store and audit log, with the ETags, jobs
    and saved tables of the service's state folder."""

    def __init__(self, config: ServeConfig, broker: Broker, tokens: TokenStore, audit: AuditLog,
                 body_timeout: float = BODY_SECONDS, *, etags: caching.ETags, jobs: JobStore,
                 saved: SavedTables, groups: SavedGroups) -> None:
        self.config, self.broker, self.tokens, self.audit = config, broker, tokens, audit
        self.body_timeout = body_timeout
        self.etags, self.jobs, self.saved, self.groups = etags, jobs, saved, groups

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

    async def _serve(self, request: Request, work: Work, *, body: bool = False,
                     source: Callable[[UserConfig], Any] | None = None, tag: Tagger | None = None) -> Response:
        """Authenticate, read the body (or the saved request of ``source``), answer 304 when
        ``If-None-Match`` names the answer's ETag (``tag``), else run ``work`` in a worker thread
        (a request above ``job_cells`` becomes a job: 202), render, audit, answer."""
        t0 = time.perf_counter()
        endpoint = f"{request.method} {request.url.path}"
        seen: dict[str, Any] = {"user": None, "query": None, "format": "json", "cells": None, "cached": None}
        try:
            response = await self._answer(request, work, seen, body=body, source=source, tag=tag)
            status, reason = response.status_code, None
        except Exception as exc:  # a refusal, or the service's own failure (its cause to the audit log only)
            status, reason, response = _refusal(exc)
        record = {
            "user": seen["user"], "endpoint": endpoint, "query": seen["query"],
            "status": status, "accepted": status < 400, "reason": reason, "cells": seen["cells"],
            "cached": seen["cached"], "format": seen["format"] if status < 400 else None,
            "ms": round(1000 * (time.perf_counter() - t0), 1),
        }
        if seen.get("job"):
            record["job"] = seen["job"]
        try:
            await run_in_threadpool(self.audit.write, **record)
        except Exception:  # no line, no answer
            return _error(500, "the service could not write its audit log; the request was not answered", "audit_log",
                          _INTERNAL_ADVICE)
        return response

    async def _answer(self, request: Request, work: Work, seen: dict[str, Any], *, body: bool,
                      source: Callable[[UserConfig], Any] | None, tag: Tagger | None) -> Response:
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
        elif source is not None:
            payload = await run_in_threadpool(source, user)
        if payload is not None:
            seen["query"] = _summary(payload)
        etag = await run_in_threadpool(tag, user, payload, fmt) if tag is not None else None
        if etag is not None:
            seen["query"] = etag[1] or seen["query"]  # the canonical request
            if caching.matches(request.headers.get("if-none-match"), etag[0]):  # not counted against the rate
                return Response(status_code=304, headers=self.etags.headers(etag[0]))
        try:
            result = await run_in_threadpool(work, user, payload)
        except JobNeeded as need:
            job_tag = await run_in_threadpool(tag, user, payload, "job") if tag is not None else None
            return await self._submit(work, user, payload, seen, need.cells, job_tag[0] if job_tag else None)
        headers = self.etags.headers(etag[0]) if etag is not None else dict(_NO_STORE)
        if isinstance(result, Response):
            return result
        if not isinstance(result, Answer):
            return JSONResponse(result, headers=headers)
        return await self._render(result, fmt, headers, seen)

    async def _render(self, result: Answer, fmt: str, headers: dict[str, str], seen: dict[str, Any]) -> Response:
        """An answer in format ``fmt`` with ``headers`` (and the areas the rules withheld)."""
        seen.update(query=result.summary, cells=result.cells, cached=result.cached)
        content = await run_in_threadpool(formats.render, result.frame, fmt, result.labels)
        if fmt != "json":
            headers["Content-Disposition"] = f'attachment; filename="protab-answer{formats.SUFFIXES[fmt]}"'
        if result.withheld:  # areas the disclosure rules withheld (protab.serve.rules), in every format
            headers["Protab-Withheld"] = json.dumps(result.withheld, ensure_ascii=True, separators=(",", ":"))
        return Response(content, media_type=formats.MEDIA_TYPES[fmt], headers=headers)

    async def _submit(self, work: Work, user: UserConfig, payload: Any, seen: dict[str, Any], cells: int,
                      key: str | None) -> Response:
        """A request above ``job_cells`` (about ``cells`` cells): queued as a job (the same
        computation, not counted against the rate again); 202 with the job and where to fetch it.
        The same request (``key``: its canonical form, rights and data) posted again by its user
        is answered as ``GET /v1/jobs/<id>`` of its job: 202 with it while queued or running, the
        answer (200) once done."""
        def run() -> tuple[Any, dict[str, list[str]]]:
            with self.broker.as_job():  # on the jobs' own sessions
                answer = work(user, payload, False)
            return answer.frame, answer.withheld

        job, existing = await run_in_threadpool(self.jobs.submit_once, user.name, key, seen["query"], cells, run)
        seen["job"] = job["id"]
        if existing and job["status"] == "done":
            stored = await run_in_threadpool(self.jobs.get, user.name, job["id"])
            if stored is not None:
                frame = await run_in_threadpool(self.jobs.frame, job["id"])
                headers = {**self.etags.headers(self.etags.tag(user.name, "job", job["id"], None, seen["format"])),
                           "Content-Location": job["result"]}
                answer = Answer(frame, stored["request"] or f"job {job['id']}", withheld=stored.get("withheld") or {})
                return await self._render(answer, seen["format"], headers, seen)
        return JSONResponse({"job": job}, status_code=202,
                            headers={**_NO_STORE, "Location": job["result"], "Retry-After": str(POLL_SECONDS)})

    def job_finished(self, job: dict[str, Any], reason: str | None) -> None:
        """The audit line of a job that finished (called in its worker thread)."""
        ok = job["http_status"] == 200
        self.audit.write(user=job["user"], endpoint=f"JOB /v1/jobs/{job['id']}", query=job["request"],
                         status=job["http_status"], accepted=ok, reason=reason, cells=job["cells"] if ok else None,
                         cached=False, format=None, ms=round(1000 * (job["finished"] - job["created"]), 1),
                         job=job["id"])

    # -- the computations and their ETags ------------------------------------------------------
    def _table(self, user: UserConfig, payload: Any, direct: bool = True) -> Answer:
        """A table request (its saved groups by name resolved); ``direct``: counted against the
        rate, a job above ``job_cells``."""
        payload = resolve(payload, user.name, self.groups)
        return self.broker.table(payload, user, admit=direct, job_cells=self.config.job_cells if direct else None)

    def _query(self, user: UserConfig, payload: Any, direct: bool = True) -> Answer:
        if not isinstance(payload, dict) or "sql" not in payload:
            raise _HTTPError(400, 'the body must be a JSON object {"sql": "SELECT ..."}',
                             advice='send {"sql": "SELECT ..."}')
        extra = [k for k in payload if k != "sql"]
        if extra:
            raise _HTTPError(400, f'unknown key {str(extra[0])[:60]!r}: the body is {{"sql": "SELECT ..."}}',
                             advice='send {"sql": "SELECT ..."}')
        return self.broker.query(payload["sql"], user, admit=direct,
                                 job_cells=self.config.job_cells if direct else None)

    @staticmethod
    def _rights(user: UserConfig, dataset: str) -> list[Any]:
        r = user.rights[dataset]
        return [r.dims, r.measures]

    def _tag_table(self, user: UserConfig, payload: Any, fmt: str) -> tuple[str, str | None] | None:
        """The ETag of a table request the user may make (None if it is refused: it is then
        answered, and refused, as without one)."""
        try:
            req = check_table_request(resolve(payload, user.name, self.groups), self.broker.datasets,
                                      self.broker.user_rights(user))
        except Exception:
            return None
        summary = json.dumps(req, sort_keys=True, ensure_ascii=False)
        return self.etags.tag(user.name, "table", req, self._rights(user, req["dataset"]), fmt), summary

    def _tag_query(self, user: UserConfig, payload: Any, fmt: str) -> tuple[str, str | None] | None:
        if not isinstance(payload, dict) or set(payload) != {"sql"}:
            return None
        c = self.config
        try:
            q = validate(payload["sql"], self.broker.catalog_rights, self.broker.user_rights(user),
                         max_length=c.max_sql_length, max_limit=c.max_limit)
        except Exception:
            return None
        return self.etags.tag(user.name, "query", q.normalised, self._rights(user, q.dataset), fmt), q.normalised

    def _tag_catalog(self, user: UserConfig, payload: Any, fmt: str) -> tuple[str, str | None]:
        rights = {ds: self._rights(user, ds) for ds in user.rights}
        return self.etags.tag(user.name, "catalog", None, rights, "json"), None

    # -- endpoints ---------------------------------------------------------------------------
    async def catalog(self, request: Request) -> Response:
        return await self._serve(request, lambda user, _: self.broker.catalog(user), tag=self._tag_catalog)

    async def query(self, request: Request) -> Response:
        return await self._serve(request, self._query, body=True, tag=self._tag_query)

    async def table(self, request: Request) -> Response:
        return await self._serve(request, self._table, body=True, tag=self._tag_table)

    # -- jobs ----------------------------------------------------------------------------------
    async def job_list(self, request: Request) -> Response:
        def work(user: UserConfig, _: Any) -> Response:
            self.broker.rate.admit(user.name)
            return JSONResponse({"jobs": self.jobs.listing(user.name)}, headers=_NO_STORE)

        return await self._serve(request, work)

    async def job(self, request: Request) -> Response:
        """A job's answer in the format asked (200, with an ETag), its state while it runs (202),
        the refusal or failure it ended with, or 404 (also for another user's job)."""
        job_id = request.path_params["id"]

        def tag(user: UserConfig, _: Any, fmt: str) -> tuple[str, str | None] | None:
            job = self.jobs.get(user.name, job_id)
            if job is None or job["status"] != "done":
                return None
            return self.etags.tag(user.name, "job", job_id, None, fmt), job["request"]

        def work(user: UserConfig, _: Any) -> Any:
            self.broker.rate.admit(user.name)
            job = self.jobs.get(user.name, job_id)
            if job is None:
                raise JobUnknown(f"no job {job_id[:64]!r} of yours (finished jobs are kept "
                                 f"{self.config.job_keep_hours:g} hours); GET /v1/jobs lists yours")
            if job["status"] == "failed":
                raise JobFailed(job["http_status"], f"job {job_id} failed: {job['error']}", rule=job.get("rule"),
                                advice=job.get("advice"))
            if job["status"] != "done":
                return JSONResponse({"job": self.jobs.view(job)}, status_code=202,
                                    headers={**_NO_STORE, "Retry-After": str(POLL_SECONDS)})
            return Answer(self.jobs.frame(job_id), job["request"] or f"job {job_id}", withheld=job.get("withheld") or {})

        return await self._serve(request, work, tag=tag)

    # -- saved tables --------------------------------------------------------------------------
    async def saved_list(self, request: Request) -> Response:
        def work(user: UserConfig, _: Any) -> Response:
            self.broker.rate.admit(user.name)
            return JSONResponse({"saved": self.saved.listing(user.name)}, headers=_NO_STORE)

        return await self._serve(request, work)

    async def saved_add(self, request: Request) -> Response:
        """``{"name": ..., "request": {table request}}``: the request judged now as a table request is
        before its scan (400, 403: its form, rights, the disclosure rules, max_cells) and kept."""
        def work(user: UserConfig, payload: Any) -> Response:
            self.broker.rate.admit(user.name)
            shape = '{"name": "...", "request": {a table request, as POST /v1/table takes}}'
            if not isinstance(payload, dict):
                raise QueryRefused(f"the body must be a JSON object {shape}")
            for key in payload:
                if key not in ("name", "request"):
                    raise QueryRefused(f"unknown key {str(key)[:60]!r}: the body is {shape}")
            for key in ("name", "request"):
                if key not in payload:
                    raise QueryRefused(f"the key {key!r} is missing: the body is {shape}")
            check_name(payload["name"])
            # judged now as a table request is before its scan (rights, the rules, max_cells); saved
            # groups stay names: their codes of the day
            self.broker.plan_table(resolve(payload["request"], user.name, self.groups), user)
            entry = self.saved.save(user.name, payload["name"], payload["request"])
            return JSONResponse(entry, status_code=201,
                                headers={**_NO_STORE, "Location": f"/v1/saved/{payload['name']}"})

        return await self._serve(request, work, body=True)

    async def saved_run(self, request: Request) -> Response:
        """A saved table, run again as POST /v1/table runs it (rights, rate, cache, ETag, jobs)."""
        name = request.path_params["name"]
        return await self._serve(request, self._table, source=lambda user: self.saved.get(user.name, name)["request"],
                                 tag=self._tag_table)

    async def saved_delete(self, request: Request) -> Response:
        name = request.path_params["name"]

        def work(user: UserConfig, _: Any) -> Response:
            self.broker.rate.admit(user.name)
            self.saved.delete(user.name, name)
            return JSONResponse({"deleted": name}, headers=_NO_STORE)

        return await self._serve(request, work)

    # -- saved custom groups (protab.serve.saved_groups) ---------------------------------------
    async def groups_list(self, request: Request) -> Response:
        def work(user: UserConfig, _: Any) -> Response:
            self.broker.rate.admit(user.name)
            return JSONResponse({"groups": self.groups.listing(user.name)}, headers=_NO_STORE)

        return await self._serve(request, work)

    async def groups_add(self, request: Request) -> Response:
        """``{"dataset", "dim", "name", "groups"}``: checked now (400 naming the key, 403) and kept."""
        def work(user: UserConfig, payload: Any) -> Response:
            self.broker.rate.admit(user.name)
            dataset, dim, name, groups = check_saved(payload, self.broker.datasets, self.broker.user_rights(user))
            try:
                entry = self.groups.save(user.name, dataset, dim, name, groups)
            except SavedFull as exc:
                raise SavedFull(str(exc), rule="groups_per_user", advice="delete some of your saved groups "
                                "(DELETE /v1/groups/{dataset}/{dim}/{name}) before saving more") from None
            return JSONResponse(entry, status_code=201,
                                headers={**_NO_STORE, "Location": f"/v1/groups/{dataset}/{dim}/{name}"})

        return await self._serve(request, work, body=True)

    async def groups_get(self, request: Request) -> Response:
        p = request.path_params

        def work(user: UserConfig, _: Any) -> Response:
            self.broker.rate.admit(user.name)
            return JSONResponse(self.groups.get(user.name, p["dataset"], p["dim"], p["name"]), headers=_NO_STORE)

        return await self._serve(request, work)

    async def groups_delete(self, request: Request) -> Response:
        p = request.path_params

        def work(user: UserConfig, _: Any) -> Response:
            self.broker.rate.admit(user.name)
            self.groups.delete(user.name, p["dataset"], p["dim"], p["name"])
            return JSONResponse({"deleted": p["name"]}, headers=_NO_STORE)

        return await self._serve(request, work)

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
            return _error(500, "the service could not write its audit log; the request was not answered", "audit_log",
                          _INTERNAL_ADVICE)
        headers = dict(getattr(exc, "headers", None) or {})
        return _error(status, message, "endpoint", f"use one of the endpoints: {ENDPOINTS}", headers)


async def _health(request: Request) -> Response:
    return JSONResponse({"status": "ok"}, headers=_NO_STORE)


async def _index(request: Request) -> Response:
    page = STATIC / "index.html"
    if not page.is_file():
        raise HTTPException(404)
    return FileResponse(page, headers=_PAGE)


def _routes(service: _Service) -> list[Any]:
    """The routes of the service (its page, health check, API and static files)."""
    return [
        Route("/", _index, methods=["GET"]),
        Route("/healthz", _health, methods=["GET"]),
        Route("/v1/catalog", service.catalog, methods=["GET"]),
        Route("/v1/query", service.query, methods=["POST"]),
        Route("/v1/table", service.table, methods=["POST"]),
        Route("/v1/jobs", service.job_list, methods=["GET"]),
        Route("/v1/jobs/{id}", service.job, methods=["GET"]),
        Route("/v1/saved", service.saved_list, methods=["GET"]),
        Route("/v1/saved", service.saved_add, methods=["POST"]),
        Route("/v1/saved/{name}", service.saved_run, methods=["GET"]),
        Route("/v1/saved/{name}", service.saved_delete, methods=["DELETE"]),
        Route("/v1/groups", service.groups_list, methods=["GET"]),
        Route("/v1/groups", service.groups_add, methods=["POST"]),
        Route("/v1/groups/{dataset}/{dim}/{name}", service.groups_get, methods=["GET"]),
        Route("/v1/groups/{dataset}/{dim}/{name}", service.groups_delete, methods=["DELETE"]),
        Mount("/static", StaticFiles(directory=STATIC, check_dir=False), name="static"),
    ]


class _AppState(State):
    """``app.state``; ``engine``, the broker's name before the class Engine became Broker, warns."""

    def __getattr__(self, key: Any) -> Any:
        if key == "engine":
            warnings.warn("app.state.engine is deprecated; use app.state.broker", DeprecationWarning, stacklevel=2)
        return super().__getattr__("broker" if key == "engine" else key)


def create_app(config: ServeConfig | str | os.PathLike[str] | Mapping[str, Any], *,
               database: str | None = None, body_timeout: float = BODY_SECONDS) -> Starlette:
    """The service as an ASGI app. ``config``: a serve.toml path, its content as a mapping, or a
    :class:`ServeConfig`; ``database`` overrides the config's database (``--db``);
    ``body_timeout``: seconds a client has to send a request's body (``--body-timeout``). Opens
    the microdata read-only and checks every dataset now, so that a bad config fails here, with
    a :class:`~protab.errors.ProtabError` naming its key. ``app.state.broker`` is the
    :class:`~protab.serve.broker.Broker` (``app.state.engine``, its name before, is deprecated)."""
    cfg = config if isinstance(config, ServeConfig) else load_config(config, database=database)
    tokens = TokenStore(cfg)
    audit = AuditLog(cfg.audit_log)
    try:
        folder = caching.state_folder(cfg)
        remove_leftovers(folder)  # what a killed service left: its snapshot, temporary files (protab.serve.leftovers)
        key = caching.load_key(folder)
        saved = SavedTables(folder, cfg.saved_per_user)
        groups = SavedGroups(folder, cfg.groups_per_user)
        jobs = JobStore(folder / "jobs", workers=cfg.job_workers, keep_hours=cfg.job_keep_hours,
                        per_user=cfg.jobs_per_user)
    except BaseException:
        audit.close()
        raise
    try:
        broker = Broker(cfg)
    except BaseException:
        jobs.close()
        audit.close()
        raise
    # the data's fingerprint as the snapshot was copied (protab.serve.snapshot), not as the file is now
    source = broker.snapshot.source_identity if broker.snapshot is not None else None
    etags = caching.ETags(key, caching.version(cfg, source), cfg.cache_max_age)
    service = _Service(cfg, broker, tokens, audit, body_timeout, etags=etags, jobs=jobs, saved=saved,
                       groups=groups)
    jobs.on_finish = service.job_finished

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        jobs.close()
        broker.close()
        audit.close()

    routes = _routes(service)
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: service.http_error})
    app.state = _AppState()
    app.state.broker = broker
    app.state.config = cfg
    app.state.jobs, app.state.saved, app.state.groups = jobs, saved, groups
    return app
