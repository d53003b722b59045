"""Initialisation and first iteration on an accelerator: measured where a probe ran there.

A GPU run's ``init`` is this host's part (imports, data preparation, model build: the local
probe's measured initialisation, or a prior for a model traced without a local timing) plus
the device's own start-up (CUDA context, library load); its first iteration adds a warm-up
(cuBLAS/cuDNN handles and algorithm choice, kernel loading). The job's start-up before the
process runs -- provisioning or VM boot, image pull, container start -- is the service's
start-up terms (``providers.overheads``, measured by a remote probe job where one ran), priced
apart, never here.

The device's part comes from the calibration ledger when a remote probe on that device class
recorded it (``CalibrationRecord.measured_init_s`` / ``measured_warmup_s``, written by
``timing.model.calibrate_from``): the median over those records of the device probe's
initialisation less the local probe's, and of its first iteration's extra over the steady one.
Otherwise it is the generation's prior (``timing.constants.GENERATIONS``), said so in the note.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from advisor.intervals import Interval
from advisor.prediction.timing import constants as C
from advisor.prediction.timing.correction import load_records
from advisor.prediction.timing.ledger import CalibrationRecord

MEASURED_SPREAD = 1.5  # one remote probe is one draw of a varying start-up: x/1.5 beyond the range


@dataclass(frozen=True)
class DeviceStartup:
    """The device's own start-up (``cuda_init``) and first-iteration warm-up (``warmup``)
    in seconds, from ``points`` measured runs (0: the generation's priors), and how."""

    cuda_init: Interval
    warmup: Interval
    points: int
    note: str


def _span(values: list[float]) -> Interval:
    return Interval(
        statistics.median(values), min(values) / MEASURED_SPREAD, max(values) * MEASURED_SPREAD
    )


def _prior(value: float, factor: float) -> Interval:
    return Interval(value, value / factor, value * factor)


def device_startup(
    device_class: str,
    profile: C.GenerationProfile,
    storage: str | None = None,
    records: list[CalibrationRecord] | None = None,
) -> DeviceStartup:
    """The start-up of ``device_class`` (an accelerator name): measured by the ledger's
    remote probes on it (``records``, default: read from ``storage``), else priors."""
    if records is None:
        try:
            records = load_records(storage)
        except Exception:  # an unreadable ledger only means the priors
            records = []
    found = [
        r
        for r in records
        if r.device_class.lower() == device_class.lower()
        and r.measured_warmup_s is not None
        and r.measured_init_s is not None
    ]
    if not found:
        pf = profile.prior_factor
        return DeviceStartup(
            _prior(profile.cuda_init_s, pf),
            _prior(profile.warmup_s, pf),
            0,
            f"device start-up and first-iteration warm-up are priors ({profile.cuda_init_s:g} s "
            f"and {profile.warmup_s:g} s, x/{pf:g}; no remote probe on {device_class} in the "
            "ledger)",
        )
    init = [max(0.0, float(r.measured_init_s or 0) - float(r.host_init_s or 0)) for r in found]
    warm = [max(0.0, float(r.measured_warmup_s or 0)) for r in found]
    machines = ", ".join(sorted({r.machine for r in found})[:3])
    return DeviceStartup(
        _span(init),
        _span(warm),
        len(found),
        f"device start-up and first-iteration warm-up measured by {len(found)} remote "
        f"probe(s) on {device_class} ({machines}; calibration ledger)",
    )
