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
    keep = ("job_id", "service", "state", "wall_s", "billed_s", "billed_source", "cost_usd")
    return {
        "machine": remote.machine,
        "emulated": bool(remote.emulated),
        **{k: job.get(k) for k in keep},
    }
