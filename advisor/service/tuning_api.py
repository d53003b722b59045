"""The service's adapter to managed tuning jobs (``advisor.tuning.jobs``): plan, submit, follow
and import a job with the server's own credentials."""

from __future__ import annotations

from typing import Any

from advisor.errors import AdvisorError
from advisor.service import db


def _tuning_backend(request: dict[str, Any]) -> Any:
    from advisor.tuning.jobs import make_backend

    return make_backend(request["provider"], **(request.get("provider_options") or {}))


def plan_tuning(request: dict[str, Any], storage: str) -> dict[str, Any]:
    """The provider-neutral spec of ``plan_job`` and the exact request the provider would get
    (what ``advisor submit --dry-run`` prints)."""
    backend = _tuning_backend(request)
    spec = _plan(backend, request, storage)
    return {
        "provider": backend.name,
        "spec": spec.to_dict(),
        "request": backend.build_request(spec),
        "notes": list(spec.notes),
    }


def _plan(backend: Any, request: dict[str, Any], storage: str) -> Any:
    from advisor.tuning.jobs import plan_job

    return plan_job(
        backend,
        study=request.get("study"),
        storage=db.optuna_url(storage),
        instances=request.get("instances") or (),
        model=request.get("model"),
        batch_size=request.get("batch_size"),
        epochs=request.get("epochs"),
        tune=request.get("tune"),
        strategy=request.get("strategy"),
        image=request.get("image"),
        **(request.get("options") or {}),
    )


def submit_tuning(request: dict[str, Any], storage: str) -> dict[str, Any]:
    """Plan and submit the job with the server's credentials; ``dry_run`` only plans it."""
    from advisor.tuning.jobs import submit_job

    if request.get("dry_run"):
        return {"dry_run": True, **plan_tuning(request, storage)}
    if not request.get("image"):
        raise AdvisorError("Submitting needs the container image.", "pass 'image'.")
    backend = _tuning_backend(request)
    spec = _plan(backend, request, storage)
    return {"dry_run": False, **submit_job(spec, backend).to_dict()}


def tuning_status(job: str, request: dict[str, Any]) -> dict[str, Any]:
    """``job_status``: the tuning job's state and trial counts."""
    from advisor.tuning.jobs import job_status

    return job_status(job, _tuning_backend(request))


def import_tuning(job: str, request: dict[str, Any], storage: str) -> dict[str, Any]:
    """``import_job``: the job's finished trials into the study (importing again adds none)."""
    from advisor.tuning.jobs import import_job

    summary = import_job(
        job, _tuning_backend(request), request["study"], storage=db.optuna_url(storage)
    )
    return summary.to_dict()
