"""The FastAPI application of ``advisor serve`` (OpenAPI schema at /openapi.json, docs at /docs).

Every endpoint but ``/health`` needs ``Authorization: Bearer TOKEN`` (``advisor token create``).
A token belongs to a team, which sees only its own jobs and studies (another team's get 404).
Long work (suggestions) is queued as a job and run by a worker; the request returns its id.
Listings are pages (``limit``, ``after``) with a ``Link: <...>; rel="next"`` header.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from fastapi import Depends, FastAPI, HTTPException, Query, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from advisor import __version__
from advisor.service import api, auth, fencing, hardware, jobs, studies, teams, tuning_api
from advisor.service.middleware import AccessLog, BodyLimit, install_error_handlers
from advisor.service.outages import describe, is_queue_error
from advisor.service.schemas import (
    MAX_USD,
    HardwareRequest,
    PredictRequest,
    SuggestRequest,
    TuningImportRequest,
    TuningPlanRequest,
    TuningSubmitRequest,
    TuningTarget,
    check_study,
)

MAX_BODY_BYTES = 1_000_000
PAGE_MAX = 500
log = logging.getLogger("advisor.service")
_JOB_ID = re.compile(r"^[0-9a-f]{32}$")
_TUNING_JOB = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,255}$")


@dataclass
class Settings:
    """What the app needs: the storage URL, how jobs are run, the body size limit."""

    storage: str
    dispatcher: Any
    max_body_bytes: int = MAX_BODY_BYTES


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
    fencing.install()  # before the request and job threads connect

    async def caller(
        creds: HTTPAuthorizationCredentials | None = Depends(bearer),
    ) -> auth.Caller:
        token = creds.credentials if creds is not None else None
        who = await run_in_threadpool(auth.verify, storage, token)
        if who is None:
            raise HTTPException(
                401,
                "missing, unknown or revoked token; create one with `advisor token create NAME`",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return who

    install_error_handlers(app)

    @app.get("/health")
    async def health() -> dict[str, str]:
        """Liveness (no token needed)."""
        return {"status": "ok", "version": __version__}

    @app.post("/v1/suggestions", status_code=202)
    async def start_suggestion(
        body: SuggestRequest, who: auth.Caller = Depends(caller)
    ) -> dict[str, Any]:
        """Queue a suggestion; poll /v1/jobs/{id} for its progress and report. Sending the
        same request again is safe: while its job is queued or running, that job is returned."""
        request = body.model_dump(exclude_defaults=True)
        request.setdefault("model", body.model)
        job_id, created = await run_in_threadpool(
            jobs.submit, storage, "suggest", request, who.name, who.team
        )
        if created:
            await run_in_threadpool(_dispatch, settings.dispatcher, job_id)
        return {"id": job_id, "created": created, "poll": f"/v1/jobs/{job_id}"}

    @app.get("/v1/jobs")
    async def job_list(
        response: Response,
        limit: int = Query(50, ge=1, le=PAGE_MAX),
        after: str | None = Query(None, pattern=_JOB_ID.pattern),
        who: auth.Caller = Depends(caller),
    ) -> list[dict[str, Any]]:
        """The team's jobs, newest first (a page; the next one is in the Link header)."""
        page = await run_in_threadpool(jobs.list_jobs, storage, who.team, limit, after)
        if len(page) == limit:
            _link_next(response, "/v1/jobs", limit, page[-1]["id"])
        return page

    @app.get("/v1/jobs/{job_id}")
    async def job(job_id: str, who: auth.Caller = Depends(caller)) -> dict[str, Any]:
        """A job's status, progress, result (the report) or error."""
        _check_job_id(job_id)
        found = await run_in_threadpool(jobs.get, storage, job_id, who.team)
        if found is None:
            raise HTTPException(404, "no job with that id")
        return found

    @app.post("/v1/jobs/{job_id}/retry", status_code=202)
    async def job_retry(job_id: str, who: auth.Caller = Depends(caller)) -> dict[str, Any]:
        """Queue a failed job again: its study resumes, finished trials are kept."""
        _check_job_id(job_id)
        found, why_not = await run_in_threadpool(jobs.retry, storage, job_id, who.team)
        if found is None and why_not is None:
            raise HTTPException(404, "no job with that id")
        if found is None:
            raise HTTPException(409, f"the job cannot be retried: {why_not}")
        if found["status"] == "queued":
            await run_in_threadpool(_dispatch, settings.dispatcher, job_id)
        return found

    @app.get("/v1/studies")
    async def study_list(
        response: Response,
        limit: int = Query(100, ge=1, le=PAGE_MAX),
        after: str | None = Query(None, max_length=128),
        who: auth.Caller = Depends(caller),
    ) -> list[dict[str, Any]]:
        """The team's studies by name (a page; the next one is in the Link header)."""
        page = await run_in_threadpool(studies.list_studies, storage, who.team, limit, after)
        if len(page) == limit:
            _link_next(response, "/v1/studies", limit, page[-1]["name"])
        return page

    @app.get("/v1/studies/{name}")
    async def study(name: str, who: auth.Caller = Depends(caller)) -> dict[str, Any]:
        """One of the team's studies with its trials."""
        try:
            check_study(name)
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from exc
        found = await run_in_threadpool(studies.read_study, storage, who.team, name)
        if found is None:
            raise HTTPException(404, "no study by that name")
        return found

    @app.post("/v1/predict")
    async def predict(body: PredictRequest, _who: auth.Caller = Depends(caller)) -> dict[str, Any]:
        """Predict time and cost on catalog machines from an uploaded probe (arithmetic only)."""
        return await run_in_threadpool(api.predict, body.model_dump())

    @app.get("/v1/catalog")
    async def catalog(
        provider: list[str] = Query([]),
        service: list[str] = Query([]),
        accelerator: list[str] = Query([]),
        max_price: float | None = Query(None, gt=0, le=MAX_USD, allow_inf_nan=False),
        spot: bool = False,
        snapshot: str | None = Query(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"),
        _who: auth.Caller = Depends(caller),
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

    # -- machines the team owns (issue #37): candidates of its suggestions only ------------

    @app.post("/v1/hardware", status_code=201)
    async def hardware_add(
        body: HardwareRequest, who: auth.Caller = Depends(caller)
    ) -> dict[str, Any]:
        """Add (or replace) a machine the team owns: a candidate of the team's suggestions,
        priced per hour of use by amortisation + energy (the formula is in the answer)."""
        return await run_in_threadpool(hardware.add, storage, who.team, body.model_dump())

    @app.get("/v1/hardware")
    async def hardware_list(who: auth.Caller = Depends(caller)) -> list[dict[str, Any]]:
        """The machines the team owns, with their price per hour of use."""
        found = await run_in_threadpool(hardware.machines, storage, who.team)
        return [hardware.describe(m) for m in found]

    @app.delete("/v1/hardware/{name}", status_code=204)
    async def hardware_remove(name: str, who: auth.Caller = Depends(caller)) -> Response:
        """Remove one of the team's machines."""
        if not await run_in_threadpool(hardware.remove, storage, who.team, name[:64]):
            raise HTTPException(404, "the team owns no machine by that name")
        return Response(status_code=204)

    # -- managed tuning jobs (advisor.tuning.jobs), with the server's cloud credentials ------

    @app.post("/v1/tuning/plan")
    async def tuning_plan(
        body: TuningPlanRequest, who: auth.Caller = Depends(caller)
    ) -> dict[str, Any]:
        """The job ``advisor submit`` would send: its spec and the provider's exact request."""
        request = _team_study(body.model_dump(), who.team)
        return await run_in_threadpool(tuning_api.plan_tuning, request, storage)

    @app.post("/v1/tuning/jobs")
    async def tuning_submit(
        body: TuningSubmitRequest, who: auth.Caller = Depends(caller)
    ) -> dict[str, Any]:
        """Submit the job (``dry_run``: return the exact request, send nothing)."""
        request = _team_study(body.model_dump(), who.team)
        return await run_in_threadpool(tuning_api.submit_tuning, request, storage)

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
        _who: auth.Caller = Depends(caller),
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
        return await run_in_threadpool(tuning_api.tuning_status, job, target)

    @app.post("/v1/tuning/jobs/{job}/import")
    async def tuning_import(
        job: str, body: TuningImportRequest, who: auth.Caller = Depends(caller)
    ) -> dict[str, Any]:
        """Add the job's finished trials to the team's study (importing again adds none)."""
        _tuning_target(job, body.provider, body.provider_options)
        request = _team_study(body.model_dump(), who.team)
        return await run_in_threadpool(tuning_api.import_tuning, job, request, storage)

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


def _team_study(request: dict[str, Any], team: str) -> dict[str, Any]:
    """``request`` with its ``study`` named as the team's study is stored."""
    if request.get("study"):
        request["study"] = teams.stored_name(team, request["study"])
    return request


def _check_job_id(job_id: str) -> None:
    if not _JOB_ID.match(job_id):
        raise HTTPException(422, "a job id is 32 hexadecimal characters")


def _link_next(response: Response, path: str, limit: int, after: str) -> None:
    """Point the response's Link header at the next page."""
    query = urlencode({"limit": limit, "after": after})
    response.headers["Link"] = f'<{path}?{query}>; rel="next"'


def _dispatch(dispatcher: Any, job_id: str) -> None:
    """Hand a queued job to the workers. When the queue is down the job stays queued in the
    database (it is already saved) and a sweeper hands it over once the queue is back."""
    try:
        dispatcher.dispatch(job_id)
    except Exception as exc:
        if not is_queue_error(exc):
            raise
        log.warning("job %s saved; %s: a sweeper will queue it", job_id, describe(exc))
