"""One training step under a training plan (issue #35), as ``python -m advisor.train --plan``
runs it, with PyTorch's own tools:

- precision: ``torch.autocast`` over forward and loss in bfloat16 or float16 (float32 master
  weights and optimizer), float16 with ``torch.amp.GradScaler``; ``tf32`` sets
  ``torch.set_float32_matmul_precision("high")``;
- accumulation: the batch split into micro-batches (``torch.chunk``), each loss divided by
  their number, one optimizer step; a DDP model skips the all-reduce on all but the last
  (``no_sync``);
- checkpointed blocks: every child of the model's longest ``nn.ModuleList`` (else its longest
  ``nn.Sequential``) runs under ``torch.utils.checkpoint`` (non-reentrant), wrapped by
  PyTorch's ``checkpoint_wrapper`` (the one FSDP's ``apply_activation_checkpointing`` uses:
  its state dict keeps the model's own names, so a checkpoint resumes without the plan);
- sharding across the processes (``advisor.train.sharding``): ``optimizer`` (ZeRO-1) by
  ``ZeroRedundancyOptimizer`` under DDP, ``gradients`` (ZeRO-2) and ``parameters`` (ZeRO-3)
  by FSDP2's ``fully_shard`` on each block and the model (instead of DDP); the micro-steps
  but the last skip the gradient reduction (``set_requires_gradient_sync(False)``). One
  process has nothing to shard: the plain step runs.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any

from advisor.errors import AdvisorError
from advisor.prediction.plan import TrainingPlan

Step = Callable[[Any, Any, Any], float]


def blocks_of(model: Any) -> Any:
    """The container of the model's blocks: its longest ``nn.ModuleList`` (transformers keep
    their layers there), else its longest ``nn.Sequential`` (the model itself, say); None when
    it has no container of two or more."""
    import torch

    for kind in (torch.nn.ModuleList, torch.nn.Sequential):
        found = [m for m in model.modules() if isinstance(m, kind) and len(m) >= 2]
        if found:
            return max(found, key=len)
    return None


def checkpoint_blocks(model: Any) -> int:
    """Wrap each block of ``model`` in ``torch.utils.checkpoint``; returns how many."""
    container = blocks_of(model)
    if container is None:
        raise AdvisorError(
            "checkpointing=blocks needs a model with an nn.ModuleList or nn.Sequential of blocks.",
            "use checkpointing=none for this model.",
        )
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl,
        checkpoint_wrapper,
    )

    for i in range(len(container)):
        container[i] = checkpoint_wrapper(container[i], checkpoint_impl=CheckpointImpl.NO_REENTRANT)
    return len(container)


def _split(batch: Any, parts: int) -> list[tuple[Any, Any]]:
    import torch

    inputs, targets = batch
    return list(zip(torch.chunk(inputs, parts), torch.chunk(targets, parts), strict=True))


def prepare(setup: Any, plan: TrainingPlan, distributed: bool = False) -> Any:
    """``setup`` ready for ``plan`` (a new one where its optimizer changed): blocks checkpointed, TF32 allowed, and, on several
    processes (``distributed``), the optimizer sharded (ZeRO-1, the model in DDP already) or
    the model sharded with FSDP (ZeRO-2/3: the model not in DDP)."""
    import torch

    from advisor.train import sharding

    if plan.checkpointing == "blocks":
        checkpoint_blocks(setup.model)
    if plan.precision == "tf32":
        torch.set_float32_matmul_precision("high")
    if distributed and plan.sharding == "optimizer":
        setup = sharding.zero1(setup)
    elif distributed and sharding.uses_fsdp(plan.sharding):
        if hasattr(setup.model, "no_sync"):
            raise AdvisorError(
                f"sharding={plan.sharding} shards the model with FSDP: it must not be in DDP.",
                "distribute the model with wrap=False (advisor.train.device.distribute).",
            )
        setup = sharding.fsdp(setup, plan.sharding, blocks_of(setup.model))
    return setup


def make_step(plan: TrainingPlan, device_type: str = "cpu") -> Step:
    """``step(setup, batch, device) -> loss`` running one optimizer step under ``plan``."""
    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(plan.precision)
    scaler = torch.amp.GradScaler(device_type) if plan.precision == "fp16" else None

    def step(setup: Any, batch: Any, device: Any) -> float:
        parts = _split(batch, min(plan.accumulation, len(batch[0])))
        setup.optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for i, (x, y) in enumerate(parts):
            last = i == len(parts) - 1
            sync: Any = contextlib.nullcontext()
            if hasattr(setup.model, "set_requires_gradient_sync"):  # FSDP2
                setup.model.set_requires_gradient_sync(last)
            elif not last and hasattr(setup.model, "no_sync"):  # DDP
                sync = setup.model.no_sync()
            cast = (
                torch.autocast(device_type, dtype=dtype)
                if dtype is not None
                else contextlib.nullcontext()
            )
            with sync:
                with cast:
                    loss = setup.loss_fn(setup.model(x), y) / len(parts)
                (scaler.scale(loss) if scaler is not None else loss).backward()
            total += float(loss.detach())
        if scaler is not None:
            scaler.step(setup.optimizer)
            scaler.update()
        else:
            setup.optimizer.step()
        if not math.isfinite(total):
            from advisor.probes.framework import LossDiverged

            raise LossDiverged(f"loss became {total}")
        return total

    return step
