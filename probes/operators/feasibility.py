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
# The host-RAM check's words (``advisor.evaluation.memory_checks`` reads them)
RAM_WORDS = "a probe of the step holds about"
MAX_STEP_S = 5.0  # a probe runs ~30 step-equivalents (timed steps, FLOP count, noise scale)


@dataclass(frozen=True)
class LocalFeasibility:
    """The verdict and its numbers: bytes a step holds vs available, the step's FLOPs at the
    measured CPU rate (``cpu_flops_per_s``, the fastest of timed products: ``CpuRate``) vs
    ``max_step_s``."""

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
    GPU rows' check reads too, with the process and its heap: ``advisor.evaluation.untimed.
    host_memory_bytes``); default the trace's own terms."""
    if memory_bytes is None and not trace.memory_bytes:
        raise ValueError("the trace records no memory_bytes: trace it with this version")
    need = int(sum(trace.memory_bytes.values()) if memory_bytes is None else memory_bytes)
    have = available_memory_bytes() if available_bytes is None else int(available_bytes)
    reading = None if cpu_flops_per_s is not None else measured_cpu_rate()
    rate = measured_cpu_flops_per_s() if cpu_flops_per_s is None else float(cpu_flops_per_s)
    step_s = trace.flops / rate if rate > 0 else float("inf")
    reasons = []
    if need > memory_fraction * have:
        reasons.append(
            f"{RAM_WORDS} {need / 2**30:.1f} GiB, more than {memory_fraction:.0%} "
            f"of the {have / 2**30:.1f} GiB available"
        )
    if step_s > max_step_s:
        measured = reading.text() if reading is not None else f"{rate / 1e9:.0f} GFLOP/s"
        reasons.append(
            f"{trace.flops / 1e12:.2f} TFLOP per step at the measured {measured} of this CPU "
            f"is at least {step_s:.0f} s a step (limit {max_step_s:g} s)"
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


@dataclass(frozen=True)
class CpuRate:
    """This CPU's float32 matrix-product rate (FLOP/s, ``value``) with torch's ``threads``: the
    fastest of ``products`` timed products on those threads, or of as many on one thread
    (``one_thread``) times the threads, whichever is higher; the threaded products' median and
    slowest; and how many of the ``cores`` other processes kept busy meanwhile
    (``others_cores``, from ``/proc/stat``; None where it cannot be read)."""

    value: float
    median: float
    slowest: float
    products: int
    others_cores: float | None
    cores: int
    threads: int = 1
    one_thread: float | None = None

    def text(self) -> str:
        """The reading in words, with its spread and the machine's load then."""
        spread = (
            f"fastest of {self.products} products; median {self.median / 1e9:.0f}, "
            f"slowest {self.slowest / 1e9:.0f}"
        )
        if self.one_thread is not None:
            spread += f"; one thread {self.one_thread / 1e9:.0f} x {self.threads}"
        if self.others_cores is not None:
            spread += f"; {self.others_cores:.1f} of {self.cores} cores busy elsewhere"
        return f"{self.value / 1e9:.0f} GFLOP/s ({spread})"


@cache
def measured_cpu_rate(size: int = 512, products: int = 20, nap_s: float = 0.003) -> CpuRate:
    """This CPU's float32 matrix-product rate with torch's threads as set, measured once per
    process (issue #46: so that a busy machine does not change the advice).

    Each of ``products`` timed ``size`` x ``size`` products runs after a nap of ``nap_s`` (a
    process waking from one gets the CPU before a busy one) and the fastest counts: one that
    another process interrupted is slower. A product on several threads needs every one of
    their cores at once, which processes spinning on each core deny it (measured here beside
    two: 16-21 GFLOP/s against 182-201 quiet), while one thread gets a core to itself
    (93-99 against 97 quiet): so the products are timed on one thread too, and the rate is the
    higher of the threaded reading and the one-thread reading times the threads (linear
    scaling, a prior: 2.07x measured here, quiet). The median read before fell to 4.8 GFLOP/s
    at load 10, where a CPU row came out at 18.4 h for a run measured at about 1.3 h. The
    spread and the other processes' load are kept beside it (``CpuRate.text``)."""
    import torch
    from advisor.probes.host import busy_cpu_s, cores, others_cores

    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)  # warm up

    def timed() -> list[float]:
        rates = []
        for _ in range(products):
            time.sleep(nap_s)
            start = time.perf_counter()
            torch.mm(a, b)
            rates.append(2.0 * size**3 / max(time.perf_counter() - start, 1e-9))
        return rates

    threads = torch.get_num_threads()
    busy, cpu, wall = busy_cpu_s(), time.process_time(), time.perf_counter()
    rates = timed()
    one = None
    if threads > 1:
        torch.set_num_threads(1)
        try:
            one = max(timed())
        finally:
            torch.set_num_threads(threads)
    others = others_cores(busy, busy_cpu_s(), time.process_time() - cpu, time.perf_counter() - wall)
    value = max(max(rates), (one or 0.0) * threads)
    return CpuRate(value, statistics.median(rates), min(rates), products,
                   None if others is None else round(others, 2), cores(), threads, one)  # fmt: skip


def measured_cpu_flops_per_s() -> float:
    """``measured_cpu_rate().value``: this CPU's matrix-product rate (FLOP/s)."""
    return measured_cpu_rate().value
