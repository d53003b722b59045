"""Accelerator targets (GPUs, TPUs): the device time of the traced step plus host dispatch,
input pipeline and, for several devices, synchronous data-parallel costs.

Steady iteration on ``n`` devices with global batch ``B`` (per-device batch ``b = ceil(B/n)``)::

    t_device   = the step's device time at b (perf.device: the GPU kernel model on a GPU,
                 a roofline over the trace's FLOPs and bytes on a TPU)
    t_dispatch = kernel launches of the step x 60 us          # eager host launches (prior)
    t2 = max(t_dispatch, t_device) + t_input + t_allreduce + t_replica

The ``max`` with the host dispatch makes a small model need a large per-device batch before the
device, not the host, is the bottleneck; the launches are the trace's (views and detaches
launch nothing, the optimizer runs as CUDA's multi-tensor kernels). Ring all-reduce:
``2 (n-1)/n * gradient_bytes / link + 2 (n-1) * hop_latency * buckets`` (DDP, one process per
device, one collective per gradient bucket) plus DDP's own cost per step (measured here).
Validation runs the forward phase at the same per-device batch. The CPU probe's timing never
enters: only its trace, its loader time and its host initialisation do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from advisor.intervals import Interval
from advisor.prediction.step.traces import StepTrace, per_device_batch
from advisor.prediction.timing import constants as C
from advisor.prediction.timing.device import DeviceTime, device_time
from advisor.prediction.timing.signature import WorkloadSignature
from advisor.prediction.timing.startup import DeviceStartup
from advisor.probes.result import PhaseTimes
from advisor.providers.catalog import AcceleratorSpec, InstanceType

STRATEGIES = ("ddp", "dp")
# Gradient-synchronisation traffic per step relative to one ring all-reduce, by the plan's
# sharding (ZeRO paper, Rajbhandari et al. 2020, section 7: ZeRO-1/2 reduce-scatter the
# gradients and all-gather the parameters, the same volume as an all-reduce; ZeRO-3 / FSDP
# all-gathers the parameters again in the backward pass: 1.5x).
SHARDING_TRAFFIC = {"none": 1.0, "optimizer": 1.0, "gradients": 1.0, "parameters": 1.5}


def default_strategy(framework: str) -> str:
    """The data-parallel strategy a framework's users normally get."""
    return "dp" if framework == "keras" else "ddp"


def generation_profile(spec: AcceleratorSpec) -> C.GenerationProfile:
    """The generation profile of an accelerator, from its generation text or its name."""
    text = f"{spec.generation} {spec.name}".lower()
    if "tpu" in text:
        return C.GENERATIONS["tpu"]
    for key, profile in C.GENERATIONS.items():
        if key in text:
            return profile
    tokens = spec.name.lower().replace("nvidia", "").replace("tesla", "").split()
    for token in tokens:
        if token in C.NAME_TO_GENERATION:
            return C.GENERATIONS[C.NAME_TO_GENERATION[token]]
    return C.UNKNOWN_GENERATION


@dataclass(frozen=True)
class Link:
    """The interconnect between the devices of one machine, per device, one direction."""

    bytes_per_s: float  # achieved
    kind: str
    shared_board: bool  # two GPUs share one board's PCIe link (K80)


def link_of(spec: AcceleratorSpec) -> Link:
    """Achieved link figures of ``spec`` (nominal x ``LINK_EFFICIENCY``)."""
    link = spec.link.lower()
    kind = "nvlink" if "nvlink" in link else "ici" if "ici" in link else "pcie"
    return Link(spec.link_gbs * 1e9 * C.LINK_EFFICIENCY[kind], kind, "k80" in spec.name.lower())


def buckets(gradient_bytes: float) -> int:
    """DDP's gradient buckets (one collective each): 1 MiB first, then 25 MiB each."""
    rest = max(0.0, gradient_bytes - C.DDP_FIRST_BUCKET_BYTES)
    return 1 + math.ceil(rest / C.DDP_BUCKET_BYTES)


def iteration_parts(
    sig: WorkloadSignature,
    dev: DeviceTime,
    link: Link,
    profile: C.GenerationProfile,
    n: int,
    batch: int,
    strategy: str,
    forward_only: bool = False,
    comm_factor: float = 1.0,
) -> dict[str, float]:
    """Seconds of each part of one iteration (training step, or forward pass if
    ``forward_only``) on ``n`` devices. ``comm_factor``: the gradient traffic relative to one
    all-reduce (sharded parameters add the forward's all-gather: 1.5)."""
    b = per_device_batch(batch, n)
    device = (dev.forward if forward_only else dev.step).value
    launches = dev.forward_launches if forward_only else dev.launches
    dispatch = launches * C.DISPATCH_S_PER_LAUNCH * profile.dispatch_scale
    per_process = b if strategy == "ddp" else batch
    if strategy == "dp":
        dispatch *= 1 + C.DP_DISPATCH_SERIAL * (n - 1)
    host = sig.data_s_per_sample if sig.data_s_per_sample is not None else C.HOST_S_PER_SAMPLE
    h2d = C.H2D_BYTES_PER_S / (2 if link.shared_board and n > 1 else 1)
    input_s = per_process * (host + sig.input_bytes_per_sample / h2d)
    allreduce = replica = 0.0
    if n > 1:
        link_bw = link.bytes_per_s / (2 if link.shared_board else 1)
        hops = 2 * (n - 1) * C.HOP_LATENCY_S[link.kind] * buckets(sig.gradient_bytes)
        if strategy == "ddp" and not forward_only:
            allreduce = comm_factor * (2 * (n - 1) / n * sig.gradient_bytes / link_bw + hops)
            replica = C.DDP_OVERHEAD_S
        elif strategy == "dp":
            scatter = batch * sig.input_bytes_per_sample * (n - 1) / n / link_bw
            weights = 0.0 if forward_only else 2 * (n - 1) * sig.gradient_bytes / link_bw
            allreduce = scatter + weights + hops
        replica += C.STRAGGLER_CV * max(dispatch, device) * math.sqrt(2 * math.log(n))
    return {
        "device": device,
        "dispatch": dispatch,
        "input": input_s,
        "allreduce": allreduce,
        "replica": replica,
    }


def iteration_time(parts: dict[str, float]) -> float:
    """Total of an iteration's parts: device work overlaps host dispatch (async launches)."""
    return (
        max(parts["dispatch"], parts["device"])
        + parts["input"]
        + parts["allreduce"]
        + parts["replica"]
    )


def iteration_bounds(parts: dict[str, float], device: Interval, input_factor: float) -> Interval:
    """The iteration with each part at its own bounds: the device time's interval (the kernel
    model's, or the roofline's), the launch cost's x/2 prior, the input pipeline's factor and
    the communication terms' x/1.5."""
    comm = parts["allreduce"] + parts["replica"]
    d, cf, df = parts["dispatch"], C.COMMUNICATION_FACTOR, C.DISPATCH_FACTOR
    scale = parts["device"] / device.value if device.value > 0 else 1.0
    low = max(d / df, device.low * scale) + parts["input"] / input_factor + comm / cf
    high = max(d * df, device.high * scale) + parts["input"] * input_factor + comm * cf
    value = iteration_time(parts)
    return Interval(value, min(low, value), max(high, value))


def bottleneck(parts: dict[str, float], device_limit: str = "device") -> str:
    """The part that limits the iteration: "dispatch" when the host's launches outlast the
    device work, else ``device_limit`` ("device"; a roofline's "compute" or "memory"); or
    "input", "allreduce", "replica" when one of those is larger still."""
    if parts["dispatch"] >= parts["device"]:
        device, busy = "dispatch", parts["dispatch"]
    else:
        device, busy = device_limit, parts["device"]
    others = {k: parts[k] for k in ("input", "allreduce", "replica")}
    others[device] = busy
    return max(others, key=lambda k: others[k])


LIMITS = {
    "dispatch": "host-bound (kernel launches): a faster GPU would not help",
    "input": "host-bound (input pipeline): a faster GPU would not help",
    "device": "GPU-bound (its kernels' device time)",
    "compute": "compute-bound",
    "memory": "memory-bandwidth-bound",
    "allreduce": "communication-bound: fewer or better-linked GPUs would help",
    "replica": "replica overhead-bound: fewer GPUs would help",
    "cpu": "CPU-bound",
}


def host_bound(limit: str) -> bool:
    """Whether a prediction sits on the host floor (dispatch or input), where the device's
    speed does not matter and the host terms decide the time."""
    return limit in ("dispatch", "input")


def predict_accelerator(
    sig: WorkloadSignature,
    machine: InstanceType,
    spec: AcceleratorSpec,
    batch: int,
    step: StepTrace | None,
    startup: DeviceStartup,
    strategy: str | None = None,
    plan: Any = None,
    nodes: int = 1,
) -> tuple[PhaseTimes, dict[str, float], str, str, DeviceTime]:
    """Phase times on an accelerator machine from the step's trace at the per-device batch
    (``step``); returns phases, breakdown, kind, bottleneck and the device time.

    ``strategy`` None means the framework's usual one: "dp" (one process drives every
    replica, one input pipeline: Keras / tf.distribute.MirroredStrategy) for Keras, "ddp"
    (DistributedDataParallel, one process and input pipeline per device) for PyTorch.
    ``nodes`` > 1: that many machines under torchrun, the gradients' collective hierarchical
    (``advisor.prediction.timing.nodes``, issue #49).
    """
    from advisor.prediction.timing.phases import accelerator_phases

    strategy = strategy or default_strategy(sig.framework)
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, but got {strategy!r}")
    profile = generation_profile(spec)
    n = machine.accelerator_count * max(nodes, 1)
    b = per_device_batch(batch, n)
    dev = device_time(step, spec, profile, sig, b)
    link = link_of(spec)
    comm = SHARDING_TRAFFIC.get(getattr(plan, "sharding", "none"), 1.0)
    parts = iteration_parts(sig, dev, link, profile, n, batch, strategy, comm_factor=comm)
    if nodes > 1:  # issue #49: the collective inside each machine, then across them
        from advisor.prediction.timing.nodes import across_machines

        parts = across_machines(parts, sig.gradient_bytes, machine, nodes, link.bytes_per_s,
                                C.HOP_LATENCY_S[link.kind], buckets(sig.gradient_bytes), comm,
                                getattr(plan, "replicate", "none") == "nodes")  # fmt: skip
    fwd = iteration_parts(sig, dev, link, profile, n, batch, strategy, forward_only=True)
    input_factor = C.OTHER_CPU_FACTOR if sig.data_s_per_sample is not None else C.INPUT_FACTOR
    t2 = iteration_bounds(parts, dev.step, input_factor)
    v_step = iteration_bounds(fwd, dev.forward, input_factor)
    neck = bottleneck(parts, dev.limit)
    kind = "tpu" if profile.name == "tpu" else "gpu"
    phases = accelerator_phases(sig, spec, profile, n, b, strategy, t2, v_step, batch, dev,
                                startup, step, LIMITS[neck], parts)  # fmt: skip
    breakdown: dict[str, Any] = {**parts, **dev.parts}
    device_per_sample = parts["device"] / b
    breakdown["saturation_batch"] = (
        parts["dispatch"] / device_per_sample if device_per_sample > 0 else 0.0
    )
    breakdown["launches"] = float(dev.launches)
    return phases, breakdown, kind, neck, dev
