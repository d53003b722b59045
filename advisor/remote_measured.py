"""Remote probes as the local back end uses them (issue #14): how a run time measured by one
is labelled, finding the ones cached in the study storage, and what a run time records of the
job. An emulated probe (the job ran here, through the local emulation) is labelled as such."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from advisor.providers.catalog import InstanceType
from advisor.scoring import WorkloadInfo

if TYPE_CHECKING:
    from optuna.storages import BaseStorage

# How a run time is known when a remote probe measured it (RunTime.source, the report's column).
REMOTE_SOURCE = "measured (remote probe)"
EMULATED_SOURCE = "emulated (local stand-in)"
# (workload, machine, batch, runtime hps) -> the cached remote probe (advisor.remote_probe's
# RemoteProbe: machine, result, job, cached, emulated) or None.
RemoteLookup = Callable[[WorkloadInfo, InstanceType, int, dict[str, Any]], Any]


def remote_lookup(
    storage: str | BaseStorage, iterations: int, emulated: bool = False
) -> RemoteLookup:
    """Finds remote probes cached in ``storage`` (``advisor.remote_probe``): a real one, else,
    when ``emulated``, an emulated one. The cache's keys are read once, then only hits are."""
    from advisor.remote_probe_cache import REMOTE_PROBE_STUDY, RemoteProbeCache, remote_probe_key

    cache: list[Any] = []  # (RemoteProbeCache, its keys), made on first use

    def lookup(
        workload: WorkloadInfo, machine: InstanceType, batch: int, hps: dict[str, Any]
    ) -> Any:
        if not cache:
            import optuna

            # One lookup by name (issue #30: a summary of every study grew with them).
            rdb = optuna.storages.get_storage(storage)
            try:
                keys = set(rdb.get_study_user_attrs(rdb.get_study_id_from_name(REMOTE_PROBE_STUDY)))
            except KeyError:
                keys = set()
            cache.append((RemoteProbeCache(storage) if keys else None, keys))
        store, keys = cache[0]
        for emu in (False, True) if emulated else (False,):
            key = remote_probe_key(machine.key, workload, batch, iterations, hps or None, emu)
            if key in keys:
                hit = store.get(key)  # a success or a lasting failure (transient: None)
                if hit is not None:
                    return hit
        return None

    return lookup


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
