"""The training plan of one (machine, batch): the fastest predicted plan that fits (issue #35).

``best_forecast`` is what the scorer of ``advisor suggest`` calls for a GPU row instead of
``forecast.forecast_machine`` with one fixed plan. The plan's precision is ``--precision``'s
on that GPU (``auto``: bf16 where the GPU has it, else fp16, else fp32; a GPU without the
precision is left out, ``PrecisionLacking``); ``--plan`` fields fix the rest, and the free
ones are searched over a small set:

- the plain plan (the whole per-GPU batch in one pass, no checkpointing, no sharding) when it
  fits: every other part only adds work to the step in the model (accumulation repeats the
  forward and backward passes' launches at a smaller micro-batch, checkpointing recomputes
  the forward pass, sharding adds collective traffic), so nothing else is predicted faster;
- else, for each checkpointing (``none``, ``blocks``: offered only where ``advisor.train``
  can wrap the model's blocks, ``PlanNotRunnable``) x sharding (``none`` and, on a machine
  with several GPUs and one process per GPU, ``optimizer``, ``gradients``, ``parameters``:
  ZeRO-1/2/3, all run by ``advisor.train``), the fewest accumulation steps of 1, 2, 4, 8, ...
  whose step fits the GPU (its upper memory estimate: the plan's step traced,
  ``memory.device.machine_memory``); each is forecast and the fastest whole job is
  taken. Checkpointing is chosen only where it lowers the peak enough to pay for its
  recomputation (on a model whose blocks' inputs outweigh what they save, say fcn, it raises
  the peak and is never the fastest plan that fits).

The global batch keeps its meaning: accumulation splits each GPU's batch into micro-batches
and the epochs to the target are those of the global batch. When no plan fits, the row of
the plan that needs the least memory is returned (its text says it does not fit).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from advisor.prediction.forecast.forecast import Forecast, forecast_machine
from advisor.prediction.memory.device import device_kind, machine_memory
from advisor.prediction.step.machine_plan import auto_candidates, on_gpus, plan_on
from advisor.prediction.step.placement import place
from advisor.prediction.step.plan import (
    CHECKPOINTING,
    RUNNABLE_SHARDING,
    PlanNotRunnable,
    PrecisionLacking,
    TrainingPlan,
    searches,
)
from advisor.probes.result import ProbeResult
from advisor.providers.catalog import InstanceType

ACCUMULATION_LIMIT = 64  # most accumulation steps tried (1, 2, 4, ... 64)


def base_plan(
    machine: InstanceType, catalog: Any, precision: str, fixed: Mapping[str, Any]
) -> TrainingPlan:
    """The machine's plan before the search: ``--plan``'s fixed fields and the precision on
    its GPU; ``PrecisionLacking`` when the GPU lacks it."""
    want = str(fixed.get("precision") or precision)
    base = TrainingPlan(**{k: v for k, v in fixed.items() if k != "precision"})
    base = on_gpus(base, machine.accelerator_count) or base  # one GPU: nothing to shard
    plan, lacking = plan_on(base, want, catalog.accelerator(machine.accelerator))
    if lacking:
        raise PrecisionLacking(f"left out: {lacking}.", "use --precision auto or fp32.")
    return plan


def candidates(
    base: TrainingPlan,
    fixed: Mapping[str, Any],
    gpus: int,
    framework: str = "torch",
    strategy: str | None = None,
) -> list[TrainingPlan]:
    """The (checkpointing, sharding) variants of ``base`` the search may take; their
    accumulation is set later (the fewest steps that fit)."""
    ckpts = [fixed["checkpointing"]] if "checkpointing" in fixed else list(CHECKPOINTING)
    shards = [fixed["sharding"]] if "sharding" in fixed and gpus > 1 else ["none"]
    if "sharding" not in fixed and gpus > 1 and strategy != "dp":
        shards = list(RUNNABLE_SHARDING)
    if framework == "keras":
        ckpts, shards = ["none"], ["none"]
    return [replace(base, checkpointing=c, sharding=s) for c in ckpts for s in shards]


def best_forecast(
    probe: ProbeResult,
    machine: InstanceType,
    catalog: Any,
    batch_size: int,
    epochs: int,
    n_train: int,
    n_val: int,
    *,
    precision: str = "fp32",
    fixed: Mapping[str, Any] | None = None,
    strategy: str | None = None,
    **kw: Any,
) -> tuple[Forecast, TrainingPlan | None]:
    """The forecast of the fastest plan that fits ``machine`` at ``batch_size`` and that plan
    (None: the machine has no GPU, or it trains the plain float32 step); ``kw`` goes to
    ``forecast_machine``. ``precision`` "auto" (issue #50): the fastest of the GPU's
    precisions that fits, by the model's own numbers (``plan.auto_candidates``)."""
    fixed = dict(fixed or {})
    gpu = bool(machine.accelerator) and device_kind(machine) == "gpu"
    if precision == "auto" and "precision" not in fixed and gpu:
        spec = catalog.accelerator(machine.accelerator)
        found = [
            best_forecast(probe, machine, catalog, batch_size, epochs, n_train, n_val,
                          precision=p, fixed=fixed, strategy=strategy, **kw)
            for p in auto_candidates(spec)
        ]  # fmt: skip
        fit = [f for f in found if f[0].fits]
        return min(fit or found[-1:], key=lambda fp: _wall(fp[0]))
    store = kw.get("trace_store")

    def run(plan: TrainingPlan | None) -> Forecast:
        return forecast_machine(
            probe, machine, catalog, batch_size, epochs, n_train, n_val,
            strategy=strategy, plan=plan, **kw,
        )  # fmt: skip

    if not machine.accelerator or device_kind(machine) != "gpu":
        return run(None), None
    base = base_plan(machine, catalog, precision, fixed)
    plain = _plain(base)
    first = run(plain)
    if first.fits or first.memory_unknown or not searches(fixed):
        return first, plain
    nodes = int(kw.get("nodes", 1))  # issue #49: the batch over every GPU of every machine
    gpus = place(machine, batch_size, nodes=nodes).devices
    per_device = place(machine, batch_size, nodes=nodes).per_device
    steps = [fixed["accumulation"]] if "accumulation" in fixed else _steps(per_device)
    fitting: list[tuple[Forecast, TrainingPlan]] = []
    least: tuple[float, TrainingPlan] | None = None
    for variant in candidates(base, fixed, gpus, probe.framework, strategy):
        for n in steps:
            plan = replace(variant, accumulation=n)
            if plan.accumulation > per_device:
                break
            try:
                at = place(machine, batch_size, plan, nodes)
                memory = machine_memory(probe, machine, catalog, batch_size, store, placement=at)
            except PlanNotRunnable:  # advisor.train cannot checkpoint this model: not offered
                break
            if memory is None or memory.fits is None:
                break
            if memory.fits:
                fitting.append((run(_plain(plan)), plan))
                break
            if least is None or memory.fit.need_bytes < least[0]:
                least = (memory.fit.need_bytes, plan)
    if fitting:
        return min(fitting, key=lambda fp: _wall(fp[0]))
    if least is None:
        return first, plain
    return run(least[1]), least[1]


def _plain(plan: TrainingPlan) -> TrainingPlan | None:
    """None for the float32 plain plan (the step as traced), else ``plan``."""
    return None if plan == TrainingPlan() else plan


def _steps(per_device: int) -> list[int]:
    out, n = [], 1
    while n <= min(per_device, ACCUMULATION_LIMIT):
        out.append(n)
        n *= 2
    return out


def _wall(row: Forecast) -> float:
    return (row.job_wall_s or row.estimate.runtime).value
