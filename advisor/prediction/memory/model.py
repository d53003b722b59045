"""The memory of one training step, per device, and whether it fits a device (issue #34).

Peak bytes per device = what is live at the step's peak of live tensor bytes, by holder
(parameters, gradients, optimizer state, activations kept for backward, the transient
working set of backward and of the optimizer step, the batch), from the operator trace,
plus on a GPU what no trace sees: the framework's fixed cost and the caching allocator's
reserve (priors, :mod:`advisor.prediction.memory.priors`), and for convolutions cuDNN's
workspace (a prior). The PyTorch trace's peak comes from PyTorch's own tracker
(``MemTracker``, :mod:`advisor.probes.operators.peak_memory`) on meta tensors; a trace
without it (Keras, an older cached trace) gives the sum of its terms. Data parallel keeps a
full replica on every GPU: the trace's batch is the per-device batch. See
``docs/memory-model.md``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from advisor.prediction.memory.priors import (
    HEAP_EXTRA,
    PROCESS_BASE_MIB,
    collective_gib,
    cublas_workspace_mib,
    fixed_gib,
    reserve_fraction,
    trace_margin,
)
from advisor.probes.operators.types import OperatorTrace

GIB = 1024**3
MIB = 1024**2

TRACE_TERMS = ("parameters", "gradients", "optimizer_state", "activations")
# The peak snapshot's keys (probes/operators/peak_memory.PEAK_KEYS) as the model's terms.
PEAK_TERMS = {
    "parameters": "parameters",
    "gathered_parameters": "gathered_parameters",
    "gradients": "gradients",
    "optimizer_state": "optimizer_state",
    "activations": "activations",
    "backward_temporaries": "transient_backward",
    "optimizer_temporaries": "transient_optimizer",
    "batch": "batch",
}
PEAK_SOURCE = "operator trace: live tensors at the step's peak (torch MemTracker)"
SUM_SOURCE = "operator trace (no peak tracked: terms summed)"
# Prior: cuDNN's convolution workspace, allocated through the caching allocator (bytes).
CONV_WORKSPACE_PRIOR = (64 * MIB, 0.0, 512 * MIB)


@dataclass(frozen=True)
class MemoryTerm:
    """One term of a step's peak memory on a device, in bytes, with where it comes from."""

    name: str
    value: float
    low: float
    high: float
    source: str
    prior: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "bytes": self.value,
            "low": self.low,
            "high": self.high,
            "source": self.source,
            "prior": self.prior,
        }


@dataclass(frozen=True)
class StepMemory:
    """The peak bytes one device holds for a training step at ``per_device_batch``.

    ``known`` is False when the trace could not follow the model (``unknown_reason`` names
    the operator or the cause); such a step is never said to fit."""

    per_device_batch: int
    terms: tuple[MemoryTerm, ...] = ()
    known: bool = True
    unknown_reason: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def bytes(self) -> float:
        return float(sum(t.value for t in self.terms))

    @property
    def low(self) -> float:
        return float(sum(t.low for t in self.terms))

    @property
    def high(self) -> float:
        return float(sum(t.high for t in self.terms))

    def to_dict(self) -> dict[str, Any]:
        return {
            "per_device_batch": self.per_device_batch,
            "known": self.known,
            "unknown_reason": self.unknown_reason,
            "bytes": self.bytes,
            "low": self.low,
            "high": self.high,
            "terms": [t.to_dict() for t in self.terms],
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class MemoryFit:
    """A step's memory against a device's usable memory (``have_bytes``: the board's memory
    less what the driver keeps, ``memory_priors.usable_gib``): it ``fits`` only when its
    upper estimate does; ``tight`` when the central estimate fits and the upper one does not
    (then ``fits`` is False); ``fits`` is None when the memory is unknown (never "fits").
    ``reason``: why it is unknown, or what else rules it out; ``floor_bytes``: where no plan
    was traced as none could fit, the least any plan needs (``plan_search.state_floor``)."""

    need_bytes: float
    have_bytes: float
    fits: bool | None
    reason: str = ""
    need_high_bytes: float = 0.0
    tight: bool = False
    floor_bytes: float = 0.0

    def text(self) -> str:
        """``21.3 (up to 23.0) of 22.1 GiB``, ``does not fit: needs X GiB per GPU, has Y``,
        ``does not fit (tight): needs X (up to Z) GiB per GPU, has Y``, ``does not fit under
        any plan: needs F GiB or more per GPU, has Y`` or ``memory unknown``."""
        need, have = self.need_bytes / GIB, self.have_bytes / GIB
        high = max(self.need_high_bytes, self.need_bytes) / GIB
        if self.fits is None:
            return "memory unknown" + (f" ({self.reason})" if self.reason else "")
        if self.tight:
            return (
                f"does not fit (tight): needs {need:.1f} (up to {high:.1f}) GiB per GPU, "
                f"has {have:.1f}"
            )
        if not self.fits:
            out = f"does not fit: needs {need:.1f} GiB per GPU, has {have:.1f}"
            if self.floor_bytes:
                out = (f"does not fit under any plan: needs {self.floor_bytes / GIB:.1f} GiB or "
                       f"more per GPU, has {have:.1f}")  # fmt: skip
            return f"{out} ({self.reason})" if self.reason else out
        return f"{need:.1f} (up to {high:.1f}) of {have:.1f} GiB"

    def to_dict(self) -> dict[str, Any]:
        return {
            "need_bytes": self.need_bytes,
            "need_high_bytes": max(self.need_high_bytes, self.need_bytes),
            "have_bytes": self.have_bytes,
            "fits": self.fits,
            "tight": self.tight,
            "reason": self.reason,
            "floor_bytes": self.floor_bytes,
            "text": self.text(),
        }


def step_memory(
    trace: OperatorTrace, *, device: str = "gpu", generation: str | None = None
) -> StepMemory:
    """The peak memory per device of ``trace``'s step at its (per-device) batch.

    ``device``: "gpu" adds what a GPU holds beyond the tensors (priors: the framework's fixed
    cost for ``generation``, e.g. "Hopper", the allocator's reserve, cuDNN's workspace when
    the step convolves); "cpu" the tensors alone."""
    if device not in ("gpu", "cpu"):
        raise ValueError(f"device must be 'gpu' or 'cpu', but got {device!r}")
    if trace.peak_memory:
        terms = [
            MemoryTerm(name, float(b), float(b), float(b), PEAK_SOURCE)
            for key, name in PEAK_TERMS.items()
            if (b := trace.peak_memory.get(key, 0))
        ]
        notes = ["peak of live tensors from the traced step"]
    elif trace.memory_bytes:
        terms = [
            MemoryTerm(name, float(b), float(b), float(b), SUM_SOURCE)
            for name, b in trace.memory_bytes.items()
        ]
        notes = ["no peak tracked: the sum of the trace's terms (they may not all coexist)"]
    else:
        return StepMemory(
            trace.batch_size, known=False, unknown_reason="the trace records no memory"
        )
    notes.append(
        f"per device at a per-device batch of {trace.batch_size}: data parallel keeps a "
        "full replica (parameters, gradients, optimizer state) on every GPU"
    )
    if device == "gpu":
        terms.extend(gpu_terms(trace, sum(t.value for t in terms), generation))
    return StepMemory(trace.batch_size, tuple(terms), notes=tuple(notes))


def gpu_terms(
    trace: OperatorTrace, tensor_bytes: float, generation: str | None, devices: int = 1
) -> list[MemoryTerm]:
    """The priors a GPU adds to ``tensor_bytes`` of ``trace``'s tensors (``prior_terms``)."""
    convolves = any(o.kind == "conv" for o in trace.operators)
    return prior_terms(
        trace.framework, convolves, tensor_bytes, generation, devices,
        multiplies=multiplies(trace),
    )  # fmt: skip


def multiplies(trace: OperatorTrace | None) -> bool:
    """Whether ``trace``'s step multiplies matrices through cuBLAS (linear or batched)."""
    return trace is not None and any(o.kind in ("linear", "bmm") for o in trace.operators)


def prior_terms(
    framework: str,
    convolves: bool,
    tensor_bytes: float,
    generation: str | None,
    devices: int = 1,
    *,
    multiplies: bool = False,
) -> list[MemoryTerm]:
    """What a GPU holds beyond the step's tensors: the framework's fixed cost on
    ``generation``, the caching allocator's reserve, cuBLAS's workspaces when a PyTorch step
    ``multiplies`` matrices (modelled), cuDNN's workspace when the step convolves, NCCL's
    buffers on ``devices`` > 1 (priors), and the trace's own measured margin (0 at the
    centre, its largest measured under-prediction at the top)."""
    (v, lo, hi), source = fixed_gib(framework, generation)
    out = [MemoryTerm("framework_fixed", v * GIB, lo * GIB, hi * GIB, source, prior=True)]
    if multiplies and framework == "torch":
        (bv, blo, bhi), bsource = cublas_workspace_mib(generation)
        out.append(MemoryTerm("cublas_workspace", bv * MIB, blo * MIB, bhi * MIB, bsource))
    fv, flo, fhi = reserve_fraction(framework)
    out.append(
        MemoryTerm(
            "allocator_reserve",
            fv * tensor_bytes,
            flo * tensor_bytes,
            fhi * tensor_bytes,
            f"prior: caching allocator rounding and fragmentation, {fv:.0%} "
            f"({flo:.0%}-{fhi:.0%}) of the tensors' peak",
            prior=True,
        )
    )
    if convolves:
        wv, wlo, whi = CONV_WORKSPACE_PRIOR
        out.append(
            MemoryTerm("conv_workspace", wv, wlo, whi,
                       "prior: cuDNN convolution workspace (algorithm-dependent)", prior=True)
        )  # fmt: skip
    if devices > 1:
        (cv, clo, chi), csource = collective_gib()
        out.append(
            MemoryTerm("collective_buffers", cv * GIB, clo * GIB, chi * GIB, csource, prior=True)
        )
    margin, msource = trace_margin(framework)
    if margin:
        out.append(MemoryTerm("trace_margin", 0.0, 0.0, margin * tensor_bytes, msource))
    return out


def untraceable(per_device_batch: int, error: BaseException | str) -> StepMemory:
    """The memory of a step the trace could not follow (``error``: the meta trace's failure),
    ``known=False`` with one line naming the operator (or data-dependent shapes)."""
    import re

    text = " ".join(str(error).split())
    op = re.search(r"\b(aten(?:::|\.)[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?)", text)
    if op is not None:
        reason = f"the trace cannot follow {op.group(1)} (no meta kernel)"
    elif "data-dependent" in text.lower() or "DataDependent" in type(error).__name__:
        reason = "the trace cannot follow data-dependent shapes"
    else:
        reason = f"the trace cannot follow this step ({text[:120]})"
    return StepMemory(per_device_batch, known=False, unknown_reason=reason)


def host_terms(tensor_bytes: float) -> list[MemoryTerm]:
    """What a CPU machine's RAM holds beyond the step's ``tensor_bytes``: the process's own
    memory and the heap's holes under ``advisor.train``'s allocator setting (measured)."""
    v, lo, hi = PROCESS_BASE_MIB
    h, hlo, hhi = HEAP_EXTRA
    where = "benchmarks/host_heap.py on a 2-core machine"
    return [
        MemoryTerm("process_base", v * MIB, lo * MIB, hi * MIB,
                   f"measured: the interpreter, PyTorch and the advisor before the first step, "
                   f"{v:.0f}-{hi:.0f} MiB ({where})", prior=True),
        MemoryTerm("heap_retention", h * tensor_bytes, hlo * tensor_bytes, hhi * tensor_bytes,
                   f"measured: glibc's heap under advisor.train's allocator setting keeps "
                   f"{1 + hlo:.2f}-{1 + hhi:.2f}x the step's tensors resident ({where})",
                   prior=True),
    ]  # fmt: skip


def on_host(memory: StepMemory) -> StepMemory:
    """``memory`` (a step's tensors on a CPU) with what the RAM holds beside them
    (``host_terms``); an unknown step as it is."""
    if not memory.known:
        return memory
    return dataclasses.replace(memory, terms=(*memory.terms, *host_terms(memory.bytes)))


def memory_fit(memory: StepMemory, usable_bytes: float) -> MemoryFit:
    """Whether ``memory`` fits a device of ``usable_bytes``: its upper estimate must
    (``MemoryFit``); unknown memory never fits (``fits`` None)."""
    if not memory.known:
        return MemoryFit(0.0, usable_bytes, None, memory.unknown_reason)
    central, high = memory.bytes, max(memory.high, memory.bytes)
    fits = high <= usable_bytes
    tight = not fits and central <= usable_bytes
    return MemoryFit(central, usable_bytes, fits, need_high_bytes=high, tight=tight)


def largest_fitting_batch(
    memory_at: Callable[[int], StepMemory], capacity_bytes: float, batches: Iterable[int]
) -> int | None:
    """The largest of ``batches`` whose step fits ``capacity_bytes`` (memory grows with the
    batch, so the search stops at the first that does not), or None when none fits."""
    best = None
    for b in sorted(batches):
        if not memory_fit(memory_at(b), capacity_bytes).fits:
            break
        best = b
    return best
