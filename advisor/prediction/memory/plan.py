"""A step's memory per device under a training plan (issues #35, #45): the memory of the step
``python -m advisor.train`` runs under that plan.

For a PyTorch workload the plan's step is traced as it runs
(``advisor.probes.operators.plan_peak``: autocast, the micro-steps with their gradients held
across them, the checkpoint wrappers' recomputation, DDP's gradient buckets, ZeRO-1's
optimizer partition, FSDP2's sharded and gathered parameters), at two micro-batches, which
gives the peak at every micro-batch (``PeakLines``). It is traced once per workload,
hyperparameters, plan shape and data-parallel layout (``layout``), memoised in this process
(``advisor.prediction.memo``) and kept in the probe cache when one is given. Two layouts are
read from DDP's one micro-step instead (``advisor.probes.operators.ddp_lines``): its two
micro-steps (the buckets hold the gradients through both) and ZeRO-1 (DDP's step with the
optimizer over one partition).

Where the plan's step cannot be traced here (a Keras workload, whose plans are precisions
only; a user module this process cannot import, say a probe uploaded to the service), the
float32 step's memory is rewritten by rules instead (``factor_memory``), each factor a prior
that the terms say: mixed precision keeps float32 master weights and adds half the
parameters' bytes for autocast's weight copies, and its saved activations are 0.6 (0.5-0.75)
of float32's (Keras's mixed policies: 0.5); checkpointed blocks keep 0.25 (0.1-0.5) of the
activations; sharding divides the sharded state by the GPUs (ZeRO paper) plus one gathered
unit (0.1 of the parameters); accumulation keeps the gradients beside a micro-batch's
activations.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from advisor.prediction.memo import Memo
from advisor.prediction.memory.model import PEAK_TERMS, MemoryTerm, StepMemory
from advisor.prediction.step.plan import PlanNotRunnable, TrainingPlan
from advisor.probes.operators.ddp_lines import two_micro_steps, zero1_lines
from advisor.probes.operators.peak_lines import NotLinear
from advisor.probes.plan_step import NoBlocks
from advisor.search_spaces.hf.ref import holds_half_base

TRACED_SOURCE = "traced: the plan's step as advisor.train runs it"
# The rules of ``factor_memory`` (value, low, high), all priors.
AMP_ACTIVATIONS = (0.6, 0.5, 0.75)  # share of float32 saved bytes
KERAS_MIXED_ACTIVATIONS = (0.5, 0.5, 0.5)  # every layer's output in the half type (the policy)
AMP_WEIGHT_COPIES = (0.5, 0.0, 0.5)  # share of the parameters' bytes
CHECKPOINT_ACTIVATIONS = (0.25, 0.1, 0.5)  # share of the activations kept
GATHERED_UNIT = (0.1, 0.02, 0.25)  # share of the parameters gathered at once
SHARDED = {
    "optimizer": ("optimizer_state",),
    "gradients": ("optimizer_state", "gradients"),
    "parameters": ("optimizer_state", "gradients", "parameters"),
}

_LINES: Memo[Any] = Memo("plan peak lines", bound=256)


def layout(plan: TrainingPlan, devices: int) -> str:
    """What the plan's peak depends on besides the micro-batch: the precision's width, one or
    more micro-steps, checkpointing, and how the GPUs share the state ("1": one GPU, "ddp":
    replicas with DDP's buckets, "zero1x8", "gradientsx8", "parametersx8")."""
    width = "half" if plan.amp else "fp32"
    steps = "a2" if plan.accumulation > 1 else "a1"
    dp = (
        "1"
        if devices <= 1
        else ("ddp" if plan.sharding == "none" else f"{plan.sharding}x{devices}")
    )
    dp = "zero1" + dp.removeprefix("optimizer") if dp.startswith("optimizer") else dp
    return "/".join((width, steps, plan.checkpointing, dp))


def lines_key(
    workload: str, hyperparameters: dict[str, Any], plan: TrainingPlan, devices: int,
    rules: str = "cuda",
) -> str:  # fmt: skip
    """The key of a plan layout's peak lines (in this process's memo and the probe cache). On
    a CPU the half type is named: its kernels differ by type (oneDNN runs bf16 where the CPU
    has the instructions, ATen's own kernels fp16 where it has none: ``kernel_memory``)."""
    import json

    hp = json.dumps(hyperparameters, sort_keys=True) if hyperparameters else ""
    shape = layout(plan, devices)
    if rules == "cpu" and plan.amp:
        shape = shape.replace("half", plan.precision, 1)
    return f"peak|{workload}|torch|{shape}|{rules}|{hp}"


def traced_plan(workload: str, plan: TrainingPlan) -> TrainingPlan:
    """The plan whose step is traced for ``plan``: a fine-tune whose frozen base is held in
    bf16 computes in bf16 under a float32 plan too (its model's own autocast,
    ``search_spaces.hf.data.CausalLM``), so its float32 plans read the bf16 plan's trace
    rather than tracing the same step again under another name (the same tensors: a 2-block
    Llama traced under both gave the same terms in six checks, LoRA in four layouts and QLoRA
    and frozen blocks in one each, stop 63; ``tests/prediction/memory/test_plan.py``)."""
    if plan.amp or not holds_half_base(workload):
        return plan
    return dataclasses.replace(plan, precision="bf16")


def already_traced(
    workload: str, hyperparameters: dict[str, Any], plan: TrainingPlan, devices: int,
    store: Any = None,
) -> bool:  # fmt: skip
    """Whether the layout of ``plan`` on one of ``devices`` GPUs is traced already: in this
    process, in ``store`` (the probe cache) or shipped; reading it then costs no trace
    (ZeRO-1's and DDP's micro-steps are read from DDP's one micro-step: ``_read_from``)."""
    key = lines_key(workload, hyperparameters, _read_from(workload, plan, devices), devices)
    return _LINES.get(key) is not None or _kept(key, store) is not None


def _read_from(workload: str, plan: TrainingPlan, devices: int) -> TrainingPlan:
    """The plan whose traced step ``plan``'s is read from: ``traced_plan``'s, and on several
    GPUs without FSDP, DDP's one micro-step (``ddp_lines``: ZeRO-1 and two micro-steps)."""
    traced = traced_plan(workload, plan)
    if devices > 1 and traced.sharding in ("none", "optimizer"):
        return dataclasses.replace(traced, sharding="none", accumulation=1)
    return traced


def _derived(lines: Any, plan: TrainingPlan, devices: int) -> Any:
    """``lines`` traced for ``_read_from(plan)`` as ``plan``'s step on one of ``devices``."""
    if devices <= 1 or plan.sharding not in ("none", "optimizer"):
        return lines
    lines = two_micro_steps(lines) if plan.accumulation > 1 else lines
    return zero1_lines(lines, devices) if plan.sharding == "optimizer" else lines


def _kept(key: str, store: Any) -> Any:
    """The peak lines kept under ``key`` as JSON: in ``store`` (the probe cache), else shipped
    (a built-in workload's, traced once); None when neither has them."""
    from advisor.prediction.step import shipped

    getter = getattr(store, "get_data", None)
    kept = getter(key) if getter is not None else None
    return kept if kept is not None else shipped.data(key)


def traced_memory(
    workload: str,
    hyperparameters: dict[str, Any],
    per_device_batch: int,
    plan: TrainingPlan,
    devices: int = 1,
    store: Any = None,
    rules: str = "cuda",
) -> StepMemory:
    """The tensors one device holds at the peak of ``workload``'s step under ``plan`` at
    ``per_device_batch`` samples per step on one of ``devices`` GPUs; ``known=False`` with the
    reason when the plan's step cannot be traced here. ``rules``: whose autocast lists a
    mixed-precision step follows ("cuda"; "cpu" to check it against a real CPU step)."""
    from advisor.prediction.memory.model import untraceable

    micro = plan.micro_batch(per_device_batch)
    traced = _read_from(workload, plan, devices)
    key = lines_key(workload, hyperparameters, traced, devices, rules)
    try:
        lines = _LINES.get_or_make(key, lambda: _lines(key, workload, hyperparameters, traced,
                                                       devices, store, rules))  # fmt: skip
        lines = _derived(lines, plan, devices)
        held = lines.at(micro)
    except NotLinear:  # other ops at other micro-batches: traced at this one
        try:
            lines = _LINES.get_or_make(f"{key}|m{micro}", lambda: _lines(
                f"{key}|m{micro}", workload, hyperparameters, traced, devices, store, rules,
                micro))  # fmt: skip
            lines = _derived(lines, plan, devices)
            held = lines.at(micro)
        except Exception as exc:
            return untraceable(per_device_batch, exc)
    except NoBlocks as exc:  # advisor.train cannot checkpoint this model's blocks
        raise PlanNotRunnable(exc.problem, exc.fix) from None
    except Exception as exc:  # an op the fake tensors cannot run, a module not importable here
        return untraceable(per_device_batch, exc)
    if plan.accumulation > 2 and "batch" in held:  # two micro-steps traced, the batch whole
        held = {**held, "batch": round(held["batch"] * plan.accumulation / 2)}
    terms = tuple(
        MemoryTerm(PEAK_TERMS[k], float(v), float(v), float(v), TRACED_SOURCE)
        for k, v in held.items()
    )
    notes = (f"plan: {plan.words(per_device_batch)}", *lines.notes)
    return StepMemory(per_device_batch, terms, notes=notes)


def _lines(
    key: str,
    workload: str,
    hyperparameters: dict[str, Any],
    plan: TrainingPlan,
    devices: int,
    store: Any,
    rules: str,
    micro: int | None = None,
) -> Any:
    """The plan's peak lines from ``store`` (the probe cache) or shipped, else traced and kept there;
    ``micro``: the peak traced at that micro-batch alone (a line through one point)."""
    from advisor.prediction.step.traces import user_modules_importable
    from advisor.probes.operators.peak_lines import PeakLines
    from advisor.probes.operators.plan_peak import peak_at, peak_lines

    kept = _kept(key, store)
    if isinstance(kept, dict):
        try:
            return PeakLines.from_dict(kept)
        except (KeyError, TypeError, ValueError):  # an unreadable entry is traced again
            pass
    sharding = plan.sharding if devices > 1 else "none"
    with user_modules_importable():
        if micro is None:
            lines = peak_lines(workload, plan, hyperparameters, replicas=devices, rules=rules,
                               sharding=sharding)  # fmt: skip
        else:
            lines = peak_at(workload, micro, plan, hyperparameters, replicas=devices,
                            rules=rules, sharding=sharding)  # fmt: skip
    putter = getattr(store, "put_data", None)
    if putter is not None:
        putter(key, lines.to_dict())
    return lines


def _scaled(term: MemoryTerm, factor: tuple[float, float, float], why: str) -> MemoryTerm:
    v, lo, hi = factor
    return dataclasses.replace(
        term,
        value=term.value * v,
        low=term.low * min(lo, v),
        high=term.high * max(hi, v),
        source=f"{term.source}; {why}",
        prior=term.prior or not lo == v == hi,
    )


def factor_memory(
    memory: StepMemory, plan: TrainingPlan, devices: int = 1, framework: str = "torch"
) -> StepMemory:
    """``memory`` (one device's float32 step at the micro-batch) under ``plan`` on one of
    ``devices`` GPUs, by the rules of the module docstring (priors), for a step whose plan
    cannot be traced (Keras; a module not importable here)."""
    if not memory.known or plan == TrainingPlan():
        return memory
    n = max(1, devices)
    terms: list[MemoryTerm] = []
    params = next((t for t in memory.terms if t.name == "parameters"), None)
    grads = next((t for t in memory.terms if t.name == "gradients"), None)
    sharded = SHARDED.get(plan.sharding, ()) if n > 1 else ()
    for term in memory.terms:
        if term.name == "activations" and plan.amp and framework == "keras":
            policy = "mixed_bfloat16" if plan.precision == "bf16" else "mixed_float16"
            term = _scaled(term, KERAS_MIXED_ACTIVATIONS, f"Keras {policy} policy")
        elif term.name == "activations" and plan.amp:
            term = _scaled(term, AMP_ACTIVATIONS, f"{plan.precision} autocast (prior)")
        if term.name == "activations" and plan.checkpointing == "blocks":
            term = _scaled(term, CHECKPOINT_ACTIVATIONS, "checkpointed blocks (prior)")
        if term.name in sharded:
            f = 1.0 / n
            term = _scaled(term, (f, f, f), f"sharded over {n} GPUs")
        terms.append(term)
    if params is not None and plan.amp:
        v, lo, hi = (params.value * f for f in AMP_WEIGHT_COPIES)
        terms.append(MemoryTerm("autocast_weight_copies", v, lo, hi,
                                f"{plan.precision} copies of the weights (prior)", prior=True))  # fmt: skip
    if params is not None and "parameters" in sharded:
        v, lo, hi = (params.value * f for f in GATHERED_UNIT)
        terms.append(MemoryTerm("gathered_unit", v, lo, hi,
                                "one FSDP unit's parameters gathered in full (prior)", prior=True))  # fmt: skip
    if grads is None and params is not None and (plan.accumulation > 1 or n > 1):
        g = params.value / (n if "gradients" in sharded else 1)
        terms.append(MemoryTerm("gradients", g, g, g, "gradients held across the micro-steps "
                                "(or DDP's buckets): as many bytes as the parameters"))  # fmt: skip
    notes = (*memory.notes, f"plan: {plan.words()} (rules, not traced)")
    return dataclasses.replace(memory, terms=tuple(terms), notes=notes)
