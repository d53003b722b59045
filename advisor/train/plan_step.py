"""A training setup made ready for its plan (issue #35) in ``python -m advisor.train``: blocks
checkpointed, TF32 allowed, and on several processes the state sharded
(``advisor.probes.sharding``: ZeRO-1 by ``ZeroRedundancyOptimizer`` under DDP, ZeRO-2/3 by FSDP2's
``fully_shard`` instead of DDP). The step itself, the one the memory model traces too, is
``advisor.probes.plan_step.make_step``; one process has nothing to shard: the plain step runs.
"""

from __future__ import annotations

from typing import Any

from advisor.errors import AdvisorError
from advisor.prediction.step.plan import TrainingPlan
from advisor.probes.plan_step import blocks_of, checkpoint_blocks, make_step

__all__ = ["make_step", "prepare"]


def prepare(setup: Any, plan: TrainingPlan, distributed: bool = False, mesh: Any = None) -> Any:
    """``setup`` ready for ``plan`` (a new one where its optimizer changed): blocks checkpointed, TF32 allowed, and, on several
    processes (``distributed``), the optimizer sharded (ZeRO-1, the model in DDP already) or
    the model sharded with FSDP (ZeRO-2/3: the model not in DDP) over ``mesh`` (default: every
    process; a 2-D mesh: HSDP, ``advisor.train.device.mesh``)."""
    import torch

    from advisor.probes import sharding

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
        setup = sharding.fsdp(setup, plan.sharding, blocks_of(setup.model), mesh)
    return setup
