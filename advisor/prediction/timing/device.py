"""The device time of one traced step on one accelerator (issue #26).

- An NVIDIA GPU with kernel-model figures: the GPU kernel model's prediction of the step's
  operators (``advisor.prediction.kernels.predict_trace``: measured kernel latencies of five GPUs,
  spec extrapolation for the others), with its 80 % interval, the forward phase for validation
  and the operators that dominate. The CPU probe's timing never enters it, only the trace.
- A TPU, or an accelerator without kernel-model figures: a roofline over the same trace's
  FLOPs and bytes at the generation's efficiency (a prior), ``timing.constants``.
- A generation with a whole-model profile (Kepler): the same roofline at the achieved shares
  of peak FLOP/s and bandwidth fitted on published whole-model training rows
  (``roofline_seconds``; ``benchmarks/multi_gpu.py``).
- Without a trace (it could not be taken): that roofline over the probe's counted FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from advisor.errors import AdvisorError
from advisor.intervals import Interval
from advisor.prediction.memo import Memo
from advisor.prediction.step.traces import StepTrace
from advisor.prediction.timing import constants as C
from advisor.prediction.timing.signature import WorkloadSignature
from advisor.prediction.timing.types import around


@dataclass(frozen=True)
class DeviceTime:
    """Device seconds of one training step (``step``) and of its forward pass (``forward``,
    what a validation batch runs), the kernels it launches, and how it was obtained
    (``method``: "kernel model" or "roofline"; ``basis``: one line; ``limit``: "device", or
    "compute"/"memory" for a roofline). ``top``: the device time by phase and kind
    ("backward conv", seconds, share), largest first."""

    step: Interval
    forward: Interval
    launches: int
    forward_launches: int
    method: str
    basis: str
    limit: str
    notes: tuple[str, ...] = ()
    top: tuple[tuple[str, float, float], ...] = ()
    parts: dict[str, float] = field(default_factory=dict)


# (the trace's content, the GPU's figures) -> (its step on that GPU, its top operators)
_STEPS: Memo[Any] = Memo("step time by trace and GPU", bound=512)


def kernel_gpu(spec: Any) -> Any | None:
    """The kernel model's ``GpuSpec`` for a catalog accelerator, or None when it has no
    kernel-model figures (TPUs, other vendors, a spec row without SM count and clocks)."""
    from advisor.prediction.kernels.gpus import GpuSpec, gpu_spec

    try:
        return GpuSpec.from_accelerator(spec)
    except (AdvisorError, TypeError, ValueError):
        pass
    if getattr(spec, "vendor", "NVIDIA").upper() != "NVIDIA":
        return None
    try:  # a spec row without the figures (an older catalog): the catalog's row of that name
        return gpu_spec(str(spec.name))
    except AdvisorError:
        return None


def _identity(step: StepTrace) -> tuple[Any, ...]:
    t = step.trace
    return (t.workload, t.framework, t.batch_size, t.executed, len(t.operators), t.launches,
            round(t.flops), step.precision, step.how)  # fmt: skip


def _kernel_step(step: StepTrace, gpu: Any) -> tuple[Any, tuple[tuple[str, float, float], ...]]:
    """The kernel model's step prediction on ``gpu`` and the step's device time grouped by
    phase and kind ("backward conv", ...), largest first, memoised."""
    key = (*_identity(step), gpu.name, gpu.fp32_tflops, gpu.memory_bandwidth_gbs)
    return _STEPS.get_or_make(key, lambda: _kernel_step_of(step, gpu))


def _kernel_step_of(step: StepTrace, gpu: Any) -> tuple[Any, tuple[tuple[str, float, float], ...]]:
    from advisor.prediction.kernels import predict_trace_times

    ops = step.trace.operators
    tf32 = step.precision == "tf32"
    preds, op_times = predict_trace_times(step.trace, [gpu], tf32_matmul=tf32)
    pred, times = preds[gpu.name], op_times.value[:, 0]  # the operators' times computed once
    groups: dict[str, float] = {}
    for op, t in zip(ops, times, strict=True):
        name = op.kind if op.kind == op.phase else f"{op.phase} {op.kind}"
        groups[name] = groups.get(name, 0.0) + float(t) * op.count
    total = sum(groups.values()) or 1.0
    ranked = sorted(groups.items(), key=lambda kv: kv[1], reverse=True)
    return pred, tuple((name, t, t / total) for name, t in ranked)


def _launches(step: StepTrace | None) -> tuple[int, int]:
    if step is None:
        return C.DEFAULT_LAUNCHES_PER_STEP, round(C.DEFAULT_LAUNCHES_PER_STEP / 3)
    by_phase = step.trace.launches_by_phase()
    return step.trace.launches, by_phase.get("forward", 0)


def device_time(
    step: StepTrace | None,
    spec: Any,
    profile: C.GenerationProfile,
    sig: WorkloadSignature,
    batch: int,
) -> DeviceTime:
    """Device seconds of one step at the per-device ``batch`` on the accelerator ``spec``."""
    launches, forward_launches = _launches(step)
    gpu = kernel_gpu(spec) if profile.name != "tpu" else None
    if gpu is not None and step is not None and not profile.whole_model:
        pred, groups = _kernel_step(step, gpu)
        k = step.scale
        forward = pred.by_phase.get("forward", Interval.exact(0.0))
        notes = list(pred.notes)
        if k != 1.0:
            notes.insert(0, step.how)
        return DeviceTime(
            step=pred.total.scale(k),
            forward=forward.scale(k),
            launches=launches,
            forward_launches=forward_launches,
            method="kernel model",
            basis=pred.basis,
            limit="device",
            notes=tuple(notes),
            top=tuple((name, s * k, share) for name, s, share in groups),
        )
    return _roofline(step, spec, profile if profile.efficiency else C.UNKNOWN_GENERATION, sig,
                     batch, launches, forward_launches, no_kernels=gpu is None)  # fmt: skip


def peak_flops(spec: Any, precision: str) -> float:
    """FLOP/s of ``spec`` in ``precision`` (fp32, tf32, bf16, fp16)."""
    peaks = {
        "fp32": spec.fp32_tflops,
        "tf32": spec.tf32_tflops or spec.fp32_tflops,
        "bf16": spec.bf16_tflops or spec.fp16_tflops or spec.fp32_tflops,
        "fp16": spec.fp16_tflops or spec.fp32_tflops,
    }
    if precision not in peaks:
        raise ValueError(f"precision must be one of {sorted(peaks)}, but got {precision!r}")
    return float(peaks[precision]) * 1e12


def roofline_seconds(
    flops: float, traffic: float, spec: Any, profile: C.GenerationProfile, precision: str = "fp32"
) -> tuple[float, float]:
    """(compute, memory) seconds of ``flops`` and ``traffic`` bytes on ``spec``: FLOPs at
    ``efficiency`` x ``sustained_clock`` x the peak, bytes at the profile's share of the
    bandwidth (``memory_efficiency``, else ``ROOFLINE_MEMORY_EFFICIENCY``, a prior)."""
    peak = peak_flops(spec, precision) * (profile.efficiency or 1.0) * profile.sustained_clock
    share = profile.memory_efficiency or C.ROOFLINE_MEMORY_EFFICIENCY
    return flops / peak, traffic / (spec.memory_bandwidth_gbs * 1e9 * share)


def _roofline(
    step: StepTrace | None,
    spec: Any,
    profile: C.GenerationProfile,
    sig: WorkloadSignature,
    batch: int,
    launches: int,
    forward_launches: int,
    no_kernels: bool,
) -> DeviceTime:
    precision = profile.precision
    if step is not None and step.precision != "fp32" and profile.name != "tpu":
        precision = step.precision
    if step is not None:
        ops = step.trace.operators
        flops = sum(o.flops * o.count for o in ops) * step.scale
        traffic = sum(o.bytes * o.count for o in ops) * step.scale
        fwd_flops = sum(o.flops * o.count for o in ops if o.phase == "forward") * step.scale
        fwd_bytes = sum(o.bytes * o.count for o in ops if o.phase == "forward") * step.scale
        source = f"the operator trace's FLOPs and bytes ({step.how})"
    else:
        flops = sig.flops_per_sample * batch
        traffic = flops / C.PRIOR_FLOPS_PER_BYTE
        fwd_flops, fwd_bytes = flops * C.FORWARD_FLOP_SHARE, traffic * C.FORWARD_FLOP_SHARE
        source = "no operator trace: the probe's FLOPs, 20 FLOP per byte (prior)"
    compute, memory = roofline_seconds(flops, traffic, spec, profile, precision)
    f = profile.model_factor
    what = "TPU" if profile.name == "tpu" else spec.name
    why = "" if not no_kernels or profile.name == "tpu" else " (no kernel-model figures)"
    if profile.whole_model:
        basis = (
            f"{profile.name} whole-model profile: {profile.efficiency:g} x "
            f"{profile.sustained_clock:.2f} (sustained clock, prior) x {what}'s {precision} peak and "
            f"{profile.memory_efficiency:g} of memory bandwidth ({profile.device_scale_source}), "
            f"over {source}"
        )
    else:
        basis = (
            f"roofline{why}: {precision} peak x efficiency {profile.efficiency} (prior) and "
            f"{C.ROOFLINE_MEMORY_EFFICIENCY} of memory bandwidth (prior) for {what}, over {source}"
        )
    return DeviceTime(
        step=around(compute + memory, f),
        forward=around(sum(roofline_seconds(fwd_flops, fwd_bytes, spec, profile, precision)), f),
        launches=launches,
        forward_launches=forward_launches,
        method="roofline",
        basis=basis,
        limit="compute" if compute >= memory else "memory",
        parts={"compute": compute, "memory": memory},
    )
