"""Accelerator targets (GPUs, TPUs): roofline per device plus host dispatch, input pipeline
and, for several devices, synchronous data-parallel costs.

Steady iteration on ``n`` devices with global batch ``B`` (per-device batch ``b = B / n``)::

    t_compute  = flops_per_sample * b / (peak * efficiency)        # saturated device
    t_memory   = (traffic_per_sample * b + weight_traffic) / (bandwidth * 0.75)
    t_dispatch = ops_per_iteration * 30 us                          # eager host launches
    t2 = max(t_dispatch, t_compute + t_memory) + t_input + t_allreduce + t_replica

Compute and memory add (per-kernel roofline: convolutions and matmuls are compute-bound,
normalisation and element-wise kernels memory-bound, and they run one after the other); the
efficiencies are fitted to published GPU throughputs (docs/calibration.md). The ``max`` with
the host dispatch makes a small model need a large per-device batch ``b_sat`` before the
device, not the host, is the bottleneck. Ring all-reduce:
``2 (n-1)/n * gradient_bytes / link + 2 (n-1) * hop_latency`` (DDP, one process per device).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.probes.perf import constants as C
from advisor.probes.perf.signature import WorkloadSignature
from advisor.probes.perf.types import around, combine
from advisor.probes.result import Interval, PhaseTimes
from advisor.providers.catalog import AcceleratorSpec, InstanceType

STRATEGIES = ("ddp", "dp")


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
class DeviceFigures:
    """Per-device peak figures actually used (after the K80 per-board correction)."""

    peak_flops: float  # FLOP/s of the precision used
    memory_bytes_per_s: float
    link_bytes_per_s: float  # achieved, per device, one direction
    link_kind: str
    shared_board: bool  # two GPUs share one board's PCIe link (K80)
    precision: str


def device_figures(
    spec: AcceleratorSpec, profile: C.GenerationProfile, precision: str | None = None
) -> DeviceFigures:
    """Peak compute, memory and link figures of one device of ``spec``."""
    precision = precision or profile.precision
    peaks = {
        "fp32": spec.fp32_tflops,
        "tf32": spec.tf32_tflops or spec.fp32_tflops,
        "bf16": spec.bf16_tflops or spec.fp16_tflops or spec.fp32_tflops,
    }
    if precision not in peaks:
        raise ValueError(f"precision must be one of {sorted(peaks)}, but got {precision!r}")
    peak = peaks[precision]
    bandwidth = spec.memory_bandwidth_gbs
    # A K80 board holds two GK210 GPUs and clouds sell each as one GPU; if the catalog gives
    # board figures (8.7 TFLOP/s, 480 GB/s), halve them.
    shared = "k80" in spec.name.lower()
    if shared and spec.fp32_tflops > 6:
        peak, bandwidth = peak / 2, bandwidth / 2
    link = spec.link.lower()
    kind = "nvlink" if "nvlink" in link else "ici" if "ici" in link else "pcie"
    link_bw = spec.link_gbs * 1e9 * C.LINK_EFFICIENCY[kind]
    return DeviceFigures(peak * 1e12, bandwidth * 1e9, link_bw, kind, shared, precision)


def _iteration_parts(
    sig: WorkloadSignature,
    dev: DeviceFigures,
    profile: C.GenerationProfile,
    n: int,
    batch: int,
    strategy: str,
    forward_only: bool = False,
) -> dict[str, float]:
    """Seconds of each part of one iteration (training step, or forward pass if
    ``forward_only``) on ``n`` devices."""
    b = math.ceil(batch / n)
    share = C.FORWARD_FLOP_SHARE if forward_only else 1.0
    achieved = dev.peak_flops * profile.efficiency
    compute = sig.flops_per_sample * share * b / achieved
    traffic = sig.memory_bytes_per_sample * b * share + sig.weight_bytes_per_iteration * share
    memory = traffic / (dev.memory_bytes_per_s * C.MEMORY_EFFICIENCY)
    dispatch = sig.ops_per_iteration * share * C.DISPATCH_S_PER_OP * profile.dispatch_scale
    per_process = b if strategy == "ddp" else batch
    if strategy == "dp":
        dispatch *= 1 + C.DP_DISPATCH_SERIAL * (n - 1)
    host = sig.data_s_per_sample if sig.data_s_per_sample is not None else C.HOST_S_PER_SAMPLE
    h2d = C.H2D_BYTES_PER_S / (2 if dev.shared_board and n > 1 else 1)
    input_s = per_process * (host + sig.input_bytes_per_sample / h2d)
    allreduce = replica = 0.0
    if n > 1:
        link = dev.link_bytes_per_s / (2 if dev.shared_board else 1)
        hops = 2 * (n - 1) * C.HOP_LATENCY_S[dev.link_kind]
        if strategy == "ddp" and not forward_only:
            allreduce = 2 * (n - 1) / n * sig.gradient_bytes / link + hops
            replica = C.DDP_OVERHEAD_S
        elif strategy == "dp":
            scatter = batch * sig.input_bytes_per_sample * (n - 1) / n / link
            weights = 0.0 if forward_only else 2 * (n - 1) * sig.gradient_bytes / link
            allreduce = scatter + weights + hops
        replica += C.STRAGGLER_CV * max(dispatch, compute + memory) * math.sqrt(2 * math.log(n))
    return {
        "compute": compute,
        "memory": memory,
        "dispatch": dispatch,
        "input": input_s,
        "allreduce": allreduce,
        "replica": replica,
    }


def iteration_time(parts: dict[str, float]) -> float:
    """Total of an iteration's parts: device work overlaps host dispatch (async launches)."""
    return (
        max(parts["dispatch"], parts["compute"] + parts["memory"])
        + parts["input"]
        + parts["allreduce"]
        + parts["replica"]
    )


def bottleneck(parts: dict[str, float]) -> str:
    """The part that limits the iteration: "dispatch" when the host's op launches outlast
    the device work, else the larger of "compute" and "memory"; or "input", "allreduce",
    "replica" when one of those is larger still."""
    device_s = parts["compute"] + parts["memory"]
    if parts["dispatch"] >= device_s:
        device, busy = "dispatch", parts["dispatch"]
    else:
        device = "compute" if parts["compute"] >= parts["memory"] else "memory"
        busy = device_s
    others = {k: parts[k] for k in ("input", "allreduce", "replica")}
    others[device] = busy
    return max(others, key=lambda k: others[k])


LIMITS = {
    "dispatch": "host-bound (op dispatch): a faster GPU would not help",
    "input": "host-bound (input pipeline): a faster GPU would not help",
    "compute": "GPU compute-bound",
    "memory": "GPU memory-bandwidth-bound",
    "allreduce": "communication-bound: fewer or better-linked GPUs would help",
    "replica": "replica overhead-bound: fewer GPUs would help",
    "cpu": "CPU-bound",
}


def host_bound(limit: str) -> bool:
    """Whether a prediction sits on the host floor (dispatch or input), where the device's
    speed does not matter and the host constants (priors) decide the time."""
    return limit in ("dispatch", "input")


def _sum_interval(parts: list[tuple[float, float]]) -> Interval:
    """Sum of independent positive parts, each ``(value, factor)``, bounds added."""
    value = sum(v for v, _ in parts)
    low = sum(v / max(1.0, f) for v, f in parts)
    high = sum(v * max(1.0, f) for v, f in parts)
    return Interval(value, low, high)


def predict_accelerator(
    sig: WorkloadSignature,
    machine: InstanceType,
    spec: AcceleratorSpec,
    batch: int,
    strategy: str | None = None,
    precision: str | None = None,
) -> tuple[PhaseTimes, dict[str, float], str, str]:
    """Phase times on an accelerator machine; returns phases, breakdown, kind, bottleneck.

    ``strategy`` None means the framework's usual one: "dp" (one process drives every
    replica, one input pipeline: Keras / tf.distribute.MirroredStrategy) for Keras, "ddp"
    (DistributedDataParallel, one process and input pipeline per device) for PyTorch.
    """
    strategy = strategy or default_strategy(sig.framework)
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, but got {strategy!r}")
    profile = generation_profile(spec)
    dev = device_figures(spec, profile, precision)
    n = machine.accelerator_count
    parts = _iteration_parts(sig, dev, profile, n, batch, strategy)
    t2 = iteration_time(parts)
    device_s = parts["compute"] + parts["memory"]
    dispatch_share = parts["dispatch"] / t2 if parts["dispatch"] >= device_s else 0.0
    input_share = parts["input"] / t2
    # The host floor's own uncertainty, weighted by its share: the per-op launch cost is a
    # prior (x/2) even when the op count was traced; the input pipeline runs on the cloud
    # host, not this one (x/1.6 when timed here, x/3 when a prior).
    input_factor = C.OTHER_CPU_FACTOR if sig.data_s_per_sample is not None else C.INPUT_FACTOR
    factors = [
        profile.model_factor,
        C.DISPATCH_FACTOR ** (dispatch_share * (1.5 if not sig.ops_measured else 1.0)),
        input_factor**input_share,
    ]
    if not sig.flops_counted:
        factors += [C.NO_FLOPS_FACTOR, sig.t2_spread]
    f = combine(*factors)
    neck = bottleneck(parts)
    kind = "tpu" if profile.name == "tpu" else "gpu"

    fwd = _iteration_parts(sig, dev, profile, n, batch, strategy, forward_only=True)
    if sig.n_val > 0:
        v2 = math.ceil(sig.n_val / batch) * iteration_time(fwd)
    else:
        v2 = (sig.v2_s or 0.0) * t2 / sig.t2_s
    v1_host = max(0.0, (sig.v1_s or 0.0) - (sig.v2_s or 0.0))
    eval_warmup = 0.1 * profile.warmup_s
    pf = profile.prior_factor
    nccl = C.NCCL_INIT_S + C.NCCL_INIT_PER_GPU_S * n if n > 1 else 0.0
    host_warmup = max(0.0, sig.t1_s - sig.t2_s)
    phases = PhaseTimes(
        init=_sum_interval([(sig.init_s, 1.5), (profile.cuda_init_s + nccl, pf)]),
        t1=_sum_interval([(t2, f), (host_warmup, 1.5), (profile.warmup_s, pf)]),
        t2=around(t2, f),
        v1=_sum_interval([(v2, f), (v1_host, 1.5), (eval_warmup, pf)]),
        v2=around(v2, f),
        source="modelled",
        note=(
            f"{kind.upper()} model: {n}x {spec.name} ({profile.name}, "
            f"{dev.precision} peak {dev.peak_flops / 1e12:.1f} TFLOP/s x efficiency "
            f"{profile.efficiency}), {strategy} data parallel, per-device batch "
            f"{math.ceil(batch / n)}; init and first iteration are priors "
            f"(x/{pf:g}), not computed. Limit: {LIMITS[neck]}."
        ),
    )
    achieved = sig.flops_per_sample * math.ceil(batch / n)
    busy = max(parts["dispatch"], device_s)
    breakdown = dict(parts)
    breakdown["utilisation"] = achieved / (dev.peak_flops * busy) if busy > 0 else 0.0
    per_sample = device_s / math.ceil(batch / n)
    breakdown["saturation_batch"] = parts["dispatch"] / per_sample if per_sample > 0 else 0.0
    return phases, breakdown, kind, neck
