"""The training plan of one (machine, batch): the fastest predicted plan that fits (issue #35).

``best_forecast`` is what the scorer of ``advisor suggest`` calls for a GPU row instead of
``forecast.forecast_machine`` with one fixed plan. The plan's precision is ``--precision``'s
on that GPU (``auto``: bf16 where the GPU has it, else fp16, else fp32; a GPU without the
precision is left out, ``PrecisionLacking``); ``--plan`` fields fix the rest, and the free
ones are searched over a small set:

- the plain plan (the whole per-GPU batch in one pass, no checkpointing, no sharding) when it
  fits, and no other plan is looked at: every other part only adds work to the step in the
  model (accumulation repeats the forward and backward passes' launches at a smaller
  micro-batch, checkpointing recomputes the forward pass, sharding adds collective traffic);
- else each checkpointing (``none``, ``blocks``: offered only where ``advisor.train`` can wrap the
  model's blocks, ``PlanNotRunnable``) x sharding (``none`` and, on a machine with several
  GPUs and one process per GPU, ``optimizer``, ``gradients``, ``parameters``: ZeRO-1/2/3, all
  run by ``advisor.train``) x accumulation steps of 1, 2, 4, 8, ...: a plan fits when its
  step's upper memory estimate fits the GPU (the plan's step traced,
  ``memory.device.machine_memory``). Checkpointing is chosen only where it lowers the peak
  enough to pay for its recomputation (on a model whose blocks' inputs outweigh what they
  save, say fcn, it raises the peak and is never the fastest plan that fits).

That search is branch and bound (issue #46): each variant's whole job is forecast without its
memory at one micro-step (cheap: the step's time is read from the one traced step), a bound on
the variant's time (more micro-steps are never faster, less the model's noise); the variants'
memory, a trace per plan layout (seconds for a deep model: each variant's one micro-step and
its two, which give every count), is looked at in the order of their bounds, each variant's
fewest micro-steps that fit its answer, until the next bound cannot beat the best answer: a
plan that cannot win is never traced, nor the micro-steps of a variant from the first whose
time cannot beat it. Sharding divides the state, never the activations: a sharded variant
skips the micro-steps where its unsharded sibling's traced peak, less what that level of
sharding could divide of it (``shard_floor``: ZeRO-1 only the optimizer's state, which LoRA
makes tiny), with the GPU's priors at their upper ends (``floor_high``: what a fit is decided
on), overflows the GPU: it cannot fit there, so it is not traced, even when nothing fits yet
(tracing it could only lower the figure of a row that does not fit: that row keeps the least
memory of the plans traced). No variant of a precision is traced where every variant's
parameters and optimizer state alone, as the precision's plain step holds them and less what
its sharding divides, overflow the GPU at the priors' upper ends (``state_floor``: they are
live through every plan's whole step; issue #48: one GPU for an 8B model's full
fine-tuning). And while no plan fits, the search stops where the plans left are beaten on
time and cost by a row that fits elsewhere (``outpaced``, the screen's; issue #48). Each
part a plan adds must buy a margin of predicted time (``SIMPLER``, a prior) to be advised
over the simpler plan: near-ties go to the plan with fewer parts.

The global batch keeps its meaning: accumulation splits each GPU's batch into micro-batches
and the epochs to the target are those of the global batch. When no plan fits, the row of
the plan that needs the least memory of those traced is returned (its text says it does not
fit).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from advisor.intervals import Interval
from advisor.prediction.forecast.forecast import Forecast, forecast_machine
from advisor.prediction.memory.device import device_kind, machine_memory, step_traced
from advisor.prediction.memory.model import GIB, PEAK_TERMS, StepMemory
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
from advisor.probes.sharding import uses_fsdp
from advisor.providers.catalog import InstanceType
from advisor.search_spaces.hf.ref import holds_half_base

ACCUMULATION_LIMIT = 64  # most accumulation steps tried (1, 2, 4, ... 64)
# A prior, not a measurement: each part a plan adds (a doubling of its micro-steps, the
# checkpointing, each level of sharding) must make its job predicted this much faster than
# the simpler plan to be advised over it. The model predicts such plans within a fraction of
# a percent of each other (ZeRO-1's smaller optimizer step against DDP's, a micro-batch's
# kernels), well inside its own uncertainty, where the plan with fewer parts is the one a
# user can trust to run as advised; it also spares tracing the memory of plans that would
# only tie.
SIMPLER = 0.02
SHARDING_PARTS = {"none": 0, "optimizer": 1, "gradients": 2, "parameters": 3}
MODES = ("search", "plain", "bound", "traced")  # what ``best_forecast`` does (see there)
# The traced terms (``memory.model.PEAK_TERMS``) each level of sharding divides over the GPUs:
# ZeRO-1 the optimizer's state (and its step's temporaries, over the shard), ZeRO-2 the
# gradients too, ZeRO-3 / FSDP the parameters too; never the activations or the batch.
_STATE = ("optimizer_state", "transient_optimizer")
# ``memory.model.prior_terms``' terms for a bound on a sharded step's upper estimate
# (``floor_high``): the same on any step of the GPU (NCCL's buffers left out: a shard group of
# one GPU has none), and those in proportion to the traced bytes.
FIXED_PRIORS = ("framework_fixed", "cublas_workspace", "conv_workspace")
PROPORTIONAL_PRIORS = ("allocator_reserve", "trace_margin")
SHARDED_TERMS = {
    "optimizer": _STATE,
    "gradients": (*_STATE, "gradients"),
    "parameters": (*_STATE, "gradients", "parameters"),
}


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
    nodes: int = 1,
) -> list[TrainingPlan]:
    """The (checkpointing, sharding) variants of ``base`` the search may take; their
    accumulation is set later (the fewest steps that fit). On several machines each FSDP
    variant is offered twice (issue #49): sharded over every GPU of every machine, and sharded
    within each machine, replicated across them (HSDP, ``replicate=nodes``). HSDP sends less
    over the network, and each GPU updates a larger shard of the state: the model's bounds
    order the two (HSDP first on a tie). HSDP's memory is one machine's at the per-GPU batch
    (the one-machine rows' traces serve it); where it fits and its bound is lower, the
    variants sharded over every GPU cannot beat it and are never traced."""
    ckpts = [fixed["checkpointing"]] if "checkpointing" in fixed else list(CHECKPOINTING)
    shards = [fixed["sharding"]] if "sharding" in fixed and gpus > 1 else ["none"]
    if "sharding" not in fixed and gpus > 1 and strategy != "dp":
        shards = list(RUNNABLE_SHARDING)
    if framework == "keras":
        ckpts, shards = ["none"], ["none"]
    out = [replace(base, checkpointing=c, sharding=s) for c in ckpts for s in shards]
    if nodes > 1 and "replicate" not in fixed:  # HSDP first: it wins the ties
        out = [replace(v, replicate="nodes") for v in out if uses_fsdp(v.sharding)] + out
    return out


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
    mode: str = "search",
    outpaced: Callable[[Interval], bool] | None = None,
    **kw: Any,
) -> tuple[Forecast, TrainingPlan | None]:
    """The forecast of the fastest plan that fits ``machine`` at ``batch_size`` and that plan
    (None: the machine has no GPU, or it trains the plain float32 step); ``kw`` goes to
    ``forecast_machine``. ``precision`` "auto" (issue #50): the fastest of the GPU's
    precisions that fits, by the model's own numbers (``plan.auto_candidates``); branch and
    bound (the module docstring).

    ``mode`` (issue #46, the screen's two passes): "search" (the above); "plain": the plain
    plans alone (no other plan is traced; the row does not fit when none of them does);
    "bound": the fastest plan the search may take, its memory not traced (``memory`` None) --
    a lower bound on the row's time, and so its cost, whatever plan fits; "traced": the search
    over the plans whose layout is traced already (no new trace for a plan: the report's
    several-machines hint, ``advisor.study.more_nodes``).

    ``outpaced(training)`` (the screen's, issue #48): whether a run of that on-demand training
    time on ``machine`` is beaten on time and cost by a row that fits elsewhere. While no plan
    fits, the search stops where the fastest plan left is (so is every plan left: more time,
    more cost): no row it could find would rank, and the rest are not traced."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, but got {mode!r}")
    fixed = dict(fixed or {})

    def run(plan: TrainingPlan | None, fit: bool = True) -> Forecast:
        return forecast_machine(
            probe, machine, catalog, batch_size, epochs, n_train, n_val,
            strategy=strategy, plan=plan, fit=fit, **kw,
        )  # fmt: skip

    if not machine.accelerator or device_kind(machine) != "gpu":
        return run(None), None
    spec = catalog.accelerator(machine.accelerator)
    auto = precision == "auto" and "precision" not in fixed
    weighed = auto_candidates(spec, holds_half_base(probe.workload)) if auto else (precision,)
    bases = [base_plan(machine, catalog, p, fixed) for p in weighed]
    nodes = int(kw.get("nodes", 1))  # issue #49: the batch over every GPU of every machine
    at = place(machine, batch_size, nodes=nodes)
    steps = [fixed["accumulation"]] if "accumulation" in fixed else _steps(at.per_device)
    if mode == "bound":  # each variant at its fewest micro-steps: more are never faster
        fastest = [(run(_plain(v), fit=False), _plain(v)) for b in bases
                   for v in ([b] if not searches(fixed) else
                             [replace(c, accumulation=steps[0]) for c in
                              candidates(b, fixed, at.devices, probe.framework, strategy, nodes)])]  # fmt: skip
        return min(fastest, key=lambda fp: _wall(fp[0]))
    found = [(run(_plain(b)), _plain(b)) for b in bases]  # each precision's plain plan
    fit = [fp for fp in found if fp[0].fits]
    plain_done = [f.fits or f.memory_unknown for f, _ in found]
    if all(plain_done) or not searches(fixed) or mode == "plain":  # the fastest plain plan
        return min(fit or found[-1:], key=lambda fp: _wall(fp[0]))

    def key(plan: TrainingPlan, row: Forecast | None = None) -> float:
        """The plan's predicted job wall time, its parts' margins added (``SIMPLER``)."""
        return _wall(row or run(_plain(plan), fit=False)) * (1 + SIMPLER * _parts(plan))

    variants = [replace(v, accumulation=steps[0]) for b, done in zip(bases, plain_done, strict=True)
                if not done for v in candidates(b, fixed, at.devices, probe.framework, strategy,
                                                nodes)]  # fmt: skip
    hopeless = _state_overflows(variants, found, bases, machine, batch_size, nodes)
    variants = [v for v in variants if v.precision not in hopeless]  # none of them can fit
    quickest = [run(_plain(v), fit=False) for v in variants]  # each at its fewest micro-steps
    bounds = sorted((key(v, f), i) for i, (v, f) in enumerate(zip(variants, quickest, strict=True)))
    left = _fastest_left([quickest[i] for _, i in bounds])
    best: tuple[float, TrainingPlan] | None = min(
        ((_wall(f), b) for (f, _), b in zip(found, bases, strict=True) if f.fits),
        default=None, key=lambda wp: wp[0],
    )  # fmt: skip
    least: tuple[float, TrainingPlan] | None = None
    unknown: TrainingPlan | None = None
    # unsharded plan -> (its traced step memory, the usable bytes)
    floors: dict[TrainingPlan, tuple[StepMemory, float]] = {}
    for j, (bound, i) in enumerate(bounds):
        if best is not None and bound >= best[0]:  # it cannot beat the best: not traced
            break
        if best is None and outpaced is not None and outpaced(left[j]):
            break  # the plans left are beaten on time and cost elsewhere: not traced
        for k, n in enumerate(steps):
            plan = replace(variants[i], accumulation=n)
            if n > at.per_device:
                break
            # what a sharded plan's step holds at least, from its unsharded sibling's
            sibling = floors.get(replace(plan, sharding="none", replicate="none"))
            placed = place(machine, batch_size, plan, nodes)
            needs_at_least, usable = 0.0, math.inf  # the upper estimate's bound, the GPU's bytes
            if sibling is not None and plan.sharding != "none":  # HSDP: one machine's shards
                floor = shard_floor(sibling[0], plan.sharding, placed.shards)
                needs_at_least, usable = floor_high(sibling[0], floor), sibling[1]
            if needs_at_least > usable:
                continue  # it cannot fit at these micro-steps: more micro-steps
            if best is not None and k > 0 and key(plan) >= best[0]:
                break  # its fewest micro-steps that may fit cannot win, nor can more
            if mode == "traced" and not step_traced(probe, placed, kw.get("trace_store")):
                continue
            try:
                memory = machine_memory(probe, machine, catalog, batch_size,
                                        kw.get("trace_store"), placement=placed)  # fmt: skip
            except PlanNotRunnable:  # advisor.train cannot checkpoint this model: not offered
                break
            if memory is None or memory.fits is None:  # not traceable here: shown, not searched
                unknown = unknown or plan
                break
            if plan.sharding == "none":
                floors[plan] = (memory.memory, memory.fit.have_bytes)
            if memory.fits:
                wall = bound if k == 0 else key(plan)
                if best is None or wall < best[0]:
                    best = (wall, plan)
                break
            if least is None or memory.fit.need_bytes < least[0]:
                least = (memory.fit.need_bytes, plan)
    last = (best or least or (0.0, unknown or bases[-1]))[1]
    kept = [f for (f, p), b in zip(found, bases, strict=True) if b == last and f.fits]
    row = kept[0] if kept else run(_plain(last))  # a plain row: forecast once
    nothing = best is None and least is None and unknown is None
    if nothing and last.precision in hopeless and row.memory is not None:
        plain = row.memory.fit  # nothing traced: say what rules every plan out, then the plain
        why = (f"its parameters and optimizer state with the GPU's fixed costs; the plain step "
               f"needs {plain.need_bytes / GIB:.1f}")  # fmt: skip
        ruled_out = replace(plain, reason=why, floor_bytes=hopeless[last.precision])
        row = replace(row, memory=replace(row.memory, fit=ruled_out))
    return row, _plain(last)


def _fastest_left(rows: list[Forecast]) -> list[Interval]:
    """For each position of ``rows``, the least on-demand training time from there on."""
    out: list[Interval] = []
    for row in reversed(rows):
        t = row.training.runtime if row.training is not None else row.estimate.runtime
        out.append(t if not out or t.value < out[-1].value else out[-1])
    return out[::-1]


def shard_floor(memory: StepMemory, sharding: str, shards: int) -> float:
    """A lower bound on the traced bytes at the peak of an unsharded plan's step (``memory``)
    when ``sharding`` divides its state over ``shards`` GPUs: the same moment of the sharded
    step holds every traced byte but the state that level divides (``SHARDED_TERMS``), of
    which it keeps at least 1/``shards`` (ZeRO-1's greedy partition: at least that much);
    its activations, batch and transients stay, and the collectives' buffers only add.
    Checked against the traced sharded steps (docs/plans.md)."""
    traced = [t for t in memory.terms if t.name in PEAK_TERMS.values()]
    divided = sum(t.value for t in traced if t.name in SHARDED_TERMS[sharding])
    return sum(t.value for t in traced) - divided * (1 - 1 / max(1, shards))


def _state_overflows(
    variants: list[TrainingPlan], found: list[tuple[Forecast, Any]], bases: list[TrainingPlan],
    machine: InstanceType, batch_size: int, nodes: int,
) -> dict[str, float]:  # fmt: skip
    """The precisions none of whose ``variants`` can hold its parameters and optimizer state
    on the GPU, as the precision's plain step (``found``) holds them, each variant's sharding
    dividing what it divides (``state_floor``, the priors at their upper ends: ``floor_high``),
    with the least such bytes. Only where every variant overflows: an unsharded variant
    traced bounds its sharded siblings (``shard_floor``)."""
    out = {}
    for (row, _), base in zip(found, bases, strict=True):
        plain = row.memory
        mine = [v for v in variants if v.precision == base.precision]
        if plain is None or plain.fits is None or not mine:
            continue
        least = min(
            floor_high(plain.memory, state_floor(plain.memory, v.sharding,
                                                 place(machine, batch_size, v, nodes).shards))
            for v in mine
        )  # fmt: skip
        if least > plain.fit.have_bytes:
            out[base.precision] = least
    return out


def state_floor(memory: StepMemory, sharding: str, shards: int) -> float:
    """A lower bound on the traced bytes at the peak of any plan's step at the precision of
    the plain step ``memory``: its parameters and optimizer state, live from the step's first
    op to its last whatever the plan (accumulation and checkpointing change what the passes
    hold, not these), less what ``sharding`` divides of them over ``shards`` GPUs
    (``SHARDED_TERMS``; at least 1/``shards`` of each kept)."""
    divided = SHARDED_TERMS.get(sharding, ())
    kept = 1 / max(1, shards)
    return sum(t.value * (kept if t.name in divided else 1.0) for t in memory.terms
               if t.name in ("parameters", "optimizer_state"))  # fmt: skip


def floor_high(memory: StepMemory, floor: float) -> float:
    """A lower bound on the upper memory estimate (what must fit, ``memory_fit``) of a step on
    the same GPU as ``memory``'s whose traced bytes are at least ``floor`` (``shard_floor``):
    ``floor``, the GPU's fixed priors (``FIXED_PRIORS``) and the priors in proportion to the
    traced bytes (``PROPORTIONAL_PRIORS``) at ``floor``, each at its upper end as
    ``memory`` has it; any other term left out (a bound may only be low)."""
    traced = sum(t.value for t in memory.terms if t.name in PEAK_TERMS.values())
    out = floor
    for t in memory.terms:
        if t.name in FIXED_PRIORS:
            out += t.high
        elif t.name in PROPORTIONAL_PRIORS and traced > 0:
            out += t.high * floor / traced
    return out


def _plain(plan: TrainingPlan) -> TrainingPlan | None:
    """None for the float32 plain plan (the step as traced), else ``plan`` (replicated
    across machines only where it shards: unsharded state is replicated everywhere)."""
    if plan.sharding == "none" and plan.replicate != "none":
        plan = replace(plan, replicate="none")
    return None if plan == TrainingPlan() else plan


def _parts(plan: TrainingPlan | None) -> int:
    """How many parts ``plan`` adds to the plain step (see ``SIMPLER``)."""
    if plan is None:
        return 0
    return (
        SHARDING_PARTS.get(plan.sharding, 0)
        + (plan.checkpointing != "none")
        + max(0, plan.accumulation.bit_length() - 1)
    )


def _steps(per_device: int) -> list[int]:
    out, n = [], 1
    while n <= min(per_device, ACCUMULATION_LIMIT):
        out.append(n)
        n *= 2
    return out


def _wall(row: Forecast) -> float:
    return (row.job_wall_s or row.estimate.runtime).value
