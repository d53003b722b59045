"""A traced float32 step rewritten as it runs under a training plan (issue #35).

The operator trace is taken on the meta device, where ``torch.autocast`` does nothing (it
applies to CUDA and CPU tensors only), so mixed precision is applied to the trace by CUDA
autocast's rules (PyTorch's "CUDA Ops that can autocast to float16" and "to float32" lists):

- matrix products and convolutions (``linear``, ``bmm``, ``conv``) of the forward and backward
  passes run in the half type: the kernel model then uses the GPU's bf16/fp16 tensor-core peak,
  and their memory traffic is halved;
- the memory-bound kernels between them (element-wise, reductions, copies, embeddings) read
  and write half-precision activations: traffic halved;
- layer norm and softmax stay float32 (autocast's float32 list);
- each step casts the float32 weights to the half type for the forward pass (autocast's
  weight cast, one copy kernel per product) and the weight gradients back to float32;
- the optimizer updates the float32 master weights (unchanged); fp16 adds the loss scaler's
  unscale-and-check pass over the gradients (``GradScaler``).

``tf32`` leaves the trace as it is and lets the kernel model price float32 matrix products at
the TF32 peak. Gradient accumulation: the micro-batch's forward and backward ``accumulation``
times, the gradients added into the kept ones after the first, and one optimizer step.
Checkpointed blocks: the forward pass runs again inside the backward pass (every forward
kernel once more; an upper bound: the loss and the head, outside the blocks, are not run
again in practice). Sharding: each GPU updates 1 / n of the optimizer state
(ZeRO-1/2/3), which divides the optimizer kernels' work by the GPU count; its communication is
priced in ``timing.accel``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from advisor.prediction.memo import Memo
from advisor.prediction.step.plan import TrainingPlan
from advisor.probes.operators.types import Operator, OperatorTrace

if TYPE_CHECKING:
    from advisor.prediction.step.traces import StepTrace

PRODUCTS = ("linear", "bmm", "conv")
FLOAT32_KINDS = ("layernorm", "softmax")  # autocast's float32 list
HALVED_KINDS = ("elementwise", "reduction", "copy", "embedding", "other")


def _half(op: Operator, dtype: str) -> Operator:
    """``op`` in the half type ``dtype`` where autocast puts it there."""
    if op.phase == "optimizer" or op.dtype.replace("torch.", "") != "float32":
        return op
    if op.kind in PRODUCTS or op.kind in HALVED_KINDS:
        return dataclasses.replace(op, dtype=dtype, bytes=op.bytes / 2)
    return op


def _casts(trace: OperatorTrace, dtype: str) -> list[Operator]:
    """Autocast's weight casts (forward, float32 -> half) and the weight gradients' casts back
    (backward), one kernel per product weight, 6 bytes per parameter each way."""
    products = sum(o.count for o in trace.operators if o.phase == "forward" and o.kind in PRODUCTS)
    if products == 0 or trace.parameters == 0:
        return []
    numel = max(1, trace.parameters // products)
    return [
        Operator(
            "copy",
            phase,
            "aten._to_copy",
            {"numel": numel},
            dtype if phase == "forward" else "float32",
            "autocast cast",
            0.0,
            6.0 * numel,
            products,
        )
        for phase in ("forward", "backward")
    ]


def _scaler(trace: OperatorTrace) -> list[Operator]:
    """GradScaler's unscale with the inf/nan check (one multi-tensor pass over the gradients:
    read and write 4 bytes each) and its scale update."""
    n = max(1, trace.parameters)
    return [
        Operator("optimizer", "optimizer", "aten._amp_foreach_non_finite_check_and_unscale_",
                 {"numel": n}, "float32", "unscale", float(n), 8.0 * n, 1),
        Operator("other", "optimizer", "aten._amp_update_scale_", {"numel": 1}, "float32",
                 "update scale", 0.0, 16.0, 1),
    ]  # fmt: skip


def _accumulated(ops: list[Operator], trace: OperatorTrace, steps: int) -> list[Operator]:
    """Forward and backward ``steps`` times, the gradient added into the kept one on every
    micro-step after the first, the optimizer once."""
    out = [op if op.phase == "optimizer" else dataclasses.replace(op, count=op.count * steps)
           for op in ops]  # fmt: skip
    if steps > 1 and trace.parameters:
        n = trace.parameters
        out.append(Operator("elementwise", "backward", "aten.add_", {"numel": n, "inputs": 2},
                            "float32", "accumulate gradient", float(n), 12.0 * n, steps - 1))  # fmt: skip
    return out


def _recomputed(ops: list[Operator]) -> list[Operator]:
    """The forward kernels once more, in the backward pass (checkpointed blocks)."""
    return [*ops, *(dataclasses.replace(op, phase="backward") for op in ops
                    if op.phase == "forward")]  # fmt: skip


def _sharded_optimizer(ops: list[Operator], devices: int) -> list[Operator]:
    """Each of ``devices`` GPUs updates 1 / devices of the parameters."""
    out = []
    for op in ops:
        if op.phase == "optimizer" and op.kind == "optimizer":
            numel = max(1, math.ceil(op.dims.get("numel", 1) / devices))
            op = dataclasses.replace(op, dims={**op.dims, "numel": numel},
                                     flops=op.flops / devices, bytes=op.bytes / devices)  # fmt: skip
        out.append(op)
    return out


# plan_trace's results by (id(trace), plan, devices), each kept with the trace it was made from
# (checked, so a reused id() never answers for another trace): a screen plans the same few
# traces for a thousand machines (issue #36's first answer).
_PLANNED: Memo[tuple[OperatorTrace, OperatorTrace]] = Memo("traces under a plan", bound=512)


def plan_trace(trace: OperatorTrace, plan: TrainingPlan, devices: int = 1) -> OperatorTrace:
    """``trace`` (one float32 step at the micro-batch) as one optimizer step under ``plan`` on
    one of ``devices`` GPUs: the rules in the module docstring. Memoised by the trace's
    identity (traces are frozen)."""
    devices = devices if plan.sharding != "none" else 1
    key = (id(trace), plan, devices)
    hit = _PLANNED.get(key)
    if hit is not None and hit[0] is trace:
        return hit[1]
    planned = _plan_trace(trace, plan, devices)
    _PLANNED.put(key, (trace, planned))
    return planned


def _plan_trace(trace: OperatorTrace, plan: TrainingPlan, devices: int) -> OperatorTrace:
    from advisor.probes.operators.torch_trace import merge

    ops = list(trace.operators)
    notes = list(trace.notes)
    if plan.amp:
        dtype = plan.half_dtype
        ops = [_half(op, dtype) for op in ops] + _casts(trace, dtype)
        if plan.precision == "fp16":
            ops += _scaler(trace)
        notes.append(f"{plan.precision} autocast applied to the trace by CUDA autocast's rules")
    if plan.checkpointing == "blocks":
        ops = _recomputed(ops)
    ops = _accumulated(ops, trace, plan.accumulation)
    if plan.sharding != "none" and devices > 1:
        ops = _sharded_optimizer(ops, devices)
    return dataclasses.replace(trace, operators=merge(ops), notes=tuple(notes))


def plan_step(step: StepTrace, plan: TrainingPlan, devices: int = 1) -> StepTrace:
    """``step`` (traced at the micro-batch) under ``plan``: its trace rewritten, what it is
    in ``how``, and the matrix products' precision for the kernel model."""
    if plan == TrainingPlan():
        return step
    return dataclasses.replace(
        step,
        trace=plan_trace(step.trace, plan, devices),
        how=f"{step.how}; plan: {plan.words(step.batch * plan.accumulation)}",
        precision=plan.precision,
    )
