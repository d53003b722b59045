"""Predicted vs measured steady iterations, and the correction they imply for the next prediction.

When a real result comes back (a remote probe, an imported tuning trial, a local run),
``record_measurement`` appends ``(machine, workload signature, predicted t2, measured t2)`` to
the ledger (``timing.ledger``: a dedicated study in the advisor's Optuna storage).
``calibration_factor`` is the geometric mean of measured / predicted for a device class (an
accelerator name, or "cpu"), from the closest evidence there is: records of the same workload
signature, else of the same workload, else of any workload on that device class. The model
multiplies its prediction by it, narrows its interval, and shows the evidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.prediction.timing import ledger
from advisor.prediction.timing.ledger import CalibrationRecord

__all__ = [
    "CalibrationFactor",
    "CalibrationRecord",
    "calibration_factor",
    "load_records",
    "record_measurement",
]

SCOPES = ("same workload signature", "same workload", "same device class")


@dataclass(frozen=True)
class CalibrationFactor:
    """The correction for one device class: ``factor`` (measured / predicted, geometric
    mean), ``points`` used, ``spread`` (geometric standard deviation, >= 1), ``scope`` (which
    records were used, one of ``SCOPES``) and ``evidence`` (those records)."""

    factor: float = 1.0
    points: int = 0
    spread: float = 1.0
    scope: str = ""
    evidence: tuple[CalibrationRecord, ...] = ()

    def narrowed(self, model_factor: float) -> float:
        """The model's interval factor after calibration: the prior width shrinks with the
        number of points, the observed spread of the ratios is added back."""
        if self.points == 0:
            return model_factor
        prior = math.log(model_factor) ** 2 / (1 + self.points)
        return math.exp(math.sqrt(prior + math.log(self.spread) ** 2))

    def describe(self, limit: int = 3) -> str:
        """The correction and its evidence in one line ("" when there is none)."""
        if self.points == 0:
            return ""
        shown = "; ".join(r.describe() for r in self.evidence[-limit:])
        more = f"; +{self.points - limit} more" if self.points > limit else ""
        return (
            f"calibrated x{self.factor:.2f} (spread x/{self.spread:.2f}) from {self.points} "
            f"measured run(s), {self.scope}: {shown}{more}"
        )


def load_records(storage: str | None = None) -> list[CalibrationRecord]:
    """All stored records (none if nothing was ever recorded)."""
    return ledger.records(storage)


def record_measurement(
    workload: str,
    batch_size: int,
    machine: str,
    device_class: str,
    predicted_t2: float,
    measured_t2: float,
    origin: str = "",
    storage: str | None = None,
    signature: str = "",
    startup: tuple[float, float, float] | None = None,
) -> CalibrationRecord:
    """Store one predicted/measured pair in the ledger and return it. ``startup``: the
    measured run's (initialisation, first-iteration extra) and the local probe's
    initialisation, when a probe on the device measured them (``timing.startup`` reads them)."""
    init, warmup, host = startup if startup is not None else (None, None, None)
    record = CalibrationRecord(
        workload,
        batch_size,
        machine,
        device_class,
        predicted_t2,
        measured_t2,
        0.0,
        origin,
        signature,
        measured_init_s=init,
        measured_warmup_s=warmup,
        host_init_s=host,
    )
    return ledger.append(record, storage)


def calibration_factor(
    device_class: str,
    workload: str | None = None,
    storage: str | None = None,
    signature: str | None = None,
    records: list[CalibrationRecord] | None = None,
) -> CalibrationFactor:
    """Geometric-mean correction for ``device_class`` from the closest records: same
    ``signature``, else same ``workload``, else the whole device class. None: factor 1.
    ``records``: the ledger's, already read (default: read from ``storage``)."""
    every = load_records(storage) if records is None else records
    records = [r for r in every if r.device_class.lower() == device_class.lower()]
    tiers = (
        [r for r in records if signature and r.signature == signature],
        [r for r in records if workload is not None and r.workload == workload],
        records,
    )
    found = next(((s, c) for s, c in zip(SCOPES, tiers, strict=True) if c), None)
    if found is None:
        return CalibrationFactor()
    scope, chosen = found
    logs = [math.log(r.ratio) for r in chosen]
    mean = sum(logs) / len(logs)
    var = sum((x - mean) ** 2 for x in logs) / (len(logs) - 1) if len(logs) > 1 else 0.0
    return CalibrationFactor(
        math.exp(mean), len(logs), math.exp(math.sqrt(var)), scope, tuple(chosen)
    )
