"""Remote probes (issue #14): the same probe as a local one, run as a short managed training
job on the candidate machine, cached in the study storage and recorded in the ledger.

- ``probe_command(request)``: the exact job command, ``python -m advisor.probes.job_entry
  --request <JSON>`` (the JSON in pieces of at most 200 characters: SageMaker takes 256 per
  argument; the entry joins them).
- ``runner_for(machine, settings)``: the provider's job runner (SageMaker, Vertex AI, Azure
  ML; ``emulate=True``: the ``local`` back end, which runs the job command on this machine).
- ``remote_probe(...)``: run it (or return it from the cache), as a ``RemoteProbe``: the
  measured ``ProbeResult`` and the job's own wall time, billed time and cost.
- ``cached_remote_probe(...)``: the cached one, or None; starts nothing.

Remote probes cost money, so every outcome is kept in the study storage (any Optuna storage
URL) as user attributes of the study ``advisor-remote-probes``, keyed by machine, workload,
framework, batch size, iterations and runtime hyperparameters (and ``|emulated`` for the
local back end, so an emulation never stands in for the real machine). Failures are kept
too, by ``advisor.evaluation.local``'s rule: out of memory and NaN for good, other failures
(error, time-out, a stopped job) only for callers that started before they were written
(``since``), retried afterwards.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from advisor.errors import AdvisorError
from advisor.evaluation.workload import WorkloadInfo
from advisor.probes.result import ProbeRequest, ProbeResult, ProbeStatus
from advisor.providers import registry
from advisor.providers.catalog import InstanceType
from advisor.providers.probe_jobs import JobPoll, ProbeJobOutcome, ProbeJobRunner, ProbeJobSpec
from advisor.providers.probe_jobs import job_command as _service_command
from advisor.remote.cache import (
    REMOTE_PROBE_STUDY,
    RemoteProbe,
    RemoteProbeCache,
    remote_probe_key,
)
from advisor.remote.settings import CloudSettings, provider_of
from advisor.storage.locks import file_lock

ENTRY: tuple[str, ...] = ("python", "-m", "advisor.probes.job_entry")
ARG_PIECE = 200  # characters per --request piece (SageMaker: at most 256 per argument)
STARTUP_S = 600  # the job's time limit on top of the probe's time-out: image pull, imports
_JOB_STATUS: dict[str, ProbeStatus] = {"timeout": "timeout", "stopped": "timeout"}


def probe_request(
    workload: WorkloadInfo,
    batch_size: int,
    *,
    iterations: int = 8,
    max_probe_s: float | None = 4.0,
    hps: Mapping[str, Any] | None = None,
    timeout_s: float = 300.0,
    noise: bool = False,
) -> ProbeRequest:
    """The request a remote probe runs: the local probe's settings, ``device="auto"`` (the
    machine's GPU when it has one), all its cores."""
    return ProbeRequest(
        workload=workload.name,
        batch_size=batch_size,
        framework=workload.framework,
        iterations=iterations,
        device="auto",
        hyperparameters=dict(hps or {}),
        timeout_s=timeout_s,
        max_seconds=max_probe_s,
        gradient_noise=noise,
    )


def probe_command(request: ProbeRequest, service: str | None = None) -> tuple[str, ...]:
    """The exact job command for ``request`` (with ``service``'s output argument: Azure ML's
    ``--out ${{outputs.result}}``)."""
    local = ("process_start", "process_cpu_start")  # this process's clocks, not the job's
    data = {k: v for k, v in json.loads(request.to_json()).items() if k not in local}
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    pieces = tuple(text[i : i + ARG_PIECE] for i in range(0, len(text), ARG_PIECE))
    command = (*ENTRY, "--request", *pieces)
    return _service_command(command, service) if service else command


def runner_for(
    machine: InstanceType, settings: CloudSettings, emulate: bool = False, poll_s: float = 15.0
) -> ProbeJobRunner:
    """The job runner for ``machine``'s provider, configured from ``settings``; with
    ``emulate`` the ``local`` back end in that provider's layout. One-line ``AdvisorError``
    for this machine, a provider without a managed service, or one not configured."""
    if machine.provider == "local":
        raise AdvisorError(
            "This machine needs no remote probe.", "probe it locally with `advisor probe`."
        )
    provider = provider_of(machine.service)
    if provider is None:
        raise AdvisorError(
            f"No managed service runs probe jobs on {machine.key}.",
            "pick a sagemaker/ec2, vertex/compute-engine or azure-ml/azure-vm machine.",
        )
    if emulate:
        from advisor.providers.probe_jobs_local import LocalJobRunner

        return LocalJobRunner(registry.get(provider).managed_service)
    from advisor.providers.backends import probe_runner

    return probe_runner(provider, settings.provider(provider), poll_s)


def cached_remote_probe(
    storage: str | None,
    workload: WorkloadInfo,
    machine_key: str,
    batch_size: int,
    *,
    iterations: int = 8,
    hps: Mapping[str, Any] | None = None,
    emulated: bool = False,
    since: float | None = None,
) -> RemoteProbe | None:
    """The remote probe already paid for with these settings, or None (starts nothing)."""
    key = remote_probe_key(machine_key, workload, batch_size, iterations, hps, emulated)
    return RemoteProbeCache(storage).get(key, since)


def remote_probe(
    workload: WorkloadInfo,
    machine: InstanceType,
    batch_size: int,
    *,
    storage: str | None,
    settings: CloudSettings,
    runner: ProbeJobRunner | None = None,
    iterations: int = 8,
    max_probe_s: float | None = 4.0,
    timeout_s: float = 300.0,
    hps: Mapping[str, Any] | None = None,
    local_probe: ProbeResult | None = None,
    catalog: Any = None,
    on_status: Callable[[str], None] | None = None,
    spot: bool = False,
    since: float | None = None,
    record_emulated: bool = False,
) -> RemoteProbe:
    """Probe ``workload`` at ``batch_size`` on ``machine`` in a managed job (cached).

    With ``local_probe`` (this machine's probe of the same work), a successful new probe is
    put in the calibration ledger (same storage), so that the next prediction for similar
    work on that device class is corrected by it. An emulated probe is NOT recorded unless
    ``record_emulated``: its times are this machine's, and recording them as the named
    machine's would poison the ledger. Nor is a probe on a multi-accelerator machine: the
    probe times one device at the full batch, the model predicts data-parallel steps.
    """
    runner = runner or runner_for(machine, settings)
    emulated = runner.name == "local"
    key = remote_probe_key(machine.key, workload, batch_size, iterations, hps, emulated)
    cache = RemoteProbeCache(storage)
    hit = cache.get(key, since)
    if hit is not None:
        return hit
    # One job per key from this host: a second process waits, then reads the first's result.
    with file_lock(_lock_path(key)):
        hit = cache.get(key, since)
        if hit is not None:
            return hit
        return _run_job(
            workload, machine, batch_size, runner, key, cache, settings,
            iterations=iterations, max_probe_s=max_probe_s, timeout_s=timeout_s, hps=hps,
            local_probe=local_probe, catalog=catalog, on_status=on_status, spot=spot,
            record_emulated=record_emulated, storage=storage,
        )  # fmt: skip


def _lock_path(key: str) -> Any:
    import hashlib

    from advisor.config import home

    return home() / "locks" / f"remote-probe-{hashlib.sha1(key.encode()).hexdigest()[:16]}.lock"


def _run_job(
    workload: WorkloadInfo,
    machine: InstanceType,
    batch_size: int,
    runner: ProbeJobRunner,
    key: str,
    cache: RemoteProbeCache,
    settings: CloudSettings,
    *,
    iterations: int,
    max_probe_s: float | None,
    timeout_s: float,
    hps: Mapping[str, Any] | None,
    local_probe: ProbeResult | None,
    catalog: Any,
    on_status: Callable[[str], None] | None,
    spot: bool,
    record_emulated: bool,
    storage: str | None,
) -> RemoteProbe:
    """Start the job, wait for it, read its result, record it (ledger, then cache)."""
    emulated = runner.name == "local"
    if spot and machine.spot_usd_per_h is None:
        raise AdvisorError(f"{machine.key} has no spot price.", "probe it on demand.")
    request = probe_request(
        workload,
        batch_size,
        iterations=iterations,
        max_probe_s=max_probe_s,
        hps=hps,
        timeout_s=timeout_s,
    )
    image = (settings.image or "advisor:local") if emulated else _image(settings, machine)
    output = None if emulated else settings.providers.get(_provider(machine), {}).get("output")
    if catalog is None:
        from advisor.providers.catalog import load

        catalog = load()
    spec = ProbeJobSpec(
        job_name=job_name(workload.name, batch_size),
        machine=machine if emulated else job_machine(machine, catalog, spot),
        image=image,
        command=probe_command(request, runner.layout),
        max_runtime_s=int(timeout_s) + STARTUP_S,
        spot=spot,
        output=output,
    )
    started = time.time()

    def status(job_id: str, poll: JobPoll) -> None:
        if on_status is not None:
            on_status(f"{job_id}: {poll.state}, {time.time() - started:.0f} s")

    outcome = runner.run(spec, on_status=status)
    result = _result(outcome, request)
    calibration = None
    if (
        local_probe is not None
        and local_probe.ok
        and result.ok
        and (not emulated or record_emulated)
        and machine.accelerator_count <= 1
    ):
        from advisor.prediction.timing.model import calibrate_from

        origin = "remote-probe" if not emulated else "remote-probe (emulated, test)"
        calibration = calibrate_from(
            local_probe, result, machine, catalog, origin=origin, ledger_storage=storage
        )
    probe = RemoteProbe(machine.key, result, outcome, False, calibration)
    cache.put(key, probe, runner.name)
    return probe


def _result(outcome: ProbeJobOutcome, request: ProbeRequest) -> ProbeResult:
    """The job's probe result; a failed job (no or unreadable file) as a failed probe."""
    if outcome.result_text is not None:
        try:
            return ProbeResult.from_json(outcome.result_text)
        except (ValueError, TypeError) as exc:
            why = f"the job's result file is not a probe result: {exc}"
            return ProbeResult.failure(request, "error", why, outcome.wall_s)
    status = _JOB_STATUS.get(outcome.state, "error")
    why = f"{outcome.service} job {outcome.job_id} {outcome.state}: {outcome.error or 'no detail'}"
    return ProbeResult.failure(request, status, why, outcome.wall_s)


def job_machine(machine: InstanceType, catalog: Any, spot: bool = False) -> InstanceType:
    """The catalog row a probe job of ``machine`` is billed at: the managed service's row of
    the same machine (``ec2:g5.xlarge`` -> ``sagemaker:ml.g5.xlarge``, USD 1.408/h, not EC2's
    1.006), else ``machine`` itself when the catalog lists no such row."""
    provider = registry.for_service(machine.service)
    if provider is None or machine.service != provider.vm_service:
        return machine
    name = f"{provider.managed_service}:{provider.managed_type(machine.instance_type)}"
    try:
        row: InstanceType = catalog.get(name)
    except AdvisorError:
        return machine
    return machine if spot and row.spot_usd_per_h is None else row


def _provider(machine: InstanceType) -> str:
    return provider_of(machine.service) or ""


def _image(settings: CloudSettings, machine: InstanceType) -> str:
    return settings.image_for(_provider(machine))


def job_name(workload: str, batch_size: int) -> str:
    """A job name every service takes: ``advisor-probe-<workload>-b<batch>-<time>-<rand>``,
    letters, digits and dashes, at most 63 characters."""
    slug = re.sub(r"[^a-zA-Z0-9]+", "-", workload).strip("-")[:24] or "model"
    stamp = time.strftime("%m%d%H%M%S", time.gmtime())
    return f"advisor-probe-{slug}-b{batch_size}-{stamp}-{uuid.uuid4().hex[:4]}"[:63].rstrip("-")


__all__ = [
    "REMOTE_PROBE_STUDY",
    "RemoteProbe",
    "RemoteProbeCache",
    "cached_remote_probe",
    "probe_command",
    "probe_request",
    "remote_probe",
    "remote_probe_key",
    "runner_for",
]
