"""Cross-device performance model: one local probe -> phase times on any catalog machine.

The measurement wins: for the local machine at the probed batch size and thread count the
measured phases are returned unchanged. Otherwise the model predicts, with an interval:

- CPU-only machines (and the local one at another batch/thread count): the local CPU time
  scaled by thread count (Amdahl) and per-core speed (``timing.cpu``);
- GPUs: the GPU kernel model's device time of the probe's operator trace at the per-device
  batch (``timing.device``, ``advisor.prediction.kernels``), with host dispatch counted in kernel
  launches, the input pipeline and data-parallel all-reduce (``timing.accel``); TPUs: a roofline
  over the same trace; init and first iteration measured on the device class where a remote
  probe ran there (``timing.startup``), else priors;
- then, if real results were recorded for that device class, a measured/predicted
  correction (``timing.correction``).

The CPU probe's timing never enters a GPU or TPU prediction; only its trace does (with the
loader time and the host initialisation measured here).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from advisor.errors import AdvisorError
from advisor.intervals import Interval
from advisor.prediction.step.placement import Placement, place
from advisor.prediction.step.plan import TrainingPlan
from advisor.prediction.step.rewrite import plan_step
from advisor.prediction.step.traces import TraceStore, step_trace
from advisor.prediction.timing import accel as perf_accel
from advisor.prediction.timing import cpu as perf_cpu
from advisor.prediction.timing.correction import (
    CalibrationFactor,
    CalibrationRecord,
    calibration_factor,
    load_records,
    record_measurement,
)
from advisor.prediction.timing.signature import (
    WorkloadSignature,
    is_untimed,
    signature,
    workload_signature,
)
from advisor.prediction.timing.types import Prediction, around
from advisor.probes.result import PhaseTimes, ProbeResult
from advisor.providers.catalog import AcceleratorSpec, InstanceType

__all__ = [
    "AcceleratorLookup",
    "Prediction",
    "calibrate_from",
    "device_class",
    "predict",
    "predict_phases",
    "record_measurement",
    "record_run",
]


class AcceleratorLookup(Protocol):
    """What the model needs from a catalog: accelerator specs by name."""

    def accelerator(self, name: str) -> AcceleratorSpec: ...


def device_class(machine: InstanceType) -> str:
    """The calibration class of a machine: its accelerator name, else "cpu"."""
    return machine.accelerator or "cpu"


def _measured(probe: ProbeResult) -> PhaseTimes:
    from advisor.prediction.run.iteration_model import phase_times

    return phase_times(probe)


def _calibrated(phases: PhaseTimes, cal: CalibrationFactor) -> PhaseTimes:
    if cal.points == 0:
        return phases
    k = cal.factor

    def rescale(iv: Interval) -> Interval:
        return around(iv.value * k, cal.narrowed(iv.high / iv.value if iv.value else 1.0))

    t2 = rescale(phases.t2)
    v2 = rescale(phases.v2)
    extra_t1 = phases.t2.value * (k - 1)
    extra_v1 = phases.v2.value * (k - 1)

    def shift(iv: Interval, extra: float) -> Interval:
        return Interval(iv.value + extra, max(0.0, iv.low + extra), max(0.0, iv.high + extra))

    return replace(
        phases,
        t1=shift(phases.t1, extra_t1),
        t2=t2,
        v1=shift(phases.v1, extra_v1),
        v2=v2,
        note=f"{phases.note} {cal.describe()[0].upper()}{cal.describe()[1:]}.",
    )


def _ledger(storage: str | None) -> list[CalibrationRecord] | None:
    """The ledger's records; None when it cannot be read (each reader then reads it itself:
    the start-up falls back to its priors, the calibration raises, as before)."""
    try:
        return load_records(storage)
    except Exception:
        return None


def predict(
    probe: ProbeResult,
    machine: InstanceType,
    catalog: AcceleratorLookup,
    batch_size: int | None = None,
    *,
    threads: int | None = None,
    strategy: str | None = None,
    parallel_fraction: float | None = None,
    calibrate: bool = True,
    ledger_storage: str | None = None,
    trace_store: TraceStore | None = None,
    plan: TrainingPlan | None = None,
    placement: Placement | None = None,
    nodes: int = 1,
) -> Prediction:
    """Predict (or, for the local machine at the probed setting, return the measured)
    phase times of ``probe``'s workload on ``machine`` at ``batch_size`` (default: the
    probe's). ``threads`` is the CPU thread count (local default: the probe's; cloud CPU
    default: its physical cores). ``strategy`` is "ddp" (one process per GPU), "dp"
    (one process drives all replicas) or None (the framework's usual: Keras "dp", torch
    "ddp"). ``parallel_fraction`` overrides the Amdahl prior. With ``calibrate`` the
    prediction is corrected by the ledger's measured runs on that device class
    (``ledger_storage``: an Optuna storage URL; default the advisor's SQLite file), and a
    device's start-up is taken from the remote probes recorded there. ``trace_store`` keeps
    the step traced at other per-device batches (the probe cache). ``plan``: the training plan
    an accelerator runs (``advisor.prediction.step.plan``; default float32, no accumulation,
    checkpointing or sharding): its step is traced at the micro-batch and rewritten under the
    plan (``advisor.prediction.step.rewrite``); a CPU ignores it. ``placement``: the row's
    split of the batch (``step.placement``; made here from ``batch_size``, ``plan`` and
    ``nodes`` when not given). ``nodes``: machines of this type joined by their network
    (issue #49; ``advisor.prediction.timing.nodes``); the batch is global, split over every
    GPU of every machine.
    """
    at = placement or place(machine, batch_size or probe.batch_size, plan, nodes)
    batch, plan = at.batch, at.plan
    sig: WorkloadSignature = signature(probe)
    local = machine.provider == "local"
    timed = not is_untimed(probe)
    if local and timed and batch == probe.batch_size and threads in (None, probe.threads):
        return Prediction(machine.key, _measured(probe), "measured", 1, batch)
    extra: dict[str, Any] = {}
    # the ledger read once for the start-up and the calibration (issue #46: twice a row)
    reads = calibrate and (machine.accelerator is not None or not local)
    records: list[CalibrationRecord] | None = _ledger(ledger_storage) if reads else []
    if machine.accelerator is None:
        phases, breakdown, kind = perf_cpu.predict_cpu(
            sig, machine, batch, threads=threads, parallel_fraction=parallel_fraction
        )
        if not timed:
            phases = _stand_in(phases)
        devices, per_device, neck = 1, batch, "cpu"
    else:
        from advisor.prediction.timing.startup import device_startup

        try:
            spec = catalog.accelerator(machine.accelerator)
        except (KeyError, LookupError) as exc:
            raise AdvisorError(
                f"No accelerator spec for '{machine.accelerator}' ({machine.key}).",
                "add it to the catalog's accelerator table.",
            ) from exc
        devices, per_device = at.devices, at.per_device
        if plan is not None and at.planned:
            plan.check(devices, sig.framework, strategy)
            step = step_trace(probe, at.micro, trace_store)
            step = plan_step(step, plan, at.shards) if step is not None else None
            extra["plan"] = plan.words(per_device)
        else:
            step = step_trace(probe, per_device, trace_store)
        profile = perf_accel.generation_profile(spec)
        startup = device_startup(device_class(machine), profile, ledger_storage, records)
        phases, breakdown, kind, neck, dev = perf_accel.predict_accelerator(
            sig, machine, spec, batch, step, startup, strategy=strategy, plan=plan, placement=at
        )
        extra.update(basis=dev.basis, basis_notes=dev.notes, top_operators=dev.top)
    cal = CalibrationFactor()
    if calibrate and not local:
        cal = calibration_factor(
            device_class(machine),
            probe.workload,
            ledger_storage,
            signature=workload_signature(probe),
            records=records,
        )
        phases = _calibrated(phases, cal)
    return Prediction(
        machine=machine.key,
        phases=phases,
        kind=kind,
        devices=devices,
        per_device_batch=per_device,
        breakdown=breakdown,
        bottleneck=neck,
        calibration=cal.factor,
        calibration_points=cal.points,
        calibration_evidence=cal.describe(),
        **extra,
    )


def _stand_in(phases: PhaseTimes) -> PhaseTimes:
    """A CPU prediction from a model traced without a local timing: its step is the trace's
    FLOPs at this CPU's measured product rate (a lower bound), so wider and said so."""
    from advisor.prediction.timing import constants as C
    from advisor.prediction.timing.types import around

    f = C.UNTIMED_CPU_FACTOR

    def widen(iv: Interval) -> Interval:
        return Interval(iv.value, iv.low / f, iv.high * f) if iv.value else iv

    return replace(
        phases,
        init=around(phases.init.value, C.UNTIMED_INIT_FACTOR),
        t1=widen(phases.t1),
        t2=widen(phases.t2),
        v1=widen(phases.v1),
        v2=widen(phases.v2),
        note=phases.note + " No local timing: the CPU step is a stand-in (the trace's FLOPs at "
        f"this CPU's measured matrix-product rate, a lower bound, x/{f:g}); init a prior.",
    )


def predict_phases(
    probe: ProbeResult,
    machine: InstanceType,
    catalog: AcceleratorLookup,
    batch_size: int | None = None,
    **options: object,
) -> PhaseTimes:
    """Phase times of ``probe``'s workload on ``machine`` (see ``predict``); source is
    "measured" only for the local machine at the probed batch and threads."""
    return predict(probe, machine, catalog, batch_size, **options).phases  # type: ignore[arg-type]


def calibrate_from(
    local_probe: ProbeResult,
    measured: ProbeResult,
    machine: InstanceType,
    catalog: AcceleratorLookup,
    origin: str = "remote-probe",
    ledger_storage: str | None = None,
) -> float:
    """Record a real result on ``machine`` (``measured``, e.g. a remote probe) next to what
    the model predicts for it from ``local_probe`` (uncalibrated); return measured/predicted."""
    if not measured.ok:
        raise AdvisorError(
            f"The measured probe on {machine.key} failed ({measured.status}).",
            "record only successful runs.",
        )
    from advisor.prediction.timing.signature import steady_stats

    measured_t2, _ = steady_stats(measured.iteration_s)
    startup = None
    if machine.accelerator is not None:  # issue #26: the device's measured start-up
        warmup = max(0.0, measured.iteration_s[0] - measured_t2)
        startup = (measured.init_s, warmup, local_probe.init_s)
    record = record_run(
        local_probe,
        machine,
        catalog,
        measured.batch_size,
        measured_t2,
        origin=origin,
        ledger_storage=ledger_storage,
        startup=startup,
    )
    return record.ratio


def record_run(
    local_probe: ProbeResult,
    machine: InstanceType,
    catalog: AcceleratorLookup,
    batch_size: int,
    measured_t2: float,
    origin: str,
    ledger_storage: str | None = None,
    startup: tuple[float, float, float] | None = None,
) -> CalibrationRecord:
    """Append a measured steady iteration (``measured_t2`` seconds at ``batch_size`` on
    ``machine``: a remote probe, an imported tuning trial's runtime divided by its
    iterations, a local run) to the ledger, next to the model's uncalibrated prediction
    from ``local_probe``. Later predictions for that device class are corrected by it.
    ``startup``: the measured run's (init, first-iteration extra) and the local probe's init
    (a remote probe's), which later predictions on that device class use for their start-up."""
    if machine.provider == "local":
        raise AdvisorError(
            "The local machine needs no calibration: its probes are measurements.",
            "record runs measured on catalog machines (cloud instances).",
        )
    if measured_t2 <= 0 or batch_size <= 0:
        raise AdvisorError(
            f"A measured run needs a positive step time and batch, but got "
            f"{measured_t2} s at batch {batch_size}.",
            "pass the measured seconds per training step and its batch size.",
        )
    predicted = predict(local_probe, machine, catalog, batch_size, calibrate=False).phases.t2.value
    return record_measurement(
        local_probe.workload,
        batch_size,
        machine.key,
        device_class(machine),
        predicted,
        measured_t2,
        origin=origin,
        storage=ledger_storage,
        signature=workload_signature(local_probe),
        startup=startup,
    )
