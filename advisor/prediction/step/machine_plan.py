"""Which training plan each machine runs (issue #35): the precisions a GPU has (its compute
capability and its catalog row's peaks), ``--precision auto``'s candidates, a plan as it
runs on a machine's GPU count, and the machines left out because their GPU lacks the
precision asked for."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from advisor.errors import AdvisorError
from advisor.prediction.step.plan import TrainingPlan, check_precision

# The compute capability of each GPU generation's data-centre parts (NVIDIA's CUDA GPU list).
COMPUTE_CAPABILITY = {
    "kepler": 3.7, "maxwell": 5.2, "pascal": 6.0, "volta": 7.0, "turing": 7.5,
    "ampere": 8.0, "ada": 8.9, "hopper": 9.0, "blackwell": 10.0,
}  # fmt: skip
# The capability each precision needs to run fast (``needs``) and the catalog column that
# carries its peak (a GPU without that figure lacks the precision).
NEEDS = {"tf32": (8.0, "tf32_tflops"), "bf16": (8.0, "bf16_tflops"), "fp16": (6.0, "fp16_tflops")}


def capability(spec: Any) -> float | None:
    """The compute capability of a catalog accelerator's generation (None: not an NVIDIA GPU
    or a generation not listed)."""
    text = f"{getattr(spec, 'generation', '')}".lower()
    for gen, cc in COMPUTE_CAPABILITY.items():
        if gen in text:
            return cc
    return None


def lacks(spec: Any, precision: str) -> str:
    """Why the accelerator ``spec`` cannot run ``precision`` ("" when it can): no peak of that
    type in its catalog row, with its compute capability where known."""
    if precision == "fp32" or precision not in NEEDS:
        return ""
    need, column = NEEDS[precision]
    if getattr(spec, column, None):
        return ""
    cc = capability(spec)
    have = f"{spec.generation}, compute capability {cc:.1f}" if cc else str(spec.generation)
    return f"{spec.name} ({have}) has no {precision}: needs compute capability {need:.1f} or later"


def auto_precision(spec: Any) -> str:
    """The precision ``--precision auto`` runs on ``spec``: bf16 where the GPU has it (no loss
    scaling), else fp16 with loss scaling where it has fast fp16, else fp32."""
    for precision in ("bf16", "fp16"):
        if not lacks(spec, precision):
            return precision
    return "fp32"


def auto_candidates(spec: Any, half_base: bool = False) -> tuple[str, ...]:
    """The precisions ``auto`` weighs on ``spec``: the widest (tf32 where the GPU has it, else
    fp32) and the half (bf16, else fp16, where it has one). The others are never faster by
    the model's own rules: fp32 only loses tf32's faster products, and fp16 is bf16 plus
    the loss scaler's pass over the gradients, at the same memory. ``half_base``: the model
    computes in bf16 whatever the plan says (a fine-tune's bfloat16 base,
    ``search_spaces.hf.ref.holds_half_base``), so on a GPU with bf16 a wide plan would run
    the same products under another name: bf16 alone is weighed."""
    wide = "fp32" if lacks(spec, "tf32") else "tf32"
    half = auto_precision(spec)
    if half_base and half == "bf16":
        return (half,)
    return (wide,) if half == "fp32" else (wide, half)


def plan_on(
    plan: TrainingPlan | None, precision: str | None, spec: Any
) -> tuple[TrainingPlan, str]:
    """The plan a machine with accelerator ``spec`` runs for ``--precision precision`` (None:
    the plan's own) and the rest of ``plan``, and why the machine is left out ("" when it is
    not)."""
    base = plan or TrainingPlan()
    chosen = base.precision if precision is None else check_precision(precision)
    if chosen == "auto":
        chosen = auto_precision(spec)
    out = replace(base, precision=chosen) if chosen != base.precision else base
    return out, lacks(spec, chosen)


def machine_plans(
    machines: Any,
    catalog: Any,
    plan: TrainingPlan | None,
    precision: str | None,
    half_base: bool = False,
) -> tuple[dict[str, TrainingPlan | tuple[TrainingPlan, ...]], dict[str, str]]:
    """Each accelerator machine's plan (by machine key) for ``--precision`` and ``plan`` (for
    ``auto``: the plans of the precisions it weighs, ``auto_candidates`` with ``half_base``),
    and the machines left out because their GPU lacks the precision (key -> reason). CPU
    machines get no plan (they train in float32 as probed)."""
    plans: dict[str, TrainingPlan | tuple[TrainingPlan, ...]] = {}
    left_out: dict[str, str] = {}
    if plan is None and precision in (None, "fp32"):
        return plans, left_out
    for m in machines:
        if not m.accelerator:
            continue
        spec = catalog.accelerator(m.accelerator)
        chosen, reason = plan_on(on_gpus(plan, m.accelerator_count), precision, spec)
        if reason:
            left_out[m.key] = reason
        elif precision == "auto":
            # issue #50: auto is the fastest precision that fits, weighed row by row
            weighed = auto_candidates(spec, half_base)
            plans[m.key] = tuple(replace(chosen, precision=p) for p in weighed)
        else:
            plans[m.key] = chosen
    return plans, left_out


def on_gpus(plan: TrainingPlan | None, gpus: int) -> TrainingPlan | None:
    """``plan`` as it runs on ``gpus`` GPUs: one GPU has nothing to shard (``advisor.train``
    runs the plain step there), so its sharding is "none" (issue #50: "ZeRO-3 / FSDP" was
    printed for one T4)."""
    if plan is None or gpus > 1 or plan.sharding == "none":
        return plan
    return replace(plan, sharding="none")


def not_applied(plan: TrainingPlan | None, machines: Any) -> list[str]:
    """A note naming the machines where part of ``plan`` does not apply (sharding on one
    GPU), or none."""
    if plan is None or plan.sharding == "none":
        return []
    one = [m.key for m in machines if m.accelerator and m.accelerator_count == 1]
    if not one:
        return []
    return [
        f"Not applied: sharding={plan.sharding} on the one-GPU machines ({', '.join(one)}): "
        "one GPU has nothing to shard, so they run the plan without it."
    ]


def machine_plan(machine: Any, catalog: Any, precision: str) -> tuple[TrainingPlan | None, str]:
    """One machine's plan for ``--precision`` (None: a CPU, or fp32 as probed) and why it is
    left out ("" when it is not)."""
    if not machine.accelerator or precision == "fp32":
        return None, ""
    return plan_on(None, precision, catalog.accelerator(machine.accelerator))


def planned_machines(
    machines: Any,
    catalog: Any,
    plan: TrainingPlan | None,
    precision: str | None,
    half_base: bool = False,
) -> tuple[list[Any], dict[str, TrainingPlan | tuple[TrainingPlan, ...]], list[str]]:
    """The machines that can train in ``precision`` (checked), their plans by machine key, and
    a note per machine left out; an AdvisorError when none is left. ``half_base``: as
    ``auto_candidates``."""
    if precision is not None:
        check_precision(precision)
    plans, left_out = machine_plans(machines, catalog, plan, precision, half_base)
    kept = [m for m in machines if m.key not in left_out]
    applied = not_applied(plan, kept)
    if not kept:
        raise AdvisorError(
            f"No machine can train in {precision}: {'; '.join(left_out.values())}.",
            "use --precision auto (each GPU's best) or fp32, or other machines.",
        )
    return kept, plans, [*applied, *(f"Left out: {key}: {why}." for key, why in left_out.items())]
