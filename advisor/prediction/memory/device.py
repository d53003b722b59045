"""A machine's step memory per device, against its accelerator's memory (issue #34).

``machine_memory`` is what the one prediction path (``forecast.forecast.forecast_machine``)
attaches to every accelerator row: the step at the per-device batch (data parallel keeps a
full replica of the model, its gradients and optimizer state on every device unless the plan
shards them, so the batch is split: ``ceil(B / n)``). On a GPU its memory is that of the
step ``advisor.train`` runs under the row's plan (the plain float32 step when it has none),
traced (``advisor.prediction.memory.plan``), plus what the GPU holds beyond the tensors
(``memory.prior_terms``, with the GPU generation's own priors); it fits when its upper
estimate fits the board's usable memory (``memory_priors.usable_gib``: less than its nominal
size). ``batch_limit`` is the largest batch of a search that fits a machine, computed once per
machine and trace.

Where the step at that batch cannot be traced here, the probe's own trace is used and its
batch-dependent terms (everything but the parameters, gradients, optimizer state and the
priors) are scaled by the batch ratio, which the note says. Without any trace the memory is
unknown and the row says so -- never "fits".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from advisor.prediction.memo import Memo
from advisor.prediction.memory.model import (
    GIB,
    MemoryFit,
    MemoryTerm,
    StepMemory,
    largest_fitting_batch,
    memory_fit,
    multiplies,
    on_host,
    prior_terms,
    step_memory,
)
from advisor.prediction.step.placement import Placement, place
from advisor.prediction.step.plan import TrainingPlan
from advisor.prediction.step.traces import TraceStore, step_trace
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
        if self.device == "tpu":
            return text.replace(" per GPU,", " per TPU device,")
        return text.replace(" per GPU,", " of RAM,") if self.device == "cpu" else text

    def to_dict(self) -> dict[str, Any]:
        return {
            "fits": self.fits,
            "text": self.text(),
            "need_gib": round(self.fit.need_bytes / GIB, 3) if self.fits is not None else None,
            "least_need_gib": round((self.fit.floor_bytes or self.fit.need_bytes) / GIB, 3),
            "have_gib": round(self.fit.have_bytes / GIB, 3),
            "devices": self.devices,
            "per_device_batch": self.per_device_batch,
            "how": self.how,
            "device": self.device,
            "note": REPLICA_NOTE,
            "step": self.memory.to_dict(),
        }


def capacity_bytes(machine: InstanceType, catalog: Any) -> float | None:
    """One device's usable memory in bytes: a GPU's board memory less what its driver keeps
    (``memory_priors.usable_gib``); a cloud CPU machine's RAM; None for this machine (its
    check is the memory available now, ``probes.operators.feasibility``) or an accelerator
    the catalog has no spec for."""
    if machine.accelerator is None:
        return None if machine.provider == "local" else float(machine.memory_gib) * GIB
    spec = _spec(machine, catalog)
    if spec is None:
        return None
    if device_kind(machine) == "tpu":
        from advisor.prediction.memory.tpu import tpu_devices

        return tpu_devices(spec.name, 1, float(spec.memory_gib))[1] * GIB
    from advisor.prediction.memory.priors import usable_gib

    return usable_gib(spec)[0] * GIB


def _spec(machine: InstanceType, catalog: Any) -> Any:
    try:
        return catalog.accelerator(machine.accelerator)
    except (KeyError, LookupError, AttributeError):
        return None


def device_kind(machine: InstanceType) -> str:
    """The memory model's device: "cpu" (host RAM), "tpu" (no CUDA fixed cost) or "gpu"."""
    from advisor.prediction.memory.tpu import is_tpu

    if machine.accelerator is None:
        return "cpu"
    return "tpu" if is_tpu(machine.accelerator) else "gpu"


def machine_memory(
    probe: ProbeResult,
    machine: InstanceType,
    catalog: Any,
    batch_size: int,
    trace_store: TraceStore | None = None,
    plan: Any = None,
    placement: Placement | None = None,
) -> DeviceMemory | None:
    """The step memory per device of ``probe``'s workload on ``machine`` at the global
    ``batch_size`` under ``plan`` (None: the plain float32 step) (a cloud CPU machine:
    against its RAM), or at the row's ``placement``; None for this machine."""
    have = capacity_bytes(machine, catalog)
    if have is None:
        return None
    devices = max(1, machine.accelerator_count)
    kind = device_kind(machine)
    if kind == "tpu":  # one replica per TPU device (a core on v2/v3), not per chip
        from advisor.prediction.memory.tpu import tpu_devices

        devices = tpu_devices(str(machine.accelerator), devices, have / GIB)[0]
        at = Placement(batch_size, devices)
    else:
        at = placement or place(machine, batch_size, plan)
    devices, per_device = at.devices, at.per_device
    if kind == "gpu":
        spec = _spec(machine, catalog)
        generation = getattr(spec, "generation", None)
        memory, how = gpu_step(probe, at, generation, trace_store)
    else:  # a CPU's RAM; a TPU device's HBM: the tensors, plus XLA's own (priors)
        memory, how = _step(probe, per_device, "cpu", trace_store)
        if kind == "cpu":  # the process and its heap hold more (measured)
            memory = on_host(memory)
        if kind == "tpu":
            from advisor.prediction.memory.tpu import tpu_devices, xla_terms

            source = tpu_devices(str(machine.accelerator), 1, have / GIB)[2]
            how = f"{how}; {devices} TPU devices, HBM per device: {source}"
            if memory.known:
                tensors = sum(t.value for t in memory.terms)
                memory = replace(memory, terms=(*memory.terms, *xla_terms(tensors)))
    return DeviceMemory(memory, memory_fit(memory, have), devices, per_device, how, kind)


def step_traced(probe: ProbeResult, at: Placement, store: TraceStore | None = None) -> bool:
    """Whether one GPU's memory at ``at`` can be read without a new trace: its plan layout
    traced already (a PyTorch step), or a step the plan's rules rewrite (nothing traced)."""
    from advisor.prediction.memory.plan import already_traced
    from advisor.prediction.step.traces import probe_hyperparameters

    if probe.framework != "torch":
        return True
    return already_traced(probe.workload, probe_hyperparameters(probe),
                          at.plan or TrainingPlan(), at.shards, store)  # fmt: skip


def gpu_step(
    probe: ProbeResult,
    at: Placement,
    generation: str | None,
    store: TraceStore | None = None,
) -> tuple[StepMemory, str]:
    """One GPU's memory for ``probe``'s step at the row's placement ``at`` (its per-device
    batch and plan, on one of its GPUs): the plan's step traced (PyTorch), else the float32
    step's memory rewritten by the plan's rules (priors), plus the GPU's own priors."""
    from advisor.prediction.memory.plan import factor_memory, traced_memory
    from advisor.prediction.step.traces import probe_hyperparameters
    from advisor.probes.operators.stored import operator_trace_of

    plan, devices = at.plan or TrainingPlan(), at.shards  # issue #49: HSDP shards per machine
    memory = StepMemory(at.per_device, known=False, unknown_reason="not traced")
    how = "the plan's step traced on fake tensors"
    if probe.framework == "torch":
        hps = probe_hyperparameters(probe)
        memory = traced_memory(probe.workload, hps, at.per_device, plan, devices, store)
    if not memory.known:
        why = memory.unknown_reason
        base, base_how = _step(probe, at.micro, "cpu", store)
        memory = factor_memory(base, plan, devices, probe.framework)
        if base.known and plan != TrainingPlan():
            how = f"{base_how}; the plan by rules (priors)" + (f": {why}" if why else "")
        else:
            how = base_how
    if not memory.known:
        return memory, how
    own = operator_trace_of(probe)
    convolves = own is not None and any(o.kind == "conv" for o in own.operators)
    tensors = sum(t.value for t in memory.terms)
    extra = prior_terms(
        probe.framework, convolves, tensors, generation, devices, multiplies=multiplies(own)
    )
    return replace(memory, terms=(*memory.terms, *extra)), how


_STEPS: Memo[tuple[StepMemory, str]] = Memo("step memory", bound=1024)


def _step(
    probe: ProbeResult, batch: int, device: str, store: TraceStore | None
) -> tuple[StepMemory, str]:
    """The step memory at per-device ``batch`` (memoised by workload, trace and batch)."""
    from advisor.prediction.step.traces import probe_hyperparameters
    from advisor.probes.operators.stored import operator_trace_of

    own = operator_trace_of(probe)  # two probes of one workload may carry different traces
    mark = "" if own is None else f"{own.batch_size}:{sorted(own.memory_bytes.items())}"
    hps = repr(sorted(probe_hyperparameters(probe).items()))
    key = (probe.workload, probe.framework, hps + mark, batch, device)

    def made() -> tuple[StepMemory, str]:
        step = step_trace(probe, batch, store)
        if step is None:
            return StepMemory(batch, known=False, unknown_reason="no trace of the step"), "no trace"
        memory = step_memory(step.trace, device=device)
        if step.scale != 1.0 and memory.known:
            memory = scaled(memory, step.scale, batch)
        return memory, step.how

    return _STEPS.get_or_make(key, made)


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

    def at(b: int) -> StepMemory:
        found = machine_memory(probe, machine, catalog, b, trace_store)
        assert found is not None
        return found.memory

    if not at(batches[0]).known:
        return batches[-1]
    return largest_fitting_batch(at, have, batches)
