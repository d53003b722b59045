"""One training step under a training plan: the step ``python -m advisor.train --plan`` runs and
the step the memory model traces (``advisor.probes.operators.plan_peak``), one function for
both so that what is predicted is what runs (issue #45). With PyTorch's own tools:

- precision: ``torch.autocast`` over forward and loss in bfloat16 or float16 (float32 master
  weights and optimizer), float16 with ``torch.amp.GradScaler`` (loss scaling);
- accumulation: the batch split into micro-batches (``torch.chunk``), each loss divided by
  their number, one optimizer step; a DDP model skips the all-reduce on all but the last
  (``no_sync``), an FSDP2 model the reduce-scatter (``set_requires_gradient_sync(False)``);
- checkpointed blocks: every child of the model's longest ``nn.ModuleList`` (else its longest
  ``nn.Sequential``) wrapped by PyTorch's ``checkpoint_wrapper`` (non-reentrant
  ``torch.utils.checkpoint``; FSDP's ``apply_activation_checkpointing`` uses the same wrapper,
  and its state dict keeps the model's own names, so a checkpoint resumes without the plan).

A plan is anything with ``precision``, ``accumulation`` and ``checkpointing``
(``advisor.prediction.step.plan.TrainingPlan``); sharding is set up by ``advisor.probes.sharding``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any, Protocol

from advisor.errors import AdvisorError

Step = Callable[[Any, Any, Any], float]


class StepPlan(Protocol):
    """What a step needs of a training plan."""

    @property
    def precision(self) -> str: ...

    @property
    def accumulation(self) -> int: ...

    @property
    def checkpointing(self) -> str: ...


HALF = {"bf16": "bfloat16", "fp16": "float16"}


class NoBlocks(AdvisorError):
    """``checkpointing=blocks`` on a model with no container of blocks to wrap."""


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
        raise NoBlocks(
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


def micro_batches(batch: Any, parts: int) -> list[tuple[Any, Any]]:
    """``(inputs, targets)`` split into ``parts`` micro-batches along the first dimension."""
    import torch

    inputs, targets = batch
    return list(zip(torch.chunk(inputs, parts), torch.chunk(targets, parts), strict=True))


def make_step(
    plan: StepPlan,
    device_type: str = "cpu",
    *,
    traced: bool = False,
    between: Callable[[], None] | None = None,
    keep_gradients: bool | None = None,
) -> Step:
    """``step(setup, batch, device) -> loss`` running one optimizer step under ``plan``.

    The gradients are freed before each step (``zero_grad(set_to_none=True)``), except under
    DDP with ``gradient_as_bucket_view`` (``advisor.train.device``), where they are views into
    the all-reduce buckets and are zeroed in place: freeing them would make DDP allocate new
    gradients beside its buckets every step (its docs: "the bucket view alias is destroyed
    every iteration"). ``keep_gradients`` forces either (None: decided by the model).
    ``traced``: the step runs on fake tensors for the memory model: no loss scaling (its
    memory is a scalar and an in-place unscale) and no loss read back (a fake tensor has no
    value); ``between`` is called between micro-steps (the tracker's bookkeeping)."""
    import torch

    dtype = getattr(torch, HALF[plan.precision]) if plan.precision in HALF else None
    # autocast's cache of half-precision weight copies lives until autocast exits: under
    # checkpointed blocks it would keep every block's copies through the forward pass, which
    # the recomputation frees (2 bytes a weight: GPT-3 13B's 26 GB), so it is off there
    checkpointed = plan.checkpointing != "none"
    scaler = torch.amp.GradScaler(device_type) if plan.precision == "fp16" and not traced else None

    def step(setup: Any, batch: Any, device: Any) -> float:
        parts = micro_batches(batch, min(plan.accumulation, len(batch[0])))
        keep = keep_gradients
        if keep is None:
            keep = bool(getattr(setup.model, "gradient_as_bucket_view", False))
        setup.optimizer.zero_grad(set_to_none=not keep)
        total: Any = 0.0
        for i, (x, y) in enumerate(parts):
            last = i == len(parts) - 1
            if i and between is not None:
                between()
            sync: Any = contextlib.nullcontext()
            if hasattr(setup.model, "set_requires_gradient_sync"):  # FSDP2
                setup.model.set_requires_gradient_sync(last)
            elif not last and hasattr(setup.model, "no_sync"):  # DDP
                sync = setup.model.no_sync()
            cast = (
                torch.autocast(device_type, dtype=dtype, cache_enabled=not checkpointed)
                if dtype is not None
                else contextlib.nullcontext()
            )
            with sync:
                with cast:
                    loss = setup.loss_fn(setup.model(x), y) / len(parts)
                (scaler.scale(loss) if scaler is not None else loss).backward()
            total = total + loss.detach()
        if scaler is not None:
            scaler.step(setup.optimizer)
            scaler.update()
        else:
            setup.optimizer.step()
        if traced:
            return math.nan
        value = float(total)
        if not math.isfinite(value):
            from advisor.probes.framework import LossDiverged

            raise LossDiverged(f"loss became {value}")
        return value

    return step
