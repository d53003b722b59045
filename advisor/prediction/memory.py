"""The memory of one training step, per device, and whether it fits a device (issue #34).

This first version is the interface the product's paths read (``step_memory``,
``memory_fit``, ``largest_fitting_batch``): the trace's own terms (parameters, gradients,
optimizer state, tensors saved for backward) plus a GPU's fixed cost as a prior. The memory
model's refinement (transient working set, allocator rounding, Keras) keeps this interface.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from advisor.probes.operators.types import OperatorTrace

GIB = 1024**3

# Prior: a CUDA context, cuBLAS/cuDNN workspaces and the caching allocator's reserve on one
# GPU, before any tensor of the model (not measurable without a GPU; value, low, high in GiB).
GPU_FIXED_PRIOR_GIB = (0.6, 0.3, 1.2)

TRACE_TERMS = ("parameters", "gradients", "optimizer_state", "activations")


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
    """A step's memory against a device's: ``fits`` is None when the memory is unknown."""

    need_bytes: float
    have_bytes: float
    fits: bool | None
    reason: str = ""

    def text(self) -> str:
        """``21.3 of 22.0 GiB``, ``does not fit: needs X GiB per GPU, has Y`` or
        ``memory unknown``."""
        need, have = self.need_bytes / GIB, self.have_bytes / GIB
        if self.fits is None:
            return "memory unknown" + (f" ({self.reason})" if self.reason else "")
        if not self.fits:
            return f"does not fit: needs {need:.1f} GiB per GPU, has {have:.1f}"
        return f"{need:.1f} of {have:.1f} GiB"

    def to_dict(self) -> dict[str, Any]:
        return {
            "need_bytes": self.need_bytes,
            "have_bytes": self.have_bytes,
            "fits": self.fits,
            "reason": self.reason,
            "text": self.text(),
        }


def step_memory(trace: OperatorTrace, *, device: str = "gpu") -> StepMemory:
    """The peak memory per device of ``trace``'s step (``device``: "gpu" adds the GPU's fixed
    cost, a prior; "cpu" does not)."""
    if not trace.memory_bytes:
        return StepMemory(
            trace.batch_size, known=False, unknown_reason="the trace records no memory"
        )
    terms = [
        MemoryTerm(name, float(b), float(b), float(b), "operator trace")
        for name, b in trace.memory_bytes.items()
    ]
    if device == "gpu":
        v, lo, hi = (x * GIB for x in GPU_FIXED_PRIOR_GIB)
        terms.append(MemoryTerm("framework_fixed", v, lo, hi, "prior", prior=True))
    return StepMemory(trace.batch_size, tuple(terms))


def memory_fit(memory: StepMemory, capacity_bytes: float) -> MemoryFit:
    """Whether ``memory`` fits a device of ``capacity_bytes`` (on its central value)."""
    if not memory.known:
        return MemoryFit(0.0, capacity_bytes, None, memory.unknown_reason)
    return MemoryFit(memory.bytes, capacity_bytes, memory.bytes <= capacity_bytes)


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
