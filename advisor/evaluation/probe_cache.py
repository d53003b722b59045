"""The local probe cache: probe results (each with its operator trace and loader time, issue
#26) and the traces of other per-device batches, kept in the study storage."""

from __future__ import annotations

import json
import os
import platform
from typing import TYPE_CHECKING, Any

from advisor.evaluation.failures import TRANSIENT_FAILURES
from advisor.evaluation.workload import WorkloadInfo
from advisor.probes.result import ProbeResult
from advisor.storage import transient

if TYPE_CHECKING:
    from optuna.storages import BaseStorage

    from advisor.probes.operators.types import OperatorTrace

TRACE_PREFIX = "trace|"  # prediction.step.traces.trace_key's keys
PROBE_CACHE_STUDY = "advisor-probe-cache"


# Which failures are reused. Every probe result is cached under its key with its status and
# one-line reason, so a failing configuration is tried once:
# - oom and nan are properties of the configuration on this machine (memory, numerics): kept
#   for good, like a timing.
# - error, timeout and killed come from the code (a bug the user may fix between runs), a busy
#   machine or a signal: they are reused within one study run -- by this process and by any
#   process that started before the failure was written -- and retried by the next run
#   (``get(key, since=run start)``). So a model that raises is probed once per batch size per
#   run, not once per machine x batch pair, and a fixed model is picked up on the next run.


class ProbeCache:
    """Probe results kept in the study storage (works with any Optuna storage URL).

    They live as user attributes of a dedicated study named ``advisor-probe-cache``: key ->
    ``ProbeResult.to_dict()``; a failure is stored as ``{"probe": ..., "at": unix time}`` so
    that transient failures can be told apart by age (see ``TRANSIENT_FAILURES``).
    """

    def __init__(self, storage: str | BaseStorage) -> None:
        import optuna

        from advisor.storage.urls import open_storage

        optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "study created" line (#36)
        # A URL is opened as the study storage is (created under its lock, SQLite busy wait).
        self._storage = open_storage(storage) if isinstance(storage, str) else storage
        study = optuna.create_study(
            study_name=PROBE_CACHE_STUDY, storage=self._storage, load_if_exists=True
        )
        self._study_id = study._study_id
        self._memo: dict[str, tuple[ProbeResult, float]] = {}

    def get(self, key: str, since: float | None = None) -> ProbeResult | None:
        """The cached probe; a transient failure only when written at or after ``since``."""
        if key not in self._memo:
            attrs = self._storage.get_study_user_attrs(self._study_id)
            if key not in attrs:
                return None
            value = attrs[key]
            if isinstance(value, dict) and "probe" in value:
                self._memo[key] = (ProbeResult.from_dict(value["probe"]), float(value["at"]))
            else:
                self._memo[key] = (ProbeResult.from_dict(value), 0.0)
        probe, at = self._memo[key]
        if probe.status in TRANSIENT_FAILURES and (since is None or at < since):
            del self._memo[key]
            return None
        return probe

    def put(self, key: str, probe: ProbeResult) -> None:
        import time

        at = time.time()
        value = probe.to_dict() if probe.ok else {"probe": probe.to_dict(), "at": at}
        # A finished probe is kept through a short outage where the caller asks for it.
        transient.write(lambda: self._storage.set_study_user_attr(self._study_id, key, value))
        self._memo[key] = (probe, at)

    def keys(self) -> list[str]:
        """The probes' keys (the traces kept beside them are left out)."""
        attrs = self._storage.get_study_user_attrs(self._study_id)
        return [k for k in attrs if not k.startswith(TRACE_PREFIX)]

    # Issue #26: operator traces at other per-device batches (``prediction.step.traces``), kept
    # beside the probes so a step is traced once per workload and batch size.
    def get_trace(self, key: str) -> OperatorTrace | None:
        """The trace kept under ``key`` (``prediction.step.traces.trace_key``), or None."""
        from advisor.probes.operators.types import OperatorTrace

        value = self._storage.get_study_user_attrs(self._study_id).get(key)
        if not isinstance(value, dict):
            return None
        try:
            return OperatorTrace.from_dict(value)
        except (KeyError, TypeError, ValueError):  # an unreadable entry is traced again
            return None

    def put_trace(self, key: str, trace: OperatorTrace) -> None:
        """Keep ``trace`` under ``key``."""
        self._storage.set_study_user_attr(self._study_id, key, trace.to_dict())

    # Issue #45: a plan's traced peak lines (``prediction.plan_memory``), JSON kept the same way.
    def get_data(self, key: str) -> dict[str, Any] | None:
        """The JSON object kept under ``key``, or None."""
        value = self._storage.get_study_user_attrs(self._study_id).get(key)
        return value if isinstance(value, dict) else None

    def put_data(self, key: str, value: dict[str, Any]) -> None:
        """Keep the JSON object ``value`` under ``key``."""
        self._storage.set_study_user_attr(self._study_id, key, value)


def machine_fingerprint(threads: int) -> str:
    """Identifies this machine and thread count in probe-cache keys."""
    return f"{platform.node()}/{platform.machine()}/{os.cpu_count()}cpu/{threads}t"


def probe_cache_key(
    workload: WorkloadInfo,
    batch_size: int,
    threads: int,
    iterations: int,
    runtime_hps: dict[str, Any],
    noise: bool = False,
) -> str:
    hp = json.dumps(runtime_hps, sort_keys=True) if runtime_hps else ""
    return (
        f"{workload.name}|{workload.framework}|b{batch_size}|{machine_fingerprint(threads)}"
        f"|k{iterations}|{hp}" + ("|gns" if noise else "")  # issue #19: with the noise scale
    )
