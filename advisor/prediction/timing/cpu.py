"""CPU targets: scale the local CPU probe by thread count (Amdahl) and per-core speed.

The local steady iteration ``t2`` at ``n0`` threads and batch ``B0`` is split into a fixed
per-iteration host overhead and a per-sample part that parallelises with fraction ``p``:
``t2(n, B) = (fixed + B * s1 * ((1 - p) + p / n)) / speed``, where ``s1`` is the one-thread
per-sample time and ``speed`` the target's per-core speed relative to this machine.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from advisor.prediction.timing import constants as C
from advisor.prediction.timing.signature import WorkloadSignature
from advisor.prediction.timing.types import around, combine
from advisor.probes.result import PhaseTimes
from advisor.providers.catalog import InstanceType


@dataclass(frozen=True)
class CpuFamily:
    """Vendor figures of a CPU family: all-core clock (GHz) and peak FP32 FLOP per cycle
    per core (AVX-512 with two FMA units: 64; AVX2 with two FMA units: 32; 2x128-bit NEON:
    16). ``smt`` is True where one vCPU is a hyperthread (physical cores = vCPUs / 2)."""

    name: str
    ghz: float
    flops_per_cycle: int
    smt: bool = True

    @property
    def peak_per_core(self) -> float:
        return self.ghz * 1e9 * self.flops_per_cycle


# (regex on the instance type, family). Clocks are the vendors' published all-core turbo
# figures (AWS EC2 instance-type pages, Azure VM size docs, Google Cloud machine families).
CPU_FAMILIES: tuple[tuple[str, CpuFamily], ...] = (
    (r"^(ml\.)?c4\.", CpuFamily("Haswell (c4)", 3.0, 32)),
    (r"^(ml\.)?c5[dn]?\.", CpuFamily("Skylake/Cascade Lake (c5)", 3.4, 64)),
    (r"^(ml\.)?[mr]5[dn]?\.", CpuFamily("Skylake/Cascade Lake (m5/r5)", 3.1, 64)),
    (r"^(ml\.)?[cmr]6i[dn]?\.", CpuFamily("Ice Lake (6i)", 3.5, 64)),
    (r"^(ml\.)?[cmr]7i\.", CpuFamily("Sapphire Rapids (7i)", 3.2, 64)),
    (r"^(ml\.)?[cmr]6a\.", CpuFamily("EPYC Milan (6a)", 3.6, 32)),
    (r"^(ml\.)?[cmr]7a\.", CpuFamily("EPYC Genoa (7a)", 3.7, 32)),
    (r"^(ml\.)?[cmr]6g[dn]?\.", CpuFamily("Graviton2", 2.5, 16, smt=False)),
    (r"^(ml\.)?[cmr]7g[dn]?\.", CpuFamily("Graviton3", 2.6, 32, smt=False)),
    (r"^n1-", CpuFamily("Skylake/Broadwell (n1)", 2.7, 32)),
    (r"^n2-", CpuFamily("Cascade/Ice Lake (n2)", 3.4, 64)),
    (r"^n2d-", CpuFamily("EPYC Rome/Milan (n2d)", 3.3, 32)),
    (r"^c2-", CpuFamily("Cascade Lake (c2)", 3.8, 64)),
    (r"^c2d-", CpuFamily("EPYC Milan (c2d)", 3.5, 32)),
    (r"^c3-", CpuFamily("Sapphire Rapids (c3)", 3.0, 64)),
    (r"^c3d-", CpuFamily("EPYC Genoa (c3d)", 3.3, 32)),
    (r"^c4-", CpuFamily("Emerald Rapids (c4)", 3.1, 64)),
    (r"^e2-", CpuFamily("mixed (e2)", 2.8, 32)),
    (r"^t2a-", CpuFamily("Ampere Altra (t2a)", 3.0, 16, smt=False)),
    (r"(?i)^(standard_)?f\d+s?_v2$", CpuFamily("Xeon Platinum 8168/8272CL (Fsv2)", 3.4, 64)),
    (r"(?i)^(standard_)?f\d+s?$", CpuFamily("Haswell (F)", 3.1, 32)),
    (r"(?i)^(standard_)?d\d+s?_v3$", CpuFamily("Broadwell-Cascade Lake (Dv3)", 3.0, 32)),
    (r"(?i)^(standard_)?d\d+d?s?_v4$", CpuFamily("Cascade Lake (Dv4)", 3.4, 64)),
    (r"(?i)^(standard_)?d\d+d?s?_v5$", CpuFamily("Ice Lake (Dv5)", 3.5, 64)),
    (r"(?i)^(standard_)?d\d+a[d]?s?_v5$", CpuFamily("EPYC Milan (Dav5)", 3.5, 32)),
    (r"(?i)^(standard_)?d\d+pl?d?s_v5$", CpuFamily("Ampere Altra (Dpsv5)", 3.0, 16, smt=False)),
)
UNKNOWN_CPU_FACTOR = 1.5  # extra uncertainty when the target CPU family is not known


def cpu_family(instance_type: str) -> CpuFamily | None:
    """The CPU family of a cloud instance type, or None when not in the table."""
    for pattern, family in CPU_FAMILIES:
        if re.search(pattern, instance_type):
            return family
    return None


def local_cpu(cpuinfo: str | None = None) -> CpuFamily:
    """This machine's CPU from /proc/cpuinfo (clock and vector width); a generic AVX2 core
    at 2.5 GHz when it cannot be read."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    flags = set(re.findall(r"^flags\s*:\s*(.*)$", cpuinfo, re.M)[0].split()) if cpuinfo else set()
    vendor_amd = "AuthenticAMD" in cpuinfo or "AMD" in cpuinfo
    mhz = re.findall(r"^cpu MHz\s*:\s*([\d.]+)", cpuinfo, re.M)
    ghz = float(mhz[0]) / 1000 if mhz else 2.5
    if "avx512f" in flags and not vendor_amd:  # AMD Zen 4 runs AVX-512 at half width
        fpc = 64
    elif "avx2" in flags and "fma" in flags:
        fpc = 32
    elif flags:
        fpc = 16
    else:
        fpc = 32
    return CpuFamily("this machine", ghz, fpc)


def physical_cores(machine: InstanceType, family: CpuFamily | None) -> int:
    """Cores PyTorch uses by default: vCPUs / 2 where a vCPU is a hyperthread."""
    if machine.provider == "local":
        return machine.vcpus
    smt = family.smt if family is not None else True
    return max(1, machine.vcpus // 2) if smt else machine.vcpus


def fit_parallel_fraction(t_a: float, n_a: int, t_b: float, n_b: int) -> float:
    """Amdahl parallel fraction from the same step timed at ``n_a`` and ``n_b`` threads."""
    if n_a == n_b or t_a <= 0 or t_b <= 0:
        raise ValueError(f"need two thread counts and times, got {n_a}, {n_b}, {t_a}, {t_b}")
    r = t_a / t_b
    denom = r - r / n_b - 1 + 1 / n_a
    if denom == 0:
        return C.CPU_PARALLEL_FRACTION
    return min(1.0, max(0.0, (r - 1) / denom))


def _amdahl(p: float, n: int) -> float:
    return (1 - p) + p / n


def cpu_t2(sig: WorkloadSignature, batch: int, threads: int, speed: float, p: float) -> float:
    """Steady iteration on a CPU with ``threads`` cores of relative speed ``speed``."""
    fixed = min(C.CPU_FIXED_S, 0.5 * sig.t2_s)
    per_sample_1 = (sig.t2_s - fixed) / sig.batch_size / _amdahl(p, sig.threads)
    return (fixed + per_sample_1 * batch * _amdahl(p, threads)) / speed


def predict_cpu(
    sig: WorkloadSignature,
    machine: InstanceType,
    batch: int,
    threads: int | None = None,
    parallel_fraction: float | None = None,
    local_family: CpuFamily | None = None,
) -> tuple[PhaseTimes, dict[str, float], str]:
    """Phase times on a CPU-only machine (local or cloud) from a local CPU probe.

    Returns the phases, a breakdown and the kind ("same-cpu" or "cpu").
    """
    same = machine.provider == "local"
    family = None if same else cpu_family(machine.instance_type)
    n = threads or (sig.threads if same else physical_cores(machine, family))
    if same:
        speed, speed_factor, kind_factor, kind = 1.0, 1.0, C.SAME_CPU_FACTOR, "same-cpu"
    else:
        local = local_family or local_cpu()
        kind_factor, kind = C.OTHER_CPU_FACTOR, "cpu"
        if family is None:
            speed, speed_factor = 1.0, UNKNOWN_CPU_FACTOR
        else:
            ratio = family.peak_per_core / local.peak_per_core
            # Only part of a step is vector-bound: take the geometric middle of "no change"
            # and "full peak ratio", and let the interval reach both ends.
            speed = math.sqrt(ratio)
            speed_factor = math.sqrt(max(ratio, 1 / ratio))
    p = C.CPU_PARALLEL_FRACTION if parallel_fraction is None else parallel_fraction
    t2 = cpu_t2(sig, batch, n, speed, p)
    lo_p, hi_p = C.CPU_PARALLEL_FRACTION_RANGE if parallel_fraction is None else (p, p)
    alt = [cpu_t2(sig, batch, n, speed, q) for q in (lo_p, hi_p)]
    p_factor = max([t2 / a for a in alt] + [a / t2 for a in alt])
    f = combine(kind_factor, speed_factor, p_factor, sig.t2_spread)
    per_sample_ratio = (t2 / batch) / (sig.t2_s / sig.batch_size)
    v2 = (sig.v2_s or 0.0) * per_sample_ratio
    v1 = v2 + max(0.0, (sig.v1_s or 0.0) - (sig.v2_s or 0.0))
    t1 = t2 + max(0.0, sig.t1_s - sig.t2_s)
    init_factor = combine(1.5, speed_factor) if not same else 1.2
    phases = PhaseTimes(
        init=around(sig.init_s, init_factor),
        t1=around(t1, combine(f, 1.5)),
        t2=around(t2, f),
        v1=around(v1, combine(f, 1.3)),
        v2=around(v2, f),
        source="modelled",
        note=(
            f"CPU model: {n} threads (probe: {sig.threads}), parallel fraction {p:.2f}, "
            f"per-core speed x{speed:.2f} "
            f"({family.name if family else 'same CPU' if same else 'unknown CPU family'})."
        ),
    )
    breakdown = {"threads": float(n), "speed": speed, "parallel_fraction": p}
    return phases, breakdown, kind
