"""An accelerator prediction's phases (init, first and steady iteration, validation passes)
and its note: which operators dominate, how the device time was obtained, which figures are
measured and which are priors."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from advisor.intervals import Interval
from advisor.prediction.step.traces import StepTrace
from advisor.prediction.timing import constants as C
from advisor.prediction.timing.device import DeviceTime
from advisor.prediction.timing.signature import WorkloadSignature
from advisor.prediction.timing.startup import DeviceStartup
from advisor.prediction.timing.types import around
from advisor.probes.result import PhaseTimes


def _add(*parts: Interval) -> Interval:
    return Interval(
        sum(p.value for p in parts), sum(p.low for p in parts), sum(p.high for p in parts)
    )


def dominant_labels(top: Sequence[tuple[str, float, float]], n: int = 3) -> str:
    """The first ``n`` of a kernel-model top list, e.g. "backward conv weight_grad 31%"."""
    return ", ".join(f"{label.split(' [')[0]} {share:.0%}" for label, _, share in top[:n])


def dominant(dev: DeviceTime, n: int = 3) -> str:
    """The operators with the most device time of ``dev``."""
    return dominant_labels(dev.top, n)


def accelerator_phases(
    sig: WorkloadSignature,
    spec: Any,
    profile: C.GenerationProfile,
    n: int,
    per_device: int,
    strategy: str,
    t2: Interval,
    validation_step: Interval,
    batch: int,
    dev: DeviceTime,
    startup: DeviceStartup,
    step: StepTrace | None,
    limit: str,
    parts: dict[str, float],
) -> PhaseTimes:
    """The phases on ``n`` devices of ``spec`` and the note that says how each was got."""
    nccl = C.NCCL_INIT_S + C.NCCL_INIT_PER_GPU_S * n if n > 1 else 0.0
    host_factor = 1.5 if sig.timed else C.UNTIMED_INIT_FACTOR
    init = _add(around(sig.init_s, host_factor), startup.cuda_init, around(nccl, 2.5))
    t1 = _add(t2, startup.warmup)
    steps = math.ceil(sig.n_val / batch) if sig.n_val > 0 else 0
    v2 = validation_step.scale(steps)
    v1 = _add(v2, startup.warmup.scale(0.1))
    kind = "TPU" if profile.name == "tpu" else "GPU"
    how = step.how if step is not None else "no operator trace"
    top = f" Dominated by: {dominant(dev)}." if dev.top else ""
    loader = "the DataLoader timed here" if sig.data_s_per_sample is not None else "a prior"
    host_init = (
        "this host's initialisation measured by the local probe"
        if sig.timed
        else f"host initialisation a prior ({C.UNTIMED_INIT_S:g} s x/{C.UNTIMED_INIT_FACTOR:g}:"
        " traced without a local timing)"
    )
    note = (
        f"{kind} model: {n}x {spec.name}, {strategy} data parallel, per-device batch "
        f"{per_device} ({how}). Device {parts['device'] * 1e3:.3g} ms per step by the "
        f"{dev.method}: {dev.basis}{_scaled(profile)}.{top} Host: {dev.launches} kernel launches x "
        f"{C.DISPATCH_S_PER_LAUNCH * 1e6:.0f} us (a prior, x/{C.DISPATCH_FACTOR:g})"
        f"{_launch_scale(sig.framework, strategy, profile)} = "
        f"{parts.get('dp_dispatch_per_replica', parts['dispatch']) * 1e3:.3g} ms a replica, "
        f"{parts['dispatch'] * 1e3:.3g} ms in all; input {parts['input'] * 1e3:.3g} ms ({loader}). "
        f"Init: {host_init}; {startup.note}"
        + (f"; NCCL set-up a prior ({nccl:g} s x/2.5)" if nccl else "")
        + f".{data_parallel_note(strategy, sig.framework, n, parts)} Limit: {limit}."
    )
    return PhaseTimes(init=init, t1=t1, t2=t2, v1=v1, v2=v2, source="modelled", note=note)


STRATEGY_TEXT = {
    "ddp": "one process per device (DistributedDataParallel): bucketed all-reduce overlapped "
    "with backward",
    "dp": "one process drives every replica ({what}): host work per replica in series, the "
    "batch split on the host",
    "xla": "one XLA program per step over the chips, gradients all-reduced over the ICI, one "
    "host feeding them",
}


def data_parallel_note(strategy: str, framework: str, n: int, parts: dict[str, float]) -> str:
    """The multi-device terms of one step, in words (empty on one device)."""
    if n <= 1:
        return ""
    what = "Keras MirroredStrategy" if framework == "keras" else "nn.DataParallel"
    ms = {k: v * 1e3 for k, v in parts.items()}
    text = f" Data parallel, {STRATEGY_TEXT[strategy].format(what=what)}: all-reduce "
    total = ms.get("dp_allreduce_total", ms["allreduce"])
    text += f"{ms['allreduce']:.3g} ms shown of {total:.3g} ms"
    if ms.get("dp_allreduce_hidden"):
        text += f" ({ms['dp_allreduce_hidden']:.3g} ms hidden behind backward)"
    if ms.get("dp_host_serial"):
        text += f"; host work of the other {n - 1} replicas in series {ms['dp_host_serial']:.3g} ms"
    return text + f"; replica overhead and wait {ms['replica']:.3g} ms."


def _scaled(profile: C.GenerationProfile) -> str:
    """The generation's fitted device scale, in words (empty at 1)."""
    if profile.device_scale == 1.0:
        return ""
    return f", x {profile.device_scale:g} ({profile.device_scale_source})"


def _launch_scale(framework: str, strategy: str, profile: C.GenerationProfile) -> str:
    """The launch cost's scales besides eager PyTorch's 60 us, in words."""
    out = ""
    if profile.dispatch_scale != 1.0:
        out += f" x {profile.dispatch_scale:g} (a compiled program)"
    if framework == "keras" and strategy != "xla":
        out += f" x {C.GRAPH_DISPATCH_SCALE:g} (TensorFlow's executor, a prior)"
    return out
