"""Whether a local probe of a traced model is feasible on this machine (issue #26).

From a trace's memory (parameters, gradients, optimizer state, saved activations) against the
memory available now, and its FLOPs per step against this CPU's measured matrix-product rate.
Both are lower bounds of what a real CPU step needs (temporaries, workspace, and convolutions
and small kernels running below the product rate are left out), so a model judged infeasible
is surely too big or too slow; one judged feasible may still be slow. A caller (``advisor
predict``) skips the local timing of an infeasible model and says "traced without a local
timing".
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any

from advisor.probes.operators.types import OperatorTrace

MEMORY_FRACTION = 0.8  # of the memory available now that a probe may plan to use
MAX_STEP_S = 5.0  # a probe runs ~30 step-equivalents (timed steps, FLOP count, noise scale)


@dataclass(frozen=True)
class LocalFeasibility:
    """The verdict and its numbers: bytes a step holds vs available, the step's FLOPs at the
    measured CPU rate (``cpu_flops_per_s``, a median of timed products) vs ``max_step_s``."""

    feasible: bool
    reason: str
    memory_bytes: int
    available_bytes: int
    flops: float
    cpu_flops_per_s: float
    estimated_step_s: float
    max_step_s: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def local_feasibility(
    trace: OperatorTrace,
    *,
    available_bytes: int | None = None,
    cpu_flops_per_s: float | None = None,
    max_step_s: float = MAX_STEP_S,
    memory_fraction: float = MEMORY_FRACTION,
    memory_bytes: float | None = None,
) -> LocalFeasibility:
    """Whether ``trace``'s model can be probed here (measures the CPU rate and reads the
    available memory unless given). ``memory_bytes``: the step's memory on this CPU from the
    memory model (``advisor.prediction.memory.model.step_memory(trace, device="cpu")``, which the
    GPU rows' check reads too); default the trace's own terms."""
    if memory_bytes is None and not trace.memory_bytes:
        raise ValueError("the trace records no memory_bytes: trace it with this version")
    need = int(sum(trace.memory_bytes.values()) if memory_bytes is None else memory_bytes)
    have = available_memory_bytes() if available_bytes is None else int(available_bytes)
    rate = measured_cpu_flops_per_s() if cpu_flops_per_s is None else float(cpu_flops_per_s)
    step_s = trace.flops / rate if rate > 0 else float("inf")
    reasons = []
    if need > memory_fraction * have:
        reasons.append(
            f"a step holds at least {need / 2**30:.1f} GiB, more than {memory_fraction:.0%} "
            f"of the {have / 2**30:.1f} GiB available"
        )
    if step_s > max_step_s:
        reasons.append(
            f"{trace.flops / 1e12:.2f} TFLOP per step at the measured "
            f"{rate / 1e9:.0f} GFLOP/s of this CPU is at least {step_s:.0f} s a step "
            f"(limit {max_step_s:g} s)"
        )
    reason = "; ".join(reasons) or (
        f"fits: {need / 2**30:.2f} GiB of {have / 2**30:.1f} GiB, about {step_s:.2f} s a step"
    )
    return LocalFeasibility(
        feasible=not reasons,
        reason=reason,
        memory_bytes=need,
        available_bytes=have,
        flops=trace.flops,
        cpu_flops_per_s=rate,
        estimated_step_s=step_s,
        max_step_s=max_step_s,
    )


def available_memory_bytes() -> int:
    """Memory available to a new process now (``MemAvailable`` in ``/proc/meminfo``; the
    physical memory where that file does not exist)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


@cache
def measured_cpu_flops_per_s(size: int = 512, repeats: int = 7) -> float:
    """This CPU's float32 matrix-product rate with torch's threads as set: the median of
    ``repeats`` timed ``size`` x ``size`` products (measured once per process)."""
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)  # warm up
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        rates.append(2.0 * size**3 / max(time.perf_counter() - start, 1e-9))
    return statistics.median(rates)
