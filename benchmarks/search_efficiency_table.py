"""The ground truth of ``benchmarks/search_efficiency.py``: a fixed replay table of 8 machines x
4 batch sizes for ``resnet50``, the space it is searched in, and its true optimum."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from typing import Any

from advisor.probes.result import PhaseTimes
from advisor.providers.catalog import load
from advisor.search_spaces.loader import default_space
from advisor.search_spaces.space import JointSpace, MachineFilter

from advisor.evaluation.contract import probe_duration_s
from advisor.evaluation.replay import ReplayBackend, ReplayEntry, ReplayTable
from advisor.intervals import Interval
from advisor.options import SuggestOptions, workload_info
from advisor.prediction.run.iteration_model import estimate

MODEL = "resnet50"
TARGET_SHARE = 0.30  # probe at most 30 % of the configurations ...
TARGET_SEEDS = 0.90  # ... in at least 90 % of seeds
DEFAULT_BUDGET = 1.0  # USD; the optimum is then neither the fastest machine nor the cheapest
DEFAULT_SAMPLER = "tpe"  # SuggestOptions.sampler
SLOW_SAMPLERS = ("gp", "skopt")
PROBE_ITERATIONS = 8

FLOP_PER_SAMPLE = 7.8e9  # ResNet-50 on 32x32 images, forward + backward (fixture)
DISPATCH_S = 15e-3  # ~500 ops per step x 30 us host launch
INPUT_S = 7e-6  # host input pipeline per sample
GRAD_BYTES = 94e6  # 23.5 M fp32 parameters
DDP_S = 0.5e-3
HOST_INIT_S = 20.0
CUDA_INIT_S = 2.0
SCREEN_MACHINE_SIGMA = 0.25
SCREEN_CONFIG_SIGMA = 0.08
SCREEN_FACTOR = 2.0


@dataclass(frozen=True)
class Machine:
    key: str
    snapshot: str
    efficiency: float  # of the peak below
    tf32: bool  # Ampere and later: TF32 peak, else FP32
    b_half: int  # per-GPU batch at which the GPU runs at half its saturated speed
    warmup_s: float = 2.0
    hop_s: float = 20e-6  # ring hop latency (PCIe 20 us, NVLink 8 us)
    link_efficiency: float = 0.5  # PCIe 0.5, NVLink 0.8


MACHINES = (
    Machine("ec2:p2.xlarge", "2021-02", 0.28, False, 16, warmup_s=5.0),
    Machine("ec2:p3.2xlarge", "2021-02", 0.575, False, 48, hop_s=8e-6, link_efficiency=0.8),
    Machine("ec2:p3.8xlarge", "2021-02", 0.575, False, 48, hop_s=8e-6, link_efficiency=0.8),
    Machine("ec2:g4dn.xlarge", "2026-11", 0.375, False, 32),
    Machine("ec2:g5.xlarge", "2026-11", 0.148, True, 48),
    Machine("ec2:g5.12xlarge", "2026-11", 0.148, True, 48),
    Machine("ec2:g6e.xlarge", "2026-11", 0.148, True, 96),
    Machine("ec2:p4d.24xlarge", "2026-11", 0.148, True, 96, hop_s=8e-6, link_efficiency=0.8),
)


def _phases(m: Machine, batch: int, n_val: int) -> PhaseTimes:
    """Phase times of one (machine, global batch), shaped like docs/calibration.md's model."""
    catalog = load(m.snapshot)
    inst = catalog.get(m.key)
    assert inst.accelerator is not None
    spec = catalog.accelerator(inst.accelerator)
    peak = (spec.tf32_tflops if m.tf32 and spec.tf32_tflops else spec.fp32_tflops) * 1e12
    per_sample = FLOP_PER_SAMPLE / (peak * m.efficiency)
    n = inst.accelerator_count
    b = math.ceil(batch / n)

    def device_s(samples: int, share: float) -> float:
        return max(DISPATCH_S * share, samples * per_sample * share * (1 + m.b_half / samples))

    device = device_s(b, 1.0)
    sync = 0.0
    if n > 1:
        link = spec.link_gbs * 1e9 * m.link_efficiency
        sync = (
            2 * (n - 1) / n * GRAD_BYTES / link
            + 2 * (n - 1) * m.hop_s
            + DDP_S
            + 0.05 * device * math.sqrt(2 * math.log(n))
        )
    t2 = device + b * INPUT_S + sync
    init = HOST_INIT_S + CUDA_INIT_S + (2.0 + 0.25 * n if n > 1 else 0.0)
    v2 = math.ceil(n_val / batch) * (device_s(b, 1 / 3) + b * INPUT_S)

    def iv(x: float) -> Interval:
        return Interval(x, x * 0.97, x * 1.03)

    return PhaseTimes(iv(init), iv(t2 + m.warmup_s), iv(t2), iv(v2 + 1.0), iv(v2), "measured")


def make_table(batch_sizes: tuple[int, ...], screen_seed: int | None = None) -> ReplayTable:
    """The fixture; with ``screen_seed`` the entries carry screen predictions drawn from it."""
    from advisor.search_spaces.workloads import get

    wl = get(MODEL)
    rng = random.Random(screen_seed)
    instances = []
    entries = []
    for m in MACHINES:
        instances.append(load(m.snapshot).get(m.key))
        machine_err = rng.gauss(0.0, SCREEN_MACHINE_SIGMA)
        for batch in batch_sizes:
            ph = _phases(m, batch, wl.n_val)
            rt = estimate(ph, wl.n_train, wl.n_val, wl.epochs_for(batch), batch).runtime
            pred = None
            if screen_seed is not None:
                v = rt.value * math.exp(machine_err + rng.gauss(0.0, SCREEN_CONFIG_SIGMA))
                pred = Interval(v, v / SCREEN_FACTOR, v * SCREEN_FACTOR)
            entries.append(
                ReplayEntry(
                    m.key,
                    batch,
                    rt,
                    predicted=pred,
                    phases=ph,
                    probe_s=probe_duration_s(ph, PROBE_ITERATIONS),
                )
            )
    return ReplayTable(
        tuple(instances),
        tuple(entries),
        snapshot="replay-2021-02+2026-11",
        source="benchmarks/search_efficiency.py fixture (see its docstring)",
        epochs=wl.default_epochs,
    )


def space() -> JointSpace:
    """resnet50's default space, on demand only and without this machine."""
    return replace(default_space(MODEL), machines=MachineFilter(spot=False, include_local=False))


def truth(table: ReplayTable, budget: float) -> dict[str, Any]:
    """Run time, cost and probe cost of every configuration as the study sees them."""
    sp = space()
    wl = workload_info(SuggestOptions(model=MODEL, space=sp, budget_usd=budget))
    backend = ReplayBackend(table)
    rows = {}
    for cand in backend.candidates(sp):
        for batch in sp.batch_sizes:
            ev = backend.evaluate(wl, cand, batch, {})
            assert ev.ok and ev.runtime is not None and ev.cost is not None
            rows[(cand.key, batch)] = (ev.runtime.value, ev.cost.value, ev.probe_cost_usd)
    feasible = sorted((v[0], k) for k, v in rows.items() if v[1] <= budget)
    if not feasible:
        raise SystemExit(f"no configuration fits a budget of USD {budget}")
    best = feasible[0][1]
    gap = feasible[1][0] / feasible[0][0] - 1 if len(feasible) > 1 else math.inf
    return {"rows": rows, "optimum": best, "feasible": len(feasible), "gap_to_second": gap}
