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
