"""The app's ASGI middleware and error handlers: body size limit, access log, and the
answers to failures (400 for the user's mistakes, 503 with ``Retry-After`` while the storage
or the queue is down, a JSON 500 otherwise), none of which echo the request's values or name
the database's host or port."""

from __future__ import annotations

import logging
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from advisor.errors import AdvisorError
from advisor.service.outages import describe, is_queue_error, is_storage_error

access_log = logging.getLogger("advisor.service.access")
log = logging.getLogger("advisor.service")
RETRY_AFTER_S = 5


class BodyLimit:
    """ASGI middleware: bodies over ``limit`` bytes get 413, by Content-Length, or, when the
    client sends none (chunked), by reading at most ``limit`` bytes before the app runs."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None:
            if not length.isdigit() or int(length) > self.limit:
                await _too_large(self.limit, scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        if b"transfer-encoding" not in headers:  # no body at all
            await self.app(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            body += message.get("body", b"")
            if len(body) > self.limit:
                await _too_large(self.limit, scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _too_large(limit: int, scope: Scope, receive: Receive, send: Send) -> None:
    await JSONResponse(
        {"detail": f"request body over {limit} bytes; send less (a space file, a probe)"},
        status_code=413,
    )(scope, receive, send)


class AccessLog:
    """ASGI middleware: one log line per request with the route's template
    (``/v1/studies/{name}``), never the raw path, query or headers, which may carry a secret a
    user pasted by mistake."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", "(no route)")
            access_log.info(
                "%s %s %d %.1f ms",
                scope.get("method"),
                route,
                status,
                1000 * (time.perf_counter() - started),
            )


def unavailable(exc: BaseException) -> JSONResponse:
    """503 for a dependency that is down: what, that finished work is kept, when to retry."""
    return JSONResponse(
        {"detail": f"{describe(exc)}; finished work is kept, try again later"},
        status_code=503,
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )


def install_error_handlers(app: FastAPI) -> None:
    """The answers to AdvisorError (400), invalid bodies (422), outages (503) and bugs (500)."""

    @app.exception_handler(AdvisorError)
    async def _advisor_error(_req: Request, exc: AdvisorError) -> JSONResponse:
        if is_storage_error(exc):  # the storage failed while the advisor opened it
            return unavailable(exc)
        return JSONResponse({"detail": str(exc)}, status_code=400)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_req: Request, exc: RequestValidationError) -> JSONResponse:
        # The submitted values are not echoed back (they may hold a secret by mistake).
        return JSONResponse({"detail": [_problem(e) for e in exc.errors()]}, status_code=422)

    async def _outage(_req: Request, exc: Exception) -> JSONResponse:
        return unavailable(exc)

    for kind in _outage_types():  # answered here, not re-raised to the server's log
        app.add_exception_handler(kind, _outage)

    @app.exception_handler(Exception)
    async def _failure(_req: Request, exc: Exception) -> JSONResponse:
        if is_storage_error(exc) or is_queue_error(exc):
            return unavailable(exc)
        log.error("internal error (%s)", type(exc).__name__, exc_info=exc)
        return JSONResponse(
            {"detail": f"internal error ({type(exc).__name__}); see the service's log"},
            status_code=500,
        )


def _problem(error: dict[str, Any]) -> dict[str, str]:
    """One validation error as ``{"field", "problem"}``. A body that is not JSON names the
    body, with the decoder's reason and where (FastAPI puts the character offset in ``loc``,
    which read as a field named "15")."""
    loc = tuple(error.get("loc", ()))
    if error.get("type") == "json_invalid":
        offset = next((p for p in loc[1:] if isinstance(p, int)), None)
        reason = str((error.get("ctx") or {}).get("error") or "cannot be decoded")
        where = f" at character {offset}" if offset is not None else ""
        return {
            "field": "body",
            "problem": f"the body is not valid JSON ({reason}{where}); send one JSON object",
        }
    return {"field": ".".join(str(p) for p in loc if p != "body"), "problem": str(error["msg"])}


def _outage_types() -> list[type[Exception]]:
    from optuna.exceptions import StorageInternalError
    from sqlalchemy.exc import SQLAlchemyError

    kinds: list[type[Exception]] = [SQLAlchemyError, StorageInternalError]
    try:
        from redis.exceptions import ConnectionError, TimeoutError

        kinds += [ConnectionError, TimeoutError]
    except ImportError:
        pass
    try:
        import psycopg

        kinds.append(psycopg.Error)
    except ImportError:
        pass
    return kinds
