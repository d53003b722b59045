"""A machine's step memory per device, against its accelerator's memory (issue #34).

``machine_memory`` is what the one prediction path (``perf.forecast.forecast_machine``)
attaches to every accelerator row: the step at the per-device batch (data parallel keeps a
full replica of the model, its gradients and optimizer state on every device, so only the
batch is split: ``ceil(B / n)``), its memory from the memory model
(``advisor.prediction.memory.step_memory``) and whether it fits the device
(``memory_fit``, against ``AcceleratorSpec.memory_gib``). ``batch_limit`` is the largest
batch of a search that fits a machine, computed once per machine and trace.

Where the step at that batch cannot be traced here, the probe's own trace is used and its
batch-dependent terms (everything but the parameters, gradients, optimizer state and the
priors) are scaled by the batch ratio, which the note says. Without any trace the memory is
unknown and the row says so -- never "fits".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from advisor.prediction.memory import (
    GIB,
    MemoryFit,
    MemoryTerm,
    StepMemory,
    largest_fitting_batch,
    memory_fit,
    step_memory,
)
from advisor.prediction.perf.traces import TraceStore, per_device_batch, step_trace
from advisor.probes.result import ProbeResult
from advisor.providers.catalog import InstanceType

# Terms that do not grow with the batch (the model's replica; the framework's fixed cost).
REPLICA_TERMS = frozenset({"parameters", "gradients", "optimizer_state", "transient_optimizer"})
REPLICA_NOTE = (
    "data parallel: every device holds a full replica (parameters, gradients, optimizer "
    "state) and the activations of its share of the batch"
)


@dataclass(frozen=True)
class DeviceMemory:
    """One machine's step memory per device and whether it fits there."""

    memory: StepMemory
    fit: MemoryFit
    devices: int
    per_device_batch: int
    how: str = ""  # how the step's trace was obtained
    device: str = "gpu"  # the memory model's device: "gpu", "tpu", or "cpu" (host RAM)

    @property
    def fits(self) -> bool | None:
        """True or False; None when the memory is unknown."""
        return self.fit.fits

    def text(self) -> str:
        """``21.3 of 22.0 GiB``, ``does not fit: needs X GiB per GPU, has Y`` or ``memory
        unknown`` (a CPU machine's: "of RAM" for "per GPU")."""
        text = self.fit.text()
        return text.replace(" per GPU,", " of RAM,") if self.device == "cpu" else text

    def to_dict(self) -> dict[str, Any]:
        return {
            "fits": self.fits,
            "text": self.text(),
            "need_gib": round(self.fit.need_bytes / GIB, 3) if self.fits is not None else None,
            "have_gib": round(self.fit.have_bytes / GIB, 3),
            "devices": self.devices,
            "per_device_batch": self.per_device_batch,
            "how": self.how,
            "device": self.device,
            "note": REPLICA_NOTE,
            "step": self.memory.to_dict(),
        }


def capacity_bytes(machine: InstanceType, catalog: Any) -> float | None:
    """One device's memory in bytes (the catalog's ``memory_gib``); a cloud CPU machine's
    RAM; None for this machine (its check is the memory available now,
    ``probes.operators.feasibility``) or an accelerator the catalog has no spec for."""
    if machine.accelerator is None:
        return None if machine.provider == "local" else float(machine.memory_gib) * GIB
    try:
        spec = catalog.accelerator(machine.accelerator)
    except (KeyError, LookupError, AttributeError):
        return None
    return float(spec.memory_gib) * GIB


def device_kind(machine: InstanceType) -> str:
    """The memory model's device: "cpu" (host RAM), "tpu" (no CUDA fixed cost) or "gpu"."""
    if machine.accelerator is None:
        return "cpu"
    return "tpu" if machine.accelerator.upper().startswith("TPU") else "gpu"


def machine_memory(
    probe: ProbeResult,
    machine: InstanceType,
    catalog: Any,
    batch_size: int,
    trace_store: TraceStore | None = None,
    plan: Any = None,
) -> DeviceMemory | None:
    """The step memory per device of ``probe``'s workload on ``machine`` at the global
    ``batch_size`` (a cloud CPU machine: against its RAM); None for this machine. ``plan``
    (issue #35): the step at its micro-batch under the plan (``prediction.plan_memory``)."""
    have = capacity_bytes(machine, catalog)
    if have is None:
        return None
    devices = max(1, machine.accelerator_count)
    per_device = per_device_batch(batch_size, devices)
    kind = device_kind(machine)
    if plan is not None and kind == "gpu":
        from advisor.prediction.plan_memory import plan_memory

        memory, how = _step(probe, plan.micro_batch(per_device), kind, trace_store)
        memory = plan_memory(memory, plan, devices, probe.framework)
    else:
        memory, how = _step(probe, per_device, kind, trace_store)
    return DeviceMemory(memory, memory_fit(memory, have), devices, per_device, how, kind)


_STEPS: dict[tuple[str, str, str, int, str], tuple[StepMemory, str]] = {}


def _step(
    probe: ProbeResult, batch: int, device: str, store: TraceStore | None
) -> tuple[StepMemory, str]:
    """The step memory at per-device ``batch`` (memoised by workload, trace and batch)."""
    from advisor.prediction.perf.traces import probe_hyperparameters
    from advisor.probes.operators.stored import operator_trace_of

    own = operator_trace_of(probe)  # two probes of one workload may carry different traces
    mark = "" if own is None else f"{own.batch_size}:{sorted(own.memory_bytes.items())}"
    hps = repr(sorted(probe_hyperparameters(probe).items()))
    key = (probe.workload, probe.framework, hps + mark, batch, device)
    if key not in _STEPS:
        step = step_trace(probe, batch, store)
        if step is None:
            unknown = StepMemory(batch, known=False, unknown_reason="no trace of the step")
            _STEPS[key] = (unknown, "no trace")
        else:
            memory = step_memory(step.trace, device=device)
            if step.scale != 1.0 and memory.known:
                memory = scaled(memory, step.scale, batch)
            _STEPS[key] = (memory, step.how)
    return _STEPS[key]


def scaled(memory: StepMemory, ratio: float, batch: int) -> StepMemory:
    """``memory`` of a step at another batch, its batch-dependent terms times ``ratio``
    (the replica and the priors kept)."""
    terms = tuple(
        t if t.name in REPLICA_TERMS or t.prior else _times(t, ratio) for t in memory.terms
    )
    note = f"scaled from a trace at another batch to {batch} per device"
    return replace(memory, per_device_batch=batch, terms=terms, notes=(*memory.notes, note))


def _times(term: MemoryTerm, ratio: float) -> MemoryTerm:
    return replace(
        term, value=term.value * ratio, low=term.low * ratio, high=term.high * ratio,
        source=f"{term.source}, scaled by the batch ratio {ratio:g}",
    )  # fmt: skip


def batch_limit(
    probe: ProbeResult,
    machine: InstanceType,
    catalog: Any,
    batches: Iterable[int],
    trace_store: TraceStore | None = None,
) -> int | None:
    """The largest of ``batches`` (global) whose step fits ``machine``'s devices; None when
    none fits, or the largest batch when the memory is unknown or the machine is this one
    (no limit can be said)."""
    batches = sorted(set(batches))
    have = capacity_bytes(machine, catalog)
    if have is None or not batches:
        return batches[-1] if batches else None
    devices = max(1, machine.accelerator_count)
    kind = device_kind(machine)

    def at(b: int) -> StepMemory:
        return _step(probe, per_device_batch(b, devices), kind, trace_store)[0]

    if not at(batches[0]).known:
        return batches[-1]
    return largest_fitting_batch(at, have, batches)


def forget() -> None:
    """Drop this process's memo (tests)."""
    _STEPS.clear()
