"""The performance model's output value and the interval arithmetic it uses."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from advisor.intervals import Interval
from advisor.probes.result import PhaseTimes


def combine(*factors: float) -> float:
    """Combine independent multiplicative uncertainties (each >= 1) in quadrature of logs."""
    return math.exp(math.sqrt(sum(math.log(max(1.0, f)) ** 2 for f in factors)))


def around(value: float, factor: float) -> Interval:
    """``value`` with the multiplicative interval ``[value / factor, value * factor]``."""
    factor = max(1.0, factor)
    return Interval(value, value / factor, value * factor)


@dataclass(frozen=True)
class Prediction:
    """A modelled (or measured) set of phase times for one machine, with its reasoning.

    ``kind`` is "measured", "same-cpu", "cpu", "gpu" or "tpu". ``breakdown`` holds the
    parts of the steady iteration in seconds (device, dispatch, input, allreduce, replica;
    a roofline's compute and memory); ``bottleneck`` names the limit. ``calibration`` is the applied
    measured/predicted correction factor (1.0 when none), ``calibration_evidence`` the
    ledger records behind it.
    """

    machine: str
    phases: PhaseTimes
    kind: str
    devices: int
    per_device_batch: int
    breakdown: dict[str, float] = field(default_factory=dict)
    bottleneck: str = ""
    calibration: float = 1.0
    calibration_points: int = 0
    calibration_evidence: str = ""  # the correction and the records behind it, one line
    # Issue #26: how an accelerator's device time was obtained (the kernel model's basis: fitted
    # on which GPUs, spec extrapolation), its notes, and the operators that dominate it
    # ((label, seconds per step, share), largest first).
    basis: str = ""
    basis_notes: tuple[str, ...] = ()
    top_operators: tuple[tuple[str, float, float], ...] = ()
    plan: str = ""  # issue #35: the training plan of an accelerator's step, in words

    def __post_init__(self) -> None:
        if self.devices < 1 or self.per_device_batch < 1:
            raise ValueError(
                f"devices and per_device_batch must be >= 1, but got devices={self.devices}, "
                f"per_device_batch={self.per_device_batch}"
            )

    @property
    def source(self) -> str:
        return self.phases.source

    def step_terms(self) -> dict[str, float] | None:
        """Issue #47: the steady step's terms in milliseconds (device, host dispatch, input,
        all-reduce shown, replica overhead) and the device count; None on a CPU."""
        if self.kind not in ("gpu", "tpu") or "device" not in self.breakdown:
            return None
        keys = ("device", "dispatch", "input", "allreduce", "replica")
        out = {k: 1e3 * float(self.breakdown.get(k, 0.0)) for k in keys}
        return {**out, "devices": float(self.devices), "t2": 1e3 * self.phases.t2.value}

    def to_dict(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "phases": self.phases.to_dict(),
            "kind": self.kind,
            "devices": self.devices,
            "per_device_batch": self.per_device_batch,
            "breakdown": dict(self.breakdown),
            "bottleneck": self.bottleneck,
            "calibration": self.calibration,
            "calibration_points": self.calibration_points,
            "calibration_evidence": self.calibration_evidence,
            "basis": self.basis,
            "basis_notes": list(self.basis_notes),
            "top_operators": [
                {"operator": o, "seconds": s, "share": f} for o, s, f in self.top_operators
            ],
            "plan": self.plan,
        }
