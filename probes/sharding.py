"""Sharded data parallel in ``python -m advisor.train`` (issue #35), with PyTorch's own tools:

- ``sharding=optimizer`` (ZeRO-1): ``torch.distributed.optim.ZeroRedundancyOptimizer`` under
  ``DistributedDataParallel``: each process updates and keeps 1/n of the optimizer state;
- ``sharding=gradients`` (ZeRO-2) and ``sharding=parameters`` (ZeRO-3): FSDP2,
  ``torch.distributed.fsdp.fully_shard`` on each block of the model (``plan_step.blocks_of``)
  and on the model, instead of DDP. Parameters, gradients (reduce-scattered) and optimizer
  state are sharded between steps in both; ``reshard_after_forward=False`` keeps each block's
  gathered parameters from forward through backward (ZeRO-2's memory in the step: the
  parameters whole, gradients and optimizer state 1/n), ``True`` frees them after each
  block's forward and gathers them again in backward (ZeRO-3 / FSDP ``FULL_SHARD``).

Both run on the process group the launcher made (``advisor.train.device.spawn``: one process
per GPU with NCCL, or per CPU process with gloo). The optimizer is rebuilt over the sharded
parameters with the same parameter groups and options, the learning-rate scheduler follows
it, and optimizer state already loaded (a resumed checkpoint) is carried over. FSDP2 shards
contiguous parameters only: a channels-last convolution weight is made contiguous first.
"""

from __future__ import annotations

import dataclasses
from typing import Any

FSDP_SHARDING = ("gradients", "parameters")  # run with fully_shard instead of DDP


def uses_fsdp(sharding: str) -> bool:
    """Whether ``sharding`` runs under FSDP (not DDP)."""
    return sharding in FSDP_SHARDING


def zero1(setup: Any) -> Any:
    """``setup`` with its optimizer a ``ZeroRedundancyOptimizer`` over the process group
    (same class, groups and options; loaded state carried)."""
    from torch.distributed.optim import ZeroRedundancyOptimizer

    old = setup.optimizer
    groups = [dict(g) for g in old.param_groups]
    new = ZeroRedundancyOptimizer(groups, optimizer_class=type(old), **options(old))
    if old.state:
        new.load_state_dict(old.state_dict())
    return _follow(setup, new)


def fsdp(setup: Any, sharding: str, blocks: Any, mesh: Any = None) -> Any:
    """``setup`` with its model sharded by ``fully_shard`` (each module of ``blocks``, then the
    model) over every process of the group, for ``sharding`` gradients (ZeRO-2) or parameters
    (ZeRO-3), and its optimizer rebuilt over the sharded parameters. ``mesh``: the device mesh
    (default: every process of the group, on the model's device type)."""
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_optimizer_state_dict,
        set_optimizer_state_dict,
    )
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    model, old = setup.model, setup.optimizer
    for p in model.parameters():  # FSDP2 shards contiguous tensors only (not channels_last)
        if not p.is_contiguous():
            p.data = p.data.contiguous()
    names = {id(p): n for n, p in model.named_parameters()}
    full = StateDictOptions(full_state_dict=True)
    carried = get_optimizer_state_dict(model, old, options=full) if old.state else None
    device = next(model.parameters()).device.type
    if mesh is None:
        mesh = init_device_mesh(device, (dist.get_world_size(),))
    again = sharding == "parameters"
    for block in blocks if blocks is not None else ():
        fully_shard(block, mesh=mesh, reshard_after_forward=again)
    fully_shard(model, mesh=mesh, reshard_after_forward=again)
    now = dict(model.named_parameters())
    groups = [
        {**{k: v for k, v in g.items() if k != "params"},
         "params": [now[names[id(p)]] for p in g["params"]]}
        for g in old.param_groups
    ]  # fmt: skip
    new = type(old)(groups, **options(old))
    if carried is not None:
        set_optimizer_state_dict(model, new, carried, options=full)
    return _follow(setup, new)


def options(optimizer: Any) -> dict[str, Any]:
    """The optimizer's defaults its constructor takes (torch 2.13's AdamW keeps
    ``decoupled_weight_decay`` in its defaults but does not take it)."""
    import inspect

    takes = inspect.signature(type(optimizer).__init__).parameters
    return {k: v for k, v in optimizer.defaults.items() if k in takes}


def _follow(setup: Any, optimizer: Any) -> Any:
    """``setup`` with ``optimizer`` (a new setup where it is a frozen dataclass), which its
    learning-rate scheduler follows."""
    scheduler = getattr(setup, "scheduler", None)
    if scheduler is not None:
        scheduler.optimizer = optimizer
    if dataclasses.is_dataclass(setup):
        return dataclasses.replace(setup, optimizer=optimizer)  # type: ignore[type-var]
    setup.optimizer = optimizer
    return setup


def full_state(setup: Any) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """The whole model and optimizer state of a sharded run (collective: every process calls
    it; the state is complete on rank 0), and whether the optimizer state is keyed by
    parameter name (FSDP) rather than by position."""
    from torch.distributed.optim import ZeroRedundancyOptimizer

    model = getattr(setup.model, "module", setup.model)
    if isinstance(setup.optimizer, ZeroRedundancyOptimizer):
        setup.optimizer.consolidate_state_dict(to=0)
        import torch.distributed as dist

        optim = setup.optimizer.state_dict() if dist.get_rank() == 0 else {}
        return model.state_dict(), optim, False
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    weights, optim = get_state_dict(setup.model, setup.optimizer, options=options)
    return weights, optim, True


def load_by_name(model: Any, optimizer: Any, state: dict[str, Any]) -> None:
    """Load a by-name optimizer state (``full_state``'s for FSDP) into a plain optimizer."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True)
    set_optimizer_state_dict(model, optimizer, state, options=options)


def is_sharded(setup: Any) -> bool:
    """Whether ``setup``'s state is spread over the processes (ZeRO-1 or FSDP)."""
    from torch.distributed.optim import ZeroRedundancyOptimizer

    if isinstance(setup.optimizer, ZeroRedundancyOptimizer):
        return True
    return any(type(p).__name__ == "DTensor" for p in setup.model.parameters())
