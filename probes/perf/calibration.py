"""Predicted vs measured steady iterations, stored side by side, and the correction they imply.

When a real result comes back (a remote probe, a finished run), ``record_measurement`` keeps
``(workload, batch, machine, device class, predicted t2, measured t2)`` in
``$ADVISOR_HOME/calibration.json``. ``calibration_factor`` is the geometric mean of
measured / predicted for a device class (an accelerator name, or "cpu"), preferring records
of the same workload; the model multiplies its prediction by it and narrows its interval.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from advisor.config import home


def calibration_path() -> Path:
    """Where the calibration records live."""
    return home() / "calibration.json"


@dataclass(frozen=True)
class CalibrationRecord:
    """One predicted/measured pair of steady iteration times (seconds)."""

    workload: str
    batch_size: int
    machine: str
    device_class: str
    predicted_t2: float
    measured_t2: float
    recorded_at: float = 0.0
    origin: str = ""

    def __post_init__(self) -> None:
        if self.predicted_t2 <= 0 or self.measured_t2 <= 0:
            raise ValueError(
                f"times must be > 0, but got predicted_t2={self.predicted_t2}, "
                f"measured_t2={self.measured_t2}"
            )

    @property
    def ratio(self) -> float:
        return self.measured_t2 / self.predicted_t2


@dataclass(frozen=True)
class CalibrationFactor:
    """The correction for one device class: ``factor`` (measured / predicted, geometric
    mean), ``points`` used and ``spread`` (geometric standard deviation, >= 1)."""

    factor: float = 1.0
    points: int = 0
    spread: float = 1.0

    def narrowed(self, model_factor: float) -> float:
        """The model's interval factor after calibration: the prior width shrinks with the
        number of points, the observed spread of the ratios is added back."""
        if self.points == 0:
            return model_factor
        prior = math.log(model_factor) ** 2 / (1 + self.points)
        return math.exp(math.sqrt(prior + math.log(self.spread) ** 2))


def load_records(path: Path | None = None) -> list[CalibrationRecord]:
    """All stored records (none if the file does not exist)."""
    path = path or calibration_path()
    if not path.exists():
        return []
    data: list[dict[str, Any]] = json.loads(path.read_text())
    return [CalibrationRecord(**row) for row in data]


def record_measurement(
    workload: str,
    batch_size: int,
    machine: str,
    device_class: str,
    predicted_t2: float,
    measured_t2: float,
    origin: str = "",
    path: Path | None = None,
) -> CalibrationRecord:
    """Store one predicted/measured pair and return it."""
    path = path or calibration_path()
    record = CalibrationRecord(
        workload, batch_size, machine, device_class, predicted_t2, measured_t2, time.time(), origin
    )
    records = [*load_records(path), record]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps([asdict(r) for r in records], indent=1))
    tmp.replace(path)
    return record


def calibration_factor(
    device_class: str, workload: str | None = None, path: Path | None = None
) -> CalibrationFactor:
    """Geometric-mean correction for ``device_class``; records of ``workload`` are used when
    there are any, else all records of the device class. No records: factor 1."""
    records = [r for r in load_records(path) if r.device_class.lower() == device_class.lower()]
    same = [r for r in records if workload is not None and r.workload == workload]
    chosen = same or records
    if not chosen:
        return CalibrationFactor()
    logs = [math.log(r.ratio) for r in chosen]
    mean = sum(logs) / len(logs)
    var = sum((x - mean) ** 2 for x in logs) / (len(logs) - 1) if len(logs) > 1 else 0.0
    return CalibrationFactor(math.exp(mean), len(logs), math.exp(math.sqrt(var)))
