"""Remote probes cached in the study storage, found for the local back end (issue #14)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.evaluation.measured import RemoteLookup
from advisor.evaluation.workload import WorkloadInfo
from advisor.providers.catalog import InstanceType

if TYPE_CHECKING:
    from optuna.storages import BaseStorage


def remote_lookup(
    storage: str | BaseStorage, iterations: int, emulated: bool = False
) -> RemoteLookup:
    """Finds remote probes cached in ``storage`` (``advisor.remote.probe``): a real one, else,
    when ``emulated``, an emulated one. The cache's keys are read once, then only hits are."""
    from advisor.remote.cache import REMOTE_PROBE_STUDY, RemoteProbeCache, remote_probe_key

    cache: list[Any] = []  # (RemoteProbeCache, its keys), made on first use

    def lookup(
        workload: WorkloadInfo, machine: InstanceType, batch: int, hps: dict[str, Any]
    ) -> Any:
        if not cache:
            import optuna

            found = optuna.get_all_study_summaries(storage, include_best_trial=False)
            keys: set[str] = set()
            for summary in found:
                if summary.study_name == REMOTE_PROBE_STUDY:
                    keys = set(summary.user_attrs)
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
