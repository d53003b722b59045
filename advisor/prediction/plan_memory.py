"""A step's memory per device under a training plan (issue #35), from the memory model's
float32 terms (``advisor.prediction.memory.step_memory`` of the step traced at the
micro-batch: accumulation keeps one micro-batch's activations, which that trace already has).

- Mixed precision (bf16/fp16 autocast): the parameters, gradients and optimizer state stay
  float32 (the master weights); autocast keeps a half-precision copy of each product's weight
  for the step (its cast cache): + half the parameters' bytes (prior range: 0, none cached,
  to 0.5); the activations saved for backward are the products' half-precision outputs
  where autocast runs in half and float32 where it does not (layer norm, softmax, the loss):
  x 0.5 to 0.75, 0.6 (prior). Keras's ``mixed_float16`` / ``mixed_bfloat16`` policies
  (``advisor.probes.keras_precision``) run every layer in the half type, so the layers'
  outputs the Keras trace sums are all half precision: x 0.5 (a layer given its own float32
  dtype would keep its output in float32; the built-in workloads have none).
- Checkpointed blocks: only each block's input is kept, and one block's activations are
  rebuilt at a time in backward: x 0.25 of the activations (prior, range 0.1 to 0.5; with L
  equal blocks it is about 2 / L of them).
- Sharding across ``devices`` GPUs (ZeRO paper, Rajbhandari et al. 2020): optimizer state
  / n (ZeRO-1), + gradients / n (ZeRO-2), + parameters / n (ZeRO-3 / FSDP) plus the one
  unit gathered in full at a time (prior: 0.1 of the parameters, range 0.02 to 0.25).

Terms the plan does not change (the GPU's fixed cost, a transient working set) are kept as
they are; each changed term names the plan in its source and is marked as a prior where a
prior factor entered.
"""

from __future__ import annotations

import dataclasses

from advisor.prediction.memory import MemoryTerm, StepMemory
from advisor.prediction.plan import TrainingPlan

AMP_ACTIVATIONS = (0.6, 0.5, 0.75)  # value, low, high: share of float32 saved bytes (prior)
KERAS_MIXED_ACTIVATIONS = (0.5, 0.5, 0.5)  # every layer's output in the half type (the policy)
AMP_WEIGHT_COPIES = (0.5, 0.0, 0.5)  # share of the parameters' bytes (prior)
CHECKPOINT_ACTIVATIONS = (0.25, 0.1, 0.5)  # share of the activations kept (prior)
GATHERED_UNIT = (0.1, 0.02, 0.25)  # share of the parameters gathered at once (prior)
SHARDED = {
    "optimizer": ("optimizer_state",),
    "gradients": ("optimizer_state", "gradients"),
    "parameters": ("optimizer_state", "gradients", "parameters"),
}


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


def plan_memory(
    memory: StepMemory, plan: TrainingPlan, devices: int = 1, framework: str = "torch"
) -> StepMemory:
    """``memory`` (one device's float32 step at the micro-batch) under ``plan`` on one of
    ``devices`` GPUs, for a ``framework`` ("torch", "keras") step: the rules of the module
    docstring."""
    if not memory.known or plan == TrainingPlan():
        return memory
    n = max(1, devices)
    terms: list[MemoryTerm] = []
    params = next((t for t in memory.terms if t.name == "parameters"), None)
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
    notes = (*memory.notes, f"plan: {plan.words()}")
    return dataclasses.replace(memory, terms=tuple(terms), notes=notes)
