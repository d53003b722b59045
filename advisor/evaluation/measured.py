"""How a run time measured by a remote probe enters a local back end's answer (issue #14): its
label, the lookup the back end is given, and what a run time records of the job. An emulated
probe (the job ran here, through the local emulation) is labelled as such. The lookup itself
(reading the remote probe cache) is ``advisor.remote.measured.remote_lookup``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from advisor.evaluation.workload import WorkloadInfo
from advisor.providers.catalog import InstanceType

# How a run time is known when a remote probe measured it (RunTime.source, the report's column).
REMOTE_SOURCE = "measured (remote probe)"
EMULATED_SOURCE = "emulated (local stand-in)"
# (workload, machine, batch, runtime hps) -> the cached remote probe (advisor.remote.cache's
# RemoteProbe: machine, result, job, cached, emulated) or None.
RemoteLookup = Callable[[WorkloadInfo, InstanceType, int, dict[str, Any]], Any]


def remote_summary(remote: Any) -> dict[str, Any]:
    """What a run time measured by a remote probe records of its job: id, service, state,
    wall and billed seconds, cost, and whether it was emulated here."""
    job = remote.job.to_dict() if hasattr(remote.job, "to_dict") else dict(remote.job)
    keep = (
        "job_id", "service", "state", "wall_s", "billed_s", "billed_source", "cost_usd",
        "before_start_s", "on_machine_s",
    )  # fmt: skip
    return {
        "machine": remote.machine,
        "emulated": bool(remote.emulated),
        **{k: job.get(k) for k in keep},
    }


def measured_overheads(
    remote: Any, instance: InstanceType, data_bytes: float = 0.0, data_basis: str = ""
) -> Any:
    """Issue #27: the start-up terms of a run on ``instance`` with the start-up its remote
    probe job measured in place of the service's priors (``providers.overheads
    .measured_startup``): provisioning (submission to the job's start on the machine) and the
    billed time on the machine that was not the probe (image pull, container start, upload).
    None -- the priors stay -- for an emulated job, a job that did not say when it started,
    or a machine whose own service is not the job's (a VM's probe runs on its managed
    service, whose start-up is not the VM's)."""
    if remote is None or remote.emulated:
        return None
    job = remote.job.to_dict() if hasattr(remote.job, "to_dict") else dict(remote.job)
    before, on_machine = job.get("before_start_s"), job.get("on_machine_s")
    if before is None or on_machine is None or job.get("service") != instance.service:
        return None
    from advisor.providers.overheads import measured_startup, run_overheads

    probe_s = max(float(remote.result.wall_s or 0.0), 0.0)
    base = run_overheads(instance, data_bytes, data_basis)
    return measured_startup(
        base, float(before), max(float(on_machine) - probe_s, 0.0), str(job.get("job_id"))
    )
