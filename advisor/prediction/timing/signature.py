"""What the performance model takes from one local probe: the workload's device-independent
signature (FLOPs per sample, parameters, input bytes, the loader's time) and the local
timings with their spread. The step's operators are the probe's operator trace
(``step.traces``), read apart."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from advisor.errors import AdvisorError
from advisor.prediction.step.ready import UNTIMED_KEY as UNTIMED_KEY
from advisor.prediction.step.ready import is_untimed as is_untimed
from advisor.prediction.timing import constants as C
from advisor.probes.result import ProbeResult


@dataclass(frozen=True)
class WorkloadSignature:
    """Per-sample and per-iteration quantities of a workload, taken from a probe.

    ``t2_s`` is the local robust steady iteration (median of iterations 2..k) and
    ``t2_spread`` the measurement's multiplicative spread (>= 1, from the 10th/90th
    percentiles); ``timed`` is False when the model was traced without a local timing (the
    CPU step is then a stand-in: ``untimed``). ``flops_per_sample`` counts a full training
    step (forward + backward); ``flops_counted`` is False when it had to be estimated from the
    CPU time. ``data_s_per_sample`` is the DataLoader's time measured here (None: a prior).
    """

    workload: str
    framework: str
    batch_size: int
    threads: int
    device: str
    t2_s: float
    t2_spread: float
    t1_s: float
    init_s: float
    v1_s: float | None
    v2_s: float | None
    n_val: int
    flops_per_sample: float
    flops_counted: bool
    parameters: int
    gradient_bytes: float
    input_bytes_per_sample: float
    data_s_per_sample: float | None
    timed: bool = True

    def __post_init__(self) -> None:
        if self.t2_s <= 0 or self.flops_per_sample <= 0:
            raise ValueError(
                f"t2_s and flops_per_sample must be > 0, but got t2_s={self.t2_s}, "
                f"flops_per_sample={self.flops_per_sample}"
            )
        if self.t2_spread < 1:
            raise ValueError(f"t2_spread must be >= 1, but got {self.t2_spread}")


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def steady_stats(iterations: tuple[float, ...]) -> tuple[float, float]:
    """Median of iterations 2..k and the multiplicative spread max(q90/median, median/q10)."""
    steady = [t for t in iterations[1:] if t > 0]
    if not steady:
        raise ValueError(f"no positive steady iterations in {iterations}")
    median = statistics.median(steady)
    if len(steady) < 3:
        return median, 1.0
    spread = max(_quantile(steady, 0.9) / median, median / _quantile(steady, 0.1))
    return median, max(1.0, spread)


def _input_bytes(workload: str) -> float:
    """fp32 bytes of one input sample of a built-in workload (0 when unknown)."""
    try:
        from advisor.search_spaces.workloads import get

        shape = get(workload).input_shape
    except AdvisorError:
        return 0.0
    return 4.0 * math.prod(shape)


def signature(probe: ProbeResult) -> WorkloadSignature:
    """Extract the device-independent workload signature from an ok probe.

    Optional keys of ``probe.fingerprint`` refine it when present: ``data_s`` (the
    DataLoader's CPU seconds per batch, measured here: ``step.loader``),
    ``input_bytes_per_sample`` (measured by the probe), ``untimed`` (the model was traced
    without a local timing: ``advisor.evaluation.untimed``).
    """
    if not probe.ok:
        raise AdvisorError(
            f"The probe of {probe.workload} at batch {probe.batch_size} failed "
            f"({probe.status}: {probe.error}); it cannot be extrapolated.",
            "fix the failure or pick a smaller batch size, then probe again.",
        )
    t2, spread = steady_stats(probe.iteration_s)
    fp = probe.fingerprint
    if probe.flops_per_iteration and probe.flops_per_iteration > 0:
        flops = probe.flops_per_iteration / probe.batch_size
        counted = True
    else:  # estimate from the achieved CPU throughput (prior per core)
        flops = t2 * probe.threads * C.CPU_ACHIEVED_FLOPS_PER_CORE / probe.batch_size
        counted = False
    parameters = int(probe.parameters or 0)
    grad_bytes = float(probe.gradient_bytes or 4 * parameters)
    data_s = fp.get("data_s")
    in_bytes = fp.get("input_bytes_per_sample")
    in_bytes = float(in_bytes) if in_bytes is not None else _input_bytes(probe.workload)
    v = probe.validation_s
    return WorkloadSignature(
        workload=probe.workload,
        framework=probe.framework,
        batch_size=probe.batch_size,
        threads=max(1, probe.threads),
        device=probe.device,
        t2_s=t2,
        t2_spread=spread,
        t1_s=probe.iteration_s[0],
        init_s=max(0.0, probe.init_s),
        v1_s=v[0] if len(v) >= 1 else None,
        v2_s=v[1] if len(v) >= 2 else (v[0] if v else None),
        n_val=probe.n_val,
        flops_per_sample=flops,
        flops_counted=counted,
        parameters=parameters,
        gradient_bytes=grad_bytes,
        input_bytes_per_sample=in_bytes,
        data_s_per_sample=float(data_s) / probe.batch_size if data_s is not None else None,
        timed=not is_untimed(probe),
    )


def workload_signature(probe: ProbeResult) -> str:
    """A key for "the same work" in the calibration ledger: workload, framework, FLOPs per
    sample (3 significant digits) and parameter count. Batch size and machine are not part
    of it: the ledger's correction is per device class and carries across batch sizes."""
    flops = (probe.flops_per_iteration or 0.0) / max(1, probe.batch_size)
    return f"{probe.workload}|{probe.framework}|{flops:.3g}|{int(probe.parameters or 0)}"
