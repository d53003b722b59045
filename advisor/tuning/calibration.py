"""Imported tuning trials into the calibration ledger (issue #14, section 4).

Each trial of a managed tuning job that ran ``advisor.train`` reports ``step_s``, the measured
median seconds per training step of its last epoch (steps 2..n). ``advisor import`` records it
next to what the performance model predicts for that machine and batch from the study's local
probe (``advisor.prediction.timing.model.record_run``, origin ``tuning-trial``), in the study's own
storage; later predictions for that device class are corrected by it, with the evidence shown
(``advisor calibration`` lists the records).

A trial is not recorded, and the reason is counted, when it has no measured step time (Vertex
keeps only the objective metric; an older image), when it failed, when its machine is not in
the catalog or has several GPUs (the model predicts a data-parallel step; ``advisor.train``'s
distributed step is not that measurement), or when the study's storage holds no local probe of
its workload at its batch size (``advisor suggest`` probes it).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from advisor.probes.result import ProbeResult
from advisor.providers.tuning import TrialResult

if TYPE_CHECKING:
    import optuna

    from advisor.providers.catalog import InstanceType

ORIGIN = "tuning-trial"


@dataclass
class TrialLedger:
    """Called by ``import_results`` for each newly imported trial: records its measured step
    time in the ledger at ``storage`` (an Optuna storage URL, the study's) or counts why not."""

    study: optuna.Study
    storage: str | None
    catalog: Any = None
    recorded: int = 0
    skipped: collections.Counter[str] = field(default_factory=collections.Counter)
    _probes: dict[int, ProbeResult | None] = field(default_factory=dict)

    def __call__(self, result: TrialResult, row: InstanceType | None, batch: int | None) -> None:
        reason = self._record(result, row, batch)
        if reason is None:
            self.recorded += 1
        else:
            self.skipped[reason] += 1

    def _record(
        self, result: TrialResult, row: InstanceType | None, batch: int | None
    ) -> str | None:
        from advisor.prediction.timing.model import record_run

        if result.step_s is None or result.step_s <= 0:
            return "no measured step time"
        if result.status == "failed":
            return "failed"
        if row is None:
            return "machine not in the catalog"
        if row.accelerator_count > 1:
            return "several GPUs"
        if not batch:
            return "batch size unknown"
        if self.storage is None:
            return "study storage unknown"
        if batch not in self._probes:
            self._probes[batch] = local_probe(self.study, self.storage, batch)
        probe = self._probes[batch]
        if probe is None:
            return f"no local probe at batch {batch}"
        if self.catalog is None:
            from advisor.providers.catalog import load

            self.catalog = load()
        record_run(
            probe, row, self.catalog, batch, result.step_s, ORIGIN, ledger_storage=self.storage
        )
        return None


def local_probe(study: optuna.Study, storage: str, batch: int) -> ProbeResult | None:
    """A successful local probe of ``study``'s workload at ``batch`` from the probe cache in
    ``storage`` (plain probes before those with runtime hyperparameters), or None."""
    from advisor.evaluation.local import ProbeCache

    workload, framework = study.user_attrs.get("workload"), study.user_attrs.get("framework")
    if not workload or not framework:
        return None
    cache = ProbeCache(storage)
    prefix = f"{workload}|{framework}|b{batch}|"
    # key: name|framework|b<batch>|<machine>|k<iterations>|<runtime hps>[|gns]
    cached: list[str] = cache.keys()
    for key in sorted((k for k in cached if k.startswith(prefix)), key=len):
        probe = cache.get(key)
        if probe is not None and probe.ok:
            return probe
    return None


def storage_url(study: optuna.Study, storage: str | None) -> str | None:
    """The URL of the storage ``study`` lives in: ``storage`` when given, else the URL of
    Optuna's RDB storage behind the study (None when it has none, e.g. in memory)."""
    if storage is not None:
        return storage
    backend = getattr(study, "_storage", None)  # Optuna keeps the RDBStorage in a cache layer
    url = getattr(getattr(backend, "_backend", backend), "url", None)
    return url if isinstance(url, str) else None
