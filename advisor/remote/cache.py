"""Remote probe outcomes (issue #14): ``RemoteProbe`` and its cache in the study storage.

Remote probes cost money, so every outcome is kept in the study storage (any Optuna storage
URL) as user attributes of the study ``advisor-remote-probes``: key (``remote_probe_key``) ->
{"result", "job", "runner", "at", "calibration", "machine", "source"}.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from advisor.evaluation.failures import TRANSIENT_FAILURES
from advisor.evaluation.workload import WorkloadInfo
from advisor.probes.result import ProbeResult
from advisor.providers.probe_jobs import ProbeJobOutcome

if TYPE_CHECKING:
    from optuna.storages import BaseStorage

REMOTE_PROBE_STUDY = "advisor-remote-probes"


@dataclass(frozen=True)
class RemoteProbe:
    """A probe measured on ``machine`` (a catalog key) by a managed job, or emulated here
    (``job["service"] == "local"``: this machine's timings, labelled so). ``job`` is the
    ``ProbeJobOutcome`` (or its dict when cached): wall_s, billed_s, billed_source, cost_usd,
    job_id, state. ``calibration`` is measured/predicted when it was put in the ledger."""

    machine: str
    result: ProbeResult
    job: ProbeJobOutcome | dict[str, Any]
    cached: bool
    calibration: float | None = None

    @property
    def job_info(self) -> dict[str, Any]:
        return self.job.to_dict() if isinstance(self.job, ProbeJobOutcome) else dict(self.job)

    @property
    def emulated(self) -> bool:
        """True when the job ran on this machine (the ``local`` back end), not on ``machine``."""
        return self.job_info.get("service") == "local"

    @property
    def source(self) -> str:
        """Either "measured" (on the machine) or "emulated" (this machine's timings)."""
        return "emulated" if self.emulated else "measured"

    def to_dict(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "source": self.source,
            "cached": self.cached,
            "job": self.job_info,
            "calibration": self.calibration,
            "result": self.result.to_dict(),
        }


def remote_probe_key(
    machine_key: str,
    workload: WorkloadInfo,
    batch_size: int,
    iterations: int = 8,
    hps: Mapping[str, Any] | None = None,
    emulated: bool = False,
) -> str:
    """The cache key of a remote probe (``|emulated`` for the local back end)."""
    hp = json.dumps(dict(hps), sort_keys=True) if hps else ""
    return (
        f"{machine_key}|{workload.name}|{workload.framework}|b{batch_size}|k{iterations}|{hp}"
        + ("|emulated" if emulated else "")
    )


class RemoteProbeCache:
    """Remote probe outcomes in the study storage: user attributes of ``REMOTE_PROBE_STUDY``,
    key -> {"result", "job", "runner", "at", "calibration"}."""

    def __init__(self, storage: str | BaseStorage | None) -> None:
        import optuna

        from advisor.config import default_storage_url
        from advisor.storage.urls import open_storage

        optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "study created" lines
        url = storage or default_storage_url()
        self._storage = open_storage(url) if isinstance(url, str) else url
        study = optuna.create_study(
            study_name=REMOTE_PROBE_STUDY, storage=self._storage, load_if_exists=True
        )
        self._study_id = study._study_id

    def get(self, key: str, since: float | None = None) -> RemoteProbe | None:
        """The cached probe; a transient failure only when written at or after ``since``."""
        value = self._storage.get_study_user_attrs(self._study_id).get(key)
        if not isinstance(value, dict):
            return None
        try:
            result = ProbeResult.from_dict(value["result"])
        except (KeyError, TypeError, ValueError):  # a corrupt entry: probe again, overwrite it
            return None
        if result.status in TRANSIENT_FAILURES and (since is None or value["at"] < since):
            return None
        return RemoteProbe(value["machine"], result, value["job"], True, value.get("calibration"))

    def put(self, key: str, probe: RemoteProbe, runner: str) -> None:
        value = {**probe.to_dict(), "runner": runner, "at": time.time()}
        value.pop("cached")
        self._storage.set_study_user_attr(self._study_id, key, value)
