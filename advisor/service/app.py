"""The FastAPI application of ``advisor serve`` (OpenAPI schema at /openapi.json, docs at /docs).

Every endpoint but ``/health`` needs ``Authorization: Bearer TOKEN`` (``advisor token create``).
Long work (suggestions) is queued as a job and run by a worker; the request returns its id.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from advisor import __version__
from advisor.errors import AdvisorError
from advisor.service import api, auth, jobs
from advisor.service.schemas import (
    PredictRequest,
    SuggestRequest,
    TuningImportRequest,
    TuningPlanRequest,
    TuningSubmitRequest,
    TuningTarget,
    check_name,
)

MAX_BODY_BYTES = 1_000_000
access_log = logging.getLogger("advisor.service.access")
_JOB_ID = re.compile(r"^[0-9a-f]{32}$")
_TUNING_JOB = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,255}$")


@dataclass
class Settings:
    """What the app needs: the storage URL, how jobs are run, the body size limit."""

    storage: str
    dispatcher: Any
    max_body_bytes: int = MAX_BODY_BYTES


class BodyLimit:
    """ASGI middleware: bodies over ``limit`` bytes get 413 (by Content-Length, or counted
    while streaming when the client sends none)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await _too_large(self.limit, scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooLarge
            return message

        try:
            await self.app(scope, counted, send)
        except _TooLarge:
            await _too_large(self.limit, scope, receive, send)


class _TooLarge(Exception):
    pass


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


def create_app(settings: Settings) -> FastAPI:
    """The service's app over ``settings``."""
    app = FastAPI(
        title="advisor",
        version=__version__,
        description="Where and how to train a model: machine, batch size, hyperparameters, "
        "with time and cost. Bearer token from `advisor token create NAME`.",
    )
    bearer = HTTPBearer(auto_error=False)
    storage = settings.storage
    api.prepare_storage(storage)

    async def caller(
        creds: HTTPAuthorizationCredentials | None = Depends(bearer),
    ) -> str:
        token = creds.credentials if creds is not None else None
        name = await run_in_threadpool(auth.verify, storage, token)
        if name is None:
            raise HTTPException(
                401,
                "missing, unknown or revoked token; create one with `advisor token create NAME`",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return name

    @app.exception_handler(AdvisorError)
    async def _advisor_error(_req: Request, exc: AdvisorError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=400)

    @app.exception_handler(SQLAlchemyError)
    async def _storage_error(_req: Request, exc: SQLAlchemyError) -> JSONResponse:
        # Disk full, database restarting: say so (503), without the SQL or the URL.
        orig = getattr(exc, "orig", None) or exc
        first = str(orig).strip().splitlines()[0][:120] if str(orig).strip() else ""
        return JSONResponse(
            {
                "detail": f"the study storage failed ({type(orig).__name__}: {first}); "
                "finished work is kept, try again later"
            },
            status_code=503,
            headers={"Retry-After": "5"},
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(_req: Request, exc: RequestValidationError) -> JSONResponse:
        # The submitted values are not echoed back (they may hold a secret by mistake).
        errors = [
            {
                "field": ".".join(str(p) for p in e.get("loc", ()) if p != "body"),
                "problem": e["msg"],
            }
            for e in exc.errors()
        ]
        return JSONResponse({"detail": errors}, status_code=422)

    @app.get("/health")
    async def health() -> dict[str, str]:
        """Liveness (no token needed)."""
        return {"status": "ok", "version": __version__}

    @app.post("/v1/suggestions", status_code=202)
    async def start_suggestion(body: SuggestRequest, who: str = Depends(caller)) -> dict[str, Any]:
        """Queue a suggestion; poll /v1/jobs/{id} for its progress and report."""
        request = body.model_dump(exclude_defaults=True)
        request.setdefault("model", body.model)
        job_id, created = await run_in_threadpool(jobs.submit, storage, "suggest", request, who)
        if created:
            settings.dispatcher.dispatch(job_id)
        return {"id": job_id, "created": created, "poll": f"/v1/jobs/{job_id}"}

    @app.get("/v1/jobs/{job_id}")
    async def job(job_id: str, _who: str = Depends(caller)) -> dict[str, Any]:
        """A job's status, progress, result (the report) or error."""
        if not _JOB_ID.match(job_id):
            raise HTTPException(422, "a job id is 32 hexadecimal characters")
        found = await run_in_threadpool(jobs.get, storage, job_id)
        if found is None:
            raise HTTPException(404, "no job with that id")
        return found

    @app.get("/v1/studies")
    async def studies(_who: str = Depends(caller)) -> list[dict[str, Any]]:
        """Studies in the storage."""
        return await run_in_threadpool(api.list_studies, storage)

    @app.get("/v1/studies/{name}")
    async def study(name: str, _who: str = Depends(caller)) -> dict[str, Any]:
        """One study with its trials."""
        try:
            check_name(name)
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from exc
        found = await run_in_threadpool(api.read_study, storage, name)
        if found is None:
            raise HTTPException(404, "no study by that name")
        return found

    @app.post("/v1/predict")
    async def predict(body: PredictRequest, _who: str = Depends(caller)) -> dict[str, Any]:
        """Predict time and cost on catalog machines from an uploaded probe (arithmetic only)."""
        return await run_in_threadpool(api.predict, body.model_dump())

    @app.get("/v1/catalog")
    async def catalog(
        provider: list[str] = Query([]),
        service: list[str] = Query([]),
        accelerator: list[str] = Query([]),
        max_price: float | None = Query(None, gt=0),
        spot: bool = False,
        snapshot: str | None = Query(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"),
        _who: str = Depends(caller),
    ) -> dict[str, Any]:
        """Priced catalog rows."""
        filters = {
            "providers": provider,
            "services": service,
            "accelerators": accelerator,
            "max_price": max_price,
            "spot": spot,
            "snapshot": snapshot,
        }
        return await run_in_threadpool(api.catalog_rows, filters)

    # -- managed tuning jobs (advisor.tuning.jobs), with the server's cloud credentials ------

    @app.post("/v1/tuning/plan")
    async def tuning_plan(body: TuningPlanRequest, _who: str = Depends(caller)) -> dict[str, Any]:
        """The job ``advisor submit`` would send: its spec and the provider's exact request."""
        return await run_in_threadpool(api.plan_tuning, body.model_dump(), storage)

    @app.post("/v1/tuning/jobs")
    async def tuning_submit(
        body: TuningSubmitRequest, _who: str = Depends(caller)
    ) -> dict[str, Any]:
        """Submit the job (``dry_run``: return the exact request, send nothing)."""
        return await run_in_threadpool(api.submit_tuning, body.model_dump(), storage)

    @app.get("/v1/tuning/jobs/{job}")
    async def tuning_status(
        job: str,
        provider: str = Query(..., pattern="^(sagemaker|vertex|azureml)$"),
        region: str | None = None,
        project: str | None = None,
        location: str | None = None,
        subscription: str | None = None,
        resource_group: str | None = None,
        workspace: str | None = None,
        _who: str = Depends(caller),
    ) -> dict[str, Any]:
        """The tuning job's state and trial counts."""
        given = {
            "region": region,
            "project": project,
            "location": location,
            "subscription": subscription,
            "resource_group": resource_group,
            "workspace": workspace,
        }
        target = _tuning_target(job, provider, {k: v for k, v in given.items() if v})
        return await run_in_threadpool(api.tuning_status, job, target)

    @app.post("/v1/tuning/jobs/{job}/import")
    async def tuning_import(
        job: str, body: TuningImportRequest, _who: str = Depends(caller)
    ) -> dict[str, Any]:
        """Add the job's finished trials to the study (importing again adds none)."""
        _tuning_target(job, body.provider, body.provider_options)
        return await run_in_threadpool(api.import_tuning, job, body.model_dump(), storage)

    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(AccessLog)
    return app


def _tuning_target(job: str, provider: str, options: dict[Any, str]) -> dict[str, Any]:
    """The provider and its options, checked as a request body is (422 otherwise)."""
    from pydantic import ValidationError

    if not _TUNING_JOB.match(job):
        raise HTTPException(422, "a tuning job is a provider's job name or id")
    try:
        return TuningTarget(provider=provider, provider_options=options).model_dump()
    except ValidationError as exc:
        raise HTTPException(422, str(exc).splitlines()[0]) from exc
