"""Accelerator targets (GPUs, TPUs): the device time of the traced step plus host dispatch,
input pipeline and, for several devices, the data-parallel step of the framework (issue #47).

Steady iteration on ``n`` devices with global batch ``B`` (per-device batch ``b = ceil(B/n)``)::

    t_device   = the step's device time at b (timing.device: the GPU kernel model on a GPU,
                 a roofline over the trace's FLOPs and bytes on a TPU) x the generation's
                 fitted device scale (Kepler, Pascal: constants.GenerationProfile)
    t_dispatch = kernel launches of the step x 60 us          # eager host launches (prior)
    t2 = max(t_dispatch, t_device) + t_input + t_allreduce + t_replica

The data-parallel terms depend on how the framework drives the devices (``STRATEGIES``):

- ``ddp`` (PyTorch DistributedDataParallel): one process per device, so host dispatch and
  the input pipeline run in parallel (``b`` samples each); the gradients are all-reduced in
  DDP's buckets as backward produces them: only what outlasts ``DDP_OVERLAP_SHARE`` of the
  device step shows, and never less than the last bucket's all-reduce; plus DDP's own cost
  per step and the wait for the slowest replica.
- ``dp`` (one process drives every replica: Keras/TensorFlow MirroredStrategy, PyTorch
  ``nn.DataParallel``): the host's per-replica work runs in series (``SERIAL_REPLICA_SHARE``
  of one replica's dispatch per extra replica), the whole batch goes through one input
  pipeline and is split on the host; Keras all-reduces the gradients after the backward pass
  (one pack, not overlapped); ``nn.DataParallel`` broadcasts the parameters from and reduces
  the gradients to the first GPU every step.
- ``xla`` (a TPU): one compiled program per step (dispatch of a graph), the gradients
  all-reduced over the chips' interconnect inside the program; one host feeds every chip.

The all-reduce is ``timing.collective`` (bytes, devices, link) over the machine's topology
(``providers.catalog.topology``: NVLink or PCIe, devices per host link). Validation runs the
forward phase at the same per-device batch. The CPU probe's timing never enters: only its
trace, its loader time and its host initialisation do.
"""

from __future__ import annotations

import math
from typing import Any

from advisor.intervals import Interval
from advisor.prediction.step.placement import Placement, place
from advisor.prediction.step.traces import StepTrace
from advisor.prediction.timing import constants as C
from advisor.prediction.timing.collective import Link, allreduce_seconds, bucketed_seconds
from advisor.prediction.timing.device import DeviceTime, device_time
from advisor.prediction.timing.signature import WorkloadSignature
from advisor.prediction.timing.startup import DeviceStartup
from advisor.probes.result import PhaseTimes
from advisor.providers.catalog import AcceleratorSpec, InstanceType

STRATEGIES = ("ddp", "dp", "xla")
# Gradient-synchronisation traffic per step relative to one ring all-reduce, by the plan's
# sharding (ZeRO paper, Rajbhandari et al. 2020, section 7: ZeRO-1/2 reduce-scatter the
# gradients and all-gather the parameters, the same volume as an all-reduce; ZeRO-3 / FSDP
# all-gathers the parameters again in the backward pass: 1.5x).
SHARDING_TRAFFIC = {"none": 1.0, "optimizer": 1.0, "gradients": 1.0, "parameters": 1.5}


def default_strategy(framework: str, tpu: bool = False) -> str:
    """The data-parallel strategy a framework's users normally get."""
    if tpu:
        return "xla"
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


def link_of(spec: AcceleratorSpec, machine: InstanceType | None = None) -> Link:
    """Achieved link figures of ``machine``'s devices (nominal x ``LINK_EFFICIENCY``), its
    topology from the catalog (``providers.catalog.topology``)."""
    from advisor.prediction.timing.collective import link_from
    from advisor.providers.catalog.topology import spec_link, topology

    if machine is None:
        return link_from(spec.link_gbs, spec_link(spec), 2 if "k80" in spec.name.lower() else 1)
    top = topology(machine.provider, machine.instance_type, machine.accelerator, spec)
    return link_from(spec.link_gbs, top.link, top.devices_per_link, top.source)


def buckets(gradient_bytes: float) -> int:
    """DDP's gradient buckets (one collective each): 1 MiB first, then 25 MiB each."""
    rest = max(0.0, gradient_bytes - C.DDP_FIRST_BUCKET_BYTES)
    return 1 + math.ceil(rest / C.DDP_BUCKET_BYTES)


def last_bucket(gradient_bytes: float) -> float:
    """The bytes of the bucket DDP reduces last (the first layers': 1 MiB, then 25 MiB
    buckets, the remainder last)."""
    first = min(gradient_bytes, float(C.DDP_FIRST_BUCKET_BYTES))
    full, tail = divmod(max(0.0, gradient_bytes - first), float(C.DDP_BUCKET_BYTES))
    return tail if tail > 0 else (float(C.DDP_BUCKET_BYTES) if full else first)


def ddp_allreduce(gradient_bytes: float, n: int, link: Link, device_s: float) -> dict[str, float]:
    """DDP's bucketed all-reduce: its total, the part hidden behind backward, what shows."""
    total = bucketed_seconds(gradient_bytes, buckets(gradient_bytes), n, link)
    last = allreduce_seconds(last_bucket(gradient_bytes), n, link)
    exposed = max(last, total - C.DDP_OVERLAP_SHARE * device_s)
    return {"allreduce_total": total, "allreduce_hidden": total - exposed, "allreduce": exposed}


def iteration_parts(
    sig: WorkloadSignature,
    dev: DeviceTime,
    link: Link,
    profile: C.GenerationProfile,
    at: Placement,
    strategy: str,
    forward_only: bool = False,
    comm_factor: float = 1.0,
) -> dict[str, float]:
    """Seconds of each part of one iteration (training step, or forward pass if
    ``forward_only``) at the placement ``at`` (``n`` devices) under ``strategy``, with the terms behind them.
    ``comm_factor``: the gradient traffic relative to one all-reduce (sharded parameters add
    the forward's all-gather: 1.5)."""
    n, batch, b = at.devices, at.batch, at.per_device
    device = (dev.forward if forward_only else dev.step).value * profile.device_scale
    launches = dev.forward_launches if forward_only else dev.launches
    one = launches * C.DISPATCH_S_PER_LAUNCH * profile.dispatch_scale
    if sig.framework == "keras" and strategy != "xla":
        one *= C.GRAPH_DISPATCH_SCALE  # TensorFlow launches from its C++ executor
    host = sig.data_s_per_sample if sig.data_s_per_sample is not None else C.HOST_S_PER_SAMPLE
    h2d = C.H2D_BYTES_PER_S / (link.devices_per_link if n > 1 else 1)
    terms: dict[str, float] = {"dispatch_per_replica": one, "replicas": float(n)}
    if strategy == "ddp":  # one process, one loader per device
        dispatch, input_s = one, b * (host + sig.input_bytes_per_sample / h2d)
    else:  # one process: the whole batch through one pipeline, replicas driven in series
        serial = 0.0 if strategy == "xla" else C.SERIAL_REPLICA_SHARE
        dispatch = one * (1 + serial * (n - 1))
        input_s = batch * host + b * sig.input_bytes_per_sample / h2d
        terms["host_serial"] = dispatch - one
    allreduce = replica = 0.0
    grad = comm_factor * sig.gradient_bytes
    if n > 1 and not forward_only:
        if strategy == "ddp":
            terms.update(ddp_allreduce(grad, n, link, device))
            allreduce, replica = terms["allreduce"], C.DDP_OVERHEAD_S
        elif strategy == "dp" and sig.framework == "torch":  # nn.DataParallel via GPU 0
            allreduce = 2 * (n - 1) * grad / link.bytes_per_s
        else:  # MirroredStrategy / XLA: one all-reduce after backward
            allreduce = allreduce_seconds(grad, n, link)
        terms["allreduce_total"] = terms.get("allreduce_total", allreduce)
    if n > 1:
        if strategy == "dp" and sig.framework == "torch":  # scatter the batch from GPU 0
            allreduce += batch * sig.input_bytes_per_sample * (n - 1) / n / link.bytes_per_s
        replica += C.STRAGGLER_CV * max(dispatch, device) * math.sqrt(2 * math.log(n))
    return {
        "device": device,
        "dispatch": dispatch,
        "input": input_s,
        "allreduce": allreduce,
        "replica": replica,
        **{f"dp_{k}": v for k, v in terms.items()},
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
    placement: Placement | None = None,
) -> tuple[PhaseTimes, dict[str, float], str, str, DeviceTime]:
    """Phase times on an accelerator machine from the step's trace at the per-device batch
    (``step``); returns phases, breakdown, kind, bottleneck and the device time. The global
    ``batch`` is split by the row's ``placement`` (made here from ``batch``, ``plan`` and
    ``nodes`` when not given: the benchmarks).

    ``strategy`` None means the framework's usual one: "dp" (one process drives every
    replica, one input pipeline: Keras / tf.distribute.MirroredStrategy) for Keras, "ddp"
    (DistributedDataParallel, one process and input pipeline per device) for PyTorch.
    ``nodes`` > 1: that many machines under torchrun, the gradients' collective hierarchical
    (``advisor.prediction.timing.nodes``, issue #49).
    """
    from advisor.prediction.timing.phases import accelerator_phases

    profile = generation_profile(spec)
    tpu = profile.name == "tpu"
    strategy = "xla" if tpu else strategy or default_strategy(sig.framework)
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, but got {strategy!r}")
    at = placement or place(machine, batch, plan, nodes)  # the row's one split of the batch
    n, b, nodes = at.devices, at.per_device, at.nodes
    dev = device_time(step, spec, profile, sig, b)
    link = link_of(spec, machine)
    comm = SHARDING_TRAFFIC.get(getattr(plan, "sharding", "none"), 1.0)
    parts = iteration_parts(sig, dev, link, profile, at, strategy, comm_factor=comm)
    if nodes > 1:  # issue #49: the collective inside each machine, then across them
        from advisor.prediction.timing.nodes import across_machines

        parts = across_machines(parts, sig.gradient_bytes, machine, nodes, link,
                                buckets(sig.gradient_bytes), comm,
                                getattr(plan, "replicate", "none") == "nodes")  # fmt: skip
    fwd = iteration_parts(sig, dev, link, profile, at, strategy, forward_only=True)
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
