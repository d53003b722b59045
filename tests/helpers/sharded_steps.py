"""Sharded training plans run for real in two CPU processes over gloo (issue #35): the worker
each process runs (``torch.multiprocessing.spawn`` needs it importable by name).

Each plan trains the same small model of residual blocks for a few steps with the plan's real
step (``advisor.train.plan_step``) and measures, in that process, the bytes it holds: its
parameters at the end of forward (what FSDP keeps gathered then), its gradients after backward
and its optimizer state after the step (local shards only)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

WIDTH, BLOCKS, BATCH, STEPS = 64, 4, 128, 20


class Blocks(torch.nn.Module):
    """Residual blocks of ``layers`` linear + ReLU layers in an ``nn.ModuleList``, then a
    head: each block saves ``layers`` activations, of which checkpointing keeps its input."""

    def __init__(self, layers: int = 2) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(*(m for _ in range(layers) for m in (torch.nn.Linear(WIDTH, WIDTH),
                                                                       torch.nn.ReLU())))
            for _ in range(BLOCKS)
        )  # fmt: skip
        self.head = torch.nn.Linear(WIDTH, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


def setup(layers: int = 2) -> Any:
    """A seeded ``Blocks`` model with Adam, as a training setup (no scheduler)."""
    torch.manual_seed(0)
    model = Blocks(layers)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    return SimpleNamespace(model=model, loss_fn=torch.nn.CrossEntropyLoss(), optimizer=opt,
                           scheduler=None)  # fmt: skip


def local_bytes(tensors: Any) -> int:
    """Bytes this process holds of ``tensors`` (a DTensor's local shard)."""
    total = 0
    for t in tensors:
        if t is None or not isinstance(t, torch.Tensor):
            continue
        local = t.to_local() if hasattr(t, "to_local") else t
        total += local.numel() * local.element_size()
    return total


def _optimizer_state(optimizer: Any) -> int:
    inner = getattr(optimizer, "optim", optimizer)  # ZeroRedundancyOptimizer's local part
    return sum(local_bytes(s.values()) for s in inner.state.values())


def run_plan(rank: int, text: str) -> dict[str, Any]:
    """Train ``setup()`` under the plan ``text`` in this process of the group; the losses
    and the bytes held."""
    from advisor.probes.sharding import uses_fsdp
    from torch.nn.parallel import DistributedDataParallel

    from advisor.prediction.step.plan import parse_plan
    from advisor.train.plan_step import make_step, prepare

    plan = parse_plan(text)
    s = setup()
    if not uses_fsdp(plan.sharding):
        s.model = DistributedDataParallel(s.model)
    s = prepare(s, plan, distributed=True)
    held: dict[str, int] = {}

    def after_forward(module: Any, args: Any, out: Any) -> None:
        held["parameters"] = local_bytes(module.parameters())

    s.model.register_forward_hook(after_forward)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(BATCH, WIDTH, generator=g)
    batch = (x, x[:, :4].argmax(dim=1))
    step = make_step(plan, "cpu")
    losses = [step(s, batch, torch.device("cpu")) for _ in range(STEPS)]
    return {
        "losses": losses,
        "parameters": held["parameters"],
        "gradients": local_bytes(p.grad for p in s.model.parameters()),
        "optimizer_state": _optimizer_state(s.optimizer),
    }


def worker(rank: int, plans: list[str], queue: Any) -> None:
    """One process of two: each plan in turn; rank 0 reports, rank 1's figures beside."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        out = {text: run_plan(rank, text) for text in plans}
        queue.put((rank, out))
        dist.barrier()  # no rank leaves while the other still talks in the group
    finally:
        dist.destroy_process_group()


def hsdp_worker(rank: int, queue: Any) -> None:
    """One of 4 processes as 2 machines x 2 (``advisor.train.device.mesh``): FSDP2 over the
    HSDP mesh; puts (rank, mesh shape, placements of a weight, local bytes, whole bytes)."""
    import torch.distributed as dist
    from advisor.probes import sharding

    from advisor.train.device import DevicePlan, mesh

    dist.init_process_group("gloo", rank=rank, world_size=4)
    plan = DevicePlan("cpu", 4, "test: 2 machines x 2", nodes=2)
    grid = mesh(plan, replicate=True)
    s = sharding.fsdp(setup(), "parameters", None, grid)
    weight = s.model.blocks[0][0].weight
    whole = WIDTH * WIDTH * weight.element_size()
    queue.put((rank, tuple(grid.shape), grid.mesh_dim_names, str(weight.placements),
               local_bytes([weight]), whole))  # fmt: skip
    dist.barrier()
    dist.destroy_process_group()
